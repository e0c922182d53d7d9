// Storage dtypes of safetensors checkpoints: the names the format uses, their byte widths, and which
// of them flashkv can load into a model.
//
// Every dtype the safetensors format defines with a whole-byte width is *recognised*: a file holding
// such a tensor opens, and the tensor can be listed and read as raw bytes. Only the *supported* ones
// (F32, F16, BF16, F8_E4M3, F8_E8M0, U8, I8; I32 and I64 for V4's integer tid2eid tables) can carry model
// weights; the tensor inventory refuses the
// others for any tensor the model uses. Sub-byte dtypes (F4, F6_*) are refused when a file is opened.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace flashkv::loader {

enum class DType {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E8M0,
  kU8,
  kI8,
  // Recognised but not supported for model tensors.
  kBool,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF64,
  kF8E5M2,
  kC64,
};

// The safetensors spelling ("F8_E4M3").
std::string_view dtype_name(DType dtype) noexcept;

// Bytes per element.
std::size_t dtype_size(DType dtype) noexcept;

// The dtype a safetensors header names, or nullopt for a name the format does not define.
std::optional<DType> parse_dtype(std::string_view name) noexcept;

// True for a name the format defines with a width below one byte (F4, F6_E2M3, F6_E3M2).
bool is_sub_byte_dtype_name(std::string_view name) noexcept;

// True for the dtypes that may hold model tensors.
bool is_supported_dtype(DType dtype) noexcept;

}  // namespace flashkv::loader
