// Reading and writing the size-prefixed structs and (buffer, count) arrays of the C ABI.
//
// Input structs: `struct_size` says how much of the layout the caller knows. Smaller than the first
// published layout is a caller bug; larger than this library's layout means the caller was built against a
// newer header, whose extra fields this library cannot honour, so it refuses rather than ignore them.
// Output structs: the library writes the prefix both sides know and reports its length in struct_size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include <flashkv/error.hpp>

namespace flashkv::capi {

// Copies the caller's struct over `defaults` (the library's full layout) and returns it.
template <typename T>
T read_struct(const T& in, T defaults, size_t first_layout_size, const char* name) {
  if (in.struct_size < first_layout_size) {
    fail(ErrorCode::kInvalidArgument,
         "{}.struct_size is {}, smaller than the smallest layout ({} bytes): fill it with its _init function",
         name, in.struct_size, first_layout_size);
  }
  if (in.struct_size > sizeof(T)) {
    fail(ErrorCode::kUnsupported,
         "{}.struct_size is {} but this libflashkv knows {} bytes: the caller was built against a newer "
         "flashkv.h",
         name, in.struct_size, sizeof(T));
  }
  std::memcpy(&defaults, &in, in.struct_size);
  return defaults;
}

// Writes `value` into the caller's struct, as much of it as both sides know.
template <typename T>
void write_struct(T& out, T value, size_t first_layout_size, const char* name) {
  if (out.struct_size < first_layout_size) {
    fail(ErrorCode::kInvalidArgument,
         "{}.struct_size is {}, smaller than the smallest layout ({} bytes): set it to sizeof({})", name,
         out.struct_size, first_layout_size, name);
  }
  const size_t filled = std::min<size_t>(out.struct_size, sizeof(T));
  value.struct_size = static_cast<uint32_t>(filled);
  std::memcpy(&out, &value, filled);
}

// The first `size` bytes of `value` go to `out`: *_init functions write the layout of the header version
// that introduced them and never more, so an older caller's smaller struct is never overrun.
template <typename T>
void write_prefix(T* out, T value, size_t size) {
  value.struct_size = static_cast<uint32_t>(size);
  std::memcpy(out, &value, size);
}

// The (buffer, in/out count) convention of flashkv.h: NULL buffer and zero count asks for the size.
template <typename T>
void copy_array(std::span<const T> source, T* buffer, uint64_t* count, const char* buffer_name) {
  uint64_t& capacity = *count;
  const auto needed = static_cast<uint64_t>(source.size());
  if (buffer == nullptr) {
    if (capacity != 0) {
      fail(ErrorCode::kInvalidArgument, "{} is NULL but its count says {} elements", buffer_name, capacity);
    }
    capacity = needed;
    return;
  }
  if (capacity < needed) {
    const uint64_t given = capacity;
    capacity = needed;
    fail(ErrorCode::kInvalidArgument, "{} holds {} elements but {} are needed", buffer_name, given, needed);
  }
  std::copy(source.begin(), source.end(), buffer);
  capacity = needed;
}

// (pointer, count) as a span, refusing a NULL pointer with a non-zero count.
template <typename T>
std::span<const T> input_array(const T* data, uint64_t count, const char* name) {
  if (data == nullptr && count != 0)
    fail(ErrorCode::kInvalidArgument, "{} is NULL but its count is {}", name, count);
  if (count == 0) return {};
  return {data, static_cast<size_t>(count)};
}

}  // namespace flashkv::capi
