// Lookups into a SequenceState shared by the forward and the engine.
#pragma once

#include <flashkv/error.hpp>

#include "runtime/sequence_state.hpp"

namespace flashkv::runtime {

inline OwnerCache& owner_cache(SequenceState& state, int layer) {
  for (OwnerCache& owner : state.owners) {
    if (owner.layer == layer) return owner;
  }
  fail(ErrorCode::kInternal, "sequence state holds no KV cache for layer {}", layer);
}

inline const OwnerCache& owner_cache(const SequenceState& state, int layer) {
  return owner_cache(const_cast<SequenceState&>(state), layer);
}

}  // namespace flashkv::runtime
