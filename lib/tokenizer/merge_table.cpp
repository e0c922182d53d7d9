// Open addressing with linear probing, power-of-two capacity; no deletion is ever needed.
#include "tokenizer/merge_table.hpp"

namespace flashkv::tokenizer {

MergeTable::MergeTable(std::size_t capacity_hint) {
  std::size_t capacity = 16;
  while (capacity < 2 * capacity_hint) capacity *= 2;
  slots_.assign(capacity, Slot{kEmpty, Merge{0, 0}});
  mask_ = capacity - 1;
}

bool MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  if (slots_.empty() || 2 * (size_ + 1) > slots_.size()) {
    MergeTable bigger(2 * (size_ + 1));
    for (const Slot& slot : slots_) {
      if (slot.key != kEmpty) {
        bigger.insert(static_cast<int32_t>(slot.key >> 32), static_cast<int32_t>(slot.key & 0xFFFFFFFFu),
                      slot.merge);
      }
    }
    *this = std::move(bigger);
  }
  const uint64_t key = pack(left, right);
  for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == key) {
      slot.merge = merge;
      return false;
    }
    if (slot.key == kEmpty) {
      slot = Slot{key, merge};
      ++size_;
      return true;
    }
  }
}

}  // namespace flashkv::tokenizer
