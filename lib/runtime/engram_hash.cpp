#include "runtime/engram_hash.hpp"

#include <fstream>
#include <limits>
#include <sstream>

#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "runtime/numpy_random.hpp"

namespace flashkv::runtime {
namespace {

constexpr int64_t kMultiplierSeed = 10007;

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t pow_mod(uint64_t base, uint64_t exponent, uint64_t m) {
  uint64_t result = 1;
  base %= m;
  for (; exponent != 0; exponent >>= 1) {
    if (exponent & 1u) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
  }
  return result;
}

// Deterministic Miller-Rabin, exact for every 64-bit n with these bases.
bool is_prime(uint64_t n) {
  if (n < 2) return false;
  constexpr uint64_t kBases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  for (const uint64_t p : kBases) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  for (; d % 2 == 0; d /= 2) ++s;
  for (const uint64_t a : kBases) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = mul_mod(x, x, n);
      composite = x != n - 1;
    }
    if (composite) return false;
  }
  return true;
}

}  // namespace

std::vector<int64_t> engram_multipliers(int64_t compressed_vocab_size, int layer_id, int64_t max_ngram_size) {
  const int64_t bound =
      std::max<int64_t>(1, (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2);
  std::vector<int64_t> draws = numpy_default_rng_integers(static_cast<uint64_t>(kMultiplierSeed * layer_id),
                                                          bound, static_cast<int>(max_ngram_size));
  for (int64_t& value : draws) value = value * 2 + 1;
  return draws;
}

EngramHasher::EngramHasher(const ModelConfig& config, std::vector<int64_t> token_map)
    : token_map_(std::move(token_map)),
      max_ngram_(config.engram_max_ngram_size),
      heads_(config.engram_n_heads),
      columns_((config.engram_max_ngram_size - 1) * config.engram_n_heads) {
  if (config.engram_layer_ids.empty()) return;
  pad_ = token_map_.at(static_cast<size_t>(config.engram_pad_token_id));
  int64_t candidate = config.engram_vocab_size;
  for (size_t slot = 0; slot < config.engram_layer_ids.size(); ++slot) {
    Layer layer;
    layer.multipliers =
        engram_multipliers(config.engram_compressed_vocab_size, config.engram_layer_ids[slot], max_ngram_);
    int64_t offset = 0;
    while (static_cast<int64_t>(layer.primes.size()) < columns_) {
      if (is_prime(static_cast<uint64_t>(candidate))) {
        layer.primes.push_back(candidate);
        layer.offsets.push_back(offset);
        offset += candidate;
      }
      ++candidate;
    }
    if (slot >= config.engram_num_embeddings.size() || offset != config.engram_num_embeddings[slot]) {
      fail(ErrorCode::kInvalidConfig,
           "engram_num_embeddings[{}] must be {} (the sum of the layer's prime column sizes, spec §7)", slot,
           offset);
    }
    layers_.push_back(std::move(layer));
  }
}

std::vector<int64_t> EngramHasher::ngram_ids(std::span<const int32_t> previous,
                                             std::span<const int32_t> tokens) const {
  const int64_t lead = max_ngram_ - 1;
  std::vector<int64_t> extended(static_cast<size_t>(lead), pad_);
  const size_t kept = std::min(previous.size(), static_cast<size_t>(lead));
  for (size_t i = 0; i < kept; ++i) {
    extended[static_cast<size_t>(lead) - kept + i] =
        token_map_[static_cast<size_t>(previous[previous.size() - kept + i])];
  }
  for (const int32_t token : tokens) extended.push_back(token_map_[static_cast<size_t>(token)]);
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> out(static_cast<size_t>(n * max_ngram_));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < max_ngram_; ++k)
      out[static_cast<size_t>(t * max_ngram_ + k)] = extended[static_cast<size_t>(lead + t - k)];
  }
  return out;
}

std::vector<int64_t> EngramHasher::table_rows(int slot, std::span<const int64_t> ngrams, int64_t rows) const {
  const Layer& layer = layers_.at(static_cast<size_t>(slot));
  std::vector<int64_t> out(static_cast<size_t>(rows * columns_));
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t* ids = ngrams.data() + t * max_ngram_;
    int64_t hash = ids[0] * layer.multipliers[0];
    for (int64_t size = 2; size <= max_ngram_; ++size) {
      hash ^= ids[size - 1] * layer.multipliers[static_cast<size_t>(size - 1)];
      for (int64_t e = 0; e < heads_; ++e) {
        const size_t col = static_cast<size_t>((size - 2) * heads_ + e);
        out[static_cast<size_t>(t * columns_) + col] = hash % layer.primes[col] + layer.offsets[col];
      }
    }
  }
  return out;
}

std::vector<int64_t> load_engram_token_map(const std::filesystem::path& checkpoint_dir,
                                           const ModelConfig& config) {
  if (config.engram_layer_ids.empty()) return {};
  const std::filesystem::path file = checkpoint_dir / kEngramTokenMapFile;
  std::vector<int64_t> map;
  if (!std::filesystem::is_regular_file(file)) {
    for (int64_t id = 0; id < config.vocab_size; ++id)
      map.push_back(id % config.engram_compressed_vocab_size);
    return map;
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) fail(ErrorCode::kIo, "cannot read the Engram token map '{}'", file.string());
  const nlohmann::json document = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!document.is_array() || static_cast<int64_t>(document.size()) != config.vocab_size) {
    fail(ErrorCode::kInvalidCheckpoint,
         "Engram token map '{}' must be a JSON list of {} ids (one per vocab id)", file.string(),
         config.vocab_size);
  }
  for (const auto& entry : document) {
    if (!entry.is_number_integer() || entry.get<int64_t>() < 0 ||
        entry.get<int64_t>() >= config.engram_compressed_vocab_size) {
      fail(ErrorCode::kInvalidCheckpoint, "Engram token map '{}': entry {} is not an id in [0, {})",
           file.string(), map.size(), config.engram_compressed_vocab_size);
    }
    map.push_back(entry.get<int64_t>());
  }
  return map;
}

}  // namespace flashkv::runtime
