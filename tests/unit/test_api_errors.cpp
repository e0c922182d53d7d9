// Bad input through the public API: each is a flashkv::Error with the
// documented code and a message naming what is wrong, and a session that
// refused an input is unchanged and still usable.
#include <random>
#include <string>
#include <vector>

#include "test_api_support.hpp"

namespace {

using namespace api_test;
using flashkv::Error;
using flashkv::ErrorCode;
using flashkv::Model;
using flashkv::Numerics;
using flashkv::Session;

// Runs `call`, requires an Error with `code` whose message contains every one
// of `words`.
template <typename Call>
void require_error(Call&& call, ErrorCode code, std::initializer_list<std::string> words) {
  try {
    call();
    FAIL("expected flashkv::Error(" << flashkv::error_code_name(code) << ")");
  } catch (const Error& e) {
    CAPTURE(e.what());
    REQUIRE(e.code() == code);
    for (const std::string& word : words) CHECK(std::string(e.what()).find(word) != std::string::npos);
  }
}

// The session holds `tokens` and the logits it had; it still appends and
// generates.
void require_unchanged_and_usable(Session& session, const std::vector<int32_t>& tokens,
                                  const std::vector<float>& logits) {
  REQUIRE(copy_of(session.tokens()) == tokens);
  REQUIRE(copy_of(session.logits()) == logits);
  REQUIRE(session.generate({}, greedy(2)).tokens.size() == 2);
}

TEST_CASE("api errors: bad tokens leave the session unchanged", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kFaithful);
  const auto vocab = static_cast<int32_t>(model.vocab_size());
  const std::vector<int32_t> prompt = random_tokens(rng, 6, vocab);
  Session session(model);
  session.append(prompt);
  const std::vector<float> logits = copy_of(session.logits());

  SECTION("id == vocab_size") {
    std::vector<int32_t> bad = random_tokens(rng, 5, vocab);
    bad[3] = vocab;
    require_error([&] { session.append(bad); }, ErrorCode::kInvalidArgument,
                  {"token id " + std::to_string(vocab), "position 3", "vocabulary"});
  }
  SECTION("negative id") {
    const std::vector<int32_t> bad = {-1};
    require_error([&] { session.append(bad); }, ErrorCode::kInvalidArgument, {"token id -1", "position 0"});
  }
  SECTION("empty append") {
    require_error([&] { session.append({}); }, ErrorCode::kInvalidArgument, {"empty"});
  }
  SECTION("a bad id in a prompt given to generate") {
    const std::vector<int32_t> bad = {1, vocab + 7};
    require_error([&] { session.generate(bad, greedy(2)); }, ErrorCode::kInvalidArgument,
                  {"token id " + std::to_string(vocab + 7)});
  }
  SECTION("bad generate options") {
    flashkv::GenerateOptions options = greedy(2);
    options.stop_tokens = {vocab};
    require_error([&] { session.generate({}, options); }, ErrorCode::kInvalidArgument, {"stop_tokens"});
    options = greedy(-1);
    require_error([&] { session.generate({}, options); }, ErrorCode::kInvalidArgument, {"max_tokens"});
    options = greedy(2);
    options.sampling.top_p = 0.0f;
    require_error([&] { session.generate({}, options); }, ErrorCode::kInvalidArgument, {"top_p"});
  }
  SECTION("rewind past the start") {
    require_error([&] { session.rewind(7); }, ErrorCode::kInvalidArgument, {"rewind", "7", "6"});
    require_error([&] { session.rewind(-1); }, ErrorCode::kInvalidArgument, {"rewind"});
  }
  require_unchanged_and_usable(session, prompt, logits);
}

TEST_CASE("api errors: empty sessions and empty prompts", "[api]") {
  const Model model = tiny_model("tiny-v41", Numerics::kFaithful);
  Session session(model);
  require_error([&] { (void)session.logits(); }, ErrorCode::kInvalidArgument, {"empty"});
  require_error([&] { (void)session.sample({}); }, ErrorCode::kInvalidArgument, {"empty"});
  require_error([&] { session.generate({}, greedy(3)); }, ErrorCode::kInvalidArgument, {"empty prompt"});
  REQUIRE(session.length() == 0);
  require_error([&] { (void)flashkv::KVHandle().tokens(); }, ErrorCode::kInvalidArgument,
                {"KVHandle is empty"});
  REQUIRE(session.generate(std::vector<int32_t>{5}, greedy(1)).tokens.size() == 1);
}

TEST_CASE("api errors: context overflow is refused before any work", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kClean);
  const int64_t limit = model.max_tokens();
  REQUIRE(limit == model.config().max_position_embeddings);
  Session session(model);
  const std::vector<int32_t> prompt = random_tokens(rng, 4, model.vocab_size());
  session.append(prompt);
  const std::vector<float> logits = copy_of(session.logits());
  const std::vector<int32_t> too_long =
      random_tokens(rng, static_cast<size_t>(limit - 3), model.vocab_size());
  require_error([&] { session.append(too_long); }, ErrorCode::kInvalidArgument,
                {"max_position_embeddings", std::to_string(limit)});
  require_unchanged_and_usable(session, prompt, logits);
}

TEST_CASE("api errors: batched decode validates the whole batch first", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kClean);
  Session a(model), b(model);
  a.append(random_tokens(rng, 3, model.vocab_size()));
  b.append(random_tokens(rng, 5, model.vocab_size()));
  const std::vector<int32_t> a_tokens = copy_of(a.tokens()), b_tokens = copy_of(b.tokens());
  const std::vector<float> a_logits = copy_of(a.logits()), b_logits = copy_of(b.logits());
  const auto vocab = static_cast<int32_t>(model.vocab_size());

  std::vector<Session*> pair = {&a, &b};
  require_error([&] { flashkv::decode(pair, std::vector<int32_t>{1}); }, ErrorCode::kInvalidArgument,
                {"2 sessions", "1 tokens"});
  require_error(
      [&] {
        flashkv::decode(pair, std::vector<int32_t>{1, vocab});
      },
      ErrorCode::kInvalidArgument, {"session 1", "token id"});
  std::vector<Session*> twice = {&a, &a};
  require_error(
      [&] {
        flashkv::decode(twice, std::vector<int32_t>{1, 2});
      },
      ErrorCode::kInvalidArgument, {"twice"});
  std::vector<Session*> with_null = {&a, nullptr};
  require_error(
      [&] {
        flashkv::decode(with_null, std::vector<int32_t>{1, 2});
      },
      ErrorCode::kInvalidArgument, {"null"});
  Session other(tiny_model("tiny-v41", Numerics::kFaithful));
  other.append(std::vector<int32_t>{4});
  std::vector<Session*> mixed = {&a, &other};
  require_error(
      [&] {
        flashkv::decode(mixed, std::vector<int32_t>{1, 2});
      },
      ErrorCode::kInvalidArgument, {"another Model"});
  require_unchanged_and_usable(a, a_tokens, a_logits);
  require_unchanged_and_usable(b, b_tokens, b_logits);
}

TEST_CASE("api errors: a snapshot restores only into sessions of its own Model", "[api]") {
  const Model clean = tiny_model("tiny-v41", Numerics::kClean);
  const Model faithful = tiny_model("tiny-v41", Numerics::kFaithful);
  Session source(clean), target(faithful);
  source.append(std::vector<int32_t>{3, 4, 5});
  target.append(std::vector<int32_t>{7});
  const std::vector<float> logits = copy_of(target.logits());
  require_error([&] { target.restore(source.kv()); }, ErrorCode::kInvalidArgument, {"another Model"});
  require_unchanged_and_usable(target, {7}, logits);
}

TEST_CASE(
    "api errors: load refuses bad options, cuda, and a checkpoint that "
    "does not fit its config",
    "[api]") {
  const fs::path dir = tiny_checkpoint("tiny-v41");
  flashkv::LoadOptions options;
  options.device = flashkv::Device::kCuda;
  require_error([&] { Model::load(dir, options); }, ErrorCode::kUnsupported, {"cuda"});
  options = {};
  options.threads = -2;
  require_error([&] { Model::load(dir, options); }, ErrorCode::kInvalidArgument, {"threads"});
  options = {};
  options.prefill_chunk = 0;
  require_error([&] { Model::load(dir, options); }, ErrorCode::kInvalidArgument, {"prefill_chunk"});
  require_error([&] { Model::load(temp_root() / "no-such-dir"); }, ErrorCode::kNotFound, {"no-such-dir"});

  // The other tiny config over these weights: every shape disagrees; the loader
  // names a tensor.
  const fs::path swapped = edited_checkpoint(dir, "config-swapped", [](nlohmann::json& config) {
    std::ifstream in(config_file("tiny-v41-alt"));
    config = nlohmann::json::parse(in);
  });
  require_error([&] { Model::load(swapped); }, ErrorCode::kInvalidCheckpoint, {".weight"});
}

TEST_CASE("api: memory report figures follow the spec's record sizes", "[api]") {
  const std::string name = GENERATE(as<std::string>{}, "tiny-v41", "tiny-v41-alt");
  CAPTURE(name);
  const Model model = tiny_model(name, Numerics::kFaithful);
  const flashkv::ModelConfig& c = model.config();
  const flashkv::ModelMemory memory = model.memory();
  // MODEL.md §2.2: NVFP4 entry = hd/2 + hd/16, MXFP4 key = ihd/2 + ihd/32, FP8
  // window row = hd + hd/32.
  const double entry = static_cast<double>(c.head_dim / 2 + c.head_dim / 16);
  const double key = static_cast<double>(c.index_head_dim / 2 + c.index_head_dim / 32);
  double per_token = 0;
  for (const int layer : c.kv_source_layer_ids)
    per_token += (entry + key) / c.compress_ratios[static_cast<size_t>(layer)];
  CHECK(memory.report.global_kv_bytes_per_token == per_token);
  CHECK(memory.report.window_bytes_per_session ==
        static_cast<uint64_t>(c.num_hidden_layers * c.sliding_window * (c.head_dim + c.head_dim / 32)));
  CHECK(memory.resident_weight_bytes >= 4 * memory.report.parameters.total);
  CHECK_FALSE(memory.weight_storage.empty());
}

}  // namespace
