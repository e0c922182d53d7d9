// Streaming detokenization. The held bytes are always a proper prefix of one well-formed character (checked
// with the same maximal-subpart rule as decode), so releasing everything before it and replacing invalid
// subparts at once gives, concatenated, exactly decode()'s lossy text of the whole stream.
#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

#include "tokenizer/tokenizer_data.hpp"
#include "tokenizer/utf8.hpp"

namespace flashkv {

Detokenizer::Detokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string Detokenizer::push(int32_t id) {
  return push(std::span<const int32_t>(&id, 1));
}

std::string Detokenizer::push(std::span<const int32_t> ids) {
  pending_ += tokenizer_.decode_bytes(ids, skip_special_);  // throws before touching pending_ on a bad id
  std::string text;
  std::size_t pos = 0;
  while (pos < pending_.size()) {
    const tokenizer::Utf8Step step = tokenizer::next_utf8(pending_, pos);
    if (step.truncated) break;  // the rest may still become a character
    if (step.valid) {
      text.append(pending_, pos, step.length);
    } else {
      tokenizer::append_utf8(text, tokenizer::kReplacementChar);
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return text;
}

std::string Detokenizer::flush() {
  std::string text;
  tokenizer::append_lossy_utf8(text, pending_);
  pending_.clear();
  return text;
}

}  // namespace flashkv
