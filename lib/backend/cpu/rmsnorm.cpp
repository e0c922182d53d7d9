// RMSNorm (spec §2.1): y = w ⊙ x·(mean(x²)+eps)^-½, in double, the reference's operation order.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::rms_norm(ConstMatrix x, std::span<const float> weight, double eps, Matrix y,
                          Rounding rounding) const {
  const bool bf16 = faithful(rounding);
  const int64_t d = x.cols;
  parallel_for(x.rows, static_cast<double>(x.rows * d) * 4, [&](int64_t r) {
    const float* xr = x.row(r);
    float* yr = y.row(r);
    const double root = std::sqrt(sum_of_squares(xr, d) / static_cast<double>(d) + eps);
    for (int64_t c = 0; c < d; ++c) {
      yr[c] = store(static_cast<double>(weight[c]) * (static_cast<double>(xr[c]) / root), bf16);
    }
  });
}

}  // namespace flashkv::backend::cpu
