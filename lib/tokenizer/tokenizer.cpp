// flashkv::Tokenizer: loading from files and the id-level queries; encoding lives in text_encoder.cpp.
#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

#include <fstream>
#include <sstream>

#include "tokenizer/text_encoder.hpp"
#include "tokenizer/tokenizer_data.hpp"
#include "tokenizer/utf8.hpp"

namespace flashkv {
namespace {

using tokenizer::TokenizerData;
using tokenizer::TokenKind;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kIo, "{}: cannot open for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(ErrorCode::kIo, "{}: read failed", path.string());
  return std::move(text).str();
}

// Checks an id a caller passed; the kind of an assigned id.
TokenKind checked_kind(const TokenizerData& d, int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= d.kinds.size() ||
      d.kinds[static_cast<std::size_t>(id)] == TokenKind::kUnassigned) {
    fail(ErrorCode::kInvalidArgument, "token id {} is not in the vocabulary (size {})", id, d.kinds.size());
  }
  return d.kinds[static_cast<std::size_t>(id)];
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerData> data) : data_(std::move(data)) {}

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  const std::filesystem::path file = is_dir ? path / "tokenizer.json" : path;
  if (!std::filesystem::exists(file, ec)) fail(ErrorCode::kNotFound, "{}: no tokenizer.json", file.string());
  const std::filesystem::path config = file.parent_path() / "tokenizer_config.json";
  const std::string config_text = std::filesystem::exists(config, ec) ? read_file(config) : std::string();
  return Tokenizer(std::make_shared<const TokenizerData>(
      tokenizer::load_tokenizer_data(read_file(file), config_text, file.string())));
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  return Tokenizer(std::make_shared<const TokenizerData>(
      tokenizer::load_tokenizer_data(tokenizer_json, tokenizer_config_json, "tokenizer.json")));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  tokenizer::encode_text(*data_, text, allow_special, ids);
  return ids;
}

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out, bool allow_special) const {
  tokenizer::encode_text(*data_, text, allow_special, out);
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (checked_kind(*data_, id) == TokenKind::kSpecial && skip_special) continue;
    bytes += data_->bytes_of(id);
  }
  return bytes;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const std::string bytes = decode_bytes(ids, skip_special);
  if (tokenizer::is_valid_utf8(bytes)) return bytes;
  std::string text;
  tokenizer::append_lossy_utf8(text, bytes);
  return text;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  checked_kind(*data_, id);
  return data_->tokens[static_cast<std::size_t>(id)];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto it = data_->ids.find(std::string(token));
  return it != data_->ids.end() ? std::optional<int32_t>(it->second) : std::nullopt;
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(data_->kinds.size());
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return data_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return data_->eos;
}

bool Tokenizer::is_added(int32_t id) const {
  const TokenKind kind = checked_kind(*data_, id);
  return kind == TokenKind::kAdded || kind == TokenKind::kSpecial;
}

bool Tokenizer::is_special(int32_t id) const {
  return checked_kind(*data_, id) == TokenKind::kSpecial;
}

std::vector<int32_t> Tokenizer::special_ids() const {
  std::vector<int32_t> ids;
  for (std::size_t id = 0; id < data_->kinds.size(); ++id) {
    if (data_->kinds[id] == TokenKind::kSpecial) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace flashkv
