// CpuBackend — the CPU implementation of backend::Backend. Each group of operations is defined in the file
// named after its mechanism (gemm.cpp, rmsnorm.cpp, rope.cpp, kv_quant.cpp, hadamard.cpp, mhc.cpp,
// mhc_head.cpp, engram.cpp, compressor.cpp, kv_record_write.cpp, indexer.cpp, candidate_pool.cpp, topk.cpp,
// sparse_attention.cpp, output_projection.cpp, router.cpp, moe.cpp). Reductions run in double and results are
// rounded once (see backend.hpp "Numerics"); work is split over the thread pool where it pays (GEMMs,
// experts, attention and scoring rows).
#pragma once

#include "backend/backend.hpp"
#include "backend/cpu/thread_pool.hpp"

namespace flashkv::backend::cpu {

class CpuBackend final : public Backend {
 public:
  // `threads` workers in total (0: hardware concurrency).
  explicit CpuBackend(int threads);

  std::string_view name() const override { return "cpu"; }
  int threads() const override { return pool_.size(); }

  void gemm(ConstMatrix x, ConstMatrix w, Matrix y, OutputCast cast, Rounding rounding) const override;
  void rms_norm(ConstMatrix x, std::span<const float> weight, double eps, Matrix y,
                Rounding rounding) const override;
  void rope(Matrix x, int64_t heads, std::span<const int64_t> positions, const RopeTable& table, bool inverse,
            Rounding rounding) const override;
  void quantize_rows(ConstMatrix x, RecordFormat format, std::span<uint8_t> records,
                     Matrix dequantized) const override;
  void quantize_rope_rows(ConstMatrix x, int64_t rope_dim, std::span<uint8_t> records,
                          Matrix dequantized) const override;
  void fake_quantize(Matrix x, RecordFormat format) const override;
  void norm_rope_quantize(ConstMatrix x, std::span<const float> norm_weight, double eps,
                          std::span<const int64_t> positions, const RopeTable& table, RecordFormat format,
                          int64_t record_rope_dim, std::span<uint8_t> records, Matrix dequantized,
                          Rounding rounding) const override;
  void hadamard_rotate(Matrix x, Rounding rounding) const override;
  void hc_mixer(ConstMatrix streams, const MixerWeights& weights, const MixerShape& shape, Matrix pre,
                Matrix post, Matrix comb, Rounding rounding) const override;
  void hc_collapse(ConstMatrix streams, ConstMatrix pre, Matrix out, Rounding rounding) const override;
  void hc_expand(ConstMatrix y, Matrix streams, ConstMatrix post, ConstMatrix comb,
                 Rounding rounding) const override;
  void hc_head(ConstMatrix streams, const MixerWeights& weights, const MixerShape& shape, Matrix pre,
               Rounding rounding) const override;
  void engram_gather(std::span<const int64_t> rows, int64_t cols, ConstMatrix table,
                     Matrix out) const override;
  void engram_gate(Matrix streams, ConstMatrix kv, std::span<const float> omega, int64_t hc, double eps,
                   Rounding rounding) const override;
  void compressor_pool(ConstMatrix v, ConstMatrix g, int64_t ratio, Matrix pooled,
                       Rounding rounding) const override;
  void index_scores(const IndexScoring& problem, Matrix scores, Rounding rounding) const override;
  void candidate_pool(ConstMatrix scores, std::span<const int64_t> n_visible, int64_t block_size,
                      int64_t topk_blocks, std::span<uint8_t> pool) const override;
  void restrict_to_pool(Matrix scores, std::span<const uint8_t> pool) const override;
  void top_k(ConstMatrix scores, int64_t k, std::span<int32_t> out) const override;
  void sparse_attention(const SparseAttention& problem, Matrix out, Rounding rounding) const override;
  void output_projection(ConstMatrix o, int64_t heads, std::span<const int64_t> positions,
                         const RopeTable& table, ConstMatrix wo_a, int64_t groups, Matrix a,
                         Rounding rounding) const override;
  // output_projection's second step (output_projection.cpp): a[n, groups·rank] with a_g = wo_a[g]·(group g's
  // columns of x), x [n, heads·head_dim] already rotated back; faithful: BF16. Public for a device backend
  // that runs the inverse RoPE itself and keeps this double-accumulated GEMM (kernels/cuda_backend.hpp).
  void grouped_projection(ConstMatrix x, ConstMatrix wo_a, int64_t groups, Matrix a, Rounding rounding) const;
  void route(ConstMatrix v, const RouterWeights& router, std::span<int32_t> experts, Matrix weights,
             Rounding rounding) const override;
  void route_given(ConstMatrix v, const RouterWeights& router, std::span<const int32_t> experts,
                   Matrix weights, Rounding rounding) const override;
  void moe_experts(ConstMatrix v, std::span<const ExpertWeights> experts, std::span<const int32_t> selected,
                   ConstMatrix routing, const ExpertWeights* shared, double swiglu_limit, Matrix out,
                   Rounding rounding) const override;

  // Runs body(i) for i in [0, count) on the pool when `work` (about the multiply-adds involved) is large
  // enough to repay the hand-off, else inline.
  void parallel_for(int64_t count, double work, const std::function<void(int64_t)>& body) const;

 private:
  mutable ThreadPool pool_;
};

}  // namespace flashkv::backend::cpu
