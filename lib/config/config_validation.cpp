// validate_model_config: every rule a deepseek_v41 or deepseek_v4 config must satisfy before a LayerPlan, a
// KV pool or a tensor inventory is derived from it. Each refusal names the file, the field, its value and the
// rule.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/ranges.h>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>

namespace flashkv {

namespace {

class Rules {
 public:
  Rules(const ModelConfig& c, std::string_view source) : c_(c), source_(source) {}

  void check_all() const {
    check_sizes();
    check_attention_shapes();
    check_numeric_constants();
    check_supported_variants();
    check_weight_block();
    check_layer_lists();
    if (v4()) {
      check_v4_schedule();
      check_v4_hash_layers();
    } else {
      check_compress_ratios();
      check_sources();
      check_owners();
      check_candidate_source();
    }
    check_engram();
    check_dspark();
    check_tokens();
  }

 private:
  template <typename... Args>
  [[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) const {
    fail(ErrorCode::kInvalidConfig, "{}: {}", source_, fmt::format(format, std::forward<Args>(args)...));
  }

  void positive(std::string_view field, int64_t value) const {
    if (value <= 0) refuse("field '{}' = {} must be positive", field, value);
  }

  // Upper bounds far above any real model keep every derived byte count inside 64 bits.
  void at_most(std::string_view field, int64_t value, int64_t limit) const {
    if (value > limit) refuse("field '{}' = {} must be at most {}", field, value, limit);
  }

  void finite_positive(std::string_view field, double value) const {
    if (!std::isfinite(value) || value <= 0)
      refuse("field '{}' = {} must be finite and positive", field, value);
  }

  void multiple_of(std::string_view field, int64_t value, int64_t block, std::string_view why) const {
    if (value % block != 0) refuse("field '{}' = {} must be a multiple of {} ({})", field, value, block, why);
  }

  int ratio_of(int layer) const { return c_.compress_ratios[static_cast<size_t>(layer)]; }

  bool v4() const { return c_.family == ModelFamily::kDeepseekV4; }

  void check_weight_block() const {
    if (c_.weight_block_size != 32 && c_.weight_block_size != 128) {
      fail(ErrorCode::kUnsupported,
           "{}: field 'quantization_config.weight_block_size' = {} is not supported (FP8 tiles of 32 or 128)",
           source_, c_.weight_block_size);
    }
  }

  // V4: 0 (sliding window only), the CSA ratio (overlapping compressor + indexer) or another ratio (HCA).
  // The source lists are derived from the ratios by the parser, so only the ratios themselves can be wrong.
  void check_v4_schedule() const {
    const auto n = c_.compress_ratios.size();
    if (n < static_cast<size_t>(c_.num_hidden_layers)) {
      refuse("field 'compress_ratios' has {} entries, fewer than num_hidden_layers = {}", n,
             c_.num_hidden_layers);
    }
    if (c_.csa_compress_ratio < 2 || c_.csa_compress_ratio > 65536) {
      refuse(
          "field 'compress_rates.compressed_sparse_attention' = {} must be in [2, 65536] (windows of two "
          "half-series overlap by the ratio)",
          c_.csa_compress_ratio);
    }
    for (size_t i = 0; i < n; ++i) {
      const int r = c_.compress_ratios[i];
      if (r < 0 || r > 65536) {
        refuse(
            "field 'compress_ratios[{}]' = {} must be 0 (sliding window), {} (CSA) or another ratio in "
            "[1, 65536] (HCA)",
            i, r, c_.csa_compress_ratio);
      }
    }
  }

  void check_v4_hash_layers() const {
    if (c_.num_hash_layers < 0 || c_.num_hash_layers > c_.num_hidden_layers) {
      refuse("field 'num_hash_layers' = {} is out of range [0, {}] (num_hidden_layers)", c_.num_hash_layers,
             c_.num_hidden_layers);
    }
  }

  bool contains(const std::vector<int>& ids, int layer) const {
    return std::find(ids.begin(), ids.end(), layer) != ids.end();
  }

  void check_sizes() const {
    positive("vocab_size", c_.vocab_size);
    positive("hidden_size", c_.hidden_size);
    positive("num_hidden_layers", c_.num_hidden_layers);
    positive("num_attention_heads", c_.num_attention_heads);
    positive("head_dim", c_.head_dim);
    positive("qk_rope_head_dim", c_.qk_rope_head_dim);
    positive("q_lora_rank", c_.q_lora_rank);
    positive("o_groups", c_.o_groups);
    positive("o_lora_rank", c_.o_lora_rank);
    positive("max_position_embeddings", c_.max_position_embeddings);
    positive("sliding_window", c_.sliding_window);
    positive("index_n_heads", c_.index_n_heads);
    positive("index_head_dim", c_.index_head_dim);
    positive("index_topk", c_.index_topk);
    positive("n_routed_experts", c_.n_routed_experts);
    positive("num_experts_per_tok", c_.num_experts_per_tok);
    positive("moe_intermediate_size", c_.moe_intermediate_size);
    positive("hc_mult", c_.hc_mult);
    positive("hc_sinkhorn_iters", c_.hc_sinkhorn_iters);
    at_most("num_hidden_layers", c_.num_hidden_layers, 65536);
    at_most("head_dim", c_.head_dim, 65536);
    at_most("index_head_dim", c_.index_head_dim, 65536);
    at_most("sliding_window", c_.sliding_window, int64_t{1} << 24);
    if (c_.num_experts_per_tok > c_.n_routed_experts) {
      refuse("field 'num_experts_per_tok' = {} must not exceed n_routed_experts = {}", c_.num_experts_per_tok,
             c_.n_routed_experts);
    }
  }

  void check_attention_shapes() const {
    if (c_.num_key_value_heads != 1) {
      refuse("field 'num_key_value_heads' = {} must be 1 (one shared latent KV head, K = V)",
             c_.num_key_value_heads);
    }
    // V4.1's KV records quantize whole blocks; V4's record (FP8 with one scale per 64 non-RoPE channels,
    // last group partial, BF16 RoPE part) fits any width, and its golden configs use 16-channel heads.
    if (!v4()) {
      multiple_of("head_dim", c_.head_dim, 32, "FP8 window blocks of 32 channels");
      multiple_of("head_dim", c_.head_dim, 16, "NVFP4 entry blocks of 16 channels");
      multiple_of("index_head_dim", c_.index_head_dim, 32, "MXFP4 index-key blocks of 32 channels");
    }
    if (c_.qk_rope_head_dim % 2 != 0) {
      refuse("field 'qk_rope_head_dim' = {} must be even (RoPE rotates channel pairs)", c_.qk_rope_head_dim);
    }
    if (c_.qk_rope_head_dim > c_.head_dim) {
      refuse("field 'qk_rope_head_dim' = {} must not exceed head_dim = {}", c_.qk_rope_head_dim, c_.head_dim);
    }
    if (c_.qk_rope_head_dim > c_.index_head_dim) {
      refuse("field 'qk_rope_head_dim' = {} must not exceed index_head_dim = {}", c_.qk_rope_head_dim,
             c_.index_head_dim);
    }
    if (c_.num_attention_heads % c_.o_groups != 0) {
      refuse("field 'num_attention_heads' = {} must be divisible by o_groups = {}", c_.num_attention_heads,
             c_.o_groups);
    }
  }

  void check_numeric_constants() const {
    finite_positive("rope_theta", c_.rope_theta);
    finite_positive("compress_rope_theta", c_.compress_rope_theta);
    finite_positive("rms_norm_eps", c_.rms_norm_eps);
    finite_positive("hc_eps", c_.hc_eps);
    finite_positive("routed_scaling_factor", c_.routed_scaling_factor);
    finite_positive("gate_temp", c_.gate_temp);
    finite_positive("swiglu_limit", c_.swiglu_limit);
    const RopeScaling& y = c_.rope_scaling;
    if (!std::isfinite(y.factor) || y.factor < 1) {
      refuse("field 'rope_scaling.factor' = {} must be finite and >= 1", y.factor);
    }
    positive("rope_scaling.original_max_position_embeddings", y.original_max_position_embeddings);
    finite_positive("rope_scaling.beta_fast", y.beta_fast);
    finite_positive("rope_scaling.beta_slow", y.beta_slow);
  }

  // Valid values of other DeepSeek variants that this engine does not implement.
  void check_supported_variants() const {
    if (c_.rope_scaling.rope_type != "yarn") {
      fail(ErrorCode::kUnsupported,
           "{}: field 'rope_scaling.rope_type' = '{}' is not supported (expected 'yarn')", source_,
           c_.rope_scaling.rope_type);
    }
    if (c_.scoring_func != "sqrtsoftplus") {
      fail(ErrorCode::kUnsupported,
           "{}: field 'scoring_func' = '{}' is not supported (expected 'sqrtsoftplus')", source_,
           c_.scoring_func);
    }
    if (c_.hidden_act != "silu") {
      fail(ErrorCode::kUnsupported, "{}: field 'hidden_act' = '{}' is not supported (expected 'silu')",
           source_, c_.hidden_act);
    }
    if (c_.n_shared_experts != 1) {
      refuse("field 'n_shared_experts' = {} must be 1 (V4.1 has one shared expert of moe_intermediate_size)",
             c_.n_shared_experts);
    }
  }

  void check_compress_ratios() const {
    const auto n = c_.compress_ratios.size();
    if (n < static_cast<size_t>(c_.num_hidden_layers)) {
      refuse("field 'compress_ratios' has {} entries, fewer than num_hidden_layers = {}", n,
             c_.num_hidden_layers);
    }
    for (size_t i = 0; i < n; ++i) {
      const int r = c_.compress_ratios[i];
      if (r != 0 && r != 1 && r != 2) {
        refuse("field 'compress_ratios[{}]' = {} must be 0, 1 or 2 (V4.1 has no other compression ratio)", i,
               r);
      }
    }
  }

  void check_id_list(std::string_view field, const std::vector<int>& ids, int limit) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= limit) {
        refuse("field '{}' entry {} is out of range [0, {}) (num_hidden_layers)", field, ids[i], limit);
      }
      if (i > 0 && ids[i] == ids[i - 1]) refuse("field '{}' lists layer {} twice", field, ids[i]);
      if (i > 0 && ids[i] < ids[i - 1]) {
        refuse("field '{}' = {} must be sorted ascending", field, fmt::join(ids, ","));
      }
    }
  }

  void check_layer_lists() const {
    check_id_list("kv_source_layer_ids", c_.kv_source_layer_ids, c_.num_hidden_layers);
    check_id_list("index_source_layer_ids", c_.index_source_layer_ids, c_.num_hidden_layers);
    check_id_list("engram_layer_ids", c_.engram_layer_ids, c_.num_hidden_layers);
    check_id_list("dspark_target_layer_ids", c_.dspark_target_layer_ids, c_.num_hidden_layers);
  }

  void check_sources() const {
    for (const int layer : c_.kv_source_layer_ids) {
      if (ratio_of(layer) == 0) {
        refuse(
            "field 'kv_source_layer_ids' lists layer {} whose compress ratio is 0 (a KV source must "
            "compress)",
            layer);
      }
      if (!contains(c_.index_source_layer_ids, layer)) {
        refuse(
            "field 'kv_source_layer_ids' lists layer {} that is missing from index_source_layer_ids "
            "(every KV source is an index source)",
            layer);
      }
    }
    for (const int layer : c_.index_source_layer_ids) {
      if (ratio_of(layer) == 0) {
        refuse("field 'index_source_layer_ids' lists layer {} whose compress ratio is 0", layer);
      }
    }
  }

  // The most recent KV source at or below `layer`, or -1.
  int owner_of(int layer) const {
    int owner = -1;
    for (const int source : c_.kv_source_layer_ids) {
      if (source <= layer) owner = source;
    }
    return owner;
  }

  void check_owners() const {
    // Index sources first, so that an orphaned Reindex layer gets the more specific message.
    for (const int layer : c_.index_source_layer_ids) {
      const int owner = owner_of(layer);
      if (owner < 0 || ratio_of(owner) != ratio_of(layer)) {
        refuse(
            "field 'index_source_layer_ids': index source layer {} (ratio {}) has no owner: no KV source at "
            "or below it with the same ratio{}",
            layer, ratio_of(layer),
            owner < 0
                ? std::string()
                : fmt::format(" (nearest KV source is layer {} with ratio {})", owner, ratio_of(owner)));
      }
    }
    for (int layer = 0; layer < c_.num_hidden_layers; ++layer) {
      const int r = ratio_of(layer);
      if (r == 0) continue;
      const int owner = owner_of(layer);
      if (owner < 0) {
        refuse(
            "field 'compress_ratios': layer {} has ratio {} but no KV source at or below it "
            "(kv_source_layer_ids)",
            layer, r);
      }
      if (ratio_of(owner) != r) {
        refuse(
            "field 'compress_ratios': layer {} has ratio {} but its owner, KV source layer {}, has ratio {} "
            "(owner with different ratio)",
            layer, r, owner, ratio_of(owner));
      }
    }
  }

  void check_candidate_source() const {
    const int cand = c_.candidate_source_layer_id;
    if (cand == -1) return;
    if (cand < -1 || cand >= c_.num_hidden_layers) {
      refuse("field 'candidate_source_layer_id' = {} is out of range [0, {}) (or -1/null for none)", cand,
             c_.num_hidden_layers);
    }
    if (!contains(c_.kv_source_layer_ids, cand) || !contains(c_.index_source_layer_ids, cand)) {
      refuse("field 'candidate_source_layer_id' = {} must be both a KV source and an index source", cand);
    }
    if (ratio_of(cand) != 1) {
      refuse("field 'candidate_source_layer_id' = {} must have compress ratio 1, has {}", cand,
             ratio_of(cand));
    }
    positive("candidate_topk_blocks", c_.candidate_topk_blocks);
    positive("candidate_block_size", c_.candidate_block_size);
    // The pool lists entries of the candidate source's cache, so a pool-restricted layer must read that
    // cache.
    for (const int layer : c_.index_source_layer_ids) {
      if (layer > cand && owner_of(layer) != cand) {
        refuse(
            "field 'index_source_layer_ids': layer {} after candidate source {} reads the KV of layer {}, "
            "but the candidate pool indexes layer {}'s entries",
            layer, cand, owner_of(layer), cand);
      }
    }
  }

  void check_engram() const {
    if (c_.engram_layer_ids.empty()) return;
    if (c_.engram_num_embeddings.size() != c_.engram_layer_ids.size()) {
      refuse("field 'engram_num_embeddings' has {} entries but engram_layer_ids has {} (one table per layer)",
             c_.engram_num_embeddings.size(), c_.engram_layer_ids.size());
    }
    if (c_.engram_max_ngram_size < 2) {
      refuse("field 'engram_max_ngram_size' = {} must be at least 2", c_.engram_max_ngram_size);
    }
    positive("engram_n_heads", c_.engram_n_heads);
    positive("engram_head_dim", c_.engram_head_dim);
    multiple_of("engram_head_dim", c_.engram_head_dim, 32, "FP8 table rows with one scale per 32 columns");
    positive("engram_vocab_size", c_.engram_vocab_size);
    positive("engram_compressed_vocab_size", c_.engram_compressed_vocab_size);
    if (c_.engram_pad_token_id < 0 || c_.engram_pad_token_id >= c_.vocab_size) {
      refuse("field 'engram_pad_token_id' = {} is out of range [0, {}) (vocab_size)", c_.engram_pad_token_id,
             c_.vocab_size);
    }
    // Each hash column is a prime-sized bucket of at least engram_vocab_size rows.
    const int64_t columns = (c_.engram_max_ngram_size - 1) * c_.engram_n_heads;
    for (size_t i = 0; i < c_.engram_num_embeddings.size(); ++i) {
      const int64_t rows = c_.engram_num_embeddings[i];
      if (rows < columns * c_.engram_vocab_size) {
        refuse(
            "field 'engram_num_embeddings[{}]' = {} is smaller than {} hash columns x engram_vocab_size {}",
            i, rows, columns, c_.engram_vocab_size);
      }
    }
  }

  void check_dspark() const {
    if (c_.num_nextn_predict_layers < 0) {
      refuse("field 'num_nextn_predict_layers' = {} must not be negative", c_.num_nextn_predict_layers);
    }
    if (c_.dspark_n_routed_experts > 0 && c_.dspark_num_experts_per_tok > c_.dspark_n_routed_experts) {
      refuse("field 'dspark_num_experts_per_tok' = {} must not exceed dspark_n_routed_experts = {}",
             c_.dspark_num_experts_per_tok, c_.dspark_n_routed_experts);
    }
  }

  void check_tokens() const {
    if (c_.bos_token_id < 0 || c_.bos_token_id >= c_.vocab_size) {
      refuse("field 'bos_token_id' = {} is out of range [0, {}) (vocab_size)", c_.bos_token_id,
             c_.vocab_size);
    }
    if (c_.eos_token_id < 0 || c_.eos_token_id >= c_.vocab_size) {
      refuse("field 'eos_token_id' = {} is out of range [0, {}) (vocab_size)", c_.eos_token_id,
             c_.vocab_size);
    }
  }

  const ModelConfig& c_;
  std::string_view source_;
};

}  // namespace

void validate_model_config(const ModelConfig& config, std::string_view source) {
  Rules(config, source).check_all();
}

}  // namespace flashkv
