// Compressor entries (write_compressed_entries, contract in kv_write.cuh): latent_j = RMSNorm(the ratio-1
// row, or the ratio-2 pooling of tokens 2j − start and 2j − start + 1), written out un-rotated for the
// index-key projection, and NVFP4(RoPE(latent_j)) into entry j's record. Ratio 1 reads its rows through the
// row ring; ratio 2 reads four fp32 rows per entry (v and g of both tokens) through its own per-warp ring
// (dynamic shared memory) and pools them with an fp32 estimate of proven error, else the CPU's double
// expression.
#include <cstddef>
#include <cstdint>

#include "cuda_check.cuh"
#include "kv_write.cuh"
#include "kv_write.hpp"
#include "kv_write_lanes.cuh"
#include "kv_write_launch.cuh"
#include "kv_write_records.cuh"
#include "kv_write_rms_norm.cuh"
#include "kv_write_rope.cuh"
#include "kv_write_row_ring.cuh"

namespace flashkv::cuda {
namespace {

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
  const RopeLane<kFaithful> rope_lane = rope_lane_of(tables, a.rope.rope_dim);
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

// The kernels for <kDim, kFaithful>: ratio 1 with registers capped for kCompressorCtasPerSm resident CTAs.
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

}  // namespace

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

}  // namespace flashkv::cuda
