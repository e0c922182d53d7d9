// The GPU top-k (kernels/topk.cuh) against the CPU backend's select_top_k (lib/backend/cpu/topk.cpp), the
// law the engine uses: on fresh random rows of many shapes (n not a multiple of any tile, k > n; every path:
// short rows in one CTA, long rows through the filter and merge kernels, k above the filter's limit through
// the whole-row radix select with and without cached keys) and score distributions chosen to stress the tie
// rule, the −∞ handling and the threshold guess (heavy ties, all-equal rows, −∞ rows, NaN, ±0, ±∞, BF16
// ties, ascending rows whose top k sit at the end; rows with too many candidates take the merge's exact
// fallback), the index lists must be identical element for element (they are sorted, so identical sets in
// identical order). The output and the workspace are poisoned before each launch.
// FLASHKV_TEST_SCALE=small shrinks the large cases.
#include <cuda_runtime.h>

#include <flashkv/numeric/scalar_codecs.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/topk_kernel.hpp"
#include "catch.hpp"
#include "device_array.hpp"
#include "gpu_test_env.hpp"
#include "topk.cuh"

namespace {

using flashkv::test::DeviceArray;
namespace fc = flashkv::cuda;
constexpr float kInf = std::numeric_limits<float>::infinity();

using flashkv::test::fresh_seed;
using flashkv::test::small_scale;

enum class Distribution { kNormal, kFewValues, kAllEqual, kNegInfRow, kSpecials, kMostlyNegInf, kAscending };

const char* name(Distribution d) {
  switch (d) {
    case Distribution::kNormal:
      return "normal";
    case Distribution::kFewValues:
      return "few-values";
    case Distribution::kAllEqual:
      return "all-equal";
    case Distribution::kNegInfRow:
      return "-inf-row";
    case Distribution::kSpecials:
      return "specials";
    case Distribution::kMostlyNegInf:
      return "mostly--inf";
    case Distribution::kAscending:
      return "ascending";
  }
  return "?";
}

std::vector<float> make_scores(Distribution d, int64_t count, int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(0, 7);
  std::uniform_int_distribution<int> pick(0, 15);
  const float equal = normal(rng);
  std::vector<float> scores(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    float& s = scores[static_cast<size_t>(i)];
    switch (d) {
      case Distribution::kNormal:
        s = normal(rng);
        break;
      case Distribution::kFewValues:
        s = static_cast<float>(small(rng)) * 0.5f;
        break;
      case Distribution::kAllEqual:
        s = equal;
        break;
      case Distribution::kNegInfRow:
        s = -kInf;
        break;
      case Distribution::kSpecials: {
        const int p = pick(rng);
        s = p == 0   ? -kInf
            : p == 1 ? std::numeric_limits<float>::quiet_NaN()
            : p == 2 ? 0.0f
            : p == 3 ? -0.0f
            : p == 4 ? kInf
                     : static_cast<float>(small(rng)) - 3.0f;
        break;
      }
      case Distribution::kMostlyNegInf:
        s = pick(rng) == 0 ? normal(rng) : -kInf;
        break;
      case Distribution::kAscending:  // runs of 3 equal scores, rising along the row, plus a little noise
        s = static_cast<float>((i % n) / 3) * 0.25f + static_cast<float>(pick(rng) == 0);
        break;
    }
  }
  return scores;
}

std::vector<int32_t> cpu_top_k(const std::vector<float>& scores, int64_t rows, int64_t n, int64_t k) {
  std::vector<int32_t> out(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r)
    flashkv::backend::cpu::select_top_k(scores.data() + r * n, n, k, out.data() + r * k);
  return out;
}

// Runs the GPU top-k on fp32 or BF16 scores and compares with the CPU on the same (fp32) values.
void check_top_k(int64_t rows, int64_t n, int64_t k, Distribution d, fc::ScoreType type, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> scores = make_scores(d, rows * n, n, rng);
  std::vector<uint16_t> bf16(scores.size());
  if (type == fc::ScoreType::kBf16) {
    for (size_t i = 0; i < scores.size(); ++i) {
      bf16[i] = flashkv::numeric::bf16_from_float(scores[i]);
      scores[i] = flashkv::numeric::bf16_to_float(bf16[i]);
    }
  }
  const std::vector<int32_t> expected = cpu_top_k(scores, rows, n, k);
  DeviceArray<float> d_scores(type == fc::ScoreType::kFp32 ? scores : std::vector<float>{});
  DeviceArray<uint16_t> d_bf16(type == fc::ScoreType::kBf16 ? bf16 : std::vector<uint16_t>{});
  DeviceArray<int32_t> d_out(static_cast<size_t>(rows * k));
  DeviceArray<uint8_t> workspace(fc::top_k_workspace_bytes(rows, n, k));
  workspace.fill_bytes(0xA5);  // the contract: no initialisation needed
  d_out.fill_bytes(0x5A);
  const void* input =
      type == fc::ScoreType::kFp32 ? static_cast<const void*>(d_scores.data()) : d_bf16.data();
  fc::top_k_rows(input, type, rows, n, k, d_out.data(), workspace.data(), workspace.size(), nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<int32_t> got = d_out.download();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      const size_t row = i / static_cast<size_t>(k);
      INFO("seed " << seed << " rows " << rows << " n " << n << " k " << k << " " << name(d)
                   << (type == fc::ScoreType::kBf16 ? " bf16" : " fp32") << ": first mismatch at row " << row
                   << " slot " << i % static_cast<size_t>(k) << ": gpu " << got[i] << " cpu " << expected[i]
                   << " (score gpu " << (got[i] >= 0 ? scores[row * n + static_cast<size_t>(got[i])] : NAN)
                   << ", cpu "
                   << (expected[i] >= 0 ? scores[row * n + static_cast<size_t>(expected[i])] : NAN) << ")");
      REQUIRE(got[i] == expected[i]);
    }
  }
}

struct Shape {
  int64_t rows, n, k;
};

}  // namespace

TEST_CASE("gpu top-k equals the CPU top-k on every shape and score distribution", "[gpu][topk]") {
  // Every path: short rows (n <= 16384), the filter and merge kernels (n > 16384, k <= 2048), the whole-row
  // radix select (k > 2048; cached keys up to 48K entries). Sanitizer runs (small scale) keep one shape per
  // path and the distributions richest in ties and specials.
  // Rows of a multiple of 8 entries (16-byte aligned) take the filter's vector loads, the others scalar
  // loads: both, with whole and partial last tiles (filter tiles: 8192 fp32 / 16384 BF16 entries). Filter
  // CTAs take one tile, or several where rows are many (fp32: 33 x 65544, 67 x 40001; both types:
  // 90 x 49160 aligned, and at full scale 140 x 50001: one CTA per row). Few rows take one tile per CTA and
  // up to 264 chunks per row (2 x 65536 BF16, 3 x 30001 unaligned, 1 x 300001: 19 BF16 / 37 fp32 chunks; at
  // full scale 3 x 49153 BF16 and the 1M rows).
  std::vector<Shape> shapes = {{1, 1, 1},        {3, 100, 512},    {5, 1000, 17},    {2, 16387, 512},
                               {2, 70001, 2048}, {5, 65537, 512},  {133, 301, 64},   {2, 20001, 3000},
                               {1, 16384, 512},  {2, 65536, 512},  {3, 65544, 512},  {33, 65544, 512},
                               {67, 40001, 100}, {90, 49160, 512}, {1, 300001, 512}, {3, 30001, 512}};
  std::vector<Distribution> distributions = {Distribution::kSpecials, Distribution::kFewValues,
                                             Distribution::kAscending};
  if (!small_scale()) {
    for (const Shape s :
         {Shape{2, 4095, 512}, Shape{3, 49153, 512}, Shape{1, 200003, 512}, Shape{133, 3001, 64},
          Shape{4, 100003, 1000}, Shape{6, 49153, 7}, Shape{1, 4096 * 8 + 1, 1}, Shape{1, 1000003, 512},
          Shape{4, 262147, 512}, Shape{140, 50001, 512}, Shape{1, 60001, 2500}, Shape{3, 16383, 2047},
          Shape{1, 1 << 20, 512}, Shape{3, 262144, 512}, Shape{64, 65536, 512}, Shape{2, 100008, 300}})
      shapes.push_back(s);
    for (const Distribution d : {Distribution::kNormal, Distribution::kAllEqual, Distribution::kNegInfRow,
                                 Distribution::kMostlyNegInf})
      distributions.push_back(d);
  }
  const uint64_t seed = fresh_seed();
  uint64_t case_seed = seed;
  for (const Shape& s : shapes) {
    for (const Distribution d : distributions) {
      for (const fc::ScoreType type : {fc::ScoreType::kFp32, fc::ScoreType::kBf16}) {
        check_top_k(s.rows, s.n, s.k, d, type, ++case_seed);
      }
    }
  }
}

TEST_CASE("gpu top-k handles empty inputs", "[gpu][topk]") {
  DeviceArray<int32_t> out(8);
  out.fill_bytes(0x11);
  fc::top_k_rows(nullptr, fc::ScoreType::kFp32, 2, 0, 4, out.data(), nullptr, 0, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (const int32_t v : out.download()) REQUIRE(v == -1);
  fc::top_k_rows(nullptr, fc::ScoreType::kFp32, 0, 10, 4, nullptr, nullptr, 0, nullptr);
  fc::top_k_rows(nullptr, fc::ScoreType::kFp32, 3, 10, 0, nullptr, nullptr, 0, nullptr);
}
