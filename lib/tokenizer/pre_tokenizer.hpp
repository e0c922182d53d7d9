// The pre-tokenizer: a sequence of Split rules (regex matchers, behaviour Isolated) cutting text into the
// pieces BPE encodes one by one. Matches and the gaps between them both become pieces; each rule cuts every
// piece of the previous rule. (The trailing ByteLevel step of tokenizer.json is the BPE model's alphabet.)
// Threading: split() is const; the scratch buffers belong to the caller.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/split_patterns.hpp"

namespace flashkv::tokenizer {

// Byte range [first, second) of a piece within the text given to split().
using Piece = std::pair<uint32_t, uint32_t>;

struct PreTokenizerScratch {
  std::vector<char32_t> cps;
  std::vector<uint8_t> classes;
  std::vector<uint32_t> offsets;  // byte offset of each code point, and the text size at the end
  std::vector<Piece> ranges;      // code point ranges, then the next rule's
  std::vector<Piece> next;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<SplitMatcher> rules) : rules_(std::move(rules)) {}

  // Cuts valid UTF-8 `text` into pieces (byte ranges, in order, covering the text), written to `pieces`.
  void split(std::string_view text, std::vector<Piece>& pieces, PreTokenizerScratch& scratch) const;

 private:
  std::vector<SplitMatcher> rules_;
};

}  // namespace flashkv::tokenizer
