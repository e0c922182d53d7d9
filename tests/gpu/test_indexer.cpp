// The GPU indexer (kernels/indexer.cuh) against the CPU backend (lib/backend/cpu/indexer.cpp,
// candidate_pool.cpp) on fresh random problems:
//   - index scores, faithful (MXFP4 key records from the CPU quantizer, MXFP4 fake-quantized queries,
//     BF16 cast points) and clean (fp32 keys, arbitrary queries): bit-identical, every entry, for row
//     counts 1..5, key counts that are not multiples of the CTA tile, visibility 0..count per row, the
//     V4.1 shape (32 heads x 128) and a small one; on the tensor-core path also weights that put head
//     sums exactly on BF16 midpoints, tiny / huge weights with keys over ~100 binades (tiles inside and
//     outside the narrow-term path's range in one row), 16 / 32 / 64 heads, and the narrow-term path's
//     exact redo forced for every entry (test hook; otherwise rarely taken); BF16-valued head weights (as
//     V4.1 faithful passes them: the narrow-term path's packed BF16 epilogue) and fp32 ones;
//   - the candidate pool: identical bytes, for block maxima with heavy ties, empty pools (no visible
//     entry), full pools (topk_blocks above the block count), m not a multiple of the block size;
//   - the pool restriction: identical scores.
// FLASHKV_TEST_SCALE=small shrinks the largest cases.
#include <cuda_runtime.h>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "cuda_backend.hpp"
#include "device_array.hpp"
#include "gpu_test_env.hpp"
#include "indexer.cuh"

namespace {

namespace be = flashkv::backend;
namespace fc = flashkv::cuda;
using flashkv::test::DeviceArray;

using flashkv::test::fresh_seed;
using flashkv::test::small_scale;

const be::Backend& cpu() {
  static const std::unique_ptr<be::Backend> backend = be::make_cpu_backend(2);
  return *backend;
}

std::vector<float> normal_values(size_t count, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

// Visible counts per row: 0, the full count, and random values between.
std::vector<int64_t> visibility(int64_t rows, int64_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(0, count);
  std::vector<int64_t> v(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) v[static_cast<size_t>(r)] = r == 0 ? count : (r == 1 ? 0 : pick(rng));
  return v;
}

size_t first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  }
  return a.size();
}

// Options of one scoring case beyond the shape.
struct ScoreCase {
  bool faithful = true;
  bool raw_row = false;  // faithful: leave query row 1 (row 0 of one) un-quantized (the exact fallback path)
  int block_spread = 0;  // key channel block b scaled by 2^(spread·b): wide scale spans per head
  int query_spread = 0;  // the same for the query heads
  int weight_exp = 0;    // head weights scaled by 2^weight_exp (moves the narrow-term path's key range)
  int entry_spread = 0;  // key j scaled by 2^(±k), k uniform in [0, entry_spread] (sign per case)
  bool dyadic_weights = false;  // weights k·2^-j with |k| <= 2 (zeros; sums often on BF16 midpoints)
  bool force_redo = false;      // the narrow-term path's exact redo for every entry (test hook)
  bool bf16_weights = false;    // head weights rounded to BF16 (RNE), as V4.1 faithful passes them
};

void check_scores(int64_t rows, int heads, int dim, int64_t count, ScoreCase c, uint64_t seed) {
  const bool faithful = c.faithful;
  std::mt19937_64 rng(seed);
  std::vector<float> queries = normal_values(static_cast<size_t>(rows * heads * dim), 1.0f, rng);
  for (size_t i = 0; i < queries.size(); ++i)
    queries[i] =
        std::ldexp(queries[i], c.query_spread * static_cast<int>((i % static_cast<size_t>(dim)) / 32));
  std::vector<float> weights = normal_values(static_cast<size_t>(rows * heads), 0.2f, rng);
  std::uniform_int_distribution<int> small_int(-2, 2), small_exp(0, 3);
  for (float& w : weights) {
    w = std::ldexp(c.dyadic_weights ? static_cast<float>(small_int(rng)) : w,
                   c.weight_exp - (c.dyadic_weights ? small_exp(rng) : 0));
    if (c.bf16_weights) w = flashkv::numeric::bf16_to_float(flashkv::numeric::bf16_from_float(w));
  }
  std::vector<float> key_rows = normal_values(static_cast<size_t>(count * dim), 1.5f, rng);
  std::uniform_int_distribution<int> entry_exp(0, std::abs(c.entry_spread));
  for (int64_t j = 0; j < count && c.entry_spread != 0; ++j) {
    const int e = c.entry_spread < 0 ? -entry_exp(rng) : entry_exp(rng);
    for (int64_t i = 0; i < dim; ++i) key_rows[static_cast<size_t>(j * dim + i)] *= std::ldexp(1.0f, e);
  }
  for (size_t i = 0; i < key_rows.size(); ++i)
    key_rows[i] =
        std::ldexp(key_rows[i], c.block_spread * static_cast<int>((i % static_cast<size_t>(dim)) / 32));
  const std::vector<int64_t> n_visible = visibility(rows, count, rng);
  const be::RecordFormat format = faithful ? be::RecordFormat::kMxfp4 : be::RecordFormat::kFp32;
  std::vector<uint8_t> records(static_cast<size_t>(count) * be::record_bytes(format, dim));
  cpu().quantize_rows(be::ConstMatrix(key_rows.data(), count, dim), format, records, be::Matrix{});
  if (faithful) {
    const std::vector<float> raw = queries;
    cpu().fake_quantize(be::Matrix{queries.data(), rows * heads, dim}, be::RecordFormat::kMxfp4);
    const int64_t raw_at = rows > 1 ? 1 : 0;
    if (c.raw_row)
      std::copy(raw.begin() + raw_at * heads * dim, raw.begin() + (raw_at + 1) * heads * dim,
                queries.begin() + raw_at * heads * dim);
  }
  be::IndexScoring problem;
  problem.queries = be::ConstMatrix(queries.data(), rows, heads * dim);
  problem.head_weights = be::ConstMatrix(weights.data(), rows, heads);
  problem.heads = heads;
  problem.keys.format = format;
  problem.keys.data = records.data();
  problem.keys.count = count;
  problem.keys.dim = dim;
  problem.n_visible = n_visible;
  std::vector<float> expected(static_cast<size_t>(rows * count));
  cpu().index_scores(problem, be::Matrix{expected.data(), rows, count},
                     faithful ? be::Rounding::kFaithful : be::Rounding::kClean);

  DeviceArray<float> d_queries(queries), d_weights(weights), d_scores(expected.size());
  DeviceArray<uint8_t> d_keys(records);
  DeviceArray<int64_t> d_visible(n_visible);
  d_scores.fill_bytes(0x7F);
  fc::IndexScoringArgs args;
  args.queries = d_queries.data();
  args.head_weights = d_weights.data();
  args.n = rows;
  args.heads = heads;
  args.dim = dim;
  args.keys = d_keys.data();
  args.key_format = faithful ? fc::IndexKeyFormat::kMxfp4 : fc::IndexKeyFormat::kFp32;
  args.key_count = count;
  args.n_visible = d_visible.data();
  args.scores = d_scores.data();
  args.faithful = faithful;
  args.force_exact_redo = c.force_redo;
  fc::index_scores(args, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> got = d_scores.download();
  const size_t bad = first_bit_mismatch(got, expected);
  if (bad < got.size()) {
    INFO("seed " << seed << " rows " << rows << " heads " << heads << " dim " << dim << " count " << count
                 << (faithful ? " faithful" : " clean") << " raw_row " << c.raw_row << " spread "
                 << c.block_spread << ": first mismatch at row " << bad / count << " entry " << bad % count
                 << " (visible " << n_visible[bad / count] << "): gpu " << got[bad] << " cpu "
                 << expected[bad]);
    REQUIRE(bad == got.size());
  }
}

}  // namespace

TEST_CASE("gpu index scores are bit-identical to the CPU backend's", "[gpu][indexer]") {
  const uint64_t seed = fresh_seed();
  uint64_t s = seed;
  const int64_t big = small_scale() ? 1000 : 5003;
  for (const bool faithful : {true, false}) {
    const ScoreCase c{faithful, false, 0};
    check_scores(1, 32, 128, 1, c, ++s);
    check_scores(3, 32, 128, 129, c, ++s);
    check_scores(5, 32, 128, big, c, ++s);  // two CTA row groups on the tensor-core path
    check_scores(4, 4, 64, 300, c, ++s);
    check_scores(2, 3, 32, 77, c, ++s);
    check_scores(2, 64, 128, 200, c, ++s);
  }
  // Faithful with one un-quantized query row (exact fallback for that row only); keys whose block scales
  // span 3·2 = 6 binades (per-block fp32 combine) or 12·3 = 36 (double combine); query heads spanning 6
  // (rows without pre-shifted values). Plain random data takes the narrow one-accumulator path.
  check_scores(3, 32, 128, 700, ScoreCase{true, true, 0}, ++s);
  check_scores(1, 32, 128, 700, ScoreCase{true, true, 0}, ++s);  // one row (its own kernel), un-quantized
  check_scores(2, 32, 128, 300, ScoreCase{true, false, 2}, ++s);
  check_scores(2, 32, 128, 300, ScoreCase{true, false, 3}, ++s);  // span 9: the narrow row's margin -> double
  check_scores(2, 32, 128, 300, ScoreCase{true, false, 12}, ++s);
  check_scores(2, 32, 128, 300, ScoreCase{true, false, 0, 2}, ++s);
  // The narrow-term path (fp32 head sum with a rounding certificate, double redo when uncertain): dyadic
  // weights put many sums exactly on BF16 midpoints; tiny / huge weights with keys spread over ~100
  // binades send the tiles whose exponents leave the path's normal range (or the narrow range) to the
  // per-block path within one row; four rows of different visibility in one pass.
  check_scores(4, 32, 128, 3001, ScoreCase{true, false, 0, 0, 0, 0, true}, ++s);
  check_scores(1, 32, 128, 3001, ScoreCase{true, false, 0, 0, -40, -100}, ++s);
  check_scores(3, 32, 128, 3001, ScoreCase{true, false, 0, 0, -40, -100}, ++s);
  check_scores(3, 32, 128, 3001, ScoreCase{true, false, 0, 0, 40, 80}, ++s);
  check_scores(4, 64, 128, 1000, ScoreCase{true, false, 0, 0, 0, 0, true}, ++s);
  check_scores(3, 16, 128, 1000, ScoreCase{true, false, 0, 0, 0, 0, true}, ++s);  // heads from the arguments
  // The exact redo of the narrow-term path (double head sum, normally taken only when the fp32 interval
  // does not decide the BF16 rounding) forced for every entry, with an un-quantized row, and with the
  // head count from the arguments.
  check_scores(4, 32, 128, 3001, ScoreCase{true, true, 0, 0, 0, 0, false, true}, ++s);
  check_scores(1, 32, 128, 3001, ScoreCase{true, false, 0, 0, 0, 0, true, true}, ++s);  // one row: own kernel
  check_scores(3, 32, 128, 2000, ScoreCase{true, false, 0, 0, 0, 0, true, true}, ++s);
  check_scores(2, 64, 128, 1000, ScoreCase{true, false, 0, 0, 0, 0, true, true}, ++s);
  check_scores(4, 32, 128, 2000, ScoreCase{true, false, 2, 0, 0, 0, true, true},
               ++s);  // with per-block tiles
  // One row (prepared inside the scores kernel): head counts from the arguments, huge weights.
  check_scores(1, 64, 128, 1000, ScoreCase{true, false, 0, 0, 0, 0, true, true}, ++s);
  check_scores(1, 16, 128, 1000, ScoreCase{true, false, 2, 0, 0, 0, true, false}, ++s);
  check_scores(1, 32, 128, 3001, ScoreCase{true, false, 0, 0, 40, 80}, ++s);
  // BF16-valued weights (the packed BF16 epilogue; dyadic weights above are BF16 values too): one row, several
  // rows with a raw one, head counts from the arguments, the exact redo forced, weights near the range ends.
  ScoreCase bf16{};
  bf16.bf16_weights = true;
  check_scores(1, 32, 128, 3001, bf16, ++s);
  check_scores(4, 32, 128, 3001, bf16, ++s);
  check_scores(1, 64, 128, 1000, bf16, ++s);
  check_scores(3, 16, 128, 1000, bf16, ++s);
  ScoreCase bf16_raw = bf16, bf16_redo = bf16, bf16_tiny = bf16, bf16_huge = bf16;
  bf16_raw.raw_row = true;
  bf16_redo.force_redo = true;
  bf16_tiny.weight_exp = -40;
  bf16_tiny.entry_spread = -100;
  bf16_huge.weight_exp = 40;
  bf16_huge.entry_spread = 80;
  check_scores(3, 32, 128, 2000, bf16_raw, ++s);
  check_scores(1, 32, 128, 2000, bf16_redo, ++s);
  check_scores(4, 32, 128, 2000, bf16_redo, ++s);
  check_scores(1, 32, 128, 3001, bf16_tiny, ++s);
  check_scores(3, 32, 128, 3001, bf16_huge, ++s);
  // One row whose heads span more than three binades (prepared as narrow, then rewritten unshifted for the
  // per-block path), with 32 and 64 heads; and one at the border (spans around three).
  check_scores(1, 32, 128, 700, ScoreCase{true, false, 0, 2}, ++s);
  ScoreCase wide = bf16;
  wide.query_spread = 2;
  check_scores(1, 64, 128, 700, wide, ++s);
  wide.query_spread = 1;
  check_scores(1, 32, 128, 700, wide, ++s);
  // Key counts past one round of the grid's tiles (132 SMs x 4 pipelines x 128 entries = 67584 keys on an
  // H200): full rounds of whole tiles, then the rest split evenly (70001: most of those tiles empty), the
  // last record partial.
  if (!small_scale()) {
    check_scores(1, 32, 128, 150001, bf16, ++s);
    check_scores(4, 32, 128, 70001, bf16, ++s);
  }
}

namespace {

// Scores with heavy ties between block maxima (few distinct values), some −∞, and invisible tails.
std::vector<float> pool_scores(int64_t rows, int64_t m, const std::vector<int64_t>& n_visible,
                               std::mt19937_64& rng) {
  std::uniform_int_distribution<int> small(0, 5);
  std::vector<float> scores(static_cast<size_t>(rows * m));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < m; ++j) {
      const int v = small(rng);
      scores[static_cast<size_t>(r * m + j)] = j >= n_visible[static_cast<size_t>(r)] || v == 0
                                                   ? -std::numeric_limits<float>::infinity()
                                                   : static_cast<float>(v) * 0.25f;
    }
  }
  return scores;
}

void check_pool(int64_t rows, int64_t m, int64_t block_size, int64_t topk_blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> n_visible = visibility(rows, m, rng);
  std::vector<float> scores = pool_scores(rows, m, n_visible, rng);
  std::vector<uint8_t> expected(static_cast<size_t>(rows * m));
  cpu().candidate_pool(be::ConstMatrix(scores.data(), rows, m), n_visible, block_size, topk_blocks, expected);
  DeviceArray<float> d_scores(scores);
  DeviceArray<int64_t> d_visible(n_visible);
  DeviceArray<uint8_t> d_pool(expected.size());
  DeviceArray<uint8_t> workspace(fc::candidate_pool_workspace_bytes(rows, m, block_size, topk_blocks));
  d_pool.fill_bytes(0xA5);
  fc::candidate_pool(d_scores.data(), rows, m, d_visible.data(), block_size, topk_blocks, d_pool.data(),
                     workspace.data(), workspace.size(), nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<uint8_t> got = d_pool.download();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      INFO("seed " << seed << " rows " << rows << " m " << m << " block " << block_size << " topk_blocks "
                   << topk_blocks << ": first mismatch at row " << i / m << " entry " << i % m << " (visible "
                   << n_visible[i / m] << "): gpu " << int(got[i]) << " cpu " << int(expected[i]));
      REQUIRE(got[i] == expected[i]);
    }
  }
  // The restriction of the same scores to that pool.
  std::vector<float> restricted = scores;
  cpu().restrict_to_pool(be::Matrix{restricted.data(), rows, m}, expected);
  fc::restrict_to_pool(d_scores.data(), rows, m, d_pool.data(), nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> got_restricted = d_scores.download();
  const size_t bad = first_bit_mismatch(got_restricted, restricted);
  INFO("seed " << seed << ": restrict_to_pool first mismatch at " << bad);
  REQUIRE(bad == restricted.size());
}

}  // namespace

TEST_CASE("gpu candidate pool and pool restriction equal the CPU backend's", "[gpu][indexer]") {
  const uint64_t seed = fresh_seed();
  uint64_t s = seed;
  check_pool(3, 1, 8, 4, ++s);
  check_pool(4, 1003, 8, 5, ++s);                               // few blocks kept, ties everywhere
  check_pool(4, 1003, 8, 2048, ++s);                            // more blocks asked than exist: full pools
  check_pool(3, 20001, 8, 2048, ++s);                           // V4.1 pool size, m not a multiple of 8
  check_pool(2, small_scale() ? 70001 : 400003, 8, 2048, ++s);  // several CTAs per row in the block top-k
  check_pool(5, 777, 5, 3, ++s);
}

TEST_CASE("CudaBackend runs the indexer operations on the GPU with the CPU backend's results",
          "[gpu][indexer]") {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::unique_ptr<be::Backend> gpu = fc::make_cuda_backend(2);
  REQUIRE(gpu->name() == "cuda");
  const int64_t rows = 3, count = 1500, heads = 32, dim = 128, k = 512;
  std::vector<float> queries = normal_values(static_cast<size_t>(rows * heads * dim), 1.0f, rng);
  const std::vector<float> weights = normal_values(static_cast<size_t>(rows * heads), 0.2f, rng);
  const std::vector<float> key_rows = normal_values(static_cast<size_t>(count * dim), 1.5f, rng);
  const std::vector<int64_t> n_visible = visibility(rows, count, rng);
  std::vector<uint8_t> records(static_cast<size_t>(count) * be::record_bytes(be::RecordFormat::kMxfp4, dim));
  cpu().quantize_rows(be::ConstMatrix(key_rows.data(), count, dim), be::RecordFormat::kMxfp4, records,
                      be::Matrix{});
  gpu->fake_quantize(be::Matrix{queries.data(), rows * heads, dim}, be::RecordFormat::kMxfp4);  // delegated
  be::IndexScoring problem;
  problem.queries = be::ConstMatrix(queries.data(), rows, heads * dim);
  problem.head_weights = be::ConstMatrix(weights.data(), rows, heads);
  problem.heads = heads;
  problem.keys.format = be::RecordFormat::kMxfp4;
  problem.keys.data = records.data();
  problem.keys.count = count;
  problem.keys.dim = dim;
  problem.n_visible = n_visible;
  std::vector<float> want(static_cast<size_t>(rows * count)), got(want.size());
  cpu().index_scores(problem, be::Matrix{want.data(), rows, count}, be::Rounding::kFaithful);
  gpu->index_scores(problem, be::Matrix{got.data(), rows, count}, be::Rounding::kFaithful);
  INFO("seed " << seed);
  REQUIRE(first_bit_mismatch(got, want) == got.size());

  std::vector<uint8_t> pool_want(want.size()), pool_got(want.size());
  cpu().candidate_pool(be::ConstMatrix(want.data(), rows, count), n_visible, 8, 40, pool_want);
  gpu->candidate_pool(be::ConstMatrix(want.data(), rows, count), n_visible, 8, 40, pool_got);
  REQUIRE(pool_got == pool_want);
  std::vector<float> restricted_want = want, restricted_got = want;
  cpu().restrict_to_pool(be::Matrix{restricted_want.data(), rows, count}, pool_want);
  gpu->restrict_to_pool(be::Matrix{restricted_got.data(), rows, count}, pool_want);
  REQUIRE(first_bit_mismatch(restricted_got, restricted_want) == restricted_got.size());
  std::vector<int32_t> top_want(static_cast<size_t>(rows * k)), top_got(top_want.size());
  cpu().top_k(be::ConstMatrix(restricted_want.data(), rows, count), k, top_want);
  gpu->top_k(be::ConstMatrix(restricted_want.data(), rows, count), k, top_got);
  REQUIRE(top_got == top_want);
}
