// The record of a finished row, written by its lanes: the block-scaled encodings of the faithful records
// (FP8 window rows with 32-channel E8M0 blocks, MXFP4 keys with 32-channel E8M0 blocks, NVFP4 entries with
// 16-channel E4M3 blocks; layouts in <flashkv/numeric/kv_records.hpp>) or fp32 channels (clean), and where a
// record lives in a paged pool (RecordPages). Block scales use the host's scale functions' exact shortcuts,
// codes the exact conversions of kv_element_codecs.cuh (as kv_quant.cu); the faithful window rows and keys
// encode straight from RMSNorm/RoPE's packed BF16 pairs.
#pragma once

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <cstdint>

#include "kv_element_codecs.cuh"
#include "kv_write_lanes.cuh"

namespace flashkv::cuda {
namespace {  // internal linkage: see kv_write_lanes.cuh

// 16 fp32 values (clean records, clean latents) at `dst`, 16-byte aligned.
__device__ void store_f32_chunk(float* dst, const float (&y)[kChannels]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
    reinterpret_cast<float4*>(dst)[i] = make_float4(y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]);
}

// `kWords` little-endian words at `dst`, with the widest accesses its alignment allows (68-B keys are 4-byte
// aligned, 66-B and 17-B records of small test shapes only 2- or 1-byte aligned).
template <int kWords>
__device__ void store_words(uint8_t* dst, const uint32_t (&w)[kWords]) {
  const auto address = reinterpret_cast<uintptr_t>(dst);
  if constexpr (kWords == 4) {
    if ((address & 15u) == 0) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
      return;
    }
  }
  if ((address & 7u) == 0) {
#pragma unroll
    for (int i = 0; i < kWords / 2; ++i)
      reinterpret_cast<uint2*>(dst)[i] = make_uint2(w[2 * i], w[2 * i + 1]);
    return;
  }
  if ((address & 3u) == 0) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) reinterpret_cast<uint32_t*>(dst)[i] = w[i];
    return;
  }
  // Records of small rows (66-B FP8 rows at dim 64, 17-B MXFP4 keys at dim 32) may be only 2- or 1-byte
  // aligned.
  if ((address & 1u) == 0) {
#pragma unroll
    for (int i = 0; i < 2 * kWords; ++i)
      reinterpret_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2)));
    return;
  }
#pragma unroll
  for (int i = 0; i < 4 * kWords; ++i) dst[i] = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
}

// NaN-propagating max of |x| over the lane's channels as a tree (max.NaN is associative: the same value as
// the host's running amax_update from 0, NaN payloads aside): depth 4 instead of a 16-long chain.
__device__ float chunk_amax(const float (&x)[kChannels]) {
  float m[kChannels / 2];
#pragma unroll
  for (int i = 0; i < kChannels / 2; ++i) m[i] = kv_fast::amax_combine(fabsf(x[2 * i]), fabsf(x[2 * i + 1]));
#pragma unroll
  for (int width = kChannels / 4; width > 0; width /= 2) {
#pragma unroll
    for (int i = 0; i < width; ++i) m[i] = kv_fast::amax_combine(m[i], m[i + width]);
  }
  return m[0];
}

// pow2_scale_code (fp8_block_scale_code, mxfp4_block_scale_code) for a block amax >= 0 or NaN and a floor
// whose product with inv_max is a normal fp32 (both kinds): the E8M0 code of the smallest power of two >= y
// is y's exponent field plus one when its mantissa is not zero, i.e. (bits + 0x7FFFFF) >> 23; that also
// gives 0xFF for +Inf and for y past 2^127, as the host; NaN gives 0xFF.
__device__ uint32_t pow2_scale_code_fast(float amax, float floor, float inv_max) {
  const float y = __fmul_rn(kv_fast::amax_combine(amax, floor), inv_max);
  return nm::is_nan(y) ? 0xffu : (__float_as_uint(y) + 0x7fffffu) >> 23;
}

// 1 / 2^(code − 127) for an E8M0 scale code other than 0xFF (NaN), exactly div_rn(1, e8m0_to_float(code)):
// the reciprocal of a power of two is one, 2^-127 (code 254) a subnormal.
__device__ float pow2_scale_inverse(uint32_t code) {
  return __uint_as_float(code < 254u ? (254u - code) << 23 : 0x00400000u);
}

// FP8 window row: 32-channel blocks span two lanes (the amax pairs up through a shuffle).
__device__ void store_fp8_chunk(uint8_t* record, int dim, int lane_in_row, const float (&x)[kChannels],
                                bool active) {
  float amax = chunk_amax(x);
  amax = kv_fast::amax_combine(amax, __shfl_xor_sync(kFullMask, amax, 1));
  const uint32_t code = pow2_scale_code_fast(amax, nm::kFp8AmaxFloor, nm::kInvE4m3Max);
  uint32_t packed[4] = {0, 0, 0, 0};
  if (code != 0xffu) {  // 0xFF: the NaN scale of a poisoned block, all codes 0 as on the host
    const float inverse = pow2_scale_inverse(code);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float* v = &x[4 * w];
      const uint32_t lo = kv_fast::e4m3x2_codes(__fmul_rn(v[0], inverse), __fmul_rn(v[1], inverse));
      const uint32_t hi = kv_fast::e4m3x2_codes(__fmul_rn(v[2], inverse), __fmul_rn(v[3], inverse));
      packed[w] = lo | (hi << 16);
    }
  }
  if (!active) return;
  store_words<4>(record + lane_in_row * kChannels, packed);
  if (lane_in_row % 2 == 0) record[dim + lane_in_row / 2] = static_cast<uint8_t>(code);
}

// E2M1 codes of 16 BF16-valued channels (two per f16x2 step, exact for BF16 inputs: kv_element_codecs.cuh),
// given RN(1/scale) (NaN: poisoned block, all codes 0 as on the host).
__device__ void encode_fp4_chunk(const float (&x)[kChannels], float reciprocal, uint32_t (&packed)[2]) {
  packed[0] = packed[1] = 0;
  if (nm::is_nan(reciprocal)) return;
#pragma unroll
  for (int w = 0; w < 2; ++w) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int i = 8 * w + 2 * b;
      packed[w] |= kv_fast::e2m1x2_codes_bf16(x[i], x[i + 1], reciprocal) << (8 * b);
    }
  }
}

// RN(1/s) for every E4M3 scale code s (the NaN code 0x7F: NaN), filled per CTA: the encoder needs the
// reciprocal of its block's scale, and a correctly rounded division per row was ~40 instructions with a
// slow-path branch (round s5r0 profile of the ratio-1 kernel).
struct Nvfp4Reciprocals {
  float of_code[128];
};
// Called by every thread of the CTA before its rows (the caller's barrier publishes it).
__device__ void fill_nvfp4_reciprocals(Nvfp4Reciprocals& table) {
  if (threadIdx.x < 128) {
    table.of_code[threadIdx.x] = nm::div_rn(1.0f, nm::e4m3_to_float(static_cast<uint8_t>(threadIdx.x)));
  }
}

// nvfp4_block_scale_code(amax) = e4m3_from_float(div_rn(max(amax, floor), 6)) without the generic
// division and rounding: q = RN(a/6) by divide_by_scale (the quotient of a >= floor = 6·2^-9 by the E4M3
// value 6 with RN(1/6) and one fma residual step is correctly rounded: no intermediate underflows;
// +Inf and NaN give NaN); the hardware's satfinite E4M3 conversion is RNE and differs from
// e4m3_from_float only past 448: q in (448, 464] rounds to 448 on both, q > 464 (and NaN) is the NaN code
// 0x7F on the host. q > 0, so the sign bit is 0. Host check over every fp32 amax:
// docs/perf-notes/kv-write.md.
__device__ uint32_t nvfp4_scale_code_fast(float amax) {
  const float a = kv_fast::amax_combine(amax, nm::kNvfp4AmaxFloor);
  const float q = kv_fast::divide_by_scale(a, nm::kE2m1Max, nm::kInvE2m1Max);
  const uint32_t code = __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
  return q <= 464.0f ? code : 0x7fu;  // NaN fails the test
}

// NVFP4 entry: one 16-channel block per lane.
__device__ void store_nvfp4_chunk(uint8_t* record, int dim, int lane_in_row, const float (&x)[kChannels],
                                  bool active, const Nvfp4Reciprocals& reciprocals) {
  const float amax = chunk_amax(x);
  const uint32_t code = nvfp4_scale_code_fast(amax);
  uint32_t packed[2];
  encode_fp4_chunk(x, reciprocals.of_code[code], packed);
  if (!active) return;
  store_words<2>(record + lane_in_row * (kChannels / 2), packed);
  record[dim / 2 + lane_in_row] = static_cast<uint8_t>(code);
}

// MXFP4 key: 32-channel blocks span two lanes.
__device__ void store_mxfp4_chunk(uint8_t* record, int dim, int lane_in_row, const float (&x)[kChannels],
                                  bool active) {
  float amax = chunk_amax(x);
  amax = kv_fast::amax_combine(amax, __shfl_xor_sync(kFullMask, amax, 1));
  const uint32_t code = pow2_scale_code_fast(amax, nm::kMxfp4AmaxFloor, nm::kInvE2m1Max);
  uint32_t packed[2];
  encode_fp4_chunk(x, code != 0xffu ? pow2_scale_inverse(code) : __int_as_float(0x7fffffff), packed);
  if (!active) return;
  store_words<2>(record + lane_in_row * (kChannels / 2), packed);
  if (lane_in_row % 2 == 0) record[dim / 2 + lane_in_row / 2] = static_cast<uint8_t>(code);
}

// ---- MXFP4 keys straight from the packed BF16 pairs ----------------------------------------------------
// The block scale is a power of two 2^e, so x·2^-e is exact in BF16 (mul.rn.bf16x2: |x·2^-e| <= ~6, and a
// result below the BF16 normal range, rounded or flushed, lies far below 0.25, the first E2M1 step; the
// sign comes from x), and the E2M1 rounding of that exact quotient is the magic-number addition of
// e2m1x2_codes_f16 done in BF16 (8 significant bits: 2^(6 + range) has ulp 2^(range − 1), the grid step of
// [0,2), [2,4), [4,6]; RNE sends ties to the even code). Saves the unpacking, two fp32 products and the
// f16 conversion per pair, and the block amax runs on pairs (round s5r0 profile: 233 instructions per key
// step in the MXFP4 encoder).
// The signed E2M1 codes of two finite BF16 quotients q (exact), low channel in bits 0..3, high in 16..19;
// the sign bits from `sign_source` (the unscaled pair).
__device__ uint32_t e2m1x2_codes_bf16x2(uint32_t q, uint32_t sign_source) {
  const uint32_t clamped = bf16x2_min(q & 0x7fff7fffu, 0x40c040c0u);         // min(|q|, 6)
  const uint32_t exponent = bf16x2_max(clamped, 0x3f803f80u) & 0x7f807f80u;  // of max(|q|, 1): 127 + range
  const uint32_t magic = exponent + 0x03000300u;                             // 2^(6 + range)
  const uint32_t steps = bf16x2_add(clamped, magic) - magic;
  const uint32_t codes = steps + (exponent >> 6) - 0x00fe00feu;  // + 2·range
  return codes | ((sign_source >> 12) & 0x00080008u);            // sign bits 15, 31 -> 3, 19
}

// NaN-propagating max of the magnitudes of a lane's 16 BF16 channels, as fp32.
__device__ float pairs_amax(const uint32_t (&pairs)[kChannels / 2]) {
  const uint32_t m = pairs_reduce(pairs, [](uint32_t a, uint32_t b) { return bf16x2_max_abs_nan(a, b); });
  return fabsf(__uint_as_float(m << 16));  // the sign bit is an XOR of signs
}

// The E2M1 codes of the four BF16 pairs pairs[first … first+3] in one word (channel order, two per byte), for
// their block's E8M0 scale code.
__device__ uint32_t mxfp4_word(const uint32_t (&pairs)[kChannels / 2], int first, uint32_t code) {
  uint32_t word = 0;
  if (code < 254u) {  // 2^-e a normal BF16 (code 0xFF: NaN block, all codes 0)
    const uint32_t inverse = ((254u - code) << 7) * 0x10001u;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t codes = e2m1x2_codes_bf16x2(bf16x2_mul(pairs[first + k], inverse), pairs[first + k]);
      word |= ((codes | (codes >> 12)) & 0xffu) << (8 * k);
    }
  } else if (code == 254u) {  // 2^-127 is subnormal: the fp32 path (encode_fp4_chunk)
    const float reciprocal = pow2_scale_inverse(code);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t p = pairs[first + k];
      word |=
          kv_fast::e2m1x2_codes_bf16(__uint_as_float(p << 16), __uint_as_float(p & 0xffff0000u), reciprocal)
          << (8 * k);
    }
  }
  return word;
}

// MXFP4 key (faithful) from the lane's packed pairs: as store_mxfp4_chunk.
__device__ void store_mxfp4_pairs(uint8_t* record, int dim, int lane_in_row,
                                  const uint32_t (&pairs)[kChannels / 2], bool active) {
  float amax = pairs_amax(pairs);
  amax = kv_fast::amax_combine(amax, __shfl_xor_sync(kFullMask, amax, 1));
  const uint32_t code = pow2_scale_code_fast(amax, nm::kMxfp4AmaxFloor, nm::kInvE2m1Max);
  const uint32_t packed[2] = {mxfp4_word(pairs, 0, code), mxfp4_word(pairs, 4, code)};
  if (!active) return;
  store_words<2>(record + lane_in_row * (kChannels / 2), packed);
  if (lane_in_row % 2 == 0) record[dim / 2 + lane_in_row / 2] = static_cast<uint8_t>(code);
}

// FP8 window row (faithful) from the lane's packed pairs: as store_fp8_chunk, with x·2^-e formed exactly
// in mul.rn.bf16x2 (8 products per lane instead of 16; |x·2^-e| <= ~448, and anything below the BF16
// normal range is far below E4M3's first rounding step 2^-10) and the block amax on pairs; the E4M3
// conversion still takes fp32 (unpacking is exact). Code 254 (2^-127, a BF16 subnormal) takes the fp32
// path.
__device__ void store_fp8_pairs(uint8_t* record, int dim, int lane_in_row,
                                const uint32_t (&pairs)[kChannels / 2], bool active) {
  float amax = pairs_amax(pairs);
  amax = kv_fast::amax_combine(amax, __shfl_xor_sync(kFullMask, amax, 1));
  const uint32_t code = pow2_scale_code_fast(amax, nm::kFp8AmaxFloor, nm::kInvE4m3Max);
  uint32_t packed[4] = {0, 0, 0, 0};
  if (code < 254u) {  // code 0xFF: the NaN scale of a poisoned block, all codes 0 as on the host
    const uint32_t inverse = ((254u - code) << 7) * 0x10001u;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t q0 = bf16x2_mul(pairs[2 * w], inverse), q1 = bf16x2_mul(pairs[2 * w + 1], inverse);
      const uint32_t lo = kv_fast::e4m3x2_codes(__uint_as_float(q0 << 16), __uint_as_float(q0 & 0xffff0000u));
      const uint32_t hi = kv_fast::e4m3x2_codes(__uint_as_float(q1 << 16), __uint_as_float(q1 & 0xffff0000u));
      packed[w] = lo | (hi << 16);
    }
  } else if (code == 254u) {
    const float inverse = pow2_scale_inverse(code);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t p0 = pairs[2 * w], p1 = pairs[2 * w + 1];
      const uint32_t lo = kv_fast::e4m3x2_codes(__fmul_rn(__uint_as_float(p0 << 16), inverse),
                                                __fmul_rn(__uint_as_float(p0 & 0xffff0000u), inverse));
      const uint32_t hi = kv_fast::e4m3x2_codes(__fmul_rn(__uint_as_float(p1 << 16), inverse),
                                                __fmul_rn(__uint_as_float(p1 & 0xffff0000u), inverse));
      packed[w] = lo | (hi << 16);
    }
  }
  if (!active) return;
  store_words<4>(record + lane_in_row * kChannels, packed);
  if (lane_in_row % 2 == 0) record[dim + lane_in_row / 2] = static_cast<uint8_t>(code);
}

enum class RecordKind { kWindow, kEntry, kKey };

// record_address with the page division by a multiply-high: for 32-bit n and 2 <= d < 2^32, floor(n / d) =
// floor(n · ceil(2^64 / d) / 2^64) (Lemire, Kaser, Kurz 2019, theorem 1 with F = 64 >= N + log2 d). The
// 64-bit division record_address compiles to took ~36 instructions and a register-hungry branch per row
// (round s5r0 profile). Rows past 2^32 or pages of one record take record_address itself.
struct RecordPages {
  RecordPagesView view;
  uint64_t magic;  // ceil(2^64 / records_per_page); 0: no fast path
  __device__ explicit RecordPages(const RecordPagesView& v)
      : view(v),
        magic(v.records_per_page >= 2 && v.records_per_page <= 0xffffffffll
                  ? ~uint64_t{0} / static_cast<uint64_t>(v.records_per_page) + 1
                  : 0) {}
  __device__ uint8_t* address(int64_t j) const {
    if (magic != 0 && static_cast<uint64_t>(j) <= 0xffffffffull) {
      const auto n = static_cast<uint32_t>(j);
      const auto page_index = static_cast<uint32_t>(__umul64hi(magic, n));
      const uint32_t in_page = n - page_index * static_cast<uint32_t>(view.records_per_page);
      const int64_t page = view.page_table[page_index];
      return view.pool + (page * view.records_per_page + in_page) * view.record_bytes;
    }
    return record_address(view, j);
  }
};

// The record of a finished row: the kind's quantizer (faithful) or fp32 channels (clean). All lanes call it
// (the block amax shuffles); only `active` lanes store.
template <RecordKind kKind, bool kFaithful>
__device__ void store_record(uint8_t* record, int dim, int lane_in_row, const float (&x)[kChannels],
                             bool active, const Nvfp4Reciprocals* reciprocals = nullptr) {
  if constexpr (!kFaithful) {
    if (active) store_f32_chunk(reinterpret_cast<float*>(record) + lane_in_row * kChannels, x);
  } else if constexpr (kKind == RecordKind::kWindow) {
    store_fp8_chunk(record, dim, lane_in_row, x, active);
  } else if constexpr (kKind == RecordKind::kEntry) {
    store_nvfp4_chunk(record, dim, lane_in_row, x, active, *reciprocals);
  } else {
    store_mxfp4_chunk(record, dim, lane_in_row, x, active);
  }
}

}  // namespace
}  // namespace flashkv::cuda
