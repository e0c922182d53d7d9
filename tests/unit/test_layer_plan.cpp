// LayerPlan and MemoryReport against schedules written out by hand from spec/MODEL.md (§1.2 table, §12 tiny
// schedule, §8.2 byte counts), and against randomly generated schedules whose roles are known by
// construction.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>

#include "catch.hpp"

namespace {

using flashkv::AttentionMode;
using flashkv::LayerSide;
using flashkv::RopeKind;

const std::filesystem::path kConfigs = std::filesystem::path(FLASHKV_TEST_DATA) / "configs";

constexpr AttentionMode S = AttentionMode::kSwaOnly;
constexpr AttentionMode F = AttentionMode::kFull;
constexpr AttentionMode X = AttentionMode::kReindex;
constexpr AttentionMode U = AttentionMode::kReuse;
constexpr LayerSide E = LayerSide::kEncoder;
constexpr LayerSide D = LayerSide::kDecoder;

struct Row {
  int layer, ratio;
  AttentionMode mode;
  int kv_owner, topk_source, pool_source;
  LayerSide side;
  bool engram;
};

void check_plan(const flashkv::LayerPlan& plan, const std::vector<Row>& expected) {
  REQUIRE(plan.layers.size() == expected.size());
  for (const Row& row : expected) {
    const flashkv::LayerRole& r = plan.layers[static_cast<size_t>(row.layer)];
    INFO("layer " << row.layer);
    CHECK(r.index == row.layer);
    CHECK(r.ratio == row.ratio);
    CHECK(attention_mode_name(r.mode) == attention_mode_name(row.mode));
    CHECK(r.kv_owner == row.kv_owner);
    CHECK(r.topk_source == row.topk_source);
    CHECK(r.candidate_pool_source == row.pool_source);
    CHECK(layer_side_name(r.side) == layer_side_name(row.side));
    CHECK(r.has_engram() == row.engram);
    CHECK(r.is_kv_source == (row.mode == F));
    CHECK(r.is_index_source == (row.mode == F || row.mode == X));
    CHECK(r.rope == (row.ratio == 0 ? RopeKind::kBase : RopeKind::kCompressYarn));
  }
}

flashkv::LayerPlan plan_of(const char* name) {
  return flashkv::make_layer_plan(flashkv::load_model_config(kConfigs / name / "config.json"));
}

}  // namespace

TEST_CASE("official plan equals the spec §1.2 table layer by layer") {
  // clang-format off
  const std::vector<Row> table = {
      // layer ratio mode owner topk pool side engram
      {0, 0, S, -1, -1, -1, E, false},
      {1, 0, S, -1, -1, -1, E, true},
      {2, 2, F, 2, 2, -1, E, false},
      {3, 2, U, 2, 2, -1, E, false}, {4, 2, U, 2, 2, -1, E, false}, {5, 2, U, 2, 2, -1, E, false},
      {6, 2, U, 2, 2, -1, E, false}, {7, 2, U, 2, 2, -1, E, false},
      {8, 2, F, 8, 8, -1, E, false},
      {9, 2, U, 8, 8, -1, E, false}, {10, 2, U, 8, 8, -1, E, false}, {11, 2, U, 8, 8, -1, E, false},
      {12, 2, U, 8, 8, -1, E, false}, {13, 2, U, 8, 8, -1, E, false},
      {14, 2, F, 14, 14, -1, E, true},
      {15, 2, U, 14, 14, -1, E, false}, {16, 2, U, 14, 14, -1, E, false}, {17, 2, U, 14, 14, -1, E, false},
      {18, 2, U, 14, 14, -1, E, false}, {19, 2, U, 14, 14, -1, E, false},
      {20, 1, F, 20, 20, -1, D, false},
      {21, 1, U, 20, 20, -1, D, false}, {22, 1, U, 20, 20, -1, D, false}, {23, 1, U, 20, 20, -1, D, false},
      {24, 1, X, 20, 24, 20, D, false},
      {25, 1, U, 20, 24, -1, D, false}, {26, 1, U, 20, 24, -1, D, false}, {27, 1, U, 20, 24, -1, D, false},
      {28, 1, X, 20, 28, 20, D, false},
      {29, 1, U, 20, 28, -1, D, false}, {30, 1, U, 20, 28, -1, D, false}, {31, 1, U, 20, 28, -1, D, false},
      {32, 1, X, 20, 32, 20, D, false},
      {33, 1, U, 20, 32, -1, D, false}, {34, 1, U, 20, 32, -1, D, false}, {35, 1, U, 20, 32, -1, D, false},
      {36, 1, X, 20, 36, 20, D, false},
      {37, 1, U, 20, 36, -1, D, false}, {38, 1, U, 20, 36, -1, D, false}, {39, 1, U, 20, 36, -1, D, false},
  };
  // clang-format on
  const flashkv::LayerPlan plan = plan_of("deepseek-v4.1-flash");
  check_plan(plan, table);
  CHECK(plan.candidate_source_layer == 20);
  CHECK(plan.first_decoder_layer == 20);
  CHECK(plan.layers[20].is_candidate_source);
  CHECK(plan.num_dspark_stages == 3);
  CHECK(plan.layers[14].engram_slot == 1);
}

TEST_CASE("tiny plan equals the spec §12 schedule") {
  // 0 SWA, 1 SWA+Engram, 2 Full(r2)+Engram, 3 Reuse | 4 Full(r1)+pool, 5 Reuse, 6 Reindex, 7 Reuse.
  const std::vector<Row> table = {
      {0, 0, S, -1, -1, -1, E, false}, {1, 0, S, -1, -1, -1, E, true}, {2, 2, F, 2, 2, -1, E, true},
      {3, 2, U, 2, 2, -1, E, false},   {4, 1, F, 4, 4, -1, D, false},  {5, 1, U, 4, 4, -1, D, false},
      {6, 1, X, 4, 6, 4, D, false},    {7, 1, U, 4, 6, -1, D, false},
  };
  const flashkv::LayerPlan plan = plan_of("tiny-v41");
  check_plan(plan, table);
  CHECK(plan.layers[4].is_candidate_source);
  CHECK(plan.num_dspark_stages == 0);
}

TEST_CASE("second tiny plan equals its hand-derived schedule") {
  // ratios [0,0,2,2,2,1,1,1,1,1], kv sources [2,5], index sources [2,5,7,9], candidate 5, engram [0,6].
  const std::vector<Row> table = {
      {0, 0, S, -1, -1, -1, E, true}, {1, 0, S, -1, -1, -1, E, false}, {2, 2, F, 2, 2, -1, E, false},
      {3, 2, U, 2, 2, -1, E, false},  {4, 2, U, 2, 2, -1, E, false},   {5, 1, F, 5, 5, -1, D, false},
      {6, 1, U, 5, 5, -1, D, true},   {7, 1, X, 5, 7, 5, D, false},    {8, 1, U, 5, 7, -1, D, false},
      {9, 1, X, 5, 9, 5, D, false},
  };
  check_plan(plan_of("tiny-v41-alt"), table);
}

TEST_CASE("official memory report: 890 bytes/token, 40 x 128 x 528 window bytes") {
  const auto config = flashkv::load_model_config(kConfigs / "deepseek-v4.1-flash");
  const auto plan = flashkv::make_layer_plan(config);
  const flashkv::MemoryReport m = flashkv::make_memory_report(config, plan);
  CHECK(m.kv_entry_bytes == 288);
  CHECK(m.index_key_bytes == 68);
  CHECK(m.window_row_bytes == 528);
  CHECK(m.global_kv_bytes_per_token == 890.0);
  CHECK(m.window_bytes_per_session == 40u * 128u * 528u);
  CHECK(m.compressor_state_bytes_per_session == 3u * 2u * 512u * 4u);
  REQUIRE(m.kv_sources.size() == 4);
  CHECK(m.kv_sources[3].layer == 20);
  CHECK(m.kv_sources[3].ratio == 1);
  // Engram tables: (384006168 + 384016682) rows x 256 columns (§1.1).
  CHECK(m.parameters.engram_tables == (384006168ull + 384016682ull) * 256ull);
  // §1.1 [I]: ~16.1B active per decode token; ~552B backbone besides ~197B of Engram tables.
  CHECK(m.parameters.active_per_token > 15'900'000'000ull);
  CHECK(m.parameters.active_per_token < 16'300'000'000ull);
  const uint64_t backbone = m.parameters.total - m.parameters.engram_tables;
  CHECK(backbone > 545'000'000'000ull);
  CHECK(backbone < 560'000'000'000ull);
}

TEST_CASE("tiny memory reports follow the record sizes of their channel counts") {
  SECTION("tiny-v41: head_dim 64, index_head_dim 32, sources 2 (r2) and 4 (r1)") {
    const auto c = flashkv::load_model_config(kConfigs / "tiny-v41");
    const auto m = flashkv::make_memory_report(c, flashkv::make_layer_plan(c));
    CHECK(m.kv_entry_bytes == 32 + 4);
    CHECK(m.index_key_bytes == 16 + 1);
    CHECK(m.window_row_bytes == 64 + 2);
    CHECK(m.global_kv_bytes_per_token == 53.0 / 2 + 53.0);
    CHECK(m.window_bytes_per_session == 8u * 16u * 66u);
    CHECK(m.compressor_state_bytes_per_session == 2u * 64u * 4u);
  }
  SECTION("tiny-v41-alt: head_dim 128, index_head_dim 64, sources 2 (r2) and 5 (r1)") {
    const auto c = flashkv::load_model_config(kConfigs / "tiny-v41-alt");
    const auto m = flashkv::make_memory_report(c, flashkv::make_layer_plan(c));
    CHECK(m.kv_entry_bytes == 64 + 8);
    CHECK(m.index_key_bytes == 32 + 2);
    CHECK(m.global_kv_bytes_per_token == 106.0 / 2 + 106.0);
    CHECK(m.window_bytes_per_session == 10u * 8u * 132u);
  }
}

namespace {

// A random valid schedule built band by band, so every layer's owner, top-k source and pool source are known
// by construction rather than derived by the rule under test.
struct GeneratedSchedule {
  flashkv::ModelConfig config;
  std::vector<Row> expected;
};

GeneratedSchedule generate_schedule(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  flashkv::ModelConfig c = flashkv::load_model_config(kConfigs / "tiny-v41");
  c.compress_ratios.clear();
  c.kv_source_layer_ids.clear();
  c.index_source_layer_ids.clear();
  c.engram_layer_ids.clear();
  c.engram_num_embeddings.clear();
  GeneratedSchedule g;
  const int swa_prefix = pick(0, 3);
  for (int i = 0; i < swa_prefix; ++i) g.expected.push_back({i, 0, S, -1, -1, -1, E, false});
  const int ratio2_bands = pick(0, 3);
  const int ratio1_bands = pick(ratio2_bands == 0 ? 1 : 0, 2);
  const bool with_candidate = ratio1_bands > 0 && pick(0, 1) == 1;
  int candidate = -1;
  auto add_band = [&](int ratio, bool may_be_candidate) {
    const int owner = static_cast<int>(g.expected.size());
    const int length = pick(1, 6);
    const bool is_candidate = may_be_candidate && with_candidate && candidate < 0;
    if (is_candidate) candidate = owner;
    int topk = owner;
    for (int k = 0; k < length; ++k) {
      const int layer = owner + k;
      const bool reindex = k > 0 && pick(0, 2) == 0 && (candidate < 0 || owner == candidate);
      if (reindex) topk = layer;
      const AttentionMode mode = k == 0 ? F : (reindex ? X : U);
      const int pool = (candidate >= 0 && layer > candidate && (mode == X)) ? candidate : -1;
      g.expected.push_back({layer, ratio, mode, owner, topk, pool, E, false});
    }
  };
  for (int b = 0; b < ratio2_bands; ++b) add_band(2, false);
  for (int b = 0; b < ratio1_bands; ++b) add_band(1, b == ratio1_bands - 1);
  for (Row& row : g.expected) {
    c.compress_ratios.push_back(row.ratio);
    if (row.mode == F) c.kv_source_layer_ids.push_back(row.layer);
    if (row.mode == F || row.mode == X) c.index_source_layer_ids.push_back(row.layer);
    if (candidate >= 0 && row.layer >= candidate) row.side = D;
  }
  c.num_hidden_layers = static_cast<int>(g.expected.size());
  c.candidate_source_layer_id = candidate;
  c.num_nextn_predict_layers = 0;
  g.config = c;
  return g;
}

}  // namespace

TEST_CASE(
    "random schedules: plan roles match the construction, global KV bytes match a token-by-token count") {
  const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    INFO("trial " << trial);
    const GeneratedSchedule g = generate_schedule(rng);
    const flashkv::LayerPlan plan = flashkv::make_layer_plan(g.config);
    check_plan(plan, g.expected);

    const flashkv::MemoryReport m = flashkv::make_memory_report(g.config, plan);
    const uint64_t tokens = std::uniform_int_distribution<uint64_t>(0, 1000)(rng);
    // Oracle: walk the tokens; a ratio-r source publishes one record when a group of r tokens completes.
    uint64_t counted = 0;
    for (uint64_t s = 0; s < tokens; ++s) {
      for (const Row& row : g.expected) {
        if (row.mode == F && (s + 1) % static_cast<uint64_t>(row.ratio) == 0) counted += 36 + 17;
      }
    }
    CHECK(m.global_kv_bytes(tokens) == counted);
  }
}

TEST_CASE("make_layer_plan refuses a hand-built config that breaks a rule") {
  flashkv::ModelConfig c = flashkv::load_model_config(kConfigs / "tiny-v41");
  c.compress_ratios[3] = 1;  // layer 3 now reads layer 2's ratio-2 cache
  REQUIRE_THROWS_AS(flashkv::make_layer_plan(c), flashkv::Error);
}

TEST_CASE("sizes whose byte counts overflow 64 bits are refused, not wrapped") {
  flashkv::ModelConfig c = flashkv::load_model_config(kConfigs / "tiny-v41");
  c.vocab_size = int64_t{1} << 40;
  c.hidden_size = int64_t{1} << 40;
  const auto plan = flashkv::make_layer_plan(c);
  REQUIRE_THROWS_WITH(flashkv::make_memory_report(c, plan),
                      "config: tensor sizes overflow 64-bit element/byte counts (sizes too large)");
}
