// Top-k selection (spec §5.5, §11.3): torch.topk's order among equal scores is undefined; the reference (and
// flashkv) break ties by the lowest index, so that selections are deterministic. Comparisons with any other
// implementation must stay tie-aware (tests/reference/compare.py).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/topk_kernel.hpp"

namespace flashkv::backend::cpu {

void select_top_k(const float* scores, int64_t m, int64_t k, int32_t* out) {
  std::fill(out, out + k, -1);
  const int64_t take = std::min(k, m);
  if (take <= 0) return;
  const auto score = [&](int32_t i) {
    const float s = scores[i];
    return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
  };
  std::vector<int32_t> order(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const auto before = [&](int32_t a, int32_t b) {
    const float sa = score(a), sb = score(b);
    return sa > sb || (sa == sb && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + take, order.end(), before);
  int64_t valid = 0;
  for (int64_t i = 0; i < take; ++i) {
    const int32_t index = order[static_cast<size_t>(i)];
    if (score(index) != -std::numeric_limits<float>::infinity()) out[valid++] = index;
  }
  std::sort(out, out + valid);
}

void CpuBackend::top_k(ConstMatrix scores, int64_t k, std::span<int32_t> out) const {
  parallel_for(scores.rows, static_cast<double>(scores.rows * scores.cols) * 8,
               [&](int64_t r) { select_top_k(scores.row(r), scores.cols, k, out.data() + r * k); });
}

}  // namespace flashkv::backend::cpu
