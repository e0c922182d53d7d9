#include "loader/dtype.hpp"

#include <array>

namespace flashkv::loader {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 17> kDTypes{{
    {DType::kF32, "F32", 4},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kF8E8M0, "F8_E8M0", 1},
    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},
    {DType::kBool, "BOOL", 1},
    {DType::kU16, "U16", 2},
    {DType::kI16, "I16", 2},
    {DType::kU32, "U32", 4},
    {DType::kI32, "I32", 4},
    {DType::kU64, "U64", 8},
    {DType::kI64, "I64", 8},
    {DType::kF64, "F64", 8},
    {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kC64, "C64", 8},
}};

const DTypeInfo& info(DType dtype) noexcept {
  for (const DTypeInfo& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  return kDTypes[0];  // unreachable: every enumerator has a row
}

}  // namespace

std::string_view dtype_name(DType dtype) noexcept {
  return info(dtype).name;
}

std::size_t dtype_size(DType dtype) noexcept {
  return info(dtype).size;
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (const DTypeInfo& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

bool is_sub_byte_dtype_name(std::string_view name) noexcept {
  return name == "F4" || name == "F6_E2M3" || name == "F6_E3M2";
}

bool is_supported_dtype(DType dtype) noexcept {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E8M0:
    case DType::kU8:
    case DType::kI8:
    case DType::kI32:  // V4 ffn.gate.tid2eid (expert ids)
    case DType::kI64:
      return true;
    default:
      return false;
  }
}

}  // namespace flashkv::loader
