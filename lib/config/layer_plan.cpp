// make_layer_plan: the role of every backbone layer, derived from the config by the rules of spec/MODEL.md
// §1.2 for V4.1 (a ratio r>0 layer reads the KV of the latest KV source at or below it and the top-k of the
// latest index source at or below it; only index sources after the candidate source are pool-restricted),
// and for V4 by its schedule (every compressed layer owns its KV; CSA layers own an indexer; HCA layers
// attend every visible entry; the first num_hash_layers layers are hash-routed).
#include <algorithm>

#include <flashkv/config.hpp>

namespace flashkv {

namespace {

bool contains(const std::vector<int>& ids, int layer) {
  return std::find(ids.begin(), ids.end(), layer) != ids.end();
}

int engram_slot_of(const ModelConfig& c, int layer) {
  const auto it = std::find(c.engram_layer_ids.begin(), c.engram_layer_ids.end(), layer);
  return it == c.engram_layer_ids.end() ? -1 : static_cast<int>(it - c.engram_layer_ids.begin());
}

AttentionMode mode_of(int ratio, bool is_kv_source, bool is_index_source) {
  if (ratio == 0) return AttentionMode::kSwaOnly;
  if (is_kv_source) return AttentionMode::kFull;
  return is_index_source ? AttentionMode::kReindex : AttentionMode::kReuse;
}

LayerRole v4_role(const ModelConfig& c, int layer) {
  LayerRole role;
  role.index = layer;
  role.ratio = c.compress_ratios[static_cast<size_t>(layer)];
  role.hash_routed = layer < c.num_hash_layers;
  if (role.ratio == 0) return role;  // SWA-only, base RoPE
  const bool csa = role.ratio == c.csa_compress_ratio;
  role.mode = csa ? AttentionMode::kCsa : AttentionMode::kHca;
  role.rope = RopeKind::kCompressYarn;
  role.is_kv_source = true;
  role.kv_owner = layer;
  role.is_index_source = csa;
  role.topk_source = csa ? layer : -1;  // HCA: every visible entry
  role.overlapping_compressor = csa;
  role.indexer_has_compressor = csa;
  return role;
}

LayerPlan make_v4_plan(const ModelConfig& config) {
  LayerPlan plan;
  plan.family = ModelFamily::kDeepseekV4;
  plan.has_hc_head = true;
  plan.num_dspark_stages = config.num_nextn_predict_layers;
  for (int i = 0; i < config.num_hidden_layers; ++i) plan.layers.push_back(v4_role(config, i));
  return plan;
}

}  // namespace

LayerPlan make_layer_plan(const ModelConfig& config) {
  validate_model_config(config, "ModelConfig");
  if (config.family == ModelFamily::kDeepseekV4) return make_v4_plan(config);
  LayerPlan plan;
  plan.candidate_source_layer = config.candidate_source_layer_id;
  plan.first_decoder_layer = config.candidate_source_layer_id;
  plan.num_dspark_stages = config.num_nextn_predict_layers;

  int latest_kv_source = -1;
  int latest_index_source = -1;
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    LayerRole role;
    role.index = i;
    role.ratio = config.compress_ratios[static_cast<size_t>(i)];
    role.is_kv_source = contains(config.kv_source_layer_ids, i);
    role.is_index_source = contains(config.index_source_layer_ids, i);
    role.is_candidate_source = i == config.candidate_source_layer_id;
    if (role.is_kv_source) latest_kv_source = i;
    if (role.is_index_source) latest_index_source = i;

    role.mode = mode_of(role.ratio, role.is_kv_source, role.is_index_source);
    if (role.ratio != 0) {
      role.kv_owner = latest_kv_source;
      role.topk_source = latest_index_source;
      role.rope = RopeKind::kCompressYarn;
    }
    const bool after_candidate = plan.candidate_source_layer >= 0 && i > plan.candidate_source_layer;
    if (role.is_index_source && after_candidate) role.candidate_pool_source = plan.candidate_source_layer;
    if (plan.first_decoder_layer >= 0 && i >= plan.first_decoder_layer) role.side = LayerSide::kDecoder;
    role.engram_slot = engram_slot_of(config, i);
    plan.layers.push_back(role);
  }
  return plan;
}

std::string_view attention_mode_name(AttentionMode mode) noexcept {
  switch (mode) {
    case AttentionMode::kSwaOnly:
      return "swa";
    case AttentionMode::kFull:
      return "full";
    case AttentionMode::kReindex:
      return "reindex";
    case AttentionMode::kReuse:
      return "reuse";
    case AttentionMode::kCsa:
      return "csa";
    case AttentionMode::kHca:
      return "hca";
  }
  return "unknown";
}

std::string_view model_family_name(ModelFamily family) noexcept {
  switch (family) {
    case ModelFamily::kDeepseekV41:
      return "deepseek_v41";
    case ModelFamily::kDeepseekV4:
      return "deepseek_v4";
  }
  return "unknown";
}

std::string_view rope_kind_name(RopeKind kind) noexcept {
  switch (kind) {
    case RopeKind::kBase:
      return "base";
    case RopeKind::kCompressYarn:
      return "compress_yarn";
  }
  return "unknown";
}

std::string_view layer_side_name(LayerSide side) noexcept {
  switch (side) {
    case LayerSide::kEncoder:
      return "encoder";
    case LayerSide::kDecoder:
      return "decoder";
  }
  return "unknown";
}

}  // namespace flashkv
