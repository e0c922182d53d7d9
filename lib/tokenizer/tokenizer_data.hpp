// Everything a loaded tokenizer.json becomes: the pipeline (added tokens, pre-tokenizer, BPE) and the
// id tables for decoding. Built once by load_tokenizer_data(), immutable and shared afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe_model.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/word_cache.hpp"

namespace flashkv::tokenizer {

enum class TokenKind : uint8_t { kUnassigned, kModel, kAdded, kSpecial };

struct TokenizerData {
  BpeModel bpe;
  PreTokenizer pre_tokenizer;
  // Added tokens with "normalized": false are found in the raw text first, those with true in the gaps
  // left (after normalization, which is the identity for the supported normalizers), as tokenizers does.
  AddedTokenMatcher added_raw;
  AddedTokenMatcher added_normalized;

  std::vector<std::string> tokens;  // id -> vocabulary string (added: content); "" when unassigned
  std::vector<TokenKind> kinds;     // id -> kind
  std::unordered_map<std::string, int32_t> ids;  // vocabulary string -> id (added tokens take precedence)
  std::string token_bytes;                       // id -> bytes: token_bytes[byte_offsets[id], [id + 1])
  std::vector<uint32_t> byte_offsets;
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
  // Internally synchronized; a pointer so that the data stays movable (the pointee is written under const).
  std::unique_ptr<WordCache> word_cache = std::make_unique<WordCache>(kWordCacheCapacity);

  static constexpr std::size_t kWordCacheCapacity = 100000;

  std::string_view bytes_of(int32_t id) const {
    const auto i = static_cast<std::size_t>(id);
    return std::string_view(token_bytes).substr(byte_offsets[i], byte_offsets[i + 1] - byte_offsets[i]);
  }
};

// Parses tokenizer.json (+ tokenizer_config.json, may be empty). `origin` names the source in errors.
// Throws flashkv::Error (kInvalidCheckpoint, kUnsupported).
TokenizerData load_tokenizer_data(std::string_view tokenizer_json, std::string_view config_json,
                                  std::string_view origin);

}  // namespace flashkv::tokenizer
