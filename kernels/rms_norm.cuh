// RMSNorm on the GPU (spec §2.1, Backend::rms_norm), bit-identical to the CPU backend
// (lib/backend/cpu/rmsnorm.cpp): y = w ⊙ x·(Σx²/d + eps)^-½ per row, in double, rounded to fp32, then to BF16
// when round_bf16. Everything here is exactly reproducible (no transcendental function): the sum of squares
// follows the CPU's order (backend/cpu/numerics.hpp dot(): eight interleaved partial sums, then a fixed
// combine and the tail), each square of an fp32 is exact in double, and division, sqrt and products are
// correctly rounded on both sides.
//
// row_flags (optional, zeroed by the caller): rows with a non-finite output get 1 — NaN payloads differ
// between the CPU and the GPU, so a caller that needs bit-identical rows recomputes those on the CPU.
//
// Contract: device pointers; x, y [n, d] fp32 (y may equal x); weight [d]; row_flags [n] or null; d >= 1.
// Enqueued on `stream`; no synchronization. Errors: a failed launch throws flashkv::Error(kDevice).
// Threading: no state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

void rms_norm_rows(const float* x, int64_t n, int64_t d, const float* weight, double eps, bool round_bf16,
                   float* y, uint8_t* row_flags, cudaStream_t stream);

}  // namespace flashkv::cuda
