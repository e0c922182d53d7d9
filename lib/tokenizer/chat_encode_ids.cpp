// ChatEncoder::encode — a rendered prompt as token ids: each control range is looked up as one token, the
// plain text between ranges is encoded with special tokens off (so text a user typed can never become a
// control token).
#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

namespace flashkv {

std::vector<int32_t> ChatEncoder::encode(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                                         const ChatOptions& options) {
  const RenderedChat prompt = render(messages, options);
  const std::string_view text = prompt.text;
  std::vector<int32_t> ids;
  size_t plain_begin = 0;
  for (const auto& [begin, end] : prompt.special_ranges) {
    if (begin > plain_begin) tokenizer.encode_into(text.substr(plain_begin, begin - plain_begin), ids);
    const std::string_view token = text.substr(begin, end - begin);
    const std::optional<int32_t> id = tokenizer.token_to_id(token);
    if (!id || !tokenizer.is_added(*id)) {
      fail(ErrorCode::kInvalidArgument, "the tokenizer has no control token {} (not a V4.1 tokenizer?)",
           token);
    }
    ids.push_back(*id);
    plain_begin = end;
  }
  if (text.size() > plain_begin) tokenizer.encode_into(text.substr(plain_begin), ids);
  return ids;
}

}  // namespace flashkv
