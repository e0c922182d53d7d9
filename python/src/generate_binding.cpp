// Session.generate in its two forms (docs/python.md): with on_token, a call that runs to the end like the C++
// Session::generate and returns a GenerateResult; without, a lazy TokenStream (token_stream.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include <flashkv/error.hpp>

#include "bindings.hpp"
#include "callbacks.hpp"
#include "options.hpp"
#include "token_ids.hpp"
#include "token_stream.hpp"

namespace flashkv::python {

namespace {

py::object generate(const py::object& self, py::handle prompt, int64_t max_tokens, py::handle stop_tokens,
                    bool stop_at_eos, float temperature, int32_t top_k, float top_p, float min_p,
                    float repetition_penalty, float presence_penalty, float frequency_penalty, uint64_t seed,
                    const py::object& on_token, const py::object& on_progress) {
  PySession& session = self.cast<PySession&>();
  GenerateOptions options;
  options.sampling = sampling_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                     frequency_penalty, seed);
  options.max_tokens = max_tokens;
  options.stop_tokens = to_token_ids(stop_tokens, "Session.generate: stop_tokens");
  options.stop_at_eos = stop_at_eos;
  std::vector<int32_t> ids = to_token_ids(prompt, "Session.generate: prompt");
  if (on_token.is_none()) {
    check_generate_arguments(session.session().model(), ids, options);
    return py::cast(TokenStream(self, std::move(ids), std::move(options), on_progress));
  }
  const SessionLock lock(session, Access::kChange, "Session.generate");
  CallbackErrors errors;
  options.on_prefill_progress = progress_callback(on_progress, errors);
  const TokenCallback on_token_call = token_callback(on_token, errors);
  GenerateResult result =
      without_gil(errors, [&] { return session.session().generate(ids, options, on_token_call); });
  return py::cast(std::move(result));
}

}  // namespace

void bind_generate(py::module_& m) {
  py::class_<GenerateResult>(m, "GenerateResult", "What Session.generate(..., on_token=...) returns.")
      .def_readonly("tokens", &GenerateResult::tokens,
                    "The generated tokens, in order (a final stop token included).")
      .def_property_readonly(
          "reason", [](const GenerateResult& result) { return stop_reason_name(result.reason); },
          "Why generation ended: 'max_tokens', 'stop_token' or 'context_full'.")
      .def("__repr__", [](const GenerateResult& result) {
        return fmt::format("GenerateResult(tokens=[{}], reason='{}')", fmt::join(result.tokens, ", "),
                           stop_reason_name(result.reason));
      });

  py::class_<TokenStream>(m, "TokenStream",
                          "Iterator of the tokens of Session.generate(...) without on_token.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &TokenStream::next)
      .def_property_readonly("tokens", &TokenStream::tokens, "The tokens yielded so far.")
      .def_property_readonly(
          "reason",
          [](const TokenStream& stream) -> py::object {
            if (!stream.reason()) return py::none();
            return py::str(stop_reason_name(*stream.reason()));
          },
          "Why generation ended ('max_tokens', 'stop_token', 'context_full'); None while it runs or after an "
          "error.");
}

void def_session_generate(py::class_<PySession>& session_class) {
  const SamplingParams defaults;
  const GenerateOptions generate_defaults;
  session_class.def(
      "generate", &generate, py::arg("prompt") = py::tuple(), py::kw_only(),
      py::arg("max_tokens") = generate_defaults.max_tokens, py::arg("stop_tokens") = py::tuple(),
      py::arg("stop_at_eos") = generate_defaults.stop_at_eos, py::arg("temperature") = defaults.temperature,
      py::arg("top_k") = defaults.top_k, py::arg("top_p") = defaults.top_p, py::arg("min_p") = defaults.min_p,
      py::arg("repetition_penalty") = defaults.repetition_penalty,
      py::arg("presence_penalty") = defaults.presence_penalty,
      py::arg("frequency_penalty") = defaults.frequency_penalty, py::arg("seed") = defaults.seed,
      py::arg("on_token") = py::none(), py::arg("on_progress") = py::none(),
      "Appends `prompt`, then samples up to max_tokens tokens. With on_token(token) (return False to "
      "cancel): "
      "runs to the end and returns a GenerateResult. Without: returns a TokenStream iterator.");
}

}  // namespace flashkv::python
