// Window rings (spec §5.2, §8.2): the SWA rows of one layer, kept for sliding_window + rewind_margin
// positions.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/sequence_state.hpp"

namespace flashkv::runtime {

// rope_dim: the BF16 trailing channels of kFp8Bf16Rope rows (V4 faithful); 0 otherwise.
WindowRing make_window_ring(backend::RecordFormat format, int64_t dim, int64_t rope_dim, int64_t capacity);

// The held rows a chunk starting at `start` may read: positions in (start − window, start), ascending,
// dequantized into `rows` (dim floats each) with their `positions`. Positions never written (CED decoder
// layers, bounded replay) are simply absent.
void window_history(const WindowRing& ring, int64_t start, int64_t window, std::vector<float>& rows,
                    std::vector<int64_t>& positions);

// Writes `count` records (back to back) for positions start … start + count − 1; only the last `capacity`
// stay.
void append_window_rows(WindowRing& ring, const uint8_t* records, int64_t start, int64_t count);

// Forgets every row at a position >= length.
void truncate_window(WindowRing& ring, int64_t length);

}  // namespace flashkv::runtime
