#include "api/token_checks.hpp"

#include <flashkv/error.hpp>

namespace flashkv::detail {

void check_token_run(const ModelConfig& config, int64_t length, std::span<const int32_t> tokens,
                     std::string_view what) {
  if (tokens.empty())
    fail(ErrorCode::kInvalidArgument, "{}: empty token list (at least one token is needed)", what);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config.vocab_size) {
      fail(ErrorCode::kInvalidArgument, "{}: token id {} at position {} is outside the vocabulary [0, {})",
           what, tokens[i], i, config.vocab_size);
    }
  }
  const int64_t total = length + static_cast<int64_t>(tokens.size());
  if (total > config.max_position_embeddings) {
    fail(ErrorCode::kInvalidArgument,
         "{}: {} tokens after {} already held would make {} tokens, past the "
         "context limit "
         "max_position_embeddings = {}",
         what, tokens.size(), length, total, config.max_position_embeddings);
  }
}

}  // namespace flashkv::detail
