// flashkv::Session — one timeline of tokens over one KV state of a Model.
//
// Contract:
// - append(tokens) runs the new tokens through the model (prefill in chunks of prefill_chunk rows; the first
//   append of a session uses the Model's prefill mode, every later one is exact). Afterwards logits() is the
//   row that predicts the next token.
// - logits() returns the fp32 logits (vocab_size entries) of the last appended token. The span points into
//   the session and stays valid until the next call of a non-const member (append, generate, rewind,
//   restore, decode, destruction).
// - sample(params) draws the next token from logits() without appending it. Its randomness depends only on
//   params.seed and the session's length, so forks, restores and rewinds replay the same draws.
// - generate(prompt, options, on_token): append(prompt) then sample/append up to options.max_tokens tokens
//   (see generate.hpp for stopping and cancellation). An empty prompt continues a non-empty session.
// - rewind(n) drops the last n tokens; the session is then exactly as if they had never been appended.
//   Exact within the retained window history (sliding_window + a margin of rows); beyond it kInvalidArgument.
//   It recomputes the last row's logits (one decode step).
// - kv() snapshots the state (a copy, see kv_handle.hpp); restore(handle) replaces the state with one.
// - decode(sessions, tokens) appends one token to each of several sessions in one batched forward; results
//   equal session->append({token}) one by one.
// Ownership: a Session owns its state and keeps its Model's weights alive. Move-only; a moved-from Session
// may only be destroyed or assigned to.
// Threading: one thread at a time per Session; different Sessions (of one or several Models) may run
// concurrently.
// Errors (flashkv::Error), each leaving the session as it was before the call unless said otherwise:
// - kInvalidArgument: a token id outside [0, vocab) (the message names the position and the id), an empty
//   append, a sequence that would pass max_position_embeddings, logits() / sample() on an empty session,
//   rewind past the start or past the retained history, a KVHandle of another Model, bad options.
// - kCancelled: a callback returned false or a stop was requested. The session keeps the chunks / tokens
//   completed before the cancellation, has logits for its last token, and stays usable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <flashkv/generate.hpp>
#include <flashkv/kv_handle.hpp>
#include <flashkv/model.hpp>
#include <flashkv/sampling.hpp>

namespace flashkv {

struct SessionOptions {
  int64_t prefill_chunk = 0;           // rows per prefill forward; 0: the Model's LoadOptions::prefill_chunk
  std::optional<PrefillMode> prefill;  // prefill of the first append; empty: the Model's LoadOptions::prefill
};

namespace detail {
struct SessionState;
}

class Session {
 public:
  explicit Session(const Model& model, const SessionOptions& options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const;

  // Runs `tokens` through the model. `progress` is called after each chunk; returning false cancels.
  void append(std::span<const int32_t> tokens, const ProgressCallback& progress = {});

  // Last row of logits; see the header comment for the lifetime of the span.
  std::span<const float> logits() const;

  // Draws the next token from logits() under `params` (penalties read the session's tokens).
  int32_t sample(const SamplingParams& params) const;

  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& options = {},
                          const TokenCallback& on_token = {});

  void rewind(int64_t n);

  KVHandle kv() const;
  void restore(const KVHandle& handle);

  // Token ids so far, oldest first; valid until the next non-const call.
  std::span<const int32_t> tokens() const;
  int64_t length() const;
  // Bytes of KV state held now (global records, window rows, pending state).
  int64_t kv_bytes() const;

 private:
  friend void decode(std::span<Session* const> sessions, std::span<const int32_t> tokens);
  std::unique_ptr<detail::SessionState> state_;
};

// Appends tokens[i] to *sessions[i] for every i in one batched forward. All sessions must be distinct and
// belong to the same Model. Validates everything first: on kInvalidArgument (size mismatch, null or
// repeated session, another Model, a bad token id or a full session — the message names the session index)
// no session changes.
void decode(std::span<Session* const> sessions, std::span<const int32_t> tokens);

}  // namespace flashkv
