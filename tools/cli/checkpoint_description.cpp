#include "checkpoint_description.hpp"

#include <system_error>

namespace flashkv::cli {

CheckpointDescription describe_checkpoint(const std::filesystem::path& path) {
  CheckpointDescription d;
  d.path = path;
  std::error_code ec;
  d.is_checkpoint_dir = std::filesystem::is_directory(path, ec);
  d.config_path = d.is_checkpoint_dir ? path / "config.json" : path;
  d.config = load_model_config(path);
  d.plan = make_layer_plan(d.config);
  d.memory = make_memory_report(d.config, d.plan);
  // The tensor listing of a checkpoint directory is added by the safetensors loader (lib/loader).
  return d;
}

}  // namespace flashkv::cli
