// The tokenizer's own mechanisms without Python: the Split matchers against std::regex (an independent
// backtracking engine) on random ASCII, where the Unicode classes reduce to ASCII sets std::regex has; the
// streaming detokenizer's laws on random id streams; load errors. Ids against Hugging Face `tokenizers` on
// the real DeepSeek tokenizer are in tests/python/test_tokenizer_hf.py.
#include <chrono>
#include <cstdint>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

#include "catch.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/split_patterns.hpp"

namespace {

using flashkv::Error;
using flashkv::ErrorCode;
using flashkv::tokenizer::Piece;
using flashkv::tokenizer::PreTokenizer;

// The regexes exactly as tokenizer.json holds them (JSON-decoded: \r and \n are the control characters).
const std::string kNumbers = R"(\p{N}{1,3})";
const std::string kWords = std::string(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)") + "\r\n" +
                           R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)" + "\r\n" + R"(]*|\s*[)" +
                           "\r\n" + R"(]+|\s+(?!\S)|\s+)";

// The same regexes for ASCII text: \p{L} = [A-Za-z], \p{M} = none, \p{N} = [0-9], \p{P} u \p{S} = the 32
// ASCII punctuation characters, \s = [\t\n\v\f\r ].
const std::string kPunct = R"(!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~)";
const std::string kSpace = "\\t\\n\\v\\f\\r ";
const std::string kAsciiNumbers = "[0-9]{1,3}";
const std::string kAsciiWords = "[" + kPunct + "][A-Za-z]+|[^\\r\\nA-Za-z" + kPunct + "]?[A-Za-z]+| ?[" +
                                kPunct + "]+[\\r\\n]*|[" + kSpace + "]*[\\r\\n]+|[" + kSpace + "]+(?![^" +
                                kSpace + "])|[" + kSpace + "]+";

uint64_t fresh_seed() {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::string random_ascii(std::mt19937_64& gen, std::size_t length) {
  static const std::string alphabet =
      "aZq  \t\r\n\n\v\x01"
      "0123456789" +
      std::string("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string s;
  for (std::size_t i = 0; i < length; ++i) s += alphabet[pick(gen)];
  return s;
}

// Isolated split with std::regex: matches and the gaps between them.
std::vector<std::string> regex_split(const std::string& text, const std::regex& re) {
  std::vector<std::string> out;
  std::size_t gap = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    const auto pos = static_cast<std::size_t>(it->position());
    if (pos > gap) out.push_back(text.substr(gap, pos - gap));
    out.push_back(it->str());
    gap = pos + static_cast<std::size_t>(it->length());
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
  return out;
}

std::vector<std::string> our_split(const std::string& text, const std::string& regex) {
  const auto matcher = flashkv::tokenizer::find_split_pattern(regex);
  REQUIRE(matcher.has_value());
  const PreTokenizer pre({*matcher});
  std::vector<Piece> pieces;
  flashkv::tokenizer::PreTokenizerScratch scratch;
  pre.split(text, pieces, scratch);
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.push_back(text.substr(p.first, p.second - p.first));
  return out;
}

}  // namespace

TEST_CASE("tokenizer split matchers equal std::regex on random ASCII", "[tokenizer]") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 gen(seed);
  const std::regex words(kAsciiWords, std::regex::ECMAScript);
  const std::regex numbers(kAsciiNumbers, std::regex::ECMAScript);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_ascii(gen, 1 + static_cast<std::size_t>(gen() % 40));
    INFO("text [" << text << "]");
    CHECK(our_split(text, kWords) == regex_split(text, words));
    CHECK(our_split(text, kNumbers) == regex_split(text, numbers));
  }
}

TEST_CASE("tokenizer split matchers: unknown regexes are not taken for known ones", "[tokenizer]") {
  CHECK_FALSE(flashkv::tokenizer::find_split_pattern(R"(\p{N}{1,2})").has_value());
  CHECK_FALSE(flashkv::tokenizer::find_split_pattern(kWords + "|x").has_value());
}

namespace {

// A byte-level tokenizer with the DeepSeek pre-tokenizer, the 256 byte tokens (id = byte value, in the
// byte-level alphabet), merges that build multi-byte UTF-8 tokens, and two added tokens.
std::string tiny_tokenizer_json() {
  auto byte_char = [](int b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int next = 0x100;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++next;
    }
    const int cp = printable ? b : next;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  auto escaped = [](const std::string& s) {
    std::string out;
    for (const char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  std::string vocab;
  for (int b = 0; b < 256; ++b) vocab += "\"" + escaped(byte_char(b)) + "\": " + std::to_string(b) + ", ";
  // 你 = E4 BD A0, 好 = E5 A5 BD: tokens E4BD (256), E4BDA0 (257), A5BD (258)
  const std::string e4 = byte_char(0xE4), bd = byte_char(0xBD), a0 = byte_char(0xA0), a5 = byte_char(0xA5);
  vocab += "\"" + e4 + bd + "\": 256, \"" + e4 + bd + a0 + "\": 257, \"" + a5 + bd + "\": 258";
  const std::string merges =
      "[\"" + e4 + " " + bd + "\", \"" + e4 + bd + " " + a0 + "\", \"" + a5 + " " + bd + "\"]";
  auto split = [&](const std::string& regex) {
    std::string json_regex;
    for (const char c : regex) {
      if (c == '"' || c == '\\') json_regex += '\\';
      if (c == '\r')
        json_regex += "\\r";
      else if (c == '\n')
        json_regex += "\\n";
      else
        json_regex += c;
    }
    return R"({"type": "Split", "pattern": {"Regex": ")" + json_regex +
           R"("}, "behavior": "Isolated", "invert": false})";
  };
  return R"({"version": "1.0", "normalizer": null, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [)" +
         split(kNumbers) + ", " + split(kWords) +
         R"(, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
      "decoder": {"type": "ByteLevel"},
      "added_tokens": [{"id": 259, "content": "<s>", "special": true, "normalized": false},
                       {"id": 260, "content": "<think>", "special": false, "normalized": false}],
      "model": {"type": "BPE", "vocab": {)" +
         vocab + R"(}, "merges": )" + merges + "}}";
}

const flashkv::Tokenizer& tiny() {
  static const flashkv::Tokenizer t =
      flashkv::Tokenizer::from_json(tiny_tokenizer_json(), R"({"bos_token": "<s>"})");
  return t;
}

}  // namespace

TEST_CASE("tokenizer loads a small tokenizer.json and round-trips text", "[tokenizer]") {
  const flashkv::Tokenizer& t = tiny();
  CHECK(t.vocab_size() == 261);
  CHECK(t.bos_id() == 259);
  CHECK_FALSE(t.eos_id().has_value());
  CHECK(t.special_ids() == std::vector<int32_t>{259});
  CHECK(t.encode("你好") == std::vector<int32_t>{257, 0xE5, 258});
  CHECK(t.encode("<s>x<think>") ==
        std::vector<int32_t>{'<', 's', '>', 'x', '<', 't', 'h', 'i', 'n', 'k', '>'});
  CHECK(t.encode("<s>x<think>", true) == std::vector<int32_t>{259, 'x', 260});
  CHECK(t.decode(std::vector<int32_t>{259, 'x', 260}, true) == "x<think>");
  const std::string text = "héllo, 你好 wörld!\n\n  42";
  CHECK(t.decode(t.encode(text)) == text);
}

TEST_CASE("tokenizer detokenizer streams exactly decode's text, never half a character", "[tokenizer]") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 gen(seed);
  const flashkv::Tokenizer& t = tiny();
  // ids biased towards the bytes and tokens of multi-byte characters, so cuts inside characters are common
  const std::vector<int32_t> pool = {0xE4, 0xBD, 0xA0, 0xE5, 0xA5, 0xF0, 0x9F, 0x98, 0x80, 0xC3,
                                     0xA9, 0xED, 0xFF, 'a',  ' ',  256,  257,  258,  259,  260};
  for (int round = 0; round < 500; ++round) {
    const bool skip_special = gen() % 2 == 0;
    std::vector<int32_t> ids;
    flashkv::Detokenizer stream(t, skip_special);
    std::string streamed;
    const std::size_t length = 1 + gen() % 16;
    for (std::size_t i = 0; i < length; ++i) {
      ids.push_back(pool[gen() % pool.size()]);
      const std::string piece = stream.push(ids.back());
      streamed += piece;
      CHECK(stream.pending_bytes() <= 3);
      // what came out so far is what decode gives for the ids so far, less the held bytes' U+FFFD
      const std::string so_far = t.decode(ids, skip_special);
      CHECK(so_far.compare(0, streamed.size(), streamed) == 0);
      CHECK(t.decode(std::vector<int32_t>{}, skip_special).empty());
    }
    streamed += stream.flush();
    CHECK(stream.pending_bytes() == 0);
    CHECK(streamed == t.decode(ids, skip_special));
  }
}

TEST_CASE("tokenizer shared by threads encodes as it does alone", "[tokenizer]") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 gen(seed);
  const flashkv::Tokenizer shared = flashkv::Tokenizer::from_json(tiny_tokenizer_json());  // fresh word cache
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) texts.push_back(random_ascii(gen, 200) + "你好 ¿qué?");
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts) expected.push_back(tiny().encode(text));
  std::vector<std::vector<std::vector<int32_t>>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (const std::string& text : texts) got[t].push_back(shared.encode(text));
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& results : got) CHECK(results == expected);
}

TEST_CASE("tokenizer errors carry their codes", "[tokenizer]") {
  auto code_of = [](auto&& body) {
    try {
      body();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kOk;
  };
  CHECK(code_of([] { flashkv::Tokenizer::load("/nonexistent/dir"); }) == ErrorCode::kNotFound);
  CHECK(code_of([] { flashkv::Tokenizer::from_json("{not json"); }) == ErrorCode::kInvalidCheckpoint);
  std::string bad_regex = tiny_tokenizer_json();
  bad_regex.replace(bad_regex.find("{1,3}"), 5, "{1,4}");
  CHECK(code_of([&] { flashkv::Tokenizer::from_json(bad_regex); }) == ErrorCode::kUnsupported);
  CHECK(code_of([] { (void)tiny().decode(std::vector<int32_t>{261}); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { (void)tiny().id_to_token(-1); }) == ErrorCode::kInvalidArgument);
  flashkv::Detokenizer stream(tiny());
  CHECK(stream.push(0xE4).empty());
  CHECK(code_of([&] { stream.push(999); }) == ErrorCode::kInvalidArgument);
  CHECK(stream.pending_bytes() == 1);  // a bad id leaves the held bytes alone
  CHECK(stream.push(std::vector<int32_t>{0xBD, 0xA0}) == "你");
}
