// The JSON document of `flashkv info --json`. Keys documented in docs/config.md; absent layer references are
// null (the C++ API spells them -1).
#include <cmath>

#include <nlohmann/json.hpp>

#include "info_format.hpp"

namespace flashkv::cli {

namespace {

using json = nlohmann::ordered_json;

json layer_ref(int layer) {
  return layer < 0 ? json(nullptr) : json(layer);
}

// Whole byte counts print as integers (890, not 890.0); fractional ones (26.5 for ratio-2 tiny) as numbers.
json exact_number(double value) {
  if (std::floor(value) == value && std::fabs(value) < 9.0e15) return json(static_cast<int64_t>(value));
  return json(value);
}

json config_json(const ModelConfig& c) {
  json j = {
      {"model_type", c.model_type},
      {"family", model_family_name(c.family)},
      {"architectures", c.architectures},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"qk_rope_head_dim", c.qk_rope_head_dim},
      {"q_lora_rank", c.q_lora_rank},
      {"o_groups", c.o_groups},
      {"o_lora_rank", c.o_lora_rank},
      {"rope_theta", c.rope_theta},
      {"compress_rope_theta", c.compress_rope_theta},
      {"rope_scaling",
       {{"rope_type", c.rope_scaling.rope_type},
        {"factor", c.rope_scaling.factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings},
        {"beta_fast", c.rope_scaling.beta_fast},
        {"beta_slow", c.rope_scaling.beta_slow}}},
      {"max_position_embeddings", c.max_position_embeddings},
      {"sliding_window", c.sliding_window},
      {"compress_ratios", c.compress_ratios},
      {"kv_source_layer_ids", c.kv_source_layer_ids},
      {"index_source_layer_ids", c.index_source_layer_ids},
      {"candidate_source_layer_id", layer_ref(c.candidate_source_layer_id)},
      {"candidate_topk_blocks", c.candidate_topk_blocks},
      {"candidate_block_size", c.candidate_block_size},
      {"index_n_heads", c.index_n_heads},
      {"index_head_dim", c.index_head_dim},
      {"index_topk", c.index_topk},
      {"csa_compress_ratio", c.csa_compress_ratio},
      {"num_hash_layers", c.num_hash_layers},
      {"weight_block_size", c.weight_block_size},
      {"n_routed_experts", c.n_routed_experts},
      {"n_shared_experts", c.n_shared_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"scoring_func", c.scoring_func},
      {"topk_method", c.topk_method},
      {"norm_topk_prob", c.norm_topk_prob},
      {"routed_scaling_factor", c.routed_scaling_factor},
      {"gate_temp", c.gate_temp},
      {"hidden_act", c.hidden_act},
      {"swiglu_limit", c.swiglu_limit},
      {"rms_norm_eps", c.rms_norm_eps},
      {"hc_mult", c.hc_mult},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
      {"hc_eps", c.hc_eps},
      {"engram_layer_ids", c.engram_layer_ids},
      {"engram_num_embeddings", c.engram_num_embeddings},
      {"engram_max_ngram_size", c.engram_max_ngram_size},
      {"engram_n_heads", c.engram_n_heads},
      {"engram_head_dim", c.engram_head_dim},
      {"engram_vocab_size", c.engram_vocab_size},
      {"engram_compressed_vocab_size", c.engram_compressed_vocab_size},
      {"engram_pad_token_id", c.engram_pad_token_id},
      {"num_nextn_predict_layers", c.num_nextn_predict_layers},
      {"dspark_block_size", c.dspark_block_size},
      {"dspark_noise_token_id", c.dspark_noise_token_id},
      {"dspark_target_layer_ids", c.dspark_target_layer_ids},
      {"dspark_markov_rank", c.dspark_markov_rank},
      {"dspark_n_routed_experts", c.dspark_n_routed_experts},
      {"dspark_num_experts_per_tok", c.dspark_num_experts_per_tok},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_id", c.eos_token_id},
      {"pad_token_id", c.pad_token_id ? json(*c.pad_token_id) : json(nullptr)},
      {"image_token_id", c.image_token_id ? json(*c.image_token_id) : json(nullptr)},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", c.torch_dtype},
  };
  if (const auto& q = c.quantization_config) {
    j["quantization_config"] = {{"quant_method", q->quant_method},
                                {"fmt", q->fmt},
                                {"scale_fmt", q->scale_fmt},
                                {"activation_scheme", q->activation_scheme},
                                {"weight_block_size", q->weight_block_size},
                                {"expert_dtype", q->expert_dtype}};
  } else {
    j["quantization_config"] = nullptr;
  }
  return j;
}

json layers_json(const LayerPlan& plan) {
  json layers = json::array();
  for (const LayerRole& r : plan.layers) {
    layers.push_back({
        {"index", r.index},
        {"ratio", r.ratio},
        {"mode", attention_mode_name(r.mode)},
        {"kv_owner", layer_ref(r.kv_owner)},
        {"topk_source", layer_ref(r.topk_source)},
        {"candidate_pool_source", layer_ref(r.candidate_pool_source)},
        {"is_kv_source", r.is_kv_source},
        {"is_index_source", r.is_index_source},
        {"is_candidate_source", r.is_candidate_source},
        {"engram", r.has_engram()},
        {"side", layer_side_name(r.side)},
        {"rope", rope_kind_name(r.rope)},
        {"hash_routed", r.hash_routed},
        {"overlapping_compressor", r.overlapping_compressor},
        {"indexer_has_compressor", r.indexer_has_compressor},
    });
  }
  return layers;
}

json parameters_json(const ParameterCounts& p) {
  return {{"embedding", p.embedding},
          {"head", p.head},
          {"attention", p.attention},
          {"compressor_indexer", p.compressor_indexer},
          {"mhc", p.mhc},
          {"router", p.router},
          {"routed_experts", p.routed_experts},
          {"shared_experts", p.shared_experts},
          {"norms", p.norms},
          {"engram_tables", p.engram_tables},
          {"engram_projections", p.engram_projections},
          {"total", p.total},
          {"active_per_token", p.active_per_token}};
}

json tensors_json(const std::vector<TensorListing>& tensors) {
  json list = json::array();
  for (const TensorListing& t : tensors) {
    list.push_back(
        {{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"bytes", t.bytes}, {"file", t.file}});
  }
  return list;
}

// null when nothing was checked (a config file, or a directory without weights).
json check_json(const CheckpointDescription& d) {
  if (!d.checked) return nullptr;
  json problems = json::array();
  for (const CheckpointProblem& p : d.problems)
    problems.push_back({{"tensor", p.tensor}, {"problem", p.problem}});
  return {{"ok", d.problems.empty()}, {"problems", problems}};
}

}  // namespace

std::string format_info_json(const CheckpointDescription& d) {
  const MemoryReport& m = d.memory;
  json kv_sources = json::array();
  for (const KvSourceFootprint& s : m.kv_sources) {
    kv_sources.push_back({{"layer", s.layer},
                          {"ratio", s.ratio},
                          {"entry_bytes", s.entry_bytes},
                          {"index_key_bytes", s.index_key_bytes}});
  }
  const json doc = {
      {"path", d.path.string()},
      {"config_path", d.config_path.string()},
      {"is_checkpoint_dir", d.is_checkpoint_dir},
      {"config", config_json(d.config)},
      {"layers", layers_json(d.plan)},
      {"has_hc_head", d.plan.has_hc_head},
      {"candidate_source_layer", layer_ref(d.plan.candidate_source_layer)},
      {"first_decoder_layer", layer_ref(d.plan.first_decoder_layer)},
      {"num_dspark_stages", d.plan.num_dspark_stages},
      {"kv_entry_bytes", m.kv_entry_bytes},
      {"index_key_bytes", m.index_key_bytes},
      {"window_row_bytes", m.window_row_bytes},
      {"kv_sources", kv_sources},
      {"global_kv_bytes_per_token", exact_number(m.global_kv_bytes_per_token)},
      {"window_bytes_per_session", m.window_bytes_per_session},
      {"compressor_state_bytes_per_session", m.compressor_state_bytes_per_session},
      {"parameters", parameters_json(m.parameters)},
      {"weight_bytes", m.weight_bytes},
      {"tensors", tensors_json(d.tensors)},
      {"check", check_json(d)},
  };
  return doc.dump(2) + "\n";
}

}  // namespace flashkv::cli
