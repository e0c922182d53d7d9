// Scalar codecs of the narrow number formats of spec/MODEL.md §2: FP8 E4M3 ("fn"), FP4 E2M1, the
// power-of-two scale E8M0 and BF16, each between its code and fp32.
//
// Contract: every encoder rounds to nearest, ties to even (RNE), on the exact fp32 input, and matches
// ml_dtypes (float8_e4m3fn, float4_e2m1fn, float8_e8m0fnu, bfloat16; checked against v0.6) bit for bit
// on all 2^32 inputs, including the special values listed per function. Decoders accept every code.
// fp32 subnormal inputs are honoured (no flush to zero): device callers must not build with -ftz=true.
// Usable from host C++20 and from CUDA C++17 device code (FKV_HOST_DEVICE); pure functions, no errors.
#pragma once

#include <cstdint>

#include <flashkv/numeric/fp32_ops.hpp>
#include <flashkv/numeric/host_device.hpp>

namespace flashkv::numeric {

namespace detail {

// Rounds `significand` right by `shift` bits (1..25), ties to even.
FKV_HOST_DEVICE inline uint32_t shift_right_rne(uint32_t significand, int shift) {
  const uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const bool round_up = rest > half || (rest == half && (kept & 1u) != 0);
  return kept + (round_up ? 1u : 0u);
}

// Rounds a finite non-negative fp32 (its bits) to a narrow binary format with `mantissa_bits` fraction bits
// and smallest normal exponent `min_exponent` (subnormals below it), ties to even. Returns the magnitude
// code, exponent field << mantissa_bits | fraction; a mantissa carry moves into the exponent field by the
// addition itself. Codes above the format's largest finite one are returned unclipped: the caller decides
// between NaN and saturation.
FKV_HOST_DEVICE inline uint32_t round_to_narrow(uint32_t magnitude, int mantissa_bits, int min_exponent) {
  const uint32_t biased = magnitude >> 23;
  const uint32_t fraction = magnitude & 0x7FFFFFu;
  const int exponent = biased == 0 ? -126 : static_cast<int>(biased) - 127;
  const uint32_t significand = biased == 0 ? fraction : (fraction | 0x800000u);
  const int denormal_shift = exponent < min_exponent ? min_exponent - exponent : 0;
  int shift = 23 - mantissa_bits + denormal_shift;
  // Past 25 bits every significand (< 2^24) is below half a unit and rounds to 0 anyway.
  if (shift > 25) shift = 25;
  const uint32_t exponent_field =
      exponent < min_exponent ? 0u : static_cast<uint32_t>(exponent - min_exponent);
  // For normals the rounded significand still holds the implicit bit, which adds the missing 1 to the field.
  return (exponent_field << mantissa_bits) + shift_right_rne(significand, shift);
}

FKV_HOST_DEVICE inline uint8_t sign_byte(uint32_t bits) {
  return static_cast<uint8_t>((bits >> 24) & 0x80u);
}

}  // namespace detail

// ---- FP8 E4M3 "fn": 1 sign, 4 exponent (bias 7), 3 mantissa bits; no Inf; NaN = S.1111.111 -------------
// Largest finite 448 (0x7E), smallest subnormal 2^-9 (0x01).

constexpr uint8_t kE4m3Nan = 0x7F;
constexpr uint8_t kE4m3MaxFinite = 0x7E;
constexpr float kE4m3Max = 448.0f;

// RNE to E4M3 (ml_dtypes float8_e4m3fn). A value whose rounded magnitude exceeds 448 becomes NaN: so
// |x| > 464 does, while exactly 464 (the tie between 448 and the missing 480) rounds to 448. ±Inf and NaN
// (any payload) give NaN with the input's sign (0x7F / 0xFF); ±0 keep their sign (0x00 / 0x80); values
// under half the smallest subnormal (|x| <= 2^-10) round to a signed zero.
FKV_HOST_DEVICE inline uint8_t e4m3_from_float(float x) {
  const uint32_t bits = float_to_bits(x);
  const uint8_t sign = detail::sign_byte(bits);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) return static_cast<uint8_t>(sign | kE4m3Nan);
  const uint32_t code = detail::round_to_narrow(magnitude, 3, -6);
  return static_cast<uint8_t>(sign | (code > kE4m3MaxFinite ? kE4m3Nan : code));
}

// As e4m3_from_float, but magnitudes that would round past 448, and ±Inf, saturate to ±448 (0x7E / 0xFE).
// NaN stays NaN with its sign (0x7F / 0xFF). (No ml_dtypes counterpart; the tests check it against
// e4m3_from_float on clamped inputs.)
FKV_HOST_DEVICE inline uint8_t e4m3_from_float_satfinite(float x) {
  const uint32_t bits = float_to_bits(x);
  const uint8_t sign = detail::sign_byte(bits);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<uint8_t>(sign | kE4m3Nan);
  if (magnitude == 0x7F800000u) return static_cast<uint8_t>(sign | kE4m3MaxFinite);
  const uint32_t code = detail::round_to_narrow(magnitude, 3, -6);
  return static_cast<uint8_t>(sign | (code > kE4m3MaxFinite ? kE4m3MaxFinite : code));
}

// Exact. 0x7F / 0xFF decode to the quiet NaN with that sign (0x7FC00000 / 0xFFC00000), as ml_dtypes does.
FKV_HOST_DEVICE inline float e4m3_to_float(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exponent = (code >> 3) & 0xFu;
  const uint32_t mantissa = code & 0x7u;
  if (exponent == 0xFu && mantissa == 0x7u) return bits_to_float(sign | 0x7FC00000u);
  if (exponent == 0) {
    // Subnormal: mantissa · 2^-9, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0.001953125f;
    return bits_to_float(sign | float_to_bits(magnitude));
  }
  return bits_to_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// ---- FP4 E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit; no Inf, no NaN ------------------------------
// Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0..7); bit 3 is the sign. The code sits in the low nibble.

constexpr uint8_t kE2m1MaxFinite = 0x7;
constexpr float kE2m1Max = 6.0f;

// RNE on the grid above; magnitudes past 6 (ties included: nothing lies above 6) and ±Inf saturate to ±6
// (0x7 / 0xF); ±0 and values that round to zero keep their sign (0x0 / 0x8). NaN has no E2M1 code: like
// ml_dtypes, a positive-signed NaN gives 0x8 (-0) and a negative-signed NaN gives 0x0 (+0) — ml_dtypes'
// NaN stand-in is "-0", negated for a negative input. Callers that must see NaN handle it before encoding.
FKV_HOST_DEVICE inline uint8_t e2m1_from_float(float x) {
  const uint32_t bits = float_to_bits(x);
  const uint8_t sign = static_cast<uint8_t>(detail::sign_byte(bits) >> 4);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<uint8_t>(sign ^ 0x8u);
  if (magnitude == 0x7F800000u) return static_cast<uint8_t>(sign | kE2m1MaxFinite);
  const uint32_t code = detail::round_to_narrow(magnitude, 1, 0);
  return static_cast<uint8_t>(sign | (code > kE2m1MaxFinite ? kE2m1MaxFinite : code));
}

// Exact; reads the low nibble only (the high nibble is ignored).
FKV_HOST_DEVICE inline float e2m1_to_float(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8u) << 28;
  const uint32_t exponent = (code >> 1) & 0x3u;
  const uint32_t mantissa = code & 0x1u;
  if (exponent == 0) return bits_to_float(sign | (mantissa != 0 ? 0x3F000000u : 0u));  // ±0.5 or ±0
  return bits_to_float(sign | ((exponent + 126u) << 23) | (mantissa << 22));
}

// ---- E8M0 (UE8M0, "fnu"): 8 exponent bits, bias 127, no sign, no zero; value 2^(code-127), 0xFF = NaN -----

constexpr uint8_t kE8m0Nan = 0xFF;

// Nearest power of two as ml_dtypes float8_e8m0fnu rounds it: the exponent goes up when the fp32 mantissa
// is >= 1.5 (ties round up: E8M0 has no mantissa bit to be even). Not representable, hence NaN (0xFF):
// NaN, ±Inf, ±0, every negative value, and values rounding past 2^127 (>= 1.5·2^127). fp32 subnormals
// follow ml_dtypes' grid of multiples of 2^-126: x <= 2^-127 gives 0x00 (2^-127), 2^-127 < x < 2^-126
// gives 0x01 (2^-126).
FKV_HOST_DEVICE inline uint8_t e8m0_from_float(float x) {
  const uint32_t bits = float_to_bits(x);
  if (bits == 0 || bits >= 0x7F800000u) return kE8m0Nan;  // +0, +Inf, NaN, and everything with the sign set
  const uint32_t biased = bits >> 23;
  const uint32_t fraction = bits & 0x7FFFFFu;
  if (biased == 0) return fraction > 0x400000u ? 1 : 0;
  const uint32_t code = biased + (fraction >= 0x400000u ? 1u : 0u);
  return static_cast<uint8_t>(code > 0xFEu ? kE8m0Nan : code);
}

// Exact: 2^(code-127); 0x00 decodes to the fp32 subnormal 2^-127, 0xFF to the quiet NaN 0x7FC00000.
FKV_HOST_DEVICE inline float e8m0_to_float(uint8_t code) {
  if (code == kE8m0Nan) return bits_to_float(0x7FC00000u);
  if (code == 0) return bits_to_float(0x00400000u);
  return bits_to_float(static_cast<uint32_t>(code) << 23);
}

// The spec's scale rounding (§2.2): the E8M0 code of the smallest power of two >= x, found by the bit
// test "exponent + 1 if the mantissa is non-zero". x <= 2^-127 (zero and negatives included) gives 0x00,
// the smallest scale; NaN, +Inf and x > 2^127 give 0xFF (no power of two is large enough).
FKV_HOST_DEVICE inline uint8_t e8m0_ceil_pow2(float x) {
  const uint32_t bits = float_to_bits(x);
  if (is_nan(x) || bits == 0x7F800000u) return kE8m0Nan;
  if ((bits >> 31) != 0 || bits == 0) return 0;
  const uint32_t biased = bits >> 23;
  const uint32_t fraction = bits & 0x7FFFFFu;
  if (biased == 0) return fraction > 0x400000u ? 1 : 0;
  const uint32_t code = biased + (fraction != 0 ? 1u : 0u);
  return static_cast<uint8_t>(code > 0xFEu ? kE8m0Nan : code);
}

// ---- BF16: the top half of an fp32 ------------------------------------------------------------------------

// RNE (ml_dtypes / Eigen bfloat16). NaN becomes the quiet NaN 0x7FC0 / 0xFFC0 with the input's sign (the
// payload is dropped); ±Inf stay ±Inf; finite values that round past the largest BF16 become ±Inf;
// subnormals are rounded, not flushed.
FKV_HOST_DEVICE inline uint16_t bf16_from_float(float x) {
  const uint32_t bits = float_to_bits(x);
  if (is_nan(x)) return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7FC0u);
  const uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// Exact: the code becomes the top 16 bits (NaN payloads kept).
FKV_HOST_DEVICE inline float bf16_to_float(uint16_t code) {
  return bits_to_float(static_cast<uint32_t>(code) << 16);
}

}  // namespace flashkv::numeric
