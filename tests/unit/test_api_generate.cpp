// Session::generate and Session::sample on generated tiny checkpoints: generate
// equals the sample/append loop it is defined by, greedy equals the argmax of
// the logits, same seed same tokens, stop tokens (explicit and EOS), max
// tokens, the context limit, and every way of cancelling (token callback,
// progress callback, stop request) leaving a usable session that continues the
// same timeline.
#include <algorithm>
#include <random>
#include <set>
#include <stop_token>
#include <vector>

#include "test_api_support.hpp"

namespace {

using namespace api_test;
using flashkv::Error;
using flashkv::ErrorCode;
using flashkv::GenerateOptions;
using flashkv::Model;
using flashkv::Numerics;
using flashkv::Session;
using flashkv::StopReason;

// The lowest index among the maxima (the reference's greedy rule).
int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST_CASE("api generate: equals the loop of sample() and append()", "[api]") {
  const Numerics numerics = GENERATE(Numerics::kClean, Numerics::kFaithful);
  const uint64_t seed = run_seed();
  CAPTURE(seed, flashkv::numerics_name(numerics));
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", numerics);
  const std::vector<int32_t> prompt = random_tokens(rng, 11, model.vocab_size());
  const GenerateOptions options = sampled(8, seed);

  Session generated(model);
  std::vector<int32_t> streamed;
  const flashkv::GenerateResult result = generated.generate(prompt, options, [&](int32_t token) {
    streamed.push_back(token);
    return true;
  });
  REQUIRE(result.reason == StopReason::kMaxTokens);
  REQUIRE(result.tokens.size() == 8);
  REQUIRE(streamed == result.tokens);
  REQUIRE(copy_of(generated.tokens()) == concat(prompt, result.tokens));

  Session stepped(model);
  stepped.append(prompt);
  std::vector<int32_t> manual;
  for (int i = 0; i < 8; ++i) {
    const int32_t token = stepped.sample(options.sampling);
    REQUIRE(stepped.sample(options.sampling) == token);  // sample() does not advance anything
    manual.push_back(token);
    stepped.append(std::span(&token, 1));
  }
  REQUIRE(manual == result.tokens);
}

TEST_CASE("api generate: greedy picks the argmax of the logits it was drawn from", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41-alt", Numerics::kFaithful);
  Session session(model);
  session.append(random_tokens(rng, 9, model.vocab_size()));
  const flashkv::GenerateResult result = session.generate({}, greedy(6), [&](int32_t token) {
    REQUIRE(token == argmax(session.logits()));
    return true;
  });
  REQUIRE(result.tokens.size() == 6);
}

TEST_CASE(
    "api generate: the same seed gives the same tokens, other seeds "
    "other tokens",
    "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kFaithful);
  const std::vector<int32_t> prompt = random_tokens(rng, 6, model.vocab_size());
  std::set<std::vector<int32_t>> distinct;
  for (uint64_t offset = 0; offset < 4; ++offset) {
    Session first(model), second(model);
    const auto a = first.generate(prompt, sampled(8, seed + offset)).tokens;
    const auto b = second.generate(prompt, sampled(8, seed + offset)).tokens;
    REQUIRE(a == b);
    distinct.insert(a);
  }
  CHECK(distinct.size() > 1);
}

TEST_CASE("api generate: stop tokens end generation after the stop token", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kFaithful);
  const std::vector<int32_t> prompt = random_tokens(rng, 10, model.vocab_size());
  Session plain(model);
  const std::vector<int32_t> all = plain.generate(prompt, greedy(8)).tokens;
  const int32_t stop = all[3];
  const auto first = static_cast<size_t>(std::find(all.begin(), all.end(), stop) - all.begin());
  const std::vector<int32_t> expected(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(first) + 1);

  SECTION("explicit stop_tokens") {
    GenerateOptions options = greedy(8);
    options.stop_tokens = {stop};
    Session session(model);
    const flashkv::GenerateResult result = session.generate(prompt, options);
    REQUIRE(result.reason == StopReason::kStopToken);
    REQUIRE(result.tokens == expected);
    REQUIRE(session.length() == static_cast<int64_t>(prompt.size() + expected.size()));
  }
  SECTION("the config's eos_token_id, unless stop_at_eos is off") {
    const fs::path dir = edited_checkpoint(tiny_checkpoint("tiny-v41"), "eos-edited", [&](nlohmann::json& c) {
      c["eos_token_id"] = stop;
      c["text_config"]["eos_token_id"] = stop;
    });
    const Model edited = Model::load(dir);
    REQUIRE(edited.config().eos_token_id == stop);
    GenerateOptions options = greedy(8);
    options.stop_at_eos = true;
    Session session(edited);
    const flashkv::GenerateResult result = session.generate(prompt, options);
    REQUIRE(result.reason == StopReason::kStopToken);
    REQUIRE(result.tokens == expected);
    options.stop_at_eos = false;
    Session ignoring(edited);
    REQUIRE(ignoring.generate(prompt, options).tokens == all);
  }
}

TEST_CASE("api generate: max_tokens and the context limit", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kClean);
  const std::vector<int32_t> prompt = random_tokens(rng, 5, model.vocab_size());
  Session session(model);
  REQUIRE(session.generate(prompt, greedy(0)).tokens.empty());
  REQUIRE(session.length() == 5);
  const flashkv::GenerateResult three = session.generate({}, greedy(3));
  REQUIRE(three.tokens.size() == 3);
  REQUIRE(three.reason == StopReason::kMaxTokens);
  REQUIRE(session.length() == 8);

  const int64_t limit = 12;
  const fs::path dir =
      edited_checkpoint(tiny_checkpoint("tiny-v41"), "short-context",
                        [&](nlohmann::json& c) { c["text_config"]["max_position_embeddings"] = limit; });
  const Model short_model = Model::load(dir);
  Session full(short_model);
  const flashkv::GenerateResult result = full.generate(prompt, greedy(100));
  REQUIRE(result.reason == StopReason::kContextFull);
  REQUIRE(full.length() == limit);
  REQUIRE(result.tokens.size() == static_cast<size_t>(limit) - prompt.size());
  const std::vector<float> logits = copy_of(full.logits());
  const std::vector<int32_t> one = {3};
  REQUIRE_THROWS_AS(full.append(one), Error);
  REQUIRE(full.length() == limit);
  REQUIRE(copy_of(full.logits()) == logits);
}

void require_cancelled(const std::function<void()>& call) {
  try {
    call();
    FAIL("expected flashkv::Error(kCancelled)");
  } catch (const Error& e) {
    REQUIRE(e.code() == ErrorCode::kCancelled);
  }
}

TEST_CASE("api generate: cancellation leaves a usable session on the same timeline", "[api]") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Model model = tiny_model("tiny-v41", Numerics::kClean);
  const std::vector<int32_t> prompt = random_tokens(rng, 14, model.vocab_size());
  Session reference(model);
  const std::vector<int32_t> all = reference.generate(prompt, greedy(6)).tokens;

  SECTION("the token callback returning false") {
    Session session(model);
    int calls = 0;
    require_cancelled([&] { session.generate(prompt, greedy(6), [&](int32_t) { return ++calls < 3; }); });
    REQUIRE(calls == 3);
    // Two tokens were accepted and appended; the third was refused and is not.
    REQUIRE(copy_of(session.tokens()) == concat(prompt, std::span(all).first(2)));
    const std::vector<int32_t> rest = session.generate({}, greedy(4)).tokens;
    REQUIRE(rest == std::vector<int32_t>(all.begin() + 2, all.end()));
  }
  SECTION("the progress callback returning false between prefill chunks") {
    flashkv::SessionOptions options;
    options.prefill_chunk = 4;
    Session session(model, options);
    GenerateOptions generate = greedy(6);
    generate.on_prefill_progress = [](int64_t done, int64_t) { return done < 8; };
    require_cancelled([&] { session.generate(prompt, generate); });
    REQUIRE(copy_of(session.tokens()) == std::vector<int32_t>(prompt.begin(), prompt.begin() + 8));
    session.append(std::span(prompt).subspan(8));
    Session whole(model);
    whole.append(prompt);
    CHECK(relative_error(whole.logits(), session.logits()) <= kCleanTolerance);
    REQUIRE(session.generate({}, greedy(6)).tokens == all);
  }
  SECTION("a stop request") {
    std::stop_source source;
    GenerateOptions options = greedy(6);
    options.stop = source.get_token();
    Session session(model);
    int calls = 0;
    require_cancelled([&] {
      session.generate(prompt, options, [&](int32_t) {
        if (++calls == 4) source.request_stop();
        return true;
      });
    });
    REQUIRE(copy_of(session.tokens()) == concat(prompt, std::span(all).first(4)));
    REQUIRE(session.generate({}, greedy(2)).tokens == std::vector<int32_t>(all.begin() + 4, all.end()));
  }
}

}  // namespace
