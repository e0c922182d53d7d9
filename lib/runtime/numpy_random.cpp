#include "runtime/numpy_random.hpp"

#include <array>

#include <flashkv/error.hpp>

namespace flashkv::runtime {
namespace {

using u128 = unsigned __int128;

// SeedSequence constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

class SeedSequence {
 public:
  explicit SeedSequence(uint64_t seed) {
    std::vector<uint32_t> entropy;
    do {
      entropy.push_back(static_cast<uint32_t>(seed & 0xFFFFFFFFu));
      seed >>= 32;
    } while (seed != 0);
    uint32_t hash = kInitA;
    for (int i = 0; i < kPoolSize; ++i) {
      pool_[i] = hashmix(i < static_cast<int>(entropy.size()) ? entropy[static_cast<size_t>(i)] : 0u, hash);
    }
    for (int src = 0; src < kPoolSize; ++src) {
      for (int dst = 0; dst < kPoolSize; ++dst) {
        if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash));
      }
    }
    for (size_t src = kPoolSize; src < entropy.size(); ++src) {
      for (int dst = 0; dst < kPoolSize; ++dst) pool_[dst] = mix(pool_[dst], hashmix(entropy[src], hash));
    }
  }

  // generate_state(words / 2, uint64): 32-bit words, paired little-endian.
  std::array<uint64_t, 4> state128x2() const {
    uint32_t hash = kInitB;
    std::array<uint32_t, 8> words{};
    for (int i = 0; i < 8; ++i) {
      uint32_t value = pool_[i % kPoolSize];
      value ^= hash;
      hash *= kMultB;
      value *= hash;
      value ^= value >> kXShift;
      words[static_cast<size_t>(i)] = value;
    }
    std::array<uint64_t, 4> out{};
    for (size_t i = 0; i < 4; ++i) out[i] = words[2 * i] | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
    return out;
  }

 private:
  static uint32_t hashmix(uint32_t value, uint32_t& hash) {
    value ^= hash;
    hash *= kMultA;
    value *= hash;
    value ^= value >> kXShift;
    return value;
  }
  static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = kMixMultL * x - kMixMultR * y;
    result ^= result >> kXShift;
    return result;
  }

  std::array<uint32_t, kPoolSize> pool_{};
};

class Pcg64 {
 public:
  explicit Pcg64(const SeedSequence& seeds) {
    const std::array<uint64_t, 4> words = seeds.state128x2();
    const u128 initial_state = (static_cast<u128>(words[0]) << 64) | words[1];
    const u128 sequence = (static_cast<u128>(words[2]) << 64) | words[3];
    increment_ = (sequence << 1) | 1u;
    state_ = 0;
    step();
    state_ += initial_state;
    step();
  }

  uint64_t next() {
    step();
    const uint64_t folded = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    const unsigned rotation = static_cast<unsigned>(state_ >> 122);
    return (folded >> rotation) | (folded << ((64u - rotation) & 63u));
  }

 private:
  static constexpr u128 kMultiplier =
      (static_cast<u128>(2549297995355413924ull) << 64) | 4865540595714422341ull;
  void step() { state_ = state_ * kMultiplier + increment_; }

  u128 state_ = 0;
  u128 increment_ = 0;
};

// Lemire's bounded draw in [0, range] (numpy bounded_lemire_uint64).
uint64_t bounded(Pcg64& generator, uint64_t range) {
  const uint64_t exclusive = range + 1;
  u128 product = static_cast<u128>(generator.next()) * exclusive;
  uint64_t leftover = static_cast<uint64_t>(product);
  if (leftover < exclusive) {
    const uint64_t threshold = (UINT64_MAX - range) % exclusive;
    while (leftover < threshold) {
      product = static_cast<u128>(generator.next()) * exclusive;
      leftover = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

}  // namespace

std::vector<int64_t> numpy_default_rng_integers(uint64_t seed, int64_t high, int count) {
  if (high <= (int64_t{1} << 32)) {
    fail(ErrorCode::kUnsupported, "numpy integers emulation: bound {} <= 2^32 uses numpy's 32-bit path",
         high);
  }
  Pcg64 generator{SeedSequence(seed)};
  std::vector<int64_t> out;
  for (int i = 0; i < count; ++i)
    out.push_back(static_cast<int64_t>(bounded(generator, static_cast<uint64_t>(high - 1))));
  return out;
}

}  // namespace flashkv::runtime
