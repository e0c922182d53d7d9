// Every CUDA runtime call in flashkv goes through FKV_CUDA_CHECK: a failure becomes
// flashkv::Error(kDevice) naming the call, the CUDA error and the source line. Kernel launches are
// followed by FKV_CUDA_CHECK_LAUNCH() so launch-configuration errors are not silently dropped.
#pragma once

#include <cuda_runtime.h>

namespace flashkv::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}

}  // namespace flashkv::cuda

#define FKV_CUDA_CHECK(call) ::flashkv::cuda::check((call), #call, __FILE__, __LINE__)
#define FKV_CUDA_CHECK_LAUNCH() ::flashkv::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
