// ForwardPass — the V4.1 forward (spec §3, §5, §6, §7) of one batch of new rows over their sequences' states,
// layer by layer on a Backend; with a deepseek_v4 plan the V4-Flash forward (per-sublayer mHC and hc_head,
// per-head q norm, overlapping CSA / HCA compressors with their position bias, hash-routed MoE; see
// docs/cpu-engine.md "V4-Flash"). Dense work (projections, norms, mHC, MoE, Engram) runs on all rows of the
// batch at once; what reads a sequence's caches (window rings, compressor, indexer, attention) runs per
// segment. Internal to lib/runtime; the Engine (cpu_engine.cpp) builds batches and advances the states
// afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include <flashkv/config.hpp>

#include "backend/backend.hpp"
#include "runtime/engram_hash.hpp"
#include "runtime/forward_trace.hpp"
#include "runtime/model_weights.hpp"
#include "runtime/sequence_state.hpp"

namespace flashkv::runtime {

// The immutable parts of an engine that the forward reads.
struct ModelContext {
  const ModelConfig* config = nullptr;
  const LayerPlan* plan = nullptr;
  const backend::Backend* backend = nullptr;
  const ModelWeights* weights = nullptr;
  const EngramHasher* engram = nullptr;
  backend::RopeTable base_rope;
  backend::RopeTable compress_rope;
  backend::Rounding rounding = backend::Rounding::kClean;
  // Storage of window rows (FP8 / V4 FP8 + BF16 RoPE in faithful mode, fp32 in clean mode).
  backend::RecordFormat row_format = backend::RecordFormat::kFp32;
  int64_t row_rope_dim = 0;
  std::vector<float> unit_weight;  // head_dim ones: the weightless per-head q RMSNorm of V4

  bool faithful() const { return rounding == backend::Rounding::kFaithful; }
  bool v4() const { return plan->family == ModelFamily::kDeepseekV4; }
  backend::MixerShape mixer_shape() const {
    return {config->hc_mult, config->hc_sinkhorn_iters, config->hc_eps, config->rms_norm_eps};
  }
  const backend::RopeTable& rope(const LayerRole& role) const {
    return role.rope == RopeKind::kBase ? base_rope : compress_rope;
  }
};

// New rows [first_row, first_row + count) of one sequence, at positions start … start + count − 1.
struct Segment {
  SequenceState* state = nullptr;
  int64_t first_row = 0;
  int64_t count = 0;
  int64_t start = 0;
  std::map<int, std::vector<int32_t>> selections;  // index-source layer -> [count, index_topk] (this call)
  std::vector<uint8_t> pool;                       // candidate pool [count, pool_width] (this call)
  int64_t pool_width = 0;
};

struct Batch {
  std::vector<Segment> segments;
  std::vector<int64_t> positions;  // one per row
  std::vector<int32_t> tokens;     // one per row (V4 hash routing reads them)
  int64_t rows() const { return static_cast<int64_t>(positions.size()); }
};

// Residual streams [rows, hc·D] and the carried collapse weights `pre` [rows, hc] (spec §3).
struct Activations {
  std::vector<float> streams;
  std::vector<float> pre;
  int64_t rows = 0;
};

// A token's fp32 compressor projections (v, g): from this segment's rows, or from the owner's history when
// the token came in an earlier call (the pending state). Throws kInternal when the history no longer holds
// it.
struct CompressorInput {
  const float* v = nullptr;
  const float* g = nullptr;
};
CompressorInput compressor_input(const Segment& segment, const CompressorHistory& history,
                                 const std::vector<float>& v_rows, const std::vector<float>& g_rows,
                                 int64_t position, int layer);
// Keeps the segment's (v, g) rows (the last history.capacity of them) for later calls.
void remember_inputs(CompressorHistory& history, const Segment& segment, const std::vector<float>& v_rows,
                     const std::vector<float>& g_rows);

class ForwardPass {
 public:
  ForwardPass(const ModelContext& model, Batch& batch, ForwardTrace* trace);

  // §3 step 1: X_i = embed[token] for every stream; pre = (1, 0, …, 0).
  Activations embed(std::span<const int32_t> ids);
  // Blocks [begin, end) on every row; ngrams [rows, max_ngram] (empty without Engram).
  void run_layers(int begin, int end, Activations& x, std::span<const int64_t> ngrams);
  // §3 step 3 for the given rows: logits [rows.size(), vocab].
  std::vector<float> logits(const Activations& x, std::span<const int64_t> rows);

  // Pieces of a block, used on their own by CED prefill (§8.4).
  void engram(const LayerRole& role, Activations& x, std::span<const int64_t> ngrams);
  std::vector<float> attention_input(const LayerRole& role, const Activations& x);
  void publish(const LayerRole& role, backend::ConstMatrix u);

 private:
  void block(const LayerRole& role, Activations& x, std::span<const int64_t> ngrams);
  std::vector<float> attention(const LayerRole& role, backend::ConstMatrix u);
  void select(const LayerRole& role, backend::ConstMatrix u, backend::ConstMatrix cq);
  std::vector<float> pooled_latents(const LayerRole& role, const Segment& segment, const OwnerCache& owner,
                                    int64_t first, int64_t last, const std::vector<float>& v_rows,
                                    const std::vector<float>& g_rows);
  void append_entries(const LayerRole& role, OwnerCache& owner, int64_t first, std::vector<float> latents);
  void store_entries(OwnerCache& owner, const std::vector<float>& latents, const std::vector<float>& keys);
  void store_entries(OwnerCache& owner, const std::vector<float>& latents,
                     const std::function<void(std::span<uint8_t>)>& write_key_records);
  void record_cache(const LayerRole& role, const OwnerCache& owner);
  // V4 (kv_publish_v4.cpp): the main compressor's entries and the CSA indexer's own keys.
  struct V4Compressor;
  void publish_v4(const LayerRole& role, backend::ConstMatrix u);
  std::vector<float> compressed_windows(const LayerRole& role, const V4Compressor& compressor,
                                        const Segment& segment, const CompressorHistory& history,
                                        int64_t first, int64_t last);
  void quantize(backend::ConstMatrix x, backend::RecordFormat format, int64_t rope_dim,
                std::span<uint8_t> records, backend::Matrix dequantized) const;
  std::vector<float> moe(const LayerRole& role, backend::ConstMatrix v);
  std::vector<float> gemm(backend::ConstMatrix x, const Tensor& w, backend::OutputCast cast) const;
  void rms_norm(std::vector<float>& x, int64_t cols, const Tensor& w) const;
  void record(const LayerRole& role, const char* name, std::vector<int64_t> shape, const float* data);

  const ModelContext& model_;
  const ModelConfig& config_;
  const backend::Backend& backend_;
  Batch& batch_;
  ForwardTrace* trace_;
};

}  // namespace flashkv::runtime
