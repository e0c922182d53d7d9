#include "token_stream.hpp"

#include <algorithm>
#include <utility>

#include <flashkv/error.hpp>

#include "bindings.hpp"
#include "callbacks.hpp"
#include "options.hpp"

namespace flashkv::python {

namespace {

void check_ids(std::span<const int32_t> ids, int64_t vocab, std::string_view what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      fail(ErrorCode::kInvalidArgument, "{}: token id {} at position {} is outside the vocabulary [0, {})",
           what, ids[i], i, vocab);
    }
  }
}

}  // namespace

void check_generate_arguments(const Model& model, std::span<const int32_t> prompt,
                              const GenerateOptions& options) {
  validate_sampling_params(options.sampling);
  if (options.max_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "Session.generate: max_tokens must be >= 0, got {}",
         options.max_tokens);
  }
  check_ids(prompt, model.vocab_size(), "Session.generate: prompt");
  check_ids(options.stop_tokens, model.vocab_size(), "Session.generate: stop_tokens");
}

TokenStream::TokenStream(py::object session_object, std::vector<int32_t> prompt, GenerateOptions options,
                         py::object on_progress)
    : session_object_(std::move(session_object)),
      prompt_(std::move(prompt)),
      options_(std::move(options)),
      on_progress_(std::move(on_progress)) {}

int32_t TokenStream::next() {
  if (finished_) throw py::stop_iteration();
  finished_ = true;  // stays so when the step fails or ends generation
  const std::optional<int32_t> token = step(session_object_.cast<PySession&>());
  if (!token) throw py::stop_iteration();
  if (!reason_) finished_ = false;
  return *token;
}

std::optional<int32_t> TokenStream::step(PySession& session) {
  const SessionLock lock(session, Access::kChange, "Session.generate (next token)");
  GenerateOptions one = options_;
  one.max_tokens = std::min<int64_t>(options_.max_tokens - static_cast<int64_t>(tokens_.size()), 1);
  CallbackErrors errors;
  one.on_prefill_progress = progress_callback(on_progress_, errors);
  const std::vector<int32_t> prompt = std::exchange(prompt_, {});
  const GenerateResult result = without_gil(errors, [&] { return session.session().generate(prompt, one); });
  if (result.tokens.empty()) {
    reason_ = result.reason;  // max_tokens 0 (the prompt only) or a full context
    return std::nullopt;
  }
  tokens_.push_back(result.tokens.front());
  if (result.reason == StopReason::kStopToken) {
    reason_ = StopReason::kStopToken;
  } else if (static_cast<int64_t>(tokens_.size()) == options_.max_tokens) {
    reason_ = StopReason::kMaxTokens;
  }
  return result.tokens.front();
}

}  // namespace flashkv::python
