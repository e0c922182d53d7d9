// ModelConfig, LayerPlan and the memory figures as read-only Python objects. Attribute names are the C++
// field names, which are config.json's (docs/config.md); enums of the plan are their stable lower-case names.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <flashkv/config.hpp>
#include <flashkv/model.hpp>

#include "bindings.hpp"

namespace flashkv::python {

namespace {

std::string config_repr(const ModelConfig& c) {
  return fmt::format(
      "ModelConfig(model_type='{}', vocab_size={}, hidden_size={}, num_hidden_layers={}, "
      "sliding_window={}, max_position_embeddings={})",
      c.model_type, c.vocab_size, c.hidden_size, c.num_hidden_layers, c.sliding_window,
      c.max_position_embeddings);
}

}  // namespace

void bind_config(py::module_& m) {
  py::class_<RopeScaling>(m, "RopeScaling", "YaRN scaling of the compress RoPE (config.json rope_scaling).")
      .def_readonly("rope_type", &RopeScaling::rope_type)
      .def_readonly("factor", &RopeScaling::factor)
      .def_readonly("original_max_position_embeddings", &RopeScaling::original_max_position_embeddings)
      .def_readonly("beta_fast", &RopeScaling::beta_fast)
      .def_readonly("beta_slow", &RopeScaling::beta_slow);

  py::class_<QuantizationConfig>(m, "QuantizationConfig",
                                 "config.json quantization_config (descriptive only).")
      .def_readonly("quant_method", &QuantizationConfig::quant_method)
      .def_readonly("fmt", &QuantizationConfig::fmt)
      .def_readonly("scale_fmt", &QuantizationConfig::scale_fmt)
      .def_readonly("activation_scheme", &QuantizationConfig::activation_scheme)
      .def_readonly("weight_block_size", &QuantizationConfig::weight_block_size)
      .def_readonly("expert_dtype", &QuantizationConfig::expert_dtype);

  py::class_<ModelConfig>(
      m, "ModelConfig",
      "The text model of a deepseek_v41 or deepseek_v4 checkpoint (config.json field names; docs/config.md).")
      .def_readonly("model_type", &ModelConfig::model_type)
      .def_property_readonly("family",
                             [](const ModelConfig& c) { return std::string(model_family_name(c.family)); })
      .def_readonly("architectures", &ModelConfig::architectures)
      .def_readonly("vocab_size", &ModelConfig::vocab_size)
      .def_readonly("hidden_size", &ModelConfig::hidden_size)
      .def_readonly("num_hidden_layers", &ModelConfig::num_hidden_layers)
      .def_readonly("num_attention_heads", &ModelConfig::num_attention_heads)
      .def_readonly("num_key_value_heads", &ModelConfig::num_key_value_heads)
      .def_readonly("head_dim", &ModelConfig::head_dim)
      .def_readonly("qk_rope_head_dim", &ModelConfig::qk_rope_head_dim)
      .def_readonly("q_lora_rank", &ModelConfig::q_lora_rank)
      .def_readonly("o_groups", &ModelConfig::o_groups)
      .def_readonly("o_lora_rank", &ModelConfig::o_lora_rank)
      .def_readonly("rope_theta", &ModelConfig::rope_theta)
      .def_readonly("compress_rope_theta", &ModelConfig::compress_rope_theta)
      .def_readonly("rope_scaling", &ModelConfig::rope_scaling)
      .def_readonly("max_position_embeddings", &ModelConfig::max_position_embeddings)
      .def_readonly("sliding_window", &ModelConfig::sliding_window)
      .def_readonly("compress_ratios", &ModelConfig::compress_ratios)
      .def_readonly("csa_compress_ratio", &ModelConfig::csa_compress_ratio)
      .def_readonly("kv_source_layer_ids", &ModelConfig::kv_source_layer_ids)
      .def_readonly("index_source_layer_ids", &ModelConfig::index_source_layer_ids)
      .def_readonly("candidate_source_layer_id", &ModelConfig::candidate_source_layer_id)
      .def_readonly("candidate_topk_blocks", &ModelConfig::candidate_topk_blocks)
      .def_readonly("candidate_block_size", &ModelConfig::candidate_block_size)
      .def_readonly("index_n_heads", &ModelConfig::index_n_heads)
      .def_readonly("index_head_dim", &ModelConfig::index_head_dim)
      .def_readonly("index_topk", &ModelConfig::index_topk)
      .def_readonly("num_hash_layers", &ModelConfig::num_hash_layers)
      .def_readonly("n_routed_experts", &ModelConfig::n_routed_experts)
      .def_readonly("n_shared_experts", &ModelConfig::n_shared_experts)
      .def_readonly("num_experts_per_tok", &ModelConfig::num_experts_per_tok)
      .def_readonly("moe_intermediate_size", &ModelConfig::moe_intermediate_size)
      .def_readonly("scoring_func", &ModelConfig::scoring_func)
      .def_readonly("topk_method", &ModelConfig::topk_method)
      .def_readonly("norm_topk_prob", &ModelConfig::norm_topk_prob)
      .def_readonly("routed_scaling_factor", &ModelConfig::routed_scaling_factor)
      .def_readonly("gate_temp", &ModelConfig::gate_temp)
      .def_readonly("hidden_act", &ModelConfig::hidden_act)
      .def_readonly("swiglu_limit", &ModelConfig::swiglu_limit)
      .def_readonly("rms_norm_eps", &ModelConfig::rms_norm_eps)
      .def_readonly("hc_mult", &ModelConfig::hc_mult)
      .def_readonly("hc_sinkhorn_iters", &ModelConfig::hc_sinkhorn_iters)
      .def_readonly("hc_eps", &ModelConfig::hc_eps)
      .def_readonly("engram_layer_ids", &ModelConfig::engram_layer_ids)
      .def_readonly("engram_num_embeddings", &ModelConfig::engram_num_embeddings)
      .def_readonly("engram_max_ngram_size", &ModelConfig::engram_max_ngram_size)
      .def_readonly("engram_n_heads", &ModelConfig::engram_n_heads)
      .def_readonly("engram_head_dim", &ModelConfig::engram_head_dim)
      .def_readonly("engram_vocab_size", &ModelConfig::engram_vocab_size)
      .def_readonly("engram_compressed_vocab_size", &ModelConfig::engram_compressed_vocab_size)
      .def_readonly("engram_pad_token_id", &ModelConfig::engram_pad_token_id)
      .def_readonly("num_nextn_predict_layers", &ModelConfig::num_nextn_predict_layers)
      .def_readonly("dspark_block_size", &ModelConfig::dspark_block_size)
      .def_readonly("dspark_noise_token_id", &ModelConfig::dspark_noise_token_id)
      .def_readonly("dspark_target_layer_ids", &ModelConfig::dspark_target_layer_ids)
      .def_readonly("dspark_markov_rank", &ModelConfig::dspark_markov_rank)
      .def_readonly("dspark_n_routed_experts", &ModelConfig::dspark_n_routed_experts)
      .def_readonly("dspark_num_experts_per_tok", &ModelConfig::dspark_num_experts_per_tok)
      .def_readonly("bos_token_id", &ModelConfig::bos_token_id)
      .def_readonly("eos_token_id", &ModelConfig::eos_token_id)
      .def_readonly("pad_token_id", &ModelConfig::pad_token_id)
      .def_readonly("image_token_id", &ModelConfig::image_token_id)
      .def_readonly("tie_word_embeddings", &ModelConfig::tie_word_embeddings)
      .def_readonly("torch_dtype", &ModelConfig::torch_dtype)
      .def_readonly("quantization_config", &ModelConfig::quantization_config)
      .def_readonly("weight_block_size", &ModelConfig::weight_block_size)
      .def("__repr__", &config_repr);

  py::class_<KvSourceFootprint>(m, "KvSourceFootprint", "One KV-source layer's share of the global KV cache.")
      .def_readonly("layer", &KvSourceFootprint::layer)
      .def_readonly("ratio", &KvSourceFootprint::ratio)
      .def_readonly("entry_bytes", &KvSourceFootprint::entry_bytes)
      .def_readonly("index_key_bytes", &KvSourceFootprint::index_key_bytes);

  py::class_<ParameterCounts>(m, "ParameterCounts", "Parameter counts per component (backbone).")
      .def_readonly("embedding", &ParameterCounts::embedding)
      .def_readonly("head", &ParameterCounts::head)
      .def_readonly("attention", &ParameterCounts::attention)
      .def_readonly("compressor_indexer", &ParameterCounts::compressor_indexer)
      .def_readonly("mhc", &ParameterCounts::mhc)
      .def_readonly("router", &ParameterCounts::router)
      .def_readonly("routed_experts", &ParameterCounts::routed_experts)
      .def_readonly("shared_experts", &ParameterCounts::shared_experts)
      .def_readonly("norms", &ParameterCounts::norms)
      .def_readonly("engram_tables", &ParameterCounts::engram_tables)
      .def_readonly("engram_projections", &ParameterCounts::engram_projections)
      .def_readonly("total", &ParameterCounts::total)
      .def_readonly("active_per_token", &ParameterCounts::active_per_token);

  py::class_<MemoryReport>(m, "MemoryReport", "Cache and weight figures derived from the config.")
      .def_readonly("kv_entry_bytes", &MemoryReport::kv_entry_bytes)
      .def_readonly("index_key_bytes", &MemoryReport::index_key_bytes)
      .def_readonly("window_row_bytes", &MemoryReport::window_row_bytes)
      .def_readonly("kv_sources", &MemoryReport::kv_sources)
      .def_readonly("global_kv_bytes_per_token", &MemoryReport::global_kv_bytes_per_token)
      .def_readonly("window_bytes_per_session", &MemoryReport::window_bytes_per_session)
      .def_readonly("compressor_state_bytes_per_session", &MemoryReport::compressor_state_bytes_per_session)
      .def_readonly("parameters", &MemoryReport::parameters)
      .def_readonly("weight_bytes", &MemoryReport::weight_bytes)
      .def("global_kv_bytes", &MemoryReport::global_kv_bytes, py::arg("tokens"),
           "Exact global KV bytes for a sequence of `tokens` tokens.");

  py::class_<LayerRole>(m, "LayerRole", "The role of one backbone layer (spec/MODEL.md §1.2).")
      .def_readonly("index", &LayerRole::index)
      .def_readonly("ratio", &LayerRole::ratio)
      .def_property_readonly("mode",
                             [](const LayerRole& r) { return std::string(attention_mode_name(r.mode)); })
      .def_readonly("kv_owner", &LayerRole::kv_owner)
      .def_readonly("topk_source", &LayerRole::topk_source)
      .def_readonly("candidate_pool_source", &LayerRole::candidate_pool_source)
      .def_readonly("is_kv_source", &LayerRole::is_kv_source)
      .def_readonly("is_index_source", &LayerRole::is_index_source)
      .def_readonly("is_candidate_source", &LayerRole::is_candidate_source)
      .def_readonly("engram_slot", &LayerRole::engram_slot)
      .def_property_readonly("side", [](const LayerRole& r) { return std::string(layer_side_name(r.side)); })
      .def_property_readonly("rope", [](const LayerRole& r) { return std::string(rope_kind_name(r.rope)); })
      .def_readonly("overlapping_compressor", &LayerRole::overlapping_compressor)
      .def_readonly("indexer_has_compressor", &LayerRole::indexer_has_compressor)
      .def_readonly("hash_routed", &LayerRole::hash_routed)
      .def_property_readonly("has_engram", &LayerRole::has_engram);

  py::class_<LayerPlan>(m, "LayerPlan", "The role of every backbone layer, derived from the config.")
      .def_property_readonly("family",
                             [](const LayerPlan& p) { return std::string(model_family_name(p.family)); })
      .def_readonly("has_hc_head", &LayerPlan::has_hc_head)
      .def_readonly("layers", &LayerPlan::layers)
      .def_readonly("candidate_source_layer", &LayerPlan::candidate_source_layer)
      .def_readonly("first_decoder_layer", &LayerPlan::first_decoder_layer)
      .def_readonly("num_dspark_stages", &LayerPlan::num_dspark_stages);

  py::class_<ModelMemory>(m, "ModelMemory", "Model.memory(): the config's figures plus what this load holds.")
      .def_readonly("report", &ModelMemory::report)
      .def_readonly("resident_weight_bytes", &ModelMemory::resident_weight_bytes)
      .def_readonly("weight_storage", &ModelMemory::weight_storage);
}

}  // namespace flashkv::python
