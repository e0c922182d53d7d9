// A read-mostly map under a shared_mutex: after warm-up nearly every access is a shared (reader) lock.
#include "tokenizer/word_cache.hpp"

#include <mutex>

namespace flashkv::tokenizer {

bool WordCache::lookup(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > kMaxPieceBytes) return false;
  const std::shared_lock lock(mutex_);
  const auto it = ids_.find(piece);
  if (it == ids_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view piece, std::span<const int32_t> ids) {
  if (piece.size() > kMaxPieceBytes) return;
  const std::unique_lock lock(mutex_);
  if (ids_.size() < capacity_) ids_.try_emplace(std::string(piece), ids.begin(), ids.end());
}

}  // namespace flashkv::tokenizer
