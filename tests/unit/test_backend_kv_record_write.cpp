// Backend::norm_rope_quantize (the window rows' RMSNorm, RoPE and records in one call) is, by its contract,
// exactly rms_norm, rope, then quantize_rows / quantize_rope_rows: checked on the CPU backend for every
// record format the engine writes, in both numerics, on fresh random rows (the seed is captured on failure),
// records byte for byte and decoded rows bit for bit, and its input untouched. (The CUDA backend is held to
// the CPU backend by tests/gpu/test_cuda_backend_ops.cpp.)
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <flashkv/config.hpp>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "random_inputs.hpp"

namespace {

namespace be = flashkv::backend;

struct Case {
  be::RecordFormat format;
  int64_t dim;
  int64_t rope_dim;
  int64_t record_rope_dim;
  be::Rounding rounding;
};

TEST_CASE("norm_rope_quantize equals rms_norm, rope and the quantizer in sequence", "[backend][kv]") {
  const uint64_t seed = flashkv::testing::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const auto backend = be::make_cpu_backend(2);
  const flashkv::RopeScaling yarn;
  for (const Case& c : {Case{be::RecordFormat::kFp8, 512, 64, 0, be::Rounding::kFaithful},
                        Case{be::RecordFormat::kFp8Bf16Rope, 512, 64, 64, be::Rounding::kFaithful},
                        Case{be::RecordFormat::kMxfp4, 128, 64, 0, be::Rounding::kFaithful},
                        Case{be::RecordFormat::kNvfp4, 96, 32, 0, be::Rounding::kFaithful},
                        Case{be::RecordFormat::kFp32, 100, 20, 0, be::Rounding::kClean}}) {
    const be::RopeTable table = be::make_rope_table(c.rope_dim, 10000.0, &yarn, c.rounding);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 9)(gen);
    const std::vector<float> x = flashkv::testing::normal(gen, static_cast<size_t>(n * c.dim), 3.0f);
    const std::vector<float> weight = flashkv::testing::normal(gen, static_cast<size_t>(c.dim));
    std::vector<int64_t> positions(static_cast<size_t>(n));
    for (int64_t& p : positions) p = std::uniform_int_distribution<int64_t>(0, 1 << 20)(gen);
    const size_t bytes = static_cast<size_t>(n) * be::record_bytes(c.format, c.dim, c.record_rope_dim);

    // the sequence the engine ran before the fused call
    std::vector<float> work = x;
    backend->rms_norm(be::ConstMatrix{work.data(), n, c.dim}, weight, 1e-6, be::Matrix{work.data(), n, c.dim},
                      c.rounding);
    backend->rope(be::Matrix{work.data(), n, c.dim}, 1, positions, table, false, c.rounding);
    std::vector<uint8_t> want(bytes);
    std::vector<float> want_rows(work.size());
    if (c.format == be::RecordFormat::kFp8Bf16Rope) {
      backend->quantize_rope_rows(be::ConstMatrix{work.data(), n, c.dim}, c.record_rope_dim, want,
                                  be::Matrix{want_rows.data(), n, c.dim});
    } else {
      backend->quantize_rows(be::ConstMatrix{work.data(), n, c.dim}, c.format, want,
                             be::Matrix{want_rows.data(), n, c.dim});
    }

    const std::vector<float> input = x;
    std::vector<uint8_t> got(bytes, 0xA5);
    std::vector<float> got_rows(work.size(), -1.0f);
    backend->norm_rope_quantize(be::ConstMatrix{input.data(), n, c.dim}, weight, 1e-6, positions, table,
                                c.format, c.record_rope_dim, got, be::Matrix{got_rows.data(), n, c.dim},
                                c.rounding);
    CHECK(got == want);
    CHECK(std::memcmp(got_rows.data(), want_rows.data(), got_rows.size() * sizeof(float)) == 0);
    CHECK(input == x);
  }
}

}  // namespace
