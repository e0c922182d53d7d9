// deepseek_v4 (DeepSeek-V4-Flash) configs: parsing of both spellings, one mutated config per refusal rule,
// the layer plan, the memory report and the tensor inventory.
// Oracles: the official config's schedule as MODEL.md §1.1 states it (0,0 then alternating CSA 4 / HCA 128,
// first 3 layers hash-routed), the ≈3514 B/token of §8.2, the tensor census of the released checkpoint
// (per-layer tensor counts and shapes published by public ports that load it), and the golden checkpoints
// written by HF transformers (tests/data/golden/v4, tools/make_v4_golden.py) under the released names.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "config/tensor_inventory.hpp"
#include "loader/checkpoint.hpp"
#include "loader/tensor_inventory.hpp"

namespace {

using flashkv::AttentionMode;
using flashkv::ErrorCode;
using flashkv::LayerPlan;
using flashkv::ModelConfig;
using flashkv::ModelFamily;
using flashkv::config::ExpectedTensor;
using flashkv::config::StorageKind;
using nlohmann::json;

const std::filesystem::path kData = FLASHKV_TEST_DATA;
const std::filesystem::path kOfficial = kData / "configs" / "deepseek-v4-flash" / "config.json";
const std::filesystem::path kGolden = kData / "golden" / "v4";

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

ModelConfig parse(const json& doc) {
  return flashkv::parse_model_config(doc.dump(), "mutated.json");
}

std::vector<std::filesystem::path> golden_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (!std::filesystem::exists(kGolden)) return dirs;
  for (const auto& entry : std::filesystem::directory_iterator(kGolden)) {
    if (std::filesystem::exists(entry.path() / "config.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace

TEST_CASE("official V4-Flash config: family, schedule and defaults as MODEL.md §1.1") {
  const ModelConfig c = flashkv::load_model_config(kOfficial);
  CHECK(c.family == ModelFamily::kDeepseekV4);
  CHECK(flashkv::model_family_name(c.family) == "deepseek_v4");
  CHECK(c.hidden_size == 4096);
  CHECK(c.num_hidden_layers == 43);
  CHECK(c.q_lora_rank == 1024);
  CHECK(c.index_n_heads == 64);
  CHECK(c.n_routed_experts == 256);
  CHECK(c.moe_intermediate_size == 2048);
  CHECK(c.num_hash_layers == 3);
  CHECK(c.rms_norm_eps == 1e-6);
  CHECK(c.weight_block_size == 128);
  CHECK(c.csa_compress_ratio == 4);
  CHECK(c.rope_scaling.rope_type == "yarn");
  CHECK(c.rope_scaling.factor == 16.0);
  CHECK(c.compress_ratios.size() == 44);  // 43 layers + 1 MTP stage
  CHECK(c.kv_source_layer_ids.size() == 41);
  CHECK(c.index_source_layer_ids.size() == 21);
  CHECK(c.candidate_source_layer_id == -1);
  CHECK(c.engram_layer_ids.empty());
}

TEST_CASE("V4 defaults: rms_norm_eps 1e-6 (V4.1 keeps 1e-20), 3 hash layers, 128x128 FP8 tiles") {
  json doc = read_json(kOfficial);
  doc["num_hidden_layers"] = 2;
  doc.erase("num_hash_layers");
  CHECK(parse(doc).num_hash_layers == 2);  // transformers: min(3, num_hidden_layers)
  doc["num_hidden_layers"] = 43;
  CHECK(parse(doc).num_hash_layers == 3);
  doc.erase("rms_norm_eps");
  CHECK(parse(doc).rms_norm_eps == 1e-6);
  doc.erase("quantization_config");
  CHECK(parse(doc).weight_block_size == 128);
}

TEST_CASE("official V4-Flash plan: SWA 0-1, then CSA 4 / HCA 128 alternating, hash layers 0-2") {
  const ModelConfig c = flashkv::load_model_config(kOfficial);
  const LayerPlan plan = flashkv::make_layer_plan(c);
  CHECK(plan.family == ModelFamily::kDeepseekV4);
  CHECK(plan.has_hc_head);
  CHECK(plan.candidate_source_layer == -1);
  CHECK(plan.first_decoder_layer == -1);
  REQUIRE(plan.layers.size() == 43);
  for (const flashkv::LayerRole& r : plan.layers) {
    INFO("layer " << r.index);
    const bool swa = r.index < 2;
    const bool csa = !swa && r.index % 2 == 0;
    CHECK(r.ratio == (swa ? 0 : csa ? 4 : 128));
    CHECK(r.mode == (swa ? AttentionMode::kSwaOnly : csa ? AttentionMode::kCsa : AttentionMode::kHca));
    CHECK(flashkv::attention_mode_name(r.mode) == (swa ? "swa" : csa ? "csa" : "hca"));
    CHECK(r.is_kv_source == !swa);
    CHECK(r.is_index_source == csa);
    CHECK(r.kv_owner == (swa ? -1 : r.index));
    CHECK(r.topk_source == (csa ? r.index : -1));
    CHECK(r.overlapping_compressor == csa);
    CHECK(r.indexer_has_compressor == csa);
    CHECK(r.hash_routed == (r.index < 3));
    CHECK(r.rope == (swa ? flashkv::RopeKind::kBase : flashkv::RopeKind::kCompressYarn));
    CHECK(r.candidate_pool_source == -1);
    CHECK(!r.has_engram());
  }
}

TEST_CASE("official V4-Flash memory: 584 B records, 68 B keys, ~3514 B/token (spec §8.2)") {
  const ModelConfig c = flashkv::load_model_config(kOfficial);
  const LayerPlan plan = flashkv::make_layer_plan(c);
  const flashkv::MemoryReport m = flashkv::make_memory_report(c, plan);
  CHECK(m.kv_entry_bytes == 584);
  CHECK(m.window_row_bytes == 584);
  CHECK(m.index_key_bytes == 68);
  CHECK(std::abs(m.global_kv_bytes_per_token - (21.0 * (584 + 68) / 4 + 20.0 * 584 / 128)) < 1e-9);
  CHECK(std::round(m.global_kv_bytes_per_token) == 3514);
  CHECK(m.window_bytes_per_session == uint64_t{43} * 128 * 584);
  REQUIRE(m.kv_sources.size() == 41);
  for (const flashkv::KvSourceFootprint& s : m.kv_sources) {
    CHECK(s.index_key_bytes == (s.ratio == 4 ? 68u : 0u));
  }
  // 1000 tokens: CSA entries for every complete group of 4, HCA entries for every complete group of 128.
  CHECK(m.global_kv_bytes(1000) == uint64_t{21} * 250 * (584 + 68) + uint64_t{20} * 7 * 584);
  // ~284B parameters (paper), ~13B active (paper).
  CHECK(m.parameters.total > 270'000'000'000u);
  CHECK(m.parameters.total < 300'000'000'000u);
  CHECK(m.parameters.active_per_token > 11'000'000'000u);
  CHECK(m.parameters.active_per_token < 15'000'000'000u);
}

TEST_CASE("official V4-Flash inventory: tensor census and shapes of the released checkpoint") {
  const ModelConfig c = flashkv::load_model_config(kOfficial);
  const LayerPlan plan = flashkv::make_layer_plan(c);
  const std::vector<ExpectedTensor> tensors = flashkv::config::expected_tensors(c, plan);
  // Stored tensors per range (scales included), as published for the released checkpoint: 6 top-level,
  // 4706 in layers 0-2, 58179 in layers 3-39, 4721 in layers 40-42.
  std::map<std::string, int> stored;
  for (const ExpectedTensor& t : tensors) {
    std::string range = "top";
    if (t.name.rfind("layers.", 0) == 0) {
      const int layer = std::stoi(t.name.substr(7));
      range = layer < 3 ? "0-2" : layer < 40 ? "3-39" : "40-42";
    }
    stored[range] += flashkv::config::has_scale(t.storage) ? 2 : 1;
  }
  CHECK(stored["top"] == 6);
  CHECK(stored["0-2"] == 4706);
  CHECK(stored["3-39"] == 58179);
  CHECK(stored["40-42"] == 4721);

  std::map<std::string, const ExpectedTensor*> by_name;
  for (const ExpectedTensor& t : tensors) by_name[t.name] = &t;
  auto shape = [&](const std::string& name) {
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    return by_name[name]->shape;
  };
  using S = std::vector<int64_t>;
  CHECK(shape("hc_head_fn") == S{4, 16384});
  CHECK(shape("hc_head_scale") == S{1});
  CHECK(shape("layers.0.ffn.gate.tid2eid") == S{129280, 6});
  CHECK(by_name["layers.0.ffn.gate.tid2eid"]->storage == StorageKind::kIntegerTable);
  CHECK(by_name.count("layers.0.ffn.gate.bias") == 0);
  CHECK(by_name.count("layers.3.ffn.gate.tid2eid") == 0);
  CHECK(by_name.count("layers.0.attn.compressor.wkv.weight") == 0);
  CHECK(shape("layers.2.attn.compressor.wkv.weight") == S{1024, 4096});
  CHECK(shape("layers.2.attn.compressor.ape") == S{4, 1024});
  CHECK(shape("layers.2.attn.compressor.norm.weight") == S{512});
  CHECK(shape("layers.2.attn.indexer.wq_b.weight") == S{8192, 1024});
  CHECK(shape("layers.2.attn.indexer.weights_proj.weight") == S{64, 4096});
  CHECK(shape("layers.2.attn.indexer.compressor.wgate.weight") == S{256, 4096});
  CHECK(shape("layers.2.attn.indexer.compressor.ape") == S{4, 256});
  CHECK(shape("layers.3.attn.compressor.wgate.weight") == S{512, 4096});
  CHECK(shape("layers.3.attn.compressor.ape") == S{128, 512});
  CHECK(by_name.count("layers.3.attn.indexer.wq_b.weight") == 0);
  CHECK(shape("layers.3.hc_attn_fn") == S{24, 16384});
  CHECK(shape("layers.3.attn.wo_a.weight") == S{8192, 4096});
  CHECK(by_name["layers.3.attn.wq_b.weight"]->storage == StorageKind::kFp8Block128);
  CHECK(flashkv::config::scale_shape(*by_name["layers.3.attn.wq_b.weight"]) == S{256, 8});
  CHECK(by_name["layers.3.ffn.experts.0.w1.weight"]->storage == StorageKind::kMxfp4);
}

TEST_CASE("transformers-5 spelling of a V4 config parses to the released spelling's config") {
  for (const auto& dir : golden_dirs()) {
    if (!std::filesystem::exists(dir / "hf_config.json")) continue;
    INFO(dir.string());
    const ModelConfig released = flashkv::load_model_config(dir / "config.json");
    const ModelConfig hf = flashkv::load_model_config(dir / "hf_config.json");
    CHECK(hf.family == ModelFamily::kDeepseekV4);
    CHECK(std::vector<int>(hf.compress_ratios.begin(), hf.compress_ratios.begin() + hf.num_hidden_layers) ==
          std::vector<int>(released.compress_ratios.begin(),
                           released.compress_ratios.begin() + released.num_hidden_layers));
    CHECK(hf.csa_compress_ratio == released.csa_compress_ratio);
    CHECK(hf.num_hash_layers == released.num_hash_layers);
    CHECK(hf.qk_rope_head_dim == released.qk_rope_head_dim);
    CHECK(hf.rope_theta == released.rope_theta);
    CHECK(hf.compress_rope_theta == released.compress_rope_theta);
    CHECK(hf.rope_scaling.rope_type == released.rope_scaling.rope_type);
    CHECK(hf.rope_scaling.factor == released.rope_scaling.factor);
    CHECK(hf.rope_scaling.original_max_position_embeddings ==
          released.rope_scaling.original_max_position_embeddings);
    CHECK(hf.rms_norm_eps == released.rms_norm_eps);
    CHECK(hf.kv_source_layer_ids == released.kv_source_layer_ids);
    CHECK(hf.index_source_layer_ids == released.index_source_layer_ids);
  }
}

TEST_CASE(
    "transformers-5 spelling: layer_types with a non-default CSA rate, mlp_layer_types, partial rotary") {
  json doc = read_json(kOfficial);
  doc.erase("compress_ratios");
  doc.erase("num_hash_layers");
  doc.erase("qk_rope_head_dim");
  doc["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};
  doc["compress_rates"] = {{"compressed_sparse_attention", 8}, {"heavily_compressed_attention", 32}};
  doc["mlp_layer_types"] = {"hash_moe", "moe", "moe"};
  doc["partial_rotary_factor"] = 0.25;
  doc["num_hidden_layers"] = 3;
  const ModelConfig c = parse(doc);
  CHECK(c.compress_ratios == std::vector<int>{0, 8, 32});
  CHECK(c.csa_compress_ratio == 8);
  CHECK(c.num_hash_layers == 1);
  CHECK(c.qk_rope_head_dim == 128);
  const LayerPlan plan = flashkv::make_layer_plan(c);
  CHECK(plan.layers[1].mode == AttentionMode::kCsa);
  CHECK(plan.layers[1].overlapping_compressor);
  CHECK(plan.layers[2].mode == AttentionMode::kHca);
  CHECK(plan.layers[0].hash_routed);
  CHECK(!plan.layers[1].hash_routed);
}

namespace {

struct V4Mutation {
  std::string what;
  std::function<void(json&)> apply;
  std::vector<std::string> fragments;
  ErrorCode code = ErrorCode::kInvalidConfig;
};

std::vector<V4Mutation> v4_mutations() {
  using F = std::vector<std::string>;
  return {
      {"negative ratio", [](json& d) { d["compress_ratios"][5] = -4; },
       F{"'compress_ratios[5]' = -4", "HCA"}},
      {"absurd ratio", [](json& d) { d["compress_ratios"][5] = 1 << 20; },
       F{"'compress_ratios[5]'", "65536"}},
      {"too few ratios",
       [](json& d) {
         d["compress_ratios"] = {0, 0, 4};
       },
       F{"'compress_ratios' has 3 entries", "num_hidden_layers = 43"}},
      {"missing ratios", [](json& d) { d.erase("compress_ratios"); }, F{"'compress_ratios'", "missing"}},
      {"too many hash layers", [](json& d) { d["num_hash_layers"] = 44; },
       F{"'num_hash_layers' = 44", "[0, 43]"}},
      {"negative hash layers", [](json& d) { d["num_hash_layers"] = -1; }, F{"'num_hash_layers' = -1"}},
      {"hash layers not an integer", [](json& d) { d["num_hash_layers"] = "3"; },
       F{"'num_hash_layers'", "integer"}},
      {"weight blocks 64",
       [](json& d) {
         d["quantization_config"]["weight_block_size"] = {64, 64};
       },
       F{"'quantization_config.weight_block_size' = 64", "32 or 128"}, ErrorCode::kUnsupported},
      {"non-square weight blocks",
       [](json& d) {
         d["quantization_config"]["weight_block_size"] = {128, 64};
       },
       F{"'quantization_config.weight_block_size' = [128, 64]", "square"}, ErrorCode::kUnsupported},
      {"missing index_topk", [](json& d) { d.erase("index_topk"); }, F{"'index_topk'", "missing"}},
      {"odd rope width", [](json& d) { d["qk_rope_head_dim"] = 63; }, F{"'qk_rope_head_dim'", "even"}},
      {"rope wider than the indexer", [](json& d) { d["qk_rope_head_dim"] = 256; },
       F{"'qk_rope_head_dim' = 256", "index_head_dim"}},
      {"partial rotary not whole",
       [](json& d) {
         d.erase("qk_rope_head_dim");
         d["partial_rotary_factor"] = 0.3;
       },
       F{"'partial_rotary_factor' = 0.3", "whole number"}},
      {"unknown layer type",
       [](json& d) {
         d.erase("compress_ratios");
         d["num_hidden_layers"] = 2;
         d["layer_types"] = {"sliding_attention", "full_attention"};
       },
       F{"'layer_types[1]' = 'full_attention'"}},
      {"CSA rate 1",
       [](json& d) {
         d.erase("compress_ratios");
         d["num_hidden_layers"] = 1;
         d["layer_types"] = {"compressed_sparse_attention"};
         d["compress_rates"] = {{"compressed_sparse_attention", 1}};
       },
       F{"'compress_rates.compressed_sparse_attention' = 1", "[2, 65536]"}},
      {"hash layer after a routed one",
       [](json& d) {
         d.erase("num_hash_layers");
         d["mlp_layer_types"] = {"moe", "hash_moe"};
       },
       F{"'mlp_layer_types[1]'", "must lead"}},
      {"unknown mlp layer type",
       [](json& d) {
         d.erase("num_hash_layers");
         d["mlp_layer_types"] = {"dense"};
       },
       F{"'mlp_layer_types[0]' = 'dense'"}},
      {"unsupported rope", [](json& d) { d["rope_scaling"]["type"] = "linear"; },
       F{"'rope_scaling.rope_type' = 'linear'"}, ErrorCode::kUnsupported},
      {"unknown model type", [](json& d) { d["model_type"] = "deepseek_v5"; },
       F{"'model_type' = 'deepseek_v5'", "'deepseek_v41' or 'deepseek_v4'"}, ErrorCode::kUnsupported},
      {"more routed than experts", [](json& d) { d["num_experts_per_tok"] = 300; },
       F{"'num_experts_per_tok' = 300"}},
  };
}

}  // namespace

TEST_CASE("mutated V4 configs are refused with the field and the rule named") {
  for (const V4Mutation& m : v4_mutations()) {
    INFO(m.what);
    json doc = read_json(kOfficial);
    m.apply(doc);
    ErrorCode code = ErrorCode::kOk;
    std::string message = "(accepted)";
    try {
      parse(doc);
    } catch (const flashkv::Error& e) {
      code = e.code();
      message = e.what();
    }
    INFO(message);
    CHECK(code == m.code);
    CHECK(contains(message, "mutated.json"));
    for (const std::string& fragment : m.fragments) CHECK(contains(message, fragment));
  }
}

TEST_CASE("V4 head widths that V4.1 refuses are accepted (no block-quantized V4.1 records)") {
  json doc = read_json(kOfficial);
  doc["head_dim"] = 16;
  doc["qk_rope_head_dim"] = 8;
  doc["index_head_dim"] = 16;
  const ModelConfig c = parse(doc);
  const flashkv::MemoryReport m = flashkv::make_memory_report(c, flashkv::make_layer_plan(c));
  CHECK(m.kv_entry_bytes == 32);  // 8 FP8 + 1 scale + 16 BF16 = 25, padded to 32
  CHECK(m.index_key_bytes == 9);  // 8 packed + 1 scale
}

TEST_CASE("golden V4 configs: plan follows compress_ratios and num_hash_layers") {
  const auto dirs = golden_dirs();
  for (const auto& dir : dirs) {
    INFO(dir.string());
    const json doc = read_json(dir / "config.json");
    const ModelConfig c = flashkv::load_model_config(dir);
    const LayerPlan plan = flashkv::make_layer_plan(c);
    const auto ratios = doc["compress_ratios"].get<std::vector<int>>();
    const int hash = doc["num_hash_layers"].get<int>();
    REQUIRE(plan.layers.size() == static_cast<size_t>(doc["num_hidden_layers"].get<int>()));
    for (const flashkv::LayerRole& r : plan.layers) {
      const int ratio = ratios[static_cast<size_t>(r.index)];
      CHECK(r.ratio == ratio);
      CHECK(r.mode == (ratio == 0   ? AttentionMode::kSwaOnly
                       : ratio == 4 ? AttentionMode::kCsa
                                    : AttentionMode::kHca));
      CHECK(r.hash_routed == (r.index < hash));
    }
  }
}

TEST_CASE("golden V4 checkpoints (written by HF transformers, released names) fit the inventory") {
  const auto dirs = golden_dirs();
  for (const auto& dir : dirs) {
    INFO(dir.string());
    const ModelConfig c = flashkv::load_model_config(dir);
    const LayerPlan plan = flashkv::make_layer_plan(c);
    const auto checkpoint = flashkv::loader::Checkpoint::open(dir / "model.safetensors");
    const auto problems = flashkv::loader::check_checkpoint(checkpoint, c, plan);
    std::string listed;
    for (const auto& p : problems) listed += p.tensor + ": " + p.what + "\n";
    INFO(listed);
    CHECK(problems.empty());
    CHECK(checkpoint.tensor_count() == flashkv::config::expected_tensors(c, plan).size());
  }
}
