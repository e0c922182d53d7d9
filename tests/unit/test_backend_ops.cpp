// CPU backend operations against oracles written here from spec/MODEL.md in long double (independent of the
// kernels' blocking and lane order), on fresh random data (the seed is captured on failure):
// GEMM (all tile edges, batch- and thread-invariance), RMSNorm, RoPE (+YaRN bounds of the official config),
// top-k tie rule and −1 padding, candidate pool, index scores, sparse attention with sink, mHC mixer
// (Sinkhorn doubly stochastic), router, compressor pooling, MoE experts, Engram gate, KV record quantization.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "random_inputs.hpp"

namespace {

using flashkv::backend::Backend;
using flashkv::backend::ConstMatrix;
using flashkv::backend::Matrix;
using flashkv::backend::OutputCast;
using flashkv::backend::RecordFormat;
using flashkv::backend::Rounding;
using flashkv::testing::fresh_seed;
using flashkv::testing::normal;
using Real = long double;

constexpr float kInf = std::numeric_limits<float>::infinity();

float bf16(float x) {
  return flashkv::numeric::bf16_to_float(flashkv::numeric::bf16_from_float(x));
}

// |got − want| within `ulps` units of float precision of |want| (plus an absolute floor for values near 0).
bool close(float got, Real want, Real relative = 4e-7L, Real floor = 1e-30L) {
  return std::fabs(static_cast<Real>(got) - want) <= relative * std::fabs(want) + floor;
}

const Backend& backend(int threads) {
  static const auto one = flashkv::backend::make_cpu_backend(1);
  static const auto three = flashkv::backend::make_cpu_backend(3);
  return threads == 1 ? *one : *three;
}

Real sigmoid(Real x) {
  return 1 / (1 + std::exp(-x));
}

}  // namespace

TEST_CASE("backend gemm: every tile shape, the spec sum, batch and thread invariant", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  for (const auto [n, m, k] :
       {std::array<int64_t, 3>{1, 1, 1}, {3, 5, 7}, {17, 33, 70}, {4, 8, 256}, {22, 9, 15}}) {
    CAPTURE(n, m, k);
    const std::vector<float> x = normal(gen, static_cast<size_t>(n * k)),
                             w = normal(gen, static_cast<size_t>(m * k));
    std::vector<float> y(static_cast<size_t>(n * m)), y3(y.size()), yb(y.size());
    backend(1).gemm(ConstMatrix{x.data(), n, k}, ConstMatrix{w.data(), m, k}, Matrix{y.data(), n, m},
                    OutputCast::kFp32, Rounding::kClean);
    backend(3).gemm(ConstMatrix{x.data(), n, k}, ConstMatrix{w.data(), m, k}, Matrix{y3.data(), n, m},
                    OutputCast::kFp32, Rounding::kClean);
    backend(1).gemm(ConstMatrix{x.data(), n, k}, ConstMatrix{w.data(), m, k}, Matrix{yb.data(), n, m},
                    OutputCast::kBf16, Rounding::kFaithful);
    REQUIRE(y == y3);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<float> alone(static_cast<size_t>(m));
      backend(1).gemm(ConstMatrix{x.data() + r * k, 1, k}, ConstMatrix{w.data(), m, k},
                      Matrix{alone.data(), 1, m}, OutputCast::kFp32, Rounding::kClean);
      REQUIRE(std::equal(alone.begin(), alone.end(), y.begin() + r * m));
      for (int64_t c = 0; c < m; ++c) {
        Real want = 0;
        for (int64_t i = 0; i < k; ++i)
          want += static_cast<Real>(x[static_cast<size_t>(r * k + i)]) * w[static_cast<size_t>(c * k + i)];
        CHECK(close(y[static_cast<size_t>(r * m + c)], want, 1e-6L, 1e-6L));
        CHECK(yb[static_cast<size_t>(r * m + c)] == bf16(y[static_cast<size_t>(r * m + c)]));
      }
    }
  }
}

TEST_CASE("backend rms_norm: w ⊙ x / sqrt(mean(x²) + eps), BF16 in faithful mode", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t n = 5, d = 48;
  const std::vector<float> x = normal(gen, n * d, 3.0f), w = normal(gen, d);
  std::vector<float> y(x.size()), yb(x.size());
  backend(1).rms_norm(ConstMatrix{x.data(), n, d}, w, 1e-20, Matrix{y.data(), n, d}, Rounding::kClean);
  backend(1).rms_norm(ConstMatrix{x.data(), n, d}, w, 1e-20, Matrix{yb.data(), n, d}, Rounding::kFaithful);
  for (int64_t r = 0; r < n; ++r) {
    Real ms = 0;
    for (int64_t c = 0; c < d; ++c) ms += static_cast<Real>(x[r * d + c]) * x[r * d + c];
    ms /= d;
    for (int64_t c = 0; c < d; ++c) {
      CHECK(close(y[r * d + c], w[c] * (x[r * d + c] / std::sqrt(ms + 1e-20L))));
      CHECK(yb[r * d + c] == bf16(y[r * d + c]));
    }
  }
}

TEST_CASE("backend rope: rotates only the last pairs, inverse undoes it, YaRN ramp of the official config",
          "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const flashkv::RopeScaling yarn;  // factor 16, L0 65536, β 32 / 1: spec §2.3 gives low 15, high 25
  const auto table = flashkv::backend::make_rope_table(64, 160000.0, &yarn, Rounding::kClean);
  for (int i = 0; i < 32; ++i) {
    const Real plain = std::pow(160000.0L, -2.0L * i / 64);
    const Real ramp = std::clamp((i - 15.0L) / 10.0L, 0.0L, 1.0L);
    const Real want = plain * (1 - ramp) + plain / 16 * ramp;
    CHECK(std::fabs(static_cast<Real>(table.freqs[static_cast<size_t>(i)]) - want) <= 1e-13L * want);
  }
  const int64_t heads = 3, dim = 96, n = 4;
  const std::vector<float> x = normal(gen, n * heads * dim);
  std::vector<float> y = x;
  const std::vector<int64_t> positions = {0, 1, 77, 4095};
  backend(1).rope(Matrix{y.data(), n, heads * dim}, heads, positions, table, false, Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = x.data() + (r * heads + h) * dim;
      const float* out = y.data() + (r * heads + h) * dim;
      for (int64_t c = 0; c < dim - 64; ++c) REQUIRE(out[c] == in[c]);
      for (int64_t i = 0; i < 32; ++i) {
        const Real angle =
            static_cast<Real>(positions[r]) * static_cast<Real>(table.freqs[static_cast<size_t>(i)]);
        const Real re = in[dim - 64 + 2 * i], im = in[dim - 64 + 2 * i + 1];
        CHECK(close(out[dim - 64 + 2 * i], re * std::cos(angle) - im * std::sin(angle), 1e-6L, 1e-6L));
        CHECK(close(out[dim - 64 + 2 * i + 1], re * std::sin(angle) + im * std::cos(angle), 1e-6L, 1e-6L));
      }
    }
  }
  backend(1).rope(Matrix{y.data(), n, heads * dim}, heads, positions, table, true, Rounding::kClean);
  for (size_t i = 0; i < x.size(); ++i) CHECK(close(y[i], x[i], 1e-6L, 1e-6L));
}

TEST_CASE("backend top_k: lowest index among equals, ascending, −∞ and missing columns −1 after the valid",
          "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> level(-2, 3);  // few distinct values: many ties; -2 stands for −∞
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t m = 1 + trial % 23, k = 1 + (trial * 7) % 30;
    std::vector<float> scores(static_cast<size_t>(m));
    for (float& s : scores) s = level(gen) == -2 ? -kInf : static_cast<float>(level(gen));
    std::vector<int32_t> got(static_cast<size_t>(k));
    backend(1).top_k(ConstMatrix{scores.data(), 1, m}, k, got);
    // oracle: j is chosen iff fewer than k entries beat it (higher score, or equal score and lower index)
    std::vector<int32_t> want;
    for (int64_t j = 0; j < m; ++j) {
      int64_t better = 0;
      for (int64_t i = 0; i < m; ++i) better += scores[i] > scores[j] || (scores[i] == scores[j] && i < j);
      if (better < k && scores[j] != -kInf) want.push_back(static_cast<int32_t>(j));
    }
    want.resize(static_cast<size_t>(k), -1);
    REQUIRE(got == want);
  }
}

TEST_CASE("backend candidate_pool: block maxima, newest block forced, top blocks, visible entries only",
          "[backend]") {
  // 10 entries in blocks of 3: [0,1,2] [3,4,5] [6,7,8] [9]; 8 visible, so the newest block is [6,7,8]
  // (forced).
  const std::vector<float> scores = {0.5f, 2.0f, 0.1f, 1.0f, 1.0f, 0.9f, -kInf, -kInf, -kInf, -kInf};
  const std::vector<int64_t> visible = {8};
  std::vector<uint8_t> pool(10);
  backend(1).candidate_pool(ConstMatrix{scores.data(), 1, 10}, visible, 3, 2, pool);
  // blocks: 2.0, 1.0, +∞ (forced), −∞ → keep the newest and block 0; block 2 keeps only its visible entries
  REQUIRE(pool == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 1, 1, 0, 0});
  std::vector<float> restricted = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
  backend(1).restrict_to_pool(Matrix{restricted.data(), 1, 10}, pool);
  for (size_t j = 0; j < 10; ++j) REQUIRE((restricted[j] == 5.0f) == (pool[j] == 1));
  const std::vector<int64_t> none = {0};
  backend(1).candidate_pool(ConstMatrix{scores.data(), 1, 10}, none, 3, 2, pool);
  REQUIRE(std::count(pool.begin(), pool.end(), 1) == 0);
}

TEST_CASE("backend index_scores: Σ_h w_h·ReLU(q_h·k_j) over visible entries", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t n = 3, heads = 2, dim = 32, m = 7;
  const std::vector<float> q = normal(gen, n * heads * dim), w = normal(gen, n * heads),
                           keys = normal(gen, m * dim);
  const std::vector<int64_t> visible = {0, 4, 7};
  flashkv::backend::IndexScoring problem;
  problem.queries = ConstMatrix{q.data(), n, heads * dim};
  problem.head_weights = ConstMatrix{w.data(), n, heads};
  problem.heads = heads;
  problem.keys = {RecordFormat::kFp32, reinterpret_cast<const uint8_t*>(keys.data()), m, dim};
  problem.n_visible = visible;
  std::vector<float> scores(n * m);
  backend(1).index_scores(problem, Matrix{scores.data(), n, m}, Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < m; ++j) {
      if (j >= visible[r]) {
        REQUIRE(scores[r * m + j] == -kInf);
        continue;
      }
      Real want = 0;
      for (int64_t h = 0; h < heads; ++h) {
        Real d = 0;
        for (int64_t c = 0; c < dim; ++c)
          d += static_cast<Real>(q[(r * heads + h) * dim + c]) * keys[j * dim + c];
        want += w[r * heads + h] * std::max(d, 0.0L);
      }
      CHECK(close(scores[r * m + j], want, 1e-6L, 1e-6L));
    }
  }
}

TEST_CASE("backend sparse_attention: one softmax over window ∪ selected entries with the sink", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t heads = 2, dim = 32, window = 3, entries = 5, topk = 3;
  const std::vector<float> q = normal(gen, 2 * heads * dim), rows = normal(gen, 4 * dim),
                           cache = normal(gen, entries * dim);
  const std::vector<float> sink = normal(gen, heads);
  const std::vector<int64_t> row_positions = {7, 8, 9, 10}, query_positions = {9, 10};
  const std::vector<int32_t> selection = {4, 0, -1, 2, -1, -1};
  flashkv::backend::SparseAttention problem;
  problem.q = ConstMatrix{q.data(), 2, heads * dim};
  problem.heads = heads;
  problem.window = ConstMatrix{rows.data(), 4, dim};
  problem.window_positions = row_positions;
  problem.query_positions = query_positions;
  problem.sliding_window = window;
  problem.entries = {RecordFormat::kFp32, reinterpret_cast<const uint8_t*>(cache.data()), entries, dim};
  problem.selection = selection;
  problem.topk = topk;
  problem.sink = sink;
  std::vector<float> out(2 * heads * dim);
  backend(1).sparse_attention(problem, Matrix{out.data(), 2, heads * dim}, Rounding::kClean);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<const float*> keys;
    for (int64_t t = 0; t < 4; ++t) {
      if (row_positions[t] <= query_positions[r] && row_positions[t] > query_positions[r] - window)
        keys.push_back(rows.data() + t * dim);
    }
    for (int64_t i = 0; i < topk; ++i) {
      if (selection[r * topk + i] >= 0) keys.push_back(cache.data() + selection[r * topk + i] * dim);
    }
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<Real> e;
      Real total = std::exp(static_cast<Real>(sink[h]));
      for (const float* k : keys) {
        Real logit = 0;
        for (int64_t c = 0; c < dim; ++c) logit += static_cast<Real>(q[(r * heads + h) * dim + c]) * k[c];
        e.push_back(std::exp(logit / std::sqrt(static_cast<Real>(dim))));
        total += e.back();
      }
      for (int64_t c = 0; c < dim; ++c) {
        Real want = 0;
        for (size_t t = 0; t < keys.size(); ++t) want += e[t] / total * keys[t][c];
        CHECK(close(out[(r * heads + h) * dim + c], want, 1e-6L, 1e-6L));
      }
    }
  }
}

TEST_CASE("backend hc_mixer: pre, post and a doubly stochastic Sinkhorn comb from the spec formulas",
          "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t n = 3, hc = 4, d = 16, mix = (2 + hc) * hc;
  const std::vector<float> streams = normal(gen, n * hc * d), fn = normal(gen, mix * hc * d, 0.05f);
  const std::vector<float> base = normal(gen, mix, 0.1f), scale = {0.7f, 1.2f, 0.9f};
  std::vector<float> pre(n * hc), post(n * hc), comb(n * hc * hc);
  backend(1).hc_mixer(ConstMatrix{streams.data(), n, hc * d},
                      {ConstMatrix{fn.data(), mix, hc * d}, base, scale}, {hc, 20, 1e-6, 1e-20},
                      Matrix{pre.data(), n, hc}, Matrix{post.data(), n, hc}, Matrix{comb.data(), n, hc * hc},
                      Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    Real ms = 0;
    for (int64_t c = 0; c < hc * d; ++c)
      ms += static_cast<Real>(streams[r * hc * d + c]) * streams[r * hc * d + c];
    const Real root = std::sqrt(ms / (hc * d) + 1e-20L);
    std::vector<Real> z(mix);
    for (int64_t o = 0; o < mix; ++o) {
      Real dot = 0;
      for (int64_t c = 0; c < hc * d; ++c)
        dot += static_cast<Real>(fn[o * hc * d + c]) * streams[r * hc * d + c];
      z[o] = base[o] + dot / root * scale[o < hc ? 0 : o < 2 * hc ? 1 : 2];
    }
    for (int64_t i = 0; i < hc; ++i) {
      CHECK(close(pre[r * hc + i], sigmoid(z[i]) + 1e-6L, 1e-6L));
      CHECK(close(post[r * hc + i], 2 * sigmoid(z[hc + i]), 1e-6L));
    }
    for (int64_t i = 0; i < hc; ++i) {  // rows and columns of the comb sum to ~1 after 20 rounds
      Real row = 0, column = 0;
      for (int64_t j = 0; j < hc; ++j) {
        row += comb[r * hc * hc + i * hc + j];
        column += comb[r * hc * hc + j * hc + i];
      }
      CHECK(std::fabs(row - 1) < 1e-3L);
      CHECK(std::fabs(column - 1) < 1e-5L);
    }
  }
}

TEST_CASE("backend route and moe_experts: sqrtsoftplus router and clamped SwiGLU experts", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t n = 6, d = 24, experts = 5, k = 2, inter = 16;
  const double limit = 0.5, scaling = 1.5;
  const std::vector<float> v = normal(gen, n * d), gate = normal(gen, experts * d, 0.3f),
                           bias = normal(gen, experts, 0.1f);
  std::vector<int32_t> chosen(n * k);
  std::vector<float> weights(n * k);
  backend(1).route(ConstMatrix{v.data(), n, d}, {ConstMatrix{gate.data(), experts, d}, bias, k, scaling},
                   chosen, Matrix{weights.data(), n, k}, Rounding::kClean);
  std::vector<std::vector<float>> w1, w3, w2;
  std::vector<flashkv::backend::ExpertWeights> views;
  for (int64_t e = 0; e <= experts; ++e) {  // the last one is the shared expert
    w1.push_back(normal(gen, inter * d, 0.3f));
    w3.push_back(normal(gen, inter * d, 0.3f));
    w2.push_back(normal(gen, d * inter, 0.3f));
  }
  for (int64_t e = 0; e <= experts; ++e) {
    views.push_back({ConstMatrix{w1[e].data(), inter, d}, ConstMatrix{w3[e].data(), inter, d},
                     ConstMatrix{w2[e].data(), d, inter}});
  }
  std::vector<float> out(n * d);
  backend(3).moe_experts(ConstMatrix{v.data(), n, d}, std::span(views).first(experts), chosen,
                         ConstMatrix{weights.data(), n, k}, &views.back(), limit, Matrix{out.data(), n, d},
                         Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<Real> sigma(experts);
    for (int64_t e = 0; e < experts; ++e) {
      Real logit = 0;
      for (int64_t c = 0; c < d; ++c) logit += static_cast<Real>(v[r * d + c]) * gate[e * d + c];
      sigma[e] = std::sqrt(std::log1p(std::exp(logit)));
    }
    std::vector<int32_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return sigma[a] + bias[a] > sigma[b] + bias[b]; });
    const Real total = sigma[order[0]] + sigma[order[1]];
    std::vector<Real> want(d, 0);
    const auto expert = [&](int64_t e, Real weight) {
      for (int64_t j = 0; j < inter; ++j) {
        Real g = 0, u = 0;
        for (int64_t c = 0; c < d; ++c) {
          g += static_cast<Real>(v[r * d + c]) * w1[e][j * d + c];
          u += static_cast<Real>(v[r * d + c]) * w3[e][j * d + c];
        }
        g = std::min<Real>(g, limit);
        u = std::clamp<Real>(u, -limit, limit);
        const Real hidden = g * sigmoid(g) * u * weight;
        for (int64_t c = 0; c < d; ++c) want[c] += hidden * w2[e][c * inter + j];
      }
    };
    for (int64_t i = 0; i < k; ++i) {
      REQUIRE(chosen[r * k + i] == order[i]);
      CHECK(close(weights[r * k + i], scaling * sigma[order[i]] / total, 1e-6L));
      expert(order[i], scaling * sigma[order[i]] / total);
    }
    expert(experts, 1);
    for (int64_t c = 0; c < d; ++c) CHECK(close(out[r * d + c], want[c], 1e-5L, 1e-6L));
  }
}

TEST_CASE("backend compressor_pool and engram_gate from the spec formulas", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t groups = 3, ratio = 2, dim = 8;
  const std::vector<float> v = normal(gen, groups * ratio * dim), g = normal(gen, groups * ratio * dim, 2.0f);
  std::vector<float> pooled(groups * dim);
  backend(1).compressor_pool(ConstMatrix{v.data(), groups * ratio, dim},
                             ConstMatrix{g.data(), groups * ratio, dim}, ratio,
                             Matrix{pooled.data(), groups, dim}, Rounding::kClean);
  for (int64_t j = 0; j < groups; ++j) {
    for (int64_t c = 0; c < dim; ++c) {
      const Real a = std::exp(static_cast<Real>(g[(2 * j) * dim + c])),
                 b = std::exp(static_cast<Real>(g[(2 * j + 1) * dim + c]));
      CHECK(close(pooled[j * dim + c], (a * v[(2 * j) * dim + c] + b * v[(2 * j + 1) * dim + c]) / (a + b),
                  1e-6L, 1e-7L));
    }
  }
  const int64_t n = 2, hc = 4, d = 16;
  std::vector<float> streams = normal(gen, n * hc * d);
  const std::vector<float> before = streams, kv = normal(gen, n * (hc + 1) * d), omega = normal(gen, hc * d);
  backend(1).engram_gate(Matrix{streams.data(), n, hc * d}, ConstMatrix{kv.data(), n, (hc + 1) * d}, omega,
                         hc, 1e-20, Rounding::kClean);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < hc; ++i) {
      Real xx = 0, kk = 0, dot = 0;
      for (int64_t c = 0; c < d; ++c) {
        const Real x = before[(r * hc + i) * d + c], key = kv[r * (hc + 1) * d + i * d + c];
        xx += x * x;
        kk += key * key;
        dot += x * omega[i * d + c] * key;
      }
      dot = dot / std::sqrt(xx / d) / std::sqrt(kk / d) / std::sqrt(static_cast<Real>(d));
      const Real gate = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(dot), 1e-6L)), dot));
      for (int64_t c = 0; c < d; ++c) {
        CHECK(close(streams[(r * hc + i) * d + c],
                    before[(r * hc + i) * d + c] + gate * kv[r * (hc + 1) * d + hc * d + c], 1e-6L, 1e-7L));
      }
    }
  }
}

TEST_CASE("backend quantize_rows: the numeric record codecs, decoded values alongside", "[backend]") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const int64_t n = 3, dim = 64;
  const std::vector<float> x = normal(gen, n * dim, 2.0f);
  for (const RecordFormat format :
       {RecordFormat::kFp8, RecordFormat::kNvfp4, RecordFormat::kMxfp4, RecordFormat::kFp32}) {
    const size_t bytes = flashkv::backend::record_bytes(format, dim);
    std::vector<uint8_t> records(n * bytes), expected(n * bytes);
    std::vector<float> values(n * dim), faked = x;
    backend(1).quantize_rows(ConstMatrix{x.data(), n, dim}, format, records, Matrix{values.data(), n, dim});
    backend(1).fake_quantize(Matrix{faked.data(), n, dim}, format);
    for (int64_t r = 0; r < n; ++r) {
      const float* row = x.data() + r * dim;
      uint8_t* out = expected.data() + r * bytes;
      if (format == RecordFormat::kFp8) flashkv::numeric::quantize_fp8_row(row, dim, out);
      if (format == RecordFormat::kNvfp4) flashkv::numeric::quantize_nvfp4_entry(row, dim, out);
      if (format == RecordFormat::kMxfp4) flashkv::numeric::quantize_mxfp4_key(row, dim, out);
      if (format == RecordFormat::kFp32) std::memcpy(out, row, bytes);
    }
    REQUIRE(records == expected);
    REQUIRE(values == faked);
  }
  REQUIRE(flashkv::backend::record_bytes(RecordFormat::kFp8, 512) == 528);
  REQUIRE(flashkv::backend::record_bytes(RecordFormat::kNvfp4, 512) == 288);
  REQUIRE(flashkv::backend::record_bytes(RecordFormat::kMxfp4, 128) == 68);
}
