// Host-side argument validation of the KV write launchers (kv_write.cuh). Implemented in kv_write.cpp because
// throwing flashkv::Error with a formatted message needs fmt, which nvcc's C++17 mode cannot compile; this
// header is plain C++17 so the kv_write_*.cu kernels can include it.
#pragma once

#include "kv_write.cuh"

namespace flashkv::cuda {

// Each throws flashkv::Error(kInvalidArgument) naming the launcher and the argument at fault.
void validate_window_write(const WindowWriteArgs& args);
void validate_compressor_write(const CompressorWriteArgs& args);
void validate_index_key_write(const IndexKeyWriteArgs& args);

}  // namespace flashkv::cuda
