// The C ABI translates faithfully: the same checkpoint loaded through flashkv.h and through the C++ API (an
// oracle independent of the translation layer) gives equal config and memory figures, and equal logits,
// samples and generations for random options, field by field. A swapped or mis-scaled field in the
// C-to-C++ option mapping shows up here even where the plain-C tests' consistency laws still hold.
// libflashkv.so keeps its own copy of the core (its symbols are local), so the two paths share nothing.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include <flashkv/flashkv.hpp>

#include "catch.hpp"
#include "flashkv.h"

namespace {

uint64_t run_seed() {
  static const uint64_t seed = []() -> uint64_t {
    if (const char* text = std::getenv("FKV_TEST_SEED")) return std::strtoull(text, nullptr, 10);
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

struct CModel {
  fkv_model* handle = nullptr;
  explicit CModel(const fkv_load_options& options) {
    REQUIRE(fkv_model_load(FKV_ABI_VERSION, FLASHKV_CAPI_CHECKPOINT, &options, &handle) == FKV_OK);
  }
  ~CModel() { fkv_model_free(handle); }
};

struct CSession {
  fkv_session* handle = nullptr;
  CSession(const CModel& model, const fkv_session_options& options) {
    REQUIRE(fkv_session_create(model.handle, &options, &handle) == FKV_OK);
  }
  ~CSession() { fkv_session_free(handle); }
};

flashkv::LoadOptions cpp_load_options(const fkv_load_options& c) {
  flashkv::LoadOptions options;
  options.numerics =
      c.numerics == FKV_NUMERICS_CLEAN ? flashkv::Numerics::kClean : flashkv::Numerics::kFaithful;
  options.prefill = c.prefill == FKV_PREFILL_CED ? flashkv::PrefillMode::kCed : flashkv::PrefillMode::kExact;
  options.prefill_chunk = c.prefill_chunk;
  options.threads = c.threads;
  return options;
}

fkv_sampling_params random_sampling(std::mt19937_64& rng) {
  fkv_sampling_params p;
  fkv_sampling_params_init(&p);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  auto sometimes = [&] { return unit(rng) < 0.5f; };
  p.temperature = 0.3f + 1.7f * unit(rng);
  if (sometimes()) p.top_k = static_cast<int32_t>(2 + rng() % 60);
  if (sometimes()) p.top_p = 0.3f + 0.69f * unit(rng);
  if (sometimes()) p.min_p = 0.001f + 0.2f * unit(rng);
  if (sometimes()) p.repetition_penalty = 0.7f + 1.3f * unit(rng);
  if (sometimes()) p.presence_penalty = -1.0f + 2.5f * unit(rng);
  if (sometimes()) p.frequency_penalty = -0.5f + 1.3f * unit(rng);
  p.seed = rng();
  return p;
}

flashkv::SamplingParams cpp_sampling(const fkv_sampling_params& c) {
  flashkv::SamplingParams p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repetition_penalty = c.repetition_penalty;
  p.presence_penalty = c.presence_penalty;
  p.frequency_penalty = c.frequency_penalty;
  p.seed = c.seed;
  return p;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, size_t n, int64_t vocab) {
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return tokens;
}

std::vector<float> c_logits(const CSession& session) {
  uint64_t count = 0;
  REQUIRE(fkv_session_logits(session.handle, nullptr, &count) == FKV_OK);
  std::vector<float> logits(count);
  REQUIRE(fkv_session_logits(session.handle, logits.data(), &count) == FKV_OK);
  return logits;
}

std::vector<float> copy_of(std::span<const float> row) {
  return {row.begin(), row.end()};
}

}  // namespace

TEST_CASE("capi translation: config, memory and load options equal the C++ API's", "[capi]") {
  CAPTURE(run_seed());
  std::mt19937_64 rng(run_seed());
  fkv_load_options options;
  fkv_load_options_init(&options);
  options.numerics = rng() % 2 ? FKV_NUMERICS_CLEAN : FKV_NUMERICS_FAITHFUL;
  options.prefill = rng() % 2 ? FKV_PREFILL_CED : FKV_PREFILL_EXACT;
  options.prefill_chunk = static_cast<int64_t>(1 + rng() % 64);
  options.threads = static_cast<int32_t>(1 + rng() % 2);
  const CModel c(options);
  const flashkv::Model cpp = flashkv::Model::load(FLASHKV_CAPI_CHECKPOINT, cpp_load_options(options));

  fkv_load_options back;
  back.struct_size = sizeof back;
  REQUIRE(fkv_model_load_options(c.handle, &back) == FKV_OK);
  CHECK(back.numerics == options.numerics);
  CHECK(back.prefill == options.prefill);
  CHECK(back.prefill_chunk == options.prefill_chunk);
  CHECK(back.threads == options.threads);
  CHECK(back.device == FKV_DEVICE_CPU);

  fkv_config config;
  config.struct_size = sizeof config;
  REQUIRE(fkv_model_config(c.handle, &config) == FKV_OK);
  const flashkv::ModelConfig& m = cpp.config();
  CHECK(config.num_hidden_layers == m.num_hidden_layers);
  CHECK(config.vocab_size == m.vocab_size);
  CHECK(config.hidden_size == m.hidden_size);
  CHECK(config.num_attention_heads == m.num_attention_heads);
  CHECK(config.head_dim == m.head_dim);
  CHECK(config.qk_rope_head_dim == m.qk_rope_head_dim);
  CHECK(config.sliding_window == m.sliding_window);
  CHECK(config.max_position_embeddings == m.max_position_embeddings);
  CHECK(config.n_routed_experts == m.n_routed_experts);
  CHECK(config.n_shared_experts == m.n_shared_experts);
  CHECK(config.num_experts_per_tok == m.num_experts_per_tok);
  CHECK(config.moe_intermediate_size == m.moe_intermediate_size);
  CHECK(config.index_topk == m.index_topk);
  CHECK(config.bos_token_id == m.bos_token_id);
  CHECK(config.eos_token_id == m.eos_token_id);
  CHECK(config.num_nextn_predict_layers == m.num_nextn_predict_layers);
  CHECK(config.num_engram_layers == static_cast<int32_t>(m.engram_layer_ids.size()));

  fkv_memory memory;
  memory.struct_size = sizeof memory;
  REQUIRE(fkv_model_memory(c.handle, &memory) == FKV_OK);
  const flashkv::ModelMemory mm = cpp.memory();
  CHECK(memory.global_kv_bytes_per_token == mm.report.global_kv_bytes_per_token);
  CHECK(memory.kv_entry_bytes == mm.report.kv_entry_bytes);
  CHECK(memory.index_key_bytes == mm.report.index_key_bytes);
  CHECK(memory.window_row_bytes == mm.report.window_row_bytes);
  CHECK(memory.window_bytes_per_session == mm.report.window_bytes_per_session);
  CHECK(memory.compressor_state_bytes_per_session == mm.report.compressor_state_bytes_per_session);
  CHECK(memory.weight_bytes_estimate == mm.report.weight_bytes);
  CHECK(memory.resident_weight_bytes == mm.resident_weight_bytes);
  CHECK(memory.parameters_total == mm.report.parameters.total);
  CHECK(memory.parameters_active_per_token == mm.report.parameters.active_per_token);
  CHECK(std::string(memory.weight_storage) == mm.weight_storage);
  const uint64_t tokens = rng() % 5000;
  uint64_t bytes = 0;
  REQUIRE(fkv_model_global_kv_bytes(c.handle, tokens, &bytes) == FKV_OK);
  CHECK(bytes == mm.report.global_kv_bytes(tokens));
}

TEST_CASE("capi translation: sessions, samples and generations equal the C++ API's", "[capi]") {
  CAPTURE(run_seed());
  std::mt19937_64 rng(run_seed() ^ 0x5eedu);
  fkv_load_options load;
  fkv_load_options_init(&load);
  load.numerics = rng() % 2 ? FKV_NUMERICS_CLEAN : FKV_NUMERICS_FAITHFUL;
  load.threads = 2;
  const CModel c_model(load);
  const flashkv::Model cpp_model = flashkv::Model::load(FLASHKV_CAPI_CHECKPOINT, cpp_load_options(load));
  const int64_t vocab = cpp_model.vocab_size();

  // Session options: a prompt longer than the window, so that ced and exact prefill differ.
  fkv_session_options session_options;
  fkv_session_options_init(&session_options);
  session_options.prefill = rng() % 2 ? FKV_PREFILL_CED : FKV_PREFILL_EXACT;
  session_options.prefill_chunk = static_cast<int64_t>(1 + rng() % 24);
  flashkv::SessionOptions cpp_session_options;
  cpp_session_options.prefill =
      session_options.prefill == FKV_PREFILL_CED ? flashkv::PrefillMode::kCed : flashkv::PrefillMode::kExact;
  cpp_session_options.prefill_chunk = session_options.prefill_chunk;
  const std::vector<int32_t> prompt = random_tokens(rng, 24 + rng() % 24, vocab);
  CAPTURE(session_options.prefill, session_options.prefill_chunk, prompt.size());

  const CSession c(c_model, session_options);
  flashkv::Session cpp(cpp_model, cpp_session_options);
  REQUIRE(fkv_session_append(c.handle, prompt.data(), prompt.size(), nullptr, nullptr) == FKV_OK);
  cpp.append(prompt);
  REQUIRE(c_logits(c) == copy_of(cpp.logits()));

  for (int i = 0; i < 40; ++i) {
    const fkv_sampling_params p = random_sampling(rng);
    CAPTURE(i, p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty, p.presence_penalty,
            p.frequency_penalty, p.seed);
    int32_t token = -1;
    REQUIRE(fkv_session_sample(c.handle, &p, &token) == FKV_OK);
    CHECK(token == cpp.sample(cpp_sampling(p)));
  }

  for (int i = 0; i < 4; ++i) {
    const fkv_sampling_params p = random_sampling(rng);
    fkv_generate_options options;
    fkv_generate_options_init(&options);
    options.sampling = &p;
    options.max_tokens = static_cast<int64_t>(1 + rng() % 6);
    options.stop_at_eos = static_cast<int32_t>(rng() % 2);
    const std::vector<int32_t> stops = random_tokens(rng, rng() % 40, vocab);
    options.stop_tokens = stops.data();
    options.n_stop_tokens = stops.size();
    const std::vector<int32_t> more = random_tokens(rng, rng() % 3, vocab);
    flashkv::GenerateOptions cpp_options;
    cpp_options.sampling = cpp_sampling(p);
    cpp_options.max_tokens = options.max_tokens;
    cpp_options.stop_at_eos = options.stop_at_eos != 0;
    cpp_options.stop_tokens = stops;
    CAPTURE(i, options.max_tokens, options.stop_at_eos, stops.size(), more.size());

    std::vector<int32_t> out(static_cast<size_t>(options.max_tokens));
    uint64_t n = 0;
    int32_t reason = -1;
    REQUIRE(fkv_session_generate(c.handle, more.data(), more.size(), &options, out.data(), out.size(), &n,
                                 &reason) == FKV_OK);
    const flashkv::GenerateResult want = cpp.generate(more, cpp_options);
    out.resize(n);
    CHECK(out == want.tokens);
    CHECK(reason == static_cast<int32_t>(want.reason));
    REQUIRE(c_logits(c) == copy_of(cpp.logits()));
  }

  const int64_t drop = static_cast<int64_t>(1 + rng() % 4);
  REQUIRE(fkv_session_rewind(c.handle, drop) == FKV_OK);
  cpp.rewind(drop);
  int64_t length = -1, bytes = -1;
  REQUIRE(fkv_session_length(c.handle, &length) == FKV_OK);
  REQUIRE(fkv_session_kv_bytes(c.handle, &bytes) == FKV_OK);
  CHECK(length == cpp.length());
  CHECK(bytes == cpp.kv_bytes());
  CHECK(c_logits(c) == copy_of(cpp.logits()));
}
