// Sampling: penalties -> temperature -> top-k -> top-p -> min-p -> one seeded draw (see sampling.hpp).
//
// All arithmetic after reading the fp32 logits is in double: the filters compare cumulative masses with
// thresholds, and double keeps those decisions identical to a float64 numpy oracle except on exact ties of
// the mass with the threshold.
#include "runtime/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <flashkv/error.hpp>

namespace flashkv {
namespace {

bool finite(float value) { return std::isfinite(value); }

}  // namespace

void validate_sampling_params(const SamplingParams& params) {
  const auto bad = [](const char* field, auto value, const char* rule) {
    fail(ErrorCode::kInvalidArgument, "sampling parameter {} = {}: {}", field, value, rule);
  };
  if (!finite(params.temperature) || params.temperature < 0.0f) {
    bad("temperature", params.temperature, "must be a finite number >= 0 (0 = greedy)");
  }
  if (params.top_k < 0) bad("top_k", params.top_k, "must be >= 0 (0 = off)");
  if (!finite(params.top_p) || params.top_p <= 0.0f || params.top_p > 1.0f) {
    bad("top_p", params.top_p, "must be in (0, 1] (1 = off)");
  }
  if (!finite(params.min_p) || params.min_p < 0.0f || params.min_p > 1.0f) {
    bad("min_p", params.min_p, "must be in [0, 1] (0 = off)");
  }
  if (!finite(params.repetition_penalty) || params.repetition_penalty <= 0.0f) {
    bad("repetition_penalty", params.repetition_penalty, "must be a finite number > 0 (1 = off)");
  }
  if (!finite(params.presence_penalty)) bad("presence_penalty", params.presence_penalty, "must be finite");
  if (!finite(params.frequency_penalty)) bad("frequency_penalty", params.frequency_penalty, "must be finite");
}

bool is_greedy(const SamplingParams& params) noexcept { return params.temperature == 0.0f || params.top_k == 1; }

}  // namespace flashkv

namespace flashkv::runtime {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

bool has_penalty(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

// Logits promoted to double; refuses an empty row or a NaN.
std::vector<double> checked_logits(std::span<const float> logits) {
  if (logits.empty()) fail(ErrorCode::kInvalidArgument, "sampling: the logits row is empty");
  std::vector<double> z(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      fail(ErrorCode::kInvalidArgument, "sampling: logits[{}] is NaN (of {} logits); refusing to sample", i,
           logits.size());
    }
    z[i] = static_cast<double>(logits[i]);
  }
  return z;
}

std::vector<uint32_t> history_counts(std::span<const int32_t> history, size_t vocab) {
  std::vector<uint32_t> counts(vocab, 0);
  for (size_t i = 0; i < history.size(); ++i) {
    const int32_t id = history[i];
    if (id < 0 || static_cast<size_t>(id) >= vocab) {
      fail(ErrorCode::kInvalidArgument, "sampling: history[{}] = {} is outside the vocabulary [0, {})", i, id,
           vocab);
    }
    ++counts[static_cast<size_t>(id)];
  }
  return counts;
}

void apply_penalties(std::vector<double>& z, std::span<const int32_t> history, const SamplingParams& p) {
  if (!has_penalty(p) || history.empty()) return;
  const std::vector<uint32_t> counts = history_counts(history, z.size());
  const double repetition = p.repetition_penalty;
  for (size_t i = 0; i < z.size(); ++i) {
    if (counts[i] == 0) continue;
    z[i] = z[i] > 0.0 ? z[i] / repetition : z[i] * repetition;
    z[i] -= static_cast<double>(counts[i]) * static_cast<double>(p.frequency_penalty);
    z[i] -= static_cast<double>(p.presence_penalty);
  }
}

// Rank order of every filter: larger logit first, lower token id first among equals.
bool ranks_before(const std::vector<double>& z, int32_t a, int32_t b) {
  const double za = z[static_cast<size_t>(a)];
  const double zb = z[static_cast<size_t>(b)];
  return za > zb || (za == zb && a < b);
}

int32_t argmax_lowest_index(const std::vector<double>& z) {
  size_t best = 0;
  for (size_t i = 1; i < z.size(); ++i) {
    if (z[i] > z[best]) best = i;
  }
  if (z[best] == -kInf) fail(ErrorCode::kInvalidArgument, "sampling: every one of {} logits is -inf", z.size());
  return static_cast<int32_t>(best);
}

// Unnormalised softmax weights. +inf logits, when present, share all the mass (the limit of the softmax).
std::vector<double> softmax_weights(const std::vector<double>& z) {
  const double top = z[static_cast<size_t>(argmax_lowest_index(z))];
  std::vector<double> w(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    if (top == kInf) {
      w[i] = z[i] == kInf ? 1.0 : 0.0;
    } else {
      w[i] = std::exp(z[i] - top);  // -inf -> 0
    }
  }
  return w;
}

// The surviving tokens (ascending id) and their weights (unnormalised).
struct Survivors {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double total = 0.0;
};

std::vector<int32_t> ranked_candidates(const std::vector<double>& z, const std::vector<double>& w, int32_t top_k) {
  // Zero-weight tokens rank after every positive one and can never be drawn: leave them out of the sort.
  std::vector<int32_t> ids;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] > 0.0) ids.push_back(static_cast<int32_t>(i));
  }
  const auto order = [&z](int32_t a, int32_t b) { return ranks_before(z, a, b); };
  const size_t keep = top_k > 0 ? std::min(ids.size(), static_cast<size_t>(top_k)) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), order);
  ids.resize(keep);
  return ids;
}

size_t top_p_count(const std::vector<int32_t>& ranked, const std::vector<double>& w, double top_p) {
  double total = 0.0;
  for (int32_t id : ranked) total += w[static_cast<size_t>(id)];
  double mass_before = 0.0;
  size_t count = 0;
  while (count < ranked.size() && mass_before < top_p * total) {
    mass_before += w[static_cast<size_t>(ranked[count])];
    ++count;
  }
  return std::max<size_t>(count, 1);
}

size_t min_p_count(const std::vector<int32_t>& ranked, const std::vector<double>& w, double min_p) {
  const double threshold = min_p * w[static_cast<size_t>(ranked.front())];
  size_t count = 1;
  while (count < ranked.size() && w[static_cast<size_t>(ranked[count])] >= threshold) ++count;
  return count;
}

Survivors filtered_distribution(std::span<const float> logits, std::span<const int32_t> history,
                                const SamplingParams& p) {
  std::vector<double> z = checked_logits(logits);
  apply_penalties(z, history, p);
  const double temperature = p.temperature;
  for (double& value : z) value /= temperature;
  const std::vector<double> w = softmax_weights(z);

  Survivors out;
  const bool ranked_filters = p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f;
  if (ranked_filters) {
    std::vector<int32_t> ranked = ranked_candidates(z, w, p.top_k);
    if (p.top_p < 1.0f) ranked.resize(top_p_count(ranked, w, p.top_p));
    if (p.min_p > 0.0f) ranked.resize(min_p_count(ranked, w, p.min_p));
    std::sort(ranked.begin(), ranked.end());
    out.ids = std::move(ranked);
  } else {
    out.ids.resize(z.size());
    std::iota(out.ids.begin(), out.ids.end(), 0);
  }
  out.weights.reserve(out.ids.size());
  for (int32_t id : out.ids) {
    out.weights.push_back(w[static_cast<size_t>(id)]);
    out.total += out.weights.back();
  }
  return out;
}

int32_t greedy_token(std::span<const float> logits, std::span<const int32_t> history, const SamplingParams& p) {
  std::vector<double> z = checked_logits(logits);
  apply_penalties(z, history, p);
  return argmax_lowest_index(z);
}

}  // namespace

SampleRng::SampleRng(uint64_t seed) {
  for (uint64_t& word : state_) word = splitmix64(seed);
}

uint64_t SampleRng::next_u64() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double SampleRng::next_unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  validate_sampling_params(params);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (is_greedy(params_)) return greedy_token(logits, history, params_);
  const Survivors s = filtered_distribution(logits, history, params_);
  // Inverse CDF in ascending token id: the draw depends only on the distribution, not on the sort.
  const double target = rng_.next_unit() * s.total;
  double cumulative = 0.0;
  for (size_t i = 0; i < s.ids.size(); ++i) {
    cumulative += s.weights[i];
    if (target < cumulative) return s.ids[i];
  }
  // Rounding left target at the very top: the last token that has any mass.
  for (size_t i = s.ids.size(); i-- > 0;) {
    if (s.weights[i] > 0.0) return s.ids[i];
  }
  fail(ErrorCode::kInternal, "sampling: no token carries probability mass");
}

std::vector<double> Sampler::probabilities(std::span<const float> logits, std::span<const int32_t> history) const {
  std::vector<double> p(logits.size(), 0.0);
  if (is_greedy(params_)) {
    p[static_cast<size_t>(greedy_token(logits, history, params_))] = 1.0;
    return p;
  }
  const Survivors s = filtered_distribution(logits, history, params_);
  for (size_t i = 0; i < s.ids.size(); ++i) p[static_cast<size_t>(s.ids[i])] = s.weights[i] / s.total;
  return p;
}

}  // namespace flashkv::runtime
