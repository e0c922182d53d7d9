// The BPE merge table: (left id, right id) -> (rank, merged id), as an open-addressing hash table (the
// lookup is the inner loop of BPE; std::unordered_map's node chasing costs ~2x here).
// Threading: immutable after construction; find() is safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace flashkv::tokenizer {

struct Merge {
  int32_t rank;
  int32_t merged_id;
};

class MergeTable {
 public:
  MergeTable() = default;
  // `capacity_hint`: number of merges to come (sizes the table for a load factor <= 1/2).
  explicit MergeTable(std::size_t capacity_hint);

  // Adds a pair; a pair already present is overwritten (the later line of merges wins, as in tokenizers,
  // which collects them into a map) and false is returned.
  bool insert(int32_t left, int32_t right, Merge merge);
  std::optional<Merge> find(int32_t left, int32_t right) const noexcept {
    if (slots_.empty()) return std::nullopt;
    const uint64_t key = pack(left, right);
    for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return slot.merge;
      if (slot.key == kEmpty) return std::nullopt;
    }
  }
  std::size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t left, int32_t right) noexcept {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  static std::size_t hash(uint64_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 20);
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace flashkv::tokenizer
