// CUDA launchers of the three KV-cache record quantizers of spec/MODEL.md §2.2, byte-identical to the
// host codecs in <flashkv/numeric/kv_records.hpp> (same record layout: packed data, then one scale per
// block in block order; E2M1 pairs with the low nibble holding the even channel):
//   - FP8 window rows     (E4M3 data, one UE8M0 scale per 32 channels): fp8_row_bytes(C)     bytes
//   - NVFP4 global entries (E2M1 data, one E4M3 scale per 16 channels): nvfp4_entry_bytes(C) bytes
//   - MXFP4 index keys    (E2M1 data, one E8M0 scale per 32 channels):  mxfp4_key_bytes(C)   bytes
//
// Every launcher takes `n` dense rows of `C` channels (row i starts at element i*C) and `n` dense
// records (record i starts at byte i*record_bytes(C)). Input rows are fp32 or BF16 (raw uint16 bits,
// the engine's activation type); dequantizers write fp32 rows.
//
// Contract:
//   - Pointers are device-accessible and aligned to their element type (fp32 4, BF16 2, records 1);
//     input and output must not overlap. 16-byte aligned rows take the vectorised path, and record
//     stores use the widest access each record's address allows.
//   - n >= 0 (n == 0 launches nothing and accepts null pointers); C is a positive multiple of the
//     record's block (32 for FP8 and MXFP4, 16 for NVFP4) and at most kMaxKvChannels.
//   - Work is enqueued on `stream` and runs asynchronously; the call does not synchronize.
// Errors: bad arguments throw flashkv::Error(kInvalidArgument) naming the function and the argument,
// before anything is enqueued; a failed launch throws flashkv::Error(kDevice). Faults inside the
// kernel (e.g. a host pointer) surface at the caller's next synchronization.
// Threading: launchers keep no state; calls from several threads on different streams are safe.
//
// Variants: every launcher takes an optional KvKernelVariant. All variants write the same bytes (the GPU
// tests run each one); kAuto is the per-launcher choice measured fastest on the H200
// (docs/perf-notes/kv-quant.md) and the others exist for tuning sweeps (bench/bench_kv_quant.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

// The largest channel count the launchers accept (a row is handled by at most one CTA).
constexpr int kMaxKvChannels = 8192;

// Implementation choice of a launcher. A forced variant falls back to kRegisterTiles where its
// preconditions fail (pointers not 16-byte aligned, rows wider than one 256-thread tile), and a
// quantizer treats kStreamingStores as kRegisterTiles.
enum class KvKernelVariant {
  kAuto,             // the tuned choice
  kRegisterTiles,    // each thread loads its chunks of several row tiles into registers, then computes
  kStreamingStores,  // dequantizers: kRegisterTiles with evict-first (.cs) output stores
  kBulkSmall,        // quantizers: shared-memory ring fed by cp.async.bulk, 4 stages of 8 KB;
                     // dequantizers: outputs staged in shared memory, bulk stores of 16 KB
  kBulkMedium,       // ring of 4 x 16 KB; bulk stores of 32 KB
  kBulkLarge,        // ring of 3 x 32 KB; bulk stores of 64 KB
};

// SWA window rows: FP8 E4M3, UE8M0 scale per 32 channels.
void quantize_fp8_rows(const float* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                       KvKernelVariant variant = KvKernelVariant::kAuto);
void quantize_fp8_rows_bf16(const uint16_t* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                            KvKernelVariant variant = KvKernelVariant::kAuto);
void dequantize_fp8_rows(const uint8_t* records, int64_t n, int C, float* rows, cudaStream_t stream,
                         KvKernelVariant variant = KvKernelVariant::kAuto);

// Compressed (global) KV entries: NVFP4, E4M3 scale per 16 channels, no global scale.
void quantize_nvfp4_entries(const float* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                            KvKernelVariant variant = KvKernelVariant::kAuto);
void quantize_nvfp4_entries_bf16(const uint16_t* rows, int64_t n, int C, uint8_t* records,
                                 cudaStream_t stream, KvKernelVariant variant = KvKernelVariant::kAuto);
void dequantize_nvfp4_entries(const uint8_t* records, int64_t n, int C, float* rows, cudaStream_t stream,
                              KvKernelVariant variant = KvKernelVariant::kAuto);

// Index keys: MXFP4, E8M0 scale per 32 channels.
void quantize_mxfp4_keys(const float* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                         KvKernelVariant variant = KvKernelVariant::kAuto);
void quantize_mxfp4_keys_bf16(const uint16_t* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                              KvKernelVariant variant = KvKernelVariant::kAuto);
void dequantize_mxfp4_keys(const uint8_t* records, int64_t n, int C, float* rows, cudaStream_t stream,
                           KvKernelVariant variant = KvKernelVariant::kAuto);

}  // namespace flashkv::cuda
