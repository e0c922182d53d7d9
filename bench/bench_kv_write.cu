// Throughput of the fused KV write path (kernels/kv_write.cuh), faithful numerics, the V4.1 shapes (dim 512,
// rope 64, index keys 128), for 1 … 256K rows per launch, against the device-to-device copy bandwidth
// measured in the same run. A launch's bytes are what it must read plus what it must write (input rows,
// records, the emitted latents; the weights and RoPE table are a few KB); the ratio to the copy bandwidth
// (read + write) is its efficiency. Inputs rotate over buffer sets of >= 512 MB in all, so small launches
// stream from HBM rather than from the 50 MB L2; below ~4K rows a launch is latency-bound (one wave of
// warps), which the table shows.
//   window      kv BF16 [n, 512] -> FP8 records (528 B)                                read 1024, write 528
//   per row entries r=2 v, g fp32 [n, 512] -> n/2 NVFP4 entries (288 B) + BF16 latents        read 4096,
//   write 656 per token entries r=1 latent BF16 [n, 512] -> n NVFP4 entries + BF16 latents read 1024, write
//   1312 per token index keys  key BF16 [n, 128] -> MXFP4 records (68 B)                              read
//   256, write 68 per row
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.cuh"
#include "gpu_bench.cuh"
#include "kv_write.cuh"

namespace {

using flashkv::bench::DeviceBuffer;
namespace fc = flashkv::cuda;

constexpr const char* kProgram = "bench_kv_write";
constexpr int kDim = 512;
constexpr int kKeyDim = 128;
constexpr int kRopeDim = 64;
// Positions deep into a long context (angles up to ~6e5 rad: realistic argument reduction for cos/sin); the
// entry and key numbers that follow from it (>= 300000) exceed every launch's count, as FlatPages needs.
constexpr int64_t kStart = 600000;
constexpr size_t kRotationBytes = size_t{512} << 20;  // inputs + outputs touched over one rotation

size_t round_up_256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Everything a launch reads and writes, `sets` times over, so consecutive repetitions touch different memory.
struct Buffers {
  int sets;
  size_t in_bytes;   // per set
  size_t out_bytes;  // per set
  DeviceBuffer in, out;
  Buffers(size_t in_total, size_t out_total)
      : sets(static_cast<int>(std::clamp<size_t>(kRotationBytes / (in_total + out_total), 1, 64))),
        in_bytes(round_up_256(in_total)),
        out_bytes(round_up_256(out_total)),
        in(in_bytes * static_cast<size_t>(sets)),
        out(out_bytes * static_cast<size_t>(sets)) {}
  uint8_t* input(int rep) const { return in.as<uint8_t>() + in_bytes * static_cast<size_t>(rep % sets); }
  uint8_t* output(int rep) const { return out.as<uint8_t>() + out_bytes * static_cast<size_t>(rep % sets); }
};

struct Common {
  DeviceBuffer norm{kDim * sizeof(float)};
  DeviceBuffer key_norm{kKeyDim * sizeof(float)};
  DeviceBuffer freqs{kRopeDim / 2 * sizeof(double)};
  DeviceBuffer pending{2 * kDim * sizeof(float)};
  explicit Common(cudaStream_t stream) {
    flashkv::bench::fill_random(norm.as<float>(), kDim, 11, 1.0f, stream);
    flashkv::bench::fill_random(key_norm.as<float>(), kKeyDim, 12, 1.0f, stream);
    flashkv::bench::fill_random(pending.as<float>(), 2 * kDim, 13, 1.0f, stream);
    std::vector<double> f(kRopeDim / 2);
    // the compress RoPE's frequencies theta^(-2i/64), theta = 160000, as fp32 (YaRN's blend aside)
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] = static_cast<float>(std::pow(160000.0, -2.0 * static_cast<double>(i) / kRopeDim));
    }
    FKV_CUDA_CHECK(
        cudaMemcpy(freqs.as<double>(), f.data(), f.size() * sizeof(double), cudaMemcpyHostToDevice));
  }
  fc::RopeParams rope() const { return {freqs.as<double>(), kRopeDim}; }
};

// Records first … first+count−1 back to back from `out`: pages of `first` records, the second of which (the
// one holding record `first`) is page 0 at `out`; count <= first.
struct FlatPages {
  DeviceBuffer table{2 * sizeof(int32_t)};
  FlatPages() { FKV_CUDA_CHECK(cudaMemset(table.as<int32_t>(), 0, 2 * sizeof(int32_t))); }
  fc::RecordPagesView view(uint8_t* out, int64_t first, size_t record_bytes) const {
    return {out, table.as<int32_t>(), first, static_cast<int64_t>(record_bytes)};
  }
};

void report(const std::string& name, int64_t rows, double bytes, double ms, double copy_gbs) {
  const double gbs = flashkv::bench::gb_per_s(bytes, ms);
  std::printf("  %-30s %8lld rows %9.3f ms %10.1f Mrows/s %8.1f GB/s %6.1f%% of copy\n", name.c_str(),
              static_cast<long long>(rows), ms, static_cast<double>(rows) / (ms * 1e-3) / 1e6, gbs,
              100.0 * gbs / copy_gbs);
  std::printf(
      "FKV_BENCH "
      "{\"program\":\"%s\",\"kernel\":\"%s\",\"rows\":%lld,\"ms\":%.5f,\"gbs\":%.1f,\"fraction\":%.4f}\n",
      kProgram, name.c_str(), static_cast<long long>(rows), ms, gbs, gbs / copy_gbs);
}

void bench_window(int64_t n, const Common& common, double copy_gbs, cudaStream_t stream,
                  const std::string& name = "window_row_fp8") {
  if (!flashkv::bench::selected(name + "_n" + std::to_string(n))) return;
  const size_t record = fc::window_record_bytes(fc::KvNumerics::kFaithful, kDim);
  const auto rows = static_cast<size_t>(n);
  Buffers b(rows * kDim * 2, rows * record);
  for (int s = 0; s < b.sets; ++s)
    flashkv::bench::fill_random(reinterpret_cast<uint16_t*>(b.input(s)), n * kDim, 100 + s, 2.0f, stream);
  int rep = 0;
  const double ms = flashkv::bench::median_ms(stream, [&] {
    fc::WindowWriteArgs a;
    a.kv = {b.input(rep), fc::RowType::kBf16};
    a.n = n;
    a.dim = kDim;
    a.start = kStart;
    a.norm_weight = common.norm.as<float>();
    a.eps = 1e-20;
    a.rope = common.rope();
    a.records = b.output(rep++);
    fc::write_window_rows(a, stream);
  });
  report(name, n, static_cast<double>(n) * static_cast<double>(kDim * 2 + record), ms, copy_gbs);
}

void bench_entries(int ratio, int64_t n, const Common& common, double copy_gbs, cudaStream_t stream,
                   const std::string& name = "") {
  const std::string label = !name.empty() ? name
                            : ratio == 2  ? "entries_ratio2_nvfp4"
                                          : "entries_ratio1_nvfp4";
  if (!flashkv::bench::selected(label + "_n" + std::to_string(n))) return;
  const size_t record = fc::entry_record_bytes(fc::KvNumerics::kFaithful, kDim);
  const size_t in_per_token = ratio == 2 ? 2 * kDim * sizeof(float) : kDim * 2;
  const int64_t entries = n / ratio;
  const auto count = static_cast<size_t>(entries);
  Buffers b(static_cast<size_t>(n) * in_per_token, round_up_256(count * record) + count * kDim * 2);
  FlatPages pages;
  for (int s = 0; s < b.sets; ++s) {
    if (ratio == 2) {
      flashkv::bench::fill_random(reinterpret_cast<float*>(b.input(s)), 2 * n * kDim, 200 + s, 2.0f, stream);
    } else {
      flashkv::bench::fill_random(reinterpret_cast<uint16_t*>(b.input(s)), n * kDim, 200 + s, 2.0f, stream);
    }
  }
  int rep = 0;
  const double ms = flashkv::bench::median_ms(stream, [&] {
    fc::CompressorWriteArgs a;
    a.ratio = ratio;
    a.start = kStart;
    a.n = n;
    a.dim = kDim;
    a.first_entry = kStart / ratio;
    const uint8_t* in = b.input(rep);
    a.v = {in, ratio == 2 ? fc::RowType::kFp32 : fc::RowType::kBf16};
    a.g = reinterpret_cast<const float*>(in) + n * kDim;
    a.pending = common.pending.as<float>();
    a.norm_weight = common.norm.as<float>();
    a.eps = 1e-20;
    a.rope = common.rope();
    uint8_t* out = b.output(rep++);
    a.entries = pages.view(out, kStart / ratio, record);
    a.latents = out + round_up_256(count * record);
    fc::write_compressed_entries(a, stream);
  });
  const double bytes = static_cast<double>(n) * static_cast<double>(in_per_token) +
                       static_cast<double>(entries) * (record + kDim * 2);
  report(label, n, bytes, ms, copy_gbs);
}

void bench_keys(int64_t n, const Common& common, double copy_gbs, cudaStream_t stream,
                const std::string& name = "index_key_mxfp4") {
  if (!flashkv::bench::selected(name + "_n" + std::to_string(n))) return;
  const size_t record = fc::key_record_bytes(fc::KvNumerics::kFaithful, kKeyDim);
  const auto rows = static_cast<size_t>(n);
  Buffers b(rows * kKeyDim * 2, rows * record);
  FlatPages pages;
  for (int s = 0; s < b.sets; ++s)
    flashkv::bench::fill_random(reinterpret_cast<uint16_t*>(b.input(s)), n * kKeyDim, 300 + s, 2.0f, stream);
  int rep = 0;
  const double ms = flashkv::bench::median_ms(stream, [&] {
    fc::IndexKeyWriteArgs a;
    a.keys = {b.input(rep), fc::RowType::kBf16};
    a.count = n;
    a.key_dim = kKeyDim;
    a.first_entry = kStart / 2;
    a.ratio = 2;
    a.norm_weight = common.key_norm.as<float>();
    a.eps = 1e-20;
    a.rope = common.rope();
    a.records = pages.view(b.output(rep++), kStart / 2, record);
    fc::write_index_keys(a, stream);
  });
  report(name, n, static_cast<double>(n) * static_cast<double>(kKeyDim * 2 + record), ms, copy_gbs);
}

}  // namespace

int main() try {
  flashkv::bench::print_device_header(kProgram);
  cudaStream_t stream{};
  FKV_CUDA_CHECK(cudaStreamCreate(&stream));
  const double copy_gbs = flashkv::bench::copy_bandwidth_gbs(size_t{1} << 30, stream);
  std::printf("  copy bandwidth (read + write, 1 GiB): %.1f GB/s\n", copy_gbs);
  std::printf("FKV_BENCH {\"program\":\"%s\",\"kernel\":\"copy\",\"gbs\":%.1f}\n", kProgram, copy_gbs);
  const Common common(stream);
  const int64_t sizes[] = {1, 16, 256, 4096, 16384, 65536, 262144};
  for (const int64_t n : sizes) bench_window(n, common, copy_gbs, stream);
  // Where the window kernel's time goes: the same launch with stages left out (records not valid).
  const std::pair<unsigned, const char*> ablations[] = {
      {1, "window[-rope]"}, {4, "window[-norm_fallback]"}, {8, "window[load+fp8+store only]"}};
  for (const auto& [stages, name] : ablations) {
    fc::set_window_ablation_for_bench(stages);
    bench_window(262144, common, copy_gbs, stream, name);
  }
  fc::set_window_ablation_for_bench(0);
  for (const int64_t n : sizes) bench_entries(2, std::max<int64_t>(2, n), common, copy_gbs, stream);
  for (const int64_t n : sizes) bench_entries(1, n, common, copy_gbs, stream);
  for (const int64_t n : sizes) bench_keys(n, common, copy_gbs, stream);
  FKV_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
  return 1;
}
