// Host-side argument validation of the sparse-attention launcher (sparse_attention.cuh). A .cpp file because
// throwing flashkv::Error needs fmt, which nvcc's C++17 mode cannot compile; this header is plain C++.
#pragma once

#include "sparse_attention.cuh"

namespace flashkv::cuda {

// Throws flashkv::Error(kInvalidArgument) naming the argument when n, window_cap or topk is negative, n
// exceeds the grid limit, window_cap + topk exceeds kSparseAttentionMaxKeys, or (with n > 0) a pointer that
// the call reads or writes is null or misaligned, or the output overlaps q.
void validate_sparse_attention_args(const SparseAttentionArgs& args);

}  // namespace flashkv::cuda
