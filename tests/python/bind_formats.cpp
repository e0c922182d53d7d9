// flashkv_testing bindings of include/flashkv/numeric/: the scalar codecs, the KV records and the weight
// formats on numpy arrays, so pytest can compare them with ml_dtypes and tests/reference/formats.py.
// Loops run in C++ over whole arrays (one Python call per array, not per element).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <flashkv/error.hpp>
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>
#include <flashkv/numeric/weight_formats.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace py = pybind11;
namespace nm = flashkv::numeric;

namespace flashkv::testing {
namespace {

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

std::vector<py::ssize_t> shape_of(const py::array& a) {
  return {a.shape(), a.shape() + a.ndim()};
}

// Applies a scalar codec to every element, keeping the shape.
template <typename In, typename Out, typename Codec>
Array<Out> map_elements(const Array<In>& in, Codec codec) {
  Array<Out> out(shape_of(in));
  const In* src = in.data();
  Out* dst = out.mutable_data();
  for (py::ssize_t i = 0; i < in.size(); ++i) dst[i] = codec(src[i]);
  return out;
}

// Shape of an array whose last axis is replaced by `last`.
std::vector<py::ssize_t> with_last_axis(const py::array& a, py::ssize_t last) {
  std::vector<py::ssize_t> shape = shape_of(a);
  shape.back() = last;
  return shape;
}

int channels_of(const py::array& x, int block, const char* function) {
  if (x.ndim() == 0) fail(ErrorCode::kInvalidArgument, "{}: input is a scalar, need [..., C]", function);
  const py::ssize_t channels = x.shape(x.ndim() - 1);
  if (channels <= 0 || channels % block != 0 || channels > (1 << 24)) {
    fail(ErrorCode::kInvalidArgument, "{}: C = {} is not a positive multiple of {}", function, channels,
         block);
  }
  return static_cast<int>(channels);
}

using QuantizeRow = void (*)(const float*, int, uint8_t*);
using DequantizeRow = void (*)(const uint8_t*, int, float*);
using FakequantRow = void (*)(const float*, int, float*);
using RecordBytes = size_t (*)(int);

Array<uint8_t> quantize_rows(const Array<float>& x, int block, RecordBytes record_bytes, QuantizeRow quantize,
                             const char* function) {
  const int C = channels_of(x, block, function);
  const size_t bytes = record_bytes(C);
  Array<uint8_t> out(with_last_axis(x, static_cast<py::ssize_t>(bytes)));
  const py::ssize_t rows = x.size() / C;
  for (py::ssize_t r = 0; r < rows; ++r) {
    quantize(x.data() + r * C, C, out.mutable_data() + static_cast<size_t>(r) * bytes);
  }
  return out;
}

Array<float> dequantize_rows(const Array<uint8_t>& records, int C, int block, RecordBytes record_bytes,
                             DequantizeRow dequantize, const char* function) {
  if (C <= 0 || C % block != 0)
    fail(ErrorCode::kInvalidArgument, "{}: C = {} is not a positive multiple of {}", function, C, block);
  const size_t bytes = record_bytes(C);
  if (records.ndim() == 0 || records.shape(records.ndim() - 1) != static_cast<py::ssize_t>(bytes)) {
    fail(ErrorCode::kInvalidArgument, "{}: records must be [..., {}] bytes for C = {}", function, bytes, C);
  }
  Array<float> out(with_last_axis(records, C));
  const py::ssize_t rows = records.size() / static_cast<py::ssize_t>(bytes);
  for (py::ssize_t r = 0; r < rows; ++r) {
    dequantize(records.data() + static_cast<size_t>(r) * bytes, C, out.mutable_data() + r * C);
  }
  return out;
}

Array<float> fakequant_rows(const Array<float>& x, int block, FakequantRow fakequant, const char* function) {
  const int C = channels_of(x, block, function);
  Array<float> out(shape_of(x));
  for (py::ssize_t r = 0; r < x.size() / C; ++r) fakequant(x.data() + r * C, C, out.mutable_data() + r * C);
  return out;
}

// ---- weights --------------------------------------------------------------------------------------------

void require_matrix(const py::array& a, const char* what, const char* function) {
  if (a.ndim() != 2)
    fail(ErrorCode::kInvalidArgument, "{}: {} must be 2-D, got {} dims", function, what, a.ndim());
  if (a.shape(0) > (1 << 24) || a.shape(1) > (1 << 24))
    fail(ErrorCode::kInvalidArgument, "{}: {} too large", function, what);
}

void require_shape(const py::array& a, py::ssize_t rows, py::ssize_t cols, const char* what,
                   const char* function) {
  if (a.ndim() != 2 || a.shape(0) != rows || a.shape(1) != cols) {
    fail(ErrorCode::kInvalidArgument, "{}: {} must have shape ({}, {})", function, what, rows, cols);
  }
}

int dim(const py::array& a, int axis) {
  return static_cast<int>(a.shape(axis));
}

Array<float> dequantize_fp8_block32(const Array<uint8_t>& q, const Array<uint8_t>& scales) {
  require_matrix(q, "codes", "dequantize_fp8_block32");
  const int rows = dim(q, 0), cols = dim(q, 1);
  require_shape(scales, nm::weight_blocks(rows), nm::weight_blocks(cols), "scales", "dequantize_fp8_block32");
  Array<float> out({q.shape(0), q.shape(1)});
  nm::dequantize_fp8_block32(q.data(), scales.data(), rows, cols, out.mutable_data());
  return out;
}

py::tuple quantize_fp8_block32(const Array<float>& w) {
  require_matrix(w, "weights", "quantize_fp8_block32");
  const int rows = dim(w, 0), cols = dim(w, 1);
  Array<uint8_t> q({w.shape(0), w.shape(1)});
  Array<uint8_t> scales({nm::weight_blocks(rows), nm::weight_blocks(cols)});
  nm::quantize_fp8_block32(w.data(), rows, cols, q.mutable_data(), scales.mutable_data());
  return py::make_tuple(q, scales);
}

Array<float> dequantize_fp8_rows32(const Array<uint8_t>& q, const Array<uint8_t>& scales) {
  require_matrix(q, "codes", "dequantize_fp8_rows32");
  const int rows = dim(q, 0), cols = dim(q, 1);
  require_shape(scales, rows, nm::weight_blocks(cols), "scales", "dequantize_fp8_rows32");
  Array<float> out({q.shape(0), q.shape(1)});
  nm::dequantize_fp8_rows32(q.data(), scales.data(), rows, cols, out.mutable_data());
  return out;
}

py::tuple quantize_fp8_rows32(const Array<float>& w) {
  require_matrix(w, "table", "quantize_fp8_rows32");
  const int rows = dim(w, 0), cols = dim(w, 1);
  Array<uint8_t> q({w.shape(0), w.shape(1)});
  Array<uint8_t> scales({rows, nm::weight_blocks(cols)});
  nm::quantize_fp8_rows32(w.data(), rows, cols, q.mutable_data(), scales.mutable_data());
  return py::make_tuple(q, scales);
}

Array<float> dequantize_mxfp4_weight(const Array<uint8_t>& packed, const Array<uint8_t>& scales) {
  require_matrix(packed, "packed codes", "dequantize_mxfp4_weight");
  const int rows = dim(packed, 0), cols = 2 * dim(packed, 1);
  if (cols % nm::kWeightBlock != 0) {
    fail(ErrorCode::kInvalidArgument, "dequantize_mxfp4_weight: {} columns is not a multiple of 32", cols);
  }
  require_shape(scales, rows, cols / nm::kWeightBlock, "scales", "dequantize_mxfp4_weight");
  Array<float> out({rows, cols});
  nm::dequantize_mxfp4_weight(packed.data(), scales.data(), rows, cols, out.mutable_data());
  return out;
}

py::tuple quantize_mxfp4_weight(const Array<float>& w) {
  require_matrix(w, "weights", "quantize_mxfp4_weight");
  const int rows = dim(w, 0), cols = dim(w, 1);
  if (cols % nm::kWeightBlock != 0) {
    fail(ErrorCode::kInvalidArgument, "quantize_mxfp4_weight: {} columns is not a multiple of 32", cols);
  }
  Array<uint8_t> packed({rows, cols / 2});
  Array<uint8_t> scales({rows, cols / nm::kWeightBlock});
  nm::quantize_mxfp4_weight(w.data(), rows, cols, packed.mutable_data(), scales.mutable_data());
  return py::make_tuple(packed, scales);
}

void bind_scalar_codecs(py::module_& m) {
  m.def("e4m3_from_float",
        [](const Array<float>& x) { return map_elements<float, uint8_t>(x, nm::e4m3_from_float); });
  m.def("e4m3_from_float_satfinite",
        [](const Array<float>& x) { return map_elements<float, uint8_t>(x, nm::e4m3_from_float_satfinite); });
  m.def("e4m3_to_float",
        [](const Array<uint8_t>& c) { return map_elements<uint8_t, float>(c, nm::e4m3_to_float); });
  m.def("e2m1_from_float",
        [](const Array<float>& x) { return map_elements<float, uint8_t>(x, nm::e2m1_from_float); });
  m.def("e2m1_to_float",
        [](const Array<uint8_t>& c) { return map_elements<uint8_t, float>(c, nm::e2m1_to_float); });
  m.def("e8m0_from_float",
        [](const Array<float>& x) { return map_elements<float, uint8_t>(x, nm::e8m0_from_float); });
  m.def("e8m0_to_float",
        [](const Array<uint8_t>& c) { return map_elements<uint8_t, float>(c, nm::e8m0_to_float); });
  m.def("e8m0_ceil_pow2",
        [](const Array<float>& x) { return map_elements<float, uint8_t>(x, nm::e8m0_ceil_pow2); });
  m.def("bf16_from_float",
        [](const Array<float>& x) { return map_elements<float, uint16_t>(x, nm::bf16_from_float); });
  m.def("bf16_to_float",
        [](const Array<uint16_t>& c) { return map_elements<uint16_t, float>(c, nm::bf16_to_float); });
}

void bind_block_scales(py::module_& m) {
  m.def("fp8_block_scale_code", [](const Array<float>& amax) {
    return map_elements<float, uint8_t>(amax, nm::fp8_block_scale_code);
  });
  m.def("nvfp4_block_scale_code", [](const Array<float>& amax) {
    return map_elements<float, uint8_t>(amax, nm::nvfp4_block_scale_code);
  });
  m.def("mxfp4_block_scale_code", [](const Array<float>& amax) {
    return map_elements<float, uint8_t>(amax, nm::mxfp4_block_scale_code);
  });
  m.def("fp8_weight_scale_code", [](const Array<float>& amax) {
    return map_elements<float, uint8_t>(amax, nm::fp8_weight_scale_code);
  });
}

void bind_kv_records(py::module_& m) {
  m.def("fp8_row_bytes", [](int C) { return nm::fp8_row_bytes(C); });
  m.def("nvfp4_entry_bytes", [](int C) { return nm::nvfp4_entry_bytes(C); });
  m.def("mxfp4_key_bytes", [](int C) { return nm::mxfp4_key_bytes(C); });
  m.def("quantize_fp8_row", [](const Array<float>& x) {
    return quantize_rows(x, nm::kFp8RowBlock, nm::fp8_row_bytes, nm::quantize_fp8_row, "quantize_fp8_row");
  });
  m.def("dequantize_fp8_row", [](const Array<uint8_t>& r, int C) {
    return dequantize_rows(r, C, nm::kFp8RowBlock, nm::fp8_row_bytes, nm::dequantize_fp8_row,
                           "dequantize_fp8_row");
  });
  m.def("quantize_nvfp4_entry", [](const Array<float>& x) {
    return quantize_rows(x, nm::kNvfp4Block, nm::nvfp4_entry_bytes, nm::quantize_nvfp4_entry,
                         "quantize_nvfp4_entry");
  });
  m.def("dequantize_nvfp4_entry", [](const Array<uint8_t>& r, int C) {
    return dequantize_rows(r, C, nm::kNvfp4Block, nm::nvfp4_entry_bytes, nm::dequantize_nvfp4_entry,
                           "dequantize_nvfp4_entry");
  });
  m.def("quantize_mxfp4_key", [](const Array<float>& x) {
    return quantize_rows(x, nm::kMxfp4Block, nm::mxfp4_key_bytes, nm::quantize_mxfp4_key,
                         "quantize_mxfp4_key");
  });
  m.def("dequantize_mxfp4_key", [](const Array<uint8_t>& r, int C) {
    return dequantize_rows(r, C, nm::kMxfp4Block, nm::mxfp4_key_bytes, nm::dequantize_mxfp4_key,
                           "dequantize_mxfp4_key");
  });
  m.def("fakequant_fp8_row", [](const Array<float>& x) {
    return fakequant_rows(x, nm::kFp8RowBlock, nm::fakequant_fp8_row, "fakequant_fp8_row");
  });
  m.def("fakequant_nvfp4", [](const Array<float>& x) {
    return fakequant_rows(x, nm::kNvfp4Block, nm::fakequant_nvfp4, "fakequant_nvfp4");
  });
  m.def("fakequant_mxfp4", [](const Array<float>& x) {
    return fakequant_rows(x, nm::kMxfp4Block, nm::fakequant_mxfp4, "fakequant_mxfp4");
  });
}

void bind_weight_formats(py::module_& m) {
  m.def("dequantize_fp8_block32", &dequantize_fp8_block32);
  m.def("quantize_fp8_block32", &quantize_fp8_block32);
  m.def("dequantize_fp8_rows32", &dequantize_fp8_rows32);
  m.def("quantize_fp8_rows32", &quantize_fp8_rows32);
  m.def("dequantize_mxfp4_weight", &dequantize_mxfp4_weight);
  m.def("quantize_mxfp4_weight", &quantize_mxfp4_weight);
}

}  // namespace

void bind_formats(py::module_& m) {
  bind_scalar_codecs(m);
  bind_block_scales(m);
  bind_kv_records(m);
  bind_weight_formats(m);
}

}  // namespace flashkv::testing
