"""Texts for the tokenizer tests: a fixed corpus of scripts, code, emoji, whitespace, numbers and added-token
look-alikes, and seeded random Unicode."""
import random


def random_unicode(rng: random.Random, length: int) -> str:
    """Code points drawn from ranges that exercise every class: ASCII, Latin, combining marks, CJK, kana,
    Hangul, Arabic, Devanagari, symbols, emoji, whitespace, and anything up to U+10FFFF (no surrogates)."""
    ranges = [(0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x600, 0x6FF),
              (0x900, 0x97F), (0x2000, 0x206F), (0x2100, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF),
              (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x0, 0x10FFFF)]
    out = []
    while len(out) < length:
        lo, hi = rng.choice(ranges)
        cp = rng.randint(lo, hi)
        if not 0xD800 <= cp <= 0xDFFF:
            out.append(chr(cp))
    return "".join(out)


FIXED_CORPUS = [
    "Hello, world! This is a test of the tokenizer.",
    "The quick brown fox jumps over the lazy dog's back; it's 3:45pm (UTC+8).",
    "我们的目标是构建一个高效的推理库。深度求索的模型很强大！",
    "日本語のテキスト：ひらがな、カタカナ、漢字。ｶﾀｶﾅ半角",
    "한국어 텍스트입니다. 안녕하세요!",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย",
    "def f(x):\n    return x**2 + 1  # comment\n\n\tif x >= 10:\r\n        pass\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v[0]++; }",
    "emoji 👍🏽 👨‍👩‍👧‍👦 🇯🇵 ❤️ 🤖✨ and flags 🏳️‍🌈",
    "    leading spaces, trailing spaces    ",
    "  \n\n\n  \t\t  \r\n\r\n   \u3000\u00a0 x \u2028 y \u0085 z",
    "numbers 1234567890 3.14159 -42 1e10 0x1F ٠١٢٣٤٥ ½ ⅔ ² ①②③ 𝟙𝟚𝟛",
    "combining: e\u0301 a\u0308 n\u0303 \u0301\u0302 x\u20dd",
    "mixed汉字and English混合text123数字",
    "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜><｜begin▁of▁sentence｜>text<|EOT|><dsml:invoke name=\"x\"></dsml:invoke>",
    "partial <｜User and <think and </think>> and <<think>>",
    "!!!??? ...--- ''' \"\"\" ``` ~~~ @@@ ### $$$ %%% ^^^ &&& *** ((( ))) ___ +++ === [[[ ]]] {{{ }}} ||| \\\\",
    ".Hello ,World 'Quote \"Double -dash /slash :colon",
    "a" * 300 + " " + "ab" * 200 + " " + "\u00e9" * 100,
    " " * 100 + "x" + "\n" * 50 + "\t" * 20,
    "",
    " ",
    "\n",
    "ĠÑĤÐ²ÑĬÑĢ byte-level look-alikes Ġ Ċ",
    "\x00\x01\x1f\x7f control chars \ufeff BOM \u200b ZWSP \u200d ZWJ",
]


def seeded_corpus(seed: int) -> list[str]:
    """The fixed corpus, 300 random Unicode strings and one long mix of all of them."""
    rng = random.Random(seed)
    texts = list(FIXED_CORPUS)
    texts += [random_unicode(rng, rng.randint(1, 60)) for _ in range(300)]
    texts += ["".join(rng.choice(FIXED_CORPUS) for _ in range(40))]  # a long input
    return texts
