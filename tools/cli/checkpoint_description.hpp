// What `flashkv info` reports about a PATH: the config, its layer plan and memory report, and — for a
// checkpoint directory — the tensors the checkpoint holds.
// Why a separate seam: the loader (lib/loader) fills `tensors` for directories; the formatters only read
// this struct, so adding the listing does not touch them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <flashkv/config.hpp>

namespace flashkv::cli {

struct TensorListing {
  std::string name;   // HF name, e.g. "layers.2.attn.wkv.weight"
  std::string dtype;  // safetensors spelling, e.g. "F8_E4M3"
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::string file;  // shard file name
};

// One way a checkpoint directory disagrees with its config (lib/loader/tensor_inventory.hpp).
struct CheckpointProblem {
  std::string tensor;
  std::string problem;  // e.g. "missing", "shape [4], expected [8]"
};

struct CheckpointDescription {
  std::filesystem::path path;         // as given on the command line
  std::filesystem::path config_path;  // PATH/config.json or PATH itself
  bool is_checkpoint_dir = false;
  ModelConfig config;
  LayerPlan plan;
  MemoryReport memory;
  std::vector<TensorListing> tensors;  // empty when PATH is a config file
  bool checked = false;  // a directory holding safetensors files: `problems` is the check against the config
  std::vector<CheckpointProblem> problems;
};

// Reads and validates the config of PATH (a checkpoint directory or a config.json file), derives plan and
// memory. Throws flashkv::Error naming the file and field at fault.
CheckpointDescription describe_checkpoint(const std::filesystem::path& path);

}  // namespace flashkv::cli
