// fp32 primitives shared by the numeric codecs: bit casts, correctly rounded division and multiplication,
// and a NaN-propagating block maximum.
//
// Why these exist: the codecs must give the same bytes on the host and on the GPU. Host C++ rounds `a / b`
// and `a * b` correctly (IEEE-754, round to nearest even) and never contracts them into FMAs in ISO mode;
// nvcc may contract products and, under fast-math flags, approximate division. Device code therefore uses
// the explicit _rn intrinsics. fmaxf drops NaNs, which would let a NaN element pick a finite scale on one
// backend and not on another; amax_update/amax_combine propagate NaN instead, so a block holding a NaN
// always gets a NaN scale (docs/formats.md, "poisoned blocks").
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

#include <flashkv/numeric/host_device.hpp>

namespace flashkv::numeric {

FKV_HOST_DEVICE inline uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

FKV_HOST_DEVICE inline float bits_to_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// a / b rounded to nearest even, also on the device whatever the compiler flags.
FKV_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// a * b rounded to nearest even and never fused with a neighbouring addition.
FKV_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

FKV_HOST_DEVICE inline bool is_nan(float x) {
  return (float_to_bits(x) & 0x7FFFFFFFu) > 0x7F800000u;
}

// True for every finite value; false for ±Inf and NaN.
FKV_HOST_DEVICE inline bool is_finite(float x) {
  return (float_to_bits(x) & 0x7F800000u) != 0x7F800000u;
}

FKV_HOST_DEVICE inline float abs_value(float x) {
  return bits_to_float(float_to_bits(x) & 0x7FFFFFFFu);
}

// max(a, b) for non-negative a, b where a NaN in either operand wins (fmaxf would drop it).
FKV_HOST_DEVICE inline float amax_combine(float a, float b) {
  return (a > b || is_nan(a)) ? a : b;
}

// Folds |x| into a running block maximum (start from 0.0f); NaN-propagating, see amax_combine.
FKV_HOST_DEVICE inline float amax_update(float amax, float x) {
  return amax_combine(amax, abs_value(x));
}

// max |x[i]| over n values; NaN if any x[i] is NaN, +Inf if any is infinite (and none is NaN).
FKV_HOST_DEVICE inline float block_amax(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = amax_update(amax, x[i]);
  return amax;
}

// min(max(x, -limit), limit); NaN passes through unchanged.
FKV_HOST_DEVICE inline float clamp_symmetric(float x, float limit) {
  return x < -limit ? -limit : (x > limit ? limit : x);
}

}  // namespace flashkv::numeric
