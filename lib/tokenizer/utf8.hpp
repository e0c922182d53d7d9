// UTF-8 decoding with the "maximal subpart" rule for invalid input (Unicode ch. 3, U+FFFD substitution of
// maximal subparts): what Python's bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashkv::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

struct Utf8Step {
  char32_t code_point;  // kReplacementChar when !valid
  std::size_t length;   // bytes consumed: the character, or the maximal invalid subpart (>= 1)
  bool valid;
  bool truncated;  // !valid only because the data ended: more bytes could still complete the character
};

// Decodes the character (or invalid subpart) starting at `pos` < text.size().
Utf8Step next_utf8(std::string_view text, std::size_t pos) noexcept;

bool is_valid_utf8(std::string_view text) noexcept;
void append_utf8(std::string& out, char32_t code_point);
// `text` with every maximal invalid subpart replaced by U+FFFD; appended to `out`.
void append_lossy_utf8(std::string& out, std::string_view text);

}  // namespace flashkv::tokenizer
