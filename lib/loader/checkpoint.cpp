#include "loader/checkpoint.hpp"

#include <algorithm>
#include <map>
#include <system_error>
#include <utility>

#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "loader/mapped_file.hpp"
#include "loader/message_text.hpp"

namespace flashkv::loader {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An index of ~100k tensors is a few MB; the bound only keeps a hostile file from exhausting memory.
constexpr std::size_t kMaxIndexBytes = 100'000'000;

// weight_map of the index: tensor name -> shard path relative to the checkpoint directory.
using WeightMap = std::map<std::string, std::string>;

bool path_exists(const fs::path& path) {
  std::error_code ignored;
  return fs::exists(path, ignored);
}

bool stays_inside_directory(const fs::path& relative) {
  if (relative.empty() || relative.is_absolute() || relative.has_root_name() ||
      relative.has_root_directory()) {
    return false;
  }
  return std::none_of(relative.begin(), relative.end(), [](const fs::path& part) { return part == ".."; });
}

json read_index_json(const fs::path& index_path) {
  const MappedFile mapping(index_path);
  const auto bytes = mapping.bytes();
  if (bytes.size() > kMaxIndexBytes) {
    fail(ErrorCode::kInvalidCheckpoint, "index '{}' is {} bytes, over the limit of {}", index_path.string(),
         bytes.size(), kMaxIndexBytes);
  }
  try {
    return json::parse(reinterpret_cast<const char*>(bytes.data()),
                       reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const json::exception& error) {
    fail(ErrorCode::kInvalidCheckpoint, "index '{}' is not valid JSON: {}", index_path.string(),
         error.what());
  }
}

WeightMap read_weight_map(const fs::path& index_path) {
  const json root = read_index_json(index_path);
  const auto it = root.is_object() ? root.find("weight_map") : root.end();
  if (it == root.end() || !it->is_object()) {
    fail(ErrorCode::kInvalidCheckpoint, "index '{}' has no 'weight_map' object", index_path.string());
  }
  WeightMap weight_map;
  for (const auto& [name, shard] : it->items()) {
    if (!shard.is_string()) {
      fail(ErrorCode::kInvalidCheckpoint, "index '{}': tensor {} maps to {}, not a shard file name",
           index_path.string(), quote_untrusted(name), shard.dump());
    }
    const auto& shard_name = shard.get_ref<const std::string&>();
    if (!stays_inside_directory(fs::path(shard_name))) {
      fail(ErrorCode::kInvalidCheckpoint,
           "index '{}': tensor {} maps to shard {} outside the checkpoint directory", index_path.string(),
           quote_untrusted(name), quote_untrusted(shard_name));
    }
    weight_map.emplace(name, shard_name);
  }
  return weight_map;
}

std::vector<std::unique_ptr<SafetensorsFile>> open_files(const std::vector<fs::path>& paths) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.reserve(paths.size());
  for (const fs::path& path : paths)
    files.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
  return files;
}

// The distinct shards an index names, each checked to exist before any is mapped.
std::vector<fs::path> shards_of(const WeightMap& weight_map, const fs::path& directory,
                                const fs::path& index_path) {
  std::map<std::string, const std::string*> first_tensor_of_shard;
  for (const auto& [name, shard] : weight_map) first_tensor_of_shard.emplace(shard, &name);
  std::vector<fs::path> paths;
  for (const auto& [shard, tensor] : first_tensor_of_shard) {
    const fs::path path = (directory / shard).lexically_normal();
    if (!path_exists(path)) {
      fail(ErrorCode::kNotFound, "index '{}' maps tensor {} to shard '{}', which does not exist",
           index_path.string(), quote_untrusted(*tensor), path.string());
    }
    paths.push_back(path);
  }
  return paths;
}

std::vector<fs::path> all_safetensors_in(const fs::path& directory) {
  std::vector<fs::path> paths;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (entry.path().extension() == ".safetensors") paths.push_back(entry.path());
  }
  if (error) fail(ErrorCode::kIo, "cannot list '{}': {}", directory.string(), error.message());
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

Checkpoint::Checkpoint(std::string root, std::vector<std::unique_ptr<SafetensorsFile>> files)
    : root_(std::move(root)), files_(std::move(files)) {
  for (const auto& file : files_) {
    for (const TensorRecord& record : file->records()) tensors_.push_back(file->view(record));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < tensors_.size(); ++i) {
    if (tensors_[i].name == tensors_[i - 1].name) {
      fail(ErrorCode::kInvalidCheckpoint, "checkpoint '{}': tensor {} is present in two files, '{}' and '{}'",
           root_, quote_untrusted(tensors_[i].name), tensors_[i - 1].file, tensors_[i].file);
    }
  }
}

Checkpoint Checkpoint::open(const std::filesystem::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) fail(ErrorCode::kNotFound, "checkpoint '{}' does not exist", path.string());
  if (fs::is_regular_file(status)) return Checkpoint(path.string(), open_files({path}));
  if (!fs::is_directory(status)) {
    fail(ErrorCode::kIo, "checkpoint '{}' is neither a directory nor a regular file", path.string());
  }

  const fs::path index_path = path / kSafetensorsIndexName;
  if (!path_exists(index_path)) {
    const fs::path single = path / "model.safetensors";
    if (path_exists(single)) return Checkpoint(path.string(), open_files({single}));
    auto paths = all_safetensors_in(path);
    if (paths.empty()) {
      fail(ErrorCode::kNotFound,
           "checkpoint directory '{}' has no {}, model.safetensors or *.safetensors file", path.string(),
           kSafetensorsIndexName);
    }
    return Checkpoint(path.string(), open_files(paths));
  }

  const WeightMap weight_map = read_weight_map(index_path);
  Checkpoint checkpoint(path.string(), open_files(shards_of(weight_map, path, index_path)));
  for (const auto& [name, shard] : weight_map) {
    const fs::path expected = (path / shard).lexically_normal();
    const auto found = checkpoint.find(name);
    if (!found || found->file != expected.string()) {
      fail(ErrorCode::kInvalidCheckpoint,
           "index '{}' lists tensor {} in shard '{}', but that shard does not contain it",
           index_path.string(), quote_untrusted(name), expected.string());
    }
  }
  return checkpoint;
}

std::optional<TensorView> Checkpoint::find(std::string_view name) const noexcept {
  const auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const TensorView& view, std::string_view key) { return view.name < key; });
  if (it == tensors_.end() || it->name != name) return std::nullopt;
  return *it;
}

TensorView Checkpoint::tensor(std::string_view name) const {
  if (auto view = find(name)) return *view;
  fail(ErrorCode::kNotFound, "tensor {} not found in checkpoint '{}'", quote_untrusted(name), root_);
}

}  // namespace flashkv::loader
