// The supported Split regexes, each as an anchored matcher. Pieces are matched independently (tokenizers
// runs each Split of a Sequence on every piece of the previous one), so "end" below is the end of the piece.
#include "tokenizer/split_patterns.hpp"

#include <array>
#include <string>

#include "tokenizer/char_class.hpp"

namespace flashkv::tokenizer {
namespace {

std::size_t run_of(const CodePointView& t, std::size_t pos, uint8_t mask) {
  while (pos < t.size && (t.classes[pos] & mask) != 0) ++pos;
  return pos;
}

bool is_newline(char32_t c) {
  return c == U'\r' || c == U'\n';
}

// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]: the 32 ASCII punctuation and symbol characters.
bool is_ascii_punct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

bool is_ascii_letter(char32_t c) {
  return (c >= U'A' && c <= U'Z') || (c >= U'a' && c <= U'z');
}

// \p{N}{1,3}
std::size_t match_numbers(const CodePointView& t, std::size_t pos) {
  std::size_t n = 0;
  while (n < 3 && pos + n < t.size && (t.classes[pos + n] & kNumber) != 0) ++n;
  return n;
}

// [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+ : CJK ideographs, hiragana, katakana.
bool is_cjk_kana(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

std::size_t match_cjk_kana(const CodePointView& t, std::size_t pos) {
  std::size_t q = pos;
  while (q < t.size && is_cjk_kana(t.cps[q])) ++q;
  return q - pos;
}

// The DeepSeek word rule, six alternatives tried in order at `pos`:
//   1 [ASCII punct][A-Za-z]+
//   2 [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+   optional lead only when a letter/mark follows it (backtracking)
//   3  ?[\p{P}\p{S}]+[\r\n]*
//   4 \s*[\r\n]+     greedy \s* backtracks to the last newline of the whitespace run: the run up to it
//   5 \s+(?!\S)      the whole run at the piece end, else the run less its last character (if that leaves 1+)
//   6 \s+            the whole run
std::size_t match_deepseek_words(const CodePointView& t, std::size_t pos) {
  const char32_t c0 = t.cps[pos];
  const uint8_t k0 = t.classes[pos];
  if (is_ascii_punct(c0)) {
    std::size_t q = pos + 1;
    while (q < t.size && is_ascii_letter(t.cps[q])) ++q;
    if (q > pos + 1) return q - pos;
  }
  constexpr uint8_t kLetterMark = kLetter | kMark;
  const bool lead_ok = !is_newline(c0) && (k0 & (kLetter | kPunct | kSymbol)) == 0;
  if (lead_ok && pos + 1 < t.size && (t.classes[pos + 1] & kLetterMark) != 0) {
    return run_of(t, pos + 1, kLetterMark) - pos;
  }
  if ((k0 & kLetterMark) != 0) return run_of(t, pos, kLetterMark) - pos;
  constexpr uint8_t kPunctSymbol = kPunct | kSymbol;
  const std::size_t ps = (c0 == U' ' && pos + 1 < t.size) ? pos + 1 : pos;
  if ((t.classes[ps] & kPunctSymbol) != 0) {
    std::size_t q = run_of(t, ps, kPunctSymbol);
    while (q < t.size && is_newline(t.cps[q])) ++q;
    return q - pos;
  }
  if ((k0 & kSpace) == 0) return 0;
  const std::size_t end = run_of(t, pos, kSpace);
  for (std::size_t k = end; k > pos; --k) {
    if (is_newline(t.cps[k - 1])) return k - pos;
  }
  const std::size_t n = end - pos;
  return (end == t.size || n == 1) ? n : n - 1;
}

struct KnownPattern {
  std::string source;
  SplitMatcher matcher;
};

const std::array<KnownPattern, 3>& known_patterns() {
  static const std::array<KnownPattern, 3> patterns = {{
      {R"(\p{N}{1,3})", &match_numbers},
      {"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", &match_cjk_kana},
      {std::string(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)") + "\r\n" +
           R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)" + "\r\n" + R"(]*|\s*[)" + "\r\n" +
           R"(]+|\s+(?!\S)|\s+)",
       &match_deepseek_words},
  }};
  return patterns;
}

}  // namespace

std::optional<SplitMatcher> find_split_pattern(std::string_view regex) {
  for (const KnownPattern& p : known_patterns()) {
    if (p.source == regex) return p.matcher;
  }
  return std::nullopt;
}

}  // namespace flashkv::tokenizer
