// The KV write path's lane layout (contract in kv_write.cuh), shared by its kernels.
//
// Work split: a row of `dim` channels belongs to dim/16 consecutive lanes of one warp, 16 channels each (a
// 512-channel row is a warp, a 128-channel key a quarter warp). Each lane loads its channels once (two or
// four 16-byte loads), and the whole chain — pooling, RMSNorm, RoPE, block scales, codes — runs in registers,
// the row reductions (sum of squares, block amax) through shuffles within the row's lanes. Each lane then
// stores its part of the record: packed codes, and the scale bytes of its blocks. CTAs of 256 threads stride
// over the rows; the loop trip count is warp-uniform so every shuffle has all 32 lanes.
//
// The mechanisms, one header or kernel file each (device helpers are header-only: the library is built
// without relocatable device code):
//   kv_write_lanes.cuh       this layout: lanes of a row, packed BF16 pairs, row reductions
//   kv_write_row_ring.cuh    input rows through a per-warp cp.async ring in shared memory
//   kv_write_rms_norm.cuh    RMSNorm: fp32 estimate with a proven margin, out-of-line exact fallback
//   kv_write_rope.cuh        RoPE on packed pairs: fp32 cos/sin fast path, shared-memory pair exchange
//   kv_write_records.cuh     FP8 / MXFP4 / NVFP4 block encoding of a lane's channels, record addresses
//   kv_write_window.cu       window rows (kernel and launcher), with the bench's stage ablations
//   kv_write_entries.cu      compressor entries: ratio 1 through the row ring, ratio 2 pooling
//   kv_write_index_keys.cu   index keys
//   kv_write_launch.cuh/.cu  grid size, occupancy caps, dim/numerics dispatch, record sizes
//
// Exactness against the CPU backend (faithful):
//   - Sum of squares: the CPU sums x² in double over eight partial sums (numerics.hpp dot()). When every
//     partial sum is exact, the order does not matter: the squares are multiples of q = (a power of two every
//     channel is a multiple of)² with at most 48 significant bits, so if the whole sum is below 2^52·q every
//     partial sum of any order is an exact multiple of q below 2^53·q. The kernel checks that bound on a sum
//     in any order and recomputes the CPU's order (a serial scan across the lanes) only for rows that fail
//     it (rows with channels 2^20 times smaller than their norm, or fp32 rows of full precision).
//   - RMSNorm output bf16(fp32(w·(x/root))) in double: the kernel forms w·x·rsqrt(mean square) in fp32
//     (r = RN32 of one double Newton step from rsqrt.approx; estimate within ~3.0001 fp32 ulps) and keeps its
//     BF16 rounding when that value is more than kMidpointMargin (3) ulps from a BF16 rounding midpoint (the
//     argument needs > 2.51: norm_estimate), so the exact value and the CPU's double result round the same
//     way; otherwise the out-of-line fallback evaluates the CPU's double expression itself
//     (kv_write_rms_norm.cuh).
//   - RoPE: angles as fp32 products; cos, sin and the rotation in fp32 (a k·π/128 table and short
//     polynomials) with an error bound, kept when the bound leaves the rotated pair's BF16 rounding decided
//     for any cos/sin within an fp32 ulp of the exact ones; otherwise the CPU's double expressions with
//     libdevice's sincos (see the caveat in kv_write.cuh; host check in tools/exactness-checks/). The row's
//     pairs are spread over all its lanes.
//   - Ratio-2 pooling: an fp32 estimate with an error bound, kept when it is far from a BF16 midpoint, else
//     the CPU's double expression (exp from libdevice).
//   - Quantizers: block scales from the host functions compiled for the device, codes from the exact
//     shortcuts of kv_element_codecs.cuh (as kv_quant.cu).
#pragma once

#include <flashkv/numeric/scalar_codecs.hpp>

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kv_write.cuh"

namespace flashkv::cuda {
// Internal linkage on purpose: without relocatable device code each .cu compiles its own copy, so ptxas
// sees every caller of the out-of-line helpers, as when the KV write path was one translation unit.
namespace {

namespace nm = flashkv::numeric;

constexpr int kChannels = 16;  // channels per lane
constexpr int kThreads = 256;  // per CTA
constexpr unsigned kFullMask = 0xffffffffu;

// Lane geometry of a row of kDim channels: kLanes lanes per row, kRowsPerWarp rows per warp.
template <int kDim>
struct RowLanes {
  static constexpr int kLanes = kDim / kChannels;
  static constexpr int kRowsPerWarp = 32 / kLanes;
  int lane_in_row;
  int first_lane;
  int row_in_warp;
  __device__ RowLanes() {
    const int lane = static_cast<int>(threadIdx.x % 32);
    lane_in_row = lane % kLanes;
    first_lane = lane - lane_in_row;
    row_in_warp = lane / kLanes;
  }
};

// A lane's 16 channels as 8 (re, im) pairs: fp32 (clean), or BF16 bits with channel 2k in the low half of
// word k (faithful: RMSNorm's output stays packed through RoPE, unpacked once for the record).
template <bool kFaithful>
using ChannelPair = std::conditional_t<kFaithful, uint32_t, float2>;

__device__ void unpack_pairs(const uint32_t (&pairs)[kChannels / 2], float (&x)[kChannels]) {
#pragma unroll
  for (int k = 0; k < kChannels / 2; ++k) {
    x[2 * k] = __uint_as_float(pairs[k] << 16);
    x[2 * k + 1] = __uint_as_float(pairs[k] & 0xffff0000u);
  }
}
__device__ void unpack_pairs(const float2 (&pairs)[kChannels / 2], float (&x)[kChannels]) {
#pragma unroll
  for (int k = 0; k < kChannels / 2; ++k) x[2 * k] = pairs[k].x, x[2 * k + 1] = pairs[k].y;
}

// A lane's 8 pairs to and from shared memory (16-byte aligned) with 16-byte accesses.
__device__ void store_pairs(uint32_t* dst, const uint32_t (&p)[kChannels / 2]) {
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(p[0], p[1], p[2], p[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(p[4], p[5], p[6], p[7]);
}
__device__ void store_pairs(float2* dst, const float2 (&p)[kChannels / 2]) {
#pragma unroll
  for (int q = 0; q < 4; ++q)
    reinterpret_cast<float4*>(dst)[q] = make_float4(p[2 * q].x, p[2 * q].y, p[2 * q + 1].x, p[2 * q + 1].y);
}
__device__ void load_pairs(const uint32_t* src, uint32_t (&p)[kChannels / 2]) {
  const uint4 lo = reinterpret_cast<const uint4*>(src)[0], hi = reinterpret_cast<const uint4*>(src)[1];
  p[0] = lo.x, p[1] = lo.y, p[2] = lo.z, p[3] = lo.w, p[4] = hi.x, p[5] = hi.y, p[6] = hi.z, p[7] = hi.w;
}
__device__ void load_pairs(const float2* src, float2 (&p)[kChannels / 2]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float4 v = reinterpret_cast<const float4*>(src)[q];
    p[2 * q] = make_float2(v.x, v.y);
    p[2 * q + 1] = make_float2(v.z, v.w);
  }
}

// ---- row reductions (within the row's kLanes lanes) -------------------------------------------------------

template <int kLanes>
__device__ double row_sum(double v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    const int high = __shfl_xor_sync(kFullMask, __double2hiint(v), offset);
    const int low = __shfl_xor_sync(kFullMask, __double2loint(v), offset);
    v = __dadd_rn(v, __hiloint2double(high, low));
  }
  return v;
}

template <int kLanes>
__device__ uint32_t row_min(uint32_t v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v = min(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// ---- packed BF16 pair arithmetic (PTX bf16x2 instructions) ---------------------------------------------
__device__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ uint32_t bf16x2_min(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ uint32_t bf16x2_max(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// min(|a|, |b|) per half, with the sign bit the XOR of the inputs' (mask it before use): the abs is free in
// HMNMX2 (.XORSIGN with |a|, |b| operands), where masking both inputs cost two LOP3 per pair.
__device__ uint32_t bf16x2_min_abs(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("min.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// max(|a|, |b|) per half, NaN-propagating, sign bit as bf16x2_min_abs.
__device__ uint32_t bf16x2_max_abs_nan(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// A lane's 16 BF16 channels (8 packed pairs) reduced by an associative bf16x2 operation `op` as a tree
// (depth 4, not a 16-long chain); both halves of the result hold the reduction.
template <typename Op>
__device__ uint32_t pairs_reduce(const uint32_t (&pairs)[kChannels / 2], Op op) {
  uint32_t m[kChannels / 4];
#pragma unroll
  for (int i = 0; i < kChannels / 4; ++i) m[i] = op(pairs[2 * i], pairs[2 * i + 1]);
  const uint32_t r = op(op(m[0], m[1]), op(m[2], m[3]));
  return op(r, __byte_perm(r, 0, 0x1032));
}

__device__ uint32_t bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // cvt.rn.bf16x2.f32: RNE, one instruction
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

}  // namespace
}  // namespace flashkv::cuda
