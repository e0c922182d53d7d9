// The fused KV write path (contract in kv_write.cuh).
//
// Work split: a row of `dim` channels belongs to dim/16 consecutive lanes of one warp, 16 channels each (a
// 512-channel row is a warp, a 128-channel key a quarter warp). Each lane loads its channels once (two or
// four 16-byte loads), and the whole chain — pooling, RMSNorm, RoPE, block scales, codes — runs in registers,
// the row reductions (sum of squares, block amax) through shuffles within the row's lanes. Each lane then
// stores its part of the record: packed codes, and the scale bytes of its blocks. CTAs of 256 threads stride
// over the rows; the loop trip count is warp-uniform so every shuffle has all 32 lanes.
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
//     argument needs > 2.51, see below), so the exact value and the CPU's double result round the same way;
//     otherwise the out-of-line fallback evaluates the CPU's double expression itself.
//   - RoPE: angles as fp32 products; cos, sin and the rotation in fp32 (a k·π/128 table and short
//     polynomials) with an error bound, kept when the bound leaves the rotated pair's BF16 rounding decided
//     for any cos/sin within an fp32 ulp of the exact ones; otherwise the CPU's double expressions with
//     libdevice's sincos (see the caveat in kv_write.cuh; host check in tools/exactness-checks/). The row's
//     pairs are spread over all its lanes.
//   - Ratio-2 pooling: an fp32 estimate with an error bound, kept when it is far from a BF16 midpoint, else
//     the CPU's double expression (exp from libdevice).
//   - Quantizers: block scales from the host functions compiled for the device, codes from the exact
//     shortcuts of kv_element_codecs.cuh (as kv_quant.cu).
#include "kv_write.cuh"

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_check.cuh"
#include "kv_element_codecs.cuh"
#include "kv_write.hpp"

namespace flashkv::cuda {
namespace {

namespace nm = flashkv::numeric;

constexpr int kChannels = 16;  // channels per lane
constexpr int kThreads = 256;
// Resident CTAs per SM the register allocation is capped for: a row is one long dependent chain, so
// throughput comes from warps in flight (GPU round 3: 96 registers, 16 warps/SM, latency-bound at 28% of
// copy).
// Window, key and ratio-1 kernels: <= 64 registers, 32 warps/SM. Until session 5 the fallback's register
// footprint made 64 spill in the row loop (s4r2: window 44.6% of copy at 80 registers vs 42.3% at 64); with
// the lean fallback (rms_norm_fallback) they fit 64 without spills (round s5r1 A/B at 256K rows, 64 vs 80
// vs 48 registers: window 46.9% / 44.2% / 43.5% of copy, keys 21.6 / 21.4 / 20.1, ratio 1 54.8 / 52.7).
// Clean rows (fp32 values, double angles) keep 3 CTAs: their double paths spill at 64.
template <bool kFaithful>
constexpr int kWindowCtasPerSm = kFaithful ? 4 : 3;
template <bool kFaithful>
constexpr int kCompressorCtasPerSm = kFaithful ? 4 : 3;
// Key kernels: as the window's. With the four pairs' cos/sin computed ahead of RMSNorm (rope_trig: twelve
// more live values) the key kernel spilled 56/108 B at 64 registers until the norm weights moved to shared
// memory (NormWeights); now it spills 4/12 B. s7r1/s7r2 A/B: 80 registers (3 CTAs) tied (25.5% of copy),
// 48 registers (5 CTAs, 20/32 B spilled) lost (24.9%), as did the window (53.1% vs 57.0%) and ratio 1 (60.2%
// vs 63.3%) at 48.
template <bool kFaithful>
constexpr int kKeyCtasPerSm = kFaithful ? 4 : 3;
constexpr unsigned kFullMask = 0xffffffffu;
// A fast RMSNorm value this many fp32 ulps or fewer from a BF16 rounding midpoint takes the double path
// (norm_estimate: the argument needs > 2.51; 3 declines 7 of every 65536 values, 5.4% of 512-channel rows;
// 5 declined 11, 8.2% of the window rows, which cost the window kernel ~13% of its time in s4final).
constexpr uint32_t kMidpointMargin = 3;
// Stage ablations of the window kernel (set_window_ablation_for_bench): kv_write.cuh.
// Compile-time for the window kernel (dim 512, faithful only): checking a run-time value in every row cost
// registers and moves.
constexpr unsigned kAblateRope = 1, kAblateNormFallback = 4, kAblateNormAndRope = 8;
unsigned g_window_ablation = 0;

// ---- row loads and stores -------------------------------------------------------------------------------

// A lane's 16 input channels as loaded (64 bytes of fp32, or 32 bytes of BF16 in q[0..1]).
struct RawChunk {
  uint4 q[4];
};

// ---- input rows through a per-warp cp.async ring ------------------------------------------------------
// Each warp copies its next row groups into its slots of a shared-memory ring (cp.async, 16 B per lane and
// copy, L2 only, 512 contiguous bytes per instruction), so kRingUnits·16 B per lane (4 BF16 rows or 2 fp32
// rows at 8 units) are in flight while the current row is processed, without holding registers: 32 KB per
// 256-thread CTA, 128 KB per SM at 4 CTAs (Little's law at ~4 TB/s and ~1-2 us asks for 32-64 KB per SM).
// GPU round 2 had each lane copy its own 32 bytes: every instruction then touched every sector of the
// group half, doubling the L2 requests (load + FP8 + store alone fell from 69.5% to 57.5% of copy).
// 16-byte units per lane: 8 (32 KB per CTA) except for rows of 32 or 64 channels, whose RoPE tables take
// 16 KB and leave room for 4 under the 48 KB of static shared memory.
template <int kDim>
constexpr int kRingUnits = kDim <= 64 ? 4 : 8;

// Each warp's slots: kUnits rows of 32 16-byte columns (units[u][warp·32 + column]).
template <int kUnits>
struct InputRing {
  uint4 units[kUnits][kThreads];
};

__device__ void cp_async16(uint4* shared_dst, const void* global_src) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(global_src) : "memory");
}
__device__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

__device__ void unpack_chunk(const RawChunk& raw, RowType type, float (&x)[kChannels]) {
  if (type == RowType::kBf16) {
    const uint32_t w[8] = {raw.q[0].x, raw.q[0].y, raw.q[0].z, raw.q[0].w,
                           raw.q[1].x, raw.q[1].y, raw.q[1].z, raw.q[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[2 * i] = __uint_as_float(w[i] << 16);
      x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[4 * i] = __uint_as_float(raw.q[i].x), x[4 * i + 1] = __uint_as_float(raw.q[i].y);
      x[4 * i + 2] = __uint_as_float(raw.q[i].z), x[4 * i + 3] = __uint_as_float(raw.q[i].w);
    }
  }
}

// A lane's channels again, for the rare paths (x need not stay live across the row): all sixteen, or channels
// 4g … 4g+3 (group(g)). From the row's ring slot, which holds it until the row is done (SlotReload), or a
// copy of values kept in registers (ValueReload: the pooled ratio-2 latents). group() reads shared memory
// directly: the RMSNorm fallback kept the reloaded row in local memory (to stay lean in registers) and its
// dependent loads stalled the window kernel 8% of its time in the s6 profile (five per call, each a
// round trip the store had not made to L1).
template <bool kBf16>
struct SlotReload {
  static constexpr int kUnitsPerRow = kBf16 ? 2 : 4;  // 16-byte units per lane and row
  const uint4* units;                                 // the slot
  int read_unit;                                      // this lane's unit u at units[read_unit ^ u]
  __device__ void operator()(float (&again)[kChannels]) const {
    RawChunk raw;
#pragma unroll
    for (int u = 0; u < 4; ++u)
      raw.q[u] = u < kUnitsPerRow ? units[read_unit ^ u] : make_uint4(0, 0, 0, 0);
    unpack_chunk(raw, kBf16 ? RowType::kBf16 : RowType::kFp32, again);
  }
  __device__ void group(int g, float (&y)[4]) const {
    if constexpr (kBf16) {  // words 2g, 2g + 1 of the lane's eight: half of unit g / 2
      const uint2 w =
          reinterpret_cast<const uint2*>(units + (read_unit ^ (g >> 1)))[g & 1];
      y[0] = __uint_as_float(w.x << 16), y[1] = __uint_as_float(w.x & 0xffff0000u);
      y[2] = __uint_as_float(w.y << 16), y[3] = __uint_as_float(w.y & 0xffff0000u);
    } else {
      const uint4 q = units[read_unit ^ g];
      y[0] = __uint_as_float(q.x), y[1] = __uint_as_float(q.y), y[2] = __uint_as_float(q.z),
      y[3] = __uint_as_float(q.w);
    }
  }
};
struct ValueReload {
  float x[kChannels];
  __device__ void operator()(float (&again)[kChannels]) const {
#pragma unroll
    for (int i = 0; i < kChannels; ++i) again[i] = x[i];
  }
  __device__ void group(int g, float (&y)[4]) const {
#pragma unroll
    for (int k = 0; k < 4; ++k) y[k] = x[4 * g + k];
  }
};

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

__device__ double square(float x) {
  const double d = x;
  return __dmul_rn(d, d);  // exact: 48 significant bits at most
}

// Σ x² of the row in the CPU's order: numerics.hpp dot(x, x, dim), eight partial sums over channel ≡ j (mod
// 8) in ascending channel order, combined ((p0+p4)+(p1+p5))+((p2+p6)+(p3+p7)). Lane L of the row holds
// channels 16L … 16L+15, so partial j takes lane 0's channels j and 8+j, then lane 1's, …: a serial scan
// every lane of the row repeats (all get the same result). kLean: the loops not unrolled, so the partial
// sums and the row sit in local memory: for the rare open channels of a faithful row, where a small register
// footprint matters more than speed (see rms_norm_fallback). Same operations in the same order.
template <int kLanes, bool kLean = false>
__device__ double ordered_sum_of_squares(const float (&x)[kChannels], int first_lane) {
  constexpr int kUnroll = kLean ? 1 : 8;
  double partial[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  const auto add_lane = [&](int lane) {
#pragma unroll(kUnroll)
    for (int j = 0; j < 8; ++j) {
      const float a = __shfl_sync(kFullMask, x[j], first_lane + lane);
      const float b = __shfl_sync(kFullMask, x[8 + j], first_lane + lane);
      partial[j] = __dadd_rn(__dadd_rn(partial[j], square(a)), square(b));
    }
  };
  if constexpr (kLean) {
#pragma unroll 1
    for (int lane = 0; lane < kLanes; ++lane) add_lane(lane);
  } else {
    for (int lane = 0; lane < kLanes; ++lane) add_lane(lane);
  }
  return __dadd_rn(__dadd_rn(__dadd_rn(partial[0], partial[4]), __dadd_rn(partial[1], partial[5])),
                   __dadd_rn(__dadd_rn(partial[2], partial[6]), __dadd_rn(partial[3], partial[7])));
}

// Σ x² of the row in any order (each square exact in double; every lane gets the same sum).
template <int kLanes>
__device__ double any_order_sum_of_squares(const float (&x)[kChannels]) {
  double local[2] = {0.0, 0.0};  // two chains for latency
#pragma unroll
  for (int i = 0; i < kChannels; ++i)
    local[i % 2] = __fma_rn(static_cast<double>(x[i]), static_cast<double>(x[i]), local[i % 2]);
  return row_sum<kLanes>(__dadd_rn(local[0], local[1]));
}

// The CPU's double sum of squares of the row, given the any-order sum. Every channel is a multiple of
// 2^lowest, where lowest is the exponent of its leading bit minus (significand_bits − 1) (8 bits for
// BF16-valued rows, 24 for any fp32; 2^-149 for subnormals), so the any-order sum is the CPU's when it is
// below 2^(52 + 2·lowest) for the row's smallest non-zero channel (see the header comment). A NaN or Inf
// makes the sum fail that test. Called by all 32 lanes; the rows of a warp take the ordered path together.
template <int kLanes, bool kLean = false>
__device__ double exact_sum_of_squares(const float (&x)[kChannels], double any_order, int first_lane,
                                       int significand_bits) {
  // min over channels of (|bits| << 1) − 1: the smallest non-zero magnitude (zeros wrap to the maximum)
  uint32_t key = 0xffffffffu;
#pragma unroll
  for (int i = 0; i < kChannels; ++i) key = min(key, (__float_as_uint(x[i]) << 1) - 1u);
  const int smallest = static_cast<int>((row_min<kLanes>(key) + 1u) >> 24);  // exponent field (0: none)
  const int lowest = smallest == 0 ? -149 : smallest - 127 - (significand_bits - 1);
  const double bound = __hiloint2double((52 + 2 * lowest + 1023) << 20, 0);  // 2^(52 + 2·lowest), normal
  if (__all_sync(kFullMask, any_order < bound)) return any_order;
  return ordered_sum_of_squares<kLanes, kLean>(x, first_lane);
}

// Σx²/d + eps as the CPU forms it: dim is a power of two, so the product with 1/d is its correctly rounded
// quotient.
__device__ double mean_square_of(double sum, int dim, double eps) {
  return __dadd_rn(__dmul_rn(sum, 1.0 / dim), eps);
}

// ---- RMSNorm (rmsnorm.cpp): y = w ⊙ x·(Σx²/d + eps)^-½, stored fp32 (clean) or fp32 then BF16 (faithful)
// ---

__device__ float round_bf16(float x) {
  return nm::bf16_to_float(nm::bf16_from_float(x));
}

// The CPU's expression, from mean_square = Σx²/d + eps: w·(x/sqrt(mean_square)) in double, to fp32 (then
// BF16).
__device__ float cpu_norm_value(float x, float w, double mean_square, bool faithful) {
  const double root = __dsqrt_rn(mean_square);
  const float f =
      __double2float_rn(__dmul_rn(static_cast<double>(w), __ddiv_rn(static_cast<double>(x), root)));
  return faithful ? round_bf16(f) : f;
}

// The CPU's faithful value as BF16 bits, out of line (rare: the fast path below declined).
__device__ __noinline__ uint32_t cpu_norm_bf16(float x, float w, double mean_square) {
  return nm::bf16_from_float(cpu_norm_value(x, w, mean_square, false));
}

// 1/sqrt(m) in double for a mean square m whose fp32 rounding is in [2^-120, 2^120] (else NaN): r0 =
// rsqrt.approx(RN32(m)) is within ε0 <= 2^-22 + 2^-25 of 1/sqrt(m) (the argument holds for any ε0 <= 2^-20),
// and one Newton step in double, r1 = r0 + (r0/2)·(1 − m·r0²), is within 1.5·ε0² + 0.5·ε0³ + 2^-51 (its
// roundings) <= 2^-39.4. The fast path uses RN32(r1) (within 2^-24 + 2^-39.4: one fp32 rounding), the
// fallback r1 itself. Per row: ~8 instructions, against ~5 for the fp32 Newton step it replaces (whose
// 1.5·2^-24 + 2^-25 cost the estimate a whole ulp of margin) and ~27 for the double sqrt and reciprocal the
// fallback computed.
__device__ double newton_inverse_root(double mean_square) {
  const float m = __double2float_rn(mean_square);
  if (!(m >= 0x1p-120f && m <= 0x1p120f)) return __longlong_as_double(0x7ff8000000000000ll);
  float r0;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(m));
  const double r = r0;
  const double e = __fma_rn(-mean_square, __dmul_rn(r, r), 1.0);
  return __fma_rn(__dmul_rn(0.5, r), e, r);
}

// Faithful fast path: bf16(fp32(w·(x/root))) is the BF16 rounding of the fp32 estimate RN(RN(w·x)·r), r =
// RN32(newton_inverse_root(mean square)) (relative error at most 2^-24 + 2^-39.4 + 2^-45, the last from the
// any-order Σx²; with the two products' roundings the estimate is within (3 + 2^-15)·2^-24 relative, i.e.
// 3.0001 fp32 ulps at the estimate; the CPU's double value is within 2^-52 of exact) whenever the estimate
// is more than kMidpointMargin ulps from a BF16 rounding midpoint M (low half 0x8000): then the exact value,
// the CPU's double and its fp32 rounding all lie strictly on the estimate's side (an accepted estimate is at
// least margin + 1 = 4 ulps from M, the exact value at least 4 − 3.0001 ulps, and the CPU's fp32 rounding of
// its double moves it by at most half an ulp; margin > 2.51 suffices; host check
// tools/exactness-checks/rmsnorm_inverse_root.cpp). w·x comes first (session 7; was RN(w·RN(x·r)), the same
// bound): it does not depend on the row's Σx², so its 16 products issue while the reduction's shuffles are in
// flight. The estimate must also be at least 2^-60 (estimates_tiny): r <= 2^60·(1 + 2^-22) (the mean square
// is at least 2^-120), so then |w·x| > 2^-122 did not underflow; a NaN r (mean square outside [2^-120,
// 2^120]) fails that too. Nothing overflows: with |w| < 2^60 (lane_weights_bounded; lanes whose weights are
// not take the CPU's expression for every channel) w·x can reach 2^128 only for |x| > 2^68, whose row has a
// mean square above 2^127 and so a NaN r; and |e| <= |w|·sqrt(dim)·(1 + 2^-22) < 2^65 (the mean square is at
// least x²/dim).
__device__ float norm_estimate(float x, float w, float inverse_root) {
  return __fmul_rn(__fmul_rn(w, x), inverse_root);
}

__device__ bool norm_estimate_declined(float estimate) {
  // ((low half) − (0x8000 − margin)) in the top half of a word: <= 2·margin there iff near the midpoint
  const uint32_t offset = (__float_as_uint(estimate) << 16) - ((0x8000u - kMidpointMargin) << 16);
  return !(fabsf(estimate) >= 0x1p-60f) || offset <= ((2 * kMidpointMargin) << 16 | 0xffffu);
}

// norm_estimate_declined for any of a lane's estimates, its midpoint half as a running key (the offset above,
// its minimum: one shift-add and half a 3-input min per estimate); the range half is tested once per lane
// on the packed BF16 estimates (estimates_tiny).
struct DeclineKeys {
  uint32_t near = 0xffffffffu;
  __device__ void add(float estimate) {
    near = min(near, (__float_as_uint(estimate) << 16) - ((0x8000u - kMidpointMargin) << 16));
  }
  __device__ bool declined() const { return near <= ((2 * kMidpointMargin) << 16 | 0xffffu); }
};

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

// The range half of the fast path's test, on the lane's estimates rounded to BF16 (its packed pairs): whether
// any is below 2^-60 in magnitude (zeros too, as norm_estimate_declined), or the inverse root is not a
// number. With r finite (then w·x did not overflow: norm_estimate), x finite and |w| < 2^60 (the lane's
// weights are bounded, or every channel is declined) every estimate is finite (|e| < 2^65) and not NaN, so
// |BF16(e)|'s bits order as its magnitudes; an accepted e is at least 2^-60 − 2^-69 > 2^-61, so w·x (>
// 2^-122) and e did not underflow, which is all the estimate's error bound needs. One mask per pair and a
// BF16 min tree, ~15 instructions per row instead of a second running key on every estimate (~24: round s6r1,
// the decline test and fallback cost the window kernel 20% of its time). Host check:
// tools/exactness-checks/rmsnorm_inverse_root.cpp.
__device__ bool estimates_tiny(const uint32_t (&packed)[kChannels / 2], float inverse_root) {
  const uint32_t least = pairs_reduce(packed, [](uint32_t a, uint32_t b) { return bf16x2_min_abs(a, b); });
  return ((least & 0x7fffu) < 0x2180u) | !(inverse_root > 0.0f);  // 0x2180: 2^-60 in BF16
}

// Whether this lane's 16 norm weights are finite and below 2^60 in magnitude (once per kernel).
__device__ bool lane_weights_bounded(const float* lane_weight) {
  float largest = 0.0f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float4 w = reinterpret_cast<const float4*>(lane_weight)[q];
    largest = kv_fast::amax_update(kv_fast::amax_update(largest, w.x), w.y);
    largest = kv_fast::amax_update(kv_fast::amax_update(largest, w.z), w.w);
  }
  return largest < 0x1p60f;  // NaN and Inf fail
}

__device__ uint32_t bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // cvt.rn.bf16x2.f32: RNE, one instruction
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

// Second chance for a declined channel: v = w·(x·r1) in double with r1 = newton_inverse_root of the
// any-order mean square (within 2^-43 of the CPU's: 511 roundings of 2^-53 on each side; r1 within 2^-39.4
// of its inverse root), so v is within 2^-39.4 + 2^-44 + 2^-51 (r1, the sum, the two products) of the exact
// value from the CPU's sum, and the CPU's double within 3·2^-53 of that: |v − CPU| < 2^-39·|v|. When v is
// farther than that from the fp32 rounding boundaries
// around RN32(v) (±half an fp32 ulp; powers of two, whose lower boundary is nearer, are left open), the
// CPU's fp32 value is RN32(v), and its BF16 rounding is returned. Zero is exact (x or w zero: the signed
// zero of w·x). Returns kNormOpen otherwise: about 2^-15 of the channels, tiny values, a non-finite r. Out of
// line: declined channels are rare, and sixteen inlined copies cost instruction-cache room on the hot path.
constexpr uint32_t kNormOpen = 0x10000u;  // double_norm_bf16: left open

__device__ __noinline__ uint32_t double_norm_bf16(float x, float w, double inverse_root_d) {
  if (!(inverse_root_d > 0.0 && inverse_root_d < 0x1p1000)) return kNormOpen;
  const double v = __dmul_rn(static_cast<double>(w), __dmul_rn(static_cast<double>(x), inverse_root_d));
  if (v == 0.0) {
    return static_cast<uint32_t>(__double2hiint(v) >> 16) & 0x8000u;
  }
  const double magnitude = fabs(v);
  if (!(magnitude >= 0x1p-100 && magnitude < 0x1p100)) return kNormOpen;
  const float f = __double2float_rn(v);
  const uint32_t f_bits = __float_as_uint(f);
  if ((f_bits & 0x7fffffu) == 0) return kNormOpen;
  const double off = fabs(__dsub_rn(v, static_cast<double>(f)));  // exact: v and f share the binade
  const double half_ulp =
      __hiloint2double((static_cast<int>((f_bits >> 23) & 0xffu) - 127 - 24 + 1023) << 20, 0);
  if (!(__dsub_rn(half_ulp, off) > 0x1p-39 * magnitude)) return kNormOpen;
  return bf16x2_bits(f, 0.0f) & 0xffffu;
}

// The declined channels of a faithful row, replaced in `packed` (the fast path's BF16 pairs): a double
// estimate from the any-order mean square decides nearly all of them; the few it leaves open take the CPU's
// double expression with the CPU's exact Σx². All lanes of the warp call it when any lane declined (the
// exact sum shuffles across the row). Out of line: inlined, its doubles and the ordered sum shaped the whole
// row loop's register allocation (GPU round s4r1: the window kernel compiled without it ran at 54% of copy,
// 56 registers and no spills; with it, capped at 64 registers, spilling in the hot path, at 39%). The
// lane's channels come from `reload` (a value copy of the slot's address or of the pooled values).
// A lane's BF16 pairs by value (a reference would put the caller's array in local memory).
struct PackedPairs {
  uint32_t w[kChannels / 2];
};

// The channels double_norm_bf16 left open (about 2^-15 of the declined ones): the CPU's expression with the
// CPU's exact Σx². Its own out-of-line function, so that its sixteen channels and eight double partial sums
// do not widen rms_norm_fallback's register footprint.
template <int kLanes, typename Reload>
__device__ __noinline__ PackedPairs open_channels(PackedPairs pairs, const Reload reload,
                                                  const float* lane_weight, double eps, int dim, int first_lane,
                                                  int significand_bits, double any_order, uint32_t open) {
  float y[kChannels];
  reload(y);
  const double mean_square = mean_square_of(
      exact_sum_of_squares<kLanes, true>(y, any_order, first_lane, significand_bits), dim, eps);
#pragma unroll 1
  for (int i = 0; i < kChannels; ++i) {
    if (open & (1u << i)) {
      const uint32_t bits = cpu_norm_bf16(y[i], lane_weight[i], mean_square);
      uint32_t& word = pairs.w[i / 2];
      word = i % 2 == 0 ? (word & 0xffff0000u) | bits : (word & 0xffffu) | (bits << 16);
    }
  }
  return pairs;
}

// The row's register footprint is set by everything the kernel can call: ptxas keeps the caller's values
// out of the registers its callees use, so a wide fallback (sixteen reloaded channels and sixteen weights in
// registers, the exact sum's partials) forced the row loop to 80 registers and spills at 64 (round s5: with
// an empty fallback the window and key kernels fit 64 registers without a spill). The fallback therefore
// finds its declined channels four at a time (one 16-byte weight load and one reload.group per group:
// shared memory, not a local-memory copy of the row, whose dependent loads cost the window kernel 8% of its
// time in the s6 profile), then redoes only those; the open channels go to open_channels. (Round s5r1's
// version walked all sixteen channels with a dependent weight load each: the window kernel without the
// fallback ran 17% faster, at 5.4% of rows declined.)
template <int kLanes, typename Reload>
__device__ __noinline__ PackedPairs rms_norm_fallback(PackedPairs pairs, const Reload reload,
                                                      const float* lane_weight, bool weights_bounded,
                                                      double eps, int dim, int first_lane,
                                                      int significand_bits, bool declined, double any_order,
                                                      float inverse_root) {
  uint32_t open = 0;  // bit i: channel i needs the exact path
  if (declined) {
    uint32_t redo = 0;  // bit i: channel i's estimate is declined
#pragma unroll 1
    for (int g = 0; g < kChannels / 4; ++g) {
      const float4 w = reinterpret_cast<const float4*>(lane_weight)[g];
      const float ws[4] = {w.x, w.y, w.z, w.w};
      float y[4];
      reload.group(g, y);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (!weights_bounded || norm_estimate_declined(norm_estimate(y[k], ws[k], inverse_root)))
          redo |= 1u << (4 * g + k);
      }
    }
    const double inverse_root_d =
        newton_inverse_root(mean_square_of(any_order, dim, eps));  // as the fast path
    while (redo != 0) {
      const int i = __ffs(static_cast<int>(redo)) - 1;
      redo &= redo - 1;
      float y[4];
      reload.group(i >> 2, y);
      const float yi = (i & 2) ? ((i & 1) ? y[3] : y[2]) : ((i & 1) ? y[1] : y[0]);  // no local memory
      const uint32_t bits = double_norm_bf16(yi, lane_weight[i], inverse_root_d);
      if (bits == kNormOpen) {
        open |= 1u << i;
        continue;
      }
#pragma unroll
      for (int k = 0; k < kChannels / 2; ++k) {  // word i / 2, without a dynamic register index
        if (k == i / 2) {
          pairs.w[k] = i % 2 == 0 ? (pairs.w[k] & 0xffff0000u) | bits : (pairs.w[k] & 0xffffu) | (bits << 16);
        }
      }
    }
  }
  if (__any_sync(kFullMask, open != 0)) {
    pairs = open_channels<kLanes>(pairs, reload, lane_weight, eps, dim, first_lane, significand_bits,
                                  any_order, open);
  }
  return pairs;
}

// Faithful rows: the fast path needs Σx² only to fp32 accuracy (the any-order double sum is within 2^-44 of
// the CPU's, which the margin absorbs), so the CPU's exact sum is formed only for rows where some channel
// declined it (about one in eight).
// `reload(y)` puts the lane's channels (x again) into y: the rare paths take them from there, so x need not
// stay live (in registers or spilled) through the row.
template <int kLanes, bool kFaithful, typename Reload>
__device__ void rms_norm_chunk(const float (&x)[kChannels], const Reload& reload, const float* lane_weight,
                               bool weights_bounded, double eps, int dim, int first_lane, int significand_bits,
                               ChannelPair<kFaithful> (&packed)[kChannels / 2], unsigned ablate = 0) {
  if constexpr (!kFaithful) {
    const double any_order = any_order_sum_of_squares<kLanes>(x);
    const double mean_square = mean_square_of(
        exact_sum_of_squares<kLanes>(x, any_order, first_lane, significand_bits), dim, eps);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 w = reinterpret_cast<const float4*>(lane_weight)[q];
      const float ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        packed[2 * q + i] =
            make_float2(cpu_norm_value(x[4 * q + 2 * i], ws[2 * i], mean_square, false),
                        cpu_norm_value(x[4 * q + 2 * i + 1], ws[2 * i + 1], mean_square, false));
      }
    }
  } else {
    // w·x before the reduction (norm_estimate): independent of it, so the products fill its latency
    float wx[kChannels];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 w = reinterpret_cast<const float4*>(lane_weight)[q];
      const float ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) wx[4 * q + i] = __fmul_rn(ws[i], x[4 * q + i]);
    }
    const double any_order = any_order_sum_of_squares<kLanes>(x);
    const float inverse_root = __double2float_rn(newton_inverse_root(mean_square_of(any_order, dim, eps)));
    DeclineKeys keys;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float e[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        e[i] = __fmul_rn(wx[4 * q + i], inverse_root);  // norm_estimate
        keys.add(e[i]);
      }
      packed[2 * q] = bf16x2_bits(e[0], e[1]);
      packed[2 * q + 1] = bf16x2_bits(e[2], e[3]);
    }
    // bitwise: both tests run, without a branch between them
    const bool declined = !weights_bounded | keys.declined() | estimates_tiny(packed, inverse_root);
    // Declined channels: out of line (rms_norm_fallback), on a copy of the pairs.
    if (__any_sync(kFullMask, declined) && !(ablate & kAblateNormFallback)) {
      PackedPairs words;
#pragma unroll
      for (int k = 0; k < kChannels / 2; ++k) words.w[k] = packed[k];
      words = rms_norm_fallback<kLanes>(words, reload, lane_weight, weights_bounded, eps, dim, first_lane,
                                        significand_bits, declined, any_order, inverse_root);
#pragma unroll
      for (int k = 0; k < kChannels / 2; ++k) packed[k] = words.w[k];
    }
  }
}

// ---- RoPE (rope.cpp), forward, heads = 1
// --------------------------------------------------------------------

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

// The norm weights, copied to shared memory per CTA: every row reads its lane's 16 (four 16-byte loads). From
// global memory (L1 when resident) they were the longest single wait in the s7 profiles: the first product
// with a weight held 5.5% of the window kernel's stall samples, 10% of ratio 1's and 9% of ratio 2's (long
// scoreboard: with the shared-memory carveout at its maximum the L1 keeps little, and the streaming inputs
// evict it).
template <int kDim>
struct NormWeights {
  __align__(16) float w[kDim];
};
// Called by every thread of the CTA before a barrier (load_rope_frequencies' publishes it).
template <int kDim>
__device__ void load_norm_weights(const float* weight, NormWeights<kDim>& shared) {
  for (int i = static_cast<int>(threadIdx.x); i < kDim; i += kThreads) shared.w[i] = __ldg(weight + i);
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

// ---- compressor pooling (compressor.cpp), ratio 2
// -------------------------------------------------------------

// pooled = Σ_t softmax_t(g)·v over the pair, in the CPU's double expression; fp32, then BF16 when faithful.
__device__ float cpu_pool_value(float v0, float g0, float v1, float g1, bool faithful) {
  const double peak = static_cast<double>(g0) < static_cast<double>(g1) ? g1 : g0;  // std::max(g0, g1)
  const double w0 = exp(__dsub_rn(g0, peak));
  const double w1 = exp(__dsub_rn(g1, peak));
  const double sum = __dadd_rn(__dadd_rn(0.0, w0), w1);
  double value = __dadd_rn(0.0, __dmul_rn(__ddiv_rn(w0, sum), static_cast<double>(v0)));
  value = __dadd_rn(value, __dmul_rn(__ddiv_rn(w1, sum), static_cast<double>(v1)));
  const float f = __double2float_rn(value);
  return faithful ? round_bf16(f) : f;
}

// The CPU's faithful value, out of line: rare, and sixteen inlined copies of two double exp and divisions
// per lane overflowed the instruction cache (round 4 profile: "no instruction" was the top stall).
__device__ __noinline__ float cpu_pool_value_faithful(float v0, float g0, float v1, float g1) {
  return cpu_pool_value(v0, g0, v1, g1, true);
}

// rcp.approx: within 1 ulp (2^-23 relative) of 1/x over the full range.
__device__ float reciprocal_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// exp(x) as __expf computes it (ex2.approx of RN(x·log2 e): 2 + 1.17·|x| ulps), results below 2^-126 flushed
// to zero (an absolute error below 2^-126).
__device__ float exp_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fmul_rn(x, 1.44269502f)));
  return r;
}

// Faithful pooled value through an fp32 estimate (v_max + e·v_min)·rcp(1 + e), e = exp(g_min − g_max), S =
// |v0| + |v1|. Its error: e is off by at most 2^-22 (exp_approx: 2 + 1.17·|x| ulps, at most 2^-22 absolute
// for x <= 0) + 2^-25.4 (the fp32 difference of the logits: e·|Δg|·2^-24 with e·|Δg| <= 1/e), and the value
// moves by at most S per unit of e; the fma adds 2^-24·S; 1 + e, the approximate reciprocal and the product
// add 2^-24 + 2^-23 + 2^-24 relative, and the CPU's fp32 rounding of its double value half an ulp: in all
// below 2^-21.5·S + 2^-21.6·|estimate|. When the estimate is farther than 2^-20·S + 2^-21·|estimate| from
// every BF16 rounding midpoint, the exact value, the CPU's double value and its fp32 rounding all round to
// the same BF16, which goes to `pooled`. Otherwise (cancellation, near-midpoints: about one value in 4000) it
// returns false and the CPU's double expression decides.
__device__ bool faithful_pool_fast(float v0, float g0, float v1, float g1, float& pooled) {
  const bool first_is_peak = !(g0 < g1);
  const float v_max = first_is_peak ? v0 : v1, v_min = first_is_peak ? v1 : v0;
  const float e = exp_approx(__fsub_rn(first_is_peak ? g1 : g0, first_is_peak ? g0 : g1));
  const float estimate = __fmul_rn(__fmaf_rn(e, v_min, v_max), reciprocal_approx(__fadd_rn(1.0f, e)));
  const float magnitude = fabsf(estimate);
  const float rounded = __uint_as_float(bf16x2_bits(estimate, 0.0f) << 16);  // RNE (NaN: declined below)
  const float off = fabsf(__fsub_rn(estimate, rounded));                     // exact (Sterbenz)
  // half a BF16 ulp at |estimate| (the BF16 significand has 8 bits)
  const float half = __uint_as_float((__float_as_uint(magnitude) & 0x7f800000u) - (8u << 23));
  const float midpoint_distance = fminf(half - off, off + 0.5f * half);
  const float bound = __fmaf_rn(0x1p-20f, fabsf(v0) + fabsf(v1), 0x1p-21f * magnitude);
  pooled = rounded;
  return magnitude >= 0x1p-100f && magnitude < 0x1p100f && midpoint_distance > bound;
}

// Asks L2 for this lane's 64 bytes of the four input rows of the ratio-2 entry whose first token is t0 >= 0
// (the next iteration's; round s5r1: +1% of copy when the inputs went straight into registers).
__device__ void prefetch_l2(const void* address) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(address));
}
__device__ void prefetch_entry_rows(const CompressorWriteArgs& a, int64_t t0, int dim, int lane_in_row) {
  const int64_t first = t0 * dim + static_cast<int64_t>(lane_in_row) * kChannels;
  const float* v = static_cast<const float*>(a.v.data);
  prefetch_l2(v + first);
  prefetch_l2(a.g + first);
  prefetch_l2(v + first + dim);
  prefetch_l2(a.g + first + dim);
}

// The ratio-2 latent chunk of one entry: tokens t0 = 2·entry − start (−1: the open group's token, in
// `pending`) and t0 + 1, this lane's 16 channels pooled. `load(q, v0, g0, v1, g1)` gives channels 4q … 4q+3
// of the four input rows (from the warp's ring slot, or from global memory). Faithful channels the fast path
// declines are pooled by the CPU's expression after the loop, from inputs read again from global memory
// (rare), so the inputs die as they are used.
struct EntryRows {
  const float *v0, *g0, *v1, *g1;
  __device__ EntryRows(const CompressorWriteArgs& a, int64_t t0, int dim) {
    const float* v = static_cast<const float*>(a.v.data);
    v0 = t0 < 0 ? a.pending : v + t0 * dim;
    g0 = t0 < 0 ? a.pending + dim : a.g + t0 * dim;
    v1 = v + (t0 + 1) * dim;
    g1 = a.g + (t0 + 1) * dim;
  }
};

template <bool kFaithful, typename Load>
__device__ void pool_entry_chunk(const Load& load, const EntryRows& rows, int lane_in_row,
                                 float (&x)[kChannels]) {
  uint32_t declined = 0;  // bit i: channel i takes the CPU's expression (faithful)
#pragma unroll
  for (int q = 0; q < kChannels / 4; ++q) {
    float4 v0, g0, v1, g1;
    load(q, v0, g0, v1, g1);
    const float v0s[4] = {v0.x, v0.y, v0.z, v0.w}, g0s[4] = {g0.x, g0.y, g0.z, g0.w};
    const float v1s[4] = {v1.x, v1.y, v1.z, v1.w}, g1s[4] = {g1.x, g1.y, g1.z, g1.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (!kFaithful) {
        x[4 * q + k] = cpu_pool_value(v0s[k], g0s[k], v1s[k], g1s[k], false);
      } else if (!faithful_pool_fast(v0s[k], g0s[k], v1s[k], g1s[k], x[4 * q + k])) {
        declined |= 1u << (4 * q + k);
      }
    }
  }
  if (declined != 0) {
    const int c = lane_in_row * kChannels;
#pragma unroll
    for (int i = 0; i < kChannels; ++i) {
      if (declined & (1u << i)) {
        x[i] = cpu_pool_value_faithful(__ldg(rows.v0 + c + i), __ldg(rows.g0 + c + i), __ldg(rows.v1 + c + i),
                                       __ldg(rows.g1 + c + i));
      }
    }
  }
}

// The four input rows of an entry from global memory (groups the ring does not hold).
__device__ void load_entry_quad(const EntryRows& rows, int lane_in_row, int q, float4& v0, float4& g0,
                                float4& v1, float4& g1) {
  const int64_t offset = lane_in_row * (kChannels / 4) + q;  // in float4
  v0 = __ldg(reinterpret_cast<const float4*>(rows.v0) + offset);
  g0 = __ldg(reinterpret_cast<const float4*>(rows.g0) + offset);
  v1 = __ldg(reinterpret_cast<const float4*>(rows.v1) + offset);
  g1 = __ldg(reinterpret_cast<const float4*>(rows.g1) + offset);
}

// ---- ratio-2 input ring ----------------------------------------------------------------------------------
// Ratio-2 entries read four fp32 rows each (8 KB per warp and iteration), straight into registers until
// session 6: with 16 warps per SM (100 registers) every iteration waited for them (s6 profile: long
// scoreboard 36% of the stall samples, issue 41% busy, DRAM 69% of peak while copy reaches 87%). Each warp
// now copies its next group of entries into its slot of a shared-memory ring (cp.async, 512 contiguous bytes
// per instruction) right after pooling the current one, so the load overlaps the rest of the entry (RMSNorm,
// RoPE, NVFP4, stores). A group of R entries (R = rows per warp) has tokens t0 … t0 + 2R − 1, consecutive
// rows: 4 KB of v and 4 KB of g. Slot layout: 16-byte unit j (v: 0 … 255, g: 256 … 511) at j + j/8 (a
// padding unit after every 8), so the 8 lanes of a quarter warp hit 8 different bank groups both when
// copying (consecutive j) and when reading their own 64-byte blocks (j = 4b + k, k = 0 … 3: 4b + k + b/2).
constexpr int kPoolingSlotUnits = 576;  // 512 units + 64 padding: 9 KB per warp
constexpr size_t kPoolingRingBytes = kPoolingSlotUnits * (kThreads / 32) * sizeof(uint4);  // 72 KB per CTA

// ---- record encoders: this lane's 16 channels of one record
// ------------------------------------------------

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

// ---- kernels
// ---------------------------------------------------------------------------------------------------

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
  template <bool kFaithful>
  __device__ RopeLane<kFaithful> rope_lane(RopeTables<kDim, kFaithful>& tables, int rope_dim) const {
    return RopeLane<kFaithful>(tables.slices[threadIdx.x / 32][row_in_warp], tables.freqs, rope_dim, kDim,
                               lane_in_row);
  }
};

// Grid-stride loop over rows [0, n) in steps of one row per lane group (the trip count is warp-uniform; idle
// groups redo row n − 1 without storing): the body gets the row's channels, read through the warp's ring
// (its next row groups are in flight meanwhile); a slot is refilled after the body.
// The input type is a template parameter: the ring's unit counts and addresses are then constants.
template <int kDim, bool kBf16, int kUnits, typename Body>
__device__ void for_each_typed_input_row(int64_t n, const void* data, InputRing<kUnits>& ring,
                                         const Body& body) {
  constexpr int kRowsPerWarp = RowLanes<kDim>::kRowsPerWarp;
  constexpr int kLanes = RowLanes<kDim>::kLanes;
  constexpr int kUnitsPerRow = kBf16 ? 2 : 4;    // 16-byte units per lane and row
  constexpr int kDepth = kUnits / kUnitsPerRow;  // 1, 2 or 4
  constexpr size_t kElementBytes = kBf16 ? 2 : 4;
  const RowLanes<kDim> lanes;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int64_t step = warps * kRowsPerWarp;
  int64_t base = warp * kRowsPerWarp;
  if (base >= n) return;  // warp-uniform
  uint4* const warp_ring = &ring.units[0][threadIdx.x - lane];
  // Unit j (16 B) of a row group: owner lane j / kUnitsPerRow; in the slot, ring row j / 32, column j % 32
  // swizzled so that both the copies (consecutive j per instruction) and the owners' reads (j =
  // lane·kUnitsPerRow + v) hit 8 different 16-byte bank groups per quarter warp.
  // This lane's unit u in slot 0 (slot s: + s·kUnitsPerRow·kThreads) is read_unit ^ u: j = lane·kUnitsPerRow
  // + u only sets low bits that lane·kUnitsPerRow leaves clear (kUnitsPerRow is 2 or 4), and the swizzle
  // only flips bits 0-1 by j's bits 3-4. One register for the kernel: the two or four offsets were
  // recomputed from the thread index in every row (~13 instructions; ptxas rematerializes them under the
  // 64-register cap, which the opaque move below prevents: 6 instructions per row to address the slot).
  const int read_unit = [&] {
    const int j = lane * kUnitsPerRow;
    const int column = j % 32;
    int unit = (j / 32) * kThreads + (column ^ ((column >> 3) & 3));
    asm volatile("mov.b32 %0, %0;" : "+r"(unit));  // not recomputed in the loop
    return unit;
  }();
  // Copies the row group starting at `first` into `slot`, lane L taking units L, L + 32, …: each copy
  // instruction moves 512 contiguous bytes (rows past the end repeat row n − 1). Nothing when `first` is
  // past the end: the group is then empty, which keeps one group per slot for the wait counts.
  const int copy_column = lane ^ ((lane >> 3) & 3);  // where unit 32u + lane goes in its ring row
  const auto issue = [&](int64_t first, int slot) {
    if (first < n) {
      const auto* group =
          static_cast<const uint8_t*>(data) +
          static_cast<size_t>(first) * (kDim * kElementBytes);  // the group's rows back to back
      uint4* const dst = warp_ring + slot * kUnitsPerRow * kThreads + copy_column;
      if (kRowsPerWarp == 1 || n - first >= kRowsPerWarp) {
#pragma unroll
        for (int u = 0; u < kUnitsPerRow; ++u) cp_async16(dst + u * kThreads, group + 16 * (32 * u + lane));
      } else if constexpr (kRowsPerWarp > 1) {  // the last group: its idle rows repeat row n − 1
        const int rows_left = static_cast<int>(n - first);
#pragma unroll
        for (int u = 0; u < kUnitsPerRow; ++u) {
          const int j = 32 * u + lane;
          const int row_in_group = (j / kUnitsPerRow) / kLanes;  // of the owner lane j / kUnitsPerRow
          const int back = row_in_group >= rows_left ? row_in_group - rows_left + 1 : 0;
          cp_async16(dst + u * kThreads, group + 16 * j - static_cast<size_t>(back * kDim) * kElementBytes);
        }
      }
    }
    cp_async_commit();
  };
  for (int slot = 0; slot < kDepth; ++slot) issue(base + slot * step, slot);
  for (int slot = 0; base < n; base += step) {
    cp_async_wait<kDepth - 1>();
    __syncwarp();  // every lane's copies of this slot are visible to the warp
    // the row's channels, and again for the rare paths
    const SlotReload<kBf16> reload{warp_ring + slot * kUnitsPerRow * kThreads, read_unit};
    float x[kChannels];
    reload(x);
    const int64_t row = base + lanes.row_in_warp;
    body(x, reload, row < n ? row : n - 1, row < n, lanes);  // idle groups redo the last row, no stores
    __syncwarp();  // every lane has read the slot before it is refilled
    issue(base + kDepth * step, slot);
    slot = slot + 1 == kDepth ? 0 : slot + 1;
  }
  cp_async_wait<0>();
}

// for_each_typed_input_row for the run-time input type (the body is compiled for both).
template <int kDim, int kUnits, typename Body>
__device__ void for_each_input_row(int64_t n, const DeviceRows& input, InputRing<kUnits>& ring,
                                   const Body& body) {
  if (input.type == RowType::kBf16) {
    for_each_typed_input_row<kDim, true>(n, input.data, ring, body);
  } else {
    for_each_typed_input_row<kDim, false>(n, input.data, ring, body);
  }
}

template <int kDim, bool kFaithful, int kMinCtas, unsigned kAblate = 0>
__global__ void __launch_bounds__(kThreads, kMinCtas) window_write_kernel(WindowWriteArgs a) {
  constexpr int kLanes = RowLanes<kDim>::kLanes;
  __shared__ RopeTables<kDim, kFaithful> tables;
  __shared__ InputRing<kRingUnits<kDim>> ring;
  __shared__ NormWeights<kDim> norm;
  load_norm_weights(a.norm_weight, norm);
  load_rope_frequencies(a.rope, tables.freqs);  // its barrier publishes the weights too
  const bool weights_bounded =
      !kFaithful || lane_weights_bounded(norm.w + kChannels * RowLanes<kDim>().lane_in_row);
  const RopeLane<kFaithful> rope_lane = RowLanes<kDim>().rope_lane(tables, a.rope.rope_dim);
  const size_t record_bytes = kFaithful ? nm::fp8_row_bytes(kDim) : kDim * sizeof(float);
  const int significand_bits = a.kv.type == RowType::kBf16 ? 8 : 24;
  // rows from here on also go to the ring (none without one); kept in a register by the opaque move (ptxas
  // recomputed it from the parameters in every row: ~10 instructions)
  int64_t ring_first = a.ring != nullptr ? a.n - a.ring_capacity : INT64_MAX;
  asm volatile("mov.b64 %0, %0;" : "+l"(ring_first));
  for_each_input_row<kDim>(
      a.n, a.kv, ring,
      [&](float(&x)[kChannels], const auto& reload, int64_t row, bool active, const RowLanes<kDim>& lanes) {
        const int64_t position = a.start + row;
        static_cast<void>(reload);  // unused in the load + FP8 + store ablation
        // The row's record (and ring slot) from its channels: fp32 x, or the faithful packed pairs.
        const auto write = [&](const auto& chunk) {
          const auto one = [&](uint8_t* record, bool store) {
            if constexpr (std::is_same_v<std::remove_cv_t<std::remove_reference_t<decltype(chunk)>>,
                                         uint32_t[kChannels / 2]>) {
              store_fp8_pairs(record, kDim, lanes.lane_in_row, chunk, store);
            } else {
              store_record<RecordKind::kWindow, kFaithful>(record, kDim, lanes.lane_in_row, chunk, store);
            }
          };
          if (a.records != nullptr) one(a.records + static_cast<size_t>(row) * record_bytes, active);
          // The ring keeps only the chunk's last ring_capacity rows, as on the CPU (window_ring.cpp).
          const bool to_ring = active && row >= ring_first;
          if (__any_sync(kFullMask, to_ring)) {
            const int64_t slot = position % a.ring_capacity;
            one(a.ring + static_cast<size_t>(slot) * record_bytes, to_ring);
            if (to_ring && lanes.lane_in_row == 0) a.ring_positions[slot] = position;
          }
        };
        if constexpr (kAblate & kAblateNormAndRope) {
          write(x);
        } else {
          const RopeTrig<kLanes, kFaithful> trig = rope_trig<kLanes>(position, rope_lane);  // before RMSNorm
          ChannelPair<kFaithful> pairs[kChannels / 2];
          rms_norm_chunk<kLanes, kFaithful>(x, reload, norm.w + kChannels * lanes.lane_in_row, weights_bounded,
                                            a.eps, kDim, lanes.first_lane, significand_bits, pairs, kAblate);
          if constexpr (!(kAblate & kAblateRope)) {
            rope_chunk<kLanes, kFaithful>(pairs, position, rope_lane, trig);
          }
          if constexpr (kFaithful) {
            write(pairs);
          } else {
            unpack_pairs(pairs, x);
            write(x);
          }
        }
      });
}

// kRatio is a template parameter: compiled together, the ratio-2 pooling's four fp32 inputs per lane shaped
// the ratio-1 loop's register allocation (80 registers: 84 B of spill stores per row in the ratio-1 path).
template <int kDim, bool kFaithful, int kMinCtas, int kRatio>
__global__ void __launch_bounds__(kThreads, kMinCtas)
    compressor_write_kernel(CompressorWriteArgs a, int64_t first, int64_t count) {
  constexpr int kLanes = RowLanes<kDim>::kLanes;
  __shared__ RopeTables<kDim, kFaithful> tables;
  __shared__ Nvfp4Reciprocals reciprocals;
  if constexpr (kFaithful) fill_nvfp4_reciprocals(reciprocals);
  __shared__ NormWeights<kDim> norm;
  load_norm_weights(a.norm_weight, norm);
  load_rope_frequencies(a.rope, tables.freqs);  // its barrier publishes the reciprocals and weights too
  const bool weights_bounded =
      !kFaithful || lane_weights_bounded(norm.w + kChannels * RowLanes<kDim>().lane_in_row);
  const RopeLane<kFaithful> rope_lane = RowLanes<kDim>().rope_lane(tables, a.rope.rope_dim);
  const RecordPages entry_pages(a.entries);
  // faithful pooled values are BF16-valued (the kernel rounds them)
  const int significand_bits = kRatio == 1 ? (a.v.type == RowType::kBf16 ? 8 : 24) : (kFaithful ? 8 : 24);
  // Entry first + index from its (pooled) latent x: RMSNorm, the latent out, RoPE, the NVFP4 record.
  const auto finish = [&](float(&x)[kChannels], const auto& reload, int64_t index, bool active,
                          const RowLanes<kDim>& lanes) {
    const int64_t entry = first + index;
    // position-only work first (RopeTrig; the record's page lookup): it overlaps the RMSNorm reduction
    const RopeTrig<kLanes, kFaithful> trig = rope_trig<kLanes>(entry * kRatio, rope_lane);
    uint8_t* const record = entry_pages.address(entry);
    ChannelPair<kFaithful> pairs[kChannels / 2];
    rms_norm_chunk<kLanes, kFaithful>(x, reload, norm.w + kChannels * lanes.lane_in_row, weights_bounded,
                                      a.eps, kDim, lanes.first_lane, significand_bits, pairs);
    if (a.latents != nullptr && active) {  // BF16 bits (faithful) or fp32, pair k at pair offset + k
      const int64_t offset = (index * kDim + lanes.lane_in_row * kChannels) / 2;
      store_pairs(static_cast<ChannelPair<kFaithful>*>(a.latents) + offset, pairs);
    }
    rope_chunk<kLanes, kFaithful>(pairs, entry * kRatio, rope_lane, trig);
    unpack_pairs(pairs, x);
    store_record<RecordKind::kEntry, kFaithful>(record, kDim, lanes.lane_in_row, x, active, &reciprocals);
  };
  if constexpr (kRatio == 1) {  // entry j is token j's row, j − start of the chunk
    __shared__ InputRing<kRingUnits<kDim>> ring;
    const size_t element_bytes = a.v.type == RowType::kBf16 ? 2 : 4;
    const DeviceRows rows{
        static_cast<const uint8_t*>(a.v.data) + static_cast<size_t>((first - a.start) * kDim) * element_bytes,
        a.v.type};
    for_each_input_row<kDim>(count, rows, ring, finish);
  } else {  // ratio 2: the warp's groups of entries through its ring slot (kPoolingRingBytes, dynamic)
    extern __shared__ uint4 pooling_ring[];
    constexpr int kRowsPerWarp = RowLanes<kDim>::kRowsPerWarp;
    const RowLanes<kDim> lanes;
    const int lane = static_cast<int>(threadIdx.x % 32);
    uint4* const slot = pooling_ring + (threadIdx.x / 32) * kPoolingSlotUnits;
    uint4* const copy_to = slot + lane + lane / 8;  // unit 32u + lane of the v or g rows: + 36u (+ 288 for g)
    const int block = 2 * lanes.row_in_warp * kLanes + lanes.lane_in_row;  // this lane's 64 B of token t0
    const uint4* const read_from = slot + 4 * block + block / 2;
    constexpr int kNextRow = 4 * kLanes + kLanes / 2;  // token t0 + 1: kLanes blocks further
    constexpr int kRowsG = 288;                        // the g rows: unit 256 + 256/8
    const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x / 32 * kRowsPerWarp;
    // Whether the ring holds the group of entries [base, base + R): all R are entries and t0 >= 0 (the first
    // group of a call that starts with an open token reads `pending`; the last may be partial: both read
    // global memory directly).
    const auto in_ring = [&](int64_t base) {
      return base + kRowsPerWarp <= count && 2 * (first + base) - a.start >= 0;
    };
    const auto issue = [&](int64_t base) {
      const int64_t t0 = 2 * (first + base) - a.start;
      const uint4* v = static_cast<const uint4*>(a.v.data) + t0 * (kDim / 4) + lane;
      const uint4* g = reinterpret_cast<const uint4*>(a.g) + t0 * (kDim / 4) + lane;
#pragma unroll
      for (int u = 0; u < 8; ++u) cp_async16(copy_to + 36 * u, v + 32 * u);
#pragma unroll
      for (int u = 0; u < 8; ++u) cp_async16(copy_to + kRowsG + 36 * u, g + 32 * u);
    };
    int64_t base = warp * kRowsPerWarp;
    if (base < count && in_ring(base)) issue(base);
    cp_async_commit();
    for (; base < count; base += step) {  // warp-uniform
      const int64_t row = base + lanes.row_in_warp;
      const bool active = row < count;
      const int64_t index = active ? row : count - 1;  // idle groups redo the last entry without storing
      const EntryRows rows(a, 2 * (first + index) - a.start, kDim);
      // the next group into L2, ahead of its ring copy after the pooling (17 MB ahead over the GPU fits L2)
      if (index + step < count) {
        prefetch_entry_rows(a, 2 * (first + index + step) - a.start, kDim, lanes.lane_in_row);
      }
      float x[kChannels];
      if (in_ring(base)) {
        cp_async_wait<0>();
        __syncwarp();  // every lane's copies are visible to the warp
        pool_entry_chunk<kFaithful>(
            [&](int q, float4& v0, float4& g0, float4& v1, float4& g1) {
              v0 = reinterpret_cast<const float4&>(read_from[q]);
              v1 = reinterpret_cast<const float4&>(read_from[kNextRow + q]);
              g0 = reinterpret_cast<const float4&>(read_from[kRowsG + q]);
              g1 = reinterpret_cast<const float4&>(read_from[kRowsG + kNextRow + q]);
            },
            rows, lanes.lane_in_row, x);
        __syncwarp();  // every lane has read the slot before it is refilled
      } else {
        pool_entry_chunk<kFaithful>(
            [&](int q, float4& v0, float4& g0, float4& v1, float4& g1) {
              load_entry_quad(rows, lanes.lane_in_row, q, v0, g0, v1, g1);
            },
            rows, lanes.lane_in_row, x);
      }
      if (base + step < count && in_ring(base + step)) issue(base + step);
      cp_async_commit();
      ValueReload copy;  // the pooled values stay live
#pragma unroll
      for (int i = 0; i < kChannels; ++i) copy.x[i] = x[i];
      finish(x, copy, index, active, lanes);
    }
    cp_async_wait<0>();
  }
}

template <int kDim, bool kFaithful, int kMinCtas>
__global__ void __launch_bounds__(kThreads, kMinCtas) index_key_write_kernel(IndexKeyWriteArgs a) {
  constexpr int kLanes = RowLanes<kDim>::kLanes;
  __shared__ RopeTables<kDim, kFaithful> tables;
  __shared__ InputRing<kRingUnits<kDim>> ring;
  __shared__ NormWeights<kDim> norm;
  load_norm_weights(a.norm_weight, norm);
  load_rope_frequencies(a.rope, tables.freqs);  // its barrier publishes the weights too
  const bool weights_bounded =
      !kFaithful || lane_weights_bounded(norm.w + kChannels * RowLanes<kDim>().lane_in_row);
  const RopeLane<kFaithful> rope_lane = RowLanes<kDim>().rope_lane(tables, a.rope.rope_dim);
  const int significand_bits = a.keys.type == RowType::kBf16 ? 8 : 24;
  const RecordPages key_pages(a.records);
  for_each_input_row<kDim>(
      a.count, a.keys, ring,
      [&](float(&x)[kChannels], const auto& reload, int64_t index, bool active, const RowLanes<kDim>& lanes) {
        const int64_t entry = a.first_entry + index;
        // position-only work first (RopeTrig; the key's page lookup): it overlaps the RMSNorm reduction
        const RopeTrig<kLanes, kFaithful> trig = rope_trig<kLanes>(entry * a.ratio, rope_lane);
        uint8_t* const record = key_pages.address(entry);
        ChannelPair<kFaithful> pairs[kChannels / 2];
        rms_norm_chunk<kLanes, kFaithful>(x, reload, norm.w + kChannels * lanes.lane_in_row, weights_bounded,
                                          a.eps, kDim, lanes.first_lane, significand_bits, pairs);
        rope_chunk<kLanes, kFaithful>(pairs, entry * a.ratio, rope_lane, trig);
        if constexpr (kFaithful) {
          store_mxfp4_pairs(record, kDim, lanes.lane_in_row, pairs, active);
        } else {
          unpack_pairs(pairs, x);
          store_record<RecordKind::kKey, kFaithful>(record, kDim, lanes.lane_in_row, x, active);
        }
      });
}

// ---- launch
// ---------------------------------------------------------------------------------------------------

// Resident CTAs of `kernel` on the current device, remembered per thread (the launch path of a decode step
// should not pay an occupancy query per call).
int resident_ctas(const void* kernel, size_t dynamic_shared) {
  struct Entry {
    const void* kernel;
    int device;
    int ctas;
  };
  thread_local Entry cache[32] = {};
  thread_local int next = 0;
  int device = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  for (const Entry& e : cache) {
    if (e.kernel == kernel && e.device == device) return e.ctas;
  }
  // The input rings take 32 KB per CTA: ask for the largest shared-memory carveout, so the register cap
  // (not the L1 split) decides how many CTAs are resident.
  FKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
  if (dynamic_shared > 0) {  // the ratio-2 ring (72 KB) is above the default 48 KB
    FKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(dynamic_shared)));
  }
  int sms = 0, per_sm = 0;
  FKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FKV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, dynamic_shared));
  const int ctas = sms * (per_sm > 0 ? per_sm : 1);
  cache[next] = {kernel, device, ctas};
  next = (next + 1) % 32;
  return ctas;
}

int g_grid_limit = 0;  // set_grid_limit_for_tests; 0: none

template <typename Kernel>
int grid_for(Kernel kernel, int64_t rows, int rows_per_warp, size_t dynamic_shared = 0) {
  int64_t resident = resident_ctas(reinterpret_cast<const void*>(kernel), dynamic_shared);
  if (g_grid_limit > 0 && g_grid_limit < resident) resident = g_grid_limit;
  const int64_t rows_per_cta = static_cast<int64_t>(kThreads / 32) * rows_per_warp;
  const int64_t needed = (rows + rows_per_cta - 1) / rows_per_cta;
  return static_cast<int>(needed < resident ? needed : resident);
}

// Calls launch(kernel-of<kDim, kFaithful>, rows_per_warp) for the run-time dim and numerics.
template <template <int, bool> class Kernels, typename Launch>
void dispatch(int dim, KvNumerics numerics, const Launch& launch) {
  const bool faithful = numerics == KvNumerics::kFaithful;
  switch (dim) {
    case 32:
      return faithful ? launch(Kernels<32, true>::get(), 16) : launch(Kernels<32, false>::get(), 16);
    case 64:
      return faithful ? launch(Kernels<64, true>::get(), 8) : launch(Kernels<64, false>::get(), 8);
    case 128:
      return faithful ? launch(Kernels<128, true>::get(), 4) : launch(Kernels<128, false>::get(), 4);
    case 256:
      return faithful ? launch(Kernels<256, true>::get(), 2) : launch(Kernels<256, false>::get(), 2);
    default:
      return faithful ? launch(Kernels<512, true>::get(), 1) : launch(Kernels<512, false>::get(), 1);
  }
}

// The kernels with registers capped for kWindowCtasPerSm / kCompressorCtasPerSm resident CTAs, or (bench A/B,
// set_window_ablation_for_bench bit 16) as the compiler allocates them.
template <int kDim, bool kFaithful>
struct WindowKernels {
  static auto get() {
    if constexpr (kDim == 512 && kFaithful) {  // the bench's stage ablations (V4 shape only)
      switch (g_window_ablation & 15u) {
        case kAblateRope:
          return window_write_kernel<kDim, kFaithful, kWindowCtasPerSm<kFaithful>, kAblateRope>;
        case kAblateNormFallback:
          return window_write_kernel<kDim, kFaithful, kWindowCtasPerSm<kFaithful>, kAblateNormFallback>;
        case kAblateNormAndRope:
          return window_write_kernel<kDim, kFaithful, kWindowCtasPerSm<kFaithful>, kAblateNormAndRope>;
        default:
          break;
      }
    }
    return window_write_kernel<kDim, kFaithful, kWindowCtasPerSm<kFaithful>>;
  }
};
template <int kDim, bool kFaithful>
struct CompressorKernels {
  static auto get() { return compressor_write_kernel<kDim, kFaithful, kCompressorCtasPerSm<kFaithful>, 1>; }
};
// Ratio 2 holds four fp32 inputs per lane: capped at 80 registers (3 CTAs per SM) it ran slower than the
// compiler's own allocation (~90-103 registers, 2 CTAs) in session 3 (60.7% vs 65.5% of copy, spilling 384 B)
// and again in round s5r1 with only 24/32 B spilled (52.0% vs 67.4%).
template <int kDim, bool kFaithful>
struct PoolingCompressorKernels {
  static auto get() { return compressor_write_kernel<kDim, kFaithful, 1, 2>; }
};
template <int kDim, bool kFaithful>
struct KeyKernels {
  static auto get() { return index_key_write_kernel<kDim, kFaithful, kKeyCtasPerSm<kFaithful>>; }
};

}  // namespace

size_t window_record_bytes(KvNumerics numerics, int dim) {
  return numerics == KvNumerics::kFaithful ? nm::fp8_row_bytes(dim)
                                           : static_cast<size_t>(dim) * sizeof(float);
}
size_t entry_record_bytes(KvNumerics numerics, int dim) {
  return numerics == KvNumerics::kFaithful ? nm::nvfp4_entry_bytes(dim)
                                           : static_cast<size_t>(dim) * sizeof(float);
}
size_t key_record_bytes(KvNumerics numerics, int key_dim) {
  return numerics == KvNumerics::kFaithful ? nm::mxfp4_key_bytes(key_dim)
                                           : static_cast<size_t>(key_dim) * sizeof(float);
}

int64_t compressor_last_entry(int64_t start, int64_t n, int ratio) {
  return (start + n) / ratio;
}

void write_window_rows(const WindowWriteArgs& args, cudaStream_t stream) {
  validate_window_write(args);
  if (args.n == 0) return;
  dispatch<WindowKernels>(args.dim, args.numerics, [&](auto kernel, int rows_per_warp) {
    kernel<<<grid_for(kernel, args.n, rows_per_warp), kThreads, 0, stream>>>(args);
    FKV_CUDA_CHECK_LAUNCH();
  });
}

void set_window_ablation_for_bench(unsigned stages) {
  g_window_ablation = stages;
}

void set_grid_limit_for_tests(int ctas) {
  g_grid_limit = ctas;
}

void write_compressed_entries(const CompressorWriteArgs& args, cudaStream_t stream) {
  validate_compressor_write(args);
  const int64_t last = compressor_last_entry(args.start, args.n, args.ratio);
  const int64_t count = last - args.first_entry;
  if (count > 0) {
    const size_t ring = args.ratio == 2 ? kPoolingRingBytes : 0;
    const auto launch = [&](auto kernel, int rows_per_warp) {
      kernel<<<grid_for(kernel, count, rows_per_warp, ring), kThreads, ring, stream>>>(args, args.first_entry,
                                                                                       count);
      FKV_CUDA_CHECK_LAUNCH();
    };
    if (args.ratio == 2) {
      dispatch<PoolingCompressorKernels>(args.dim, args.numerics, launch);
    } else {
      dispatch<CompressorKernels>(args.dim, args.numerics, launch);
    }
  }
  // The open group's token for the next call (after the kernel has read the old one: same stream).
  if (args.ratio == 2 && args.n > 0 && (args.start + args.n) % 2 == 1) {
    const size_t row_bytes = static_cast<size_t>(args.dim) * sizeof(float);
    const float* v = static_cast<const float*>(args.v.data);
    const size_t last_row = static_cast<size_t>(args.n - 1) * static_cast<size_t>(args.dim);
    FKV_CUDA_CHECK(cudaMemcpyAsync(args.pending, v + last_row, row_bytes, cudaMemcpyDeviceToDevice, stream));
    FKV_CUDA_CHECK(cudaMemcpyAsync(args.pending + args.dim, args.g + last_row, row_bytes,
                                   cudaMemcpyDeviceToDevice, stream));
  }
}

void write_index_keys(const IndexKeyWriteArgs& args, cudaStream_t stream) {
  validate_index_key_write(args);
  if (args.count == 0) return;
  dispatch<KeyKernels>(args.key_dim, args.numerics, [&](auto kernel, int rows_per_warp) {
    kernel<<<grid_for(kernel, args.count, rows_per_warp), kThreads, 0, stream>>>(args);
    FKV_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashkv::cuda
