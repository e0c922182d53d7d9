// One safetensors file, memory-mapped read-only and validated (see safetensors_header.hpp for every
// rule checked) when opened.
//
// Ownership: the object owns the mapping; the TensorViews it hands out point into it and stay valid
// while the object (or the object it was moved into) lives. Nothing is copied out of the file.
// Errors: open() throws flashkv::Error — kIo naming the file when the OS refuses it, kInvalidCheckpoint
// (or kUnsupported for a sub-byte dtype) naming the file and tensor when the content is malformed;
// nothing leaks on any error path. tensor() throws kNotFound naming the tensor and the file.
// Threading: immutable after open(); concurrent readers need no locking.
// Limitation: like any mmap reader, a file truncated by another process while mapped faults on access.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loader/mapped_file.hpp"
#include "loader/safetensors_header.hpp"
#include "loader/tensor_view.hpp"

namespace flashkv::loader {

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::string& path() const noexcept { return *path_; }
  std::uint64_t file_size() const noexcept { return mapping_.bytes().size(); }
  const std::map<std::string, std::string>& metadata() const noexcept { return header_.metadata; }

  // Every tensor of the file, sorted by name.
  std::span<const TensorRecord> records() const noexcept { return header_.tensors; }
  const TensorRecord* find(std::string_view name) const noexcept;
  TensorView view(const TensorRecord& record) const noexcept;
  TensorView tensor(std::string_view name) const;

 private:
  SafetensorsFile(std::string path, MappedFile mapping, SafetensorsHeader header);

  std::unique_ptr<const std::string> path_;  // on the heap: views keep pointing at it across moves
  MappedFile mapping_;
  SafetensorsHeader header_;
};

}  // namespace flashkv::loader
