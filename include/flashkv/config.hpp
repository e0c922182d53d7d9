// flashkv model configuration: ModelConfig (config.json), LayerPlan (the role of every layer) and
// MemoryReport (cache and weight footprint derived from the config).
//
// Contract:
// - load_model_config / parse_model_config read a Hugging Face config.json of model_type `deepseek_v41`
//   (text fields at the top level or nested in `text_config`; `vision_config` and other out-of-scope keys are
//   ignored) or `deepseek_v4` (DeepSeek-V4-Flash, flat; docs/config.md lists the accepted spellings) and
//   return a ModelConfig that has passed validate_model_config. Field names are those of the
//   released checkpoint (see docs/config.md for the source of every name). Fields that determine tensor
//   shapes or the layer schedule are required; numeric constants that do not (rope_theta, rms_norm_eps, ...)
//   default to the values of spec/MODEL.md §1.1 for the config's family when absent.
// - make_layer_plan derives every layer's role from the config by the rules of spec/MODEL.md §1.2 (V4.1) or
//   the V4-Flash schedule (ratio 0 SWA, CSA ratio = overlapping compressor + indexer, other ratios HCA; the
//   first num_hash_layers layers hash-routed); nothing is hard-coded for the official schedules.
// - make_memory_report computes record sizes from channel counts (§2.2) and sums them per the plan.
// Ownership: all types are plain values; nothing refers to the JSON text or the file after parsing.
// Threading: free functions are pure; values may be shared read-only between threads.
// Errors: flashkv::Error with kNotFound (missing file), kIo (unreadable file), kInvalidConfig (bad JSON,
// missing/ill-typed field, broken rule: the message names the file, the field and the rule), kUnsupported
// (a model_type other than deepseek_v41 / deepseek_v4).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashkv {

// YaRN frequency scaling applied to the compress RoPE of ratio != 0 layers (spec §2.3). No attention mscale.
struct RopeScaling {
  std::string rope_type = "yarn";
  double factor = 16.0;
  int64_t original_max_position_embeddings = 65536;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// `quantization_config` of a checkpoint, when the file carries one. Only descriptive: the loader trusts the
// tensors' own dtypes and shapes, this is shown by `flashkv info` and cross-checked by the loader.
struct QuantizationConfig {
  std::string quant_method;                // e.g. "fp8"
  std::string fmt;                         // e.g. "e4m3"
  std::string scale_fmt;                   // e.g. "ue8m0"
  std::string activation_scheme;           // e.g. "dynamic"
  std::vector<int64_t> weight_block_size;  // e.g. {32, 32}; empty when absent
  std::string expert_dtype;                // "fp4" (MXFP4 routed experts) or "fp8"; empty when absent
};

// The model families flashkv serves. They share most of the machinery; the differences are spelled out by
// the LayerPlan (modes, hash routing, hc_head) and the tensor inventory.
enum class ModelFamily {
  kDeepseekV41,  // model_type deepseek_v41: CSA2 schedule, single-pass mHC, Engram, candidate pool
  kDeepseekV4,   // model_type deepseek_v4: SWA / CSA (ratio 4, overlapping) / HCA layers, hash-routed MoE
                 // layers, per-sublayer mHC + hc_head
};

// "deepseek_v41" / "deepseek_v4".
std::string_view model_family_name(ModelFamily family) noexcept;

// The text model of a deepseek_v41 or deepseek_v4 checkpoint. Layer ids are 0-based indices into the backbone
// (and, for compress_ratios, the DSpark/MTP stages that follow it).
struct ModelConfig {
  std::string model_type;  // top-level model_type: "deepseek_v41" or "deepseek_v4"
  std::vector<std::string> architectures;
  ModelFamily family = ModelFamily::kDeepseekV41;

  // Shapes.
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_hidden_layers = 0;  // backbone layers only (DSpark stages are counted in num_nextn_predict_layers)
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 1;  // V4.1: one latent KV head (K = V)
  int64_t head_dim = 0;
  int64_t qk_rope_head_dim = 0;  // RoPE on the last qk_rope_head_dim channels
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;

  // Positions.
  double rope_theta = 10000.0;            // ratio-0 (SWA-only) layers, no YaRN
  double compress_rope_theta = 160000.0;  // ratio != 0 layers, with rope_scaling
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 1048576;
  int64_t sliding_window = 0;  // window rows per layer, query token included

  // CSA2 schedule (V4.1) / attention schedule (V4).
  std::vector<int> compress_ratios;  // num_hidden_layers backbone entries, then one per DSpark/MTP stage
  // V4: not read from the file but derived by the parser: every ratio != 0 layer owns its KV (KV source),
  // every CSA layer owns an indexer (index source).
  std::vector<int> kv_source_layer_ids;
  std::vector<int> index_source_layer_ids;
  // V4: layers whose ratio equals this are CSA (overlapping compressor + indexer); other ratio != 0 layers
  // are HCA. 4 in the release (the reference's rule: overlap and indexer iff ratio == 4); transformers'
  // compress_rates["compressed_sparse_attention"] when the file uses layer_types. Unused for V4.1.
  int csa_compress_ratio = 4;
  int candidate_source_layer_id = -1;  // -1: no candidate pool
  int64_t candidate_topk_blocks = 0;
  int64_t candidate_block_size = 0;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  // MoE.
  int num_hash_layers = 0;  // V4: the first num_hash_layers layers select experts by ffn.gate.tid2eid[token]
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.5;
  double gate_temp = 1.0;  // router logits are divided by it (TRT-LLM name); 1 in the release
  std::string hidden_act = "silu";
  double swiglu_limit = 10.0;

  // Norms and mHC.
  double rms_norm_eps = 1e-20;
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;

  // Engram (empty engram_layer_ids: no Engram).
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;  // table rows, one per engram layer
  int64_t engram_max_ngram_size = 0;
  int64_t engram_n_heads = 0;
  int64_t engram_head_dim = 0;
  int64_t engram_vocab_size = 0;
  int64_t engram_compressed_vocab_size = 0;
  int64_t engram_pad_token_id = 0;

  // DSpark (MTP) draft stages; not part of the backbone LayerPlan.
  int num_nextn_predict_layers = 0;
  int64_t dspark_block_size = 0;
  int64_t dspark_noise_token_id = -1;
  std::vector<int> dspark_target_layer_ids;
  int64_t dspark_markov_rank = 0;
  int64_t dspark_n_routed_experts = 0;
  int64_t dspark_num_experts_per_tok = 0;

  // Tokens and storage.
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  std::optional<int64_t> pad_token_id;
  std::optional<int64_t> image_token_id;
  bool tie_word_embeddings = false;
  std::string torch_dtype;  // "bfloat16" etc.; empty when absent
  std::optional<QuantizationConfig> quantization_config;
  // Edge of the square FP8 weight tiles (one E8M0 scale per tile): quantization_config.weight_block_size
  // when present, else 32 (V4.1) / 128 (V4).
  int64_t weight_block_size = 32;
};

// Reads PATH/config.json when PATH is a directory, else PATH itself. Validates (see validate_model_config).
ModelConfig load_model_config(const std::filesystem::path& path);

// Parses config.json text; `source` names the file in error messages. Validates.
ModelConfig parse_model_config(std::string_view json_text, std::string_view source);

// Throws Error(kInvalidConfig) naming `source`, the field and the broken rule; returns normally otherwise.
void validate_model_config(const ModelConfig& config, std::string_view source);

// ---------------------------------------------------------------------------------------------------------
// LayerPlan

enum class AttentionMode {
  kSwaOnly,  // ratio 0: window only, base RoPE
  kFull,     // V4.1 KV source: computes and stores compressed KV + index keys, scores with its own indexer
  kReindex,  // V4.1 index source but not KV source: own indexer over its owner's keys, own top-k
  kReuse,    // V4.1: reads the owner's KV and the top-k of the latest index source at or below it
  kCsa,      // V4 compressed sparse attention: own overlapping compressor, own indexer (with its own
             // compressor) choosing the top-k of its own entries
  kHca,      // V4 heavily compressed attention: own non-overlapping compressor, attends every visible entry
};

enum class RopeKind {
  kBase,          // rope_theta, no YaRN (ratio 0)
  kCompressYarn,  // compress_rope_theta with rope_scaling (ratio != 0)
};

// Causal encoder-decoder split (spec §8.1): decoder = layers at or after the candidate source layer, whose
// ratio-1 compressor turns the encoder's last hidden state into the decoder's global KV. Without a candidate
// source every layer is on the encoder side (no CED split).
enum class LayerSide { kEncoder, kDecoder };

struct LayerRole {
  int index = 0;
  int ratio = 0;
  AttentionMode mode = AttentionMode::kSwaOnly;
  int kv_owner = -1;     // layer whose compressed KV and index keys this layer reads; -1 for ratio 0
  int topk_source = -1;  // layer whose top-k selection this layer uses; -1 for ratio 0 and for V4 HCA
                         // (which attends every visible entry)
  int candidate_pool_source = -1;  // layer whose candidate pool restricts this layer's scores; -1 if none
  bool is_kv_source = false;
  bool is_index_source = false;
  bool is_candidate_source = false;
  int engram_slot = -1;  // position in engram_layer_ids; -1 when the layer has no Engram
  LayerSide side = LayerSide::kEncoder;
  RopeKind rope = RopeKind::kBase;
  // V4 only. A CSA compressor pools windows of 2*ratio tokens with stride ratio: its projections are
  // 2*head_dim wide (two half-window series) and its ape is [ratio, 2*head_dim].
  bool overlapping_compressor = false;
  // V4 only: the indexer pools its own keys with its own (overlapping) compressor instead of projecting the
  // main compressor's latents (V4.1's indexer.wk).
  bool indexer_has_compressor = false;
  // V4 only: experts are chosen by ffn.gate.tid2eid[token id] (the gate still weights them).
  bool hash_routed = false;

  bool has_engram() const { return engram_slot >= 0; }
};

struct LayerPlan {
  ModelFamily family = ModelFamily::kDeepseekV41;
  // V4: the mHC mixer runs per sublayer (each site applies its own pre) and hc_head_{fn,base,scale}
  // collapses the streams before the final norm. V4.1: single-pass mHC, no hc_head.
  bool has_hc_head = false;
  std::vector<LayerRole> layers;  // one per backbone layer, index order
  int candidate_source_layer = -1;
  int first_decoder_layer = -1;  // == candidate_source_layer; -1 when there is no CED split
  int num_dspark_stages = 0;     // draft stages after the backbone (SWA-only when their ratio is 0)
};

// Derives the plan from a validated config. Throws Error(kInvalidConfig) if the config breaks a schedule
// rule.
LayerPlan make_layer_plan(const ModelConfig& config);

// Stable lower-case names used by `flashkv info` text and JSON: "swa", "full", "reindex", "reuse", "csa",
// "hca"; "base", "compress_yarn"; "encoder", "decoder".
std::string_view attention_mode_name(AttentionMode mode) noexcept;
std::string_view rope_kind_name(RopeKind kind) noexcept;
std::string_view layer_side_name(LayerSide side) noexcept;

// ---------------------------------------------------------------------------------------------------------
// MemoryReport

// One KV-source layer's share of the global (persistent) KV cache.
struct KvSourceFootprint {
  int layer = 0;
  int ratio = 0;                 // one entry per `ratio` tokens
  uint64_t entry_bytes = 0;      // compressed entry (V4.1: NVFP4; V4: FP8 + BF16 RoPE part)
  uint64_t index_key_bytes = 0;  // MXFP4 index key; 0 for a V4 HCA layer (no indexer)
};

// Parameter counts per component, from the config shapes (backbone only; DSpark counted separately).
struct ParameterCounts {
  uint64_t embedding = 0;  // embed
  uint64_t head = 0;       // lm head
  uint64_t attention = 0;  // all layers: q/kv/o projections, norms, sink
  uint64_t compressor_indexer = 0;
  uint64_t mhc = 0;
  uint64_t router = 0;
  uint64_t routed_experts = 0;
  uint64_t shared_experts = 0;
  uint64_t norms = 0;  // attn_norm, ffn_norm, final norm
  uint64_t engram_tables = 0;
  uint64_t engram_projections = 0;
  uint64_t total = 0;
  uint64_t active_per_token = 0;  // top-k routed experts instead of all, Engram rows read instead of tables
};

// Record sizes. V4.1 (spec §2.2): NVFP4 entries (288 B for 512 channels), MXFP4 index keys (68 B for 128),
// FP8 window rows (528 B). V4 (spec §2.2 last paragraph, §8.2): entries and window rows alike are the
// non-RoPE channels in FP8 with one UE8M0 scale per 64, plus the RoPE channels in BF16, padded to 8 bytes
// (584 B for 512/64); index keys MXFP4 as in V4.1 (the spec's assumption for its ≈3514 B/token figure).
struct MemoryReport {
  uint64_t kv_entry_bytes = 0;    // compressed entry of head_dim channels (288 V4.1, 584 V4)
  uint64_t index_key_bytes = 0;   // MXFP4 record of index_head_dim channels (68 for 128)
  uint64_t window_row_bytes = 0;  // window row of head_dim channels (528 V4.1, 584 V4)
  std::vector<KvSourceFootprint> kv_sources;
  // Σ (entry + key) / ratio over KV sources (890 official V4.1, ≈3514 official V4)
  double global_kv_bytes_per_token = 0;
  uint64_t window_bytes_per_session = 0;  // layers × sliding_window × window row
  // fp32 pending compressor inputs at most held between calls: V4.1 ratio-r owners (r-1) tokens × (v, g);
  // V4 HCA (r-1) tokens × (kv, gate); V4 CSA and its indexer's compressor (r-1) tokens of both half-window
  // series plus the previous window's carried half (r tokens), each × (kv, gate).
  uint64_t compressor_state_bytes_per_session = 0;
  ParameterCounts parameters;
  // Estimate by storage format (FP8 tiles of weight_block_size, MXFP4 experts, BF16/FP32 rest)
  uint64_t weight_bytes = 0;

  // Exact global KV bytes for a sequence of `tokens` tokens (only complete groups publish entries).
  uint64_t global_kv_bytes(uint64_t tokens) const;
};

MemoryReport make_memory_report(const ModelConfig& config, const LayerPlan& plan);

}  // namespace flashkv
