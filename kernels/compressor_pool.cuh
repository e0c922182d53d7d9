// Compressor pooling on the GPU (spec §5.3, Backend::compressor_pool), bit-identical to the CPU backend
// (lib/backend/cpu/compressor.cpp): rows of v, g [groups·ratio, dim] in groups of `ratio`; per channel
// pooled[j] = Σ_t softmax_t(g)·v in double, in the CPU's order (peak = max_t g, w_t = exp(g_t − peak),
// sum = Σ_t w_t, value = Σ_t (w_t / sum)·v_t), rounded to fp32, then to BF16 when round_bf16.
//
// exp comes from libdevice, which may differ from glibc's in the last double bit, so each value is certified
// (exact_rounding.cuh) with a bound on its distance to the CPU's double. An uncertain or non-finite value
// (NaN payloads, all-−∞ gates) is written as NaN and its group gets group_flags[j] = 1: the caller
// recomputes the NaN channels of flagged groups on the CPU (each channel is an independent computation
// there).
//
// Contract: device pointers; v, g [groups·ratio, dim] fp32; pooled [groups, dim]; group_flags [groups],
// zeroed by the caller. ratio >= 1, dim >= 1. Enqueued on `stream`; no synchronization. Errors: a failed
// launch throws flashkv::Error(kDevice). Threading: no state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

struct CompressorPoolArgs {
  const float* v = nullptr;
  const float* g = nullptr;
  int64_t groups = 0;
  int64_t ratio = 1;
  int64_t dim = 0;
  bool round_bf16 = false;
  float* pooled = nullptr;
  uint8_t* group_flags = nullptr;
};

void compressor_pool(const CompressorPoolArgs& args, cudaStream_t stream);

}  // namespace flashkv::cuda
