// Split with behaviour Isolated, as tokenizers does it: scan left to right; where the regex matches, the
// match is a piece and the scan resumes after it; the characters where it does not match gather into gap
// pieces.
#include "tokenizer/pre_tokenizer.hpp"

#include "tokenizer/char_class.hpp"
#include "tokenizer/utf8.hpp"

namespace flashkv::tokenizer {
namespace {

// Decodes valid UTF-8 into code points, their classes and byte offsets (ASCII without the table lookup).
void decode(std::string_view text, PreTokenizerScratch& s) {
  s.cps.clear();
  s.classes.clear();
  s.offsets.clear();
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<uint8_t>(text[pos]);
    s.offsets.push_back(static_cast<uint32_t>(pos));
    if (byte < 0x80) {
      s.cps.push_back(byte);
      ++pos;
    } else {
      const Utf8Step step = next_utf8(text, pos);
      s.cps.push_back(step.code_point);
      pos += step.length;
    }
    s.classes.push_back(char_classes(s.cps.back()));
  }
  s.offsets.push_back(static_cast<uint32_t>(text.size()));
}

void split_range(SplitMatcher matcher, const CodePointView& text, Piece range, std::vector<Piece>& out) {
  const CodePointView piece{text.cps + range.first, text.classes + range.first, range.second - range.first};
  std::size_t gap = 0;
  std::size_t pos = 0;
  while (pos < piece.size) {
    const std::size_t length = matcher(piece, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    if (gap < pos) out.emplace_back(range.first + gap, range.first + pos);
    out.emplace_back(range.first + pos, range.first + pos + length);
    pos += length;
    gap = pos;
  }
  if (gap < piece.size) out.emplace_back(range.first + gap, range.second);
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<Piece>& pieces, PreTokenizerScratch& s) const {
  pieces.clear();
  if (text.empty()) return;
  decode(text, s);
  const CodePointView view{s.cps.data(), s.classes.data(), s.cps.size()};
  s.ranges.assign(1, Piece{0, static_cast<uint32_t>(s.cps.size())});
  for (const SplitMatcher matcher : rules_) {
    s.next.clear();
    for (const Piece& range : s.ranges) split_range(matcher, view, range, s.next);
    s.ranges.swap(s.next);
  }
  for (const Piece& range : s.ranges) pieces.emplace_back(s.offsets[range.first], s.offsets[range.second]);
}

}  // namespace flashkv::tokenizer
