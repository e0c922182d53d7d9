// Scalar codecs (include/flashkv/numeric/scalar_codecs.hpp) against facts of the formats and against a
// brute-force oracle: the nearest value of the format's table, ties to the even code. Bit-exactness with
// ml_dtypes is checked in tests/python/test_formats_scalar.py.
#include <flashkv/numeric/scalar_codecs.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "catch.hpp"

namespace nm = flashkv::numeric;

namespace {

uint64_t fresh_seed() {
  return static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
}

float from_bits(uint32_t bits) {
  return nm::bits_to_float(bits);
}
uint32_t to_bits(float x) {
  return nm::float_to_bits(x);
}

// Positive finite values of an 8-bit-or-narrower format, indexed by code (NaN codes skipped by the caller).
struct Grid {
  std::vector<double> value;  // value[code] for codes 0..max_code
  int max_code;
};

Grid positive_grid(float (*decode)(uint8_t), int max_code) {
  Grid grid{{}, max_code};
  for (int code = 0; code <= max_code; ++code) grid.value.push_back(decode(static_cast<uint8_t>(code)));
  return grid;
}

// Nearest grid code to |x| (exact comparison in double), ties to the even code; -1 when |x| lies beyond
// the midpoint above the largest value (rounding overflows), or exactly on it with an odd largest code.
int nearest_code(const Grid& grid, double magnitude) {
  int best = 0;
  for (int code = 1; code <= grid.max_code; ++code) {
    const double d_best = std::fabs(magnitude - grid.value[best]);
    const double d = std::fabs(magnitude - grid.value[code]);
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  const double top = grid.value[grid.max_code];
  const double next_step = top - grid.value[grid.max_code - 1];
  const double overflow_mid = top + next_step / 2;
  if (magnitude > overflow_mid || (magnitude == overflow_mid && grid.max_code % 2 == 1)) return -1;
  return best;
}

std::vector<float> sample_floats(std::mt19937_64& gen, double lo_exp, double hi_exp, int n) {
  std::uniform_real_distribution<double> exponent(lo_exp, hi_exp);
  std::uniform_int_distribution<int> sign(0, 1);
  std::vector<float> xs;
  for (int i = 0; i < n; ++i) {
    const float x = static_cast<float>(std::exp2(exponent(gen)));
    xs.push_back(sign(gen) ? -x : x);
  }
  return xs;
}

// Midpoints between neighbours (exact in fp32 for these formats) and their fp32 neighbours.
std::vector<float> ties_of(const Grid& grid) {
  std::vector<float> xs;
  for (int code = 0; code < grid.max_code; ++code) {
    const float mid = static_cast<float>((grid.value[code] + grid.value[code + 1]) / 2);
    xs.insert(xs.end(), {mid, -mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
  }
  return xs;
}

}  // namespace

TEST_CASE("E4M3 facts: range, ties, overflow to NaN, signed zeros, specials") {
  CHECK(nm::e4m3_to_float(0x7E) == 448.0f);
  CHECK(nm::e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
  CHECK(nm::e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(nm::e4m3_to_float(0xB8) == -1.0f);
  CHECK(std::isnan(nm::e4m3_to_float(0x7F)));
  CHECK(std::isnan(nm::e4m3_to_float(0xFF)));
  CHECK(to_bits(nm::e4m3_to_float(0x80)) == 0x80000000u);
  CHECK(nm::e4m3_from_float(448.0f) == 0x7E);
  CHECK(nm::e4m3_from_float(464.0f) == 0x7E);  // the tie with the missing 480 goes to the even 448
  CHECK(nm::e4m3_from_float(std::nextafter(464.0f, 1e9f)) == 0x7F);
  CHECK(nm::e4m3_from_float(-1e30f) == 0xFF);
  CHECK(nm::e4m3_from_float(std::numeric_limits<float>::infinity()) == 0x7F);
  CHECK(nm::e4m3_from_float(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(nm::e4m3_from_float(-0.0f) == 0x80);
  CHECK(nm::e4m3_from_float(std::ldexp(1.0f, -10)) == 0x00);      // tie 0 / 2^-9 -> even 0
  CHECK(nm::e4m3_from_float(3 * std::ldexp(1.0f, -10)) == 0x02);  // tie 2^-9 / 2^-8 -> even code 2
  CHECK(nm::e4m3_from_float(1.0625f) == 0x38);                    // tie 1 / 1.125 -> even 1
  CHECK(nm::e4m3_from_float(1.1875f) == 0x3A);                    // tie 1.125 / 1.25 -> even 1.25
  CHECK(nm::e4m3_from_float_satfinite(1e30f) == 0x7E);
  CHECK(nm::e4m3_from_float_satfinite(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(nm::e4m3_from_float_satfinite(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
}

TEST_CASE("E2M1 facts: the grid, ties to even, saturation, NaN stand-in") {
  const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 8; ++code) {
    CHECK(nm::e2m1_to_float(code) == grid[code]);
    CHECK(nm::e2m1_to_float(static_cast<uint8_t>(code | 0x8)) == -grid[code]);
    CHECK(nm::e2m1_to_float(static_cast<uint8_t>(code | 0xF0)) == grid[code]);  // high nibble ignored
  }
  const float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t even[7] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    CHECK(nm::e2m1_from_float(ties[i]) == even[i]);
    CHECK(nm::e2m1_from_float(-ties[i]) == (even[i] | 0x8));
  }
  CHECK(nm::e2m1_from_float(7.0f) == 0x7);
  CHECK(nm::e2m1_from_float(-1e30f) == 0xF);
  CHECK(nm::e2m1_from_float(-std::numeric_limits<float>::infinity()) == 0xF);
  CHECK(nm::e2m1_from_float(-0.0f) == 0x8);
  CHECK(nm::e2m1_from_float(-0.1f) == 0x8);
  CHECK(nm::e2m1_from_float(std::numeric_limits<float>::quiet_NaN()) == 0x8);
  CHECK(nm::e2m1_from_float(-std::numeric_limits<float>::quiet_NaN()) == 0x0);
}

TEST_CASE("E8M0 facts: powers of two, rounding up from 1.5, no zero, no sign") {
  CHECK(nm::e8m0_to_float(127) == 1.0f);
  CHECK(nm::e8m0_to_float(0) == std::ldexp(1.0f, -127));
  CHECK(nm::e8m0_to_float(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(nm::e8m0_to_float(255)));
  CHECK(nm::e8m0_from_float(1.0f) == 127);
  CHECK(nm::e8m0_from_float(1.4999999f) == 127);
  CHECK(nm::e8m0_from_float(1.5f) == 128);
  CHECK(nm::e8m0_from_float(0.75f) == 127);
  CHECK(nm::e8m0_from_float(0.0f) == 0xFF);
  CHECK(nm::e8m0_from_float(-1.0f) == 0xFF);
  CHECK(nm::e8m0_from_float(3e38f) == 0xFF);
  CHECK(nm::e8m0_ceil_pow2(1.0f) == 127);
  CHECK(nm::e8m0_ceil_pow2(std::nextafter(1.0f, 2.0f)) == 128);
  CHECK(nm::e8m0_ceil_pow2(0.75f) == 127);
  CHECK(nm::e8m0_ceil_pow2(0.5f) == 126);
  CHECK(nm::e8m0_ceil_pow2(0.0f) == 0);
  CHECK(nm::e8m0_ceil_pow2(std::numeric_limits<float>::infinity()) == 0xFF);
}

TEST_CASE("BF16 facts: ties to even, NaN quieted with its sign") {
  CHECK(nm::bf16_from_float(1.0f) == 0x3F80);
  CHECK(nm::bf16_from_float(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie -> even
  CHECK(nm::bf16_from_float(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie -> even
  CHECK(nm::bf16_from_float(from_bits(0x7F800001u)) == 0x7FC0);
  CHECK(nm::bf16_from_float(from_bits(0xFFA00000u)) == 0xFFC0);
  CHECK(nm::bf16_from_float(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(nm::bf16_to_float(0xC040) == -3.0f);
}

TEST_CASE("E4M3 and E2M1 encoders pick the nearest table value, ties to the even code") {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 gen(seed);
  struct Case {
    const char* name;
    uint8_t (*encode)(float);
    Grid grid;
    uint8_t sign_bit;
    bool overflow_is_nan;
  };
  const Case cases[] = {
      {"e4m3", nm::e4m3_from_float, positive_grid(nm::e4m3_to_float, 0x7E), 0x80, true},
      {"e2m1", nm::e2m1_from_float, positive_grid(nm::e2m1_to_float, 0x7), 0x8, false},
  };
  for (const Case& c : cases) {
    std::vector<float> xs = sample_floats(gen, -14, 11, 20000);
    const std::vector<float> ties = ties_of(c.grid);
    xs.insert(xs.end(), ties.begin(), ties.end());
    int mismatches = 0;
    for (const float x : xs) {
      const int nearest = nearest_code(c.grid, std::fabs(static_cast<double>(x)));
      const uint8_t magnitude_code = nearest >= 0
                                         ? static_cast<uint8_t>(nearest)
                                         : static_cast<uint8_t>(c.overflow_is_nan ? 0x7F : c.grid.max_code);
      const uint8_t want = static_cast<uint8_t>(magnitude_code | (std::signbit(x) ? c.sign_bit : 0));
      if (c.encode(x) != want && ++mismatches <= 3) {
        std::fprintf(stderr, "%s(%a) = %#x, nearest %#x (seed %llu)\n", c.name, static_cast<double>(x),
                     c.encode(x), want, static_cast<unsigned long long>(seed));
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("BF16 encoder rounds to the nearer of the two bracketing BF16 values, ties to even") {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<uint32_t> any_bits;
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = any_bits(gen);
    if (i % 4 == 0) bits = (bits & 0xFFFF0000u) | 0x8000u;  // exact tie
    const float x = from_bits(bits);
    if (!std::isfinite(x)) continue;
    const uint32_t below = bits & 0xFFFF0000u;  // truncation toward zero
    const uint32_t above = below + 0x10000u;    // next BF16 away from zero (may be Inf)
    // Past the largest BF16 the next value up is the overflow threshold's power of two, ±2^128 (then Inf).
    const double above_value = (above & 0x7F800000u) == 0x7F800000u ? std::copysign(std::ldexp(1.0, 128), x)
                                                                    : static_cast<double>(from_bits(above));
    const double d_below = std::fabs(static_cast<double>(x) - static_cast<double>(from_bits(below)));
    const double d_above = std::fabs(above_value - static_cast<double>(x));
    const bool take_above = d_above < d_below || (d_above == d_below && ((below >> 16) & 1u) != 0);
    const uint16_t want = static_cast<uint16_t>((take_above ? above : below) >> 16);
    if (nm::bf16_from_float(x) != want && ++mismatches <= 3) {
      std::fprintf(stderr, "bf16(%a) = %#x, want %#x (seed %llu)\n", static_cast<double>(x),
                   nm::bf16_from_float(x), want, static_cast<unsigned long long>(seed));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("every non-NaN code survives decode then encode") {
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<uint8_t>(code);
    if ((c & 0x7F) != 0x7F) CHECK(nm::e4m3_from_float(nm::e4m3_to_float(c)) == c);
    if (c < 0xFF) CHECK(nm::e8m0_from_float(nm::e8m0_to_float(c)) == c);
    if (c < 0xFF) CHECK(nm::e8m0_ceil_pow2(nm::e8m0_to_float(c)) == c);
    if (c < 16) CHECK(nm::e2m1_from_float(nm::e2m1_to_float(c)) == c);
  }
  int bf16_mismatches = 0;
  for (uint32_t code = 0; code < 65536; ++code) {
    const auto c = static_cast<uint16_t>(code);
    const float x = nm::bf16_to_float(c);
    if (!std::isnan(x) && nm::bf16_from_float(x) != c) ++bf16_mismatches;
  }
  CHECK(bf16_mismatches == 0);
}
