// flashkv.Model: load with keyword options, config, memory, options, Model.session(), and the text methods
// (tokenize, detokenize, encode_chat) over the checkpoint's tokenizer.json.
#include <fmt/format.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

#include "bindings.hpp"
#include "callbacks.hpp"
#include "options.hpp"

namespace flashkv::python {

namespace {

Model load(const std::filesystem::path& path, const std::string& device, int threads,
           const std::string& numerics, const std::string& prefill, int64_t prefill_chunk) {
  LoadOptions options;
  options.device = parse_device(device, "Model: device");
  options.threads = threads;
  options.numerics = parse_numerics(numerics, "Model: numerics");
  options.prefill = parse_prefill(prefill, "Model: prefill");
  options.prefill_chunk = prefill_chunk;
  return without_gil([&] { return Model::load(path, options); });
}

// Model.encode_chat: the keyword arguments become an OpenAI-style request, read by chat_from_json (one parser
// for Python, the CLI and the C ABI).
std::vector<int32_t> encode_chat(const Model& model, const py::object& messages, bool thinking,
                                 const py::object& effort, const py::object& tools,
                                 const std::string& tool_choice, const py::object& response_format) {
  py::dict request;
  request["messages"] = messages;
  request["thinking"] = thinking;
  request["tool_choice"] = tool_choice;
  if (!effort.is_none()) request["reasoning_effort"] = effort;
  if (!tools.is_none()) request["tools"] = tools;
  if (!response_format.is_none()) request["response_format"] = response_format;
  const auto json = py::module_::import("json").attr("dumps")(request).cast<std::string>();
  const ChatRequest chat = chat_from_json(json);
  return model.encode_chat(chat.messages, chat.options);
}

void bind_load_options(py::module_& m) {
  py::class_<LoadOptions>(m, "LoadOptions", "The options a Model was loaded with (read-only).")
      .def_property_readonly("device", [](const LoadOptions& o) { return device_name(o.device); })
      .def_readonly("threads", &LoadOptions::threads)
      .def_property_readonly("numerics", [](const LoadOptions& o) { return numerics_name(o.numerics); })
      .def_property_readonly("prefill", [](const LoadOptions& o) { return prefill_mode_name(o.prefill); })
      .def_readonly("prefill_chunk", &LoadOptions::prefill_chunk)
      .def("__repr__", [](const LoadOptions& o) {
        return fmt::format(
            "LoadOptions(device='{}', threads={}, numerics='{}', prefill='{}', prefill_chunk={})",
            device_name(o.device), o.threads, numerics_name(o.numerics), prefill_mode_name(o.prefill),
            o.prefill_chunk);
      });
}

}  // namespace

void bind_model(py::module_& m) {
  bind_load_options(m);
  const LoadOptions defaults;
  py::class_<Model>(
      m, "Model",
      "A loaded checkpoint: immutable, shareable between threads; every Session and KVHandle keeps "
      "its weights alive.")
      .def(py::init(&load), py::arg("path"), py::kw_only(), py::arg("device") = device_name(defaults.device),
           py::arg("threads") = defaults.threads, py::arg("numerics") = numerics_name(defaults.numerics),
           py::arg("prefill") = prefill_mode_name(defaults.prefill),
           py::arg("prefill_chunk") = defaults.prefill_chunk,
           "Loads the checkpoint directory `path` (config.json + safetensors shards).")
      .def_property_readonly("config", &Model::config, py::return_value_policy::reference_internal,
                             "The checkpoint's ModelConfig.")
      .def_property_readonly("plan", &Model::plan, py::return_value_policy::reference_internal,
                             "The role of every layer (LayerPlan).")
      .def("memory", &Model::memory, "Cache and weight footprint (ModelMemory).")
      .def_property_readonly("options", &Model::options, py::return_value_policy::reference_internal,
                             "The LoadOptions of this load.")
      .def_property_readonly("vocab_size", &Model::vocab_size, "Token ids are in [0, vocab_size).")
      .def_property_readonly("max_tokens", &Model::max_tokens, "Longest sequence a session may hold.")
      .def("session", &make_py_session, py::kw_only(), py::arg("prefill_chunk") = 0,
           py::arg("prefill") = py::none(), "A new, empty Session of this model.")
      .def_property_readonly("has_tokenizer", &Model::has_tokenizer,
                             "Whether the checkpoint directory had a tokenizer.json.")
      .def(
          "tokenize",
          [](const Model& model, const std::string& text, bool allow_special) {
            return model.tokenizer().encode(text, allow_special);
          },
          py::arg("text"), py::kw_only(), py::arg("allow_special") = false,
          "Token ids of `text` (no BOS). allow_special recognises control tokens such as <｜User｜> in it.")
      .def(
          "detokenize",
          [](const Model& model, const std::vector<int32_t>& ids, bool skip_special) {
            return model.tokenizer().decode(ids, skip_special);
          },
          py::arg("ids"), py::kw_only(), py::arg("skip_special") = false,
          "Text of `ids` (U+FFFD where the bytes are not valid UTF-8).")
      .def("encode_chat", &encode_chat, py::arg("messages"), py::kw_only(), py::arg("thinking") = true,
           py::arg("effort") = py::none(), py::arg("tools") = py::none(), py::arg("tool_choice") = "auto",
           py::arg("response_format") = py::none(),
           "Token ids of the DeepSeek-V4.1 chat prompt of OpenAI-style `messages` (docs/chat.md); effort is "
           "a level name or an int 1-100.")
      .def(
          "__eq__",
          [](const Model& a, const py::object& b) {
            return py::isinstance<Model>(b) && a == b.cast<const Model&>();
          },
          py::is_operator())
      .def("__hash__", [](const Model& model) { return std::hash<const void*>()(&model.config()); })
      .def("__repr__", [](const Model& model) {
        return fmt::format("<flashkv.Model: {} layers, vocab {}, {} numerics>",
                           model.config().num_hidden_layers, model.vocab_size(),
                           numerics_name(model.options().numerics));
      });
}

}  // namespace flashkv::python
