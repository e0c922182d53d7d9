// flashkv_testing bindings of the CPU engine's V4-Flash KV record (RecordFormat::kFp8Bf16Rope,
// lib/backend/cpu/kv_record_v4.hpp) through the Backend interface the runtime uses, so pytest can hold the
// engine's record size and values against the C++ memory report (flashkv info) and the numpy reference
// (tests/reference/formats.py) on every V4 config.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <span>

#include <flashkv/error.hpp>

#include "backend/backend.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

using backend::RecordFormat;

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// x [rows, channels] -> (records uint8 [rows, record bytes], decoded values float32 [rows, channels]).
py::tuple quantize_v4_records(const Array<float>& x, int64_t rope_dim) {
  if (x.ndim() != 2 || rope_dim < 0 || rope_dim > x.shape(1)) {
    fail(ErrorCode::kInvalidArgument,
         "quantize_v4_records: need x [rows, channels] and 0 <= rope_dim <= channels");
  }
  const int64_t rows = x.shape(0);
  const int64_t channels = x.shape(1);
  const size_t bytes = backend::record_bytes(RecordFormat::kFp8Bf16Rope, channels, rope_dim);
  Array<uint8_t> records({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(bytes)});
  Array<float> values({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(channels)});
  const std::unique_ptr<backend::Backend> cpu = backend::make_cpu_backend(1);
  cpu->quantize_rope_rows(backend::ConstMatrix{x.data(), rows, channels}, rope_dim,
                          std::span<uint8_t>(records.mutable_data(), static_cast<size_t>(records.size())),
                          backend::Matrix{values.mutable_data(), rows, channels});
  return py::make_tuple(records, values);
}

}  // namespace

void bind_v4_record(py::module_& m) {
  m.def(
      "v4_record_bytes",
      [](int64_t channels, int64_t rope_dim) {
        return backend::record_bytes(RecordFormat::kFp8Bf16Rope, channels, rope_dim);
      },
      py::arg("channels"), py::arg("rope_dim"),
      "The engine's bytes of one V4 window row / compressed entry (backend::record_bytes).");
  m.def(
      "engine_index_key_bytes",
      [](int64_t channels) { return backend::record_bytes(RecordFormat::kMxfp4, channels); },
      py::arg("channels"), "The engine's bytes of one MXFP4 index key (backend::record_bytes).");
  m.def("quantize_v4_records", &quantize_v4_records, py::arg("x"), py::arg("rope_dim"),
        "CpuBackend::quantize_rope_rows: (records uint8 [rows, bytes], decoded float32 [rows, channels]).");
}

}  // namespace flashkv::testing
