#include "config/v4_fields.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <flashkv/error.hpp>

namespace flashkv::config {

namespace {

constexpr std::string_view kSlidingType = "sliding_attention";
constexpr std::string_view kCsaType = "compressed_sparse_attention";
constexpr std::string_view kHcaType = "heavily_compressed_attention";
constexpr int kReleasedCsaRatio = 4;  // the reference builds the overlap and the indexer iff ratio == 4
constexpr int kDefaultHcaRatio = 128;
constexpr int kDefaultHashLayers = 3;  // transformers' default_num_hash_layers (the release has 3)

// transformers' compress_rates: {"compressed_sparse_attention": m, "heavily_compressed_attention": m'}.
struct CompressRates {
  int csa = kReleasedCsaRatio;
  int hca = kDefaultHcaRatio;
};

CompressRates read_compress_rates(const JsonFields& text) {
  CompressRates rates;
  const nlohmann::json* object = text.optional_object("compress_rates");
  if (object == nullptr) return rates;
  const JsonFields fields(*object, text.source(), text.field_name("compress_rates") + ".");
  rates.csa = fields.optional_small_int(kCsaType, rates.csa);
  rates.hca = fields.optional_small_int(kHcaType, rates.hca);
  return rates;
}

// layer_types + compress_rates -> one ratio per layer.
std::vector<int> ratios_from_layer_types(const JsonFields& text, const CompressRates& rates) {
  const std::vector<std::string> types = text.optional_string_list("layer_types");
  std::vector<int> ratios;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] == kSlidingType) {
      ratios.push_back(0);
    } else if (types[i] == kCsaType) {
      ratios.push_back(rates.csa);
    } else if (types[i] == kHcaType) {
      ratios.push_back(rates.hca);
    } else {
      fail(ErrorCode::kInvalidConfig, "{}: field '{}[{}]' = '{}' is not one of '{}', '{}', '{}'",
           text.source(), text.field_name("layer_types"), i, types[i], kSlidingType, kCsaType, kHcaType);
    }
  }
  return ratios;
}

}  // namespace

void read_v4_rope_width(const JsonFields& text, ModelConfig& c) {
  if (text.has("qk_rope_head_dim") || !text.has("partial_rotary_factor")) {
    c.qk_rope_head_dim = text.required_int("qk_rope_head_dim");
    return;
  }
  const double factor = text.optional_number("partial_rotary_factor", 0.0);
  const double width = factor * static_cast<double>(c.head_dim);
  if (!(factor > 0 && factor <= 1) || width != std::floor(width)) {
    fail(ErrorCode::kInvalidConfig,
         "{}: field '{}' = {} must be in (0, 1] and give a whole number of channels of head_dim {}",
         text.source(), text.field_name("partial_rotary_factor"), factor, c.head_dim);
  }
  c.qk_rope_head_dim = static_cast<int64_t>(width);
}

void read_v4_schedule(const JsonFields& text, ModelConfig& c) {
  const CompressRates rates = read_compress_rates(text);
  if (text.has("compress_ratios") || !text.has("layer_types")) {
    c.compress_ratios = text.required_small_int_list("compress_ratios");
    c.csa_compress_ratio = kReleasedCsaRatio;
  } else {
    c.compress_ratios = ratios_from_layer_types(text, rates);
    c.csa_compress_ratio = rates.csa;
  }
  c.kv_source_layer_ids.clear();
  c.index_source_layer_ids.clear();
  const size_t layers =
      std::min(c.compress_ratios.size(), static_cast<size_t>(std::max(c.num_hidden_layers, 0)));
  for (size_t i = 0; i < layers; ++i) {
    const int ratio = c.compress_ratios[i];
    if (ratio != 0) c.kv_source_layer_ids.push_back(static_cast<int>(i));
    if (ratio != 0 && ratio == c.csa_compress_ratio) c.index_source_layer_ids.push_back(static_cast<int>(i));
  }
  c.candidate_source_layer_id = -1;
  c.index_n_heads = text.required_int("index_n_heads");
  c.index_head_dim = text.required_int("index_head_dim");
  c.index_topk = text.required_int("index_topk");
}

void read_v4_hash_layers(const JsonFields& text, ModelConfig& c) {
  if (text.has("num_hash_layers") || !text.has("mlp_layer_types")) {
    // Absent: transformers' default, capped at the layer count as transformers caps it.
    c.num_hash_layers =
        text.optional_small_int("num_hash_layers", std::min(kDefaultHashLayers, c.num_hidden_layers));
    return;
  }
  // transformers: "hash_moe" for the leading layers, "moe" after; anything else is not a V4 schedule.
  const std::vector<std::string> types = text.optional_string_list("mlp_layer_types");
  int hash_layers = 0;
  for (size_t i = 0; i < types.size(); ++i) {
    const bool hash = types[i] == "hash_moe";
    if (!hash && types[i] != "moe") {
      fail(ErrorCode::kInvalidConfig, "{}: field '{}[{}]' = '{}' is not 'hash_moe' or 'moe'", text.source(),
           text.field_name("mlp_layer_types"), i, types[i]);
    }
    if (hash && hash_layers != static_cast<int>(i)) {
      fail(ErrorCode::kInvalidConfig,
           "{}: field '{}[{}]' is 'hash_moe' after a 'moe' layer (hash-routed layers must lead)",
           text.source(), text.field_name("mlp_layer_types"), i);
    }
    if (hash) ++hash_layers;
  }
  c.num_hash_layers = hash_layers;
}

bool read_v4_rope_parameters(const JsonFields& text, ModelConfig& c) {
  const nlohmann::json* object = text.optional_object("rope_parameters");
  if (object == nullptr) return false;
  const JsonFields nested(*object, text.source(), text.field_name("rope_parameters") + ".");
  const nlohmann::json* main = nested.optional_object("main");
  const nlohmann::json* compress = nested.optional_object("compress");
  if (main == nullptr || compress == nullptr) return false;
  const JsonFields main_fields(*main, text.source(), nested.field_name("main") + ".");
  const JsonFields fields(*compress, text.source(), nested.field_name("compress") + ".");
  c.rope_theta = main_fields.optional_number("rope_theta", c.rope_theta);
  c.compress_rope_theta = fields.optional_number("rope_theta", c.compress_rope_theta);
  const std::string_view type_key = fields.has("rope_type") ? "rope_type" : "type";
  c.rope_scaling.rope_type = fields.optional_string(type_key, "default");
  c.rope_scaling.factor = fields.optional_number("factor", c.rope_scaling.factor);
  c.rope_scaling.original_max_position_embeddings = fields.optional_int(
      "original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings);
  c.rope_scaling.beta_fast = fields.optional_number("beta_fast", c.rope_scaling.beta_fast);
  c.rope_scaling.beta_slow = fields.optional_number("beta_slow", c.rope_scaling.beta_slow);
  return true;
}

}  // namespace flashkv::config
