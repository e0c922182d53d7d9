// The physical ceilings every flashkv GPU kernel is judged against, measured on the machine at hand:
//   - device-to-device copy bandwidth (cudaMemcpyAsync, bytes read + bytes written), for streaming
//     kernels (KV quantizers, gathers, norms);
//   - dense BF16 GEMM rate through cuBLAS (8192^3, fp32 accumulate), for the projection GEMMs.
// Prints a table and one "FKV_BENCH {...}" JSON line per result.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_check.cuh"
#include "gpu_bench.cuh"

namespace {

constexpr const char* kProgram = "bench_ceilings";

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

    const double tflops = flashkv::bench::bf16_gemm_tflops(8192, stream);
    flashkv::bench::print_result(kProgram, "cublas_bf16_gemm_8192", tflops, "TFLOP/s", 1.0);

    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
