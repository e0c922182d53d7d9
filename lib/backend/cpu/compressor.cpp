// Compressor pooling of ratio r >= 2 owners (spec §5.3): per channel, a softmax over the group's gate logits
// weights the group's values. fp32 in the reference; here double rounded to fp32 (then BF16 in faithful mode,
// the value the compressor norm reads).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::compressor_pool(ConstMatrix v, ConstMatrix g, int64_t ratio, Matrix pooled,
                                 Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t dim = v.cols;
  for (int64_t j = 0; j < pooled.rows; ++j) {
    std::vector<double> weights(static_cast<size_t>(ratio));
    for (int64_t c = 0; c < dim; ++c) {
      double peak = g.row(j * ratio)[c];
      for (int64_t t = 1; t < ratio; ++t) peak = std::max(peak, static_cast<double>(g.row(j * ratio + t)[c]));
      double sum = 0;
      for (int64_t t = 0; t < ratio; ++t) {
        sum +=
            (weights[static_cast<size_t>(t)] = std::exp(static_cast<double>(g.row(j * ratio + t)[c]) - peak));
      }
      double value = 0;
      for (int64_t t = 0; t < ratio; ++t) {
        value += weights[static_cast<size_t>(t)] / sum * static_cast<double>(v.row(j * ratio + t)[c]);
      }
      pooled.row(j)[c] = store(value, exact);
    }
  }
}

}  // namespace flashkv::backend::cpu
