// KV records and weight formats (include/flashkv/numeric/kv_records.hpp, weight_formats.hpp): sizes, layout,
// scale codes against the spec formulas evaluated in double, per-block round-trip error bounds on fresh
// random data, poisoned blocks. Byte equality with the numpy oracle is in
// tests/python/test_formats_records.py.
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/weight_formats.hpp>

#include <algorithm>
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

// Smallest k with 2^k >= t (t > 0), from log2 and corrected with exact ldexp comparisons.
int ceil_log2(double t) {
  int k = static_cast<int>(std::ceil(std::log2(t)));
  while (std::ldexp(1.0, k) < t) ++k;
  while (std::ldexp(1.0, k - 1) >= t) --k;
  return k;
}

// Nearest E4M3 code to t >= 0 (ties to the even code), by search over the table; 0x7F past 464.
uint8_t nearest_e4m3(double t) {
  if (t > 464.0) return 0x7F;
  int best = 0;
  for (int code = 1; code <= 0x7E; ++code) {
    const double d = std::fabs(t - nm::e4m3_to_float(static_cast<uint8_t>(code)));
    const double d_best = std::fabs(t - nm::e4m3_to_float(static_cast<uint8_t>(best)));
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  return static_cast<uint8_t>(best);
}

// Random amax values across many binades, plus the switching points of the power-of-two scales.
std::vector<float> amax_sample(std::mt19937_64& gen) {
  std::uniform_real_distribution<double> exponent(-30, 20);
  std::vector<float> amax;
  for (int i = 0; i < 20000; ++i) amax.push_back(static_cast<float>(std::exp2(exponent(gen))));
  for (int k = -30; k <= 20; ++k) {
    for (const double top : {448.0, 6.0}) {
      const float edge = static_cast<float>(std::ldexp(top, k));
      amax.insert(amax.end(), {edge, std::nextafter(edge, 0.0f), std::nextafter(edge, 1e30f)});
    }
  }
  amax.insert(amax.end(), {0.0f, 1e-4f, 6.0f * 0x1p-9f, 6.0f * 0x1p-126f});
  return amax;
}

std::vector<float> random_row(std::mt19937_64& gen, int C, double magnitude) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> x(static_cast<size_t>(C));
  for (float& v : x) v = static_cast<float>(normal(gen) * magnitude);
  return x;
}

// Half the distance between neighbours of the E4M3 grid at magnitude v (v <= 448).
double e4m3_half_step(double v) {
  if (v < 0x1p-6) return 0x1p-10;
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(v))) - 4);
}

// Half the distance between neighbours of the E2M1 grid at magnitude v (v <= 6).
double e2m1_half_step(double v) {
  return v < 2 ? 0.25 : (v < 4 ? 0.5 : 1.0);
}

struct Record {
  const char* name;
  int block;
  size_t (*bytes)(int);
  void (*quantize)(const float*, int, uint8_t*);
  void (*dequantize)(const uint8_t*, int, float*);
  void (*fakequant)(const float*, int, float*);
  int data_bytes_per_block;
  float (*scale_of)(uint8_t);
  bool fp8;
};

const Record kRecords[] = {
    {"fp8", 32, nm::fp8_row_bytes, nm::quantize_fp8_row, nm::dequantize_fp8_row, nm::fakequant_fp8_row, 32,
     nm::e8m0_to_float, true},
    {"nvfp4", 16, nm::nvfp4_entry_bytes, nm::quantize_nvfp4_entry, nm::dequantize_nvfp4_entry,
     nm::fakequant_nvfp4, 8, nm::e4m3_to_float, false},
    {"mxfp4", 32, nm::mxfp4_key_bytes, nm::quantize_mxfp4_key, nm::dequantize_mxfp4_key, nm::fakequant_mxfp4,
     16, nm::e8m0_to_float, false},
};

}  // namespace

TEST_CASE("record sizes: official and tiny configurations") {
  static_assert(nm::nvfp4_entry_bytes(512) == 288);
  static_assert(nm::mxfp4_key_bytes(128) == 68);
  static_assert(nm::fp8_row_bytes(512) == 528);
  CHECK(nm::nvfp4_entry_bytes(64) == 36);
  CHECK(nm::fp8_row_bytes(64) == 66);
  CHECK(nm::mxfp4_key_bytes(32) == 17);
  CHECK(nm::weight_blocks(1) == 1);
  CHECK(nm::weight_blocks(32) == 1);
  CHECK(nm::weight_blocks(33) == 2);
}

TEST_CASE("block scale codes equal the spec formulas evaluated in double") {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 gen(seed);
  int mismatches = 0;
  auto expect = [&](const char* what, float amax, unsigned got, unsigned want) {
    if (got != want && ++mismatches <= 5) {
      std::fprintf(stderr, "%s(amax=%a) = %u, spec %u (seed %llu)\n", what, static_cast<double>(amax), got,
                   want, static_cast<unsigned long long>(seed));
    }
  };
  for (const float amax : amax_sample(gen)) {
    const double a = amax;
    // FP8 window: 2^ceil(log2(max(amax, 1e-4)/448)); the floor is the fp32 constant the reference clamps to.
    expect("fp8", amax, nm::fp8_block_scale_code(amax),
           static_cast<unsigned>(ceil_log2(std::max(a, static_cast<double>(1e-4f)) / 448.0) + 127));
    // MXFP4: 2^ceil(log2(max(amax, 6·2^-126)/6)).
    expect("mxfp4", amax, nm::mxfp4_block_scale_code(amax),
           static_cast<unsigned>(ceil_log2(std::max(a, 6.0 * std::ldexp(1.0, -126)) / 6.0) + 127));
    // NVFP4: e4m3_rne(max(amax, 6·2^-9)/6), the quotient exact in double.
    expect("nvfp4", amax, nm::nvfp4_block_scale_code(amax),
           nearest_e4m3(std::max(a, 6.0 * std::ldexp(1.0, -9)) / 6.0));
    // FP8 weights: 2^ceil(log2(max(amax, 448·2^-126)/448)).
    expect("fp8 weight", amax, nm::fp8_weight_scale_code(amax),
           static_cast<unsigned>(ceil_log2(std::max(a, std::ldexp(448.0, -126)) / 448.0) + 127));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("records round-trip within half a grid step of each block's scale") {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> log_magnitude(-6, 4);
  for (const Record& r : kRecords) {
    for (const int C : {32, 64, 128, 512}) {
      if (C % r.block != 0) continue;
      int violations = 0;
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> x = random_row(gen, C, std::pow(10.0, log_magnitude(gen)));
        if (trial % 4 == 0) x[static_cast<size_t>(trial) % static_cast<size_t>(C)] *= 1e4f;  // outlier
        std::vector<uint8_t> record(r.bytes(C));
        std::vector<float> back(static_cast<size_t>(C)), fake(static_cast<size_t>(C));
        r.quantize(x.data(), C, record.data());
        r.dequantize(record.data(), C, back.data());
        r.fakequant(x.data(), C, fake.data());
        const size_t data_bytes = static_cast<size_t>(C / r.block * r.data_bytes_per_block);
        for (int c = 0; c < C; ++c) {
          const double scale = r.scale_of(record[data_bytes + static_cast<size_t>(c / r.block)]);
          const double xc = x[static_cast<size_t>(c)], yc = back[static_cast<size_t>(c)];
          if (std::isnan(scale)) {
            // Only an NVFP4 block whose amax/6 rounds past 448 may lose its scale (the inputs are finite).
            const float amax = nm::block_amax(x.data() + c / r.block * r.block, r.block);
            const bool expected = !r.fp8 && r.block == 16 && amax / 6.0f > 464.0f && std::isnan(yc);
            if (!expected && ++violations <= 3) std::fprintf(stderr, "%s: unexpected NaN scale\n", r.name);
            continue;
          }
          const double v = std::fabs(xc) / scale;
          const double top = r.fp8 ? 448.0 : 6.0;
          const double bound =
              std::max(scale * (r.fp8 ? e4m3_half_step(std::min(v, top)) : e2m1_half_step(std::min(v, top))),
                       std::fabs(xc) - top * scale);
          const bool same_side = yc == 0.0 || std::signbit(yc) == std::signbit(xc);
          const bool same_as_fake = nm::float_to_bits(fake[static_cast<size_t>(c)]) ==
                                    nm::float_to_bits(back[static_cast<size_t>(c)]);
          if ((std::fabs(xc - yc) > bound || !same_side || !same_as_fake) && ++violations <= 3) {
            std::fprintf(stderr, "%s C=%d ch %d: x=%a back=%a scale=%a (seed %llu)\n", r.name, C, c, xc, yc,
                         scale, static_cast<unsigned long long>(seed));
          }
        }
      }
      CHECK(violations == 0);
    }
  }
}

TEST_CASE("E2M1 records: low nibble holds the even channel, scales follow the data in block order") {
  // Block 0: amax 6 -> MXFP4 scale 1 (code 127); channel 0 = 6 (code 7), channel 1 = 0.5 (code 1).
  // Block 1: amax 12 -> scale 2 (code 128); channel 32 = -12 (code 0xF), channel 33 = 3 (1.5, code 3).
  std::vector<float> x(64, 0.0f);
  x[0] = 6.0f;
  x[1] = 0.5f;
  x[32] = -12.0f;
  x[33] = 3.0f;
  std::vector<uint8_t> record(nm::mxfp4_key_bytes(64));
  nm::quantize_mxfp4_key(x.data(), 64, record.data());
  CHECK(record[0] == 0x17);
  CHECK(record[16] == 0x3F);
  CHECK(record[32] == 127);
  CHECK(record[33] == 128);
}

TEST_CASE("a NaN or Inf poisons only its own block: NaN scale, zero codes, NaN values") {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (const Record& r : kRecords) {
    for (const float special : specials) {
      const int C = 64;
      std::vector<float> x(static_cast<size_t>(C));
      for (int c = 0; c < C; ++c) x[static_cast<size_t>(c)] = 0.1f * static_cast<float>(c - 20);
      x[static_cast<size_t>(r.block + 3)] = special;  // in block 1
      std::vector<uint8_t> record(r.bytes(C));
      std::vector<float> back(static_cast<size_t>(C));
      r.quantize(x.data(), C, record.data());
      r.dequantize(record.data(), C, back.data());
      const size_t data_bytes = static_cast<size_t>(C / r.block * r.data_bytes_per_block);
      const uint8_t nan_scale = (r.fp8 || r.block == 32) ? nm::kE8m0Nan : nm::kE4m3Nan;
      CHECK(record[data_bytes + 1] == nan_scale);
      CHECK(record[data_bytes] != nan_scale);
      for (int i = 0; i < r.data_bytes_per_block; ++i)
        CHECK(record[static_cast<size_t>(r.data_bytes_per_block + i)] == 0);
      for (int c = 0; c < C; ++c) CHECK(std::isnan(back[static_cast<size_t>(c)]) == (c / r.block == 1));
    }
  }
}

TEST_CASE("NVFP4: an amax whose scale rounds past 448 poisons the block") {
  std::vector<float> x(16, 1.0f);
  x[5] = 6.0f * 465.0f;
  std::vector<uint8_t> record(nm::nvfp4_entry_bytes(16));
  nm::quantize_nvfp4_entry(x.data(), 16, record.data());
  CHECK(record[8] == nm::kE4m3Nan);
  x[5] = 6.0f * 464.0f;  // the tie rounds down to 448
  nm::quantize_nvfp4_entry(x.data(), 16, record.data());
  CHECK(record[8] == 0x7E);
}

TEST_CASE("FP8 block32 weights: tile (r/32, c/32) scales element (r, c), partial tiles included") {
  const int rows = 33, cols = 40;
  std::vector<uint8_t> q(static_cast<size_t>(rows * cols), 0x38);  // every code is 1.0
  const uint8_t scales[4] = {120, 121, 130, 131};                  // [2, 2] grid
  std::vector<float> out(static_cast<size_t>(rows * cols));
  nm::dequantize_fp8_block32(q.data(), scales, rows, cols, out.data());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const int tile = (r / 32) * 2 + (c / 32);
      CHECK(out[static_cast<size_t>(r * cols + c)] == std::ldexp(1.0f, scales[tile] - 127));
    }
  }
}

TEST_CASE("weight quantizers round-trip within half a grid step") {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 gen(seed);
  const int rows = 45, cols = 96;
  std::vector<float> w = random_row(gen, rows * cols, 0.02);
  w[100] = 3.0f;  // outlier tile
  int violations = 0;
  auto check = [&](const char* what, double x, double y, double scale, bool fp8) {
    const double v = std::min(std::fabs(x) / scale, fp8 ? 448.0 : 6.0);
    const double bound = scale * (fp8 ? e4m3_half_step(v) : e2m1_half_step(v));
    if (std::fabs(x - y) > bound && ++violations <= 3) {
      std::fprintf(stderr, "%s: %a -> %a, scale %a (seed %llu)\n", what, x, y, scale,
                   static_cast<unsigned long long>(seed));
    }
  };
  {
    std::vector<uint8_t> q(w.size()),
        s(static_cast<size_t>(nm::weight_blocks(rows) * nm::weight_blocks(cols)));
    std::vector<float> back(w.size());
    nm::quantize_fp8_block32(w.data(), rows, cols, q.data(), s.data());
    nm::dequantize_fp8_block32(q.data(), s.data(), rows, cols, back.data());
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        check("fp8 block32", w[i], back[i],
              nm::e8m0_to_float(s[static_cast<size_t>((r / 32) * nm::weight_blocks(cols) + c / 32)]), true);
      }
    }
  }
  {
    std::vector<uint8_t> q(w.size()), s(static_cast<size_t>(rows * nm::weight_blocks(cols)));
    std::vector<float> back(w.size());
    nm::quantize_fp8_rows32(w.data(), rows, cols, q.data(), s.data());
    nm::dequantize_fp8_rows32(q.data(), s.data(), rows, cols, back.data());
    for (size_t i = 0; i < w.size(); ++i) {
      check("fp8 rows32", w[i], back[i],
            nm::e8m0_to_float(s[i / static_cast<size_t>(cols) * 3 + (i % static_cast<size_t>(cols)) / 32]),
            true);
    }
  }
  {
    std::vector<uint8_t> packed(w.size() / 2), s(static_cast<size_t>(rows * cols / 32));
    std::vector<float> back(w.size());
    nm::quantize_mxfp4_weight(w.data(), rows, cols, packed.data(), s.data());
    nm::dequantize_mxfp4_weight(packed.data(), s.data(), rows, cols, back.data());
    for (size_t i = 0; i < w.size(); ++i)
      check("mxfp4 weight", w[i], back[i], nm::e8m0_to_float(s[i / 32]), false);
  }
  CHECK(violations == 0);
}
