// Engram hashing (spec §7 steps 1-5): token map, hash multipliers, prime-sized table columns, and the table
// rows of every new position. Host-side int64 work, as in the reference (tests/reference/engram.py).
//
// Token map: `engram_token_map.json` in the checkpoint directory (a JSON list, vocab id -> compressed id,
// built from the tokenizer) when present; else c = id mod engram_compressed_vocab_size (the tiny-checkpoint
// rule, §12). Multipliers: numpy PCG64 default_rng(10007·layer).integers(0, bound, max_ngram_size), then
// 2x+1, with bound = (int64_max // compressed_vocab) // 2 (numpy_random.hpp reproduces numpy's stream).
// Primes: consecutive primes >= engram_vocab_size, handed out layer by layer (engram_layer_ids order), column
// col = (n−2)·heads + e; offsets are exclusive prefix sums and must add up to engram_num_embeddings.
// Errors: kInvalidCheckpoint naming the token-map file; kInvalidConfig when the table sizes break the prime
// rule. Threading: immutable after construction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include <flashkv/config.hpp>

namespace flashkv::runtime {

inline constexpr const char* kEngramTokenMapFile = "engram_token_map.json";

class EngramHasher {
 public:
  EngramHasher() = default;
  EngramHasher(const ModelConfig& config, std::vector<int64_t> token_map);

  bool enabled() const { return !layers_.empty(); }
  int64_t max_ngram() const { return max_ngram_; }
  int64_t columns() const { return columns_; }

  // [tokens.size(), max_ngram]: column k = compressed id of position t−k; `previous` are the ids before the
  // run (only their last max_ngram−1 matter), the pad id stands for positions before the sequence start.
  std::vector<int64_t> ngram_ids(std::span<const int32_t> previous, std::span<const int32_t> tokens) const;

  // [rows, columns] table rows of Engram slot `slot` for the n-gram ids of `rows` positions.
  std::vector<int64_t> table_rows(int slot, std::span<const int64_t> ngrams, int64_t rows) const;

  std::span<const int64_t> multipliers(int slot) const {
    return layers_.at(static_cast<size_t>(slot)).multipliers;
  }
  std::span<const int64_t> primes(int slot) const { return layers_.at(static_cast<size_t>(slot)).primes; }

 private:
  struct Layer {
    std::vector<int64_t> multipliers;  // [max_ngram]
    std::vector<int64_t> primes;       // [columns]
    std::vector<int64_t> offsets;      // [columns]
  };
  std::vector<int64_t> token_map_;
  std::vector<Layer> layers_;
  int64_t max_ngram_ = 0;
  int64_t heads_ = 0;
  int64_t columns_ = 0;
  int64_t pad_ = 0;
};

// The token map of a checkpoint directory (see above); empty when the config has no Engram layer.
std::vector<int64_t> load_engram_token_map(const std::filesystem::path& checkpoint_dir,
                                           const ModelConfig& config);

// numpy PCG64 multipliers of one Engram layer (spec §7 step 3).
std::vector<int64_t> engram_multipliers(int64_t compressed_vocab_size, int layer_id, int64_t max_ngram_size);

}  // namespace flashkv::runtime
