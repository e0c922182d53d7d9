// bytes_to_unicode() of GPT-2 (and of tokenizers' ByteLevel): bytes '!'..'~', U+00A1..U+00AC and
// U+00AE..U+00FF keep their code point; the other 68 bytes, in increasing order, get U+0100, U+0101, ...
#include "tokenizer/byte_level.hpp"

#include <array>

#include "tokenizer/utf8.hpp"

namespace flashkv::tokenizer {
namespace {

struct Alphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every alphabet code point is < U+0144

  Alphabet() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[static_cast<std::size_t>(b)]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

char32_t byte_to_char(uint8_t b) noexcept {
  return alphabet().to_char[b];
}

int char_to_byte(char32_t c) noexcept {
  return c < 512 ? alphabet().to_byte[c] : -1;
}

bool byte_level_decode(std::string_view token, std::string& out) {
  const std::size_t start = out.size();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const Utf8Step step = next_utf8(token, pos);
    const int b = step.valid ? char_to_byte(step.code_point) : -1;
    if (b < 0) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(b));
    pos += step.length;
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace flashkv::tokenizer
