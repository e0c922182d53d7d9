// Session::generate: prompt prefill, then sample -> callback -> append until a
// stop condition.
#include <algorithm>

#include <flashkv/error.hpp>
#include <flashkv/session.hpp>

namespace flashkv {

namespace {

void check_generate_options(const GenerateOptions& options, const ModelConfig& config) {
  if (options.max_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "GenerateOptions.max_tokens must be >= 0, got {}", options.max_tokens);
  }
  for (const int32_t id : options.stop_tokens) {
    if (id < 0 || id >= config.vocab_size) {
      fail(ErrorCode::kInvalidArgument,
           "GenerateOptions.stop_tokens: id {} is outside the vocabulary [0, "
           "{})",
           id, config.vocab_size);
    }
  }
  validate_sampling_params(options.sampling);
}

std::vector<int32_t> stop_set(const GenerateOptions& options, const ModelConfig& config) {
  std::vector<int32_t> stops = options.stop_tokens;
  if (options.stop_at_eos) stops.push_back(static_cast<int32_t>(config.eos_token_id));
  return stops;
}

void check_stop_request(const GenerateOptions& options, int64_t generated) {
  if (options.stop.stop_requested()) {
    fail(ErrorCode::kCancelled, "generation cancelled by a stop request after {} tokens", generated);
  }
}

}  // namespace

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                 const TokenCallback& on_token) {
  const ModelConfig& config = model().config();
  check_generate_options(options, config);
  if (!prompt.empty()) {
    check_stop_request(options, 0);
    const ProgressCallback& user_progress = options.on_prefill_progress;
    append(prompt, [&](int64_t done, int64_t total) {
      const bool keep_going = !user_progress || user_progress(done, total);
      return keep_going && !options.stop.stop_requested();
    });
  } else if (length() == 0) {
    fail(ErrorCode::kInvalidArgument, "generate: empty prompt on an empty session (give at least one token)");
  }

  const std::vector<int32_t> stops = stop_set(options, config);
  GenerateResult result;
  while (static_cast<int64_t>(result.tokens.size()) < options.max_tokens) {
    check_stop_request(options, static_cast<int64_t>(result.tokens.size()));
    if (length() >= model().max_tokens()) {
      result.reason = StopReason::kContextFull;
      return result;
    }
    const int32_t token = sample(options.sampling);
    if (on_token && !on_token(token)) {
      fail(ErrorCode::kCancelled, "generation cancelled by the token callback after {} tokens",
           result.tokens.size());
    }
    append(std::span(&token, 1));
    result.tokens.push_back(token);
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      result.reason = StopReason::kStopToken;
      return result;
    }
  }
  result.reason = StopReason::kMaxTokens;
  return result;
}

}  // namespace flashkv
