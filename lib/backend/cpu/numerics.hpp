// Arithmetic helpers shared by the CPU kernels: double-accumulated dot products of fp32 rows and the rounding
// of a double result at a cast point (spec §2.1; docs/model-notes.md lists the cast points).
#pragma once

#include <cmath>
#include <cstdint>

#include <flashkv/numeric/scalar_codecs.hpp>

#include "backend/backend.hpp"

namespace flashkv::backend::cpu {

inline float round_bf16(float x) {
  return numeric::bf16_to_float(numeric::bf16_from_float(x));
}

// A double result stored as fp32, then rounded to BF16 when `bf16` (ml_dtypes casts float64 via float32 too).
inline float store(double value, bool bf16) {
  const float f = static_cast<float>(value);
  return bf16 ? round_bf16(f) : f;
}

inline bool faithful(Rounding rounding) {
  return rounding == Rounding::kFaithful;
}

// A value the reference rounds to fp32 in faithful mode and keeps in double in clean mode.
inline double fp32_if(double value, bool faithful_mode) {
  return faithful_mode ? static_cast<double>(static_cast<float>(value)) : value;
}

inline double bf16_if(double value, bool faithful_mode) {
  return faithful_mode ? static_cast<double>(round_bf16(static_cast<float>(value))) : value;
}

// Σ a[i]·b[i] in double (each fp32 product is exact in double); eight independent partial sums so the loop
// vectorises without reassociation.
inline double dot(const float* a, const float* b, int64_t n) {
  double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[i + j]);
  }
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
         ((partial[2] + partial[6]) + (partial[3] + partial[7])) + tail;
}

inline double sum_of_squares(const float* a, int64_t n) {
  return dot(a, a, n);
}

// The reference's sigmoid: exp of a non-positive argument only, so large |x| never overflows.
inline double sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

}  // namespace flashkv::backend::cpu
