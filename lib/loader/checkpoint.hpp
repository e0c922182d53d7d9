// A checkpoint: the set of safetensors files that together hold a model's tensors, opened and
// cross-checked, with lookup by tensor name.
//
// What open(path) accepts, in this order of preference:
//   1. a directory with model.safetensors.index.json: its "weight_map" (tensor name -> shard file)
//      names the shards; shard paths must be relative and stay inside the directory (no "..", no
//      absolute path; checked on the text, so symlinked shards as in a Hugging Face cache still work);
//   2. a directory with model.safetensors;
//   3. a directory with any *.safetensors files (all of them are shards);
//   4. a path to one .safetensors file.
// Every file is mapped and validated (safetensors_file.hpp). A tensor present in two files, a tensor
// the index lists but its shard lacks, and a shard the index names but the directory lacks are errors.
// Tensors stored in a shard but absent from the index are kept (the data is there; index files written
// by hand are often incomplete).
//
// Ownership and lifetime: the Checkpoint owns the mappings; TensorViews point into them and are valid
// while the Checkpoint (or the object it was moved into) lives.
// Errors: flashkv::Error — kNotFound (path, shard or tensor missing), kIo (the OS refused a file),
// kInvalidCheckpoint (malformed file or index, duplicate or missing tensor), each naming the file and
// the tensor at fault. Threading: immutable after open(); share freely between threads.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loader/safetensors_file.hpp"
#include "loader/tensor_view.hpp"

namespace flashkv::loader {

inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";

class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& path);

  // The path open() was given.
  const std::string& root() const noexcept { return root_; }
  // Every tensor of every file, sorted by name.
  std::span<const TensorView> tensors() const noexcept { return tensors_; }
  std::size_t tensor_count() const noexcept { return tensors_.size(); }
  std::optional<TensorView> find(std::string_view name) const noexcept;
  TensorView tensor(std::string_view name) const;  // kNotFound naming the tensor and the checkpoint
  std::span<const std::unique_ptr<SafetensorsFile>> files() const noexcept { return files_; }

 private:
  Checkpoint(std::string root, std::vector<std::unique_ptr<SafetensorsFile>> files);

  std::string root_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorView> tensors_;
};

}  // namespace flashkv::loader
