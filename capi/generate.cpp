// fkv_session_generate: the C++ Session::generate with the C outputs. The generated tokens are read back
// from the session's own timeline, so a cancelled generation reports exactly the tokens it appended.
#include <algorithm>

#include "boundary.hpp"
#include "callbacks.hpp"
#include "handles.hpp"
#include "options.hpp"
#include "struct_io.hpp"

namespace flashkv::capi {

namespace {

void check_token_buffer(const int32_t* tokens_out, uint64_t capacity, int64_t max_tokens) {
  if (tokens_out == nullptr) {
    if (capacity != 0)
      fail(ErrorCode::kInvalidArgument, "tokens_out is NULL but tokens_capacity is {}", capacity);
    return;
  }
  if (max_tokens > 0 && capacity < static_cast<uint64_t>(max_tokens)) {
    fail(ErrorCode::kInvalidArgument,
         "tokens_capacity {} is smaller than fkv_generate_options.max_tokens {} (pass a buffer of max_tokens "
         "ids, or NULL and 0 to receive tokens only through on_token)",
         capacity, max_tokens);
  }
}

int32_t stop_reason_code(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return FKV_STOP_TOKEN;
    case StopReason::kContextFull:
      return FKV_STOP_CONTEXT_FULL;
    case StopReason::kMaxTokens:
      break;
  }
  return FKV_STOP_MAX_TOKENS;
}

// The tokens the session holds past `first`: what this generate call appended after its prompt.
void report_generated(const Session& session, int64_t first, int32_t* tokens_out, uint64_t* n_generated) {
  const std::span<const int32_t> held = session.tokens();
  const auto start = static_cast<size_t>(std::clamp<int64_t>(first, 0, static_cast<int64_t>(held.size())));
  const std::span<const int32_t> generated = held.subspan(start);
  if (tokens_out != nullptr) std::copy(generated.begin(), generated.end(), tokens_out);
  if (n_generated != nullptr) *n_generated = generated.size();
}

}  // namespace

}  // namespace flashkv::capi

extern "C" fkv_status fkv_session_generate(fkv_session* session, const int32_t* prompt, uint64_t n_prompt,
                                           const fkv_generate_options* options, int32_t* tokens_out,
                                           uint64_t tokens_capacity, uint64_t* n_generated,
                                           int32_t* stop_reason) {
  using namespace flashkv;
  return capi::guarded("fkv_session_generate", [&] {
    Session& s = capi::require(session, "session").session;
    const std::span<const int32_t> prompt_span = capi::input_array(prompt, n_prompt, "prompt");
    const fkv_generate_options c_options = capi::read_generate_options(options);
    GenerateOptions cpp = capi::to_generate_options(c_options);
    capi::check_token_buffer(tokens_out, tokens_capacity, cpp.max_tokens);
    cpp.on_prefill_progress = capi::wrap_progress(c_options.on_progress, c_options.on_progress_user_data);

    const int64_t first_generated = s.length() + static_cast<int64_t>(prompt_span.size());
    try {
      const GenerateResult result =
          s.generate(prompt_span, cpp, capi::wrap_token(c_options.on_token, c_options.on_token_user_data));
      if (stop_reason != nullptr) *stop_reason = capi::stop_reason_code(result.reason);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kCancelled)
        capi::report_generated(s, first_generated, tokens_out, n_generated);
      throw;
    }
    capi::report_generated(s, first_generated, tokens_out, n_generated);
  });
}
