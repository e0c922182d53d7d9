// The human-readable report of `flashkv info`. Layout documented in docs/config.md.
#include <cmath>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "info_format.hpp"

namespace flashkv::cli {

namespace {

using Out = std::back_insert_iterator<std::string>;

std::string layer_or_dash(int layer) {
  return layer < 0 ? std::string("-") : std::to_string(layer);
}

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

// 16.131B / 5.768M / 999: enough digits to compare with the spec's rounded figures.
std::string scaled_count(uint64_t count) {
  const auto x = static_cast<double>(count);
  if (x >= 1e9) return fmt::format("{:.3f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.3f}M", x / 1e6);
  return fmt::format("{}", count);
}

std::string extras_of(const LayerRole& role) {
  std::string extras;
  auto add = [&](std::string_view word) {
    if (!extras.empty()) extras += ' ';
    extras += word;
  };
  if (role.is_kv_source) add("kv_source");
  if (role.is_index_source) add("index_source");
  if (role.is_candidate_source) add("candidate_source");
  if (role.has_engram()) add("engram");
  if (role.hash_routed) add("hash_routed");
  return extras;
}

void write_model(Out out, const CheckpointDescription& d) {
  const ModelConfig& c = d.config;
  fmt::format_to(out, "config: {}\n", d.config_path.string());
  fmt::format_to(out, "model_type: {} ({})\n", c.model_type, fmt::join(c.architectures, ", "));
  fmt::format_to(out, "vocab_size: {}  hidden_size: {}  layers: {} + {} DSpark stages\n", c.vocab_size,
                 c.hidden_size, c.num_hidden_layers, c.num_nextn_predict_layers);
  fmt::format_to(out,
                 "attention: {} heads x head_dim {} (rope {}), kv heads {}, q_lora_rank {}, o_groups {} x "
                 "o_lora_rank {}, sliding_window {}\n",
                 c.num_attention_heads, c.head_dim, c.qk_rope_head_dim, c.num_key_value_heads, c.q_lora_rank,
                 c.o_groups, c.o_lora_rank, c.sliding_window);
  const RopeScaling& y = c.rope_scaling;
  fmt::format_to(
      out,
      "rope: base theta {} (ratio 0); compress theta {} + {} factor {}, original {}, beta_fast {}, "
      "beta_slow {} (ratio != 0)\n",
      c.rope_theta, c.compress_rope_theta, y.rope_type, y.factor, y.original_max_position_embeddings,
      y.beta_fast, y.beta_slow);
  fmt::format_to(out, "indexer: {} heads x {}, topk {}", c.index_n_heads, c.index_head_dim, c.index_topk);
  if (c.candidate_source_layer_id >= 0) {
    fmt::format_to(out, "; candidate pool: layer {}, {} blocks x {} entries\n", c.candidate_source_layer_id,
                   c.candidate_topk_blocks, c.candidate_block_size);
  } else {
    fmt::format_to(out, "; no candidate pool\n");
  }
  fmt::format_to(out,
                 "moe: {} routed + {} shared experts, top-{}, width {}, {}, routed_scaling_factor {}, "
                 "swiglu_limit {}\n",
                 c.n_routed_experts, c.n_shared_experts, c.num_experts_per_tok, c.moe_intermediate_size,
                 c.scoring_func, c.routed_scaling_factor, c.swiglu_limit);
  fmt::format_to(out, "mhc: hc_mult {}, sinkhorn_iters {}, hc_eps {}; rms_norm_eps {}\n", c.hc_mult,
                 c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps);
  if (c.family == ModelFamily::kDeepseekV4) {
    fmt::format_to(
        out,
        "deepseek_v4: csa ratio {} (overlapping compressor + indexer), other ratios hca; hash-routed "
        "layers {} (ffn.gate.tid2eid); mhc per sublayer + hc_head; fp8 weight tiles {}\n",
        c.csa_compress_ratio, c.num_hash_layers, c.weight_block_size);
  }
}

void write_engram_dspark_storage(Out out, const ModelConfig& c) {
  if (c.engram_layer_ids.empty()) {
    fmt::format_to(out, "engram: none\n");
  } else {
    fmt::format_to(
        out,
        "engram: layers [{}], max_ngram {}, {} heads x {}, vocab {}, rows [{}], compressed vocab {}, "
        "pad {}\n",
        fmt::join(c.engram_layer_ids, ", "), c.engram_max_ngram_size, c.engram_n_heads, c.engram_head_dim,
        c.engram_vocab_size, fmt::join(c.engram_num_embeddings, ", "), c.engram_compressed_vocab_size,
        c.engram_pad_token_id);
  }
  if (c.num_nextn_predict_layers == 0) {
    fmt::format_to(out, "dspark: none\n");
  } else if (c.family == ModelFamily::kDeepseekV4) {
    fmt::format_to(out, "mtp: {} stage(s) (not in the layer plan)\n", c.num_nextn_predict_layers);
  } else {
    fmt::format_to(out,
                   "dspark: {} stages (not in the layer plan), block {}, noise token {}, target layers [{}], "
                   "markov rank {}, {} experts top-{}\n",
                   c.num_nextn_predict_layers, c.dspark_block_size, c.dspark_noise_token_id,
                   fmt::join(c.dspark_target_layer_ids, ", "), c.dspark_markov_rank,
                   c.dspark_n_routed_experts, c.dspark_num_experts_per_tok);
  }
  fmt::format_to(out, "tokens: bos {}, eos {}", c.bos_token_id, c.eos_token_id);
  if (c.pad_token_id) fmt::format_to(out, ", pad {}", *c.pad_token_id);
  if (c.image_token_id) fmt::format_to(out, ", image {}", *c.image_token_id);
  fmt::format_to(out, "\n");
  fmt::format_to(out, "storage: dtype {}", c.torch_dtype.empty() ? "-" : c.torch_dtype);
  if (const auto& q = c.quantization_config) {
    fmt::format_to(out, "; quantization {} {} scales {}", q->quant_method, q->fmt, q->scale_fmt);
    if (!q->weight_block_size.empty())
      fmt::format_to(out, ", weight blocks {}", fmt::join(q->weight_block_size, "x"));
    if (!q->expert_dtype.empty()) fmt::format_to(out, ", experts {}", q->expert_dtype);
  }
  fmt::format_to(out, "\n");
}

void write_plan(Out out, const LayerPlan& plan) {
  fmt::format_to(out, "\nlayer plan:\n");
  fmt::format_to(out, "{:>5} {:>5} {:<7} {:>8} {:>11} {:>11} {:<7} {:<13} {}\n", "layer", "ratio", "mode",
                 "kv_owner", "topk_source", "pool_source", "side", "rope", "roles");
  for (const LayerRole& r : plan.layers) {
    const std::string line = fmt::format("{:>5} {:>5} {:<7} {:>8} {:>11} {:>11} {:<7} {:<13} {}", r.index,
                                         r.ratio, attention_mode_name(r.mode), layer_or_dash(r.kv_owner),
                                         layer_or_dash(r.topk_source), layer_or_dash(r.candidate_pool_source),
                                         layer_side_name(r.side), rope_kind_name(r.rope), extras_of(r));
    fmt::format_to(out, "{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
  }
  if (plan.first_decoder_layer >= 0) {
    fmt::format_to(out, "CED boundary: encoder layers 0-{}, decoder layers {}-{}\n",
                   plan.first_decoder_layer - 1, plan.first_decoder_layer, plan.layers.size() - 1);
  } else {
    fmt::format_to(out, "CED boundary: none (no candidate source; all layers encoder side)\n");
  }
}

void write_memory(Out out, const ModelConfig& c, const LayerPlan& plan, const MemoryReport& m) {
  fmt::format_to(out, "\nmemory:\n");
  const bool v4 = plan.family == ModelFamily::kDeepseekV4;
  const std::string_view entry_format = v4 ? "FP8 + BF16 rope" : "NVFP4";
  const std::string_view row_format = v4 ? "FP8 + BF16 rope" : "FP8";
  fmt::format_to(out, "kv entry bytes ({}, {} channels): {}\n", entry_format, c.head_dim, m.kv_entry_bytes);
  fmt::format_to(out, "index key bytes (MXFP4, {} channels): {}\n", c.index_head_dim, m.index_key_bytes);
  fmt::format_to(out, "window row bytes ({}, {} channels): {}\n", row_format, c.head_dim, m.window_row_bytes);
  fmt::format_to(out, "global KV bytes/token: {}\n", m.global_kv_bytes_per_token);
  for (const KvSourceFootprint& s : m.kv_sources) {
    fmt::format_to(out, "  layer {}: ratio {}, ({} + {}) / {} bytes/token\n", s.layer, s.ratio, s.entry_bytes,
                   s.index_key_bytes, s.ratio);
  }
  fmt::format_to(out, "window bytes/session: {} ({} layers x {} rows x {} bytes)\n",
                 m.window_bytes_per_session, plan.layers.size(), c.sliding_window, m.window_row_bytes);
  fmt::format_to(out, "compressor state bytes/session: {}\n", m.compressor_state_bytes_per_session);
  const ParameterCounts& p = m.parameters;
  fmt::format_to(out,
                 "parameters: total {} (embedding {}, head {}, attention {}, compressor+indexer {}, mhc {}, "
                 "router {}, routed experts {}, shared experts {}, norms {}, engram tables {}, engram "
                 "projections {})\n",
                 p.total, p.embedding, p.head, p.attention, p.compressor_indexer, p.mhc, p.router,
                 p.routed_experts, p.shared_experts, p.norms, p.engram_tables, p.engram_projections);
  fmt::format_to(out, "parameters: {} total, {} active/token (backbone, DSpark not counted)\n",
                 scaled_count(p.total), scaled_count(p.active_per_token));
  fmt::format_to(out, "weight bytes (estimate): {} ({})\n", m.weight_bytes, gib(m.weight_bytes));
}

void write_tensors(Out out, const CheckpointDescription& d) {
  fmt::format_to(out, "\n");
  if (!d.is_checkpoint_dir) {
    fmt::format_to(out, "tensors: none (PATH is a config file)\n");
    return;
  }
  fmt::format_to(out, "tensors: {}\n", d.tensors.size());
  for (const TensorListing& t : d.tensors) {
    fmt::format_to(out, "  {} {} [{}] {} bytes {}\n", t.name, t.dtype, fmt::join(t.shape, ", "), t.bytes,
                   t.file);
  }
  if (!d.checked) return;
  fmt::format_to(out, "check: {}\n",
                 d.problems.empty() ? "ok (the tensors match the config)"
                                    : fmt::format("{} problems", d.problems.size()));
  for (const CheckpointProblem& p : d.problems) fmt::format_to(out, "  {}: {}\n", p.tensor, p.problem);
}

}  // namespace

std::string format_info_text(const CheckpointDescription& d) {
  std::string text;
  const Out out(text);
  write_model(out, d);
  write_engram_dspark_storage(out, d.config);
  write_plan(out, d.plan);
  write_memory(out, d.config, d.plan, d.memory);
  write_tensors(out, d);
  return text;
}

}  // namespace flashkv::cli
