// Validation of token runs before they reach the engine, so a bad input leaves
// a session untouched and the message names the position and the id at fault.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include <flashkv/config.hpp>

namespace flashkv::detail {

// Throws kInvalidArgument when `tokens` is empty, holds an id outside [0,
// vocab), or would take a sequence of `length` tokens past
// max_position_embeddings. `what` names the run in messages ("append", "session
// 3").
void check_token_run(const ModelConfig& config, int64_t length, std::span<const int32_t> tokens,
                     std::string_view what);

}  // namespace flashkv::detail
