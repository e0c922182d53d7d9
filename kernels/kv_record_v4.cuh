// The V4-Flash KV record (backend::RecordFormat::kFp8Bf16Rope: FP8 non-RoPE channels with a UE8M0 scale per
// 64, zero padding to 8 bytes, BF16 RoPE channels; 584 B for 512 / 64) on the GPU. The kernels call the
// per-block and per-channel functions of lib/backend/cpu/kv_record_v4.hpp, which the CPU backend's records
// are made of, so records and decoded rows are byte-identical to the CPU backend's by construction.
//
// Contract: device pointers; rows [n, channels] fp32 dense; records [n] of v4_record_bytes(channels, rope)
// bytes back to back; 0 <= rope <= channels. n == 0 launches nothing. Enqueued on `stream`; no
// synchronization. Errors: a failed launch throws flashkv::Error(kDevice). Threading: no state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

void quantize_v4_records(const float* rows, int64_t n, int channels, int rope, uint8_t* records,
                         cudaStream_t stream);
void dequantize_v4_records(const uint8_t* records, int64_t n, int channels, int rope, float* rows,
                           cudaStream_t stream);

}  // namespace flashkv::cuda
