// Reading tokenizer.json: a SAX pass that streams model.vocab and model.merges (~250k entries for DeepSeek:
// as a JSON DOM they cost most of the load time) straight into vectors, and builds an ordinary DOM of the
// rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashkv::tokenizer {

struct TokenizerJsonDocument {
  nlohmann::json rest;  // the whole document, with model.vocab and model.merges replaced by null
  std::vector<std::pair<std::string, int64_t>> vocab;       // in file order
  std::vector<std::pair<std::string, std::string>> merges;  // rank order; "a b" lines split at the space
  bool has_vocab = false;
  bool has_merges = false;
};

// Throws flashkv::Error kInvalidCheckpoint (malformed JSON, a vocab id that is not an integer, a merge that
// is neither "a b" nor ["a", "b"]), naming `origin`.
TokenizerJsonDocument read_tokenizer_json(std::string_view text, std::string_view origin);

}  // namespace flashkv::tokenizer
