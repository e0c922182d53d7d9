// Top-512 over rows of N = 16K, 64K, 256K, 1M scores (fp32 and BF16), batch 1..64 rows
// (kernels/topk.cuh): median time per call and the fraction of the bandwidth floor, i.e. the time to read
// the scores once at the device-to-device copy bandwidth measured in the same run. The FKV_BENCH lines
// (kernel "topk512_<type>_n<N>_b<rows>", value in us) are what bench/bench_topk_torch.py reads to time
// torch.topk on the same shapes and print the ratio.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "gpu_bench.cuh"
#include "topk.cuh"

namespace {

constexpr const char* kProgram = "bench_topk";
constexpr int64_t kK = 512;
constexpr int64_t kLengths[] = {16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024};
constexpr int64_t kBatches[] = {1, 4, 16, 64};

namespace fb = flashkv::bench;
namespace fc = flashkv::cuda;

void bench_shape(fc::ScoreType type, int64_t n, int64_t rows, const fb::DeviceBuffer& scores,
                 const fb::DeviceBuffer& out, double copy_gbs, cudaStream_t stream) {
  const std::string name = std::string("topk512_") + (type == fc::ScoreType::kFp32 ? "fp32" : "bf16") + "_n" +
                           std::to_string(n) + "_b" + std::to_string(rows);
  if (!fb::selected(name)) return;
  fb::DeviceBuffer workspace(std::max<size_t>(1, fc::top_k_workspace_bytes(rows, n, kK)));
  const double ms = fb::median_ms(stream, [&] {
    fc::top_k_rows(scores.as<void>(), type, rows, n, kK, out.as<int32_t>(), workspace.as<void>(),
                   workspace.bytes(), stream);
  });
  const double element = type == fc::ScoreType::kFp32 ? 4.0 : 2.0;
  const double bytes = static_cast<double>(rows * n) * element;
  const double floor_ms = bytes / (copy_gbs * 1e9) * 1e3;
  fb::print_result(kProgram, name, ms * 1e3, "us", floor_ms / ms);
}

__global__ void empty_kernel() {}

}  // namespace

int main() {
  try {
    fb::print_device_header(kProgram);
    cudaStream_t stream{};
    FKV_CUDA_CHECK(cudaStreamCreate(&stream));
    const double copy_gbs = fb::copy_bandwidth_gbs(size_t{2} << 30, stream);
    std::printf("  %-34s %10s %-7s %7s\n", "top-512 (rows x N)", "time", "unit", "of floor");
    fb::print_result(kProgram, "d2d_copy_2GiB", copy_gbs, "GB/s", 1.0);
    // What one launch costs by this timing method (events around an empty kernel): the floor of the
    // small shapes, which launch one or two kernels.
    const double launch_ms = fb::median_ms(stream, [&] {
      empty_kernel<<<1, 32, 0, stream>>>();
      FKV_CUDA_CHECK_LAUNCH();
    });
    fb::print_result(kProgram, "empty_launch", launch_ms * 1e3, "us", 1.0);
    constexpr int64_t kMaxElements = 64 * 1024 * 1024;
    fb::DeviceBuffer f32(kMaxElements * 4), bf16(kMaxElements * 2), out(64 * kK * 4);
    fb::fill_random(f32.as<float>(), kMaxElements, 21, 1.0f, stream);
    fb::fill_random(bf16.as<uint16_t>(), kMaxElements, 22, 1.0f, stream);
    for (const fc::ScoreType type : {fc::ScoreType::kFp32, fc::ScoreType::kBf16}) {
      for (const int64_t n : kLengths) {
        for (const int64_t rows : kBatches)
          bench_shape(type, n, rows, type == fc::ScoreType::kFp32 ? f32 : bf16, out, copy_gbs, stream);
      }
    }
    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
