#include "checkpoint_description.hpp"

#include <system_error>

#include "loader/checkpoint.hpp"
#include "loader/tensor_inventory.hpp"

namespace flashkv::cli {

namespace {

// A directory with only a config.json is described without tensors; one with weights is listed and checked.
bool holds_safetensors(const std::filesystem::path& directory) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    if (entry.path().extension() == ".safetensors" ||
        entry.path().filename() == loader::kSafetensorsIndexName) {
      return true;
    }
  }
  return false;
}

void add_tensors(CheckpointDescription& d) {
  const loader::Checkpoint checkpoint = loader::Checkpoint::open(d.path);
  for (auto& row : loader::describe_checkpoint(checkpoint)) {
    d.tensors.push_back(TensorListing{std::move(row.name), std::move(row.dtype), std::move(row.shape),
                                      row.bytes, std::filesystem::path(row.file).filename().string()});
  }
  for (auto& problem : loader::check_checkpoint(checkpoint, d.config, d.plan)) {
    d.problems.push_back(CheckpointProblem{std::move(problem.tensor), std::move(problem.what)});
  }
  d.checked = true;
}

}  // namespace

CheckpointDescription describe_checkpoint(const std::filesystem::path& path) {
  CheckpointDescription d;
  d.path = path;
  std::error_code ec;
  d.is_checkpoint_dir = std::filesystem::is_directory(path, ec);
  d.config_path = d.is_checkpoint_dir ? path / "config.json" : path;
  d.config = load_model_config(path);
  d.plan = make_layer_plan(d.config);
  d.memory = make_memory_report(d.config, d.plan);
  if (d.is_checkpoint_dir && holds_safetensors(path)) add_tensors(d);
  return d;
}

}  // namespace flashkv::cli
