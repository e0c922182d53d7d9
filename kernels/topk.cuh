// Row top-k selection on the GPU (spec/MODEL.md §5.5): for each row of `n` scores, the indices of the k
// largest, ties broken by the lowest index, written sorted by ascending index; entries whose score is −∞
// (or NaN, which counts as −∞) and missing columns (k > n) are −1, after the valid ones. This is exactly
// backend::cpu::select_top_k (lib/backend/cpu/topk.cpp); tests/gpu/test_topk.cpp checks it bit for bit.
//
// Mechanism: a lower bound L on the threshold is guessed from a sample of the row (its max and a log-scale
// histogram of the distances to it, aiming at 2k-5k entries >= L); the entries >= L are gathered in index
// order (the scores are read once) and the exact radix select (digits of key − min candidate key) plus an
// index-order compaction runs on those candidates only. The guess is verified, never trusted: with at least
// k entries >= L the top k are all candidates; otherwise every valid entry is taken (short rows) or the row
// takes the exact radix select over all its entries (long rows). Rows of n <= 16384 take one CTA each with
// the row in registers (one launch); longer rows are cut into chunks (vector loads when rows are 16-byte
// aligned): a filter kernel (each CTA taking the row's sample for L) and a merge kernel (one CTA per row) as
// its programmatic dependent launch; k > 2048 with n > 16384 takes the whole-row radix select.
//
// Contract: scores, out and workspace are device pointers; scores is [rows, n] row-major (fp32, or BF16 as
// raw uint16 bits), out is [rows, k] int32. 0 <= k, n <= 2^31 - 1, rows >= 0. The workspace must hold
// top_k_workspace_bytes(rows, n, k) bytes (may be null when that is 0; no initialisation needed; 64 KB
// per filter CTA of the long-row path, at most max(rows, 264) x 64 KB; none for short rows). Work is enqueued
// on `stream`; the call does not synchronize. Errors: bad arguments throw flashkv::Error(kInvalidArgument); a
// failed launch throws flashkv::Error(kDevice). Threading: no state; concurrent calls on different streams
// with different workspaces are safe.
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
