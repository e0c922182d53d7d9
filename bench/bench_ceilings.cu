// The physical ceilings every flashkv GPU kernel is judged against, measured on the machine at hand:
//   - device-to-device copy bandwidth (cudaMemcpyAsync, bytes read + bytes written), for streaming
//     kernels (KV quantizers, gathers, norms);
//   - dense BF16 GEMM rate through cuBLAS (8192^3, fp32 accumulate), for the projection GEMMs.
// Prints a table and one "FKV_BENCH {...}" JSON line per result.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "cuda_check.cuh"
#include "gpu_bench.cuh"

namespace {

using flashkv::bench::DeviceBuffer;

constexpr const char* kProgram = "bench_ceilings";

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS call failed: ") + call + " (status " +
                             std::to_string(static_cast<int>(status)) + ")");
  }
}

// Median TFLOP/s of C = A * B with BF16 inputs/outputs and fp32 accumulation, m = n = k = `size`.
double bf16_gemm_tflops(int size, cudaStream_t stream) {
  const auto elements = static_cast<int64_t>(size) * size;
  DeviceBuffer a(static_cast<size_t>(elements) * 2), b(static_cast<size_t>(elements) * 2),
      c(static_cast<size_t>(elements) * 2);
  flashkv::bench::fill_random(a.as<uint16_t>(), elements, 1, 1.0f, stream);
  flashkv::bench::fill_random(b.as<uint16_t>(), elements, 2, 1.0f, stream);
  cublasHandle_t handle{};
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  const double ms = flashkv::bench::median_ms(stream, [&] {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &alpha, a.as<void>(),
                              CUDA_R_16BF, size, b.as<void>(), CUDA_R_16BF, size, &beta, c.as<void>(),
                              CUDA_R_16BF, size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  check_cublas(cublasDestroy(handle), "cublasDestroy");
  const double flops = 2.0 * static_cast<double>(size) * size * size;
  return flops / (ms * 1e-3) / 1e12;
}

}  // namespace

int main() {
  try {
    flashkv::bench::print_device_header(kProgram);
    cudaStream_t stream{};
    FKV_CUDA_CHECK(cudaStreamCreate(&stream));

    std::printf("  %-34s %10s %-7s %7s\n", "ceiling", "value", "unit", "of 2GiB");
    const double copy_2g = flashkv::bench::copy_bandwidth_gbs(size_t{2} << 30, stream);
    flashkv::bench::print_result(kProgram, "d2d_copy_2GiB", copy_2g, "GB/s", 1.0);
    // A larger copy shows whether 2 GiB is already on the plateau.
    const double copy_8g = flashkv::bench::copy_bandwidth_gbs(size_t{8} << 30, stream);
    flashkv::bench::print_result(kProgram, "d2d_copy_8GiB", copy_8g, "GB/s", copy_8g / copy_2g);

    const double tflops = bf16_gemm_tflops(8192, stream);
    flashkv::bench::print_result(kProgram, "cublas_bf16_gemm_8192", tflops, "TFLOP/s", 1.0);

    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
