// Input rows of the KV write kernels through a per-warp cp.async ring in shared memory, and the grid-stride
// row loop that hands each row's channels to a kernel's body (for_each_input_row; kv_write_lanes.cuh has the
// lane layout). A row is one long dependent chain per warp, so the next rows' loads must be in flight while
// it runs, without holding registers: hence the ring (sizes and measurements below).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv_write_lanes.cuh"

namespace flashkv::cuda {
namespace {  // internal linkage: see kv_write_lanes.cuh

// A lane's 16 input channels as loaded (64 bytes of fp32, or 32 bytes of BF16 in q[0..1]).
struct RawChunk {
  uint4 q[4];
};

// Each warp copies its next row groups into its slots of a shared-memory ring (cp.async, 16 B per lane and
// copy, L2 only, 512 contiguous bytes per instruction), so kRingUnits·16 B per lane (4 BF16 rows or 2 fp32
// rows at 8 units) are in flight while the current row is processed, without holding registers: 32 KB per
// 256-thread CTA, 128 KB per SM at 4 CTAs (Little's law at ~4 TB/s and ~1-2 us asks for 32-64 KB per SM).
// GPU round 2 had each lane copy its own 32 bytes: every instruction then touched every sector of the
// group half, doubling the L2 requests (load + FP8 + store alone fell from 69.5% to 57.5% of copy).
// 16-byte units per lane: 8 (32 KB per CTA) except for rows of 32 or 64 channels, whose RoPE tables take
// 16 KB and leave room for 4 under the 48 KB of static shared memory.
template <int kDim>
constexpr int kRingUnits = kDim <= 64 ? 4 : 8;

// Each warp's slots: kUnits rows of 32 16-byte columns (units[u][warp·32 + column]).
template <int kUnits>
struct InputRing {
  uint4 units[kUnits][kThreads];
};

__device__ void cp_async16(uint4* shared_dst, const void* global_src) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(global_src) : "memory");
}
__device__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

__device__ void unpack_chunk(const RawChunk& raw, RowType type, float (&x)[kChannels]) {
  if (type == RowType::kBf16) {
    const uint32_t w[8] = {raw.q[0].x, raw.q[0].y, raw.q[0].z, raw.q[0].w,
                           raw.q[1].x, raw.q[1].y, raw.q[1].z, raw.q[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[2 * i] = __uint_as_float(w[i] << 16);
      x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[4 * i] = __uint_as_float(raw.q[i].x), x[4 * i + 1] = __uint_as_float(raw.q[i].y);
      x[4 * i + 2] = __uint_as_float(raw.q[i].z), x[4 * i + 3] = __uint_as_float(raw.q[i].w);
    }
  }
}

// A lane's channels again, for the rare paths (x need not stay live across the row): all sixteen, or channels
// 4g … 4g+3 (group(g)). From the row's ring slot, which holds it until the row is done (SlotReload), or a
// copy of values kept in registers (ValueReload: the pooled ratio-2 latents). group() reads shared memory
// directly: the RMSNorm fallback kept the reloaded row in local memory (to stay lean in registers) and its
// dependent loads stalled the window kernel 8% of its time in the s6 profile (five per call, each a
// round trip the store had not made to L1).
template <bool kBf16>
struct SlotReload {
  static constexpr int kUnitsPerRow = kBf16 ? 2 : 4;  // 16-byte units per lane and row
  const uint4* units;                                 // the slot
  int read_unit;                                      // this lane's unit u at units[read_unit ^ u]
  __device__ void operator()(float (&again)[kChannels]) const {
    RawChunk raw;
#pragma unroll
    for (int u = 0; u < 4; ++u) raw.q[u] = u < kUnitsPerRow ? units[read_unit ^ u] : make_uint4(0, 0, 0, 0);
    unpack_chunk(raw, kBf16 ? RowType::kBf16 : RowType::kFp32, again);
  }
  __device__ void group(int g, float (&y)[4]) const {
    if constexpr (kBf16) {  // words 2g, 2g + 1 of the lane's eight: half of unit g / 2
      const uint2 w = reinterpret_cast<const uint2*>(units + (read_unit ^ (g >> 1)))[g & 1];
      y[0] = __uint_as_float(w.x << 16), y[1] = __uint_as_float(w.x & 0xffff0000u);
      y[2] = __uint_as_float(w.y << 16), y[3] = __uint_as_float(w.y & 0xffff0000u);
    } else {
      const uint4 q = units[read_unit ^ g];
      y[0] = __uint_as_float(q.x), y[1] = __uint_as_float(q.y), y[2] = __uint_as_float(q.z),
      y[3] = __uint_as_float(q.w);
    }
  }
};
struct ValueReload {
  float x[kChannels];
  __device__ void operator()(float (&again)[kChannels]) const {
#pragma unroll
    for (int i = 0; i < kChannels; ++i) again[i] = x[i];
  }
  __device__ void group(int g, float (&y)[4]) const {
#pragma unroll
    for (int k = 0; k < 4; ++k) y[k] = x[4 * g + k];
  }
};

// Grid-stride loop over rows [0, n) in steps of one row per lane group (the trip count is warp-uniform; idle
// groups redo row n − 1 without storing): the body gets the row's channels, read through the warp's ring
// (its next row groups are in flight meanwhile); a slot is refilled after the body.
// The input type is a template parameter: the ring's unit counts and addresses are then constants.
template <int kDim, bool kBf16, int kUnits, typename Body>
__device__ void for_each_typed_input_row(int64_t n, const void* data, InputRing<kUnits>& ring,
                                         const Body& body) {
  constexpr int kRowsPerWarp = RowLanes<kDim>::kRowsPerWarp;
  constexpr int kLanes = RowLanes<kDim>::kLanes;
  constexpr int kUnitsPerRow = kBf16 ? 2 : 4;    // 16-byte units per lane and row
  constexpr int kDepth = kUnits / kUnitsPerRow;  // 1, 2 or 4
  constexpr size_t kElementBytes = kBf16 ? 2 : 4;
  const RowLanes<kDim> lanes;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int64_t step = warps * kRowsPerWarp;
  int64_t base = warp * kRowsPerWarp;
  if (base >= n) return;  // warp-uniform
  uint4* const warp_ring = &ring.units[0][threadIdx.x - lane];
  // Unit j (16 B) of a row group: owner lane j / kUnitsPerRow; in the slot, ring row j / 32, column j % 32
  // swizzled so that both the copies (consecutive j per instruction) and the owners' reads (j =
  // lane·kUnitsPerRow + v) hit 8 different 16-byte bank groups per quarter warp.
  // This lane's unit u in slot 0 (slot s: + s·kUnitsPerRow·kThreads) is read_unit ^ u: j = lane·kUnitsPerRow
  // + u only sets low bits that lane·kUnitsPerRow leaves clear (kUnitsPerRow is 2 or 4), and the swizzle
  // only flips bits 0-1 by j's bits 3-4. One register for the kernel: the two or four offsets were
  // recomputed from the thread index in every row (~13 instructions; ptxas rematerializes them under the
  // 64-register cap, which the opaque move below prevents: 6 instructions per row to address the slot).
  const int read_unit = [&] {
    const int j = lane * kUnitsPerRow;
    const int column = j % 32;
    int unit = (j / 32) * kThreads + (column ^ ((column >> 3) & 3));
    asm volatile("mov.b32 %0, %0;" : "+r"(unit));  // not recomputed in the loop
    return unit;
  }();
  // Copies the row group starting at `first` into `slot`, lane L taking units L, L + 32, …: each copy
  // instruction moves 512 contiguous bytes (rows past the end repeat row n − 1). Nothing when `first` is
  // past the end: the group is then empty, which keeps one group per slot for the wait counts.
  const int copy_column = lane ^ ((lane >> 3) & 3);  // where unit 32u + lane goes in its ring row
  const auto issue = [&](int64_t first, int slot) {
    if (first < n) {
      const auto* group =
          static_cast<const uint8_t*>(data) +
          static_cast<size_t>(first) * (kDim * kElementBytes);  // the group's rows back to back
      uint4* const dst = warp_ring + slot * kUnitsPerRow * kThreads + copy_column;
      if (kRowsPerWarp == 1 || n - first >= kRowsPerWarp) {
#pragma unroll
        for (int u = 0; u < kUnitsPerRow; ++u) cp_async16(dst + u * kThreads, group + 16 * (32 * u + lane));
      } else if constexpr (kRowsPerWarp > 1) {  // the last group: its idle rows repeat row n − 1
        const int rows_left = static_cast<int>(n - first);
#pragma unroll
        for (int u = 0; u < kUnitsPerRow; ++u) {
          const int j = 32 * u + lane;
          const int row_in_group = (j / kUnitsPerRow) / kLanes;  // of the owner lane j / kUnitsPerRow
          const int back = row_in_group >= rows_left ? row_in_group - rows_left + 1 : 0;
          cp_async16(dst + u * kThreads, group + 16 * j - static_cast<size_t>(back * kDim) * kElementBytes);
        }
      }
    }
    cp_async_commit();
  };
  for (int slot = 0; slot < kDepth; ++slot) issue(base + slot * step, slot);
  for (int slot = 0; base < n; base += step) {
    cp_async_wait<kDepth - 1>();
    __syncwarp();  // every lane's copies of this slot are visible to the warp
    // the row's channels, and again for the rare paths
    const SlotReload<kBf16> reload{warp_ring + slot * kUnitsPerRow * kThreads, read_unit};
    float x[kChannels];
    reload(x);
    const int64_t row = base + lanes.row_in_warp;
    body(x, reload, row < n ? row : n - 1, row < n, lanes);  // idle groups redo the last row, no stores
    __syncwarp();  // every lane has read the slot before it is refilled
    issue(base + kDepth * step, slot);
    slot = slot + 1 == kDepth ? 0 : slot + 1;
  }
  cp_async_wait<0>();
}

// for_each_typed_input_row for the run-time input type (the body is compiled for both).
template <int kDim, int kUnits, typename Body>
__device__ void for_each_input_row(int64_t n, const DeviceRows& input, InputRing<kUnits>& ring,
                                   const Body& body) {
  if (input.type == RowType::kBf16) {
    for_each_typed_input_row<kDim, true>(n, input.data, ring, body);
  } else {
    for_each_typed_input_row<kDim, false>(n, input.data, ring, body);
  }
}

}  // namespace
}  // namespace flashkv::cuda
