// Word::merge_all of tokenizers: a min-heap of candidate merges keyed (rank, position); a popped candidate is
// applied only if its left symbol is still alive, still has a right neighbour, and the pair still merges into
// the same id (otherwise it is stale); each merge offers the new pairs with both neighbours.
#include "tokenizer/bpe_model.hpp"

#include <algorithm>

namespace flashkv::tokenizer {
namespace {

using Symbol = BpeScratch::Symbol;
using Candidate = BpeScratch::Candidate;

// std heap functions build a max-heap: "less" here means "merges later".
bool merges_later(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, bool ignore_merges,
                   std::unordered_map<std::string, int32_t> whole_words)
    : byte_ids_(byte_ids),
      merges_(std::move(merges)),
      ignore_merges_(ignore_merges),
      whole_words_(std::move(whole_words)) {}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out, BpeScratch& s) const {
  if (ignore_merges_) {
    const auto it = whole_words_.find(std::string(bytes));
    if (it != whole_words_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  s.symbols.clear();
  for (const char c : bytes) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    const auto index = static_cast<int32_t>(s.symbols.size());
    s.symbols.push_back(Symbol{id, index - 1, index + 1, false});
  }
  if (s.symbols.empty()) return;
  s.symbols.back().next = -1;
  s.heap.clear();
  auto offer = [&](int32_t pos) {
    const Symbol& left = s.symbols[static_cast<std::size_t>(pos)];
    if (left.next < 0) return;
    if (const auto merge = merges_.find(left.id, s.symbols[static_cast<std::size_t>(left.next)].id)) {
      s.heap.push_back(Candidate{merge->rank, pos, merge->merged_id});
      std::push_heap(s.heap.begin(), s.heap.end(), merges_later);
    }
  };
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(s.symbols.size()); ++pos) offer(pos);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), merges_later);
    const Candidate top = s.heap.back();
    s.heap.pop_back();
    Symbol& left = s.symbols[static_cast<std::size_t>(top.pos)];
    if (left.removed || left.next < 0) continue;
    Symbol& right = s.symbols[static_cast<std::size_t>(left.next)];
    const auto merge = merges_.find(left.id, right.id);
    if (!merge || merge->merged_id != top.merged_id) continue;
    left.id = top.merged_id;
    right.removed = true;
    left.next = right.next;
    if (left.next >= 0) s.symbols[static_cast<std::size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) offer(left.prev);
    offer(top.pos);
  }
  for (const Symbol& symbol : s.symbols) {
    if (!symbol.removed) out.push_back(symbol.id);
  }
}

}  // namespace flashkv::tokenizer
