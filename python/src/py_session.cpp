#include "py_session.hpp"

#include <algorithm>
#include <memory>

#include <flashkv/error.hpp>

#include "options.hpp"

namespace flashkv::python {

namespace py = pybind11;

std::unique_ptr<PySession> make_py_session(const Model& model, int64_t prefill_chunk,
                                           const std::optional<std::string>& prefill) {
  SessionOptions options;
  options.prefill_chunk = prefill_chunk;
  options.prefill = parse_optional_prefill(prefill, "Session: prefill");
  return std::make_unique<PySession>(model, options);
}

SessionLock::SessionLock(PySession& session, Access access, std::string_view what) : session_(session) {
  if (session.owner_.load() == std::this_thread::get_id()) {
    if (access != Access::kRead) {
      fail(ErrorCode::kInvalidArgument,
           "{}: not allowed from inside a callback of this session's own append or generate, which is in the "
           "middle of changing it (only logits, sample, tokens, length, kv and kv_bytes are)",
           what);
    }
    reentrant_ = true;
    return;
  }
  if (!session.mutex_.try_lock()) {
    py::gil_scoped_release released;
    session.mutex_.lock();
  }
  if (access == Access::kChange && session.views() > 0) {
    session.mutex_.unlock();
    fail(ErrorCode::kInvalidArgument,
         "{}: {} zero-copy logits view(s) of this session (logits(copy=False)) are still alive and would "
         "dangle; delete them (del) before changing the session, or use logits() copies",
         what, session.views());
  }
  session.owner_.store(std::this_thread::get_id());
}

SessionLock::~SessionLock() {
  if (reentrant_) return;
  session_.owner_.store(std::thread::id{});
  session_.mutex_.unlock();
}

SessionsLock::SessionsLock(std::span<PySession* const> sessions, std::string_view what) {
  std::vector<PySession*> order(sessions.begin(), sessions.end());
  order.erase(std::remove(order.begin(), order.end(), nullptr), order.end());
  std::sort(order.begin(), order.end(), std::less<PySession*>());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  for (PySession* session : order)
    locks_.push_back(std::make_unique<SessionLock>(*session, Access::kChange, what));
}

}  // namespace flashkv::python
