// Window rows (write_window_rows, contract in kv_write.cuh): FP8(RoPE(RMSNorm(kv))) of each new token row,
// into the caller's records and the last ring_capacity of them into the window ring. One row per warp at the
// V4 shape (512 channels), read through the row ring; RMSNorm, RoPE and the FP8 encoding in registers.
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

// Stage ablations of the window kernel (set_window_ablation_for_bench): kv_write.cuh.
// Compile-time for the window kernel (dim 512, faithful only): checking a run-time value in every row cost
// registers and moves.
constexpr unsigned kAblateRope = 1, kAblateNormFallback = 4, kAblateNormAndRope = 8;
unsigned g_window_ablation = 0;

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
  const RopeLane<kFaithful> rope_lane = rope_lane_of(tables, a.rope.rope_dim);
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
          rms_norm_chunk<kLanes, kFaithful>(x, reload, norm.w + kChannels * lanes.lane_in_row,
                                            weights_bounded, a.eps, kDim, lanes.first_lane, significand_bits,
                                            pairs, (kAblate & kAblateNormFallback) != 0);
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

// The kernel for <kDim, kFaithful>, registers capped for kWindowCtasPerSm resident CTAs; for the V4 shape
// also the bench's stage ablations (set_window_ablation_for_bench).
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

}  // namespace

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

}  // namespace flashkv::cuda
