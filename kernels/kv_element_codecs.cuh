// Fast device versions of the per-element steps of the KV record quantizers, each equal to its host
// counterpart in <flashkv/numeric/kv_records.hpp> on the inputs a record can present to it.
//
// Why: the host encoders (a correctly rounded division, then a generic bit-level rounding) cost ~50
// instructions per element; at HBM speed a BF16 row leaves room for ~15. The shortcuts below are
// exact, not approximations, and tests/gpu/test_kv_element_codecs.cu checks each one against the host
// function exhaustively (every fp32 input, every scale) on the device:
//   - a power-of-two scale 2^e (FP8, MXFP4): x / 2^e and x * 2^-e are the same real number, so both
//     round to the same float (also in the subnormal range); 2^-e is representable for every E8M0 code.
//   - an E4M3 scale s (NVFP4): q = x * RN(1/s), corrected once with the fma residual (Markstein), is the
//     correctly rounded x / s whenever no intermediate underflows; an underflowing quotient is far below
//     the first E2M1 step (0.25), where every rounding gives code 0.
//   - E2M1 rounding: adding 2^(22+k) to a magnitude rounds it, in the FPU's round-to-nearest-even, to
//     a multiple of 2^(k-1), which is the E2M1 grid spacing in the binade range k (0: [0,2), 1: [2,4),
//     2: [4,6]); ties go to the even multiple, which is the even E2M1 code.
//   - E4M3 rounding: cvt.rn.satfinite.e4m3x2.f32 rounds to nearest even and saturates finite values
//     to ±448, which is the host's clamp(v, ±448) followed by e4m3_from_float.
// Preconditions are stated per function; the quantize kernel meets them because a block whose scale
// is NaN (a NaN or Inf in it, or an NVFP4 scale past 448) is written as all-zero codes without calling
// these, so they only ever see finite inputs and finite positive scales.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace flashkv::cuda::kv_fast {

// NaN-propagating max(amax, |x|) in one instruction (max.NaN, sm_80+): same value as the host's
// amax_update for every input pair, NaN payloads aside (they only ever select a NaN scale).
__device__ inline float amax_update(float amax, float x) {
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(amax), "f"(fabsf(x)));
  return result;
}

__device__ inline float amax_combine(float a, float b) {
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

// The E2M1 magnitude code (0..7) of a >= 0 (+Inf included), rounded to nearest even and saturated at
// 6: equals e2m1_from_float(clamp(a, 6)). The clamp matters: an NVFP4 scale in the E4M3 subnormal range
// can round down by a third, putting |x| / scale near 9.
__device__ inline uint32_t e2m1_magnitude_code(float a) {
  const float clamped = fminf(a, 6.0f);
  // Biased exponent floored at 127: 127 + range, where range 0, 1, 2 is the binade group [0,2), [2,4), [4,6].
  const uint32_t exponent = max(__float_as_uint(clamped) >> 23, 127u);
  const uint32_t magic_bits = (exponent + 22u) << 23;  // 2^(22 + range): its ulp is the grid step 2^(range-1)
  const uint32_t steps = __float_as_uint(__fadd_rn(clamped, __uint_as_float(magic_bits))) - magic_bits;
  return steps + 2u * (exponent - 127u);  // range r starts at code 2r
}

// E2M1 code (low nibble) of x / scale for the sign and magnitude given separately:
// `sign_source` supplies the sign bit (the input x; -0 gives 0x8 as on the host).
__device__ inline uint32_t e2m1_code(float magnitude_quotient, float sign_source) {
  return e2m1_magnitude_code(magnitude_quotient) | ((__float_as_uint(sign_source) >> 28) & 0x8u);
}

// RN(a / s) for a >= 0 and a finite positive NVFP4 scale s, given r = RN(1/s); exact whenever the
// quotient does not underflow (see the header comment).
__device__ inline float divide_by_scale(float a, float s, float r) {
  const float q = __fmul_rn(a, r);
  const float residual = __fmaf_rn(-q, s, a);
  return __fmaf_rn(residual, r, q);
}

// The E4M3 codes of clamp(v0, ±448) and clamp(v1, ±448) (non-NaN), v0 in the low byte.
__device__ inline uint32_t e4m3x2_codes(float v0, float v1) {
  return __nv_cvt_float2_to_fp8x2(make_float2(v0, v1), __NV_SATFINITE, __NV_E4M3);
}

}  // namespace flashkv::cuda::kv_fast
