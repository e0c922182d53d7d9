// Indexer scoring (spec §5.5): score(s, j) = Σ_h w_h·ReLU(q_h·k_j) over the visible entries, −∞ elsewhere. In
// faithful mode each stage ends in BF16 (dot product, ReLU·w, head sum), as the reference computes it.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::index_scores(const IndexScoring& problem, Matrix scores, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t width = problem.keys.count;
  const int64_t dim = problem.keys.dim;
  const int64_t heads = problem.heads;
  std::vector<float> keys(static_cast<size_t>(width * dim));
  for (int64_t j = 0; j < width; ++j) problem.keys.dequantize(j, keys.data() + j * dim);
  const double work = static_cast<double>(scores.rows * width * heads * dim);
  parallel_for(scores.rows, work, [&](int64_t r) {
    const float* q = problem.queries.row(r);
    const float* w = problem.head_weights.row(r);
    const int64_t visible = std::min(problem.n_visible[static_cast<size_t>(r)], width);
    float* out = scores.row(r);
    for (int64_t j = 0; j < width; ++j) {
      if (j >= visible) {
        out[j] = -std::numeric_limits<float>::infinity();
        continue;
      }
      double sum = 0;
      for (int64_t h = 0; h < heads; ++h) {
        const double product = bf16_if(dot(q + h * dim, keys.data() + j * dim, dim), exact);
        sum += bf16_if(std::max(product, 0.0) * static_cast<double>(w[h]), exact);
      }
      out[j] = store(sum, exact);
    }
  });
}

}  // namespace flashkv::backend::cpu
