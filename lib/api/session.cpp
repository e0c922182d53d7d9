// Session: prefill in chunks, logits, sampling, rewind, snapshots. Generation
// lives in generate.cpp and the batched step in batch_decode.cpp.
#include <flashkv/error.hpp>
#include <flashkv/session.hpp>

#include "api/session_state.hpp"
#include "api/step_seed.hpp"
#include "api/token_checks.hpp"
#include "runtime/sampling.hpp"

namespace flashkv {

namespace {

const runtime::Engine& engine_of(const detail::SessionState& s) {
  return *s.core->engine;
}

int64_t chunk_rows(const detail::SessionState& s) {
  return s.options.prefill_chunk > 0 ? s.options.prefill_chunk : s.core->options.prefill_chunk;
}

PrefillMode first_prefill_mode(const detail::SessionState& s) {
  return s.options.prefill.value_or(s.core->options.prefill);
}

void append_ced(detail::SessionState& s, std::span<const int32_t> tokens, const ProgressCallback& progress) {
  runtime::ForwardResult result = engine_of(s).prefill_ced(*s.state, tokens);
  s.logits = std::move(result.logits);
  const auto total = static_cast<int64_t>(tokens.size());
  if (progress) progress(total, total);  // nothing is left to cancel
}

void append_exact(detail::SessionState& s, std::span<const int32_t> tokens,
                  const ProgressCallback& progress) {
  const auto total = static_cast<int64_t>(tokens.size());
  const int64_t chunk = chunk_rows(s);
  for (int64_t done = 0; done < total;) {
    const int64_t rows = std::min(chunk, total - done);
    runtime::ForwardResult result =
        engine_of(s).forward(*s.state, tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(rows)),
                             runtime::LogitsRows::kLast);
    s.logits = std::move(result.logits);
    done += rows;
    if (progress && !progress(done, total) && done < total) {
      fail(ErrorCode::kCancelled, "append cancelled by the progress callback after {} of {} tokens", done,
           total);
    }
  }
}

}  // namespace

Session::Session(const Model& model, const SessionOptions& options) {
  if (options.prefill_chunk < 0) {
    fail(ErrorCode::kInvalidArgument, "SessionOptions.prefill_chunk must be >= 0, got {}",
         options.prefill_chunk);
  }
  state_ = std::make_unique<detail::SessionState>(
      detail::SessionState{model, model.core_.get(), options, model.core_->engine->new_state(), {}});
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const Model& Session::model() const {
  return state_->model;
}

void Session::append(std::span<const int32_t> tokens, const ProgressCallback& progress) {
  detail::SessionState& s = *state_;
  const int64_t held = length();
  detail::check_token_run(s.model.config(), held, tokens, "append");
  if (held == 0 && first_prefill_mode(s) == PrefillMode::kCed) {
    append_ced(s, tokens, progress);
  } else {
    append_exact(s, tokens, progress);
  }
}

std::span<const float> Session::logits() const {
  if (state_->logits.empty())
    fail(ErrorCode::kInvalidArgument, "logits: the session is empty (append tokens first)");
  return state_->logits;
}

int32_t Session::sample(const SamplingParams& params) const {
  const std::span<const float> row = logits();
  SamplingParams step = params;
  step.seed = detail::step_seed(params.seed, length());
  runtime::Sampler sampler(step);
  return sampler.sample(row, tokens());
}

void Session::rewind(int64_t n) {
  detail::SessionState& s = *state_;
  const int64_t held = length();
  if (n < 0 || n > held) {
    fail(ErrorCode::kInvalidArgument, "rewind: cannot drop {} tokens from a session of {} tokens", n, held);
  }
  if (n == 0) return;
  if (n == held) {
    s.state = engine_of(s).new_state();
    s.logits.clear();
    return;
  }
  // The logits of the new last token were not kept: drop it too and run it
  // again (one decode step).
  const int32_t new_last = tokens()[static_cast<size_t>(held - n - 1)];
  engine_of(s).truncate(*s.state, n + 1);
  runtime::ForwardResult result =
      engine_of(s).forward(*s.state, std::span(&new_last, 1), runtime::LogitsRows::kLast);
  s.logits = std::move(result.logits);
}

KVHandle Session::kv() const {
  return KVHandle(std::make_shared<const detail::Snapshot>(
      detail::Snapshot{state_->model, engine_of(*state_).copy_state(*state_->state), state_->logits}));
}

void Session::restore(const KVHandle& handle) {
  const detail::Snapshot& snapshot = handle.snapshot();
  if (!(snapshot.model == state_->model)) {
    fail(ErrorCode::kInvalidArgument,
         "restore: the KVHandle was taken from a session of another Model (a "
         "separate load); restore it into a "
         "session of the Model it came from");
  }
  std::unique_ptr<runtime::SequenceState> copy = engine_of(*state_).copy_state(*snapshot.state);
  std::vector<float> logits = snapshot.logits;
  state_->state = std::move(copy);
  state_->logits = std::move(logits);
}

std::span<const int32_t> Session::tokens() const {
  return engine_of(*state_).tokens(*state_->state);
}
int64_t Session::length() const {
  return engine_of(*state_).length(*state_->state);
}
int64_t Session::kv_bytes() const {
  return engine_of(*state_).state_bytes(*state_->state);
}

}  // namespace flashkv
