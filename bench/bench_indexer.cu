// Indexer scoring (kernels/indexer.cuh) at N = 64K..1M MXFP4 index keys (68 B each), 32 heads x 128,
// faithful numerics, batch 1 (decode) and 4 query rows: median time and the fraction of the bandwidth
// floor, the time to read the key records and write the fp32 scores once at the device-to-device copy
// bandwidth measured in the same run (goal >= 0.7). Queries are MXFP4 fake-quantized, as the engine
// passes them.
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
    fb::DeviceBuffer weights(kMaxRows * kHeads * 4), visible(kMaxRows * 8), scores(kMaxRows * kMaxKeys * 4);
    fb::fill_random(queries.as<float>(), query_rows * kDim, 32, 1.0f, stream);
    fc::quantize_mxfp4_keys(queries.as<float>(), query_rows, kDim, query_records.as<uint8_t>(), stream);
    fc::dequantize_mxfp4_keys(query_records.as<uint8_t>(), query_rows, kDim, queries.as<float>(), stream);
    fb::fill_random(weights.as<float>(), kMaxRows * kHeads, 33, 0.1f, stream);
    fb::DeviceBuffer workspace(fc::index_scores_workspace_bytes(kMaxRows, kHeads));
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
        const double ms = fb::median_ms(stream, [&] { fc::index_scores(args, stream); });
        const double bytes = static_cast<double>(n * kKeyBytes + rows * n * 4);
        const double floor_ms = bytes / (copy_gbs * 1e9) * 1e3;
        fb::print_result(kProgram, name, ms * 1e3, "us", floor_ms / ms);
      }
    }
    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
