// The CPU backend's sparse attention (faithful numerics) behind a plain C++17 function, so CUDA tests can use
// it as their oracle (lib/backend/backend.hpp is C++20 and cannot be included by a .cu file).
#pragma once

#include <cstdint>

namespace flashkv::test {

// One Backend::sparse_attention problem; every pointer is host memory (see backend::SparseAttention).
struct AttentionProblem {
  const float* q = nullptr;  // [n, heads*dim]
  int64_t n = 0;
  int64_t heads = 0;
  int64_t dim = 0;
  const float* window = nullptr;  // [window_count, dim], dequantized rows
  int64_t window_count = 0;
  const int64_t* window_positions = nullptr;  // [window_count]
  const int64_t* query_positions = nullptr;   // [n]
  int64_t sliding_window = 0;
  const uint8_t* entries = nullptr;  // NVFP4 records
  int64_t entry_count = 0;
  const int32_t* selection = nullptr;  // [n, topk]
  int64_t topk = 0;
  const float* sink = nullptr;  // [heads]
};

// out[n, heads*dim] = CpuBackend::sparse_attention(problem, kFaithful).
void cpu_sparse_attention_faithful(const AttentionProblem& problem, float* out);

}  // namespace flashkv::test
