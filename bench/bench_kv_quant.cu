// Throughput of the KV record kernels (kernels/kv_quant.cuh) against the device-to-device copy
// bandwidth measured in the same run. Sizes are far above the L2 (2^31 channels: 8 GiB of fp32 rows),
// so every repetition streams from and to HBM. A kernel's bandwidth counts the bytes it must read plus
// the bytes it must write; the ratio to the copy bandwidth (also read + write) is its efficiency.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <flashkv/numeric/kv_records.hpp>

#include "cuda_check.cuh"
#include "gpu_bench.cuh"
#include "kv_quant.cuh"

namespace {

using flashkv::bench::DeviceBuffer;

constexpr const char* kProgram = "bench_kv_quant";
constexpr int64_t kTotalChannels = int64_t{1} << 31;

using QuantizeF32 = void (*)(const float*, int64_t, int, uint8_t*, cudaStream_t);
using QuantizeBf16 = void (*)(const uint16_t*, int64_t, int, uint8_t*, cudaStream_t);
using Dequantize = void (*)(const uint8_t*, int64_t, int, float*, cudaStream_t);

struct RecordKind {
  const char* name;
  int channels;
  size_t (*record_bytes)(int);
  QuantizeF32 quantize_f32;
  QuantizeBf16 quantize_bf16;
  Dequantize dequantize;
};

size_t fp8_bytes(int c) {
  return flashkv::numeric::fp8_row_bytes(c);
}
size_t nvfp4_bytes(int c) {
  return flashkv::numeric::nvfp4_entry_bytes(c);
}
size_t mxfp4_bytes(int c) {
  return flashkv::numeric::mxfp4_key_bytes(c);
}

// The official shapes: 512-channel window rows and global entries, 128-channel index keys.
const RecordKind kKinds[] = {
    {"fp8_row", 512, fp8_bytes, flashkv::cuda::quantize_fp8_rows, flashkv::cuda::quantize_fp8_rows_bf16,
     flashkv::cuda::dequantize_fp8_rows},
    {"nvfp4_entry", 512, nvfp4_bytes, flashkv::cuda::quantize_nvfp4_entries,
     flashkv::cuda::quantize_nvfp4_entries_bf16, flashkv::cuda::dequantize_nvfp4_entries},
    {"mxfp4_key", 128, mxfp4_bytes, flashkv::cuda::quantize_mxfp4_keys,
     flashkv::cuda::quantize_mxfp4_keys_bf16, flashkv::cuda::dequantize_mxfp4_keys},
};

struct Buffers {
  DeviceBuffer f32{static_cast<size_t>(kTotalChannels) * 4};
  DeviceBuffer bf16{static_cast<size_t>(kTotalChannels) * 2};
  DeviceBuffer out_f32{static_cast<size_t>(kTotalChannels) * 4};
  DeviceBuffer records{static_cast<size_t>(kTotalChannels) / 32 * 33};  // the largest: FP8 rows
};

void report(const std::string& name, double bytes, double ms, double copy_gbs) {
  const double gbs = flashkv::bench::gb_per_s(bytes, ms);
  flashkv::bench::print_result(kProgram, name, gbs, "GB/s", gbs / copy_gbs);
}

void bench_kind(const RecordKind& kind, Buffers& buffers, double copy_gbs, cudaStream_t stream) {
  const int c = kind.channels;
  const int64_t n = kTotalChannels / c;
  const auto rows = static_cast<double>(n);
  const double record_bytes = rows * static_cast<double>(kind.record_bytes(c));
  const double row_elements = rows * c;
  uint8_t* records = buffers.records.as<uint8_t>();

  double ms = flashkv::bench::median_ms(
      stream, [&] { kind.quantize_f32(buffers.f32.as<float>(), n, c, records, stream); });
  report(std::string("quantize_") + kind.name + "_f32", row_elements * 4 + record_bytes, ms, copy_gbs);

  ms = flashkv::bench::median_ms(
      stream, [&] { kind.quantize_bf16(buffers.bf16.as<uint16_t>(), n, c, records, stream); });
  report(std::string("quantize_") + kind.name + "_bf16", row_elements * 2 + record_bytes, ms, copy_gbs);

  ms = flashkv::bench::median_ms(
      stream, [&] { kind.dequantize(records, n, c, buffers.out_f32.as<float>(), stream); });
  report(std::string("dequantize_") + kind.name + "_f32", record_bytes + row_elements * 4, ms, copy_gbs);
}

}  // namespace

int main() {
  try {
    flashkv::bench::print_device_header(kProgram);
    cudaStream_t stream{};
    FKV_CUDA_CHECK(cudaStreamCreate(&stream));
    Buffers buffers;
    // Activation-like magnitudes: most blocks well above every scale floor.
    flashkv::bench::fill_random(buffers.f32.as<float>(), kTotalChannels, 11, 4.0f, stream);
    flashkv::bench::fill_random(buffers.bf16.as<uint16_t>(), kTotalChannels, 12, 4.0f, stream);

    std::printf("  %-34s %10s %-7s %7s\n", "kernel (2^31 channels)", "value", "unit", "of copy");
    const double copy_gbs = flashkv::bench::copy_bandwidth_gbs(size_t{4} << 30, stream);
    flashkv::bench::print_result(kProgram, "d2d_copy_4GiB", copy_gbs, "GB/s", 1.0);
    for (const RecordKind& kind : kKinds) bench_kind(kind, buffers, copy_gbs, stream);

    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
