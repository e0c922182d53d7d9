// Throughput of the KV record kernels (kernels/kv_quant.cuh) against the device-to-device copy
// bandwidth measured in the same run. Sizes are far above the L2 (2^31 channels: 8 GiB of fp32 rows),
// so every repetition streams from and to HBM. A kernel's bandwidth counts the bytes it must read plus
// the bytes it must write; the ratio to the copy bandwidth (also read + write) is its efficiency.
//
// Every kernel variant (flashkv::cuda::KvKernelVariant) is timed in the same run and its output compared
// byte for byte with the register-tile variant's (itself checked against the host codecs by the GPU
// tests); the plain kernel name is the launcher's default (kAuto). A store-only kernel and cudaMemset
// give the write-only ceiling that bounds the write-heavy dequantizers.
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

using flashkv::cuda::KvKernelVariant;
using QuantizeF32 = void (*)(const float*, int64_t, int, uint8_t*, cudaStream_t, KvKernelVariant);
using QuantizeBf16 = void (*)(const uint16_t*, int64_t, int, uint8_t*, cudaStream_t, KvKernelVariant);
using Dequantize = void (*)(const uint8_t*, int64_t, int, float*, cudaStream_t, KvKernelVariant);

struct NamedVariant {
  KvKernelVariant variant;
  const char* suffix;  // appended to the kernel name; empty for the default
};

constexpr NamedVariant kVariants[] = {
    {KvKernelVariant::kAuto, ""},
    {KvKernelVariant::kRegisterTiles, "[register_tiles]"},
    {KvKernelVariant::kStreamingStores, "[streaming_stores]"},
    {KvKernelVariant::kBulkSmall, "[bulk_small]"},
    {KvKernelVariant::kBulkMedium, "[bulk_medium]"},
    {KvKernelVariant::kBulkLarge, "[bulk_large]"},
};

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
  DeviceBuffer out_f32_reference{static_cast<size_t>(kTotalChannels) * 4};
  DeviceBuffer records{static_cast<size_t>(kTotalChannels) / 32 * 33};  // the largest: FP8 rows
  DeviceBuffer records_reference{static_cast<size_t>(kTotalChannels) / 32 * 33};
  DeviceBuffer mismatches{sizeof(unsigned long long)};
};

__global__ void count_mismatches(const uint8_t* a, const uint8_t* b, size_t bytes,
                                 unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < bytes;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    local += a[i] != b[i];
  }
  if (local != 0) atomicAdd(count, local);
}

// Bytes of `a` and `b` (device, `bytes` long) that differ.
unsigned long long mismatched_bytes(Buffers& buffers, const void* a, const void* b, size_t bytes,
                                    cudaStream_t stream) {
  auto* count = buffers.mismatches.as<unsigned long long>();
  FKV_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof *count, stream));
  count_mismatches<<<4096, 256, 0, stream>>>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
                                             bytes, count);
  FKV_CUDA_CHECK_LAUNCH();
  unsigned long long host = 0;
  FKV_CUDA_CHECK(cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, stream));
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// Write-only ceiling: 16-byte stores of a non-zero pattern, grid-striding over `out`.
__global__ void store_only(float4* out, size_t count) {
  const float4 value = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

void report(const std::string& name, double bytes, double ms, double copy_gbs) {
  const double gbs = flashkv::bench::gb_per_s(bytes, ms);
  flashkv::bench::print_result(kProgram, name, gbs, "GB/s", gbs / copy_gbs);
}

// Times every variant of one launcher and checks its output against the register-tile variant's.
// `run(variant, out)` launches into `out`; `reference` receives the register-tile output first.
template <typename Run>
void bench_variants(Buffers& buffers, const std::string& name, double bytes_moved, void* out, void* reference,
                    size_t out_bytes, double copy_gbs, cudaStream_t stream, Run&& run) {
  run(KvKernelVariant::kRegisterTiles, reference);
  for (const NamedVariant& v : kVariants) {
    const double ms = flashkv::bench::median_ms(stream, [&] { run(v.variant, out); });
    report(name + v.suffix, bytes_moved, ms, copy_gbs);
    const unsigned long long bad = mismatched_bytes(buffers, out, reference, out_bytes, stream);
    if (bad != 0) {
      std::printf("  MISMATCH %s%s: %llu bytes differ from the register-tile variant\n", name.c_str(),
                  v.suffix, bad);
    }
  }
}

void bench_kind(const RecordKind& kind, Buffers& buffers, double copy_gbs, cudaStream_t stream) {
  const int c = kind.channels;
  const int64_t n = kTotalChannels / c;
  const auto rows = static_cast<double>(n);
  const size_t record_total = static_cast<size_t>(n) * kind.record_bytes(c);
  const auto record_bytes = static_cast<double>(record_total);
  const double row_elements = rows * c;
  const size_t out_total = static_cast<size_t>(kTotalChannels) * 4;

  bench_variants(buffers, std::string("quantize_") + kind.name + "_f32", row_elements * 4 + record_bytes,
                 buffers.records.as<void>(), buffers.records_reference.as<void>(), record_total, copy_gbs,
                 stream, [&](KvKernelVariant v, void* out) {
                   kind.quantize_f32(buffers.f32.as<float>(), n, c, static_cast<uint8_t*>(out), stream, v);
                 });
  bench_variants(buffers, std::string("quantize_") + kind.name + "_bf16", row_elements * 2 + record_bytes,
                 buffers.records.as<void>(), buffers.records_reference.as<void>(), record_total, copy_gbs,
                 stream, [&](KvKernelVariant v, void* out) {
                   kind.quantize_bf16(buffers.bf16.as<uint16_t>(), n, c, static_cast<uint8_t*>(out), stream,
                                      v);
                 });
  const uint8_t* records = buffers.records_reference.as<uint8_t>();
  bench_variants(buffers, std::string("dequantize_") + kind.name + "_f32", record_bytes + row_elements * 4,
                 buffers.out_f32.as<void>(), buffers.out_f32_reference.as<void>(), out_total, copy_gbs,
                 stream, [&](KvKernelVariant v, void* out) {
                   kind.dequantize(records, n, c, static_cast<float*>(out), stream, v);
                 });
}

// The write-only ceiling over the 8 GiB output buffer: a 16-byte store kernel and cudaMemsetAsync.
void bench_write_ceiling(Buffers& buffers, double copy_gbs, cudaStream_t stream) {
  const size_t bytes = buffers.out_f32.bytes();
  double ms = flashkv::bench::median_ms(stream, [&] {
    store_only<<<132 * 8, 256, 0, stream>>>(buffers.out_f32.as<float4>(), bytes / 16);
    FKV_CUDA_CHECK_LAUNCH();
  });
  report("store_only_8GiB", static_cast<double>(bytes), ms, copy_gbs);
  ms = flashkv::bench::median_ms(
      stream, [&] { FKV_CUDA_CHECK(cudaMemsetAsync(buffers.out_f32.as<void>(), 0x3f, bytes, stream)); });
  report("memset_8GiB", static_cast<double>(bytes), ms, copy_gbs);
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
    bench_write_ceiling(buffers, copy_gbs, stream);
    for (const RecordKind& kind : kKinds) bench_kind(kind, buffers, copy_gbs, stream);

    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
