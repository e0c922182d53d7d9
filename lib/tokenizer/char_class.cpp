// Two-stage lookup of the generated class ranges: 256-code-point blocks, identical blocks stored once
// (most of the 4352 blocks are all-zero or all-one-class), so a lookup is two loads.
#include "tokenizer/char_class.hpp"

#include <array>
#include <map>
#include <vector>

namespace flashkv::tokenizer {
namespace {

constexpr uint32_t kBlockBits = 8;
constexpr uint32_t kBlockSize = 1u << kBlockBits;
constexpr uint32_t kCodeSpace = 0x110000;
constexpr uint32_t kBlockCount = kCodeSpace / kBlockSize;

struct ClassTable {
  std::vector<uint16_t> block_of;  // block number -> index into blocks
  std::vector<std::array<uint8_t, kBlockSize>> blocks;

  ClassTable() : block_of(kBlockCount) {
    std::vector<uint8_t> flat(kCodeSpace, 0);
    for (std::size_t i = 0; i < kCharClassRangeCount; ++i) {
      const CharClassRange& r = kCharClassRanges[i];
      for (uint32_t c = r.first; c <= r.last; ++c) flat[c] = r.classes;
    }
    std::map<std::array<uint8_t, kBlockSize>, uint16_t> seen;
    for (uint32_t b = 0; b < kBlockCount; ++b) {
      std::array<uint8_t, kBlockSize> block{};
      for (uint32_t i = 0; i < kBlockSize; ++i) block[i] = flat[b * kBlockSize + i];
      auto [it, inserted] = seen.emplace(block, static_cast<uint16_t>(blocks.size()));
      if (inserted) blocks.push_back(block);
      block_of[b] = it->second;
    }
  }
};

const ClassTable& table() {
  static const ClassTable instance;
  return instance;
}

}  // namespace

uint8_t char_classes(char32_t c) noexcept {
  if (c >= kCodeSpace) return 0;
  const ClassTable& t = table();
  return t.blocks[t.block_of[c >> kBlockBits]][c & (kBlockSize - 1)];
}

}  // namespace flashkv::tokenizer
