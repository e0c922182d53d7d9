// The consistency laws of the public API on generated tiny checkpoints (both
// tiny configs): a restored snapshot continues exactly as the original; rewind
// then re-append equals never rewound; a batched decode step equals one append
// per session; chunking does not change results; CED equals exact prefill while
// the prompt fits in the window. The oracle is always another route through the
// API to the same timeline.
#include <random>
#include <vector>

#include "test_api_support.hpp"

namespace {

using namespace api_test;
using flashkv::KVHandle;
using flashkv::Model;
using flashkv::Numerics;
using flashkv::Session;
using flashkv::SessionOptions;

const char* const kConfigs[] = {"tiny-v41", "tiny-v41-alt"};

TEST_CASE(
    "api law: a restored snapshot continues exactly like the session it "
    "was taken from",
    "[api]") {
  const std::string name = GENERATE(as<std::string>{}, kConfigs[0], kConfigs[1]);
  const Numerics numerics = GENERATE(Numerics::kClean, Numerics::kFaithful);
  const uint64_t seed = run_seed();
  CAPTURE(name, seed, flashkv::numerics_name(numerics));
  std::mt19937_64 rng(seed);
  const Model model = tiny_model(name, numerics);
  const std::vector<int32_t> prompt = random_tokens(rng, 21, model.vocab_size());

  Session original(model);
  original.append(prompt);
  const KVHandle handle = original.kv();
  REQUIRE(copy_of(handle.tokens()) == prompt);
  REQUIRE(handle.bytes() == original.kv_bytes());
  const KVHandle forked = handle.fork();
  REQUIRE(forked.tokens().data() == handle.tokens().data());  // one shared snapshot, no copy

  const flashkv::GenerateOptions options = sampled(6, seed);
  const std::vector<int32_t> expected = original.generate({}, options).tokens;
  const std::vector<float> expected_logits = copy_of(original.logits());

  SECTION("into a fresh session") {
    Session restored(model);
    restored.restore(forked);
    REQUIRE(copy_of(restored.tokens()) == prompt);
    REQUIRE(restored.generate({}, options).tokens == expected);
    REQUIRE(copy_of(restored.logits()) == expected_logits);
  }
  SECTION("into the same session, twice") {
    for (int round = 0; round < 2; ++round) {
      original.restore(handle);
      REQUIRE(original.length() == static_cast<int64_t>(prompt.size()));
      REQUIRE(original.generate({}, options).tokens == expected);
    }
  }
  SECTION("the snapshot is not changed by the session continuing") {
    REQUIRE(copy_of(handle.tokens()) == prompt);
  }
}

TEST_CASE("api law: rewind then re-append equals never rewound", "[api]") {
  const std::string name = GENERATE(as<std::string>{}, kConfigs[0], kConfigs[1]);
  const uint64_t seed = run_seed();
  CAPTURE(name, seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model(name, Numerics::kClean);
  const std::vector<int32_t> head = random_tokens(rng, 13, model.vocab_size());
  const std::vector<int32_t> tail = random_tokens(rng, 5, model.vocab_size());

  Session straight(model);
  straight.append(head);
  const std::vector<float> head_logits = copy_of(straight.logits());
  straight.append(tail);

  Session rewound(model);
  rewound.append(concat(head, tail));
  rewound.rewind(static_cast<int64_t>(tail.size()));
  REQUIRE(copy_of(rewound.tokens()) == head);
  CHECK(relative_error(head_logits, rewound.logits()) <= kCleanTolerance);
  rewound.append(tail);
  REQUIRE(copy_of(rewound.tokens()) == copy_of(straight.tokens()));
  CHECK(relative_error(straight.logits(), rewound.logits()) <= kCleanTolerance);

  const flashkv::GenerateOptions options = greedy(5);
  CHECK(rewound.generate({}, options).tokens == straight.generate({}, options).tokens);

  SECTION("rewinding everything leaves an empty session that starts afresh") {
    rewound.rewind(rewound.length());
    REQUIRE(rewound.length() == 0);
    REQUIRE_THROWS_AS(rewound.logits(), flashkv::Error);
    rewound.append(head);
    CHECK(relative_error(head_logits, rewound.logits()) <= kCleanTolerance);
  }
}

TEST_CASE("api law: a batched decode step equals one append per session", "[api]") {
  const std::string name = GENERATE(as<std::string>{}, kConfigs[0], kConfigs[1]);
  const uint64_t seed = run_seed();
  CAPTURE(name, seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model(name, Numerics::kClean);
  const size_t lengths[] = {3, 17, 9};

  std::vector<Session> batched, single;
  for (const size_t length : lengths) {
    const std::vector<int32_t> prompt = random_tokens(rng, length, model.vocab_size());
    batched.emplace_back(model).append(prompt);
    single.emplace_back(model).append(prompt);
  }
  std::vector<Session*> batch;
  for (Session& session : batched) batch.push_back(&session);
  for (int step = 0; step < 4; ++step) {
    const std::vector<int32_t> next = random_tokens(rng, batch.size(), model.vocab_size());
    flashkv::decode(batch, next);
    for (size_t i = 0; i < single.size(); ++i) {
      single[i].append(std::span(&next[i], 1));
      CAPTURE(step, i);
      REQUIRE(copy_of(batched[i].tokens()) == copy_of(single[i].tokens()));
      CHECK(relative_error(single[i].logits(), batched[i].logits()) <= kCleanTolerance);
    }
  }
}

TEST_CASE("api law: the prefill chunk size does not change the logits", "[api]") {
  const std::string name = GENERATE(as<std::string>{}, kConfigs[0], kConfigs[1]);
  const uint64_t seed = run_seed();
  CAPTURE(name, seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model(name, Numerics::kClean);
  const std::vector<int32_t> prompt = random_tokens(rng, 37, model.vocab_size());

  Session whole(model);
  whole.append(prompt);
  for (const int64_t chunk : {1, 3, 5, 16}) {
    CAPTURE(chunk);
    SessionOptions options;
    options.prefill_chunk = chunk;
    Session chunked(model, options);
    int64_t calls = 0;
    chunked.append(prompt, [&](int64_t done, int64_t total) {
      ++calls;
      REQUIRE(total == static_cast<int64_t>(prompt.size()));
      REQUIRE(done == std::min(calls * chunk, total));
      return true;
    });
    REQUIRE(calls == (static_cast<int64_t>(prompt.size()) + chunk - 1) / chunk);
    CHECK(relative_error(whole.logits(), chunked.logits()) <= kCleanTolerance);
  }
}

TEST_CASE("api law: CED prefill equals exact prefill for a prompt within the window", "[api]") {
  const std::string name = GENERATE(as<std::string>{}, kConfigs[0], kConfigs[1]);
  const uint64_t seed = run_seed();
  CAPTURE(name, seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model(name, Numerics::kClean);
  const auto window = static_cast<size_t>(model.config().sliding_window);
  const std::vector<int32_t> prompt = random_tokens(rng, window, model.vocab_size());

  SessionOptions ced_options;
  ced_options.prefill = flashkv::PrefillMode::kCed;
  Session ced(model, ced_options);
  ced.append(prompt);
  Session exact(model);
  exact.append(prompt);
  CHECK(relative_error(exact.logits(), ced.logits()) <= kCleanTolerance);
  const flashkv::GenerateOptions options = greedy(4);
  CHECK(ced.generate({}, options).tokens == exact.generate({}, options).tokens);
}

TEST_CASE(
    "api: a Model handle is shared; sessions and snapshots keep the "
    "weights alive",
    "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const std::vector<int32_t> prompt = random_tokens(rng, 7, 512);
  std::vector<float> expected;
  KVHandle handle;
  {
    flashkv::LoadOptions options;
    options.numerics = Numerics::kClean;
    const Model loaded = Model::load(tiny_checkpoint("tiny-v41"), options);
    const Model copy = loaded;  // NOLINT(performance-unnecessary-copy-initialization):
                                // the copy is the point
    REQUIRE(copy == loaded);
    REQUIRE_FALSE(copy == tiny_model("tiny-v41", Numerics::kClean));
    Session session(copy);
    session.append(prompt);
    expected = copy_of(session.logits());
    handle = session.kv();
  }
  Session later(handle.model());
  later.restore(handle);
  REQUIRE(copy_of(later.logits()) == expected);
  const std::vector<int32_t> next = {prompt[0]};
  later.append(next);
  REQUIRE(later.length() == 8);
}

}  // namespace
