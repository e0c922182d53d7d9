// encode(): text -> ids through the loaded pipeline (added tokens when allowed, pre-tokenizer, BPE), with
// two caches of the pieces already encoded (text repeats words): one per call, without a lock, and the
// tokenizer's shared WordCache behind it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_data.hpp"

namespace flashkv::tokenizer {

// Appends the ids of `text` (any bytes: invalid UTF-8 is replaced by U+FFFD first) to `out`.
void encode_text(const TokenizerData& data, std::string_view text, bool allow_special,
                 std::vector<int32_t>& out);

}  // namespace flashkv::tokenizer
