// Finding added tokens (<｜User｜>, <think>, ...) in text: leftmost-longest matching over a byte trie, the
// semantics of tokenizers' AddedVocabulary (Aho-Corasick, MatchKind::LeftmostLongest).
// Threading: immutable after the tokens are added; find() is const.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace flashkv::tokenizer {

struct AddedMatch {
  std::size_t begin;  // byte offset; == text.size() when there is no match
  std::size_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  void add(std::string_view content, int32_t id);  // a later duplicate content replaces the earlier id
  bool empty() const noexcept { return nodes_.size() == 1; }
  // The leftmost match starting at or after `from`, the longest one there.
  AddedMatch find(std::string_view text, std::size_t from) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t id = -1;                                    // token ending here, -1: none
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};  // bytes some token starts with: the scan skips the others cheaply
};

}  // namespace flashkv::tokenizer
