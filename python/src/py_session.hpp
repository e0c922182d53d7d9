// flashkv.Session's C++ object: a flashkv::Session made safe to share with Python threads and callbacks.
//
// The C++ Session is used by one thread at a time, and the bindings release the GIL while it computes, so two
// Python threads could otherwise run one session at once. Every binding therefore holds a SessionLock:
// - another thread's call waits (with the GIL released) until the session is free;
// - a call from inside one of this session's own callbacks (same thread, session busy) may only read
//   (logits, sample, tokens, length, kv, kv_bytes); anything that changes the session is refused with
//   flashkv::Error(kInvalidArgument), since the call in progress is in the middle of changing it;
// - while a zero-copy logits view (Session.logits(copy=False)) is alive, everything that changes the session
//   is refused, since the change would free the memory the view shows.
// Views and locks are counted with the GIL held.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pybind11/pybind11.h>

#include <flashkv/session.hpp>

namespace flashkv::python {

class PySession {
 public:
  PySession(const Model& model, const SessionOptions& options) : session_(model, options) {}
  PySession(const PySession&) = delete;
  PySession& operator=(const PySession&) = delete;

  // Only while a SessionLock is held.
  flashkv::Session& session() { return session_; }

  // Zero-copy logits views alive now (GIL held).
  int views() const { return views_; }
  void add_view() { ++views_; }
  void drop_view() { --views_; }

 private:
  friend class SessionLock;
  flashkv::Session session_;
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
  int views_ = 0;
};

// Session(model, prefill_chunk=..., prefill=...) and Model.session(...): prefill None takes the Model's.
std::unique_ptr<PySession> make_py_session(const Model& model, int64_t prefill_chunk,
                                           const std::optional<std::string>& prefill);

enum class Access {
  kRead,    // does not change the session; allowed from its own callbacks
  kChange,  // changes the session: refused inside its callbacks and while a logits view lives
  kView,    // hands out a zero-copy view: refused inside its callbacks (the call in progress would free it)
};

// Holds one session for one binding call. Construct with the GIL held; it is released while waiting.
// `what` names the call in error messages ("Session.append").
class SessionLock {
 public:
  SessionLock(PySession& session, Access access, std::string_view what);
  ~SessionLock();
  SessionLock(const SessionLock&) = delete;
  SessionLock& operator=(const SessionLock&) = delete;

 private:
  PySession& session_;
  bool reentrant_ = false;
};

// Locks several distinct sessions (flashkv.decode) in address order, so that two batches sharing sessions
// cannot deadlock. Null entries and repeats are skipped here (the C++ API refuses them with their index).
class SessionsLock {
 public:
  SessionsLock(std::span<PySession* const> sessions, std::string_view what);

 private:
  std::vector<std::unique_ptr<SessionLock>> locks_;
};

}  // namespace flashkv::python
