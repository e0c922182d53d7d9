// The BPE model: a pre-tokenized piece's bytes, one initial symbol per byte, merged pair by pair in rank
// order into vocabulary ids -- the algorithm of tokenizers' BPE (Word::merge_all), so that ties and
// overlapping pairs resolve identically: always the lowest rank first, leftmost among equal ranks.
// Threading: immutable; encode_word() is const, scratch belongs to the caller.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/merge_table.hpp"

namespace flashkv::tokenizer {

struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // -1: none
    int32_t next;  // -1: none
    bool removed;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  BpeModel() = default;
  // byte_ids[b]: the id of the one-byte token b, -1 if the vocabulary lacks it (such bytes are dropped, as
  // tokenizers does without an unk token). whole_words: ids of the vocabulary by their bytes, consulted
  // first when ignore_merges (tokenizers' option: a piece that is a token is not merged up).
  BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, bool ignore_merges,
           std::unordered_map<std::string, int32_t> whole_words);

  // Appends the ids of one piece.
  void encode_word(std::string_view bytes, std::vector<int32_t>& out, BpeScratch& scratch) const;

 private:
  std::array<int32_t, 256> byte_ids_{};
  MergeTable merges_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> whole_words_;
};

}  // namespace flashkv::tokenizer
