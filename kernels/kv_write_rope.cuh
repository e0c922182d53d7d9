// RoPE (rope.cpp: forward, heads = 1) on a row's last rope_dim channels held as packed pairs by the row's
// lanes, byte-identical to the CPU backend. Faithful angles are fp32 products; cos/sin come from a k·π/128
// table and short fp32 polynomials with an error bound, and a pair keeps the fast result when that bound
// leaves its BF16 rounding decided for any cos/sin within an fp32 ulp (else the CPU's double expression with
// libdevice's sincos, out of line). The rotated channels sit on a few lanes of the row, so their pairs are
// exchanged through a per-row slice of shared memory and spread over all the row's lanes; cos/sin depend
// only on the position and are computed ahead of RMSNorm, where they fill the reduction's latency.
#pragma once

#include <cstdint>

#include "kv_write_lanes.cuh"

namespace flashkv::cuda {
namespace {  // internal linkage: see kv_write_lanes.cuh

// sin and cos of a double `a`, bit-identical to libdevice's sincos (the CUDA 13 fast path for |a| < 2^31,
// read off its SASS: a·2/π rounded to the nearest integer k, a − k·π/2 in three fused steps, the same two
// polynomials and quadrant swaps) but with k from the 1.5·2^52 rounding trick instead of an f64 -> int ->
// f64 round trip through the conversion unit, and the coefficients read from the constant bank instead of
// two uniform moves each. Larger |a|, Inf and NaN take libdevice's own path.
__constant__ double kTrig[16] = {
    0x1.45f306dc9c883p-1,    // 2/π
    0x1.921fb54442d18p+0,    // π/2, three parts
    0x1.1a62633145c00p-54,   //
    0x1.b839a252049c0p-104,  //
    0x1.1eea7c1ef8528p-29,   // cos: z^7 … z^2 coefficients, then −1/2, 1
    -0x1.8ff8320fd8164p-37,  //
    -0x1.27e4f8e06e6d9p-22,  //
    0x1.a01a019ddbce9p-16,   //
    -0x1.6c16c16c15d47p-10,  //
    0x1.5555555555551p-5,    //
    -0x1.ae5f12cb0d246p-26,  // sin: z^6 … z coefficients
    0x1.5db65f9785ebap-33,   //
    0x1.71de369ace392p-19,   //
    -0x1.a01a019db62a1p-13,  //
    0x1.1111111110818p-7,    //
    -0x1.5555555555554p-3,   //
};

__device__ void sincos_libdevice(double a, double& sine, double& cosine) {
  if (!(fabs(a) < 0x1p31)) {
    sincos(a, &sine, &cosine);
    return;
  }
  constexpr double kRound = 0x1.8p52;  // adding it rounds |x| < 2^51 to an integer, ties to even
  const double t = __dadd_rn(__dmul_rn(a, kTrig[0]), kRound);
  const int quadrant = __double2loint(t);
  const double k = __dsub_rn(t, kRound);
  double r = __fma_rn(-k, kTrig[1], a);
  r = __fma_rn(-k, kTrig[2], r);
  r = __fma_rn(-k, kTrig[3], r);
  const double z = __dmul_rn(r, r);
  double c = __fma_rn(z, kTrig[5], kTrig[4]);
#pragma unroll
  for (int i = 6; i < 10; ++i) c = __fma_rn(z, c, kTrig[i]);
  c = __fma_rn(z, c, -0.5);
  c = __fma_rn(z, c, 1.0);
  double s = __fma_rn(z, kTrig[11], kTrig[10]);
#pragma unroll
  for (int i = 12; i < 16; ++i) s = __fma_rn(z, s, kTrig[i]);
  s = __fma_rn(__dmul_rn(z, s), r, r);
  // Quadrant q: sin(r + q·π/2) is (s, c, −s, −c)[q], cos is (c, −s, −c, s)[q]; negation flips the sign bit,
  // as libdevice does.
  const bool odd = (quadrant & 1) != 0;
  const double sin_r = odd ? c : s, cos_r = odd ? s : c;
  const int sin_sign = (quadrant & 2) << 30, cos_sign = ((quadrant + 1) & 2) << 30;
  sine = __hiloint2double(__double2hiint(sin_r) ^ sin_sign, __double2loint(sin_r));
  cosine = __hiloint2double(__double2hiint(cos_r) ^ cos_sign, __double2loint(cos_r));
}

// {sin, cos}(k·π/128) for k = 0 … 255, correctly rounded to fp32 (mpmath). Copied to shared memory per CTA:
// lanes index it with different k, which the constant bank would serialize.
__constant__ float2 kSinCosPi128[256] = {
#include "rope_sincos_table.inc"
};

// One pair (re, im) rotated by the angle as rope.cpp does: the rotated pair is computed in double from the
// fp32 cos/sin and rounded to fp32, then (faithful) BF16, one cvt for the pair (RNE as the host's, NaN
// payloads aside, which the quantizers zero). Faithful angles are fp32 products position·f, clean ones
// double.
__device__ float2 rotate_values(float re_f, float im_f, double c, double s) {
  const double re = re_f, im = im_f;
  return make_float2(__double2float_rn(__dsub_rn(__dmul_rn(re, c), __dmul_rn(im, s))),
                     __double2float_rn(__dadd_rn(__dmul_rn(re, s), __dmul_rn(im, c))));
}

// The CPU's faithful rotation of a BF16 pair: cos and sin of the fp32 angle as RN32 of libdevice's double
// sincos (the CPU's glibc agrees to 1-2 double ulps: kv_write.cuh), the rotation in double. Out of line: the
// rare pairs rotate_pair's fp32 path leaves open.
__device__ __noinline__ uint32_t rotate_pair_exact(uint32_t pair, float angle) {
  double sine, cosine;
  sincos_libdevice(angle, sine, cosine);
  const float2 out = rotate_values(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u),
                                   __double2float_rn(cosine), __double2float_rn(sine));
  return bf16x2_bits(out.x, out.y);
}

// cos and sin of an fp32 angle |a| < 2^24 in fp32, each within 1.2·2^-24 of the exact value (absolute):
// k = RN(a·128/π) in double (one fma: |a·128/π| < 2^29.4, so the 1.5·2^52 addend rounds it to an integer
// held in the low bits), r = a − k·π/128 in double with π/128's double (|k|·|π/128 − hi| < 2^-30.5; |r| <=
// π/256 + that), rounded to fp32; cos r − 1 = −r²/2 (the dropped r^4/24 < 2^-30) and sin r = r − r³/6
// (r^5/120 < 2^-38) in fp32, and the angle-sum formulas with {sin, cos}(k·π/128) from `table` (fp32, within
// 2^-25). Error: table 2^-25 + final rounding 2^-25 + the rest < 2^-28 (derivation in
// docs/perf-notes/kv-write.md, measured by tools/exactness-checks/rope_fp32_rotation.cpp). ~14 instructions,
// against ~30 for the double table path and its ~10-instruction midpoint test (sessions 4-5): the exactness
// test moved to the rotated BF16 result (rotate_pair), whose 8 significant bits leave far more room than
// cos/sin's fp32 rounding.
__constant__ double kPi128[2] = {0x1.45f306dc9c883p+5, 0x1.921fb54442d18p-6};  // 128/π, π/128 (double)

__device__ void cos_sin_f32(float angle, const float2* table, float& c, float& s) {
  const double a = angle;
  const double t = __fma_rn(a, kPi128[0], 0x1.8p52);  // 1.5·2^52 + RN(a·128/π)
  const double k = __dsub_rn(t, 0x1.8p52);
  const float r = __double2float_rn(__fma_rn(-k, kPi128[1], a));
  const float2 e = table[__double2loint(t) & 255];                    // {sin, cos}(k·π/128)
  const float h = __fmul_rn(__fmul_rn(r, r), -0.5f);                  // cos r − 1
  const float sin_r = __fmaf_rn(__fmul_rn(r, h), 0x1.555556p-2f, r);  // r + (−r³/2)·RN(1/3)
  s = __fadd_rn(e.x, __fmaf_rn(e.x, h, __fmul_rn(e.y, sin_r)));
  c = __fadd_rn(e.y, __fmaf_rn(e.y, h, -__fmul_rn(e.x, sin_r)));
}

// rotate_pair's bound on |u − V| per unit of |re| + |im|, V = re·c32 − im·s32 the CPU's exact rotation for
// any c32, s32 within 2^-24 of cos and sin (one fp32 ulp: both libdevice's and glibc's RN32 qualify): c, s
// within 1.2·2^-24 of cos, sin, so 2.2·2^-24 from c32, s32 (times |re| + |im|), plus the two fp32 roundings
// of u (2^-24·|im·s| and half an ulp of u, each at most (1 + 2^-22)·2^-24·(|re| + |im|)): 4.2001·2^-24 in
// all. 5·2^-24 covers it with the roundings of |re| + |im| and of the bound itself.
constexpr float kRotationBound = 0x1.4p-22f;  // 5·2^-24

// One faithful pair (re, im BF16 bits, re in the low half) rotated by position·f: the CPU's value is
// bf16(RN32(re·c32 − im·s32)) (rotate_values in double). Here u = RN32(re·c − RN32(im·s)) and v = RN32(im·c +
// RN32(re·s)) in fp32 with cos_sin_f32, and B >= |u − V| (kRotationBound): V lies in [RD(u − B), RU(u + B)],
// so do the CPU's double and fp32 roundings of it (monotone, with fp32 endpoints), and so does its BF16
// rounding between the BF16 roundings of the ends: when those agree for both values, that is the CPU's
// result. Else (cancellation, a value near a BF16 midpoint, zero pairs: 0.18% of pairs of normal values) and
// for |a| >= 2^24 or |re| + |im| >= 2^100 (Inf, NaN), the CPU's expression. The bound's 2^-120 term covers
// the absolute rounding errors (2^-150 each) of subnormal products. Host check:
// tools/exactness-checks/rope_fp32_rotation.cpp.
// rotate_pair's fast path without its fallback, from cos_sin_f32's c and s: whether the pair is decided, and
// its rotated BF16 pair if so.
__device__ bool rotate_pair_fast(uint32_t pair, float angle, float c, float s, uint32_t& rotated) {
  const float re = __uint_as_float(pair << 16), im = __uint_as_float(pair & 0xffff0000u);
  const float u = __fmaf_rn(re, c, -__fmul_rn(im, s));
  const float v = __fmaf_rn(im, c, __fmul_rn(re, s));
  const float sum = __fadd_rn(fabsf(re), fabsf(im));
  const float bound = __fmaf_rn(sum, kRotationBound, 0x1p-120f);
  rotated = bf16x2_bits(__fsub_rd(u, bound), __fsub_rd(v, bound));
  const uint32_t high = bf16x2_bits(__fadd_ru(u, bound), __fadd_ru(v, bound));
  return (rotated == high) & (sum < 0x1p100f) & (fabsf(angle) < 0x1p24f);  // no short-circuit branches
}
__device__ uint32_t rotate_pair(uint32_t pair, float position_f, float freq_f, const float2* cos_sin_table) {
  const float angle = __fmul_rn(position_f, freq_f);
  float c, s;
  cos_sin_f32(angle, cos_sin_table, c, s);
  uint32_t rotated;
  return rotate_pair_fast(pair, angle, c, s, rotated) ? rotated : rotate_pair_exact(pair, angle);
}
__device__ float2 rotate_pair(float2 pair, double position_d, double freq) {
  double c, s;
  sincos(__dmul_rn(position_d, freq), &s, &c);
  return rotate_values(pair.x, pair.y, c, s);
}

// The RoPE frequencies, read once per CTA: double (clean) and fp32 (faithful angles), pair p at [p].
struct RopeFrequencies {
  double f64[32];
  float f32[32];
  float2 sin_cos[256];  // kSinCosPi128 (faithful angles)
};

// Called by every thread of the CTA before its rows (one barrier).
__device__ void load_rope_frequencies(const RopeParams& rope, RopeFrequencies& freqs) {
  if (threadIdx.x < 32) {  // pairs past rope_dim / 2: 0 (rope_trig reads all of a lane's slots)
    const double f =
        threadIdx.x < static_cast<unsigned>(rope.rope_dim / 2) ? __ldg(rope.freqs + threadIdx.x) : 0.0;
    freqs.f64[threadIdx.x] = f;
    freqs.f32[threadIdx.x] = static_cast<float>(f);
  }
  freqs.sin_cos[threadIdx.x] = kSinCosPi128[threadIdx.x];  // kThreads = 256
  __syncthreads();
}

// Pairs of one row a table holds: rope_dim <= 64 (validated), and no more pairs than the row has.
template <int kDim>
constexpr int kRopePairs = kDim / 2 < 32 ? kDim / 2 : 32;

// One slice per row of each warp (16-byte aligned chunks), and the frequencies.
template <int kDim, bool kFaithful>
struct RopeTables {
  static constexpr int kRowsPerWarp = 32 / (kDim / kChannels);
  __align__(16) ChannelPair<kFaithful> slices[kThreads / 32][kRowsPerWarp][kRopePairs<kDim>];
  RopeFrequencies freqs;
};

// What a lane needs for RoPE, fixed for the kernel (set up before the row loop): the row's last rope_dim
// channels sit on a few lanes of the row, so the pairs go through `table` (this row's slice of shared
// memory): the owning lanes put them there, every lane of the row rotates pairs p ≡ lane (mod kLanes) — one
// cos/sin each for a 512-channel row instead of eight on four lanes — and the owners take the results back.
// When the rotated channels start on a lane boundary (rope_dim a multiple of 16: the V4 shapes), owners
// move whole chunks with 16-byte accesses.
template <bool kFaithful>
struct RopeLane {
  using Pair = ChannelPair<kFaithful>;
  Pair* table;      // this row's slice
  Pair* chunk;      // an owner's pair k of its chunk (channels chunk_first + 2k, +2k+1) at chunk[k]
  int first_pair;   // an owner's first rotated pair of its chunk (0 unless the rotated channels start in it)
  int pairs;        // rope_dim / 2
  int lane_in_row;  //
  bool owner;
  bool whole_chunks;
  const RopeFrequencies* freqs;
  __device__ RopeLane(Pair* row_table, const RopeFrequencies& f, int rope_dim, int dim, int lane)
      : table(row_table), pairs(rope_dim / 2), lane_in_row(lane), freqs(&f) {
    const int first_rotated = dim - rope_dim;
    const int chunk_first = lane * kChannels;
    owner = chunk_first + kChannels > first_rotated;
    whole_chunks = first_rotated % kChannels == 0;
    chunk = row_table + (chunk_first - first_rotated) / 2;  // both ends are even
    first_pair = (first_rotated - chunk_first) / 2;
  }
};

// This lane's RopeLane in a kernel whose rows have kDim channels (RowLanes).
template <int kDim, bool kFaithful>
__device__ RopeLane<kFaithful> rope_lane_of(RopeTables<kDim, kFaithful>& tables, int rope_dim) {
  const RowLanes<kDim> lanes;
  return RopeLane<kFaithful>(tables.slices[threadIdx.x / 32][lanes.row_in_warp], tables.freqs, rope_dim, kDim,
                             lanes.lane_in_row);
}

// The largest rope_dim a row of kLanes lanes allows (64 for the V4 rows: 32 pairs) and a lane's share of its
// pairs (window rows 1, keys 4).
template <int kLanes>
constexpr int kMaxRopePairs = kChannels / 2 * kLanes < 32 ? kChannels / 2 * kLanes : 32;
template <int kLanes>
constexpr int kLaneRopePairs = kMaxRopePairs<kLanes> / kLanes;

// A faithful lane's angles and fp32 cos/sin (cos_sin_f32) for its pairs p = lane_in_row + j·kLanes of the
// largest rope_dim. They depend only on the position, so the row computes them first (rope_trig), where
// their independent chains fill the latency of the RMSNorm reduction (s7 profile: each warp issued one
// instruction per ~9.4 cycles, the row being a dependent chain; the Σx² shuffle tree alone held 20% of the
// window kernel's stall samples), instead of after the owners' stores, on the row's critical path. Clean
// rows (double angles) keep their own per-pair path: RopeTrig<.., false> is empty.
template <int kLanes, bool kFaithful>
struct RopeTrig {
  static constexpr int kPairs = kLaneRopePairs<kLanes>;
  float angle[kPairs], c[kPairs], s[kPairs];
};
template <int kLanes>
struct RopeTrig<kLanes, false> {};

template <int kLanes, bool kFaithful>
__device__ RopeTrig<kLanes, kFaithful> rope_trig(int64_t position, const RopeLane<kFaithful>& rl) {
  RopeTrig<kLanes, kFaithful> t;
  if constexpr (kFaithful) {
    const float position_f = __ll2float_rn(position);
#pragma unroll
    for (int j = 0; j < RopeTrig<kLanes, kFaithful>::kPairs; ++j) {
      // f32[p] is 0 past rope_dim / 2 (load_rope_frequencies): unused then (rope_chunk's generic path)
      t.angle[j] = __fmul_rn(position_f, rl.freqs->f32[rl.lane_in_row + j * kLanes]);
      cos_sin_f32(t.angle[j], rl.freqs->sin_cos, t.c[j], t.s[j]);
    }
  }
  return t;
}

// A faithful lane's pairs p = lane_in_row + j·kLanes of the row's table, when the row rotates the largest
// rope_dim it allows: the fast paths stage by stage (a key lane has four: their chains interleave) without a
// branch between them, then the rare declined pairs (rotate_pair_exact) behind one branch.
template <int kLanes>
__device__ void rotate_lane_pairs(const RopeTrig<kLanes, true>& t, const RopeLane<true>& rl) {
  constexpr int kPairs = RopeTrig<kLanes, true>::kPairs;
  uint32_t open = 0;  // bit j: pair j declined
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    uint32_t& pair = rl.table[rl.lane_in_row + j * kLanes];
    uint32_t rotated;
    if (rotate_pair_fast(pair, t.angle[j], t.c[j], t.s[j], rotated)) {
      pair = rotated;
    } else {
      open |= 1u << j;
    }
  }
  if (open != 0) {
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      uint32_t& pair = rl.table[rl.lane_in_row + j * kLanes];
      if (open & (1u << j)) pair = rotate_pair_exact(pair, t.angle[j]);
    }
  }
}

// Rotates the row's last rope_dim channels (held as pairs) by position·f_i (RopeLane has the data flow).
template <int kLanes, bool kFaithful>
__device__ void rope_chunk(ChannelPair<kFaithful> (&pairs)[kChannels / 2], int64_t position,
                           const RopeLane<kFaithful>& rl, const RopeTrig<kLanes, kFaithful>& trig) {
  if (rl.owner) {
    if (rl.whole_chunks) {
      store_pairs(rl.chunk, pairs);
    } else {
#pragma unroll
      for (int k = 0; k < kChannels / 2; ++k) {
        if (k >= rl.first_pair) rl.chunk[k] = pairs[k];
      }
    }
  }
  __syncwarp();
  const auto rotate = [&](int p) {
    if constexpr (kFaithful) {
      rl.table[p] = rotate_pair(rl.table[p], __ll2float_rn(position), rl.freqs->f32[p], rl.freqs->sin_cos);
    } else {
      rl.table[p] = rotate_pair(rl.table[p], static_cast<double>(position), rl.freqs->f64[p]);
    }
  };
  // The largest rope_dim a row allows (64 for the V4 rows) unrolled, from the row's RopeTrig (faithful): no
  // loop runs.
  if (rl.pairs == kMaxRopePairs<kLanes>) {
    if constexpr (kFaithful) {
      rotate_lane_pairs<kLanes>(trig, rl);
    } else {
      constexpr int kLanePairs = kLaneRopePairs<kLanes>;
#pragma unroll
      for (int j = 0; j < kLanePairs; ++j) rotate(rl.lane_in_row + j * kLanes);
    }
  } else {
    for (int p = rl.lane_in_row; p < rl.pairs; p += kLanes) rotate(p);
  }
  __syncwarp();
  if (rl.owner) {
    if (rl.whole_chunks) {
      load_pairs(rl.chunk, pairs);
    } else {
#pragma unroll
      for (int k = 0; k < kChannels / 2; ++k) {
        if (k >= rl.first_pair) pairs[k] = rl.chunk[k];
      }
    }
  }
  __syncwarp();  // the table is rewritten for the warp's next row
}

}  // namespace
}  // namespace flashkv::cuda
