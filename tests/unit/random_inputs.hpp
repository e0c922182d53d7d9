// Fresh random inputs for the backend tests: a seed from the clock (CAPTURE it, so a failure can be replayed)
// and normal fp32 vectors.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

namespace flashkv::testing {

inline uint64_t fresh_seed() {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

inline std::vector<float> normal(std::mt19937_64& gen, size_t n, float sd = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> out(n);
  for (float& x : out) x = dist(gen);
  return out;
}

}  // namespace flashkv::testing
