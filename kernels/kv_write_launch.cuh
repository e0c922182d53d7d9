// Launch glue of the KV write kernels (kv_write_window.cu, kv_write_entries.cu, kv_write_index_keys.cu):
// the register caps each kernel is compiled for, the grid (at most one wave of resident CTAs: the kernels
// stride over their rows) and the dispatch of the run-time dim and numerics to a compiled kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv_write.cuh"
#include "kv_write_lanes.cuh"

namespace flashkv::cuda {
namespace kv_write_launch {  // kv_write_launch.cu

// Resident CTAs of `kernel` on the current device, remembered per thread (the launch path of a decode step
// should not pay an occupancy query per call).
int resident_ctas(const void* kernel, size_t dynamic_shared);
// set_grid_limit_for_tests' limit; 0: none.
int grid_limit();

}  // namespace kv_write_launch
namespace {  // internal linkage: see kv_write_lanes.cuh

// Resident CTAs per SM the register allocation is capped for: a row is one long dependent chain, so
// throughput comes from warps in flight (GPU round 3: 96 registers, 16 warps/SM, latency-bound at 28% of
// copy).
// Window, key and ratio-1 kernels: <= 64 registers, 32 warps/SM. Until session 5 the fallback's register
// footprint made 64 spill in the row loop (s4r2: window 44.6% of copy at 80 registers vs 42.3% at 64); with
// the lean fallback (rms_norm_fallback) they fit 64 without spills (round s5r1 A/B at 256K rows, 64 vs 80
// vs 48 registers: window 46.9% / 44.2% / 43.5% of copy, keys 21.6 / 21.4 / 20.1, ratio 1 54.8 / 52.7).
// Clean rows (fp32 values, double angles) keep 3 CTAs: their double paths spill at 64.
template <bool kFaithful>
constexpr int kWindowCtasPerSm = kFaithful ? 4 : 3;
template <bool kFaithful>
constexpr int kCompressorCtasPerSm = kFaithful ? 4 : 3;
// Key kernels: as the window's. With the four pairs' cos/sin computed ahead of RMSNorm (rope_trig: twelve
// more live values) the key kernel spilled 56/108 B at 64 registers until the norm weights moved to shared
// memory (NormWeights), 4/12 B after that, none since its page lookup follows RMSNorm (session 8).
// s7r1/s7r2 A/B: 80 registers (3 CTAs) tied (25.5% of copy), 48 registers (5 CTAs, 20/32 B spilled) lost
// (24.9%), as did the window (53.1% vs 57.0%) and ratio 1 (60.2% vs 63.3%) at 48.
template <bool kFaithful>
constexpr int kKeyCtasPerSm = kFaithful ? 4 : 3;

// CTAs for `rows` rows: enough for every row, at most what is resident at once (the kernels stride).
template <typename Kernel>
int grid_for(Kernel kernel, int64_t rows, int rows_per_warp, size_t dynamic_shared = 0) {
  int64_t resident = kv_write_launch::resident_ctas(reinterpret_cast<const void*>(kernel), dynamic_shared);
  const int limit = kv_write_launch::grid_limit();
  if (limit > 0 && limit < resident) resident = limit;
  const int64_t rows_per_cta = static_cast<int64_t>(kThreads / 32) * rows_per_warp;
  const int64_t needed = (rows + rows_per_cta - 1) / rows_per_cta;
  return static_cast<int>(needed < resident ? needed : resident);
}

// Calls launch(kernel-of<kDim, kFaithful>, rows_per_warp) for the run-time dim and numerics.
template <template <int, bool> class Kernels, typename Launch>
void dispatch(int dim, KvNumerics numerics, const Launch& launch) {
  const bool faithful = numerics == KvNumerics::kFaithful;
  switch (dim) {
    case 32:
      return faithful ? launch(Kernels<32, true>::get(), 16) : launch(Kernels<32, false>::get(), 16);
    case 64:
      return faithful ? launch(Kernels<64, true>::get(), 8) : launch(Kernels<64, false>::get(), 8);
    case 128:
      return faithful ? launch(Kernels<128, true>::get(), 4) : launch(Kernels<128, false>::get(), 4);
    case 256:
      return faithful ? launch(Kernels<256, true>::get(), 2) : launch(Kernels<256, false>::get(), 2);
    default:
      return faithful ? launch(Kernels<512, true>::get(), 1) : launch(Kernels<512, false>::get(), 1);
  }
}

}  // namespace
}  // namespace flashkv::cuda
