// flashkv.TokenStream: Session.generate(...) without on_token, an iterator of the generated tokens.
//
// Each next() is one step of Session::generate (the first also appends the prompt): it samples a token,
// appends it and returns it, so inside the loop the session already holds the token and logits() predicts the
// one after it. Stopping, sampling and seeds are Session::generate's (one generate call of at most one token
// per step, and a draw depends only on the seed and the session's length), so the stream yields exactly the
// tokens of the callback form. Leaving the loop early simply stops: the session keeps every token yielded.
// The arguments are checked when the stream is made; nothing runs until the first next(). After an error the
// stream is finished. `tokens` and `reason` tell what happened ("max_tokens", "stop_token", "context_full";
// None while running or after an error).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <pybind11/pybind11.h>

#include <flashkv/generate.hpp>

#include "py_session.hpp"

namespace flashkv::python {

class TokenStream {
 public:
  // `options` carries no callbacks; `on_progress` is the prompt's progress callable or None.
  TokenStream(pybind11::object session_object, std::vector<int32_t> prompt, GenerateOptions options,
              pybind11::object on_progress);

  // The next token; throws pybind11::stop_iteration when generation has ended.
  int32_t next();

  const std::vector<int32_t>& tokens() const { return tokens_; }
  std::optional<StopReason> reason() const { return reason_; }

 private:
  // One Session::generate call of at most one token: the token, or nothing when generation has ended before
  // it. Sets reason_ when generation has ended.
  std::optional<int32_t> step(PySession& session);

  pybind11::object session_object_;
  std::vector<int32_t> prompt_;  // appended by the first step
  GenerateOptions options_;
  pybind11::object on_progress_;
  std::vector<int32_t> tokens_;
  std::optional<StopReason> reason_;
  bool finished_ = false;
};

// Checks what Session::generate would check before it changes anything (sampling params, max_tokens, the
// token ids of the prompt and of stop_tokens), so that a bad argument raises at the call, not at next().
void check_generate_arguments(const Model& model, std::span<const int32_t> prompt,
                              const GenerateOptions& options);

}  // namespace flashkv::python
