// The byte-level alphabet of GPT-2 style BPE: each of the 256 byte values is written as one printable code
// point (printable Latin-1 bytes as themselves, the rest as U+0100 + n), so that vocab strings are text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashkv::tokenizer {

// The code point that stands for byte `b`.
char32_t byte_to_char(uint8_t b) noexcept;
// The byte that `c` stands for, or -1 when `c` is not in the alphabet.
int char_to_byte(char32_t c) noexcept;
// Appends the bytes a byte-level token string stands for; false (and `out` unchanged) when the string holds
// a character outside the alphabet or is not valid UTF-8.
bool byte_level_decode(std::string_view token, std::string& out);
// The byte-level string of raw bytes.
std::string byte_level_encode(std::string_view bytes);

}  // namespace flashkv::tokenizer
