// Where the time of one top-k call goes (kernels/topk.cu compiled into this program with
// FLASHKV_TOPK_PHASES): thread 0 of the first CTA of each kernel stamps the global timer and the SM clock
// at the phase boundaries; printed per shape as the median over a few calls, in ns from the first stamp of
// the call (the global timer) and in SM cycles within a kernel (the clock). The library build has no stamps;
// the timed numbers are bench_topk's. Phases: short kernel 0 start, 1 loads + max, 2 guess L, 3 flags
// counted, 4 candidates placed, 5 radix passes, 7 compaction counts scanned, 8 selected indices out, 6 end;
// long rows in two launches: filter CTA (0, 0) 10 start, 11 L known (its sample taken), 12 end; merge CTA 0
// 13 past its wait (the filter grid done), 14 gathered, 5 radix passes, 7, 8 as in the short kernel, 15 end.
// Each shape's call is also timed (bench_topk's method) in the same run. Session 6 timed rows of up to 16
// chunks as one thread-block cluster (one launch, the candidates meeting in the leader CTA through
// distributed shared memory): ~0.5 us faster at 4 chunks in two rounds, tied in the third, 2-3 us slower at
// 16 chunks (cluster barriers ~0.3 us each, the leader waiting for the slowest CTA); removed in session 7.
// Session 7 timed a one-launch variant (the row's last filter CTA merging, found by an atomic ticket) against
// the two launches: slower on every shape (s7r1, BF16 256K b1 16.1 vs 14.3 us, 1M b1 20.1 vs 15.4): the
// ticket (fences and an atomic) took 1.1 us, as long as the grid wait it replaced, and the merge ran slower
// inside the filter kernel (gather 2.7 vs 2.1 us at 256K, 4.9 vs 2.2 at 1M); removed.
#define FLASHKV_TOPK_PHASES 1
// Own names for the entry points, so this copy never meets the library's.
#define top_k_rows top_k_rows_phases
#define top_k_workspace_bytes top_k_workspace_bytes_phases
#include "topk.cu"
#undef top_k_rows
#undef top_k_workspace_bytes

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "gpu_bench.cuh"

namespace {

constexpr const char* kProgram = "bench_topk_phases";
constexpr int64_t kK = 512;
constexpr int kCalls = 9;
constexpr int kSlots = 32;

namespace fb = flashkv::bench;
namespace fc = flashkv::cuda;

using Stamps = std::array<std::array<unsigned long long, 2>, kSlots>;

Stamps traced_call(fc::ScoreType type, int64_t rows, int64_t n, const void* scores, int32_t* out,
                   const fb::DeviceBuffer& workspace) {
  Stamps stamps{};
  FKV_CUDA_CHECK(cudaMemcpyToSymbol(fc::topk_phase_stamps, stamps.data(), sizeof(stamps)));
  fc::top_k_rows_phases(scores, type, rows, n, kK, out, workspace.as<void>(), workspace.bytes(), nullptr);
  FKV_CUDA_CHECK(cudaDeviceSynchronize());
  FKV_CUDA_CHECK(cudaMemcpyFromSymbol(stamps.data(), fc::topk_phase_stamps, sizeof(stamps)));
  return stamps;
}

// The first stamp of the kernel that stamps `slot` (slots 5, 7, 8 are the short or merge kernel's).
int kernel_origin(int slot, const Stamps& stamps) {
  if (slot <= 8) return stamps[0][0] != 0 ? 0 : 13;
  return slot <= 12 ? 10 : 13;
}

unsigned long long median(std::vector<unsigned long long> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void trace_shape(fc::ScoreType type, int64_t n, int64_t rows, const void* scores, int32_t* out) {
  const std::string name = std::string("topk512_") + (type == fc::ScoreType::kFp32 ? "fp32" : "bf16") + "_n" +
                           std::to_string(n) + "_b" + std::to_string(rows);
  if (!fb::selected(name)) return;
  fb::DeviceBuffer workspace(std::max<size_t>(1, fc::top_k_workspace_bytes_phases(rows, n, kK)));
  for (int i = 0; i < 3; ++i) traced_call(type, rows, n, scores, out, workspace);  // warm-up
  std::vector<Stamps> calls;
  for (int i = 0; i < kCalls; ++i) calls.push_back(traced_call(type, rows, n, scores, out, workspace));
  const double ms = fb::median_ms(nullptr, [&] {
    fc::top_k_rows_phases(scores, type, rows, n, kK, out, workspace.as<void>(), workspace.bytes(), nullptr);
  });
  std::printf("  %-40s timed %.1f us\n", name.c_str(), ms * 1e3);
  std::printf("  %-40s", name.c_str());
  for (int slot = 0; slot < kSlots; ++slot) {
    if (calls[0][slot][0] == 0) continue;
    std::vector<unsigned long long> ns, cycles;
    for (const Stamps& s : calls) {
      unsigned long long first = ~0ull;
      for (const auto& stamp : s)
        if (stamp[0] != 0) first = std::min(first, stamp[0]);
      ns.push_back(s[slot][0] - first);
      cycles.push_back(s[slot][1] - s[kernel_origin(slot, s)][1]);
    }
    std::printf(" %d:%lluns/%llucy", slot, median(ns), median(cycles));
  }
  std::printf("\n");
}

}  // namespace

int main() {
  try {
    fb::print_device_header(kProgram);
    std::printf(
        "  phase stamps (slot:ns from the call's first stamp/SM cycles from the kernel's first stamp)\n");
    cudaStream_t stream{};
    FKV_CUDA_CHECK(cudaStreamCreate(&stream));
    constexpr int64_t kMaxElements = 64 * 1024 * 1024;
    fb::DeviceBuffer f32(kMaxElements * 4), bf16(kMaxElements * 2), out(64 * kK * 4);
    fb::fill_random(f32.as<float>(), kMaxElements, 21, 1.0f, stream);
    fb::fill_random(bf16.as<uint16_t>(), kMaxElements, 22, 1.0f, stream);
    FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
    constexpr std::array<std::array<int64_t, 2>, 13> kShapes = {{{16384, 1},
                                                                 {16384, 4},
                                                                 {65536, 1},
                                                                 {65536, 4},
                                                                 {262144, 1},
                                                                 {262144, 4},
                                                                 {65536, 64},
                                                                 {262144, 16},
                                                                 {1048576, 1},
                                                                 {1048576, 4},
                                                                 {1048576, 16},
                                                                 {1048576, 64},
                                                                 {262144, 64}}};
    for (const fc::ScoreType type : {fc::ScoreType::kBf16, fc::ScoreType::kFp32}) {
      for (const auto& [n, rows] : kShapes) {
        const void* scores = type == fc::ScoreType::kFp32 ? f32.as<void>() : bf16.as<void>();
        trace_shape(type, n, rows, scores, out.as<int32_t>());
      }
    }
    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
