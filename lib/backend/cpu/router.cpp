// MoE router (spec §6): σ = sqrt(softplus(gate·v)); selection by σ + bias; weights from the unbiased σ. The
// V4 hash-routed variant (route_given) takes the selection from the caller (tid2eid of the row's token).
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

// σ_e of one row for every expert.
std::vector<double> router_sigma(const float* v, const RouterWeights& router, int64_t cols, bool exact) {
  std::vector<double> sigma(static_cast<size_t>(router.gate.rows));
  for (int64_t e = 0; e < router.gate.rows; ++e) {
    const double logit = fp32_if(dot(v, router.gate.row(e), cols), exact);
    sigma[static_cast<size_t>(e)] = fp32_if(std::sqrt(softplus(logit)), exact);
  }
  return sigma;
}

// weights[i] = scaling·σ_{e_i} / (Σ_selected σ + eps).
void selected_weights(const std::vector<double>& sigma, const int32_t* chosen, int64_t k, double scaling,
                      float* weights) {
  double total = 0;
  for (int64_t i = 0; i < k; ++i) total += sigma[static_cast<size_t>(chosen[i])];
  for (int64_t i = 0; i < k; ++i)
    weights[i] =
        static_cast<float>(sigma[static_cast<size_t>(chosen[i])] / (total + kRouterSumEps) * scaling);
}

}  // namespace

void CpuBackend::route_given(ConstMatrix v, const RouterWeights& router, std::span<const int32_t> experts,
                             Matrix weights, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t k = router.top_k;
  parallel_for(v.rows, static_cast<double>(v.rows * router.gate.rows * v.cols), [&](int64_t r) {
    const std::vector<double> sigma = router_sigma(v.row(r), router, v.cols, exact);
    selected_weights(sigma, experts.data() + r * k, k, router.routed_scaling, weights.row(r));
  });
}

void CpuBackend::route(ConstMatrix v, const RouterWeights& router, std::span<int32_t> experts, Matrix weights,
                       Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t count = router.gate.rows;
  const int64_t k = router.top_k;
  parallel_for(v.rows, static_cast<double>(v.rows * count * v.cols), [&](int64_t r) {
    const std::vector<double> sigma = router_sigma(v.row(r), router, v.cols, exact);
    std::vector<double> biased(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) {
      biased[static_cast<size_t>(e)] =
          fp32_if(sigma[static_cast<size_t>(e)] + router.bias[static_cast<size_t>(e)], exact);
    }
    std::vector<int32_t> order(static_cast<size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return biased[static_cast<size_t>(a)] > biased[static_cast<size_t>(b)];
    });
    std::copy_n(order.begin(), k, experts.begin() + r * k);
    selected_weights(sigma, order.data(), k, router.routed_scaling, weights.row(r));
  });
}

}  // namespace flashkv::backend::cpu
