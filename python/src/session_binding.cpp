// flashkv.Session: append, logits, sample, rewind, kv/restore and the read-only properties; generate is in
// generate_binding.cpp. Every call holds a SessionLock (py_session.hpp) and computes with the GIL released.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <flashkv/error.hpp>

#include "bindings.hpp"
#include "callbacks.hpp"
#include "logits_array.hpp"
#include "options.hpp"
#include "token_ids.hpp"

namespace flashkv::python {

namespace {

void append(PySession& session, py::handle ids, const py::object& on_progress) {
  const std::vector<int32_t> tokens = to_token_ids(ids, "Session.append: ids");
  const SessionLock lock(session, Access::kChange, "Session.append");
  CallbackErrors errors;
  const ProgressCallback progress = progress_callback(on_progress, errors);
  without_gil(errors, [&] { session.session().append(tokens, progress); });
}

py::array_t<float> logits(const py::object& self, bool copy) {
  PySession& session = self.cast<PySession&>();
  return copy ? logits_copy(session) : logits_view(session, self);
}

int32_t sample(PySession& session, float temperature, int32_t top_k, float top_p, float min_p,
               float repetition_penalty, float presence_penalty, float frequency_penalty, uint64_t seed) {
  const SamplingParams params = sampling_params(temperature, top_k, top_p, min_p, repetition_penalty,
                                                presence_penalty, frequency_penalty, seed);
  const SessionLock lock(session, Access::kRead, "Session.sample");
  return without_gil([&] { return session.session().sample(params); });
}

void rewind(PySession& session, int64_t n) {
  const SessionLock lock(session, Access::kChange, "Session.rewind");
  without_gil([&] { session.session().rewind(n); });
}

KVHandle snapshot(PySession& session) {
  const SessionLock lock(session, Access::kRead, "Session.kv");
  return without_gil([&] { return session.session().kv(); });
}

void restore(PySession& session, const KVHandle& handle) {
  const SessionLock lock(session, Access::kChange, "Session.restore");
  without_gil([&] { session.session().restore(handle); });
}

std::vector<int32_t> tokens(PySession& session) {
  const SessionLock lock(session, Access::kRead, "Session.tokens");
  const std::span<const int32_t> held = session.session().tokens();
  return {held.begin(), held.end()};
}

int64_t length(PySession& session) {
  const SessionLock lock(session, Access::kRead, "Session.length");
  return session.session().length();
}

int64_t kv_bytes(PySession& session) {
  const SessionLock lock(session, Access::kRead, "Session.kv_bytes");
  return session.session().kv_bytes();
}

}  // namespace

void bind_session(py::module_& m) {
  const SamplingParams defaults;
  py::class_<PySession> session_class(
      m, "Session",
      "One timeline of tokens over one KV state of a Model. Calls from several threads are serialised.");
  session_class
      .def(py::init(&make_py_session), py::arg("model"), py::kw_only(), py::arg("prefill_chunk") = 0,
           py::arg("prefill") = py::none(),
           "A new, empty session. prefill_chunk 0 and prefill None take the Model's settings.")
      .def_property_readonly(
          "model", [](PySession& session) { return session.session().model(); }, "The Model of the session.")
      .def("append", &append, py::arg("ids"), py::kw_only(), py::arg("on_progress") = py::none(),
           "Runs token ids through the model (prefill in chunks); on_progress(done, total) after each chunk, "
           "return False to cancel.")
      .def("logits", &logits, py::kw_only(), py::arg("copy") = true,
           "The float32 logits predicting the next token. copy=False: a read-only zero-copy view that blocks "
           "every change of the session while it lives.")
      .def("sample", &sample, py::kw_only(), py::arg("temperature") = defaults.temperature,
           py::arg("top_k") = defaults.top_k, py::arg("top_p") = defaults.top_p,
           py::arg("min_p") = defaults.min_p, py::arg("repetition_penalty") = defaults.repetition_penalty,
           py::arg("presence_penalty") = defaults.presence_penalty,
           py::arg("frequency_penalty") = defaults.frequency_penalty, py::arg("seed") = defaults.seed,
           "Draws the next token from logits() without appending it (temperature 0: greedy).")
      .def("rewind", &rewind, py::arg("n"), "Drops the last n tokens, exactly.")
      .def("kv", &snapshot, "An immutable snapshot of the session's KV state.")
      .def("restore", &restore, py::arg("kv"),
           "Replaces the session's state with a snapshot of the same Model.")
      .def_property_readonly("tokens", &tokens, "The token ids held, oldest first (a copy).")
      .def_property_readonly("length", &length, "Number of tokens held.")
      .def("__len__", &length)
      .def_property_readonly("kv_bytes", &kv_bytes, "Bytes of KV state held now.")
      .def("__repr__",
           [](PySession& session) { return fmt::format("<flashkv.Session of {} tokens>", length(session)); });
  def_session_generate(session_class);
}

}  // namespace flashkv::python
