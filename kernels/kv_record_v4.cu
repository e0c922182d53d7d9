// V4 KV records (kv_record_v4.cuh): one warp per row; lanes take the row's scale blocks, padding bytes and
// RoPE channels in turn (the quantizer), or its channels (the dequantizer).
#include <algorithm>

#include "backend/cpu/kv_record_v4.hpp"
#include "cuda_check.cuh"
#include "kv_record_v4.cuh"

namespace flashkv::cuda {
namespace {

namespace v4 = backend::cpu;

constexpr int kWarpsPerCta = 8;
constexpr int64_t kMaxGrid = 1 << 20;

__device__ inline int64_t warp_id() {
  return blockIdx.x * static_cast<int64_t>(kWarpsPerCta) + threadIdx.x / 32;
}
__device__ inline int64_t warp_count() {
  return static_cast<int64_t>(gridDim.x) * kWarpsPerCta;
}

__global__ void __launch_bounds__(kWarpsPerCta * 32)
    quantize_v4_kernel(const float* rows, int64_t n, int channels, int rope, uint8_t* records) {
  const int nope = channels - rope;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const size_t bytes = v4::v4_record_bytes(channels, rope);
  const int blocks = v4::v4_scale_blocks(nope);
  const auto padding_end = static_cast<int>(v4::v4_rope_offset(nope));
  for (int64_t r = warp_id(); r < n; r += warp_count()) {
    const float* x = rows + r * channels;
    uint8_t* out = records + static_cast<size_t>(r) * bytes;
    for (int block = lane; block < blocks; block += 32) v4::quantize_v4_block(x, nope, block, out);
    for (int p = nope + blocks + lane; p < padding_end; p += 32) out[p] = 0;
    for (int i = lane; i < rope; i += 32) v4::store_v4_rope_channel(x, nope, i, out);
  }
}

__global__ void __launch_bounds__(kWarpsPerCta * 32)
    dequantize_v4_kernel(const uint8_t* records, int64_t n, int channels, int rope, float* rows) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const size_t bytes = v4::v4_record_bytes(channels, rope);
  for (int64_t r = warp_id(); r < n; r += warp_count()) {
    const uint8_t* in = records + static_cast<size_t>(r) * bytes;
    for (int c = lane; c < channels; c += 32)
      rows[r * channels + c] = v4::dequantize_v4_channel(in, channels, rope, c);
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min((n + kWarpsPerCta - 1) / kWarpsPerCta, kMaxGrid));
}

}  // namespace

void quantize_v4_records(const float* rows, int64_t n, int channels, int rope, uint8_t* records,
                         cudaStream_t stream) {
  if (n <= 0) return;
  quantize_v4_kernel<<<grid_for(n), kWarpsPerCta * 32, 0, stream>>>(rows, n, channels, rope, records);
  FKV_CUDA_CHECK_LAUNCH();
}

void dequantize_v4_records(const uint8_t* records, int64_t n, int channels, int rope, float* rows,
                           cudaStream_t stream) {
  if (n <= 0) return;
  dequantize_v4_kernel<<<grid_for(n), kWarpsPerCta * 32, 0, stream>>>(records, n, channels, rope, rows);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace flashkv::cuda
