// flashkv::Tokenizer — the byte-level BPE tokenizer of a checkpoint, loaded from a Hugging Face
// tokenizer.json (+ tokenizer_config.json), and flashkv::Detokenizer, its streaming inverse.
//
// Contract: encode() returns the ids Hugging Face `tokenizers` returns for the same tokenizer.json
// (Tokenizer.encode(text).ids, no post-processor tokens: BOS is the caller's, e.g. the chat encoder's):
//   - allow_special = true: every added token of the file (special or not: <｜User｜>, <think>, ...) is
//     recognised in the text, leftmost-longest, exactly as `tokenizers` does by default.
//   - allow_special = false (default): no added token is recognised; the text is encoded as plain text
//     (what `tokenizers` gives with the added_tokens list removed), so user text cannot inject control
//     tokens.
//   - invalid UTF-8 in the input is first replaced by U+FFFD, one per maximal invalid subpart (what Python's
//     bytes.decode("utf-8", "replace") gives), then encoded; decode(encode(x)) == x for valid UTF-8 x.
// decode() concatenates the tokens' bytes and returns valid UTF-8, with U+FFFD for each maximal invalid
// subpart (what `tokenizers` decode gives, via Rust's String::from_utf8_lossy); decode_bytes() returns the
// raw bytes. Supported tokenizer.json: model BPE (vocab + merges, optional ignore_merges), normalizer null or
// an empty Sequence, pre_tokenizer a Sequence of Split (regexes of the DeepSeek V3/V4 tokenizer, Isolated)
// and ByteLevel (use_regex false), decoder ByteLevel; anything else fails with kUnsupported.
//
// Ownership and threading: a Tokenizer is immutable after load; copies share the same state (cheap) and every
// const member is safe to call from any number of threads at once. A Detokenizer holds a copy of its
// Tokenizer (it may outlive the original) and is used by one thread at a time.
//
// Errors: flashkv::Error — kNotFound (no tokenizer.json at the path), kIo (unreadable), kInvalidCheckpoint
// (malformed JSON or inconsistent vocab/merges), kUnsupported (a model, normalizer, pre-tokenizer or regex
// this implementation does not handle; the message names it), kInvalidArgument (an id outside [0,
// vocab_size()) or not assigned to a token; a text of 2 GB or more in one encode call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashkv {

namespace tokenizer {
struct TokenizerData;  // lib/tokenizer: the loaded tables
}

class Tokenizer {
 public:
  // `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json, which gives the BOS
  // and EOS tokens), or a tokenizer.json file itself (then tokenizer_config.json is looked up beside it).
  static Tokenizer load(const std::filesystem::path& path);
  // The same from the files' contents; `tokenizer_config_json` may be empty (no BOS/EOS then).
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json = {});

  // Token ids of `text` (see the contract above for allow_special and invalid UTF-8).
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  // The same, appended to `out` (reuses the caller's buffer).
  void encode_into(std::string_view text, std::vector<int32_t>& out, bool allow_special = false) const;

  // Text of `ids` as valid UTF-8 (lossy, see above). skip_special drops the tokens marked special in
  // tokenizer.json (BOS, EOS, pad, ...; not <｜User｜> or <think>, which the file marks non-special).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The raw bytes of `ids` (may be invalid UTF-8 when cut inside a character).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special = false) const;

  // The vocabulary string of a token (byte-level form for BPE tokens, e.g. "Ġthe"; the content for added
  // tokens), and back. token_to_id returns nullopt for an unknown string.
  std::string id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // Number of token ids: 1 + the largest id of the vocabulary and the added tokens (129280 for DeepSeek V4).
  int32_t vocab_size() const;
  // From tokenizer_config.json's bos_token / eos_token; nullopt when absent.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // Added tokens (matched whole in text when allow_special) and the subset marked "special": true.
  bool is_added(int32_t id) const;
  bool is_special(int32_t id) const;
  std::vector<int32_t> special_ids() const;  // ascending

 private:
  explicit Tokenizer(std::shared_ptr<const tokenizer::TokenizerData> data);
  std::shared_ptr<const tokenizer::TokenizerData> data_;
  friend class Detokenizer;
};

// Streaming detokenization: push ids as they are generated and get the text they complete. Bytes that end in
// the middle of a UTF-8 character are held until the character is complete, so no output ever holds half a
// character; bytes that can never become valid come out as U+FFFD at once. The concatenation of every push()
// and a final flush() equals Tokenizer::decode of all the ids (same skip_special).
class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tokenizer, bool skip_special = false);

  // The text completed by `id` (often empty, never half a character). Throws kInvalidArgument on a bad id
  // (the held bytes are kept).
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  // Ends the stream: the held bytes as U+FFFD (one per maximal invalid subpart), then starts afresh.
  std::string flush();
  // Bytes held back, waiting for the rest of a character (0..3).
  std::size_t pending_bytes() const noexcept { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace flashkv
