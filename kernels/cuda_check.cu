#include "cuda_check.cuh"

#include <flashkv/error.hpp>

namespace flashkv::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  const ErrorCode code = status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kDevice;
  fail(code, "CUDA call {} failed at {}:{}: {} ({})", call, file, line, cudaGetErrorName(status),
       cudaGetErrorString(status));
}

}  // namespace flashkv::cuda
