// Checks kv_write_records.cuh RecordPages::address: page = mulhi64(ceil(2^64/d), n) (Lemire-Kaser-Kurz) against
// floor(n/d), for 32-bit n and 2 <= d < 2^32.
// Cases: ~9.5·10^7 (small d exhaustive-ish, random d/n, multiples of d and ±1, d near 2^32).
// Expected: "<N> checks, 0 bad".
#include <cstdio>
#include <cstdint>
#include <random>
static uint64_t mulhi(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }
int main() {
  std::mt19937_64 g(7); uint64_t bad = 0, n_checks = 0;
  auto check = [&](uint64_t d, uint64_t n) {
    const uint64_t m = ~uint64_t{0} / d + 1; ++n_checks;
    if (mulhi(m, n) != n / d) { if (bad++ < 5) std::printf("d %llu n %llu\n", (unsigned long long)d, (unsigned long long)n); }
  };
  for (uint64_t d = 2; d < 5000; ++d) for (uint64_t k = 0; k < 2000; ++k) { check(d, g() & 0xffffffffu); check(d, 0xffffffffu - k); check(d, k * d - (k ? 1 : 0)); check(d, k * d); }
  for (int i = 0; i < 20000000; ++i) { uint64_t d = (g() >> (g() % 62)) & 0xffffffffu; if (d < 2) continue; uint64_t n = g() & 0xffffffffu; check(d, n); check(d, (n / d) * d); if ((n / d) * d != 0) check(d, (n / d) * d - 1); }
  for (uint64_t d = 0xffffff00u; d <= 0xffffffffu; ++d) for (uint64_t k = 0; k < 1000; ++k) { check(d, 0xffffffffu - k); check(d, d - 1); check(d, d); }
  std::printf("%llu checks, %llu bad\n", (unsigned long long)n_checks, (unsigned long long)bad);
}
