// Row top-k selection on the GPU (spec/MODEL.md §5.5): for each row of `n` scores, the indices of the k
// largest, ties broken by the lowest index, written sorted by ascending index; entries whose score is −∞
// (or NaN, which counts as −∞) and missing columns (k > n) are −1, after the valid ones. This is exactly
// backend::cpu::select_top_k (lib/backend/cpu/topk.cpp); tests/gpu/test_topk.cpp checks it bit for bit.
//
// Mechanism: radix select on the order-preserving uint32 key of each score (−0 and +0 share a key, NaN
// takes −∞'s) in digits of 11, 11 and 10 bits (11 and 5 for BF16) finds the threshold key T and how many
// entries equal to T are taken; a compaction pass in index order then keeps key > T and the first `need`
// entries equal to T, so no sort is needed. Short rows are handled by one CTA each with the keys in shared
// memory; many long rows take two stages (the top k of each 16K-entry segment, one CTA each, then the top
// k of those candidates: the scores are read once); a few long rows are split into chunks over several
// CTAs (global histograms, the last CTA of a row picks the digit).
//
// Contract: scores, out and workspace are device pointers; scores is [rows, n] row-major (fp32, or BF16 as
// raw uint16 bits), out is [rows, k] int32. 0 <= k, n <= 2^31 - 1, rows >= 0. The workspace must hold
// top_k_workspace_bytes(rows, n, k) bytes (may be null when that is 0). Work is enqueued on `stream`; the
// call does not synchronize. Errors: bad arguments throw flashkv::Error(kInvalidArgument); a failed launch
// throws flashkv::Error(kDevice). Threading: no state; concurrent calls on different streams with
// different workspaces are safe.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace flashkv::cuda {

enum class ScoreType { kFp32, kBf16 };

size_t top_k_workspace_bytes(int64_t rows, int64_t n, int64_t k);

void top_k_rows(const void* scores, ScoreType type, int64_t rows, int64_t n, int64_t k, int32_t* out,
                void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace flashkv::cuda
