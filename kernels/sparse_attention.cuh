// CUDA sparse attention with sink (spec/MODEL.md §5.7, faithful numerics) for the V4.1 shape: 64 query heads
// of 512 channels sharing one latent key = value (MQA). For each query row the keys are its visible window
// rows (FP8 E4M3 records, 528 B, §2.2.1) followed by its selected compressed entries (NVFP4 records, 288 B,
// §2.2.2); one softmax per head runs over that union with exp(sink_h) added to the denominator only, the
// probabilities are rounded fp32 -> BF16 before P·V, and the output is rounded to BF16 — the contract of
// Backend::sparse_attention in faithful mode (lib/backend/backend.hpp). Inverse RoPE is not applied here: it
// stays in Backend::output_projection, as on the CPU engine.
//
// How: one CTA per query row. Key rows are dequantized from their records into shared memory as BF16 tiles
// of 64 keys (both record kinds decode to values that BF16 holds exactly, so no rounding happens there) and
// never written back to device memory. S = Q·Kᵀ and O = P·V run on the tensor cores (BF16 inputs, fp32
// accumulate) with the 64 heads as the M dimension. All logits of the row stay in shared memory (fp32),
// so the softmax is normalised before P is rounded, exactly as the spec orders it. The kOnline variant trades
// that order for one pass over the keys (online softmax: P rounded before normalisation, within a derived
// bound of the faithful result, see the enum).
//
// Contract:
//   - q: [n, 64·512] BF16 bits (the engine's activations after RoPE), row-major, 4-byte aligned.
//   - window_records: a pool of FP8 records; window_rows: [n, window_cap] indices into it, -1 = no key (the
//     caller lists exactly the rows visible to each query, s − W < t ≤ s). May be null when window_cap == 0.
//   - entry_records: a pool of NVFP4 records; selection: [n, topk] indices into it, -1 = none; repeated
//     indices count as repeated keys (as on the CPU). May be null when topk == 0.
//   - Record pools are 16-byte aligned; every listed index is in range (not checked: device data).
//   - window_cap, topk >= 0 and window_cap + topk <= kSparseAttentionMaxKeys; n >= 0 (0 launches nothing).
//   - sink: [64] fp32 logits. out: [n, 64·512] BF16 bits, 4-byte aligned, not overlapping the inputs.
//   - A row with no keys gets an all-zero output (the sink takes the whole mass).
//   - Work is enqueued on `stream`; the call does not synchronize.
// Errors: bad arguments throw flashkv::Error(kInvalidArgument) before anything is enqueued; a failed launch
// throws flashkv::Error(kDevice). Threading: no state; concurrent calls on different streams are safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

constexpr int kSparseAttentionHeads = 64;
constexpr int kSparseAttentionDim = 512;
// Window rows + selected entries per query row: all logits of a row must fit in shared memory (64 heads x
// 640 keys x 4 B = 160 KB next to a 64 KB key tile).
constexpr int kSparseAttentionMaxKeys = 640;

struct SparseAttentionArgs {
  const uint16_t* q = nullptr;
  int64_t n = 0;
  const uint8_t* window_records = nullptr;
  const int32_t* window_rows = nullptr;
  int window_cap = 0;
  const uint8_t* entry_records = nullptr;
  const int32_t* selection = nullptr;
  int topk = 0;
  const float* sink = nullptr;
  uint16_t* out = nullptr;
  // Diagnostics only (null otherwise): 20 device words; CTA 0 of the one-CTA-per-row variants writes
  // clock64() at its start, after the key list, after Q·Kᵀ, after the softmax and at its end (words 0-4), and
  // %globaltimer (ns) at the same points (words 5-9); words 10-18: clock64() at the stage boundaries of the
  // sixth key tile of Q·Kᵀ (10-13) and of P·V (15-18), as sparse_attention.cu's tile_mark calls place them.
  // kOnline: words 0-4 at its start, after the key list, after tile 0's decode, after the loop, at its end;
  // words 10, 14, 17, 11, 12, 13, 15, 16 (in this order) inside the sixth tile's iteration. kSplitKeys: the
  // first row's split-0 CTA, words 0-4 at its start, after the key list, after its statistics are pushed,
  // after P·V, at its end; clock64 in words 13 (tile decoded), 14 (Q·Kᵀ summed), 15 (cluster started),
  // 16 (statistics barrier passed), 11 (partial stored), 12 (partials barrier passed).
  unsigned long long* profile = nullptr;
  // kSplitKeys scratch (optional): at least sparse_attention_workspace_bytes(n, window_cap, topk) bytes of
  // device memory, 16-byte aligned, not used by another call at the same time; when absent (or smaller) the
  // call takes it from cudaMallocAsync on the stream and frees it in stream order. No other variant uses it.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Device scratch the kSplitKeys variant uses for `n` rows (their partial outputs: n·⌈keys/64⌉·128 KB).
size_t sparse_attention_workspace_bytes(int64_t n, int window_cap, int topk);

// Implementation choice; every variant computes the same function (the GPU test runs each against the CPU),
// kOnline within a looser bound.
enum class SparseAttentionVariant {
  kAuto,    // measured fastest (H200, 2026-11-30): kSplitKeys while its row clusters run in at most two
            // waves (14 rows on the H200; faithful order), kOnline above (its bound) — so CudaBackend's
            // numerics depend on the row count and the device (sparse_attention_auto_variant)
  kWgmma,   // one CTA per row, warpgroup wgmma (sm_90a): Q and P from registers, K/V tiles by descriptor
  kOnline,  // one CTA per row, single pass (each key tile decoded once), online softmax: P is rounded to
            // BF16 before normalisation, so NOT the faithful order — within the bound that
            // tests/gpu/test_sparse_attention.cpp derives ((2^-7 + 2^-10)·Σ p|v| + 1 BF16 ulp per element)
  kSplitKeys,  // small batches: one CTA per (row, 64 keys), the CTAs of a row one thread-block cluster
               // (one launch; statistics exchanged on chip, partial outputs through the workspace or
               // cudaMallocAsync scratch), statistics combined exactly; where such clusters cannot be
               // scheduled, kWgmma
  // Diagnostic / portable: warp-level mma.sync m16n8k16 with the fp32 reference decoders; the path the
  // compute_90 PTX takes on a device without wgmma.
  kMmaSync,
};

void sparse_attention(const SparseAttentionArgs& args, cudaStream_t stream,
                      SparseAttentionVariant variant = SparseAttentionVariant::kAuto);

// Diagnostics: how many query rows kSplitKeys runs at once on the current device (its row clusters that fit
// side by side) for rows of window_cap + topk keys; 0 where it runs kWgmma instead (no such cluster fits, or
// not sm_90a) or the sizes are invalid. Throws flashkv::Error(kDevice) when the device cannot be queried.
int sparse_attention_split_clusters(int window_cap, int topk);

// The variant kAuto runs for `n` rows on the current device (its numerics: see the enum). Throws
// flashkv::Error(kDevice) when the device cannot be queried.
SparseAttentionVariant sparse_attention_auto_variant(int64_t n);

}  // namespace flashkv::cuda
