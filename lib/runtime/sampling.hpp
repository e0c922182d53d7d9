// Sampler — turns one row of logits into one token id under flashkv::SamplingParams.
//
// Contract: the filters, their order, the tie rules and the NaN/inf rules are those of
// include/flashkv/sampling.hpp. sample() advances the sampler's own generator by exactly one draw when it
// samples (none when greedy), so a Session that keeps one Sampler across steps gets a reproducible stream;
// copying a Sampler copies the generator state (a fork continues with the same draws).
// Threading: one Sampler per thread at a time (sample() mutates the generator and reuses its buffers).
// Errors: flashkv::Error kInvalidArgument for bad params (constructor), an empty logits row, a NaN logit,
// a row with every logit -inf, or a history id outside [0, vocab).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <flashkv/sampling.hpp>

namespace flashkv::runtime {

// xoshiro256** (Blackman & Vigna), seeded through splitmix64: fixed integer arithmetic, so the stream is
// the same everywhere (std:: distributions are not).
class SampleRng {
 public:
  explicit SampleRng(uint64_t seed);
  uint64_t next_u64();
  double next_unit();  // uniform in [0, 1), 53 random bits

 private:
  uint64_t state_[4];
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  const SamplingParams& params() const { return params_; }

  // Restarts the generator from `seed` (as a new Sampler would) but keeps the buffers: for callers that
  // derive a seed per step and would otherwise construct a Sampler, and pay its vocab-sized allocations,
  // every step.
  void reseed(uint64_t seed);

  // Draws the next token from `logits` (one row, vocab entries) given the tokens so far (`history`, used by
  // the penalties only).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // The distribution sample() draws from: vocab probabilities summing to 1, 0 for filtered tokens; one-hot
  // for greedy. Does not touch the generator. For tests and diagnostics.
  std::vector<double> probabilities(std::span<const float> logits, std::span<const int32_t> history) const;

  // A token in the filters' rank order (see sampling.cpp).
  struct RankedToken {
    double z;
    double w;
    int32_t id;
  };
  // Vocab-sized buffers reused by every sample() call: allocating and first-touching them costs more than the
  // filters. A copy starts empty (a fork needs the generator, not the scratch).
  struct Workspace {
    Workspace() = default;
    Workspace(const Workspace&) {}
    Workspace& operator=(const Workspace&) { return *this; }
    std::vector<double> z;  // penalised, temperature-scaled logits
    std::vector<double> w;  // unnormalised weights; 0 = filtered
    std::vector<uint32_t> counts;
    std::vector<RankedToken> candidates;
  };

 private:
  SamplingParams params_;
  SampleRng rng_;
  Workspace workspace_;
};

}  // namespace flashkv::runtime
