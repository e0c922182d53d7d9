#include "loader/safetensors_file.hpp"

#include <algorithm>
#include <utility>

#include <flashkv/error.hpp>

#include "loader/message_text.hpp"

namespace flashkv::loader {

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  MappedFile mapping(path);
  SafetensorsHeader header = parse_safetensors_header(mapping.bytes(), path.string());
  return SafetensorsFile(path.string(), std::move(mapping), std::move(header));
}

SafetensorsFile::SafetensorsFile(std::string path, MappedFile mapping, SafetensorsHeader header)
    : path_(std::make_unique<const std::string>(std::move(path))),
      mapping_(std::move(mapping)),
      header_(std::move(header)) {}

const TensorRecord* SafetensorsFile::find(std::string_view name) const noexcept {
  const auto& tensors = header_.tensors;
  const auto it =
      std::lower_bound(tensors.begin(), tensors.end(), name,
                       [](const TensorRecord& record, std::string_view key) { return record.name < key; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

TensorView SafetensorsFile::view(const TensorRecord& record) const noexcept {
  return TensorView{record.name, record.dtype, record.shape,
                    mapping_.bytes().subspan(record.file_begin, record.byte_size()), *path_};
}

TensorView SafetensorsFile::tensor(std::string_view name) const {
  const TensorRecord* record = find(name);
  if (record == nullptr)
    fail(ErrorCode::kNotFound, "tensor {} not found in '{}'", quote_untrusted(name), *path_);
  return view(*record);
}

}  // namespace flashkv::loader
