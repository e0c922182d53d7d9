// flashkv::decode: one batched decode step over several sessions of one Model
// (Engine::forward_batch). Everything is validated before the forward so that a
// bad batch changes no session.
#include <algorithm>
#include <vector>

#include <flashkv/error.hpp>
#include <flashkv/session.hpp>

#include "api/session_state.hpp"
#include "api/token_checks.hpp"

namespace flashkv {

namespace {

void check_batch(std::span<Session* const> sessions, std::span<const int32_t> tokens) {
  if (sessions.size() != tokens.size()) {
    fail(ErrorCode::kInvalidArgument, "decode: {} sessions but {} tokens (one token per session)",
         sessions.size(), tokens.size());
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (sessions[i] == nullptr) fail(ErrorCode::kInvalidArgument, "decode: session {} is null", i);
    if (std::find(sessions.begin(), sessions.begin() + static_cast<std::ptrdiff_t>(i), sessions[i]) !=
        sessions.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail(ErrorCode::kInvalidArgument, "decode: session {} appears twice in the batch", i);
    }
    if (!(sessions[i]->model() == sessions[0]->model())) {
      fail(ErrorCode::kInvalidArgument, "decode: session {} belongs to another Model than session 0", i);
    }
    detail::check_token_run(sessions[i]->model().config(), sessions[i]->length(), tokens.subspan(i, 1),
                            fmt::format("decode: session {}", i));
  }
}

}  // namespace

void decode(std::span<Session* const> sessions, std::span<const int32_t> tokens) {
  check_batch(sessions, tokens);
  if (sessions.empty()) return;
  std::vector<runtime::SequenceState*> states;
  states.reserve(sessions.size());
  for (Session* session : sessions) states.push_back(session->state_->state.get());
  const runtime::Engine& engine = *sessions[0]->state_->core->engine;
  std::vector<runtime::ForwardResult> results = engine.forward_batch(states, tokens);
  if (results.size() != sessions.size()) {
    fail(ErrorCode::kInternal, "decode: the engine returned {} results for {} sessions", results.size(),
         sessions.size());
  }
  for (size_t i = 0; i < sessions.size(); ++i) sessions[i]->state_->logits = std::move(results[i].logits);
}

}  // namespace flashkv
