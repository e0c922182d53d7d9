// Host-side argument validation of the KV record launchers (kv_quant.cuh). It lives in a .cpp file
// because throwing flashkv::Error needs fmt, which nvcc's C++17 mode cannot compile; this header is
// plain C++ so kv_quant.cu can include it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashkv::cuda {

// What one launcher call reads and writes: `n` rows of `input_row_bytes` each and `n` rows of
// `output_row_bytes` each.
struct KvQuantArgs {
  const char* function;  // launcher name, for the message
  const void* input;
  size_t input_row_bytes;
  size_t input_element_bytes;  // required alignment of `input`: 4 (fp32), 2 (BF16) or 1 (records)
  void* output;
  size_t output_row_bytes;
  size_t output_element_bytes;
  int64_t n;
  int channels;
  int block;  // channels per scale block of the record kind
};

// Throws flashkv::Error(kInvalidArgument) naming the function and argument when n < 0, when C is not a
// positive multiple of `block` or exceeds kMaxKvChannels, when a pointer is null or not aligned to its
// element type while n > 0, when the byte counts overflow, or when the input and output ranges overlap.
void validate_kv_quant_args(const KvQuantArgs& args);

}  // namespace flashkv::cuda
