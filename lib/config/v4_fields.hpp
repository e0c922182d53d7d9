// The config.json fields that only a deepseek_v4 (DeepSeek-V4-Flash) config has, or spells differently.
// Why a separate reader: the released V4 config and transformers 5's save_pretrained spell the schedule,
// the hash layers and the RoPE split differently, and both files exist in the wild (the released checkpoint;
// golden checkpoints written by transformers). Accepted spellings, each first-listed one preferred:
//   attention schedule  compress_ratios [int per layer, then MTP]  |  layer_types + compress_rates
//   hash-routed layers  num_hash_layers                             |  mlp_layer_types ("hash_moe" prefix)
//   RoPE width          qk_rope_head_dim                            |  partial_rotary_factor x head_dim
//   compress RoPE       rope_scaling + compress_rope_theta          |  rope_parameters.{main,compress}
// Errors: Error(kInvalidConfig) naming the file and the field (as spelled in the file) and the rule.
#pragma once

#include <flashkv/config.hpp>

#include "config/json_fields.hpp"

namespace flashkv::config {

// qk_rope_head_dim (needs c.head_dim read first).
void read_v4_rope_width(const JsonFields& text, ModelConfig& c);

// compress_ratios / csa_compress_ratio, and the derived kv/index source lists (every ratio != 0 layer owns
// its KV; every CSA layer owns an indexer). Needs c.num_hidden_layers.
void read_v4_schedule(const JsonFields& text, ModelConfig& c);

// num_hash_layers. Needs c.num_hidden_layers.
void read_v4_hash_layers(const JsonFields& text, ModelConfig& c);

// rope_theta, compress_rope_theta and rope_scaling from transformers 5's rope_parameters.{main,compress};
// returns false (changing nothing) when the file has no nested rope_parameters.
bool read_v4_rope_parameters(const JsonFields& text, ModelConfig& c);

}  // namespace flashkv::config
