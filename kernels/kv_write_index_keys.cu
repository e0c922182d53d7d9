// Index keys (write_index_keys, contract in kv_write.cuh): MXFP4(RoPE(RMSNorm(k))) of the wk projection's
// output rows into each key's record. Four 128-channel keys per warp, read through the row ring; the rotated
// pairs (the last 64 channels, on half the key's lanes) are spread over all eight lanes through shared
// memory (rope_chunk), and the MXFP4 codes come straight from the packed BF16 pairs.
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
  const RopeLane<kFaithful> rope_lane = rope_lane_of(tables, a.rope.rope_dim);
  const int significand_bits = a.keys.type == RowType::kBf16 ? 8 : 24;
  const RecordPages key_pages(a.records);
  for_each_input_row<kDim>(
      a.count, a.keys, ring,
      [&](float(&x)[kChannels], const auto& reload, int64_t index, bool active, const RowLanes<kDim>& lanes) {
        const int64_t entry = a.first_entry + index;
        // position-only work first (RopeTrig): it overlaps the RMSNorm reduction
        const RopeTrig<kLanes, kFaithful> trig = rope_trig<kLanes>(entry * a.ratio, rope_lane);
        ChannelPair<kFaithful> pairs[kChannels / 2];
        rms_norm_chunk<kLanes, kFaithful>(x, reload, norm.w + kChannels * lanes.lane_in_row, weights_bounded,
                                          a.eps, kDim, lanes.first_lane, significand_bits, pairs);
        // The page lookup after RMSNorm (its load overlaps RoPE's exchange): ahead of it, its address stayed
        // live through the fallback's call and the faithful 128-channel loop spilled three cos/sin values
        // per row (ptxas: 16/24 B at 64 registers; 0 here).
        uint8_t* const record = key_pages.address(entry);
        rope_chunk<kLanes, kFaithful>(pairs, entry * a.ratio, rope_lane, trig);
        if constexpr (kFaithful) {
          store_mxfp4_pairs(record, kDim, lanes.lane_in_row, pairs, active);
        } else {
          unpack_pairs(pairs, x);
          store_record<RecordKind::kKey, kFaithful>(record, kDim, lanes.lane_in_row, x, active);
        }
      });
}

// The kernel for <kDim, kFaithful>, registers capped for kKeyCtasPerSm resident CTAs.
template <int kDim, bool kFaithful>
struct KeyKernels {
  static auto get() { return index_key_write_kernel<kDim, kFaithful, kKeyCtasPerSm<kFaithful>>; }
};

}  // namespace

void write_index_keys(const IndexKeyWriteArgs& args, cudaStream_t stream) {
  validate_index_key_write(args);
  if (args.count == 0) return;
  dispatch<KeyKernels>(args.key_dim, args.numerics, [&](auto kernel, int rows_per_warp) {
    kernel<<<grid_for(kernel, args.count, rows_per_warp), kThreads, 0, stream>>>(args);
    FKV_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashkv::cuda
