// Test bindings of the CPU engine (lib/runtime): load a checkpoint, run forward / batched decode / CED
// prefill, truncate and copy states, and read the per-layer trace, so pytest can compare the engine with the
// numpy reference (tests/reference). flashkv::Error surfaces as flashkv_testing.EngineError("<code>:
// <message>").
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <flashkv/error.hpp>

#include "error_translation.hpp"
#include "runtime/cpu_engine.hpp"
#include "runtime/engram_hash.hpp"
#include "runtime/numpy_random.hpp"
#include "runtime/sequence_state.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

using runtime::CpuEngine;
using runtime::SequenceState;

struct EngineErrorTag {};
py::handle engine_error_type;

template <typename Body>
auto translated(Body&& body) {
  return testing::translated(engine_error_type, std::forward<Body>(body));
}

struct State {
  std::unique_ptr<SequenceState> state;
};

struct Engine {
  std::unique_ptr<runtime::Engine> engine;
  CpuEngine& cpu() const { return static_cast<CpuEngine&>(*engine); }
};

std::vector<int32_t> ids_of(const py::iterable& ids) {
  std::vector<int32_t> out;
  for (const py::handle id : ids) out.push_back(py::cast<int32_t>(id));
  return out;
}

py::array_t<float> logits_array(const runtime::ForwardResult& result, int64_t vocab) {
  py::array_t<float> out({result.rows, vocab});
  std::copy(result.logits.begin(), result.logits.end(), out.mutable_data());
  return out;
}

py::dict trace_dict(const runtime::ForwardTrace& trace) {
  py::dict out;
  for (const auto& [name, array] : trace.arrays) {
    if (array.kind == runtime::TraceKind::kInteger) {
      py::array_t<int64_t> values(array.shape);
      for (size_t i = 0; i < array.values.size(); ++i)
        values.mutable_data()[i] = static_cast<int64_t>(array.values[i]);
      out[py::str(name)] = values;
    } else if (array.kind == runtime::TraceKind::kBool) {
      py::array_t<bool> values(array.shape);
      for (size_t i = 0; i < array.values.size(); ++i) values.mutable_data()[i] = array.values[i] != 0;
      out[py::str(name)] = values;
    } else {
      py::array_t<float> values(array.shape);
      for (size_t i = 0; i < array.values.size(); ++i)
        values.mutable_data()[i] = static_cast<float>(array.values[i]);
      out[py::str(name)] = values;
    }
  }
  return out;
}

runtime::Numerics numerics_of(const std::string& name) {
  if (name == "clean") return runtime::Numerics::kClean;
  if (name == "faithful") return runtime::Numerics::kFaithful;
  fail(ErrorCode::kInvalidArgument, "numerics must be 'clean' or 'faithful', got '{}'", name);
}

}  // namespace

void bind_engine(py::module_& m) {
  static py::exception<EngineErrorTag> engine_error(m, "EngineError", PyExc_RuntimeError);
  engine_error_type = engine_error;

  py::class_<State>(m, "EngineState");

  py::class_<Engine>(m, "Engine")
      .def_property_readonly("vocab_size", [](const Engine& e) { return e.engine->config().vocab_size; })
      .def_property_readonly("threads", [](const Engine& e) { return e.cpu().threads(); })
      .def_property_readonly("weight_bytes", [](const Engine& e) { return e.cpu().weight_bytes(); })
      .def("new_state", [](const Engine& e) { return State{e.engine->new_state()}; })
      .def("copy_state",
           [](const Engine& e, const State& s) {
             return translated([&] { return State{e.engine->copy_state(*s.state)}; });
           })
      .def("length", [](const Engine& e, const State& s) { return e.engine->length(*s.state); })
      .def("tokens",
           [](const Engine& e, const State& s) {
             const auto tokens = e.engine->tokens(*s.state);
             return std::vector<int32_t>(tokens.begin(), tokens.end());
           })
      .def("state_bytes", [](const Engine& e, const State& s) { return e.engine->state_bytes(*s.state); })
      .def(
          "forward",
          [](const Engine& e, State& s, const py::iterable& ids, bool all_rows) {
            const std::vector<int32_t> tokens = ids_of(ids);
            const auto result = translated([&] {
              py::gil_scoped_release release;
              return e.engine->forward(*s.state, tokens,
                                       all_rows ? runtime::LogitsRows::kAll : runtime::LogitsRows::kLast);
            });
            return logits_array(result, e.engine->config().vocab_size);
          },
          py::arg("state"), py::arg("ids"), py::arg("all_rows") = false)
      .def(
          "forward_traced",
          [](const Engine& e, State& s, const py::iterable& ids, bool all_rows) {
            const std::vector<int32_t> tokens = ids_of(ids);
            runtime::ForwardTrace trace;
            const auto result = translated([&] {
              return e.cpu().forward_traced(*s.state, tokens,
                                            all_rows ? runtime::LogitsRows::kAll : runtime::LogitsRows::kLast,
                                            &trace);
            });
            return py::make_tuple(logits_array(result, e.engine->config().vocab_size), trace_dict(trace));
          },
          py::arg("state"), py::arg("ids"), py::arg("all_rows") = false)
      .def("forward_batch",
           [](const Engine& e, const std::vector<State*>& states, const py::iterable& ids) {
             const std::vector<int32_t> tokens = ids_of(ids);
             std::vector<SequenceState*> raw;
             for (State* s : states) raw.push_back(s->state.get());
             const auto results = translated([&] {
               py::gil_scoped_release release;
               return e.engine->forward_batch(raw, tokens);
             });
             py::list out;
             for (const auto& result : results)
               out.append(logits_array(result, e.engine->config().vocab_size));
             return out;
           })
      .def("prefill_ced",
           [](const Engine& e, State& s, const py::iterable& ids) {
             const std::vector<int32_t> tokens = ids_of(ids);
             const auto result = translated([&] { return e.engine->prefill_ced(*s.state, tokens); });
             return logits_array(result, e.engine->config().vocab_size);
           })
      .def("prefill_ced_traced",
           [](const Engine& e, State& s, const py::iterable& ids) {
             const std::vector<int32_t> tokens = ids_of(ids);
             runtime::ForwardTrace trace;
             const auto result =
                 translated([&] { return e.cpu().prefill_ced_traced(*s.state, tokens, &trace); });
             return py::make_tuple(logits_array(result, e.engine->config().vocab_size), trace_dict(trace));
           })
      .def("truncate", [](const Engine& e, State& s, int64_t n) {
        translated([&] { e.engine->truncate(*s.state, n); });
      });

  m.def(
      "load_cpu_engine",
      [](const std::string& dir, const std::string& numerics, int threads, int64_t rewind_margin) {
        return translated([&] {
          runtime::EngineOptions options;
          options.numerics = numerics_of(numerics);
          options.threads = threads;
          options.rewind_margin = rewind_margin;
          return Engine{runtime::load_cpu_engine(dir, options)};
        });
      },
      py::arg("dir"), py::arg("numerics") = "faithful", py::arg("threads") = 0,
      py::arg("rewind_margin") = 256);
  m.def("numpy_default_rng_integers", [](uint64_t seed, int64_t high, int count) {
    return translated([&] { return runtime::numpy_default_rng_integers(seed, high, count); });
  });
  m.def("engram_multipliers", [](int64_t compressed_vocab, int layer, int64_t max_ngram) {
    return translated([&] { return runtime::engram_multipliers(compressed_vocab, layer, max_ngram); });
  });
}

}  // namespace flashkv::testing
