// The CPU backend's V4-Flash operations against oracles written here in long double from the
// transformers 5.24 formulas (docs/cpu-engine.md "V4-Flash"), on fresh random data: the kFp8Bf16Rope KV
// record (scale rule by frexp, not by the numeric codecs), the Hadamard rotation (explicit ±1 matrix),
// hc_head, and hash routing.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <flashkv/numeric/scalar_codecs.hpp>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "random_inputs.hpp"

namespace {

using flashkv::backend::ConstMatrix;
using flashkv::backend::Matrix;
using flashkv::backend::MixerShape;
using flashkv::backend::MixerWeights;
using flashkv::backend::RecordFormat;
using flashkv::backend::RecordRows;
using flashkv::backend::Rounding;
using flashkv::backend::RouterWeights;
using flashkv::testing::fresh_seed;
using flashkv::testing::normal;
using Real = long double;

const flashkv::backend::Backend& cpu() {
  static const auto backend = flashkv::backend::make_cpu_backend(1);
  return *backend;
}

Real sigmoid(Real x) {
  return 1 / (1 + std::exp(-x));
}

}  // namespace

TEST_CASE("V4 KV record: 584 B official; FP8 non-RoPE channels per 64-channel block, BF16 RoPE channels",
          "[backend][v4]") {
  REQUIRE(flashkv::backend::record_bytes(RecordFormat::kFp8Bf16Rope, 512, 64) == 584);
  REQUIRE(flashkv::backend::record_bytes(RecordFormat::kFp8Bf16Rope, 72, 8) == 64 + 1 + 7 + 16);
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  for (const auto& [dim, rope] : std::vector<std::pair<int64_t, int64_t>>{{512, 64}, {32, 8}, {200, 8}}) {
    const int64_t n = 3;
    std::vector<float> x = normal(gen, static_cast<size_t>(n * dim), 3.0f);
    x[5] = 0.0f;
    const size_t bytes = flashkv::backend::record_bytes(RecordFormat::kFp8Bf16Rope, dim, rope);
    std::vector<uint8_t> records(n * bytes);
    std::vector<float> decoded(x.size());
    cpu().quantize_rope_rows(ConstMatrix{x.data(), n, dim}, rope, records, Matrix{decoded.data(), n, dim});
    const RecordRows rows{RecordFormat::kFp8Bf16Rope, records.data(), n, dim, rope};
    for (int64_t r = 0; r < n; ++r) {
      std::vector<float> again(static_cast<size_t>(dim));
      rows.dequantize(r, again.data());
      const float* in = x.data() + r * dim;
      const float* out = decoded.data() + r * dim;
      for (int64_t c = 0; c < dim; ++c) REQUIRE(again[static_cast<size_t>(c)] == out[c]);
      const int64_t nope = dim - rope;
      for (int64_t first = 0; first < nope; first += 64) {
        const int64_t last = std::min(first + 64, nope);
        float amax = 1e-4f;
        for (int64_t c = first; c < last; ++c) amax = std::max(amax, std::fabs(in[c]));
        // scale = the smallest power of two >= amax/448 (UE8M0)
        int exponent = 0;
        const float mantissa = std::frexp(amax * (1.0f / 448.0f), &exponent);  // fp32 product, as spec §2.2
        const Real scale = std::ldexp(1.0L, mantissa == 0.5f ? exponent - 1 : exponent);
        for (int64_t c = first; c < last; ++c) {
          const Real q = static_cast<Real>(out[c]) / scale;  // an E4M3 value: |q| <= 448, 3 mantissa bits
          CAPTURE(dim, c, in[c], out[c]);
          REQUIRE(std::fabs(q) <= 448);
          int e = 0;
          const Real m = std::frexp(q, &e);
          REQUIRE((e < -5 ? std::ldexp(q, 9) : m * 16) == std::floor(e < -5 ? std::ldexp(q, 9) : m * 16));
          // nearest E4M3 step: within half a step of the input (steps are 2^(e−4), subnormal 2^-9, times
          // scale)
          const Real step = std::ldexp(scale, std::max(e, -5) - 4);
          REQUIRE(std::fabs(static_cast<Real>(out[c]) - in[c]) <= step / 2);
        }
      }
      for (int64_t c = nope; c < dim; ++c) {
        REQUIRE(out[c] == flashkv::numeric::bf16_to_float(flashkv::numeric::bf16_from_float(in[c])));
      }
    }
  }
}

TEST_CASE("V4 Hadamard rotation: the explicit Sylvester matrix times d^-1/2; twice is the identity",
          "[backend][v4]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  for (const int64_t d : {1, 2, 32, 128}) {
    const int64_t n = 4;
    const std::vector<float> x = normal(gen, static_cast<size_t>(n * d));
    std::vector<float> y = x;
    cpu().hadamard_rotate(Matrix{y.data(), n, d}, Rounding::kClean);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < d; ++i) {
        Real want = 0;
        for (int64_t j = 0; j < d; ++j) {
          const Real sign = __builtin_popcountll(static_cast<unsigned long long>(i & j)) % 2 ? -1 : 1;
          want += sign * x[static_cast<size_t>(r * d + j)];
        }
        want /= std::sqrt(static_cast<Real>(d));
        REQUIRE(std::fabs(y[static_cast<size_t>(r * d + i)] - want) <= 1e-6L * (1 + std::fabs(want)));
      }
    }
    cpu().hadamard_rotate(Matrix{y.data(), n, d}, Rounding::kClean);
    for (size_t k = 0; k < x.size(); ++k) REQUIRE(std::fabs(y[k] - x[k]) <= 1e-5f * (1 + std::fabs(x[k])));
    std::vector<float> z = x;
    cpu().hadamard_rotate(Matrix{z.data(), n, d}, Rounding::kFaithful);
    for (const float v : z)
      REQUIRE(v == flashkv::numeric::bf16_to_float(flashkv::numeric::bf16_from_float(v)));
  }
}

TEST_CASE("V4 hc_head: pre = sigmoid(scale·(fn·f)/rms(f) + base) + hc_eps", "[backend][v4]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t hc = 4, d = 24, n = 5, width = hc * d;
  const std::vector<float> streams = normal(gen, static_cast<size_t>(n * width));
  const std::vector<float> fn = normal(gen, static_cast<size_t>(hc * width), 0.3f);
  const std::vector<float> base = normal(gen, static_cast<size_t>(hc));
  const std::vector<float> scale = {1.3f};
  const MixerShape shape{hc, 20, 1e-6, 1e-6};
  std::vector<float> pre(static_cast<size_t>(n * hc));
  cpu().hc_head(ConstMatrix{streams.data(), n, width},
                MixerWeights{ConstMatrix{fn.data(), hc, width}, base, scale}, shape,
                Matrix{pre.data(), n, hc}, Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    Real squares = 0;
    for (int64_t c = 0; c < width; ++c)
      squares += static_cast<Real>(streams[r * width + c]) * streams[r * width + c];
    const Real root = std::sqrt(squares / width + 1e-6L);
    for (int64_t i = 0; i < hc; ++i) {
      Real mixed = 0;
      for (int64_t c = 0; c < width; ++c)
        mixed += static_cast<Real>(fn[i * width + c]) * streams[r * width + c];
      const Real want = sigmoid(mixed / root * scale[0] + base[i]) + 1e-6L;
      REQUIRE(std::fabs(pre[r * hc + i] - want) <= 1e-6L);
    }
  }
}

TEST_CASE("V4 hash routing: given experts weighted by the gate's normalised sqrt(softplus)",
          "[backend][v4]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t experts = 6, k = 3, d = 16, n = 4;
  const std::vector<float> v = normal(gen, static_cast<size_t>(n * d));
  const std::vector<float> gate = normal(gen, static_cast<size_t>(experts * d), 0.5f);
  const std::vector<float> bias = normal(gen, static_cast<size_t>(experts), 10.0f);  // must not matter
  const std::vector<int32_t> chosen = {5, 0, 2, 1, 4, 3, 3, 1, 0, 2, 5, 4};
  std::vector<float> weights(static_cast<size_t>(n * k));
  cpu().route_given(ConstMatrix{v.data(), n, d},
                    RouterWeights{ConstMatrix{gate.data(), experts, d}, bias, k, 1.5}, chosen,
                    Matrix{weights.data(), n, k}, Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<Real> sigma(static_cast<size_t>(k));
    Real total = 0;
    for (int64_t i = 0; i < k; ++i) {
      Real logit = 0;
      const int32_t e = chosen[static_cast<size_t>(r * k + i)];
      for (int64_t c = 0; c < d; ++c) logit += static_cast<Real>(gate[e * d + c]) * v[r * d + c];
      total += sigma[static_cast<size_t>(i)] = std::sqrt(std::log1p(std::exp(logit)));
    }
    for (int64_t i = 0; i < k; ++i) {
      REQUIRE(std::fabs(weights[r * k + i] - 1.5L * sigma[static_cast<size_t>(i)] / total) <= 1e-6L);
    }
  }
}
