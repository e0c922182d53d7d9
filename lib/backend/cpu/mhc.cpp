// Single-pass mHC (spec §3, §4): the per-site mixer (pre, post, Sinkhorn-normalised comb), collapse and
// expand.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm_kernel.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {
namespace {

// §4 Sinkhorn on m[i][j] (row = input stream i): softmax over j + eps, divide by column sums + eps, then
// iterations − 1 rounds of row then column normalisation (each sum + eps). In place, double.
void sinkhorn(std::vector<double>& m, int64_t hc, int64_t iterations, double eps) {
  const auto at = [&](int64_t i, int64_t j) -> double& { return m[static_cast<size_t>(i * hc + j)]; };
  const auto normalize_columns = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < hc; ++i) sum += at(i, j);
      for (int64_t i = 0; i < hc; ++i) at(i, j) = at(i, j) / (sum + eps);
    }
  };
  for (int64_t i = 0; i < hc; ++i) {
    double peak = at(i, 0);
    for (int64_t j = 1; j < hc; ++j) peak = std::max(peak, at(i, j));
    double sum = 0;
    for (int64_t j = 0; j < hc; ++j) sum += (at(i, j) = std::exp(at(i, j) - peak));
    for (int64_t j = 0; j < hc; ++j) at(i, j) = at(i, j) / sum + eps;
  }
  normalize_columns();
  for (int64_t round = 1; round < iterations; ++round) {
    for (int64_t i = 0; i < hc; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < hc; ++j) sum += at(i, j);
      for (int64_t j = 0; j < hc; ++j) at(i, j) = at(i, j) / (sum + eps);
    }
    normalize_columns();
  }
}

}  // namespace

void CpuBackend::hc_mixer(ConstMatrix streams, const MixerWeights& weights, const MixerShape& shape,
                          Matrix pre, Matrix post, Matrix comb, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t hc = shape.hc;
  const int64_t width = streams.cols;
  const int64_t mix = weights.fn.rows;
  // fn·f of every row first (the GEMM part), then each row's scaling, sigmoids and Sinkhorn
  std::vector<double> products(static_cast<size_t>(streams.rows * mix));
  constexpr int64_t kRowsPerTask = 8;
  const int64_t tasks = (streams.rows + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, static_cast<double>(streams.rows * mix * width), [&](int64_t t) {
    const int64_t first = t * kRowsPerTask;
    const int64_t rows = std::min(kRowsPerTask, streams.rows - first);
    gemm_double(ConstMatrix{streams.row(first), rows, width}, weights.fn, products.data() + first * mix);
  });
  parallel_for(streams.rows, static_cast<double>(streams.rows * width), [&](int64_t r) {
    const float* flat = streams.row(r);
    const double root = std::sqrt(sum_of_squares(flat, width) / static_cast<double>(width) + shape.norm_eps);
    std::vector<double> z(static_cast<size_t>(mix));
    for (int64_t o = 0; o < mix; ++o) {
      const double scale = weights.scale[o < hc ? 0 : o < 2 * hc ? 1 : 2];
      const double mixed = products[static_cast<size_t>(r * mix + o)] / root;
      z[static_cast<size_t>(o)] = fp32_if(static_cast<double>(weights.base[o]) + mixed * scale, exact);
    }
    for (int64_t i = 0; i < hc; ++i) {
      pre.row(r)[i] = static_cast<float>(sigmoid(z[static_cast<size_t>(i)]) + shape.hc_eps);
      post.row(r)[i] = static_cast<float>(2.0 * sigmoid(z[static_cast<size_t>(hc + i)]));
    }
    std::vector<double> m(z.begin() + 2 * hc, z.end());
    sinkhorn(m, hc, shape.sinkhorn_iters, shape.hc_eps);
    for (int64_t k = 0; k < hc * hc; ++k) comb.row(r)[k] = static_cast<float>(m[static_cast<size_t>(k)]);
  });
}

void CpuBackend::hc_collapse(ConstMatrix streams, ConstMatrix pre, Matrix out, Rounding rounding) const {
  const bool bf16 = faithful(rounding);
  const int64_t hc = pre.cols;
  const int64_t d = out.cols;
  parallel_for(streams.rows, static_cast<double>(streams.rows * streams.cols), [&](int64_t r) {
    const float* x = streams.row(r);
    const float* p = pre.row(r);
    float* y = out.row(r);
    std::vector<double> sum(static_cast<size_t>(d), 0.0);
    for (int64_t i = 0; i < hc; ++i) {
      const double weight = p[i];
      const float* xi = x + i * d;
      for (int64_t c = 0; c < d; ++c) sum[static_cast<size_t>(c)] += weight * static_cast<double>(xi[c]);
    }
    for (int64_t c = 0; c < d; ++c) y[c] = store(sum[static_cast<size_t>(c)], bf16);
  });
}

void CpuBackend::hc_expand(ConstMatrix y, Matrix streams, ConstMatrix post, ConstMatrix comb,
                           Rounding rounding) const {
  const bool bf16 = faithful(rounding);
  const int64_t hc = post.cols;
  const int64_t d = y.cols;
  parallel_for(streams.rows, static_cast<double>(streams.rows * streams.cols * hc), [&](int64_t r) {
    float* x = streams.row(r);
    const float* m = comb.row(r);
    const float* yr = y.row(r);
    std::vector<float> mixed(static_cast<size_t>(hc * d));
    std::vector<double> sum(static_cast<size_t>(d));
    for (int64_t j = 0; j < hc; ++j) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t i = 0; i < hc; ++i) {
        const double weight = m[i * hc + j];
        const float* xi = x + i * d;
        for (int64_t c = 0; c < d; ++c) sum[static_cast<size_t>(c)] += weight * static_cast<double>(xi[c]);
      }
      const double pj = post.row(r)[j];
      float* out = mixed.data() + j * d;
      for (int64_t c = 0; c < d; ++c)
        out[c] = store(pj * static_cast<double>(yr[c]) + sum[static_cast<size_t>(c)], bf16);
    }
    std::copy(mixed.begin(), mixed.end(), x);
  });
}

}  // namespace flashkv::backend::cpu
