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

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

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

// The four E4M3 codes of `codes` (byte i = channel i) decoded and multiplied by `scale`: equals
// fp8_decode(code, scale) per channel, NaN payloads aside. The hardware E4M3 -> f16 conversion is exact
// (every E4M3 value, subnormals included, is an f16), f16 -> fp32 is exact, and the product is the
// same correctly rounded fp32 multiplication as the host's.
__device__ inline void e4m3x4_decode(uint32_t codes, float scale, float (&y)[4]) {
  const __half2_raw lo =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
  const __half2_raw hi =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes >> 16), __NV_E4M3);
  const float2 v01 = __half22float2(__half2(lo));
  const float2 v23 = __half22float2(__half2(hi));
  y[0] = __fmul_rn(v01.x, scale);
  y[1] = __fmul_rn(v01.y, scale);
  y[2] = __fmul_rn(v23.x, scale);
  y[3] = __fmul_rn(v23.y, scale);
}

// The E2M1 value of the low nibble of `code`, exactly e2m1_to_float. For magnitude codes m >= 2 the
// fp32 bits are (m + 252) << 22 (exponent field 126 + m/2, mantissa bit m & 1); the same formula gives
// 0.5 and 0.75 for m = 0 and 1, which 2v - 1 maps onto their values 0 and 0.5 (exact).
__device__ inline float e2m1_value(uint32_t code) {
  const uint32_t magnitude = code & 0x7u;
  const float v = __uint_as_float((magnitude + 252u) << 22);
  const float value = magnitude < 2u ? __fmaf_rn(v, 2.0f, -1.0f) : v;
  return __uint_as_float(__float_as_uint(value) | ((code & 0x8u) << 28));
}

// The four E2M1 codes of `codes` (nibble i = channel i) decoded and multiplied by `scale`: equals
// fp4_decode(code, scale) per channel (the product of two short significands is exact or rounds the
// same way on both sides: one correctly rounded fp32 multiplication).
__device__ inline void e2m1x4_decode(uint32_t codes, float scale, float (&y)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) y[i] = __fmul_rn(e2m1_value(codes >> (4 * i)), scale);
}

// ---- BF16 inputs: two E2M1 codes per f16x2 operation --------------------------------------------
// For a BF16 x (8 significant bits) and a scale s that is an E4M3 value (4 bits) or a power of two, the
// exact quotient x / s either equals an E2M1 rounding midpoint t (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5)
// or lies at least t/300 away from it (x - t*s is a non-zero multiple of a power of two no smaller than
// (t*s)/300). So any approximation within 2^-10 relative of x / s that is exactly t when x / s is
// rounds to the same E2M1 code as the correctly rounded fp32 quotient. f16(RN(x * RN(1/s))) is one:
// the fp32 product is within 2^-23, the f16 rounding adds at most 2^-11, and t is an f16. In f16 the
// E2M1 rounding is the magic-number addition of e2m1_magnitude_code, done for two channels at once.

__device__ inline uint32_t half2_bits(__half2 h) {
  uint32_t bits;
  memcpy(&bits, &h, sizeof bits);
  return bits;
}

__device__ inline __half2 bits_half2(uint32_t bits) {
  __half2 h;
  memcpy(&h, &bits, sizeof bits);
  return h;
}

// The signed E2M1 codes of the two f16 quotients in `q` (finite): low channel in bits 0..3, high
// channel in bits 16..19. Magnitudes are clamped to 6; the f16 exponent of max(q, 1) selects the
// grid step 2^(range-1) through the magic 2^(9 + range), whose f16 ulp is that step.
__device__ inline uint32_t e2m1x2_codes_f16(__half2 q) {
  const uint32_t bits = half2_bits(q);
  const __half2 clamped = __hmin2(bits_half2(bits & 0x7fff7fffu), __float2half2_rn(6.0f));
  const uint32_t exponent = half2_bits(__hmax2(clamped, __float2half2_rn(1.0f))) & 0x7c007c00u;
  const uint32_t magic = exponent + 0x24002400u;  // exponent field + 9
  const uint32_t steps = half2_bits(__hadd2_rn(clamped, bits_half2(magic))) - magic;
  const uint32_t codes = steps + (exponent >> 9) - 0x001e001eu;  // + 2 * range (f16 bias 15)
  return codes | ((bits >> 12) & 0x00080008u);                   // the sign bits 15, 31 -> 3, 19
}

// E2M1 codes of x0 / s and x1 / s for BF16-valued x0, x1 (finite) and `reciprocal` = RN(1/s), s a
// finite positive E4M3 value or power of two (see above): low nibble x0, next nibble x1.
__device__ inline uint32_t e2m1x2_codes_bf16(float x0, float x1, float reciprocal) {
  const uint32_t codes =
      e2m1x2_codes_f16(__floats2half2_rn(__fmul_rn(x0, reciprocal), __fmul_rn(x1, reciprocal)));
  return (codes | (codes >> 12)) & 0xffu;
}

}  // namespace flashkv::cuda::kv_fast
