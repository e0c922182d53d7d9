// The ids of pieces already encoded, shared by every encode() call of one Tokenizer (as tokenizers' BPE
// cache): text in separate calls (chat turns, documents) repeats the same words. Bounded: once `capacity`
// pieces are stored, nothing more is added (no eviction, so a lookup never writes). Long pieces are not
// cached. Threading: lookup() and insert() may run on any threads at once (a shared_mutex; readers do not
// block each other). encode() checks a per-call cache first, so this lock is taken once per distinct piece of
// a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace flashkv::tokenizer {

class WordCache {
 public:
  static constexpr std::size_t kMaxPieceBytes = 64;

  explicit WordCache(std::size_t capacity) : capacity_(capacity) {}

  // Appends the cached ids of `piece` to `out`; false when it is not cached.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, std::span<const int32_t> ids);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  std::size_t capacity_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> ids_;
};

}  // namespace flashkv::tokenizer
