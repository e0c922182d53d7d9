// CudaBackend — backend::Backend with these operations on the GPU:
//   - the CSA2 indexer: index_scores, candidate_pool, restrict_to_pool, top_k (indexer.cuh, topk.cuh);
//   - sparse attention (sparse_attention.cuh; V4.1's faithful shape, the CPU otherwise);
//   - the KV write path: norm_rope_quantize (the window rows' RMSNorm, RoPE and records in one call:
//     rms_norm.cuh, rope.cuh and the record launchers on one device copy of the rows), quantize_rows (FP8
//     window rows, NVFP4 entries, MXFP4 index keys: kv_quant.cuh), quantize_rope_rows (V4's FP8+BF16
//     record: kv_record_v4.cuh), fake_quantize (the same launchers, encode then decode), rope (rope.cuh,
//     forward and inverse; only the rotated channels cross to the device, the others' BF16 cast point is
//     applied on the host) and compressor_pool (compressor_pool.cuh);
//   - output_projection's inverse RoPE (rope above, inverse), followed by the grouped wo_a projection on the
//     CPU (CpuBackend::grouped_projection): its double-accumulated GEMM, rounded once, is what keeps the
//     engine's tokens and logits identical to the CPU backend's, which a GPU GEMM would not;
// and every other operation delegated to a CpuBackend (GEMMs, the standalone RMSNorm, mHC, Engram, MoE,
// routing, hadamard_rotate), so the engine runs unchanged on it (lib/runtime calls only the Backend
// interface). The standalone rms_norm stays on the CPU on purpose: the engine calls it on hidden rows whose
// copy to the device and back costs more than the CPU's norm while views are on the host.
// What stays on the CPU inside the GPU operations: calls below the size thresholds (DeviceThresholds below:
// at decode most KV write calls are one row, which the CPU finishes before a device round trip would),
// quantize_rows of kFp32 records (clean mode: a copy), record widths the launchers do not take (not a
// multiple of the record's block, > kMaxKvChannels), shapes the sparse attention kernel does not take, and
// the rare RoPE rows / pooled groups whose GPU value could not be certified equal to the CPU's (below) or is
// not finite (NaN payloads differ between the two).
//
// Memory: the Backend contract passes host views. The KV write operations stage through pinned buffers
// reused across calls (pinned_staging.hpp): inputs are copied into a page-locked buffer, cross in one
// host-to-device copy, the kernels run on its device mirror, and all results come back in one device-to-host
// copy and one synchronization, on the calling thread's per-thread default stream; arrays of 256 KB and more
// (prefill) are copied straight between the caller's memory and the device buffer instead. The buffers are
// held until the backend is destroyed (the largest call so far, per concurrently calling thread). The indexer
// and attention operations copy their inputs to stream-ordered device allocations and back. Every call has
// finished with the host views when it returns. Results equal the CPU backend's: bit-identical scores,
// pools, restrictions and top-k lists (tests/gpu/test_indexer.cpp, test_topk.cpp); byte-identical records and
// bit-identical dequantized rows, fake-quantized rows, RoPE rows, pooled rows and output projections, in both
// numerics modes (tests/gpu/test_cuda_backend_ops.cpp); sparse attention within the tolerances documented in
// kernels/sparse_attention.cuh: up to 8 query rows the faithful order (P normalised, then rounded to BF16;
// a P value can differ by one BF16 ulp where fp32 p sits on a rounding midpoint), from 9 rows the one-pass
// kernel (online softmax, P rounded before normalisation: (2^-7 + 2^-10)·Σ_t p_t|v_t| + 1 BF16 ulp per
// output element).
// RoPE and pooling use cos/sin/exp, where libdevice and glibc may differ in the last double bit: their
// kernels bound that difference and flag a row whose fp32 rounding it could change (exact_rounding.cuh;
// measured on random data: 0.5% of 64-head RoPE rows in clean mode, 1.8% of pooled groups, mostly at ratio
// 128: docs/perf-notes/backend-kv-write.md); the CPU backend recomputes such RoPE rows, and the uncertain
// channels of such groups (each channel of a pooled row is an independent computation), so results stay
// bit-identical (recomputed_rows() counts the rows and groups).
//
// Threading: immutable after construction but for the recomputed_rows() counter (atomic) and the staging
// pool (mutex-guarded; each call holds its own buffers); concurrent calls from several threads are safe
// (each thread uses its own default stream, the CPU backend's pool accepts concurrent callers). Every call
// must run with the CUDA device current at construction (the staging buffers live there).
// Errors: CUDA failures throw flashkv::Error(kDevice) (kOutOfMemory for allocations).
//
// This file is C++20 host code (backend.hpp needs <span>); the kernels live in C++17 .cu files behind
// plain launchers.
#pragma once

#include <atomic>
#include <memory>

#include "backend/backend.hpp"

namespace flashkv::backend::cpu {
class CpuBackend;
}

namespace flashkv::cuda {

class StagingPool;

// Sizes below which a KV write operation runs the CPU backend's implementation instead (identical results):
// there the CPU finishes before the device call's fixed cost (one copy each way, the launches, one
// synchronization) is paid. Taken from the measured crossover of the two backends
// (docs/perf-notes/backend-kv-write.md; tests/gpu/test_cuda_backend_ops.cpp prints it each GPU round).
struct DeviceThresholds {
  // quantize_rows, quantize_rope_rows, fake_quantize, norm_rope_quantize: rows·cols
  int64_t record_elements = 0;
  // rope (and output_projection's inverse RoPE): rows
  int64_t rope_rows = 0;
  // compressor_pool: input elements, groups·ratio·dim
  int64_t pool_elements = 0;
};
// The default, from the crossover measured in session 4 rounds 1 and 2 (H200 host; device call = staged copy
// in, kernels, copy out, sync; the host's speed varied between the rounds): records 3-8 rows of 512 (CPU ~4-9
// us per row; device 17-38 us at one row, +0.3-0.5 us per row), so 3072 elements (6 rows); RoPE ~18-20 rows
// at one head (CPU ~1 us per row; device 12 us + 0.3 us per row), a wash at every row count for 64 heads (the
// host pass over the unrotated channels is the cost on both sides), so 20 rows; pooling ~2400-2700 input
// elements (CPU ~9-10 ns per element, device 21-25 us at 2K-4K), so 2560.
inline constexpr DeviceThresholds kDefaultThresholds{3072, 20, 2560};
// Every call the launchers take runs on the device (the conformance tests, the bench's device column).
inline constexpr DeviceThresholds kAlwaysDevice{};

class CudaBackend final : public backend::Backend {
 public:
  // `cpu_threads` workers for the delegated operations (0: hardware concurrency).
  explicit CudaBackend(int cpu_threads, DeviceThresholds thresholds = kDefaultThresholds);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  int threads() const override;
  const DeviceThresholds& thresholds() const { return thresholds_; }

  // ---- on the GPU
  void index_scores(const backend::IndexScoring& problem, backend::Matrix scores,
                    backend::Rounding rounding) const override;
  void candidate_pool(backend::ConstMatrix scores, std::span<const int64_t> n_visible, int64_t block_size,
                      int64_t topk_blocks, std::span<uint8_t> pool) const override;
  void restrict_to_pool(backend::Matrix scores, std::span<const uint8_t> pool) const override;
  void top_k(backend::ConstMatrix scores, int64_t k, std::span<int32_t> out) const override;

  // ---- sparse attention (cudaattn) ----
  void sparse_attention(const backend::SparseAttention& problem, backend::Matrix out,
                        backend::Rounding rounding) const override;
  // ---- end sparse attention ----

  // ---- KV write path (wire): quantizers, RoPE, compressor pooling ----
  void quantize_rows(backend::ConstMatrix x, backend::RecordFormat format, std::span<uint8_t> records,
                     backend::Matrix dequantized) const override;
  void quantize_rope_rows(backend::ConstMatrix x, int64_t rope_dim, std::span<uint8_t> records,
                          backend::Matrix dequantized) const override;
  void fake_quantize(backend::Matrix x, backend::RecordFormat format) const override;
  void norm_rope_quantize(backend::ConstMatrix x, std::span<const float> norm_weight, double eps,
                          std::span<const int64_t> positions, const backend::RopeTable& table,
                          backend::RecordFormat format, int64_t record_rope_dim, std::span<uint8_t> records,
                          backend::Matrix dequantized, backend::Rounding rounding) const override;
  void rope(backend::Matrix x, int64_t heads, std::span<const int64_t> positions,
            const backend::RopeTable& table, bool inverse, backend::Rounding rounding) const override;
  void compressor_pool(backend::ConstMatrix v, backend::ConstMatrix g, int64_t ratio, backend::Matrix pooled,
                       backend::Rounding rounding) const override;
  // Rows (RoPE, norm_rope_quantize) and pooled groups with values the GPU could not certify equal to the
  // CPU's, which the CPU recomputed (whole rows; a group's uncertain channels), since construction
  // (diagnostics for the tests).
  int64_t recomputed_rows() const { return recomputed_rows_.load(); }
  // The inverse RoPE through rope() above, then CpuBackend::grouped_projection.
  void output_projection(backend::ConstMatrix o, int64_t heads, std::span<const int64_t> positions,
                         const backend::RopeTable& table, backend::ConstMatrix wo_a, int64_t groups,
                         backend::Matrix a, backend::Rounding rounding) const override;
  // ---- end KV write path ----

  // ---- CPU delegation (every other Backend operation; add new ones here)
  void gemm(backend::ConstMatrix x, backend::ConstMatrix w, backend::Matrix y, backend::OutputCast cast,
            backend::Rounding rounding) const override;
  void rms_norm(backend::ConstMatrix x, std::span<const float> weight, double eps, backend::Matrix y,
                backend::Rounding rounding) const override;
  void hadamard_rotate(backend::Matrix x, backend::Rounding rounding) const override;
  void hc_head(backend::ConstMatrix streams, const backend::MixerWeights& weights,
               const backend::MixerShape& shape, backend::Matrix pre,
               backend::Rounding rounding) const override;
  void hc_mixer(backend::ConstMatrix streams, const backend::MixerWeights& weights,
                const backend::MixerShape& shape, backend::Matrix pre, backend::Matrix post,
                backend::Matrix comb, backend::Rounding rounding) const override;
  void hc_collapse(backend::ConstMatrix streams, backend::ConstMatrix pre, backend::Matrix out,
                   backend::Rounding rounding) const override;
  void hc_expand(backend::ConstMatrix y, backend::Matrix streams, backend::ConstMatrix post,
                 backend::ConstMatrix comb, backend::Rounding rounding) const override;
  void engram_gather(std::span<const int64_t> rows, int64_t cols, backend::ConstMatrix table,
                     backend::Matrix out) const override;
  void engram_gate(backend::Matrix streams, backend::ConstMatrix kv, std::span<const float> omega, int64_t hc,
                   double eps, backend::Rounding rounding) const override;
  void route(backend::ConstMatrix v, const backend::RouterWeights& router, std::span<int32_t> experts,
             backend::Matrix weights, backend::Rounding rounding) const override;
  void route_given(backend::ConstMatrix v, const backend::RouterWeights& router,
                   std::span<const int32_t> experts, backend::Matrix weights,
                   backend::Rounding rounding) const override;
  void moe_experts(backend::ConstMatrix v, std::span<const backend::ExpertWeights> experts,
                   std::span<const int32_t> selected, backend::ConstMatrix routing,
                   const backend::ExpertWeights* shared, double swiglu_limit, backend::Matrix out,
                   backend::Rounding rounding) const override;
  // ---- end CPU delegation

 private:
  std::unique_ptr<backend::cpu::CpuBackend> cpu_;
  DeviceThresholds thresholds_;
  std::unique_ptr<StagingPool> staging_;  // the KV write path's pinned buffers
  mutable std::atomic<int64_t> recomputed_rows_{0};
};

// A CudaBackend on the current CUDA device.
std::unique_ptr<backend::Backend> make_cuda_backend(int cpu_threads,
                                                    DeviceThresholds thresholds = kDefaultThresholds);

}  // namespace flashkv::cuda
