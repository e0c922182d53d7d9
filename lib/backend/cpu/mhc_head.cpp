// V4 hc_head: the final collapse weights of V4-Flash's per-sublayer mHC. V4.1 collapses the last streams with
// the carried FFN-site pre (spec §3 step 3); V4 computes them afresh from the streams with its own head mixer
// (transformers DeepseekV4HyperHead): pre = sigmoid(scale·(fn·f)·rms(f)⁻¹ + base) + hc_eps, no post, no comb.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm_kernel.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::hc_head(ConstMatrix streams, const MixerWeights& weights, const MixerShape& shape,
                         Matrix pre, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t hc = weights.fn.rows;
  const int64_t width = streams.cols;
  std::vector<double> products(static_cast<size_t>(streams.rows * hc));
  gemm_double(streams, weights.fn, products.data());
  for (int64_t r = 0; r < streams.rows; ++r) {
    const double root =
        std::sqrt(sum_of_squares(streams.row(r), width) / static_cast<double>(width) + shape.norm_eps);
    for (int64_t i = 0; i < hc; ++i) {
      const double mixed = products[static_cast<size_t>(r * hc + i)] / root;
      const double z = fp32_if(
          static_cast<double>(weights.base[static_cast<size_t>(i)]) + mixed * weights.scale[0], exact);
      pre.row(r)[i] = static_cast<float>(sigmoid(z) + shape.hc_eps);
    }
  }
}

}  // namespace flashkv::backend::cpu
