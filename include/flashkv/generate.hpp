// flashkv::GenerateOptions — what Session::generate does after the prompt: how tokens are chosen, when it
// stops, and how the caller watches or interrupts it.
//
// Contract:
// - Each step samples one token from the session's current logits (Session::sample with `sampling`),
//   hands it to the token callback, then appends it to the session. Generation ends after max_tokens tokens,
//   after a stop token (the stop token itself is returned, handed to the callback and appended), when the
//   session is full (max_position_embeddings), or when the caller cancels.
// - Cancellation: the token callback returning false, the progress callback returning false, or a stop
//   request on `stop` ends generate() with flashkv::Error(kCancelled). It is checked between prefill chunks
//   and between decode steps. The session keeps every token appended before the cancellation (a token whose
//   callback returned false is not appended) and stays usable.
// Threading: options are plain values; the callbacks run on the thread that called generate(). `stop` may be
// requested from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <stop_token>
#include <vector>

#include <flashkv/sampling.hpp>

namespace flashkv {

// Called with each new token before it is appended; session.logits() still holds the row it was drawn
// from. Return false to cancel.
using TokenCallback = std::function<bool(int32_t token)>;

// Called after each prefill chunk with the prompt rows done so far and the total. Return false to cancel.
using ProgressCallback = std::function<bool(int64_t done, int64_t total)>;

struct GenerateOptions {
  SamplingParams sampling;               // default: temperature 1, no filters, seed 0
  int64_t max_tokens = 256;              // tokens to generate at most; >= 0 (0: prefill only)
  std::vector<int32_t> stop_tokens;      // ids in [0, vocab) that end generation
  bool stop_at_eos = true;               // also stop at the config's eos_token_id
  ProgressCallback on_prefill_progress;  // optional, for the prompt's prefill
  std::stop_token stop;                  // optional: request_stop() on its source cancels between steps
};

// kContextFull: the session reached max_position_embeddings before max_tokens (not an error).
enum class StopReason { kMaxTokens, kStopToken, kContextFull };

struct GenerateResult {
  std::vector<int32_t> tokens;  // the generated tokens, in order (a final stop token included)
  StopReason reason = StopReason::kMaxTokens;
};

}  // namespace flashkv
