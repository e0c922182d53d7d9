// Sampling: penalties -> temperature -> top-k -> top-p -> min-p -> one seeded draw (see sampling.hpp).
//
// All arithmetic after reading the fp32 logits is in double: the filters compare cumulative masses with
// thresholds, and double keeps those decisions identical to a float64 numpy oracle except on exact ties of
// the mass with the threshold.
#include "runtime/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <flashkv/error.hpp>

namespace flashkv {
namespace {

bool finite(float value) {
  return std::isfinite(value);
}

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

bool is_greedy(const SamplingParams& params) noexcept {
  return params.temperature == 0.0f || params.top_k == 1;
}

}  // namespace flashkv

namespace flashkv::runtime {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Workspace = Sampler::Workspace;
using Ranked = Sampler::RankedToken;

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

bool has_penalty(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

// ws.z = the logits promoted to double; refuses an empty row or a NaN.
void load_logits(std::span<const float> logits, Workspace& ws) {
  if (logits.empty()) fail(ErrorCode::kInvalidArgument, "sampling: the logits row is empty");
  ws.z.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      fail(ErrorCode::kInvalidArgument, "sampling: logits[{}] is NaN (of {} logits); refusing to sample", i,
           logits.size());
    }
    ws.z[i] = static_cast<double>(logits[i]);
  }
}

// Penalties on ws.z. ws.counts is all zeros between calls: only the history's own slots are touched.
void apply_penalties(std::span<const int32_t> history, const SamplingParams& p, Workspace& ws) {
  if (!has_penalty(p) || history.empty()) return;
  const size_t vocab = ws.z.size();
  for (size_t i = 0; i < history.size(); ++i) {
    const int32_t id = history[i];
    if (id < 0 || static_cast<size_t>(id) >= vocab) {
      fail(ErrorCode::kInvalidArgument, "sampling: history[{}] = {} is outside the vocabulary [0, {})", i, id,
           vocab);
    }
  }
  if (ws.counts.size() < vocab) ws.counts.assign(vocab, 0);
  for (int32_t id : history) ++ws.counts[static_cast<size_t>(id)];
  const double repetition = p.repetition_penalty;
  for (int32_t id : history) {
    const auto t = static_cast<size_t>(id);
    if (ws.counts[t] == 0) continue;  // already penalised (a repeat later in the history)
    double& z = ws.z[t];
    z = z > 0.0 ? z / repetition : z * repetition;
    z -= static_cast<double>(ws.counts[t]) * static_cast<double>(p.frequency_penalty);
    z -= static_cast<double>(p.presence_penalty);
    ws.counts[t] = 0;
  }
}

int32_t argmax_lowest_index(const std::vector<double>& z) {
  size_t best = 0;
  for (size_t i = 1; i < z.size(); ++i) {
    if (z[i] > z[best]) best = i;
  }
  if (z[best] == -kInf)
    fail(ErrorCode::kInvalidArgument, "sampling: every one of {} logits is -inf", z.size());
  return static_cast<int32_t>(best);
}

// ws.w = unnormalised softmax weights of ws.z, the best token's exactly 1. +inf logits, when present, share
// all the mass (the limit of the softmax).
void softmax_weights(Workspace& ws) {
  const double top = ws.z[static_cast<size_t>(argmax_lowest_index(ws.z))];
  ws.w.resize(ws.z.size());
  for (size_t i = 0; i < ws.z.size(); ++i) {
    if (top == kInf) {
      ws.w[i] = ws.z[i] == kInf ? 1.0 : 0.0;
    } else {
      ws.w[i] = std::exp(ws.z[i] - top);  // -inf -> 0
    }
  }
}

// Rank order: larger logit first, lower id first among equal logits (a strict total order, so every
// filter's cut is unique).
// A function object rather than a function, so std::sort and std::nth_element inline it.
struct RanksBefore {
  bool operator()(const Ranked& a, const Ranked& b) const { return a.z > b.z || (a.z == b.z && a.id < b.id); }
};

using RankedIt = std::vector<Ranked>::iterator;

// Moves the best `count` of [first, last) to the front, sorted. O(n) selection + O(count log count) sort.
void sort_best(RankedIt first, RankedIt last, size_t count) {
  const RankedIt cut =
      first + static_cast<std::ptrdiff_t>(std::min(count, static_cast<size_t>(last - first)));
  std::nth_element(first, cut, last, RanksBefore{});
  std::sort(first, cut, RanksBefore{});
}

// Top-p cut over `head` (the candidates that can survive min-p) whose full candidate mass is `total`: the
// number of best-ranked tokens to keep. Sorts only as deep as the cut, growing the sorted prefix
// geometrically, so a peaked row costs O(n) rather than a full sort.
size_t top_p_cut(std::vector<Ranked>& head, double total, double top_p) {
  const double mass_needed = top_p * total;
  double mass_before = 0.0;
  size_t kept = 0;
  size_t sorted = 0;
  for (size_t depth = 256;; depth *= 8) {
    sort_best(head.begin() + static_cast<std::ptrdiff_t>(sorted), head.end(), depth - sorted);
    sorted = std::min(depth, head.size());
    while (kept < sorted && (kept == 0 || mass_before < mass_needed)) mass_before += head[kept++].w;
    if (kept < sorted || sorted == head.size()) return kept;
  }
}

// Zeroes ws.w outside the top-k / top-p / min-p survivors.
void apply_rank_filters(const SamplingParams& p, Workspace& ws) {
  // Zero-weight tokens rank after every positive one and can never be drawn: they are not candidates.
  std::vector<Ranked>& candidates = ws.candidates;
  candidates.clear();
  for (size_t i = 0; i < ws.w.size(); ++i) {
    if (ws.w[i] > 0.0) candidates.push_back({ws.z[i], ws.w[i], static_cast<int32_t>(i)});
  }
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < candidates.size()) {
    const auto kth = candidates.begin() + p.top_k;
    std::nth_element(candidates.begin(), kth, candidates.end(), RanksBefore{});
    candidates.erase(kth, candidates.end());
  }
  double total = 0.0;  // top-p renormalises over the top-k survivors, min-p's victims included
  for (const Ranked& c : candidates) total += c.w;
  // Min-p comes last but is a threshold on w / w_max (w_max = 1): its survivors are a rank prefix too, so
  // the tokens below it can leave before top-p ranks anything.
  const double min_weight = static_cast<double>(p.min_p);
  const auto tail = std::partition(candidates.begin(), candidates.end(),
                                   [min_weight](const Ranked& c) { return c.w >= min_weight; });
  candidates.erase(tail, candidates.end());
  if (p.top_p < 1.0f) candidates.resize(top_p_cut(candidates, total, static_cast<double>(p.top_p)));

  std::fill(ws.w.begin(), ws.w.end(), 0.0);
  for (const Ranked& c : candidates) ws.w[static_cast<size_t>(c.id)] = c.w;
}

// ws.w = unnormalised weights after every filter, indexed by token id (0 = filtered out).
void filtered_weights(std::span<const float> logits, std::span<const int32_t> history,
                      const SamplingParams& p, Workspace& ws) {
  load_logits(logits, ws);
  apply_penalties(history, p, ws);
  const double temperature = p.temperature;
  for (double& z : ws.z) z /= temperature;
  softmax_weights(ws);
  if (p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f) apply_rank_filters(p, ws);
}

int32_t greedy_token(std::span<const float> logits, std::span<const int32_t> history, const SamplingParams& p,
                     Workspace& ws) {
  load_logits(logits, ws);
  apply_penalties(history, p, ws);
  return argmax_lowest_index(ws.z);
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

double SampleRng::next_unit() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  validate_sampling_params(params);
}

void Sampler::reseed(uint64_t seed) {
  params_.seed = seed;
  rng_ = SampleRng(seed);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (is_greedy(params_)) return greedy_token(logits, history, params_, workspace_);
  filtered_weights(logits, history, params_, workspace_);
  const std::vector<double>& w = workspace_.w;
  // Inverse CDF in ascending token id: the draw depends only on the distribution, not on any sort.
  double total = 0.0;
  for (double weight : w) total += weight;
  const double target = rng_.next_unit() * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    cumulative += w[i];
    if (target < cumulative) return static_cast<int32_t>(i);
  }
  // Rounding left target at the very top: the last token that has any mass.
  for (size_t i = w.size(); i-- > 0;) {
    if (w[i] > 0.0) return static_cast<int32_t>(i);
  }
  fail(ErrorCode::kInternal, "sampling: no token carries probability mass");
}

std::vector<double> Sampler::probabilities(std::span<const float> logits,
                                           std::span<const int32_t> history) const {
  Workspace ws;  // const: a diagnostic path, so its own buffers rather than the sampler's
  if (is_greedy(params_)) {
    std::vector<double> p(logits.size(), 0.0);
    p[static_cast<size_t>(greedy_token(logits, history, params_, ws))] = 1.0;
    return p;
  }
  filtered_weights(logits, history, params_, ws);
  double total = 0.0;
  for (double weight : ws.w) total += weight;
  for (double& weight : ws.w) weight /= total;
  return std::move(ws.w);
}

}  // namespace flashkv::runtime
