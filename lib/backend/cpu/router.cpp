// MoE router (spec §6): σ = sqrt(softplus(gate·v)); selection by σ + bias; weights from the unbiased σ.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {
namespace {

constexpr double kRouterSumEps = 1e-20;  // guard on Σσ of the selected experts [R: TRT-LLM config comment]

// log(1 + e^x) as numpy's logaddexp(0, x) evaluates it.
double softplus(double x) {
  if (x == 0) return std::numbers::ln2;
  return x < 0 ? std::log1p(std::exp(x)) : x + std::log1p(std::exp(-x));
}

}  // namespace

void CpuBackend::route(ConstMatrix v, const RouterWeights& router, std::span<int32_t> experts, Matrix weights,
                       Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t count = router.gate.rows;
  const int64_t k = router.top_k;
  parallel_for(v.rows, static_cast<double>(v.rows * count * v.cols), [&](int64_t r) {
    std::vector<double> sigma(static_cast<size_t>(count)), biased(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) {
      const double logit = fp32_if(dot(v.row(r), router.gate.row(e), v.cols), exact);
      sigma[static_cast<size_t>(e)] = fp32_if(std::sqrt(softplus(logit)), exact);
      biased[static_cast<size_t>(e)] =
          fp32_if(sigma[static_cast<size_t>(e)] + router.bias[static_cast<size_t>(e)], exact);
    }
    std::vector<int32_t> order(static_cast<size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return biased[static_cast<size_t>(a)] > biased[static_cast<size_t>(b)];
    });
    double total = 0;
    for (int64_t i = 0; i < k; ++i) total += sigma[static_cast<size_t>(order[static_cast<size_t>(i)])];
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = order[static_cast<size_t>(i)];
      experts[static_cast<size_t>(r * k + i)] = e;
      weights.row(r)[i] =
          static_cast<float>(sigma[static_cast<size_t>(e)] / (total + kRouterSumEps) * router.routed_scaling);
    }
  });
}

}  // namespace flashkv::backend::cpu
