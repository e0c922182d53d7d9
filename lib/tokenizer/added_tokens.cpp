// A plain byte trie walked from each candidate start: the added tokens are few and short, and most text bytes
// are not the first byte of any token, so this is as fast as Aho-Corasick in practice and simpler to trust.
#include "tokenizer/added_tokens.hpp"

#include <algorithm>

namespace flashkv::tokenizer {

AddedTokenMatcher::AddedTokenMatcher() : nodes_(1) {}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const auto& children = nodes_[static_cast<std::size_t>(node)].children;
  const auto it =
      std::lower_bound(children.begin(), children.end(), byte,
                       [](const std::pair<uint8_t, int32_t>& c, uint8_t b) { return c.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::add(std::string_view content, int32_t id) {
  if (content.empty()) return;
  first_byte_[static_cast<uint8_t>(content[0])] = true;
  int32_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[static_cast<std::size_t>(node)].children;
      children.insert(std::upper_bound(children.begin(), children.end(), std::make_pair(byte, next)),
                      std::make_pair(byte, next));
    }
    node = next;
  }
  nodes_[static_cast<std::size_t>(node)].id = id;
}

AddedMatch AddedTokenMatcher::find(std::string_view text, std::size_t from) const {
  for (std::size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[static_cast<uint8_t>(text[start])]) continue;
    AddedMatch best{text.size(), text.size(), -1};
    int32_t node = 0;
    for (std::size_t pos = start; pos < text.size(); ++pos) {
      node = child(node, static_cast<uint8_t>(text[pos]));
      if (node < 0) break;
      const int32_t id = nodes_[static_cast<std::size_t>(node)].id;
      if (id >= 0) best = AddedMatch{start, pos + 1, id};
    }
    if (best.id >= 0) return best;
  }
  return AddedMatch{text.size(), text.size(), -1};
}

}  // namespace flashkv::tokenizer
