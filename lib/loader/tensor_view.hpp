// A non-owning, typed view of one tensor's bytes inside a mapped checkpoint file.
//
// Lifetime: every pointer in a view (name, shape, bytes) points into the SafetensorsFile (or the
// Checkpoint holding it) that produced the view, and is valid exactly as long as that object, or the
// object it was moved into, lives. Views are cheap to copy.
// Alignment: `bytes` starts wherever the file put the tensor, which need not be aligned for the dtype;
// read elements with std::memcpy (the decode helpers in dtype_convert.hpp do) or check alignment.
// Byte order: little-endian, as the safetensors format defines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "loader/dtype.hpp"

namespace flashkv::loader {

struct TensorView {
  std::string_view name;
  DType dtype = DType::kF32;
  std::span<const std::int64_t> shape;  // torch order: [out, in] for a weight matrix
  std::span<const std::byte> bytes;     // exactly element_count() * dtype_size(dtype) bytes
  std::string_view file;                // the file holding it, for messages and `flashkv info`

  std::uint64_t element_count() const noexcept { return bytes.size() / dtype_size(dtype); }
};

}  // namespace flashkv::loader
