// flashkv::SamplingParams — how the next token is chosen from a row of logits.
//
// Contract (docs/sampling.md has the formulas and worked examples):
// The filters apply in this fixed order, the order of Hugging Face transformers' generate() (processors,
// then warpers: temperature, top-k, top-p, min-p):
//   1. penalties on the logits of tokens present in the history (repetition, then frequency, then presence);
//   2. temperature: logits / temperature (temperature 0 means greedy: argmax of the penalised logits, the
//      lowest token id among equal maxima; steps 3-5 are skipped);
//   3. top-k: keep the k largest; equal logits are ranked by lower token id first, so exactly k survive;
//   4. top-p: in that same rank order, keep the shortest prefix whose probability mass reaches top_p
//      (a token is kept when the mass of the tokens ranked before it is < top_p; at least one survives);
//   5. min-p: keep tokens whose probability is >= min_p x the largest probability (scale-free, so it does
//      not matter whether the distribution was renormalised after steps 3-4).
// The survivors' probabilities are renormalised and one token is drawn with the sampler's own seeded
// generator (xoshiro256**, seeded by splitmix64 from `seed`): the same params, the same logits and the same
// history give the same tokens on every platform and standard library.
// Logits: NaN is refused (kInvalidArgument naming the index); -inf is a token that can never be drawn;
// +inf tokens, when any, take all the mass, shared equally. A row where every logit is -inf is refused.
// Validation: validate_sampling_params throws kInvalidArgument naming the field (e.g. "top_p") for NaN,
// infinite or out-of-range values; a Sampler / Session validates on construction / use.
// Threading: plain values. Errors: flashkv::Error kInvalidArgument only.
#pragma once

#include <cstdint>

namespace flashkv {

struct SamplingParams {
  // Divides the logits. 0 = greedy (deterministic argmax). Must be finite and >= 0.
  float temperature = 1.0f;
  // Keep only the k most likely tokens; 0 = off. Must be >= 0 (values above the vocabulary are "off").
  int32_t top_k = 0;
  // Nucleus: keep the smallest set of most likely tokens whose mass reaches top_p. In (0, 1]; 1 = off.
  float top_p = 1.0f;
  // Drop tokens less likely than min_p x the most likely one. In [0, 1]; 0 = off.
  float min_p = 0.0f;
  // CTRL-style penalty on tokens already in the history: a positive logit is divided by it, a negative one
  // multiplied. Finite and > 0; 1 = off; > 1 discourages repeats.
  float repetition_penalty = 1.0f;
  // OpenAI-style: subtracted once from the logit of every token present in the history. Finite; 0 = off.
  float presence_penalty = 0.0f;
  // OpenAI-style: subtracted from a token's logit once per occurrence in the history. Finite; 0 = off.
  float frequency_penalty = 0.0f;
  // Seed of the sampler's generator. Same seed, same draws; greedy ignores it.
  uint64_t seed = 0;
};

// Throws flashkv::Error(kInvalidArgument) naming the first offending field and its value.
void validate_sampling_params(const SamplingParams& params);

// True when params select argmax: temperature == 0 or top_k == 1.
bool is_greedy(const SamplingParams& params) noexcept;

}  // namespace flashkv
