// Shared plumbing of the GPU benchmark programs: event timing (median of many repetitions after
// warm-up), the device-to-device copy ceiling, the cuBLAS BF16 GEMM ceiling, random device data, and one
// output format (a table for people plus one JSON line per result, "FKV_BENCH {...}", for
// docs/performance.md).
//
// Header-only, used by bench_*.cu programs only (they link cuBLAS). Every CUDA call goes through
// FKV_CUDA_CHECK, so a failure ends the program with a flashkv::Error naming the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.cuh"

namespace flashkv::bench {

// How many timed repetitions each measurement takes; warm-up runs come on top.
constexpr int kTimedReps = 25;
constexpr int kWarmupReps = 3;

// Whether the measurement `name` runs: all do, unless FLASHKV_BENCH_ONLY names a substring of the ones
// wanted (scripts/gpu-profile runs one configuration under ncu that way).
inline bool selected(const std::string& name) {
  const char* only = std::getenv("FLASHKV_BENCH_ONLY");
  return only == nullptr || *only == '\0' || name.find(only) != std::string::npos;
}

// Owns one device allocation; freed on scope exit (benchmarks allocate a few large buffers only).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { FKV_CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Median wall time in milliseconds of `launch` enqueued on `stream`, each repetition bracketed by
// its own pair of events so a slow outlier (clock ramp, other tenants) does not drag the result.
// `before` is enqueued ahead of each start event, untimed (e.g. work that keeps the GPU busy meanwhile).
template <typename Before, typename Launch>
double median_ms_after(cudaStream_t stream, Before&& before, Launch&& launch, int reps = kTimedReps) {
  for (int i = 0; i < kWarmupReps; ++i) launch();
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
  // The timed launches carry an NVTX range so a profiler can pick them (ncu --nvtx-include flashkv_timed/).
  nvtxRangePushA("flashkv_timed");
  cudaEvent_t start{}, stop{};
  FKV_CUDA_CHECK(cudaEventCreate(&start));
  FKV_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times(static_cast<size_t>(reps));
  for (float& t : times) {
    before();
    FKV_CUDA_CHECK(cudaEventRecord(start, stream));
    launch();
    FKV_CUDA_CHECK(cudaEventRecord(stop, stream));
    FKV_CUDA_CHECK(cudaEventSynchronize(stop));
    FKV_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
  }
  FKV_CUDA_CHECK(cudaEventDestroy(start));
  FKV_CUDA_CHECK(cudaEventDestroy(stop));
  nvtxRangePop();
  std::sort(times.begin(), times.end());
  return static_cast<double>(times[times.size() / 2]);
}

template <typename Launch>
double median_ms(cudaStream_t stream, Launch&& launch, int reps = kTimedReps) {
  return median_ms_after(
      stream, [] {}, launch, reps);
}

inline double gb_per_s(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

// Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (2 x size), the
// ceiling a streaming kernel is compared with. `bytes` should be far above the L2 size.
inline double copy_bandwidth_gbs(size_t bytes, cudaStream_t stream) {
  DeviceBuffer src(bytes), dst(bytes);
  FKV_CUDA_CHECK(cudaMemsetAsync(src.as<void>(), 0x5A, bytes, stream));
  const double ms = median_ms(stream, [&] {
    FKV_CUDA_CHECK(cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return gb_per_s(2.0 * static_cast<double>(bytes), ms);
}

__device__ inline uint32_t hash_u32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb93fe51a87d3ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Fills `out` with pseudo-random values in [-scale, scale): benchmark inputs must not be zeros (a
// zero row takes the scale-floor branch everywhere and is unrepresentative).
__global__ void fill_random_f32(float* out, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float unit = static_cast<float>(hash_u32(seed ^ static_cast<uint64_t>(i)) >> 8) * 0x1p-24f;
    out[i] = (2.0f * unit - 1.0f) * scale;
  }
}

// Same, as BF16 bit patterns (round-to-nearest-even of the fp32 value; finite inputs only).
__global__ void fill_random_bf16(uint16_t* out, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float unit = static_cast<float>(hash_u32(seed ^ static_cast<uint64_t>(i)) >> 8) * 0x1p-24f;
    const uint32_t bits = __float_as_uint((2.0f * unit - 1.0f) * scale);
    out[i] = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  }
}

inline void fill_random(float* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_f32<<<1024, 256, 0, stream>>>(out, count, seed, scale);
  FKV_CUDA_CHECK_LAUNCH();
}

inline void fill_random(uint16_t* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_bf16<<<1024, 256, 0, stream>>>(out, count, seed, scale);
  FKV_CUDA_CHECK_LAUNCH();
}

inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS call failed: ") + call + " (status " +
                             std::to_string(static_cast<int>(status)) + ")");
  }
}

// Median TFLOP/s of C = A * B through cuBLAS with BF16 inputs/outputs and fp32 accumulation, m = n = k =
// `size`: the matrix ceiling that tensor-core kernels are compared with (random data, not zeros).
inline double bf16_gemm_tflops(int size, cudaStream_t stream) {
  const auto elements = static_cast<int64_t>(size) * size;
  DeviceBuffer a(static_cast<size_t>(elements) * 2), b(static_cast<size_t>(elements) * 2),
      c(static_cast<size_t>(elements) * 2);
  fill_random(a.as<uint16_t>(), elements, 1, 1.0f, stream);
  fill_random(b.as<uint16_t>(), elements, 2, 1.0f, stream);
  cublasHandle_t handle{};
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  const double ms = median_ms(stream, [&] {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &alpha, a.as<void>(),
                              CUDA_R_16BF, size, b.as<void>(), CUDA_R_16BF, size, &beta, c.as<void>(),
                              CUDA_R_16BF, size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  check_cublas(cublasDestroy(handle), "cublasDestroy");
  const double flops = 2.0 * static_cast<double>(size) * size * size;
  return flops / (ms * 1e-3) / 1e12;
}

// Prints device name, SM count, memory, L2 and the UTC date: every result is tied to its machine.
inline void print_device_header(const char* program) {
  int device = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  FKV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  FKV_CUDA_CHECK(cudaDriverGetVersion(&driver));
  FKV_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%MZ", std::gmtime(&now));
  std::printf("%s on %s (sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB), driver %d, runtime %d, %s\n", program,
              prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1u << 30), prop.l2CacheSize / 1048576.0, driver,
              runtime, date);
  std::printf("FKV_BENCH {\"program\":\"%s\",\"device\":\"%s\",\"sms\":%d,\"date\":\"%s\"}\n", program,
              prop.name, prop.multiProcessorCount, date);
}

// One result row: human-readable line, then its JSON twin.
inline void print_result(const char* program, const std::string& name, double value, const char* unit,
                         double fraction_of_ceiling) {
  std::printf("  %-34s %10.1f %-7s %6.1f%%\n", name.c_str(), value, unit, 100.0 * fraction_of_ceiling);
  std::printf(
      "FKV_BENCH {\"program\":\"%s\",\"kernel\":\"%s\",\"value\":%.2f,\"unit\":\"%s\",\"fraction\":%.4f}\n",
      program, name.c_str(), value, unit, fraction_of_ceiling);
}

}  // namespace flashkv::bench
