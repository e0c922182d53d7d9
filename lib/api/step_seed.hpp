// Seeds of single sampling steps. A session's draw at position p uses a
// generator seeded from (seed, p) only, so the stream does not depend on how
// calls were split, and forks, restores, rewinds and batched decode replay the
// same draws as the original timeline.
#pragma once

#include <cstdint>

namespace flashkv::detail {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Distinct positions give unrelated seeds even for adjacent user seeds.
constexpr uint64_t step_seed(uint64_t seed, int64_t position) {
  return splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(position));
}

}  // namespace flashkv::detail
