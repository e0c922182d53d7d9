// UTF-8 decoding per Unicode Table 3-7 (well-formed byte sequences): the second byte's range depends on the
// lead byte, which is what makes E0 80, ED A0 (surrogates) and F4 90 invalid at the second byte.
#include "tokenizer/utf8.hpp"

#include <cstdint>

namespace flashkv::tokenizer {
namespace {

struct LeadInfo {
  uint8_t length;     // 0: never a lead byte
  uint8_t second_lo;  // allowed range of the second byte
  uint8_t second_hi;
};

LeadInfo lead_info(uint8_t b) noexcept {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Step next_utf8(std::string_view text, std::size_t pos) noexcept {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t lead = s[pos];
  if (lead < 0x80) return {lead, 1, true, false};
  const LeadInfo info = lead_info(lead);
  if (info.length == 0) return {kReplacementChar, 1, false, false};
  char32_t cp = lead & (0x7Fu >> info.length);
  for (std::size_t i = 1; i < info.length; ++i) {
    if (pos + i >= text.size()) return {kReplacementChar, i, false, true};
    const uint8_t b = s[pos + i];
    const uint8_t lo = i == 1 ? info.second_lo : 0x80;
    const uint8_t hi = i == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return {kReplacementChar, i, false, false};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {cp, info.length, true, false};
}

bool is_valid_utf8(std::string_view text) noexcept {
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = next_utf8(text, pos);
    if (!step.valid) return false;
    pos += step.length;
  }
  return true;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void append_lossy_utf8(std::string& out, std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = next_utf8(text, pos);
    if (step.valid) {
      out.append(text.substr(pos, step.length));
    } else {
      append_utf8(out, kReplacementChar);
    }
    pos += step.length;
  }
}

}  // namespace flashkv::tokenizer
