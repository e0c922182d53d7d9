// Indexer scoring (kernels/indexer.cuh) at N = 64K..1M MXFP4 index keys (68 B each), 32 heads x 128,
// faithful numerics, batch 1 (decode) and 4 query rows: median time and the fraction of the bandwidth
// floor, the time to read the key records and write the fp32 scores once at the device-to-device copy
// bandwidth measured in the same run (goal >= 0.7). Queries are MXFP4 fake-quantized and head weights
// BF16 values, as the engine passes them (V4.1 faithful rounds the scaled weights to BF16); the _f32w rows
// (1M keys) take fp32 weights (the kernel's general epilogue).
//
// Two timings per shape: the plain rows start from an idle GPU, so the event pair also holds the host's
// launch latency (the GPU waits for the launch to arrive); the _queued rows keep the GPU busy with a wait
// kernel while the call is enqueued behind it, so the pair holds only the GPU's time for the call (what it
// adds to a busy stream or a CUDA graph).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "gpu_bench.cuh"
#include "indexer.cuh"
#include "kv_quant.cuh"

namespace {

constexpr const char* kProgram = "bench_indexer";
constexpr int kHeads = 32;
constexpr int kDim = 128;
constexpr int64_t kKeyBytes = 68;
constexpr int64_t kLengths[] = {64 * 1024, 256 * 1024, 1024 * 1024};
constexpr int64_t kBatches[] = {1, 4};

namespace fb = flashkv::bench;
namespace fc = flashkv::cuda;

// visible[r] = n for every row (decode at the end of the context).
__global__ void fill_visible(int64_t* visible, int64_t rows, int64_t n) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) visible[r] = n;
}

// x = bf16(x) (RNE), in place.
__global__ void round_to_bf16(float* x, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

// Keeps the GPU busy for `ns` nanoseconds (one thread), so that work enqueued meanwhile waits in the queue.
__global__ void busy_wait(uint64_t ns) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// Median time of `launch` with the GPU busy before the start event (see the file comment).
template <typename Launch>
double queued_median_ms(cudaStream_t stream, Launch&& launch) {
  constexpr uint64_t kBusyNs = 40000;  // far above the host's enqueue time of the events and the call
  return fb::median_ms_after(
      stream,
      [&] {
        busy_wait<<<1, 1, 0, stream>>>(kBusyNs);
        FKV_CUDA_CHECK_LAUNCH();
      },
      launch);
}

}  // namespace

int main() {
  try {
    fb::print_device_header(kProgram);
    cudaStream_t stream{};
    FKV_CUDA_CHECK(cudaStreamCreate(&stream));
    const double copy_gbs = fb::copy_bandwidth_gbs(size_t{2} << 30, stream);
    std::printf("  %-34s %10s %-7s %7s\n", "index scores (rows x N keys)", "time", "unit", "of floor");
    fb::print_result(kProgram, "d2d_copy_2GiB", copy_gbs, "GB/s", 1.0);
    constexpr int64_t kMaxKeys = 1024 * 1024, kMaxRows = 4;
    // Keys: random rows quantized by the MXFP4 key kernel. Queries: random rows fake-quantized
    // (quantize, then dequantize).
    fb::DeviceBuffer key_rows(kMaxKeys * kDim * 4), keys(kMaxKeys * kKeyBytes);
    fb::fill_random(key_rows.as<float>(), kMaxKeys * kDim, 31, 2.0f, stream);
    fc::quantize_mxfp4_keys(key_rows.as<float>(), kMaxKeys, kDim, keys.as<uint8_t>(), stream);
    const int64_t query_rows = kMaxRows * kHeads;
    fb::DeviceBuffer queries(query_rows * kDim * 4), query_records(query_rows * kKeyBytes);
    fb::DeviceBuffer weights(kMaxRows * kHeads * 4), weights_f32(kMaxRows * kHeads * 4), visible(kMaxRows * 8),
        scores(kMaxRows * kMaxKeys * 4);
    fb::DeviceBuffer workspace(fc::index_scores_workspace_bytes(kMaxRows, kHeads));
    fb::fill_random(queries.as<float>(), query_rows * kDim, 32, 1.0f, stream);
    fc::quantize_mxfp4_keys(queries.as<float>(), query_rows, kDim, query_records.as<uint8_t>(), stream);
    fc::dequantize_mxfp4_keys(query_records.as<uint8_t>(), query_rows, kDim, queries.as<float>(), stream);
    fb::fill_random(weights_f32.as<float>(), kMaxRows * kHeads, 33, 0.1f, stream);
    fb::fill_random(weights.as<float>(), kMaxRows * kHeads, 33, 0.1f, stream);
    round_to_bf16<<<1, kMaxRows * kHeads, 0, stream>>>(weights.as<float>(), kMaxRows * kHeads);
    FKV_CUDA_CHECK_LAUNCH();
    for (const int64_t n : kLengths) {
      for (const int64_t rows : kBatches) {
        const std::string name =
            std::string("index_scores_n") + std::to_string(n) + "_b" + std::to_string(rows);
        if (!fb::selected(name)) continue;
        fill_visible<<<1, 32, 0, stream>>>(visible.as<int64_t>(), rows, n);
        FKV_CUDA_CHECK_LAUNCH();
        fc::IndexScoringArgs args;
        args.queries = queries.as<float>();
        args.head_weights = weights.as<float>();
        args.n = rows;
        args.heads = kHeads;
        args.dim = kDim;
        args.keys = keys.as<uint8_t>();
        args.key_format = fc::IndexKeyFormat::kMxfp4;
        args.key_count = n;
        args.n_visible = visible.as<int64_t>();
        args.scores = scores.as<float>();
        args.faithful = true;
        args.workspace = workspace.as<void>();
        args.workspace_bytes = workspace.bytes();
        const auto call = [&] { fc::index_scores(args, stream); };
        const double bytes = static_cast<double>(n * kKeyBytes + rows * n * 4);
        const double floor_ms = bytes / (copy_gbs * 1e9) * 1e3;
        const auto measure = [&](const std::string& row) {
          const double ms = fb::median_ms(stream, call);
          fb::print_result(kProgram, row, ms * 1e3, "us", floor_ms / ms);
          const double queued_ms = queued_median_ms(stream, call);
          fb::print_result(kProgram, row + "_queued", queued_ms * 1e3, "us", floor_ms / queued_ms);
        };
        measure(name);
        if (n == kMaxKeys) {
          args.head_weights = weights_f32.as<float>();
          measure(name + "_f32w");
        }
      }
    }
    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
