// flashkv.decode: one batched decode step over several sessions of one Model (flashkv::decode), with the
// GIL released and every session locked for the step.
#include <pybind11/stl.h>

#include <flashkv/session.hpp>

#include "bindings.hpp"
#include "callbacks.hpp"
#include "token_ids.hpp"

namespace flashkv::python {

namespace {

void decode_step(const std::vector<PySession*>& sessions, py::handle tokens) {
  const std::vector<int32_t> ids = to_token_ids(tokens, "decode: tokens");
  const SessionsLock lock(sessions, "decode");
  std::vector<Session*> batch;
  batch.reserve(sessions.size());
  for (PySession* session : sessions) batch.push_back(session == nullptr ? nullptr : &session->session());
  without_gil([&] { decode(batch, ids); });
}

}  // namespace

void bind_decode(py::module_& m) {
  m.def("decode", &decode_step, py::arg("sessions"), py::arg("tokens"),
        "Appends tokens[i] to sessions[i] for every i in one batched forward (all of one Model, each once). "
        "A refused batch changes no session.");
}

}  // namespace flashkv::python
