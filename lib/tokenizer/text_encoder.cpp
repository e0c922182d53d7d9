// The encode pipeline. Added tokens cut the text first (they are never split by the pre-tokenizer); each
// remaining segment is pre-tokenized on its own and each piece goes through BPE, or the cache.
#include "tokenizer/text_encoder.hpp"

#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>

#include <flashkv/error.hpp>

#include "tokenizer/utf8.hpp"

namespace flashkv::tokenizer {
namespace {

class Encoder {
 public:
  Encoder(const TokenizerData& data, std::vector<int32_t>& out) : data_(data), out_(out) {}

  // Added tokens of `matcher` cut `text`; the gaps go to `gap` (a member function of this class).
  template <typename Gap>
  void cut(const AddedTokenMatcher& matcher, std::string_view text, Gap gap) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      const AddedMatch match = matcher.find(text, pos);
      if (match.begin > pos) (this->*gap)(text.substr(pos, match.begin - pos));
      if (match.id < 0) break;
      out_.push_back(match.id);
      pos = match.end;
    }
  }

  void normalized_gap(std::string_view text) { cut(data_.added_normalized, text, &Encoder::plain); }

  void plain(std::string_view text) {
    data_.pre_tokenizer.split(text, pieces_, pre_scratch_);
    for (const Piece& piece : pieces_) word(text.substr(piece.first, piece.second - piece.first));
  }

 private:
  // Per-call cache first (no lock), then the tokenizer's shared cache, then BPE.
  void word(std::string_view bytes) {
    const auto [it, inserted] = cache_.try_emplace(bytes, 0, 0);
    if (!inserted) {
      out_.insert(out_.end(), cached_.begin() + it->second.first,
                  cached_.begin() + it->second.first + it->second.second);
      return;
    }
    const std::size_t before = out_.size();
    if (!data_.word_cache->lookup(bytes, out_)) {
      data_.bpe.encode_word(bytes, out_, bpe_scratch_);
      data_.word_cache->insert(bytes, std::span<const int32_t>(out_).subspan(before));
    }
    it->second = {static_cast<uint32_t>(cached_.size()), static_cast<uint32_t>(out_.size() - before)};
    cached_.insert(cached_.end(), out_.begin() + static_cast<std::ptrdiff_t>(before), out_.end());
  }

  const TokenizerData& data_;
  std::vector<int32_t>& out_;
  std::vector<Piece> pieces_;
  PreTokenizerScratch pre_scratch_;
  BpeScratch bpe_scratch_;
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache_;  // piece -> cached_ range
  std::vector<int32_t> cached_;
};

}  // namespace

void encode_text(const TokenizerData& data, std::string_view text, bool allow_special,
                 std::vector<int32_t>& out) {
  // Piece offsets are 32-bit (half the scratch memory); 4 GB in one call is beyond any prompt.
  if (text.size() >= std::numeric_limits<uint32_t>::max() / 2) {
    fail(ErrorCode::kInvalidArgument, "encode: text of {} bytes is too long for one call (split it)",
         text.size());
  }
  std::string repaired;
  if (!is_valid_utf8(text)) {
    append_lossy_utf8(repaired, text);
    text = repaired;
  }
  Encoder encoder(data, out);
  if (allow_special) {
    encoder.cut(data.added_raw, text, &Encoder::normalized_gap);
  } else {
    encoder.plain(text);
  }
}

}  // namespace flashkv::tokenizer
