// Builds a RenderedChat: plain text and control tokens appended in order, the control tokens' byte ranges
// recorded so that tokenization can tell them from user text that happens to spell the same characters.
#pragma once

#include <string_view>

#include <flashkv/chat.hpp>

namespace flashkv::chat {

class PromptBuilder {
 public:
  PromptBuilder& text(std::string_view plain) {
    out_.text += plain;
    return *this;
  }
  PromptBuilder& special(std::string_view token) {
    const size_t begin = out_.text.size();
    out_.text += token;
    out_.special_ranges.emplace_back(begin, out_.text.size());
    return *this;
  }
  RenderedChat take() { return std::move(out_); }

 private:
  RenderedChat out_;
};

}  // namespace flashkv::chat
