#include "loader/weight_reader.hpp"

#include <climits>
#include <cstdint>
#include <cstring>

#include <fmt/ranges.h>
#include <flashkv/error.hpp>
#include <flashkv/numeric/weight_formats.hpp>

#include "loader/dtype_convert.hpp"
#include "loader/message_text.hpp"

namespace flashkv::loader {
namespace {

using Shape = std::vector<std::int64_t>;

std::uint64_t element_count(const Shape& shape) {
  std::uint64_t count = 1;
  for (const std::int64_t dim : shape) count *= static_cast<std::uint64_t>(dim);
  return count;
}

void require_shape(const TensorView& view, const Shape& expected) {
  const Shape actual(view.shape.begin(), view.shape.end());
  if (actual != expected) {
    fail(ErrorCode::kInvalidCheckpoint, "tensor {} in '{}' has shape {}, expected {}",
         quote_untrusted(view.name), view.file, actual, expected);
  }
}

int as_int(std::int64_t value, const ExpectedTensor& expected) {
  if (value > INT_MAX) {
    fail(ErrorCode::kUnsupported, "tensor {} has dimension {}, too large to dequantize in one piece",
         quote_untrusted(expected.name), value);
  }
  return static_cast<int>(value);
}

bool is_float_dtype(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

void dequantize(const Checkpoint& checkpoint, const ExpectedTensor& expected, const TensorView& weight,
                std::span<float> out) {
  const int rows = as_int(expected.shape.at(0), expected);
  const int cols = as_int(expected.shape.at(1), expected);
  require_shape(weight, stored_weight_shape(expected));
  const TensorView scale_view = checkpoint.tensor(scale_name(expected.name));
  require_shape(scale_view, scale_shape(expected));
  const std::vector<std::uint8_t> scales = read_e8m0_codes(scale_view);
  switch (expected.storage) {
    case StorageKind::kFp8Block32:
      return numeric::dequantize_fp8_block32(e4m3_codes(weight).data(), scales.data(), rows, cols,
                                             out.data());
    case StorageKind::kFp8Block128:
      return numeric::dequantize_fp8_tiles(e4m3_codes(weight).data(), scales.data(), rows, cols,
                                           static_cast<int>(config::fp8_tile(expected.storage)), out.data());
    case StorageKind::kFp8Rows32:
      return numeric::dequantize_fp8_rows32(e4m3_codes(weight).data(), scales.data(), rows, cols, out.data());
    case StorageKind::kMxfp4:
      if (cols % numeric::kWeightBlock != 0) {
        fail(ErrorCode::kInvalidCheckpoint, "MXFP4 tensor {} is {} columns wide, not a multiple of {}",
             quote_untrusted(expected.name), cols, numeric::kWeightBlock);
      }
      return numeric::dequantize_mxfp4_weight(packed_e2m1_bytes(weight).data(), scales.data(), rows, cols,
                                              out.data());
    case StorageKind::kUnquantized:
    case StorageKind::kIntegerTable:
      break;
  }
  fail(ErrorCode::kInternal, "dequantize: {} is not a quantized kind", quote_untrusted(expected.name));
}

}  // namespace

void read_weight_float32(const Checkpoint& checkpoint, const ExpectedTensor& expected, std::span<float> out) {
  if (out.size() != element_count(expected.shape)) {
    fail(ErrorCode::kInvalidArgument, "read_weight_float32: {} has {} elements, output holds {}",
         quote_untrusted(expected.name), element_count(expected.shape), out.size());
  }
  const TensorView weight = checkpoint.tensor(expected.name);
  if (expected.storage == StorageKind::kIntegerTable) {
    fail(ErrorCode::kInternal, "read_weight_float32: {} is an integer table (read_index_table)",
         quote_untrusted(expected.name));
  }
  if (expected.storage == StorageKind::kUnquantized || is_float_dtype(weight.dtype)) {
    require_shape(weight, expected.shape);
    if (!is_float_dtype(weight.dtype)) {
      fail(ErrorCode::kInvalidCheckpoint, "tensor {} in '{}' is stored as {}; expected BF16, F16 or F32",
           quote_untrusted(weight.name), weight.file, dtype_name(weight.dtype));
    }
    return read_float32(weight, out);
  }
  dequantize(checkpoint, expected, weight, out);
}

std::vector<std::int32_t> read_index_table(const Checkpoint& checkpoint, const ExpectedTensor& expected,
                                           std::int64_t limit) {
  const TensorView view = checkpoint.tensor(expected.name);
  require_shape(view, expected.shape);
  if (view.dtype != DType::kI32 && view.dtype != DType::kI64) {
    fail(ErrorCode::kInvalidCheckpoint, "tensor {} in '{}' is stored as {}; expected I32 or I64",
         quote_untrusted(view.name), view.file, dtype_name(view.dtype));
  }
  std::vector<std::int32_t> ids(view.element_count());
  for (std::uint64_t i = 0; i < ids.size(); ++i) {
    std::int64_t id = 0;
    if (view.dtype == DType::kI32) {
      std::int32_t narrow = 0;
      std::memcpy(&narrow, view.bytes.data() + i * sizeof(narrow), sizeof(narrow));
      id = narrow;
    } else {
      std::memcpy(&id, view.bytes.data() + i * sizeof(id), sizeof(id));
    }
    if (id < 0 || id >= limit) {
      fail(ErrorCode::kInvalidCheckpoint, "tensor {} in '{}': element {} is {}, outside [0, {})",
           quote_untrusted(view.name), view.file, i, id, limit);
    }
    ids[i] = static_cast<std::int32_t>(id);
  }
  return ids;
}

std::vector<float> read_weight_float32(const Checkpoint& checkpoint, const ExpectedTensor& expected) {
  std::vector<float> values(element_count(expected.shape));
  read_weight_float32(checkpoint, expected, values);
  return values;
}

}  // namespace flashkv::loader
