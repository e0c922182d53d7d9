// Sampler properties that need no numpy: validation names the field, greedy = argmax with the lowest-index
// tie rule, seeds reproduce and differ, the NaN/inf rules, the generator's published first value.
// The filtered distribution itself is checked against a numpy oracle in tests/python/test_sampling.py.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <flashkv/error.hpp>
#include <flashkv/sampling.hpp>

#include "catch.hpp"
#include "runtime/sampling.hpp"

namespace {

using flashkv::Error;
using flashkv::ErrorCode;
using flashkv::SamplingParams;
using flashkv::runtime::Sampler;
using flashkv::runtime::SampleRng;

uint64_t fresh_seed() {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::vector<float> random_logits(std::mt19937_64& gen, size_t vocab, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(gen);
  return logits;
}

// Error code and message of the exception `body` throws; fails the test when it throws nothing.
template <typename Body>
std::string error_message(Body&& body, ErrorCode expected) {
  try {
    body();
  } catch (const Error& error) {
    CHECK(error.code() == expected);
    return error.what();
  }
  FAIL("no flashkv::Error thrown");
  return {};
}

int32_t first_argmax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace

TEST_CASE("sampling: invalid params are refused naming the field", "[sampling]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* field;
    SamplingParams params;
  };
  std::vector<Case> cases;
  const auto with = [&](const char* field, auto edit) {
    SamplingParams p;
    edit(p);
    cases.push_back({field, p});
  };
  with("temperature", [&](SamplingParams& p) { p.temperature = nan; });
  with("temperature", [&](SamplingParams& p) { p.temperature = -0.5f; });
  with("temperature", [&](SamplingParams& p) { p.temperature = inf; });
  with("top_k", [&](SamplingParams& p) { p.top_k = -1; });
  with("top_p", [&](SamplingParams& p) { p.top_p = 0.0f; });
  with("top_p", [&](SamplingParams& p) { p.top_p = 1.5f; });
  with("top_p", [&](SamplingParams& p) { p.top_p = nan; });
  with("min_p", [&](SamplingParams& p) { p.min_p = -0.1f; });
  with("min_p", [&](SamplingParams& p) { p.min_p = 2.0f; });
  with("min_p", [&](SamplingParams& p) { p.min_p = nan; });
  with("repetition_penalty", [&](SamplingParams& p) { p.repetition_penalty = 0.0f; });
  with("repetition_penalty", [&](SamplingParams& p) { p.repetition_penalty = nan; });
  with("presence_penalty", [&](SamplingParams& p) { p.presence_penalty = inf; });
  with("frequency_penalty", [&](SamplingParams& p) { p.frequency_penalty = nan; });
  for (const Case& c : cases) {
    CAPTURE(c.field);
    const std::string message = error_message([&] { Sampler s(c.params); }, ErrorCode::kInvalidArgument);
    CHECK(message.find(std::string("sampling parameter ") + c.field + " = ") != std::string::npos);
  }
  SamplingParams edge;  // boundary values that are allowed
  edge.temperature = 0.0f;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.presence_penalty = -2.0f;
  REQUIRE_NOTHROW(flashkv::validate_sampling_params(edge));
}

TEST_CASE("sampling: greedy is argmax with ties to the lowest index", "[sampling]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits = random_logits(gen, 97, 3.0f);
    // Plant a tie for the maximum at two random positions.
    const size_t a = gen() % logits.size();
    const size_t b = gen() % logits.size();
    const float top = logits[static_cast<size_t>(first_argmax(logits))] + 1.0f;
    logits[a] = top;
    logits[b] = top;
    const int32_t expected = static_cast<int32_t>(std::min(a, b));
    SamplingParams temperature_zero;
    temperature_zero.temperature = 0.0f;
    SamplingParams top_k_one;
    top_k_one.top_k = 1;
    top_k_one.temperature = 0.7f;
    Sampler s0(temperature_zero);
    Sampler s1(top_k_one);
    CHECK(s0.sample(logits, {}) == expected);
    CHECK(s1.sample(logits, {}) == expected);
    CHECK(first_argmax(logits) == expected);
  }
}

TEST_CASE("sampling: same seed same tokens, different seeds differ", "[sampling]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const std::vector<float> logits = random_logits(gen, 64, 1.0f);  // broad: many likely tokens
  SamplingParams params;
  params.top_p = 0.95f;
  params.seed = seed;
  Sampler first(params);
  Sampler second(params);
  params.seed = seed + 1;
  Sampler other(params);
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 200; ++i) {
    a.push_back(first.sample(logits, {}));
    b.push_back(second.sample(logits, {}));
    c.push_back(other.sample(logits, {}));
  }
  CHECK(a == b);
  CHECK(a != c);
  // A copy continues the same stream (fork).
  Sampler fork = first;
  CHECK(fork.sample(logits, {}) == first.sample(logits, {}));
  // reseed(s) restarts the stream exactly as a new Sampler seeded with s.
  first.reseed(seed + 1);
  Sampler fresh(params);
  for (int i = 0; i < 50; ++i) CHECK(first.sample(logits, {}) == fresh.sample(logits, {}));
}

TEST_CASE("sampling: generator matches the published splitmix64 / xoshiro256** definitions", "[sampling]") {
  // splitmix64 from state 0 yields 0xe220a8397b1dcdaf first; xoshiro256**'s first output is
  // rotl(s1 * 5, 7) * 9 where s1 is the second splitmix64 value.
  uint64_t x = 0;
  const auto splitmix = [&x] {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  CHECK(splitmix() == 0xe220a8397b1dcdafULL);
  const uint64_t s1 = splitmix();
  const uint64_t product = s1 * 5;
  const uint64_t expected = ((product << 7) | (product >> 57)) * 9;
  SampleRng rng(0);
  CHECK(rng.next_u64() == expected);
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.next_unit();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
  }
}

TEST_CASE("sampling: NaN refused, -inf never drawn, +inf takes the mass", "[sampling]") {
  const float inf = std::numeric_limits<float>::infinity();
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  std::vector<float> logits = random_logits(gen, 32, 1.0f);
  SamplingParams params;
  params.seed = seed;
  Sampler sampler(params);

  SECTION("NaN") {
    logits[7] = std::numeric_limits<float>::quiet_NaN();
    const std::string message =
        error_message([&] { sampler.sample(logits, {}); }, ErrorCode::kInvalidArgument);
    CHECK(message.find("logits[7] is NaN") != std::string::npos);
    params.temperature = 0.0f;
    Sampler greedy(params);
    REQUIRE_THROWS_AS(greedy.sample(logits, {}), Error);
  }
  SECTION("-inf") {
    for (size_t i = 0; i < logits.size(); i += 2) logits[i] = -inf;
    for (int i = 0; i < 500; ++i) CHECK(sampler.sample(logits, {}) % 2 == 1);
    const std::vector<double> p = sampler.probabilities(logits, {});
    for (size_t i = 0; i < p.size(); i += 2) CHECK(p[i] == 0.0);
  }
  SECTION("+inf") {
    logits[5] = inf;
    logits[9] = inf;
    const std::vector<double> p = sampler.probabilities(logits, {});
    for (size_t i = 0; i < p.size(); ++i) CHECK(p[i] == ((i == 5 || i == 9) ? 0.5 : 0.0));
    for (int i = 0; i < 200; ++i) {
      const int32_t token = sampler.sample(logits, {});
      CHECK((token == 5 || token == 9));
    }
  }
  SECTION("all -inf") {
    for (float& x : logits) x = -inf;
    const std::string message =
        error_message([&] { sampler.sample(logits, {}); }, ErrorCode::kInvalidArgument);
    CHECK(message.find("-inf") != std::string::npos);
  }
  SECTION("empty row") {
    REQUIRE_THROWS_AS(sampler.sample({}, {}), Error);
  }
}

TEST_CASE("sampling: history ids out of range are refused when a penalty reads them", "[sampling]") {
  std::vector<float> logits(16, 0.5f);
  SamplingParams params;
  params.repetition_penalty = 1.3f;
  Sampler sampler(params);
  const std::vector<int32_t> history = {1, 2, 16};
  const std::string message =
      error_message([&] { sampler.sample(logits, history); }, ErrorCode::kInvalidArgument);
  CHECK(message.find("history[2] = 16") != std::string::npos);
  const std::vector<int32_t> negative = {-1};
  REQUIRE_THROWS_AS(sampler.sample(logits, negative), Error);
}

TEST_CASE("sampling: a penalised repeat loses the greedy choice", "[sampling]") {
  // Hand-computed: logits 2.0 (token 0) and 1.5 (token 1); token 0 in history with penalty 1.5 -> 1.333
  // < 1.5.
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
  const std::vector<int32_t> history = {0};
  SamplingParams params;
  params.temperature = 0.0f;
  CHECK(Sampler(params).sample(logits, history) == 0);
  params.repetition_penalty = 1.5f;
  CHECK(Sampler(params).sample(logits, history) == 1);
  params.repetition_penalty = 1.0f;
  params.presence_penalty = 0.6f;  // 2.0 - 0.6 = 1.4 < 1.5
  CHECK(Sampler(params).sample(logits, history) == 1);
  params.presence_penalty = 0.0f;
  params.frequency_penalty = 0.3f;  // one occurrence: 1.7 > 1.5; two: 1.4 < 1.5
  CHECK(Sampler(params).sample(logits, history) == 0);
  const std::vector<int32_t> twice = {0, 2, 0};
  CHECK(Sampler(params).sample(logits, twice) == 1);
}
