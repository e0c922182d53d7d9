// What every GPU test reads from its environment: the run's scale (FLASHKV_TEST_SCALE=small shrinks cases for
// compute-sanitizer runs) and a fresh random seed per case (printed by the tests, so a failure reproduces).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace flashkv::test {

inline bool small_scale() {
  const char* scale = std::getenv("FLASHKV_TEST_SCALE");
  return scale != nullptr && std::string(scale) == "small";
}

inline uint64_t fresh_seed() {
  std::random_device device;
  const auto ticks =
      static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^ ticks;
}

}  // namespace flashkv::test
