// The KV write path of CudaBackend (kernels/cuda_backend.hpp) against the CPU backend, operation by
// operation, through the Backend interface the engine calls: quantize_rows (FP8 window rows, NVFP4 entries,
// MXFP4 index keys, kFp32), quantize_rope_rows (V4's FP8+BF16 record, partial scale blocks too),
// fake_quantize, rope (forward and inverse, fp32 and double angle tables, with and without YaRN, 1 to 64
// heads, BF16 and fp32 cast points), compressor_pool (ratio 2 to 128, −∞ gates as V4's overlapping
// compressor sets them) and output_projection (the inverse RoPE on the GPU, then the CPU's grouped
// projection: V4.1's 64x512 with wo_a 8192x4096, and a tiny shape), on fresh random inputs (seed printed)
// with odd and even row counts. Records must be byte-identical and every float bit-identical (NaN: both
// NaN). Inputs are BF16-valued, as the engine's activations, or arbitrary fp32 over a wide range of
// magnitudes; a few rows carry NaN/Inf, which the GPU kernels of RoPE and pooling hand back to the CPU (their
// results must still match, and recomputed_rows() must count them). Outputs are poisoned before each call.
// Two CUDA backends are checked: every call on the device (kAlwaysDevice; row counts up to 1001 also reach
// the staging's straight copies of arrays >= 256 KB) and the default size thresholds.
// FLASHKV_TEST_SCALE=small shrinks the cases.
#include <flashkv/config.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "cuda_backend.hpp"
#include "gpu_test_env.hpp"

namespace {

namespace be = flashkv::backend;
using be::RecordFormat;
using be::Rounding;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const be::Backend& cpu() {
  static const std::unique_ptr<be::Backend> backend = be::make_cpu_backend(2);
  return *backend;
}

// Every call the launchers take on the device, however small: the kernels and the staging under test.
flashkv::cuda::CudaBackend& gpu() {
  static flashkv::cuda::CudaBackend backend(2, flashkv::cuda::kAlwaysDevice);
  return backend;
}

// The default size thresholds (small calls on the CPU): what the engine gets.
flashkv::cuda::CudaBackend& gpu_default() {
  static flashkv::cuda::CudaBackend backend(2);
  return backend;
}

// Both, each checked against the CPU backend.
struct GpuUnderTest {
  const be::Backend* backend;
  const char* name;
};
std::vector<GpuUnderTest> gpus() {
  return {{&gpu(), "cuda (always device)"}, {&gpu_default(), "cuda (default thresholds)"}};
}

struct Rng {
  std::mt19937_64 engine;
  explicit Rng(uint64_t seed) : engine(seed) {}
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(engine); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine); }
};

// A generator from a fresh seed, printed so that a failure reproduces.
Rng seeded_rng(const char* what) {
  const uint64_t seed = flashkv::test::fresh_seed();
  std::printf("backend ops %s: seed %llu\n", what, static_cast<unsigned long long>(seed));
  return Rng(seed);
}

float bf16(float x) {
  return flashkv::numeric::bf16_to_float(flashkv::numeric::bf16_from_float(x));
}

// Rows of activations: normal values times a per-row scale 2^[-12, 8], BF16-valued or full fp32, with a few
// exact zeros and tiny values so blocks hit the scale floors.
std::vector<float> random_rows(Rng& rng, int64_t rows, int64_t cols, bool bf16_valued) {
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double scale = std::ldexp(1.0, static_cast<int>(rng.integer(-12, 8)));
    for (int64_t c = 0; c < cols; ++c) {
      float v = static_cast<float>(rng.normal() * scale);
      const int64_t kind = rng.integer(0, 99);
      if (kind == 0) v = 0.0f;
      if (kind == 1) v = static_cast<float>(rng.normal() * 1e-7);
      x[static_cast<size_t>(r * cols + c)] = bf16_valued ? bf16(v) : v;
    }
  }
  return x;
}

void poison(std::vector<float>& x) {
  for (float& v : x) v = -12345.678f;
}

// Bit-identical floats, NaN matching NaN (payloads may differ between the two sides' NaN sources).
void require_same_floats(const std::vector<float>& want, const std::vector<float>& got,
                         const std::string& what) {
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    uint32_t a = 0, b = 0;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    if (a != b)
      FAIL(what << ": element " << i << " cpu " << want[i] << " (0x" << std::hex << a << ") gpu " << got[i]
                << " (0x" << b << ")");
  }
}

void require_same_bytes(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                        const std::string& what) {
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) FAIL(what << ": byte " << i << " cpu " << int{want[i]} << " gpu " << int{got[i]});
  }
}

const char* format_name(RecordFormat format) {
  switch (format) {
    case RecordFormat::kFp32:
      return "fp32";
    case RecordFormat::kFp8:
      return "fp8";
    case RecordFormat::kNvfp4:
      return "nvfp4";
    case RecordFormat::kMxfp4:
      return "mxfp4";
    case RecordFormat::kFp8Bf16Rope:
      return "fp8+bf16";
  }
  return "?";
}

// Row counts of a case whose rows hold `row_elements` floats: always 1, 3 and 7, more while a case stays
// below 2M elements (a few MB, seconds in all).
std::vector<int64_t> row_counts(int64_t row_elements) {
  std::vector<int64_t> out;
  const int64_t cap = flashkv::test::small_scale() ? (int64_t{1} << 17) : (int64_t{1} << 21);
  for (const int64_t n : {1, 3, 7, 32, 129, 1001}) {
    if (n <= 7 || n * row_elements <= cap) out.push_back(n);
  }
  return out;
}

// quantize_rows / quantize_rope_rows on both backends: records and (when asked) dequantized rows.
void check_quantize(Rng& rng, RecordFormat format, int64_t dim, int64_t rope_dim, bool bf16_valued) {
  for (const int64_t n : row_counts(dim)) {
    std::vector<float> x = random_rows(rng, n, dim, bf16_valued);
    if (n > 2) x[static_cast<size_t>(dim + 5)] = kNan;   // a poisoned block in row 1
    if (n > 2) x[static_cast<size_t>(2 * dim)] = -kInf;  // and in row 2
    const size_t bytes = static_cast<size_t>(n) * be::record_bytes(format, dim, rope_dim);
    const be::ConstMatrix in{x.data(), n, dim};
    for (const bool with_rows : {false, true}) {
      const std::string what = std::string(format_name(format)) + " dim " + std::to_string(dim) + " rows " +
                               std::to_string(n) + (with_rows ? " +dequantized" : "");
      std::vector<uint8_t> want(bytes, 0xA5);
      std::vector<float> want_rows(static_cast<size_t>(n * dim));
      poison(want_rows);
      const be::Matrix want_out = with_rows ? be::Matrix{want_rows.data(), n, dim} : be::Matrix{};
      const auto quantize = [&](const be::Backend& b, std::span<uint8_t> records, be::Matrix rows) {
        if (format == RecordFormat::kFp8Bf16Rope) {
          b.quantize_rope_rows(in, rope_dim, records, rows);
        } else {
          b.quantize_rows(in, format, records, rows);
        }
      };
      quantize(cpu(), want, want_out);
      for (const GpuUnderTest& g : gpus()) {
        std::vector<uint8_t> got(bytes, 0x5A);
        std::vector<float> got_rows(want_rows.size());
        poison(got_rows);
        quantize(*g.backend, got, with_rows ? be::Matrix{got_rows.data(), n, dim} : be::Matrix{});
        require_same_bytes(want, got, what + " " + g.name);
        require_same_floats(want_rows, got_rows, what + " " + g.name);
      }
    }
  }
}

TEST_CASE("CudaBackend quantize_rows equals the CPU backend byte for byte", "[gpu][backend_ops]") {
  Rng rng = seeded_rng("quantize_rows");
  for (const bool bf16_valued : {true, false}) {
    check_quantize(rng, RecordFormat::kFp8, 512, 0, bf16_valued);    // V4.1 window row, 528 B
    check_quantize(rng, RecordFormat::kFp8, 96, 0, bf16_valued);     // a tiny config's row
    check_quantize(rng, RecordFormat::kNvfp4, 512, 0, bf16_valued);  // V4.1 entry, 288 B
    check_quantize(rng, RecordFormat::kNvfp4, 48, 0, bf16_valued);
    check_quantize(rng, RecordFormat::kMxfp4, 128, 0, bf16_valued);  // index key, 68 B
    check_quantize(rng, RecordFormat::kMxfp4, 64, 0, bf16_valued);
    check_quantize(rng, RecordFormat::kFp32, 64, 0, bf16_valued);  // clean mode: a copy
  }
}

TEST_CASE("CudaBackend quantize_rope_rows (V4 record) equals the CPU backend byte for byte",
          "[gpu][backend_ops]") {
  Rng rng = seeded_rng("quantize_rope_rows");
  for (const bool bf16_valued : {true, false}) {
    check_quantize(rng, RecordFormat::kFp8Bf16Rope, 512, 64, bf16_valued);  // 584 B
    check_quantize(rng, RecordFormat::kFp8Bf16Rope, 200, 40, bf16_valued);  // partial last scale block
    check_quantize(rng, RecordFormat::kFp8Bf16Rope, 128, 0, bf16_valued);   // no RoPE channels
    check_quantize(rng, RecordFormat::kFp8Bf16Rope, 72, 8, bf16_valued);    // padding bytes before the tail
  }
}

TEST_CASE("CudaBackend fake_quantize equals the CPU backend bit for bit", "[gpu][backend_ops]") {
  Rng rng = seeded_rng("fake_quantize");
  struct Case {
    RecordFormat format;
    int64_t cols;
  };
  for (const Case& c : {Case{RecordFormat::kMxfp4, 64 * 128}, Case{RecordFormat::kMxfp4, 4 * 64},
                        Case{RecordFormat::kFp8, 512}, Case{RecordFormat::kNvfp4, 512},
                        Case{RecordFormat::kFp32, 96}, Case{RecordFormat::kFp8Bf16Rope, 512}}) {
    for (const int64_t n : row_counts(c.cols)) {
      for (const bool bf16_valued : {true, false}) {
        std::vector<float> want = random_rows(rng, n, c.cols, bf16_valued);
        if (n > 1) want[static_cast<size_t>(c.cols + 3)] = kNan;
        const std::vector<float> input = want;
        cpu().fake_quantize(be::Matrix{want.data(), n, c.cols}, c.format);
        for (const GpuUnderTest& g : gpus()) {
          std::vector<float> got = input;
          g.backend->fake_quantize(be::Matrix{got.data(), n, c.cols}, c.format);
          require_same_floats(
              want, got,
              std::string(format_name(c.format)) + " cols " + std::to_string(c.cols) + " " + g.name);
        }
      }
    }
  }
}

struct RopeCase {
  int64_t heads;
  int64_t head_dim;
  int64_t rope_dim;
  bool yarn;
  int64_t max_position;
};

TEST_CASE("CudaBackend rope equals the CPU backend bit for bit", "[gpu][backend_ops]") {
  Rng rng = seeded_rng("rope");
  const int64_t recomputed_before = gpu().recomputed_rows();
  int64_t special_rows = 0;
  int64_t rows_checked = 0;
  const flashkv::RopeScaling yarn;                                  // factor 16, original length 65536
  for (const RopeCase& rc : {RopeCase{1, 512, 64, true, 1 << 20},   // V4.1 window rows and entries
                             RopeCase{64, 512, 64, true, 1 << 17},  // V4.1 queries
                             RopeCase{1, 128, 64, true, 1 << 20},   // index keys
                             RopeCase{4, 96, 32, false, 4096},      // tiny configs
                             RopeCase{3, 64, 64, false, 100},       // every channel rotated
                             RopeCase{2, 40, 0, false, 100}}) {     // nothing rotated: the cast point only
    for (const Rounding table_rounding : {Rounding::kFaithful, Rounding::kClean}) {
      const be::RopeTable table =
          be::make_rope_table(rc.rope_dim, 10000.0, rc.yarn ? &yarn : nullptr, table_rounding);
      for (const Rounding rounding : {Rounding::kFaithful, Rounding::kClean}) {
        for (const bool inverse : {false, true}) {
          const int64_t cols = rc.heads * rc.head_dim;
          for (const int64_t n : row_counts(cols)) {
            // BF16-valued rows (the engine's) or full fp32 ones, which the faithful cast point rounds
            std::vector<float> want = random_rows(rng, n, cols, rng.integer(0, 1) == 0);
            std::vector<int64_t> positions(static_cast<size_t>(n));
            for (int64_t& p : positions) p = rng.integer(0, rc.max_position);
            if (n > 3) {  // non-finite inputs: the kernel hands these rows to the CPU
              want[static_cast<size_t>(2 * cols - 1)] = kNan;
              want[static_cast<size_t>(3 * cols - 2)] = kInf;
              special_rows += rc.rope_dim > 0 ? 2 : 0;
            }
            const std::vector<float> input = want;
            cpu().rope(be::Matrix{want.data(), n, cols}, rc.heads, positions, table, inverse, rounding);
            std::vector<float> got = input;
            gpu().rope(be::Matrix{got.data(), n, cols}, rc.heads, positions, table, inverse, rounding);
            std::vector<float> got_default = input;
            gpu_default().rope(be::Matrix{got_default.data(), n, cols}, rc.heads, positions, table, inverse,
                               rounding);
            INFO("heads " << rc.heads << " head_dim " << rc.head_dim << " rope_dim " << rc.rope_dim
                          << " rows " << n << " table "
                          << (table_rounding == Rounding::kFaithful ? "fp32" : "double")
                          << (rounding == Rounding::kFaithful ? " bf16" : " fp32")
                          << (inverse ? " inverse" : ""));
            require_same_floats(want, got, "rope");
            require_same_floats(want, got_default, "rope (default thresholds)");
            rows_checked += n;
          }
        }
      }
    }
  }
  const int64_t recomputed = gpu().recomputed_rows() - recomputed_before;
  std::printf("backend ops rope: %lld rows bit-identical, %lld recomputed on the CPU (%lld with NaN/Inf)\n",
              static_cast<long long>(rows_checked), static_cast<long long>(recomputed),
              static_cast<long long>(special_rows));
  CHECK(recomputed >= special_rows);
}

struct WriteCase {
  RecordFormat format;
  int64_t dim;
  int64_t rope_dim;         // RoPE'd trailing channels
  int64_t record_rope_dim;  // kFp8Bf16Rope's BF16 tail
  Rounding rounding;
};

TEST_CASE("CudaBackend norm_rope_quantize equals the CPU backend byte for byte", "[gpu][backend_ops]") {
  Rng rng = seeded_rng("norm_rope_quantize");
  const flashkv::RopeScaling yarn;
  const int64_t recomputed_before = gpu().recomputed_rows();
  int64_t special_rows = 0;
  for (const WriteCase& wc : {WriteCase{RecordFormat::kFp8, 512, 64, 0, Rounding::kFaithful},  // V4.1 window
                              WriteCase{RecordFormat::kFp8Bf16Rope, 512, 64, 64, Rounding::kFaithful},  // V4
                              WriteCase{RecordFormat::kMxfp4, 128, 64, 0, Rounding::kFaithful},  // index keys
                              WriteCase{RecordFormat::kNvfp4, 96, 32, 0, Rounding::kFaithful},
                              WriteCase{RecordFormat::kFp32, 512, 64, 0, Rounding::kClean},  // clean window
                              WriteCase{RecordFormat::kFp32, 100, 20, 0, Rounding::kClean},  // d % 8 != 0
                              WriteCase{RecordFormat::kFp8Bf16Rope, 200, 40, 40, Rounding::kFaithful}}) {
    const be::RopeTable table = be::make_rope_table(wc.rope_dim, 10000.0, &yarn, wc.rounding);
    for (const int64_t n : row_counts(wc.dim)) {
      // full fp32 inputs spanning many binades: the double sum of squares rounds, so its order matters
      const std::vector<float> x = random_rows(rng, n, wc.dim, rng.integer(0, 1) == 0);
      std::vector<float> weight(static_cast<size_t>(wc.dim));
      for (float& w : weight) w = bf16(static_cast<float>(1.0 + 0.3 * rng.normal()));
      const double eps = rng.integer(0, 1) == 0 ? 1e-6 : 1e-20;
      std::vector<int64_t> positions(static_cast<size_t>(n));
      for (int64_t& p : positions) p = rng.integer(0, 1 << 20);
      std::vector<float> input = x;
      if (n > 3) {  // a non-finite row (Inf/Inf in the norm): the GPU hands it to the CPU
        input[static_cast<size_t>(wc.dim + 1)] = kInf;
        ++special_rows;
      }
      const std::vector<float> input_before = input;
      const size_t bytes = static_cast<size_t>(n) * be::record_bytes(wc.format, wc.dim, wc.record_rope_dim);
      for (const bool with_rows : {false, true}) {
        std::vector<uint8_t> want(bytes, 0xA5);
        std::vector<float> want_rows(static_cast<size_t>(n * wc.dim));
        poison(want_rows);
        const be::ConstMatrix in{input.data(), n, wc.dim};
        const auto write = [&](const be::Backend& b, std::span<uint8_t> records, std::vector<float>& rows) {
          const be::Matrix out = with_rows ? be::Matrix{rows.data(), n, wc.dim} : be::Matrix{};
          b.norm_rope_quantize(in, weight, eps, positions, table, wc.format, wc.record_rope_dim, records, out,
                               wc.rounding);
        };
        write(cpu(), want, want_rows);
        const std::string what = std::string(format_name(wc.format)) + " dim " + std::to_string(wc.dim) +
                                 " rows " + std::to_string(n) + (with_rows ? " +dequantized" : "");
        for (const GpuUnderTest& g : gpus()) {
          std::vector<uint8_t> got(bytes, 0x5A);
          std::vector<float> got_rows(want_rows.size());
          poison(got_rows);
          write(*g.backend, got, got_rows);
          require_same_bytes(want, got, what + " " + g.name);
          require_same_floats(want_rows, got_rows, what + " " + g.name);
          const bool input_kept =
              std::memcmp(input.data(), input_before.data(), input.size() * sizeof(float)) == 0;
          REQUIRE(input_kept);
        }
      }
      if (n > 3) special_rows += 1;  // the second call (with_rows) recomputes it again
    }
  }
  const int64_t recomputed = gpu().recomputed_rows() - recomputed_before;
  std::printf("backend ops norm_rope_quantize: %lld rows recomputed on the CPU (%lld with Inf)\n",
              static_cast<long long>(recomputed), static_cast<long long>(special_rows));
  CHECK(recomputed >= special_rows);
}

TEST_CASE("CudaBackend compressor_pool equals the CPU backend bit for bit", "[gpu][backend_ops]") {
  Rng rng = seeded_rng("compressor_pool");
  const int64_t recomputed_before = gpu().recomputed_rows();
  int64_t special_groups = 0;
  int64_t groups_checked = 0;
  struct PoolCase {
    int64_t ratio;
    int64_t dim;
    bool overlap_start;  // first half of group 0's gates −∞ (V4's overlapping compressor, window −1)
  };
  for (const PoolCase& pc : {PoolCase{2, 512, false}, PoolCase{8, 512, true}, PoolCase{8, 128, true},
                             PoolCase{128, 512, false}, PoolCase{3, 96, false}}) {
    for (const Rounding rounding : {Rounding::kFaithful, Rounding::kClean}) {
      for (const int64_t groups : row_counts(pc.ratio * pc.dim)) {
        const int64_t rows = groups * pc.ratio;
        const std::vector<float> v = random_rows(rng, rows, pc.dim, false);
        std::vector<float> g = random_rows(rng, rows, pc.dim, false);
        for (float& x : g) x = static_cast<float>(x * 1e-2 + rng.normal() * 4);  // logits spread over ~e^±12
        if (pc.overlap_start) {
          for (int64_t t = 0; t < pc.ratio / 2; ++t)
            for (int64_t c = 0; c < pc.dim; ++c) g[static_cast<size_t>(t * pc.dim + c)] = -kInf;
        }
        std::vector<float> vv = v;
        if (groups > 2) {  // a NaN value in group 1, an all −∞ channel in group 2
          vv[static_cast<size_t>(pc.ratio * pc.dim + 7)] = kNan;
          for (int64_t t = 0; t < pc.ratio; ++t)
            g[static_cast<size_t>((2 * pc.ratio + t) * pc.dim + 1)] = -kInf;
          special_groups += 2;
        }
        std::vector<float> want(static_cast<size_t>(groups * pc.dim));
        poison(want);
        const be::ConstMatrix vm{vv.data(), rows, pc.dim}, gm{g.data(), rows, pc.dim};
        cpu().compressor_pool(vm, gm, pc.ratio, be::Matrix{want.data(), groups, pc.dim}, rounding);
        INFO("ratio " << pc.ratio << " dim " << pc.dim << " groups " << groups
                      << (rounding == Rounding::kFaithful ? " bf16" : " fp32"));
        for (const GpuUnderTest& under_test : gpus()) {
          std::vector<float> got(want.size());
          poison(got);
          under_test.backend->compressor_pool(vm, gm, pc.ratio, be::Matrix{got.data(), groups, pc.dim},
                                              rounding);
          require_same_floats(want, got, std::string("compressor_pool ") + under_test.name);
        }
        groups_checked += groups;
      }
    }
  }
  const int64_t recomputed = gpu().recomputed_rows() - recomputed_before;
  std::printf(
      "backend ops compressor_pool: %lld groups bit-identical, %lld recomputed on the CPU (%lld with "
      "NaN/-inf)\n",
      static_cast<long long>(groups_checked), static_cast<long long>(recomputed),
      static_cast<long long>(special_groups));
  CHECK(recomputed >= special_groups);
}

// BF16-valued weights uniform in ±0.05 from raw generator bits (the V4.1 wo_a has 33.5M of them: cheap).
std::vector<float> random_weights(Rng& rng, int64_t count) {
  std::vector<float> w(static_cast<size_t>(count));
  for (float& x : w) {
    const auto bits = static_cast<int64_t>(rng.engine() & 0xFFFFu) - 32768;
    x = bf16(static_cast<float>(static_cast<double>(bits) * (0.05 / 32768.0)));
  }
  return w;
}

struct ProjectionCase {
  int64_t heads;
  int64_t head_dim;
  int64_t rope_dim;
  int64_t groups;
  int64_t rank;
};

TEST_CASE("CudaBackend output_projection equals the CPU backend bit for bit", "[gpu][backend_ops]") {
  Rng rng = seeded_rng("output_projection");
  const flashkv::RopeScaling yarn;
  for (const ProjectionCase& pc : {ProjectionCase{64, 512, 64, 8, 1024},  // V4.1: wo_a [8192, 4096]
                                   ProjectionCase{4, 96, 32, 2, 32}}) {   // tiny-v41
    const int64_t cols = pc.heads * pc.head_dim;
    const int64_t a_cols = pc.groups * pc.rank;
    const std::vector<float> wo_a = random_weights(rng, a_cols * (cols / pc.groups));
    const be::ConstMatrix wo{wo_a.data(), a_cols, cols / pc.groups};
    // small and large positions (YaRN's long range, beyond the original 65536)
    const std::vector<int64_t> positions{0, 4095, 65537, int64_t{1} << 20, rng.integer(0, int64_t{1} << 22)};
    const auto n = static_cast<int64_t>(positions.size());
    for (const Rounding rounding : {Rounding::kFaithful, Rounding::kClean}) {
      const be::RopeTable table = be::make_rope_table(pc.rope_dim, 10000.0, &yarn, rounding);
      // attention outputs: BF16-valued in faithful mode, as the engine's; full fp32 in clean mode
      const std::vector<float> o = random_rows(rng, n, cols, rounding == Rounding::kFaithful);
      const be::ConstMatrix om{o.data(), n, cols};
      std::vector<float> want(static_cast<size_t>(n * a_cols));
      poison(want);
      cpu().output_projection(om, pc.heads, positions, table, wo, pc.groups,
                              be::Matrix{want.data(), n, a_cols}, rounding);
      INFO("heads " << pc.heads << " head_dim " << pc.head_dim << " groups " << pc.groups
                    << (rounding == Rounding::kFaithful ? " bf16" : " fp32"));
      for (const GpuUnderTest& g : gpus()) {
        std::vector<float> got(want.size());
        poison(got);
        g.backend->output_projection(om, pc.heads, positions, table, wo, pc.groups,
                                     be::Matrix{got.data(), n, a_cols}, rounding);
        require_same_floats(want, got, std::string("output_projection ") + g.name);
      }
    }
  }
  std::printf("backend ops output_projection: V4.1 and tiny shapes bit-identical, 5 positions up to 2^22\n");
}

}  // namespace

namespace {

// Median wall time of `call` in microseconds: two warm-up calls, then 5 to 31 timed ones (as many as fit
// in ~50 ms: the one-row calls are ~10 us and need the larger sample).
template <typename Call>
double median_us(Call call) {
  call();
  call();
  std::vector<double> times;
  double total = 0.0;
  while (times.size() < 5 || (times.size() < 31 && total < 5e4)) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    total += times.back();
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One op at one shape on the CPU backend, the CUDA backend with its default thresholds and the CUDA
// backend with every call on the device: prints the three times. `run(backend)` does the call.
template <typename Run>
void time_op(const std::string& what, int64_t n, Run run) {
  const double cpu_us = median_us([&] { run(cpu()); });
  const double default_us = median_us([&] { run(static_cast<const be::Backend&>(gpu_default())); });
  const double device_us = median_us([&] { run(static_cast<const be::Backend&>(gpu())); });
  const std::string label = what + " n=" + std::to_string(n);
  std::printf("backend ops timing: %-46s cpu %9.1f us  cuda %9.1f us  device %9.1f us  (cpu/device %.2fx)\n",
              label.c_str(), cpu_us, default_us, device_us, cpu_us / device_us);
}

}  // namespace

// Not a benchmark: per-call wall time of each KV write op at V4.1's decode (one row) and prefill shapes and
// the row counts between, so the GPU rounds show the crossover of the CPU backend and the device (the
// "device" column: every call on the GPU), and what the default thresholds pick (the "cuda" column), while
// the Backend still passes host views (each device call copies in and out through pinned staging).
TEST_CASE("CudaBackend KV write path: wall time against the CPU backend at V4.1 shapes",
          "[gpu][backend_ops]") {
  if (flashkv::test::small_scale()) return;
  Rng rng(flashkv::test::fresh_seed());
  const flashkv::RopeScaling yarn;
  const be::RopeTable table = be::make_rope_table(64, 10000.0, &yarn, Rounding::kFaithful);
  const int64_t max_rows = 2048;
  const std::vector<float> x = random_rows(rng, max_rows, 512, true);
  std::vector<uint8_t> records(static_cast<size_t>(max_rows) *
                               be::record_bytes(RecordFormat::kFp8Bf16Rope, 512, 64));
  std::vector<float> rows(x.size());
  std::vector<int64_t> positions(static_cast<size_t>(max_rows));
  for (int64_t i = 0; i < max_rows; ++i) positions[static_cast<size_t>(i)] = 1000 + i;
  std::vector<float> weight(512);
  for (float& w : weight) w = bf16(static_cast<float>(1.0 + 0.3 * rng.normal()));
  for (const int64_t n : {1, 2, 4, 8, 16, 64, 2048}) {
    const be::ConstMatrix in{x.data(), n, 512};
    time_op("quantize_rows fp8 512 +dequantized", n, [&](const be::Backend& b) {
      b.quantize_rows(in, RecordFormat::kFp8, records, be::Matrix{rows.data(), n, 512});
    });
    time_op("quantize_rows nvfp4 512", n,
            [&](const be::Backend& b) { b.quantize_rows(in, RecordFormat::kNvfp4, records, be::Matrix{}); });
    time_op("quantize_rope_rows 512/64 +dequantized", n, [&](const be::Backend& b) {
      b.quantize_rope_rows(in, 64, records, be::Matrix{rows.data(), n, 512});
    });
    time_op("norm_rope_quantize fp8 512 (window rows)", n, [&](const be::Backend& b) {
      b.norm_rope_quantize(in, weight, 1e-6, std::span(positions).first(static_cast<size_t>(n)), table,
                           RecordFormat::kFp8, 0, records, be::Matrix{}, Rounding::kFaithful);
    });
  }
  for (const int64_t n : {1, 16, 64, 256, 2048}) {
    time_op("rope 1x512 (window rows)", n, [&](const be::Backend& b) {
      std::copy_n(x.begin(), n * 512, rows.begin());
      b.rope(be::Matrix{rows.data(), n, 512}, 1, std::span(positions).first(static_cast<size_t>(n)), table,
             false, Rounding::kFaithful);
    });
  }
  const int64_t max_queries = 128;
  const std::vector<float> q = random_rows(rng, max_queries, 64 * 512, true);
  std::vector<float> work(q.size());
  for (const int64_t n : {1, 4, 16, 128}) {
    const std::vector<int64_t> query_positions(static_cast<size_t>(n), 5000);
    time_op("rope 64x512 (queries)", n, [&](const be::Backend& b) {
      std::copy_n(q.begin(), n * 64 * 512, work.begin());
      b.rope(be::Matrix{work.data(), n, 64 * 512}, 64, query_positions, table, false, Rounding::kFaithful);
    });
    time_op("fake_quantize mxfp4 64x128 (index queries)", n, [&](const be::Backend& b) {
      std::copy_n(q.begin(), n * 64 * 128, work.begin());
      b.fake_quantize(be::Matrix{work.data(), n, 64 * 128}, RecordFormat::kMxfp4);
    });
  }
  struct PoolShape {
    int64_t ratio;
    int64_t groups;
  };
  for (const PoolShape& ps :
       {PoolShape{4, 1}, PoolShape{8, 1}, PoolShape{128, 1}, PoolShape{8, 512}, PoolShape{128, 32}}) {
    const std::vector<float> v = random_rows(rng, ps.groups * ps.ratio, 512, false);
    const std::vector<float> g = random_rows(rng, ps.groups * ps.ratio, 512, false);
    std::vector<float> pooled(static_cast<size_t>(ps.groups * 512));
    time_op("compressor_pool 512 ratio " + std::to_string(ps.ratio) + " (groups)", ps.groups,
            [&](const be::Backend& b) {
              b.compressor_pool(be::ConstMatrix{v.data(), ps.groups * ps.ratio, 512},
                                be::ConstMatrix{g.data(), ps.groups * ps.ratio, 512}, ps.ratio,
                                be::Matrix{pooled.data(), ps.groups, 512}, Rounding::kFaithful);
            });
  }
}
