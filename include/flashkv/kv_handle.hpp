// flashkv::KVHandle — an immutable snapshot of one session's KV state: global KV entries and index keys,
// compressor pending state, window rings, Engram history, the token ids, and the logits of the last row.
//
// Contract:
// - Made by Session::kv(); given to Session::restore() of any session of the same Model, which then continues
//   exactly as the snapshotted session would have (same logits, same sampled tokens for the same seed).
// - Immutable: nothing changes a snapshot after it is taken, so it may be restored any number of times.
// - fork() returns another handle to the same snapshot (no copy; reference-counted). A default-constructed
//   handle is empty: empty() is true, fork() returns another empty handle, and tokens(), bytes(), model() and
//   Session::restore() throw kInvalidArgument.
// Ownership: the snapshot is shared by all handles to it and freed with the last one; it keeps its Model's
// weights alive.
// Threading: const members may be called from any number of threads at once; handles may be copied and
// passed between threads freely.
// Errors: flashkv::Error kInvalidArgument when an empty handle is used.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include <flashkv/model.hpp>

namespace flashkv {

namespace detail {
struct Snapshot;
}

class KVHandle {
 public:
  KVHandle() = default;

  bool empty() const noexcept { return snapshot_ == nullptr; }
  // Another handle to the same snapshot.
  KVHandle fork() const;
  // The token ids the snapshot holds, oldest first. Valid while any handle to the snapshot lives.
  std::span<const int32_t> tokens() const;
  // Bytes of KV state held by the snapshot (global records, window rows, pending state).
  int64_t bytes() const;
  // The Model the snapshot belongs to.
  Model model() const;

 private:
  friend class Session;
  explicit KVHandle(std::shared_ptr<const detail::Snapshot> snapshot) : snapshot_(std::move(snapshot)) {}
  const detail::Snapshot& snapshot() const;

  std::shared_ptr<const detail::Snapshot> snapshot_;
};

}  // namespace flashkv
