// Hand-written matchers for the Split regexes of the DeepSeek tokenizers (no general regex engine: the
// patterns use Unicode classes std::regex lacks, and a matcher per pattern is much faster). Each matcher is
// the regex anchored at one position, with the regex's leftmost-first alternation and backtracking worked
// out by hand (see split_patterns.cpp); find_split_pattern() recognises a pattern by its exact text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace flashkv::tokenizer {

// A piece of text as the matchers see it: code points and their CharClass masks, [0, size).
struct CodePointView {
  const char32_t* cps;
  const uint8_t* classes;
  std::size_t size;
};

// Length in code points of the match starting at `pos` (< text.size), 0 when the regex does not match there.
// None of the supported regexes matches the empty string.
using SplitMatcher = std::size_t (*)(const CodePointView& text, std::size_t pos);

// The matcher of the regex with this exact source text, or nullopt when it is not one of the supported ones.
std::optional<SplitMatcher> find_split_pattern(std::string_view regex);

}  // namespace flashkv::tokenizer
