// Unicode classes of code points, as the pre-tokenizer regexes see them (\p{L}, \p{M}, \p{N}, \p{P}, \p{S},
// \s). The data is generated (unicode_tables.cpp, tools/gen_unicode_tables.py) in the Unicode version of the
// oracle's regex engine; char_classes() answers from a two-stage table built once from it.
// Threading: char_classes() is safe from any thread (the table is built under a function-local static).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashkv::tokenizer {

enum CharClass : uint8_t {
  kLetter = 1,   // \p{L}
  kMark = 2,     // \p{M}
  kNumber = 4,   // \p{N}
  kPunct = 8,    // \p{P}
  kSymbol = 16,  // \p{S}
  kSpace = 32,   // \s: U+0009..U+000D, U+0085, Zs, Zl, Zp
};

struct CharClassRange {
  uint32_t first;
  uint32_t last;
  uint8_t classes;
};

extern const char kUnicodeVersion[];
extern const std::size_t kCharClassRangeCount;
extern const CharClassRange kCharClassRanges[];

// Bit mask of CharClass for `c`; 0 for code points beyond U+10FFFF.
uint8_t char_classes(char32_t c) noexcept;

}  // namespace flashkv::tokenizer
