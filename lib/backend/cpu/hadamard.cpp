// V4's Hadamard rotation of index keys and queries (the official V4 indexer's rotate_activation): each row of
// a power-of-two width d becomes H·x·d^-½, H the Sylvester Hadamard matrix. The rotation is orthogonal, so it
// changes nothing but where the MXFP4 quantizer's rounding falls (clean mode, which quantizes nothing, skips
// it). The butterfly sums BF16 inputs in double, exactly for any realistic exponent spread, then scales once.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::hadamard_rotate(Matrix x, Rounding rounding) const {
  const bool bf16 = faithful(rounding);
  const int64_t d = x.cols;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> row(static_cast<size_t>(d));
  for (int64_t r = 0; r < x.rows; ++r) {
    float* values = x.row(r);
    for (int64_t c = 0; c < d; ++c) row[static_cast<size_t>(c)] = values[c];
    for (int64_t half = 1; half < d; half *= 2) {  // fast Walsh–Hadamard transform, Sylvester order
      for (int64_t block = 0; block < d; block += 2 * half) {
        for (int64_t c = block; c < block + half; ++c) {
          const double a = row[static_cast<size_t>(c)];
          const double b = row[static_cast<size_t>(c + half)];
          row[static_cast<size_t>(c)] = a + b;
          row[static_cast<size_t>(c + half)] = a - b;
        }
      }
    }
    for (int64_t c = 0; c < d; ++c) values[c] = store(row[static_cast<size_t>(c)] * scale, bf16);
  }
}

}  // namespace flashkv::backend::cpu
