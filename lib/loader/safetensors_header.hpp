// Parser and validator of the safetensors header, working on the bytes of a whole file in memory.
//
// The file layout: an 8-byte little-endian header length N, N bytes of JSON, then the data region.
// The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
// the data region) plus an optional "__metadata__" object of strings.
//
// Contract: parse_safetensors_header() either returns a header in which every tensor lies inside the
// given bytes with a byte count matching dtype x shape, no two non-empty tensors overlap and names are
// unique, or throws flashkv::Error naming `file_label` (and the tensor, where one is at fault):
// kInvalidCheckpoint for a malformed file, kUnsupported for a sub-byte dtype (F4, F6_*).
// Accepted beyond the strict format: gaps between tensors and trailing bytes after the last one,
// unknown keys inside a tensor entry. It reads only `file`, keeps no pointer into it, and is safe to
// call from several threads. It is also the libFuzzer target's entry point (tools/fuzz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loader/dtype.hpp"

namespace flashkv::loader {

// Largest JSON header accepted, as in the reference implementation: real checkpoints with ~100k
// tensors per shard stay far below it, and it bounds the memory a hostile file can make us spend.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorRecord {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t element_count = 0;
  std::uint64_t file_begin = 0;  // absolute offsets in the file, end exclusive
  std::uint64_t file_end = 0;

  std::uint64_t byte_size() const noexcept { return file_end - file_begin; }
};

struct SafetensorsHeader {
  std::uint64_t data_offset = 0;                // first byte of the data region (8 + N)
  std::vector<TensorRecord> tensors;            // sorted by name
  std::map<std::string, std::string> metadata;  // the "__metadata__" object, if any
};

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file, std::string_view file_label);

}  // namespace flashkv::loader
