// flashkv.Model: load with keyword options, config, memory, options, and Model.session().
#include <fmt/format.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <flashkv/error.hpp>

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
