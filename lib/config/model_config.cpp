// config.json -> ModelConfig. Field names follow the released checkpoint (docs/config.md lists the source of
// every name). Shape and schedule fields are required; numeric constants default to the V4.1-Flash values.
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/ranges.h>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "config/json_fields.hpp"
#include "config/v4_fields.hpp"

namespace flashkv {

namespace {

using config::JsonFields;

constexpr std::string_view kModelType = "deepseek_v41";
constexpr std::string_view kTextModelType = "deepseek_v41_text";  // a flat text-only config
constexpr std::string_view kV4ModelType = "deepseek_v4";          // DeepSeek-V4-Flash (flat)
constexpr int64_t kV41WeightBlock = 32;
constexpr int64_t kV4WeightBlock = 128;
constexpr double kV4RmsNormEps = 1e-6;

// The library's parse_error text starts with "[json.exception.parse_error.101] "; the position that follows
// is what a user needs. Newlines are flattened so the error stays one line.
std::string parse_error_text(const nlohmann::json::parse_error& e) {
  std::string text = e.what();
  if (const auto pos = text.find("] "); text.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
    text = text.substr(pos + 2);
  }
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

nlohmann::json parse_json(std::string_view json_text, std::string_view source) {
  try {
    return nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::parse_error& e) {
    fail(ErrorCode::kInvalidConfig, "{}: not valid JSON: {}", source, parse_error_text(e));
  }
}

ModelFamily family_of(const JsonFields& root) {
  if (!root.has("model_type")) {
    fail(ErrorCode::kInvalidConfig, "{}: required field 'model_type' is missing (expected '{}' or '{}')",
         root.source(), kModelType, kV4ModelType);
  }
  const std::string type = root.optional_string("model_type", "");
  if (type == kModelType || type == kTextModelType) return ModelFamily::kDeepseekV41;
  if (type == kV4ModelType) return ModelFamily::kDeepseekV4;
  fail(ErrorCode::kUnsupported, "{}: field 'model_type' = '{}' is not supported (expected '{}' or '{}')",
       root.source(), type, kModelType, kV4ModelType);
}

// Fields that the composite config may carry at the top level or inside text_config: text wins.
const JsonFields& either(const JsonFields& text, const JsonFields& root, std::string_view key) {
  return text.has(key) ? text : root;
}

RopeScaling read_rope_scaling(const JsonFields& text) {
  RopeScaling scaling;
  // transformers 5 spells the compress-layer YaRN block `compress_rope_parameters` (V4 tiny config).
  std::string_view key = text.has("rope_scaling") ? "rope_scaling" : "compress_rope_parameters";
  const nlohmann::json* object = text.optional_object(key);
  if (object == nullptr) return scaling;
  const JsonFields fields(*object, text.source(), text.field_name(key) + ".");
  const std::string_view type_key = fields.has("rope_type") ? "rope_type" : "type";
  if (!fields.has(type_key)) {
    fail(ErrorCode::kInvalidConfig, "{}: required field '{}' is missing (expected \"yarn\")", text.source(),
         fields.field_name("rope_type"));
  }
  scaling.rope_type = fields.optional_string(type_key, "");
  scaling.factor = fields.optional_number("factor", scaling.factor);
  scaling.original_max_position_embeddings =
      fields.optional_int("original_max_position_embeddings", scaling.original_max_position_embeddings);
  scaling.beta_fast = fields.optional_number("beta_fast", scaling.beta_fast);
  scaling.beta_slow = fields.optional_number("beta_slow", scaling.beta_slow);
  return scaling;
}

std::optional<QuantizationConfig> read_quantization(const JsonFields& text, const JsonFields& root) {
  const JsonFields& owner = either(text, root, "quantization_config");
  const nlohmann::json* object = owner.optional_object("quantization_config");
  if (object == nullptr) return std::nullopt;
  const JsonFields fields(*object, owner.source(), owner.field_name("quantization_config") + ".");
  QuantizationConfig quant;
  quant.quant_method = fields.optional_string("quant_method", "");
  quant.fmt = fields.optional_string("fmt", "");
  quant.scale_fmt = fields.optional_string("scale_fmt", "");
  quant.activation_scheme = fields.optional_string("activation_scheme", "");
  quant.weight_block_size = fields.optional_int_list("weight_block_size");
  // vLLM reads expert_dtype from the model config, TRT-LLM from quantization_config: accept both.
  const std::string model_level = either(text, root, "expert_dtype").optional_string("expert_dtype", "");
  quant.expert_dtype = fields.optional_string("expert_dtype", model_level);
  return quant;
}

// TRT-LLM also accepts a per-n-gram list for engram_vocab_size; the reference uses one scalar for all orders.
int64_t read_engram_vocab_size(const JsonFields& text) {
  constexpr std::string_view key = "engram_vocab_size";
  if (!text.has(key)) return 0;
  if (const auto list = text.optional_int_list_if_array(key)) {
    if (list->empty()) {
      fail(ErrorCode::kInvalidConfig, "{}: field '{}' must not be an empty list", text.source(),
           text.field_name(key));
    }
    for (const int64_t v : *list) {
      if (v != list->front()) {
        fail(ErrorCode::kInvalidConfig,
             "{}: field '{}' lists different sizes per n-gram order ({} and {}); the reference uses one size",
             text.source(), text.field_name(key), list->front(), v);
      }
    }
    return list->front();
  }
  return text.required_int(key);
}

void read_shapes(const JsonFields& text, ModelConfig& c) {
  c.vocab_size = text.required_int("vocab_size");
  c.hidden_size = text.required_int("hidden_size");
  c.num_hidden_layers = text.required_small_int("num_hidden_layers");
  c.num_attention_heads = text.required_int("num_attention_heads");
  c.num_key_value_heads = text.optional_int("num_key_value_heads", c.num_key_value_heads);
  c.head_dim = text.required_int("head_dim");
  if (c.family == ModelFamily::kDeepseekV4) {
    config::read_v4_rope_width(text, c);
  } else {
    c.qk_rope_head_dim = text.required_int("qk_rope_head_dim");
  }
  c.q_lora_rank = text.required_int("q_lora_rank");
  c.o_groups = text.required_int("o_groups");
  c.o_lora_rank = text.required_int("o_lora_rank");
}

void read_positions(const JsonFields& text, ModelConfig& c) {
  c.max_position_embeddings = text.optional_int("max_position_embeddings", c.max_position_embeddings);
  c.sliding_window = text.required_int("sliding_window");
  if (c.family == ModelFamily::kDeepseekV4 && config::read_v4_rope_parameters(text, c)) return;
  c.rope_theta = text.optional_number("rope_theta", c.rope_theta);
  c.compress_rope_theta = text.optional_number("compress_rope_theta", c.compress_rope_theta);
  c.rope_scaling = read_rope_scaling(text);
}

void read_schedule(const JsonFields& text, ModelConfig& c) {
  if (c.family == ModelFamily::kDeepseekV4) return config::read_v4_schedule(text, c);
  c.compress_ratios = text.required_small_int_list("compress_ratios");
  c.kv_source_layer_ids = text.required_small_int_list("kv_source_layer_ids");
  c.index_source_layer_ids = text.required_small_int_list("index_source_layer_ids");
  c.candidate_source_layer_id = text.optional_small_int("candidate_source_layer_id", -1);
  if (c.candidate_source_layer_id >= 0) {
    c.candidate_topk_blocks = text.required_int("candidate_topk_blocks");
    c.candidate_block_size = text.required_int("candidate_block_size");
  } else {
    c.candidate_topk_blocks = text.optional_int("candidate_topk_blocks", 0);
    c.candidate_block_size = text.optional_int("candidate_block_size", 0);
  }
  c.index_n_heads = text.required_int("index_n_heads");
  c.index_head_dim = text.required_int("index_head_dim");
  c.index_topk = text.required_int("index_topk");
}

void read_moe(const JsonFields& text, ModelConfig& c) {
  if (c.family == ModelFamily::kDeepseekV4) config::read_v4_hash_layers(text, c);
  c.n_routed_experts = text.required_int("n_routed_experts");
  c.n_shared_experts = text.optional_int("n_shared_experts", 1);
  c.num_experts_per_tok = text.required_int("num_experts_per_tok");
  c.moe_intermediate_size = text.required_int("moe_intermediate_size");
  c.scoring_func = text.optional_string("scoring_func", c.scoring_func);
  c.topk_method = text.optional_string("topk_method", c.topk_method);
  c.norm_topk_prob = text.optional_bool("norm_topk_prob", c.norm_topk_prob);
  c.routed_scaling_factor = text.optional_number("routed_scaling_factor", c.routed_scaling_factor);
  c.gate_temp = text.optional_number("gate_temp", c.gate_temp);
  c.hidden_act = text.optional_string("hidden_act", c.hidden_act);
  c.swiglu_limit = text.optional_number("swiglu_limit", c.swiglu_limit);
}

void read_norms_and_mhc(const JsonFields& text, ModelConfig& c) {
  if (c.family == ModelFamily::kDeepseekV4) c.rms_norm_eps = kV4RmsNormEps;
  c.rms_norm_eps = text.optional_number("rms_norm_eps", c.rms_norm_eps);
  c.hc_mult = text.required_int("hc_mult");
  c.hc_sinkhorn_iters = text.optional_int("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  c.hc_eps = text.optional_number("hc_eps", c.hc_eps);
}

void read_engram(const JsonFields& text, ModelConfig& c) {
  if (c.family == ModelFamily::kDeepseekV4) return;  // V4 has no Engram
  c.engram_layer_ids = text.optional_small_int_list("engram_layer_ids");
  if (c.engram_layer_ids.empty()) return;
  c.engram_num_embeddings = text.optional_int_list("engram_num_embeddings");
  c.engram_max_ngram_size = text.required_int("engram_max_ngram_size");
  c.engram_n_heads = text.required_int("engram_n_heads");
  c.engram_head_dim = text.required_int("engram_head_dim");
  if (!text.has("engram_vocab_size")) text.required_int("engram_vocab_size");  // reports it missing
  c.engram_vocab_size = read_engram_vocab_size(text);
  c.engram_compressed_vocab_size = text.required_int("engram_compressed_vocab_size");
  c.engram_pad_token_id = text.optional_int("engram_pad_token_id", 2);
}

void read_dspark(const JsonFields& text, ModelConfig& c) {
  c.num_nextn_predict_layers = text.optional_small_int("num_nextn_predict_layers", 0);
  c.dspark_block_size = text.optional_int("dspark_block_size", 0);
  c.dspark_noise_token_id = text.optional_int("dspark_noise_token_id", -1);
  c.dspark_target_layer_ids = text.optional_small_int_list("dspark_target_layer_ids");
  c.dspark_markov_rank = text.optional_int("dspark_markov_rank", 0);
  c.dspark_n_routed_experts = text.optional_int("dspark_n_routed_experts", 0);
  c.dspark_num_experts_per_tok = text.optional_int("dspark_num_experts_per_tok", 0);
}

void read_tokens_and_storage(const JsonFields& text, const JsonFields& root, ModelConfig& c) {
  c.bos_token_id = either(text, root, "bos_token_id").optional_int("bos_token_id", c.bos_token_id);
  c.eos_token_id = either(text, root, "eos_token_id").optional_int("eos_token_id", c.eos_token_id);
  if (const auto& f = either(text, root, "pad_token_id"); f.has("pad_token_id")) {
    c.pad_token_id = f.required_int("pad_token_id");
  }
  if (root.has("image_token_id")) c.image_token_id = root.required_int("image_token_id");
  c.tie_word_embeddings =
      either(text, root, "tie_word_embeddings").optional_bool("tie_word_embeddings", c.tie_word_embeddings);
  // transformers < 5 writes torch_dtype, transformers 5 writes dtype.
  const std::string_view dtype_key =
      (text.has("torch_dtype") || root.has("torch_dtype")) ? "torch_dtype" : "dtype";
  c.torch_dtype = either(text, root, dtype_key).optional_string(dtype_key, "");
  c.quantization_config = read_quantization(text, root);
  c.weight_block_size = c.family == ModelFamily::kDeepseekV4 ? kV4WeightBlock : kV41WeightBlock;
  if (c.quantization_config && !c.quantization_config->weight_block_size.empty()) {
    const std::vector<int64_t>& block = c.quantization_config->weight_block_size;
    if (block.size() != 2 || block[0] != block[1]) {
      fail(ErrorCode::kUnsupported,
           "{}: field 'quantization_config.weight_block_size' = [{}] is not supported (square tiles [n, n] "
           "only)",
           root.source(), fmt::join(block, ", "));
    }
    c.weight_block_size = block[0];
  }
}

}  // namespace

ModelConfig parse_model_config(std::string_view json_text, std::string_view source) {
  const nlohmann::json document = parse_json(json_text, source);
  if (!document.is_object()) {
    fail(ErrorCode::kInvalidConfig, "{}: top level must be a JSON object, got {}", source,
         document.type_name());
  }
  const JsonFields root(document, std::string(source), "");
  const ModelFamily family = family_of(root);
  const nlohmann::json* text_object = root.optional_object("text_config");
  const JsonFields text = text_object ? JsonFields(*text_object, std::string(source), "text_config.") : root;

  ModelConfig c;
  c.family = family;
  c.model_type = root.optional_string("model_type", "");
  c.architectures = root.optional_string_list("architectures");
  read_shapes(text, c);
  read_positions(text, c);
  read_schedule(text, c);
  read_moe(text, c);
  read_norms_and_mhc(text, c);
  read_engram(text, c);
  read_dspark(text, c);
  read_tokens_and_storage(text, root, c);
  validate_model_config(c, source);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  const std::filesystem::path file = is_dir ? path / "config.json" : path;
  if (!std::filesystem::exists(file, ec)) {
    if (is_dir) fail(ErrorCode::kNotFound, "{}: checkpoint directory has no config.json", path.string());
    fail(ErrorCode::kNotFound, "{}: no such file or directory", file.string());
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(ErrorCode::kIo, "{}: cannot open file for reading", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(ErrorCode::kIo, "{}: read failed", file.string());
  return parse_model_config(text.str(), file.string());
}

}  // namespace flashkv
