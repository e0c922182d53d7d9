// RMSNorm of a row held by its lanes (rmsnorm.cpp: y = w ⊙ x·(Σx²/d + eps)^-½, stored fp32 (clean) or fp32
// then BF16 (faithful)), byte-identical to the CPU backend. The hot path is an fp32 estimate whose error is
// proven small enough to decide the BF16 rounding unless the value lies within kMidpointMargin ulps of a
// rounding midpoint; the declined channels go to an out-of-line fallback (a double estimate, then the CPU's
// own expression with the CPU's summation order), kept out of line so that its doubles do not shape the
// row loop's register allocation. Why each step has its form, and the host checks of the bounds, are in the
// comments below and in docs/perf-notes/kv-write.md.
#pragma once

#include <flashkv/numeric/scalar_codecs.hpp>

#include <cstdint>

#include "kv_element_codecs.cuh"
#include "kv_write_lanes.cuh"

namespace flashkv::cuda {
namespace {  // internal linkage: see kv_write_lanes.cuh

// A fast RMSNorm value this many fp32 ulps or fewer from a BF16 rounding midpoint takes the double path
// (norm_estimate: the argument needs > 2.51; 3 declines 7 of every 65536 values, 5.4% of 512-channel rows;
// 5 declined 11, 8.2% of the window rows, which cost the window kernel ~13% of its time in s4final).
constexpr uint32_t kMidpointMargin = 3;

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
                                                  const float* lane_weight, double eps, int dim,
                                                  int first_lane, int significand_bits, double any_order,
                                                  uint32_t open) {
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
                               bool weights_bounded, double eps, int dim, int first_lane,
                               int significand_bits, ChannelPair<kFaithful> (&packed)[kChannels / 2],
                               bool skip_fallback = false) {
  if constexpr (!kFaithful) {
    const double any_order = any_order_sum_of_squares<kLanes>(x);
    const double mean_square =
        mean_square_of(exact_sum_of_squares<kLanes>(x, any_order, first_lane, significand_bits), dim, eps);
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
    if (__any_sync(kFullMask, declined) && !skip_fallback) {
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

}  // namespace
}  // namespace flashkv::cuda
