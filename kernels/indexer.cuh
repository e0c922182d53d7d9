// The CSA2 indexer on the GPU (spec/MODEL.md §5.5): scores of query rows against the owner's index keys,
// the candidate pool of the candidate-source layer, and the pool restriction of the Reindex layers. Each
// launcher computes exactly what the CPU backend's operation of the same name computes
// (lib/backend/cpu/indexer.cpp, candidate_pool.cpp); tests/gpu/test_indexer.cpp compares them.
//
// Scoring: score(s, j) = Σ_h w_h·ReLU(q_h·k_j) for j < n_visible[s], −∞ elsewhere. Keys are read straight
// from their records: 68-byte MXFP4 index keys (E2M1 pairs, low nibble = even channel, then one E8M0
// scale per 32 channels) or plain fp32 rows (clean mode). Numerics: the per-head dot product is
// evaluated in double in the CPU's summation order (eight interleaved partial sums), the head sum in
// double over the heads in order; faithful mode rounds to BF16 after the dot product, after ReLU·w and
// after the head sum, exactly as the CPU. The scores are therefore bit-identical to the CPU backend's.
// When the queries are MXFP4-representable (faithful mode fake-quantizes them, §2.2.3) and the keys are
// MXFP4 records of 128 channels, a tensor-core path computes each 32-channel block product exactly in
// integers; its result is the exact dot product rounded once, which is again the CPU's value whenever
// the CPU's double sum is exact (always, unless the block scales of one head span more than 2^40).
//
// Contract (all launchers): pointers are device pointers; matrices are dense row-major. Work is enqueued
// on `stream` without synchronizing. Errors: bad arguments throw flashkv::Error(kInvalidArgument); a
// failed launch throws flashkv::Error(kDevice). Threading: no state; concurrent calls on different
// streams are safe.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace flashkv::cuda {

enum class IndexKeyFormat { kFp32, kMxfp4 };

struct IndexScoringArgs {
  const float* queries = nullptr;       // [n, heads * dim]
  const float* head_weights = nullptr;  // [n, heads]
  int64_t n = 0;
  int heads = 0;
  int dim = 0;                    // channels per head; a multiple of 32 for MXFP4 keys
  const uint8_t* keys = nullptr;  // key_count records
  IndexKeyFormat key_format = IndexKeyFormat::kMxfp4;
  int64_t key_count = 0;
  const int64_t* n_visible = nullptr;  // [n]
  float* scores = nullptr;             // [n, key_count]
  bool faithful = false;               // BF16 at the reference's cast points
  // Scratch of index_scores_workspace_bytes(n, heads) bytes (0 for one row); null: the call allocates it
  // (stream-ordered, freed after the call).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Test hook: every entry of the tensor-core path's fp32 head sum takes the rare exact redo (double head
  // sum) as if its rounding certificate had failed. Same results, slower; tests/gpu/test_indexer.cpp runs
  // it so that the conformance tests cover that path every time.
  bool force_exact_redo = false;
};

// On the tensor-core path one row (decode) is one kernel launch without scratch memory; more rows are
// prepared by a kernel of their own into the workspace.
size_t index_scores_workspace_bytes(int64_t n, int heads);
void index_scores(const IndexScoringArgs& args, cudaStream_t stream);

// Candidate pool (§5.5): pool[r, j] = 1 iff entry j < n_visible[r] lies in one of the topk_blocks blocks
// of block_size entries with the largest block max (ties: lowest block; only blocks whose max is > −∞),
// the block of the newest visible entry forced to +∞; else 0. scores [rows, m] fp32, pool [rows, m].
size_t candidate_pool_workspace_bytes(int64_t rows, int64_t m, int64_t block_size, int64_t topk_blocks);
void candidate_pool(const float* scores, int64_t rows, int64_t m, const int64_t* n_visible,
                    int64_t block_size, int64_t topk_blocks, uint8_t* pool, void* workspace,
                    size_t workspace_bytes, cudaStream_t stream);

// In place: scores[r, j] = −∞ where pool[r, j] == 0.
void restrict_to_pool(float* scores, int64_t rows, int64_t m, const uint8_t* pool, cudaStream_t stream);

}  // namespace flashkv::cuda
