#include <flashkv/error.hpp>
#include <flashkv/kv_handle.hpp>

#include "api/session_state.hpp"

namespace flashkv {

const detail::Snapshot& KVHandle::snapshot() const {
  if (!snapshot_) fail(ErrorCode::kInvalidArgument, "KVHandle is empty (default-constructed or moved from)");
  return *snapshot_;
}

KVHandle KVHandle::fork() const {
  return KVHandle(snapshot_);
}

std::span<const int32_t> KVHandle::tokens() const {
  const detail::Snapshot& s = snapshot();
  return s.model.core_->engine->tokens(*s.state);
}

int64_t KVHandle::bytes() const {
  const detail::Snapshot& s = snapshot();
  return s.model.core_->engine->state_bytes(*s.state);
}

Model KVHandle::model() const {
  return snapshot().model;
}

}  // namespace flashkv
