// SequenceState — everything a later forward() of one sequence needs (spec §8.2), as plain values.
//
// Per layer a window ring (SWA rows; sliding_window + rewind_margin slots so that truncate() within the
// margin is exact); per KV source its published compressed entries and index keys, and for ratio r >= 2 the
// compressor's (v, g) rows of recent tokens (the open group is the pending state of §5.3; older rows serve
// rewinds); the token ids (the Engram history is their last max_ngram−1 ids). Faithful mode stores the real
// record layouts of §2.2 (FP8 window rows, NVFP4 entries, MXFP4 index keys; V4-Flash: FP8 + BF16 RoPE window
// rows and entries, MXFP4 index keys); clean mode stores fp32 rows.
// V4-Flash CSA layers keep two compressor histories (the main compressor's and the indexer's, each 2·dim
// wide: both half-window series), and their pending state includes the previous window's tokens, whose first
// half-window series feeds the next entry.
//
// Ownership: a value type; copying is a deep copy (the engine's copy_state; pages shared copy-on-write may
// replace this later). It refers to no Engine, but only the engine that made it (same config and numerics)
// may use it. Threading: one thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"

namespace flashkv::runtime {

// Rows of one layer's sliding window: position p lives in slot p mod capacity; position −1 marks an empty
// slot.
struct WindowRing {
  backend::RecordFormat format = backend::RecordFormat::kFp32;
  int64_t dim = 0;
  int64_t rope_dim = 0;  // kFp8Bf16Rope only
  int64_t capacity = 0;
  std::vector<uint8_t> records;    // capacity records
  std::vector<int64_t> positions;  // capacity

  size_t row_bytes() const { return backend::record_bytes(format, dim, rope_dim); }
  uint8_t* slot(int64_t position) {
    return records.data() + static_cast<size_t>(position % capacity) * row_bytes();
  }
};

// The compressor's fp32 projections (v = Wc·u, g = Wg·u) of the most recent tokens of a ratio >= 2 owner
// (V4 CSA: both half-window series, 2·head_dim wide).
struct CompressorHistory {
  int64_t dim = 0;
  int64_t capacity = 0;
  std::vector<float> v;            // capacity × dim
  std::vector<float> g;            // capacity × dim
  std::vector<int64_t> positions;  // capacity, −1 empty
};

// Global KV of one KV-source layer: entries 0..count−1 (entry j covers tokens [j·ratio, (j+1)·ratio)).
struct OwnerCache {
  int layer = 0;
  int ratio = 1;
  int64_t count = 0;
  backend::RecordFormat entry_format = backend::RecordFormat::kFp32;
  backend::RecordFormat key_format = backend::RecordFormat::kFp32;
  int64_t entry_dim = 0;
  int64_t entry_rope_dim = 0;  // kFp8Bf16Rope entries only
  int64_t key_dim = 0;         // 0: no index keys (V4 HCA)
  // V4 CSA: entry j pools the tokens of windows j−1 and j, so reopening window j needs window j−1 too.
  int64_t overlap_windows = 0;
  std::vector<uint8_t> entries;     // count entry records
  std::vector<uint8_t> keys;        // count index-key records
  CompressorHistory history;        // ratio >= 2 only
  CompressorHistory index_history;  // V4 CSA: the indexer's own compressor

  backend::RecordRows entry_rows() const {
    return {entry_format, entries.data(), count, entry_dim, entry_rope_dim};
  }
  backend::RecordRows key_rows() const { return {key_format, keys.data(), count, key_dim}; }
};

struct SequenceState {
  int64_t length = 0;               // tokens processed: positions 0 … length−1
  std::vector<int32_t> tokens;      // length ids
  std::vector<WindowRing> windows;  // one per backbone layer
  std::vector<OwnerCache> owners;   // one per KV source, ascending layer
};

}  // namespace flashkv::runtime
