// RoPE on the GPU (spec §2.3, Backend::rope), bit-identical to the CPU backend (lib/backend/cpu/rope.cpp):
// in place on x [n, heads·head_dim], the last rope_dim channels of each head rotated in adjacent pairs
// (2i, 2i+1) by position·f_i (inverse: −position·f_i), the rotated pair computed in double and rounded to
// fp32, then (round_bf16) every channel of the row rounded to BF16.
//
// Angles: fp32_angles (a faithful RopeTable) forms fp32 products position·f_i and rounds cos/sin of them to
// fp32, as the CPU does; otherwise double angles and double cos/sin. cos and sin come from libdevice, which
// may differ from glibc's in the last double bit, so the kernel certifies each value that depends on them
// (exact_rounding.cuh): fp32 cos/sin in the first mode, the rotated pair in the second. A row with an
// uncertain value, or a non-finite result (NaN payloads differ between the CPU and the GPU), gets
// row_flags[r] = 1 and its contents are then unspecified: the caller recomputes it on the CPU.
//
// Contract: device pointers; x [n, heads·head_dim] fp32, 8-byte aligned; positions [n]; freqs [rope_dim/2]
// (RopeTable::freqs); row_flags [n], zeroed by the caller (flagged rows are set to 1, others left as they
// are). head_dim and rope_dim even, 0 <= rope_dim <= head_dim, rope_dim/2 <= kMaxRopePairs (callers check;
// rope_supported()). Enqueued on `stream`; no synchronization. Errors: a failed launch throws
// flashkv::Error(kDevice). Threading: no state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

constexpr int64_t kMaxRopePairs = 1024;

struct RopeRowsArgs {
  float* x = nullptr;
  int64_t n = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;
  const int64_t* positions = nullptr;
  const double* freqs = nullptr;
  bool inverse = false;
  bool fp32_angles = false;  // RopeTable::rounding == kFaithful
  bool round_bf16 = false;   // the operation's Rounding == kFaithful
  uint8_t* row_flags = nullptr;
};

inline bool rope_supported(int64_t head_dim, int64_t rope_dim) {
  return head_dim > 0 && head_dim % 2 == 0 && rope_dim % 2 == 0 && rope_dim >= 0 && rope_dim <= head_dim &&
         rope_dim / 2 <= kMaxRopePairs;
}

void rope_rows(const RopeRowsArgs& args, cudaStream_t stream);

}  // namespace flashkv::cuda
