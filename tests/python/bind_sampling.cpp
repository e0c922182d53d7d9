// Test bindings of the sampler (lib/runtime/sampling): the filtered distribution, the draws and the
// generator, so pytest can check them against a numpy oracle written from docs/sampling.md.
// flashkv::Error surfaces as flashkv_testing.SamplingError("<code>: <message>").
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <flashkv/error.hpp>
#include <flashkv/sampling.hpp>

#include "error_translation.hpp"
#include "runtime/sampling.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

using runtime::Sampler;
using runtime::SampleRng;

struct SamplingErrorTag {};
py::handle sampling_error_type;

template <typename Body>
auto translated(Body&& body) {
  return testing::translated(sampling_error_type, std::forward<Body>(body));
}

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

std::span<const float> row_of(const FloatArray& logits) {
  if (logits.ndim() != 1) {
    fail(ErrorCode::kInvalidArgument, "bind_sampling: logits must be 1-D, got {} dims", logits.ndim());
  }
  return {logits.data(), static_cast<size_t>(logits.shape(0))};
}

Sampler make_sampler(float temperature, int32_t top_k, float top_p, float min_p, float repetition_penalty,
                     float presence_penalty, float frequency_penalty, uint64_t seed) {
  const SamplingParams params{temperature,       top_k, top_p, min_p, repetition_penalty, presence_penalty,
                              frequency_penalty, seed};  // in field order
  return translated([&] { return Sampler(params); });
}

}  // namespace

void bind_sampling(py::module_& m) {
  static py::exception<SamplingErrorTag> sampling_error(m, "SamplingError", PyExc_RuntimeError);
  sampling_error_type = sampling_error;

  py::class_<Sampler>(m, "Sampler")
      .def(py::init(&make_sampler), py::arg("temperature") = 1.0f, py::arg("top_k") = 0,
           py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f, py::arg("repetition_penalty") = 1.0f,
           py::arg("presence_penalty") = 0.0f, py::arg("frequency_penalty") = 0.0f, py::arg("seed") = 0)
      .def(
          "sample",
          [](Sampler& sampler, const FloatArray& logits, const std::vector<int32_t>& history) {
            return translated([&] { return sampler.sample(row_of(logits), history); });
          },
          py::arg("logits"), py::arg("history") = std::vector<int32_t>{})
      .def(
          "sample_many",
          [](Sampler& sampler, const FloatArray& logits, const std::vector<int32_t>& history, int64_t count) {
            return translated([&] {
              std::vector<int32_t> tokens;
              for (int64_t i = 0; i < count; ++i) tokens.push_back(sampler.sample(row_of(logits), history));
              return tokens;
            });
          },
          py::arg("logits"), py::arg("history"), py::arg("count"))
      .def(
          "probabilities",
          [](const Sampler& sampler, const FloatArray& logits, const std::vector<int32_t>& history) {
            std::vector<double> p =
                translated([&] { return sampler.probabilities(row_of(logits), history); });
            return py::array_t<double>(static_cast<py::ssize_t>(p.size()), p.data());
          },
          py::arg("logits"), py::arg("history") = std::vector<int32_t>{})
      .def("copy", [](const Sampler& sampler) { return Sampler(sampler); });

  py::class_<SampleRng>(m, "SampleRng")
      .def(py::init<uint64_t>(), py::arg("seed"))
      .def("next_u64", &SampleRng::next_u64)
      .def("next_unit", &SampleRng::next_unit);
}

}  // namespace flashkv::testing
