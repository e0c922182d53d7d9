// config.json parsing and validation: accepted spellings, defaults, and one mutated config per refusal rule
// (the message must name the field and the rule).
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "catch.hpp"

namespace {

using flashkv::ErrorCode;
using nlohmann::json;

const std::filesystem::path kConfigs = std::filesystem::path(FLASHKV_TEST_DATA) / "configs";

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

json tiny_document() {
  return read_json(kConfigs / "tiny-v41" / "config.json");
}

flashkv::ModelConfig parse(const json& doc) {
  return flashkv::parse_model_config(doc.dump(), "mutated.json");
}

struct Refusal {
  ErrorCode code = ErrorCode::kOk;
  std::string message = "(accepted)";
};

Refusal refusal_of(const json& doc) {
  try {
    parse(doc);
  } catch (const flashkv::Error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

struct Mutation {
  std::string what;
  std::function<void(json& text_config, json& root)> apply;
  std::vector<std::string> fragments;  // all must appear in the message
  ErrorCode code = ErrorCode::kInvalidConfig;
};

std::vector<Mutation> mutations() {
  using F = std::vector<std::string>;
  return {
      {"head_dim not a multiple of 32", [](json& t, json&) { t["head_dim"] = 80; },
       F{"'head_dim' = 80", "multiple of 32"}},
      {"head_dim 500", [](json& t, json&) { t["head_dim"] = 500; }, F{"'head_dim' = 500", "multiple of 32"}},
      {"index_head_dim not a multiple of 32", [](json& t, json&) { t["index_head_dim"] = 48; },
       F{"'index_head_dim' = 48", "multiple of 32"}},
      {"odd qk_rope_head_dim", [](json& t, json&) { t["qk_rope_head_dim"] = 15; },
       F{"'qk_rope_head_dim'", "even"}},
      {"qk_rope_head_dim > head_dim", [](json& t, json&) { t["qk_rope_head_dim"] = 96; },
       F{"'qk_rope_head_dim' = 96", "must not exceed head_dim"}},
      {"qk_rope_head_dim > index_head_dim", [](json& t, json&) { t["qk_rope_head_dim"] = 48; },
       F{"'qk_rope_head_dim' = 48", "must not exceed index_head_dim"}},
      {"heads not divisible by o_groups", [](json& t, json&) { t["num_attention_heads"] = 3; },
       F{"'num_attention_heads' = 3", "divisible by o_groups"}},
      {"two KV heads", [](json& t, json&) { t["num_key_value_heads"] = 2; },
       F{"'num_key_value_heads'", "must be 1"}},
      {"absurd sliding window", [](json& t, json&) { t["sliding_window"] = int64_t{1} << 40; },
       F{"'sliding_window' = 1099511627776", "at most"}},
      {"zero sliding window", [](json& t, json&) { t["sliding_window"] = 0; },
       F{"'sliding_window' = 0", "positive"}},
      {"negative hidden size", [](json& t, json&) { t["hidden_size"] = -256; },
       F{"'hidden_size' = -256", "positive"}},
      {"more experts per token than experts", [](json& t, json&) { t["num_experts_per_tok"] = 9; },
       F{"'num_experts_per_tok' = 9", "n_routed_experts"}},
      {"two shared experts", [](json& t, json&) { t["n_shared_experts"] = 2; }, F{"'n_shared_experts' = 2"}},
      {"ratio 4", [](json& t, json&) { t["compress_ratios"][3] = 4; },
       F{"'compress_ratios[3]' = 4", "0, 1 or 2"}},
      {"negative ratio", [](json& t, json&) { t["compress_ratios"][0] = -1; },
       F{"'compress_ratios[0]' = -1"}},
      {"too few ratios", [](json& t, json&) { t["compress_ratios"] = {0, 0, 2, 2, 1, 1, 1}; },
       F{"'compress_ratios'", "fewer than num_hidden_layers"}},
      {"KV source with ratio 0",
       [](json& t, json&) {
         t["kv_source_layer_ids"] = {1, 2, 4};
         t["index_source_layer_ids"] = {1, 2, 4, 6};
       },
       F{"'kv_source_layer_ids'", "layer 1", "ratio is 0"}},
      {"KV source that is no index source",
       [](json& t, json&) {
         t["index_source_layer_ids"] = {2, 6};
       },
       F{"'kv_source_layer_ids'", "layer 4", "index_source_layer_ids"}},
      {"index source with ratio 0",
       [](json& t, json&) {
         t["index_source_layer_ids"] = {0, 2, 4, 6};
       },
       F{"'index_source_layer_ids'", "layer 0", "ratio is 0"}},
      {"compressed layer below every KV source",
       [](json& t, json&) { t["compress_ratios"] = {0, 2, 2, 2, 1, 1, 1, 1}; },
       F{"'compress_ratios'", "layer 1", "no KV source at or below"}},
      {"owner with different ratio", [](json& t, json&) { t["compress_ratios"] = {0, 0, 2, 1, 1, 1, 1, 1}; },
       F{"layer 3 has ratio 1", "KV source layer 2, has ratio 2", "owner with different ratio"}},
      {"index source without owner",
       [](json& t, json&) {
         t["kv_source_layer_ids"] = {4};
         t["index_source_layer_ids"] = {2, 4, 6};
       },
       F{"'index_source_layer_ids'", "index source layer 2", "no owner"}},
      {"index source whose nearest owner has another ratio",
       [](json& t, json&) {
         t["compress_ratios"] = {0, 0, 2, 1, 1, 1, 1, 1};
         t["index_source_layer_ids"] = {2, 3, 4, 6};
       },
       F{"index source layer 3", "no owner", "layer 2 with ratio 2"}},
      {"candidate source not a KV source", [](json& t, json&) { t["candidate_source_layer_id"] = 6; },
       F{"'candidate_source_layer_id' = 6", "KV source"}},
      {"candidate source with ratio 2", [](json& t, json&) { t["candidate_source_layer_id"] = 2; },
       F{"'candidate_source_layer_id' = 2", "ratio 1"}},
      {"candidate source out of range", [](json& t, json&) { t["candidate_source_layer_id"] = 8; },
       F{"'candidate_source_layer_id' = 8", "out of range"}},
      {"candidate pool without blocks", [](json& t, json&) { t["candidate_topk_blocks"] = 0; },
       F{"'candidate_topk_blocks' = 0", "positive"}},
      {"candidate pool without block size", [](json& t, json&) { t.erase("candidate_block_size"); },
       F{"'text_config.candidate_block_size'", "missing"}},
      {"pool-restricted layer reading another owner's KV",
       [](json& t, json&) {
         t["kv_source_layer_ids"] = {2, 4, 6};
         t["index_source_layer_ids"] = {2, 4, 6};
       },
       F{"layer 6 after candidate source 4", "KV of layer 6"}},
      {"unsorted ids",
       [](json& t, json&) {
         t["index_source_layer_ids"] = {4, 2, 6};
       },
       F{"'index_source_layer_ids'", "sorted ascending"}},
      {"duplicate ids",
       [](json& t, json&) {
         t["index_source_layer_ids"] = {2, 4, 4, 6};
       },
       F{"'index_source_layer_ids'", "layer 4 twice"}},
      {"engram layer out of range",
       [](json& t, json&) {
         t["engram_layer_ids"] = {1, 8};
       },
       F{"'engram_layer_ids'", "8", "out of range"}},
      {"kv source out of range",
       [](json& t, json&) {
         t["kv_source_layer_ids"] = {-1, 2, 4};
       },
       F{"'kv_source_layer_ids'", "-1", "out of range"}},
      {"engram tables one short", [](json& t, json&) { t["engram_num_embeddings"] = {6126}; },
       F{"'engram_num_embeddings'", "1 entries", "engram_layer_ids has 2"}},
      {"engram table smaller than its hash columns",
       [](json& t, json&) {
         t["engram_num_embeddings"] = {100, 6332};
       },
       F{"'engram_num_embeddings[0]' = 100"}},
      {"engram head_dim not a multiple of 32", [](json& t, json&) { t["engram_head_dim"] = 48; },
       F{"'engram_head_dim' = 48", "multiple of 32"}},
      {"engram ngram size 1", [](json& t, json&) { t["engram_max_ngram_size"] = 1; },
       F{"'engram_max_ngram_size' = 1", "at least 2"}},
      {"engram pad id outside the vocabulary", [](json& t, json&) { t["engram_pad_token_id"] = 512; },
       F{"'engram_pad_token_id' = 512", "out of range"}},
      {"engram vocab sizes differing per n-gram order",
       [](json& t, json&) {
         t["engram_vocab_size"] = {1000, 1000, 2000};
       },
       F{"'text_config.engram_vocab_size'"}},
      {"negative rms_norm_eps", [](json& t, json&) { t["rms_norm_eps"] = -1.0; },
       F{"'rms_norm_eps'", "positive"}},
      {"yarn factor below 1", [](json& t, json&) { t["rope_scaling"]["factor"] = 0.5; },
       F{"'rope_scaling.factor' = 0.5"}},
      {"eos outside the vocabulary", [](json& t, json&) { t["eos_token_id"] = 9999; },
       F{"'eos_token_id' = 9999", "out of range"}},
      {"missing head_dim", [](json& t, json&) { t.erase("head_dim"); },
       F{"'text_config.head_dim'", "missing"}},
      {"missing compress_ratios", [](json& t, json&) { t.erase("compress_ratios"); },
       F{"'text_config.compress_ratios'", "missing"}},
      {"head_dim as a string", [](json& t, json&) { t["head_dim"] = "64"; },
       F{"'text_config.head_dim'", "must be an integer", "\"64\""}},
      {"hidden_size as a float", [](json& t, json&) { t["hidden_size"] = 256.5; },
       F{"'text_config.hidden_size'", "must be an integer"}},
      {"ratios holding a string", [](json& t, json&) { t["compress_ratios"][2] = "2"; },
       F{"'text_config.compress_ratios'", "integers"}},
      {"text_config not an object", [](json& t, json&) { t = json::array({1}); },
       F{"'text_config'", "must be an object"}},
      {"rope_scaling without a type", [](json& t, json&) { t["rope_scaling"].erase("rope_type"); },
       F{"'text_config.rope_scaling.rope_type'", "missing"}},
      {"missing model_type", [](json&, json& root) { root.erase("model_type"); },
       F{"'model_type'", "missing"}},
      {"deepseek_v3 model_type", [](json&, json& root) { root["model_type"] = "deepseek_v3"; },
       F{"'model_type' = 'deepseek_v3'", "not supported"}, ErrorCode::kUnsupported},
      {"linear rope scaling", [](json& t, json&) { t["rope_scaling"]["rope_type"] = "linear"; },
       F{"'rope_scaling.rope_type' = 'linear'"}, ErrorCode::kUnsupported},
      {"softmax router", [](json& t, json&) { t["scoring_func"] = "softmax"; },
       F{"'scoring_func' = 'softmax'"}, ErrorCode::kUnsupported},
  };
}

}  // namespace

TEST_CASE("every refusal rule names the file, the field and the rule") {
  for (const Mutation& m : mutations()) {
    INFO("mutation: " << m.what);
    json root = tiny_document();
    json& text = root["text_config"];
    m.apply(text, root);
    const Refusal r = refusal_of(root);
    INFO("message: " << r.message);
    CHECK(r.code == m.code);
    CHECK(contains(r.message, "mutated.json: "));
    CHECK(r.message.find('\n') == std::string::npos);
    for (const std::string& fragment : m.fragments) CHECK(contains(r.message, fragment));
  }
}

TEST_CASE("the unmutated test configs are accepted") {
  for (const char* name : {"deepseek-v4.1-flash", "tiny-v41", "tiny-v41-alt"}) {
    INFO(name);
    const Refusal r = refusal_of(read_json(kConfigs / name / "config.json"));
    CHECK(r.message == "(accepted)");
  }
}

TEST_CASE("official config values are read from text_config with their released names") {
  const flashkv::ModelConfig c = flashkv::load_model_config(kConfigs / "deepseek-v4.1-flash");
  CHECK(c.model_type == "deepseek_v41");
  CHECK(c.architectures == std::vector<std::string>{"DeepseekV41ForCausalLM"});
  CHECK(c.vocab_size == 129280);
  CHECK(c.hidden_size == 5120);
  CHECK(c.num_hidden_layers == 40);
  CHECK(c.num_attention_heads == 64);
  CHECK(c.head_dim == 512);
  CHECK(c.qk_rope_head_dim == 64);
  CHECK(c.q_lora_rank == 1280);
  CHECK(c.o_groups == 8);
  CHECK(c.o_lora_rank == 1024);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.compress_rope_theta == 160000.0);
  CHECK(c.rope_scaling.rope_type == "yarn");
  CHECK(c.rope_scaling.factor == 16.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 65536);
  CHECK(c.rope_scaling.beta_fast == 32.0);
  CHECK(c.rope_scaling.beta_slow == 1.0);
  CHECK(c.sliding_window == 128);
  CHECK(c.compress_ratios.size() == 43);
  CHECK(c.kv_source_layer_ids == std::vector<int>{2, 8, 14, 20});
  CHECK(c.index_source_layer_ids == std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36});
  CHECK(c.candidate_source_layer_id == 20);
  CHECK(c.candidate_topk_blocks == 2048);
  CHECK(c.candidate_block_size == 8);
  CHECK(c.index_n_heads == 32);
  CHECK(c.index_head_dim == 128);
  CHECK(c.index_topk == 512);
  CHECK(c.n_routed_experts == 384);
  CHECK(c.num_experts_per_tok == 6);
  CHECK(c.moe_intermediate_size == 2304);
  CHECK(c.routed_scaling_factor == 1.5);
  CHECK(c.rms_norm_eps == 1e-20);
  CHECK(c.engram_layer_ids == std::vector<int>{1, 14});
  CHECK(c.engram_num_embeddings == std::vector<int64_t>{384006168, 384016682});
  CHECK(c.engram_compressed_vocab_size == 99092);
  CHECK(c.num_nextn_predict_layers == 3);
  CHECK(c.dspark_target_layer_ids == std::vector<int>{37, 38, 39});
  CHECK(c.image_token_id == 129264);
  CHECK(c.torch_dtype == "bfloat16");
  REQUIRE(c.quantization_config.has_value());
  CHECK(c.quantization_config->quant_method == "fp8");
  CHECK(c.quantization_config->weight_block_size == std::vector<int64_t>{32, 32});
}

TEST_CASE("a flat text config reads the same as the nested one") {
  json nested = tiny_document();
  json flat = nested["text_config"];
  flat["model_type"] = "deepseek_v41";
  flat["architectures"] = nested["architectures"];
  flat["quantization_config"] = nested["quantization_config"];
  flat["torch_dtype"] = nested["torch_dtype"];
  const auto a = parse(nested);
  const auto b = parse(flat);
  CHECK(a.compress_ratios == b.compress_ratios);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.engram_num_embeddings == b.engram_num_embeddings);
  CHECK(a.quantization_config->scale_fmt == b.quantization_config->scale_fmt);
  CHECK(a.torch_dtype == b.torch_dtype);
}

TEST_CASE("optional numeric fields take the V4.1-Flash values when absent") {
  json doc = tiny_document();
  json& t = doc["text_config"];
  for (const char* key :
       {"rope_theta", "compress_rope_theta", "rope_scaling", "rms_norm_eps", "hc_eps", "hc_sinkhorn_iters",
        "routed_scaling_factor", "swiglu_limit", "scoring_func", "norm_topk_prob", "num_key_value_heads",
        "max_position_embeddings", "num_nextn_predict_layers", "engram_pad_token_id"}) {
    t.erase(key);
  }
  const auto c = parse(doc);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.compress_rope_theta == 160000.0);
  CHECK(c.rope_scaling.factor == 16.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 65536);
  CHECK(c.rms_norm_eps == 1e-20);
  CHECK(c.hc_eps == 1e-6);
  CHECK(c.hc_sinkhorn_iters == 20);
  CHECK(c.routed_scaling_factor == 1.5);
  CHECK(c.swiglu_limit == 10.0);
  CHECK(c.scoring_func == "sqrtsoftplus");
  CHECK(c.norm_topk_prob);
  CHECK(c.num_key_value_heads == 1);
  CHECK(c.max_position_embeddings == 1048576);
  CHECK(c.num_nextn_predict_layers == 0);
  CHECK(c.engram_pad_token_id == 2);
}

TEST_CASE("spellings of other writers are accepted") {
  json doc = tiny_document();
  json& t = doc["text_config"];
  SECTION("transformers 5: dtype and compress_rope_parameters") {
    doc.erase("torch_dtype");
    doc["dtype"] = "bfloat16";
    t["compress_rope_parameters"] = t["rope_scaling"];
    t["compress_rope_parameters"].erase("rope_type");
    t["compress_rope_parameters"]["type"] = "yarn";
    t["compress_rope_parameters"]["factor"] = 8;
    t.erase("rope_scaling");
    const auto c = parse(doc);
    CHECK(c.torch_dtype == "bfloat16");
    CHECK(c.rope_scaling.factor == 8.0);
  }
  SECTION("TRT-LLM: engram_vocab_size as one size per n-gram order") {
    t["engram_vocab_size"] = {1000, 1000, 1000};
    CHECK(parse(doc).engram_vocab_size == 1000);
  }
  SECTION("null candidate source: no pool, no CED split") {
    t["candidate_source_layer_id"] = nullptr;
    t.erase("candidate_topk_blocks");
    t.erase("candidate_block_size");
    CHECK(parse(doc).candidate_source_layer_id == -1);
  }
  SECTION("expert_dtype at the model level (vLLM) or in quantization_config (TRT-LLM)") {
    t["expert_dtype"] = "fp4";
    CHECK(parse(doc).quantization_config->expert_dtype == "fp4");
    doc["quantization_config"]["expert_dtype"] = "fp8";
    CHECK(parse(doc).quantization_config->expert_dtype == "fp8");
  }
  SECTION("no engram") {
    t.erase("engram_layer_ids");
    t.erase("engram_num_embeddings");
    CHECK(parse(doc).engram_layer_ids.empty());
  }
}

TEST_CASE("bad JSON and bad paths are refused naming the file") {
  SECTION("syntax error reports the parser's position") {
    try {
      flashkv::parse_model_config("{\n  \"model_type\": \"deepseek_v41\",\n  oops\n}", "broken.json");
      CHECK(false);
    } catch (const flashkv::Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidConfig);
      const std::string what = e.what();
      CHECK(contains(what, "broken.json: not valid JSON"));
      CHECK(contains(what, "line 3"));
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  SECTION("top level not an object") {
    REQUIRE_THROWS_WITH(flashkv::parse_model_config("[1, 2]", "list.json"),
                        "list.json: top level must be a JSON object, got array");
  }
  SECTION("missing file") {
    const auto path = kConfigs / "no-such-config.json";
    try {
      flashkv::load_model_config(path);
      CHECK(false);
    } catch (const flashkv::Error& e) {
      CHECK(e.code() == ErrorCode::kNotFound);
      CHECK(contains(e.what(), path.string()));
    }
  }
  SECTION("directory without config.json") {
    try {
      flashkv::load_model_config(kConfigs);
      CHECK(false);
    } catch (const flashkv::Error& e) {
      CHECK(e.code() == ErrorCode::kNotFound);
      CHECK(contains(e.what(), "no config.json"));
    }
  }
  SECTION("a directory is read through its config.json") {
    CHECK(flashkv::load_model_config(kConfigs / "tiny-v41").num_hidden_layers == 8);
  }
}
