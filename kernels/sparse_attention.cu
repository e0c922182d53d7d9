// Sparse attention with sink on the tensor cores (see sparse_attention.cuh for the contract).
//
// One CTA (8 warps = 2 warpgroups) per query row, three phases over the row's keys in tiles of 64:
//   1. S = Q·Kᵀ: each warp keeps the A fragments of 16 heads x 256 channels of Q in registers (heads = M;
//      warpgroup g holds channels [256g, 256g + 256)); the two warpgroups add their half dot products in
//      shared memory. Raw logits of the whole row (64 heads x up to 640 keys, fp32) stay in shared memory.
//   2. Softmax per head row (one warp per 8 rows): max with the sink, fp32 sum, p = fp32(e / Z) rounded to
//      BF16, written in place over the first half of the row's fp32 logits.
//   3. O = P·V, V tiles dequantized again. mma.sync: each warp owns a 64 heads x 64 channels tile of O;
//      wgmma: each warpgroup owns 64 heads x 256 channels, P fragments loaded from shared memory.
// Key tiles are dequantized from their records straight into shared memory, in the 128-byte-swizzled layout
// that wgmma descriptors read (8 slabs of 64 channels; row k of a slab is 128 B, 16-byte chunk c stored at
// c ^ (k mod 8)); the same layout is K-major for Q·Kᵀ and MN-major for P·V, and gives conflict-free ldmatrix.
// The records of the next tile are loaded into registers while the current one is multiplied.
// kOnline (online_attention_kernel, below) is one pass instead of three: each tile decoded once, online
// softmax.
#include "sparse_attention.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#include <flashkv/numeric/scalar_codecs.hpp>

#include "cuda_check.cuh"
#include "kv_element_codecs.cuh"
#include "sparse_attention_args.hpp"

namespace flashkv::cuda {
namespace {

constexpr int kHeads = kSparseAttentionHeads;
constexpr int kDim = kSparseAttentionDim;
constexpr int kTileKeys = 64;
constexpr int kThreads = 256;
constexpr int kFp8RecordBytes = kDim + kDim / 32;               // 528
constexpr int kNvfp4RecordBytes = kDim / 2 + kDim / 16;         // 288
constexpr int kChunk = 16;                                      // channels per dequantization chunk
constexpr int kChunksPerKey = kDim / kChunk;                    // 32: one warp covers one key row
constexpr int kSlabBytes = kTileKeys * 128;                     // 64 keys x 64 channels of BF16
constexpr int kTileBytes = kSlabBytes * (kDim / 64);            // 64 KB
constexpr int kMaxTiles = kSparseAttentionMaxKeys / kTileKeys;  // 10

static_assert(kSparseAttentionMaxKeys % kTileKeys == 0, "whole tiles of keys");
static_assert(kTileKeys * kChunksPerKey % kThreads == 0, "chunks divide over the CTA");

// ---- small PTX wrappers
// ------------------------------------------------------------------------------------

__device__ inline uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void ldmatrix_x4(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ inline void ldmatrix_x4_trans(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d += a·b for one m16n8k16 tile, BF16 inputs, fp32 accumulators.
__device__ inline void mma_bf16(float* d, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- wgmma (sm_90a): D[64 x N] (+)= A[64 x 16] · B[16 x N], A from registers (per warp the m16n8k16 A
// fragment of its 16 rows), B through a shared-memory descriptor, fp32 accumulators in the m16n8k16 C layout
// repeated over N/8 column blocks. `accumulate` 0 overwrites D.

// Descriptor of a 128-byte-swizzled operand (layout type 1): start address, leading and stride byte offsets,
// all in 16-byte units. The swizzle pattern repeats every 1024 B, so tiles start 1024-byte aligned.
[[maybe_unused]] __device__ inline uint64_t sw128_descriptor(uint32_t address, uint32_t leading_bytes,
                                                             uint32_t stride_bytes) {
  return static_cast<uint64_t>((address >> 4) & 0x3FFFu) |
         (static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 62);
}

// `d` with its start-address field advanced by `units` (16-byte units: shared addresses are below 2^18,
// so the 14-bit field never carries into the next).
[[maybe_unused]] __device__ inline uint64_t descriptor_step(uint64_t d, uint32_t units) {
  return (d & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(d) + units);
}

// threadIdx.x / 128 as the compiler can see it is uniform over the warp (the result of a shuffle from lane
// 0), so what is computed from it (wgmma descriptors) stays on the uniform datapath instead of being moved
// there per instruction (R2UR).
__device__ inline int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

[[maybe_unused]] __device__ inline void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

[[maybe_unused]] __device__ inline void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

[[maybe_unused]] __device__ inline void wgmma_wait_all() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

// Orders this thread's ordinary shared-memory stores before later reads by the async proxy (wgmma).
[[maybe_unused]] __device__ inline void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Keeps the compiler from moving accesses of an accumulator across wgmma issue/wait.
[[maybe_unused]] __device__ inline void fence_register(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// The 32 fp32 accumulators of an m64n64 wgmma per thread: their operand list and their asm placeholders.
#define FKV_WGMMA_N64_REGISTERS                                            \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FKV_WGMMA_N64_ACCUMULATORS(d)                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),           \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
      "+f"(d[30]), "+f"(d[31])

[[maybe_unused]] __device__ inline void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4],
                                                        uint64_t b_desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" FKV_WGMMA_N64_REGISTERS
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
      "}\n"
      : FKV_WGMMA_N64_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate));
#else
  __trap();  // wgmma exists on sm_90a only; the kernels do not take this path elsewhere
#endif
}

// D[64 x 64] (+)= A·B with both operands through shared-memory descriptors (K-major, 128-byte swizzle).
[[maybe_unused]] __device__ inline void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc,
                                                           int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" FKV_WGMMA_N64_REGISTERS
      "}, %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : FKV_WGMMA_N64_ACCUMULATORS(d)
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
  __trap();  // wgmma exists on sm_90a only; the kernels do not take this path elsewhere
#endif
}

// The 128 fp32 accumulators of an m64n256 wgmma per thread: asm placeholders and operand list.
#define FKV_WGMMA_N256_REGISTERS                                                                 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                       \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "             \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "             \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "             \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define FKV_WGMMA_N256_ACCUMULATORS(d)                                                                      \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),           \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
      "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),            \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),            \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),            \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),            \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),            \
      "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),            \
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),            \
      "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),            \
      "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),            \
      "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),            \
      "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),     \
      "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),     \
      "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),     \
      "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// D[64 x 256] (+)= A·B, A from registers (per warp the m16n8k16 A fragment of its 16 rows), B MN-major by
// descriptor (transposed: tnspB = 1).
[[maybe_unused]] __device__ inline void wgmma_m64n256k16_tb(float (&d)[128], const uint32_t (&a)[4],
                                                            uint64_t b_desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" FKV_WGMMA_N256_REGISTERS
      "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n"
      "}\n"
      : FKV_WGMMA_N256_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate));
#else
  __trap();  // wgmma exists on sm_90a only; the kernels do not take this path elsewhere
#endif
}

__device__ inline uint32_t bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return bits;
}

__device__ inline uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 x, y;
  memcpy(&x, &a, sizeof a);
  memcpy(&y, &b, sizeof b);
  const __nv_bfloat162 product = __hmul2(x, y);
  uint32_t bits;
  memcpy(&bits, &product, sizeof bits);
  return bits;
}

// ---- shared-memory layout ------------------------------------------------------------------------------
// tile:   64 keys x 512 channels BF16 (64 KB, 1024-byte aligned) as 8 slabs of 64 channels; in a slab, key k
//         is a 128-byte row and its 16-byte chunk c (channels 8c..8c+7 of the slab) sits at c ^ (k mod 8).
// logits: [64 heads][key_stride] fp32, column t of row h stored at t ^ 8·(h mod 8) (accumulator stores of
//         8 rows then hit different banks). After phase 2 the first key_stride·2 bytes of row h hold P as
//         BF16 in 16-byte chunks, chunk j stored at j ^ (h mod 8) (conflict-free ldmatrix).
// keys:   [key_stride] record indices: the row's visible window rows, then its selected entries.
// counts: window keys, total keys.

struct Layout {
  uint8_t* tile;
  float* logits;
  int32_t* keys;
  int* counts;
  int key_stride;
  int prob_row_bytes;  // P row stride (P in place over the first half of each row's logits: key_stride·4)
  unsigned long long* profile;  // diagnostics (SparseAttentionArgs::profile) or null
};

// Diagnostics: clock64() of CTA 0's thread 0 into profile word `word` during key tile kMarkTile (the sixth:
// past the warm-up, inside the entries) of a pass, so the bench can split a tile's time into its stages.
constexpr int kMarkTile = 5;
__device__ inline void tile_mark(const Layout& s, int tile, int word) {
  if (s.profile == nullptr || tile != kMarkTile || blockIdx.x != 0 || threadIdx.x != 0) return;
  s.profile[word] = static_cast<unsigned long long>(clock64());
}

__device__ inline int logit_column(int h, int t) {
  return t ^ ((h & 7) << 3);
}

// Byte offset in the tile of channels [8·chunk, 8·chunk + 8) of `key` (chunk 0..63).
// A tile of kKeys keys has slabs of kKeys·128 bytes.
template <int kKeys = kTileKeys>
__device__ inline int tile_offset(int key, int chunk) {
  return (chunk >> 3) * (kKeys * 128) + key * 128 + (((chunk & 7) ^ (key & 7)) << 4);
}

__device__ inline uint32_t tile_chunk_address(const uint8_t* tile, int key, int chunk) {
  return smem_address(tile + tile_offset(key, chunk));
}

__device__ inline uint8_t* prob_chunk(const Layout& s, int h, int chunk) {
  return reinterpret_cast<uint8_t*>(s.logits) + static_cast<size_t>(h) * s.prob_row_bytes +
         ((chunk ^ (h & 7)) << 4);
}

// ---- key list
// ----------------------------------------------------------------------------------------------

// The row's list slots go in chunks of 32: the window list's chunks, then the selection's (each list's last
// chunk may be partial, so at most kKeyChunks), chunk c to warp c mod 8 in its round c / 8, one slot a lane.
constexpr int kKeyChunks = kSparseAttentionMaxKeys / 32 + 2;
constexpr int kKeyRounds = (kKeyChunks + kThreads / 32 - 1) / (kThreads / 32);
static_assert(kKeyChunks <= 32, "one lane per chunk in the scan");

struct KeySlots {
  int32_t v[kKeyRounds];  // this lane's slot of each of its warp's chunks (-1: none)
};

__device__ inline int window_chunks(const SparseAttentionArgs& args) {
  return (args.window_cap + 31) / 32;
}

// Issues this thread's loads of the row's list slots; nothing consumes them before compact_key_list, so the
// list's round trip overlaps whatever the kernel issues in between (Q's copies, the sinks).
__device__ inline KeySlots load_key_slots(const SparseAttentionArgs& args, int64_t row) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  KeySlots slots;
#pragma unroll
  for (int r = 0; r < kKeyRounds; ++r) {
    const int c = warp + (kThreads / 32) * r;
    int32_t v = -1;
    if (c < window_chunks(args)) {
      const int i = 32 * c + lane;
      if (i < args.window_cap) v = __ldg(args.window_rows + row * args.window_cap + i);
    } else {
      const int i = 32 * (c - window_chunks(args)) + lane;  // (past the selection's chunks: i >= topk)
      if (i < args.topk) v = __ldg(args.selection + row * args.topk + i);
    }
    slots.v[r] = v;
  }
  return slots;
}

// The row's keys in `keys` (record indices: visible window rows, then selected entries, in order) and
// counts[0] = window keys, counts[1] = all keys, from every thread's slots: each warp counts the valid slots
// of its chunks into `chunk_counts` (kKeyChunks ints of shared scratch), then, after a barrier, scans the
// counts (a lane per chunk) and scatters its valid slots. Ends synchronized. (One warp compacting the whole
// list took ~20 dependent ballot steps.)
__device__ void compact_key_list(const SparseAttentionArgs& args, const KeySlots& slots, int* chunk_counts,
                                 int32_t* keys, int* counts) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int chunks = window_chunks(args) + (args.topk + 31) / 32;
  unsigned valid[kKeyRounds];
#pragma unroll
  for (int r = 0; r < kKeyRounds; ++r) {
    const int c = warp + (kThreads / 32) * r;
    valid[r] = __ballot_sync(0xffffffffu, slots.v[r] >= 0);
    if (lane == 0 && c < chunks) chunk_counts[c] = __popc(valid[r]);
  }
  __syncthreads();
  const int count = lane < chunks ? chunk_counts[lane] : 0;
  int end = count;  // inclusive scan: the keys up to the end of chunk `lane`
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int before = __shfl_up_sync(0xffffffffu, end, d);
    if (lane >= d) end += before;
  }
#pragma unroll
  for (int r = 0; r < kKeyRounds; ++r) {
    const int c = warp + (kThreads / 32) * r;
    const int base = __shfl_sync(0xffffffffu, end - count, c % 32);
    if (c < chunks && slots.v[r] >= 0) keys[base + __popc(valid[r] & ((1u << lane) - 1u))] = slots.v[r];
  }
  const int window_keys = __shfl_sync(0xffffffffu, end, std::max(window_chunks(args) - 1, 0));
  const int total = __shfl_sync(0xffffffffu, end, std::max(chunks - 1, 0));
  if (threadIdx.x == 0) {
    counts[0] = window_chunks(args) > 0 ? window_keys : 0;
    counts[1] = chunks > 0 ? total : 0;
  }
  __syncthreads();
}

// ---- dequantization of one key tile
// ------------------------------------------------------------------------

// One thread's share of a tile of kKeys keys in flight: raw codes and the raw block-scale byte of each
// 16-channel chunk (E8M0 for window rows, E4M3 for entries), decoded only when the tile is stored. kWorkers:
// the threads sharing the tile (the CTA, or the producer warpgroup of the warp-specialised kernel); worker w
// is thread w mod kWorkers.
template <int kKeys, int kWorkers = kThreads>
struct TileRecords {
  static constexpr int kChunks = kKeys * kChunksPerKey / kWorkers;
  uint4 codes[kChunks];
  uint32_t scale_code[kChunks];
};

// (kThreads workers: the 256-thread kernels, where the thread index is the worker index; taking the
// remainder there anyway cost the single-pass kernel registers and spills)
template <int kWorkers>
__device__ inline int worker_index() {
  return kWorkers == kThreads ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x) % kWorkers;
}

// kEnd = -1 stands for "all chunks".
template <int kChunks, int kEnd>
constexpr int chunk_end = kEnd < 0 ? kChunks : kEnd;

struct KeySource {
  const uint8_t* window_records;
  const uint8_t* entry_records;
  int window_keys;  // keys [0, window_keys) are window rows, [window_keys, total) entries
  int total;
};

// `p`, computed into a register the compiler cannot see through.
__device__ inline const uint8_t* opaque_pointer(const uint8_t* p) {
  asm("mov.b64 %0, %0;" : "+l"(p));
  return p;
}

// The E4M3 value of `code` (NaN codes give NaN): the hardware E4M3 -> f16 conversion is exact.
__device__ inline float e4m3_value(uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Chunk i of this thread: key (tid + 256 i) / 32 of the tile, 16-channel chunk (tid mod 32). A warp reads
// one key row's record contiguously. Keys past the row's end get codes and scale byte 0 (they decode to 0).
// Nothing here consumes a loaded value, so all of a thread's record reads are in flight together: round 4's
// ncu/SASS reading found the scale decoded right after its load inside each chunk's branch, which made the
// 8 loads of a 64-key tile 8 memory latencies in a row (~7K cycles per tile, the whole per-tile time).
// kFormat as in decode_chunks (0 both kinds, 1 window rows only, 2 entries only): the key's kind is uniform
// per warp (a warp reads one key per chunk step), but with both kinds possible the compiler issues both
// address paths predicated; one path per tile halves the load code of the common (entry-only) tiles.
// [kBegin, kEnd): the chunks loaded (the single-pass kernel reloads each half as soon as it is decoded).
template <int kKeys, int kFormat, int kBegin, int kEnd, int kWorkers>
__device__ inline void load_chunks(const Layout& s, const KeySource& src, int tile,
                                   TileRecords<kKeys, kWorkers>& r) {
  // (L2 only, .cg: a record is read once; streamed through the L1, which the shared memory leaves ~29 KB, the
  // records evicted what else it held)
  // this thread's chunk of every key (kWorkers is a multiple of 32): its codes' and scale's place in a record
  // of either kind, added once per call, so each load's address is one 32x32+64 multiply-add of the listed
  // index (non-negative: unsigned arithmetic) — the per-chunk 64-bit address math was ~17 instructions
  // (opaque_pointer: otherwise the compiler re-associates the sums and adds the pool's base per load)
  const auto chunk = static_cast<uint32_t>(worker_index<kWorkers>() % kChunksPerKey);
  const uint8_t* window_codes = opaque_pointer(src.window_records + chunk * kChunk);
  const uint8_t* window_scales = opaque_pointer(src.window_records + kDim + chunk / 2);
  const uint8_t* entry_codes = opaque_pointer(src.entry_records + chunk * (kChunk / 2));
  const uint8_t* entry_scales = opaque_pointer(src.entry_records + kDim / 2 + chunk);
#pragma unroll
  for (int i = kBegin; i < kEnd; ++i) {
    const int q = worker_index<kWorkers>() + i * kWorkers;
    const int t = tile * kKeys + q / kChunksPerKey;
    uint4 codes = make_uint4(0, 0, 0, 0);
    uint32_t scale_code = 0;
    // the addresses unconditionally (past the row's keys s.keys holds stale values, their addresses unused):
    // predicated, each multiply-add needed copies of its 64-bit base
    const auto index = static_cast<size_t>(static_cast<uint32_t>(s.keys[t]));
    if (kFormat == 1 || (kFormat == 0 && t < src.window_keys)) {
      const auto* at = reinterpret_cast<const uint4*>(window_codes + index * kFp8RecordBytes);
      const uint8_t* scale_at = window_scales + index * kFp8RecordBytes;
      if (t < src.total) {
        codes = __ldcg(at);
        scale_code = __ldcg(scale_at);
      }
    } else {
      const auto* at = reinterpret_cast<const uint2*>(entry_codes + index * kNvfp4RecordBytes);
      const uint8_t* scale_at = entry_scales + index * kNvfp4RecordBytes;
      if (t < src.total) {
        const uint2 half = __ldcg(at);
        codes = make_uint4(half.x, half.y, 0, 0);
        scale_code = __ldcg(scale_at);
      }
    }
    r.codes[i] = codes;
    r.scale_code[i] = scale_code;
  }
}

// f(std::integral_constant<int, kFormat>) with the tile's record format (as in load_chunks: 0 both kinds, 1
// window rows only, 2 entries only): one code path per tile keeps the loop's executed code small.
template <int kKeys, typename F>
__device__ inline void with_tile_format(const KeySource& src, int tile, F&& f) {
  if (tile * kKeys >= src.window_keys) {
    f(std::integral_constant<int, 2>{});
  } else if ((tile + 1) * kKeys <= src.window_keys) {
    f(std::integral_constant<int, 1>{});
  } else {
    f(std::integral_constant<int, 0>{});
  }
}

template <int kKeys, int kBegin = 0, int kEnd = -1, int kWorkers>
__device__ inline void load_tile(const Layout& s, const KeySource& src, int tile,
                                 TileRecords<kKeys, kWorkers>& r) {
  constexpr int kLast = chunk_end<TileRecords<kKeys, kWorkers>::kChunks, kEnd>;
  with_tile_format<kKeys>(src, tile, [&](auto format) {
    load_chunks<kKeys, decltype(format)::value, kBegin, kLast>(s, src, tile, r);
  });
}

// prmt.b32 in its generic mode: result byte i is byte (selector nibble i & 7) of {lo, hi}, or, when the
// nibble's bit 3 is set, that byte's most significant bit replicated over the byte. (Written out: __byte_perm
// documents only the low three bits of each nibble.)
__device__ inline uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t selector) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(selector));
  return r;
}

// Eight BF16 values of the E2M1 codes in `codes` (nibble i = channel i) times the BF16 `scale` pair, as four
// BF16x2 words: the magnitudes' high and low bytes come from byte tables through prmt (4 channels per
// instruction); the sign bits are spread to the high bytes by one sign-replicating prmt per 4 channels
// (nibble sign bits 3 and 7 of a byte sit at bit 7 of `codes << 4` and of `codes`); one BF16x2 multiply per
// pair applies the scale (exact: at most 6 significant bits). Session 3: ~22 instructions per 8 channels (the
// sign bits moved one at a time took ~43); the words are the same bits, checked for every 16-bit pattern.
__device__ inline void e2m1x8_to_bf16(uint32_t codes, uint32_t scale_pair, uint32_t (&out)[4]) {
  // BF16 of the E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6: low bytes and high bytes, indices 0-3 | 4-7
  constexpr uint32_t kLowA = 0xC0800000u, kLowB = 0xC0804000u;
  constexpr uint32_t kHighA = 0x3F3F3F00u, kHighB = 0x40404040u;
  const uint32_t magnitudes = codes & 0x77777777u;  // selector nibbles without the mode bit
  const uint32_t shifted = codes << 4;              // sign of nibble 2j at bit 7 of byte j
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t select = half == 0 ? magnitudes : magnitudes >> 16;
    const uint32_t low = prmt(kLowA, kLowB, select);
    const uint32_t signs = prmt(shifted, codes, half == 0 ? 0xD9C8u : 0xFBEAu);  // 0xFF per negative channel
    const uint32_t high = prmt(kHighA, kHighB, select) | (signs & 0x80808080u);
    out[2 * half] = bf16x2_mul(prmt(low, high, 0x5140u), scale_pair);
    out[2 * half + 1] = bf16x2_mul(prmt(low, high, 0x7362u), scale_pair);
  }
}

// Four BF16x2 words of the E4M3 codes in `codes` (byte i = channel i) times `scale_pair` (BF16 2^k, twice):
// the exact E4M3 -> f16 conversion, then the f16 bits shifted into BF16 position (value·2^-112, a normal
// BF16 for every non-zero code, 0 for 0), then two exact BF16x2 multiplies by 2^112 and 2^k.
__device__ inline void e4m3x4_to_bf16(uint32_t codes, uint32_t scale_pair, uint32_t (&out)[2]) {
  constexpr uint32_t kTwoTo112 = 0x77807780u;  // BF16 2^112, twice
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const __half2_raw h2 = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>((codes >> (16 * half)) & 0xFFFFu), __NV_E4M3);
    uint32_t bits;
    memcpy(&bits, &h2, sizeof bits);
    const uint32_t shifted = ((bits & 0x7FFF7FFFu) >> 3) | (bits & 0x80008000u);
    out[half] = bf16x2_mul(bf16x2_mul(shifted, kTwoTo112), scale_pair);
  }
}

// Decodes the loaded chunks to BF16 (exact: E4M3·2^e and E2M1·E4M3 have at most 6 significant bits) into the
// tile buffer. Keys past the row's end decode to zeros (codes 0), so P·V never meets stale data.
// kFastDecode: both formats decoded in BF16 pairs (e4m3x4_to_bf16, e2m1x8_to_bf16: ~2.5 instructions per
// channel); otherwise through the fp32 decoders of kv_element_codecs.cuh (~6-10), kept for the mma.sync path.
// Decodes one 16-channel chunk (codes and block-scale byte of a key's record) to BF16: `lo` goes to 16-byte
// chunk 2·chunk + (chunk bit 2) of the key's swizzled row, `hi` to its neighbour (store_decoded_chunk).
template <bool kFastDecode>
__device__ inline void decode_chunk(int chunk, uint4 codes, uint32_t scale_code, bool fp8, uint4& lo,
                                    uint4& hi) {
  const auto code = static_cast<uint8_t>(scale_code);
  const float scale = fp8 ? numeric::e8m0_to_float(code) : e4m3_value(code);
  // The two 16-byte halves of a chunk go to chunks 2·chunk and 2·chunk + 1 of the swizzled row. Storing the
  // lower half first everywhere put lanes 0-3 and 4-7 of each 8-lane store phase on the same four 16-byte
  // bank groups (a 2-way conflict on every decode store); chunks with bit 2 set store their upper half first
  // (codes swapped before decoding), which spreads each phase over all eight.
  const bool upper_first = (chunk & 4) != 0;
  if (upper_first) {
    codes = fp8 ? make_uint4(codes.z, codes.w, codes.x, codes.y) : make_uint4(codes.y, codes.x, 0, 0);
  }
  const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
  if (kFastDecode) {
    const uint32_t scale_pair = bf16x2_bits(scale, scale);  // exact: 2^k or an E4M3 value
    if (fp8) {
      uint32_t a[2], b[2], c[2], d[2];
      e4m3x4_to_bf16(words[0], scale_pair, a);
      e4m3x4_to_bf16(words[1], scale_pair, b);
      e4m3x4_to_bf16(words[2], scale_pair, c);
      e4m3x4_to_bf16(words[3], scale_pair, d);
      lo = make_uint4(a[0], a[1], b[0], b[1]);
      hi = make_uint4(c[0], c[1], d[0], d[1]);
    } else {
      uint32_t a[4], b[4];
      e2m1x8_to_bf16(words[0], scale_pair, a);
      e2m1x8_to_bf16(words[1], scale_pair, b);
      lo = make_uint4(a[0], a[1], a[2], a[3]);
      hi = make_uint4(b[0], b[1], b[2], b[3]);
    }
  } else {
    float v[kChunk];
    if (fp8) {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float y[4];
        kv_fast::e4m3x4_decode(words[w], scale, y);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[4 * w + j] = y[j];
      }
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float y[4];
        kv_fast::e2m1x4_decode(words[w / 2] >> (16 * (w % 2)), scale, y);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[4 * w + j] = y[j];
      }
    }
    lo = make_uint4(bf16x2_bits(v[0], v[1]), bf16x2_bits(v[2], v[3]), bf16x2_bits(v[4], v[5]),
                    bf16x2_bits(v[6], v[7]));
    hi = make_uint4(bf16x2_bits(v[8], v[9]), bf16x2_bits(v[10], v[11]), bf16x2_bits(v[12], v[13]),
                    bf16x2_bits(v[14], v[15]));
  }
}

// Decodes this thread's chunks [kBegin, kEnd) of the tile and hands each to `sink(i, lo, hi)` (store it, or
// keep it). kFormat: 0 keys of both kinds, 1 window rows (FP8) only, 2 entries (or padding) only.
template <int kKeys, bool kFastDecode, int kBegin, int kEnd, int kFormat, int kWorkers, typename Sink>
__device__ inline void decode_chunks(const KeySource& src, int tile, const TileRecords<kKeys, kWorkers>& r,
                                     Sink&& sink) {
#pragma unroll
  for (int i = kBegin; i < kEnd; ++i) {
    const int q = worker_index<kWorkers>() + i * kWorkers;
    const bool fp8 = kFormat == 1 || (kFormat == 0 && tile * kKeys + q / kChunksPerKey < src.window_keys);
    uint4 lo, hi;
    decode_chunk<kFastDecode>(q % kChunksPerKey, r.codes[i], r.scale_code[i], fp8, lo, hi);
    sink(i, lo, hi);
  }
}

// The tile's format is uniform except at the window/entry boundary: one decoder per tile keeps the loop's
// executed code small.
template <int kKeys, bool kFastDecode, int kBegin = 0, int kEnd = -1, int kWorkers, typename Sink>
__device__ inline void decode_tile(const KeySource& src, int tile, const TileRecords<kKeys, kWorkers>& r,
                                   Sink&& sink) {
  constexpr int kLast = chunk_end<TileRecords<kKeys, kWorkers>::kChunks, kEnd>;
  with_tile_format<kKeys>(src, tile, [&](auto format) {
    decode_chunks<kKeys, kFastDecode, kBegin, kLast, decltype(format)::value>(src, tile, r, sink);
  });
}

// Chunk i of worker w = 32·warp + lane: key warp + (kWorkers / 32)·i of the tile, 16-channel chunk `lane`.
// The key's row phase (key mod 8) is warp ^ ((kWorkers / 32)·i mod 8), known per i at compile time, so the
// swizzled offsets of chunk i are a per-thread base plus a constant: immediate offsets of the stores, no
// per-chunk address registers to keep live or spill.
// kRotateUpper (the one-pass kernel): channels 256..511 (slabs 4-7, lanes 16-31) of key k go to row
// k ^ kKeys/2 of their slabs, so the warpgroup multiplying those channels sees the two halves of the keys
// swapped (its own half of the softmax then sits in its first accumulators).
// The byte offsets in the tile of the two 16-byte halves (lo, hi) of this worker's decoded chunk i.
template <int kKeys, int kWorkers, bool kRotateUpper = false>
__device__ inline int2 decoded_chunk_offsets(int i) {
  constexpr int kKeysPerStep = kWorkers / kChunksPerKey;
  static_assert(kKeysPerStep == 4 || kKeysPerStep == 8, "warp < kKeysPerStep, a power of two");
  const int warp = worker_index<kWorkers>() / 32;
  const int chunk = worker_index<kWorkers>() % 32;
  const int first = 2 * chunk + ((chunk >> 2) & 1);
  const int phase = warp ^ ((kKeysPerStep * i) & 7);  // (warp + kKeysPerStep·i) mod 8
  int row = warp * 128 + i * kKeysPerStep * 128;
  if (kRotateUpper) {  // key ^ kKeys/2 = key ± kKeys/2 (phases unchanged: kKeys/2 is a multiple of 8)
    const int shift = chunk >= kChunksPerKey / 2 ? kKeys / 2 * 128 : 0;
    row += i * kKeysPerStep < kKeys / 2 ? shift : -shift;
  }
  return make_int2(row + (first >> 3) * (kKeys * 128) + (((first & 7) ^ phase) << 4),
                   row + ((first ^ 1) >> 3) * (kKeys * 128) + ((((first ^ 1) & 7) ^ phase) << 4));
}

template <int kKeys, int kWorkers, bool kRotateUpper = false>
__device__ inline void store_decoded_chunk(uint8_t* buffer, int i, uint4 lo, uint4 hi) {
  const int2 at = decoded_chunk_offsets<kKeys, kWorkers, kRotateUpper>(i);
  *reinterpret_cast<uint4*>(buffer + at.x) = lo;
  *reinterpret_cast<uint4*>(buffer + at.y) = hi;
}

// Decodes the tile's chunks [kBegin, kEnd) chunk by chunk straight into `buffer` (few registers live).
template <int kKeys, bool kFastDecode = true, int kBegin = 0, int kEnd = -1, bool kRotateUpper = false,
          int kWorkers>
__device__ inline void store_tile(uint8_t* buffer, const KeySource& src, int tile,
                                  const TileRecords<kKeys, kWorkers>& r) {
  decode_tile<kKeys, kFastDecode, kBegin, kEnd>(src, tile, r, [&](int i, uint4 lo, uint4 hi) {
    store_decoded_chunk<kKeys, kWorkers, kRotateUpper>(buffer, i, lo, hi);
  });
  fence_proxy_async();  // the wgmma variants read the tile through the async proxy
}

// A fragments of Q[head0 .. +16][dim0 .. +256] for this lane: 16 k-steps of m16n8k16 (also wgmma's register
// A layout for the warp's 16 rows).
__device__ inline void load_q_fragments(const uint16_t* q_row, int head0, int dim0, uint32_t (&qa)[16][4]) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const auto pair = [&](int head, int dim) {
    return __ldg(reinterpret_cast<const uint32_t*>(q_row + head * kDim + dim));
  };
#pragma unroll
  for (int ks = 0; ks < 16; ++ks) {
    const int d = dim0 + 16 * ks + 2 * c;
    qa[ks][0] = pair(head0 + g, d);
    qa[ks][1] = pair(head0 + g + 8, d);
    qa[ks][2] = pair(head0 + g, d + 8);
    qa[ks][3] = pair(head0 + g + 8, d + 8);
  }
}

// ---- wgmma building blocks shared by the one-CTA-per-row and the split-keys kernels

// Issues S (+)= Q·Kᵀ over this warpgroup's 256 channels (dim0..) for the 64-key tile at `tile_base` and
// commits it (the caller waits). K-major B: keys are N (8-row groups 1024 B apart), channels K within a slab
// row. acc: keys 8j.. of the tile in the m16n8k16 C layout (acc[4j .. 4j+3]).
__device__ inline void issue_qk_wgmma(float (&acc)[32], const uint32_t (&qa)[16][4], uint32_t tile_base,
                                      int dim0) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 16; ++ks) {
    const uint32_t start =
        tile_base + static_cast<uint32_t>((dim0 / 64 + ks / 4) * kSlabBytes + (ks % 4) * 32);
    wgmma_m64n64k16(acc, qa[ks], sw128_descriptor(start, 16, 1024), 1);
  }
  wgmma_commit();
}

// Waits for this warpgroup's wgmma and fences its accumulators.
template <int kCount>
__device__ inline void wait_wgmma(float (&acc)[kCount]) {
  wgmma_wait_all();
#pragma unroll
  for (int i = 0; i < kCount; ++i) fence_register(acc[i]);
}

// Issues O (+)= P·V over 16·kSteps keys and commits it. P (this warp's 16 heads) by ldmatrix from `probs`:
// head h's row at h·row_bytes, 16-byte chunk j (keys 8j..) at j ^ (h mod 8), starting at chunk `chunk0`.
// V MN-major at `tile_base`: channels are N (64 per slab row, slabs slab_bytes apart; this warpgroup's 256
// channels are its four slabs), keys are K (8-row groups 1024 B apart).
// Issues O (+)= P·V over 16·kSteps keys with P's A fragments `a` (this warp's 16 heads) and commits it. V
// MN-major at `tile_base`: channels are N (64 per slab row, slabs slab_bytes apart; warpgroup g's 256
// channels are slabs 4g..4g+3), keys are K (8-row groups 1024 B apart).
template <int kSteps>
__device__ inline void issue_pv_fragments(float (&acc)[128], const uint32_t (&a)[kSteps][4],
                                          uint32_t tile_base, int slab_bytes) {
  const int group = warpgroup_index();  // (uniform: the descriptors stay in uniform registers)
  // (built once, stepped by the start-address field: see issue_qk_shared)
  const uint64_t b = sw128_descriptor(tile_base + static_cast<uint32_t>(4 * group * slab_bytes),
                                      static_cast<uint32_t>(slab_bytes), 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    wgmma_m64n256k16_tb(acc, a[ks], descriptor_step(b, 16 * ks * 128 / 16), 1);
  }
  wgmma_commit();
}

template <int kSteps>
__device__ inline void issue_pv_wgmma(float (&acc)[128], const uint8_t* probs, int row_bytes, int chunk0,
                                      uint32_t tile_base, int slab_bytes) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int mi = lane / 8, r = lane % 8;
  const int h = 16 * (warp & 3) + r + 8 * (mi & 1);
  uint32_t a[kSteps][4];
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const int chunk = chunk0 + 2 * ks + (mi >> 1);
    ldmatrix_x4(smem_address(probs + static_cast<size_t>(h) * row_bytes + ((chunk ^ (h & 7)) << 4)), a[ks]);
  }
  issue_pv_fragments<kSteps>(acc, a, tile_base, slab_bytes);
}

// The two warpgroups' half dot products of keys [column0, column0 + 8·kBlocks) meet in `rows` (head h's row
// at h·stride floats, column t at logit_column(h, t)): warpgroup 0 stores its half, a CTA barrier (which also
// tells every warp that the tile is no longer read), warpgroup 1 adds its own.
template <int kBlocks>
__device__ inline void sum_halves(float* rows, int stride, int column0, const float (&acc)[4 * kBlocks]) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const bool second_half = (warp >> 2) != 0;
  const auto slot = [&](int j, int half) {  // rows head0+g+8·half, columns column0 + 8j + 2c (+1)
    const int h = 16 * (warp & 3) + g + 8 * half;
    return reinterpret_cast<float2*>(rows + static_cast<size_t>(h) * stride +
                                     logit_column(h, column0 + 8 * j + 2 * c));
  };
  if (!second_half) {
#pragma unroll
    for (int j = 0; j < kBlocks; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
        *slot(j, half) = make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
    }
  }
  __syncthreads();
  if (second_half) {
#pragma unroll
    for (int j = 0; j < kBlocks; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float2* p = slot(j, half);
        const float2 first = *p;
        *p = make_float2(first.x + acc[4 * j + 2 * half], first.y + acc[4 * j + 2 * half + 1]);
      }
    }
  }
}

// ---- phase 1: raw logits S = Q·Kᵀ
// --------------------------------------------------------------------------

template <bool kWgmma>
__device__ void compute_logits(const Layout& s, const KeySource& src, const uint32_t (&qa)[16][4],
                               int tiles) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int dim0 = 256 * (warp >> 2);  // this warp's warpgroup's half of the channels

  const int mi = lane / 8, r = lane % 8;
  TileRecords<kTileKeys> records;
  if (tiles > 0) load_tile(s, src, 0, records);
  for (int tile = 0; tile < tiles; ++tile) {
    tile_mark(s, tile, 10);
    store_tile<kTileKeys, kWgmma>(s.tile, src, tile, records);
    tile_mark(s, tile, 11);
    __syncthreads();  // tile complete; the previous tile's partial sums are in
    if (tile + 1 < tiles) load_tile(s, src, tile + 1, records);

    // acc[4j .. 4j+3]: keys 8j.. of the tile in the m16n8k16 C layout
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    if constexpr (kWgmma) {
      issue_qk_wgmma(acc, qa, smem_address(s.tile), dim0);
      wait_wgmma(acc);
    } else {
#pragma unroll
      for (int ks = 0; ks < 16; ++ks) {
        const int chunk = (dim0 + 16 * ks) / 8 + (mi & 1);
#pragma unroll
        for (int jp = 0; jp < 4; ++jp) {
          uint32_t b[4];
          ldmatrix_x4(tile_chunk_address(s.tile, 16 * jp + r + 8 * (mi >> 1), chunk), b);
          mma_bf16(acc + 8 * jp, qa[ks], b[0], b[1]);
          mma_bf16(acc + 8 * jp + 4, qa[ks], b[2], b[3]);
        }
      }
    }
    tile_mark(s, tile, 12);
    sum_halves<8>(s.logits, s.key_stride, tile * kTileKeys, acc);
    tile_mark(s, tile, 13);
  }
  __syncthreads();
}

// ---- phase 2: probabilities
// --------------------------------------------------------------------------------

// p_t = BF16(fp32(exp(l_t − M) / Z)), l = scale·S, M = max(sink, l), Z = Σ exp(l − M) + exp(sink − M): the
// CPU backend's formula, evaluated in base 2 with the hardware exp2 (ex2.approx, ~2^-22 relative) and the
// reciprocal of Z: fp32(p) lands within ~1e-6 (relative) of the CPU's, which only matters where it straddles
// a BF16 rounding midpoint (the test's bound). Columns past the row's keys get 0.
__device__ inline float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Head row of the softmax's row group `group` (0-3) that warp `warp` takes as its j-th (0-1).
__device__ inline int softmax_row(int warp, int group, int j) {
  return 16 * group + 2 * warp + j;
}

// The rows go in four groups of 16, two rows per warp (the two rows' loads, shuffle chains and exps are
// independent and interleave; round 4 did one row at a time with a global load of the sink per row, ~5x the
// instruction count). The sinks of the warp's rows come in `lane_sink` (lane 2g + j holds the sink of its
// row j of group g, loaded at the kernel's start). P of row h goes to prob_chunk, in place over the first
// half of row h's logits; all reads of a group are done (CTA barrier) before any of its P is written.
__device__ void compute_probabilities(const Layout& s, int total, int tiles, float lane_sink, float scale) {
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kRows = 2;              // rows in flight per warp
  const float scale2 = scale * kLog2e;  // logits in base 2
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const auto row_of = [&](int group, int j) { return softmax_row(warp, group, j); };
  for (int group = 0; group < kHeads / 16; ++group) {
    float2 e[kRows][kMaxTiles];
    float peak[kRows], sink2[kRows], sum[kRows];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int h = row_of(group, j);
      const float* row = s.logits + static_cast<size_t>(h) * s.key_stride;
      sink2[j] = __shfl_sync(0xffffffffu, lane_sink, kRows * group + j) * kLog2e;
      peak[j] = sink2[j];
#pragma unroll
      for (int i = 0; i < kMaxTiles; ++i) {
        const int t = i * kTileKeys + 2 * lane;
        e[j][i] = make_float2(-INFINITY, -INFINITY);
        if (i < tiles) {
          const float2 raw = *reinterpret_cast<const float2*>(row + logit_column(h, t));
          if (t < total) e[j][i].x = raw.x * scale2;
          if (t + 1 < total) e[j][i].y = raw.y * scale2;
          peak[j] = fmaxf(peak[j], fmaxf(e[j][i].x, e[j][i].y));
        }
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
      for (int j = 0; j < kRows; ++j) peak[j] = fmaxf(peak[j], __shfl_xor_sync(0xffffffffu, peak[j], offset));
    }
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      sum[j] = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxTiles; ++i) {
        if (i < tiles) {
          e[j][i].x = exp2_approx(e[j][i].x - peak[j]);  // 2^-inf = 0 for columns past the keys
          e[j][i].y = exp2_approx(e[j][i].y - peak[j]);
          sum[j] += e[j][i].x + e[j][i].y;
        }
      }
    }
    // butterfly: every lane adds the same two operands at each step, so all lanes hold the same sum
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
      for (int j = 0; j < kRows; ++j) sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], offset);
    }
    __syncthreads();  // the group's logits are read before any P overwrites them
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int h = row_of(group, j);
      const float inverse = __frcp_rn(sum[j] + exp2_approx(sink2[j] - peak[j]));
#pragma unroll
      for (int i = 0; i < kMaxTiles; ++i) {
        if (i < tiles) {
          const int t = i * kTileKeys + 2 * lane;
          const uint32_t p = bf16x2_bits(e[j][i].x * inverse, e[j][i].y * inverse);
          *reinterpret_cast<uint32_t*>(prob_chunk(s, h, t / 8) + (t % 8) * 2) = p;
        }
      }
    }
  }
  __syncthreads();
}

// ---- phase 3: O = P·V
// --------------------------------------------------------------------------------------

// O tile of one warp in the m16n8k16 C layout: acc[4j .. 4j+3] covers rows head0+g, head0+g+8 and channels
// dim0 + 8j + 2c (+1); stored as BF16.
template <int kBlocks>
__device__ inline void store_output(const float (&acc)[4 * kBlocks], int head0, int dim0, uint16_t* out_row) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int j = 0; j < kBlocks; ++j) {
    const int d = dim0 + 8 * j + 2 * c;
    *reinterpret_cast<uint32_t*>(out_row + (head0 + g) * kDim + d) = bf16x2_bits(acc[4 * j], acc[4 * j + 1]);
    *reinterpret_cast<uint32_t*>(out_row + (head0 + g + 8) * kDim + d) =
        bf16x2_bits(acc[4 * j + 2], acc[4 * j + 3]);
  }
}

// The one-pass kernels' output: a warpgroup's O (normalised; rows head0+g, head0+g+8 of each warp,
// channels dim0 + 8j + 2c (+1)) rounded to BF16 into `staging` (64 x 512 BF16, head row h at 1 KB·h, its
// 16-byte chunk j at j ^ (h mod 8): conflict-free), then copied out in coalesced 16-byte stores. Round s4r0:
// the fragments' direct 4-byte stores (store_output) took 7.3 us per CTA at b128.
// Stored by stmatrix (four 8x8 BF16 blocks per instruction, the accumulator layout being the stmatrix
// fragment layout): 16 stores per thread instead of 64 (the s5 profile: the epilogue's 834 instructions per
// warp, run once, cold in the instruction cache).
__device__ inline void stmatrix_x4(uint32_t address, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

__device__ inline void stage_output(const float (&o)[128], int head0, int dim0, uint8_t* staging) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // lane l addresses row l mod 8 of block l / 8 of each store: blocks (j, rows g) (j, rows g+8) (j+1, g)
  // (j+1, g+8); dim0 / 8 is a multiple of 8, so the swizzle only touches the chunk's low three bits
  const int block = lane / 8, row = lane % 8;
  const uint8_t* base = staging + (head0 + row + 8 * (block % 2)) * 1024 + (dim0 / 8) * 16;
#pragma unroll
  for (int pair = 0; pair < 16; ++pair) {
    const int chunk = 2 * pair + block / 2;
    uint32_t r[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int j = 2 * pair + q / 2, half = q % 2;
      r[q] = bf16x2_bits(o[4 * j + 2 * half], o[4 * j + 2 * half + 1]);
    }
    stmatrix_x4(smem_address(base + (((chunk & ~7) | ((chunk & 7) ^ row)) << 4)), r);
  }
}

// `threads` threads (this one is `rank`) copy the staged rows to out_row (16-byte aligned).
__device__ inline void copy_output(const uint8_t* staging, uint16_t* out_row, int rank, int threads) {
  for (int q = rank; q < kHeads * kDim / 8; q += threads) {
    const int h = q / (kDim / 8), chunk = q % (kDim / 8);
    *reinterpret_cast<uint4*>(out_row + h * kDim + chunk * 8) =
        *reinterpret_cast<const uint4*>(staging + h * 1024 + ((chunk ^ (h & 7)) << 4));
  }
}

__device__ inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// mma.sync: warp w owns all 64 heads x channels [64w, 64w + 64): acc[m] is heads 16m.. (8 column blocks).
__device__ void compute_output_mma(const Layout& s, const KeySource& src, int tiles, uint16_t* out_row) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int mi = lane / 8, r = lane % 8;
  const int dim0 = 64 * warp;

  float acc[4][32];
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[m][i] = 0.0f;

  TileRecords<kTileKeys> records;
  if (tiles > 0) load_tile(s, src, 0, records);
  for (int tile = 0; tile < tiles; ++tile) {
    store_tile<kTileKeys, false>(s.tile, src, tile, records);
    __syncthreads();
    if (tile + 1 < tiles) load_tile(s, src, tile + 1, records);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t a[4][4];
      const int p_chunk = (tile * kTileKeys + 16 * ks) / 8 + (mi >> 1);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int h = 16 * m + r + 8 * (mi & 1);
        ldmatrix_x4(smem_address(prob_chunk(s, h, p_chunk)), a[m]);
      }
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        uint32_t b[4];
        ldmatrix_x4_trans(
            tile_chunk_address(s.tile, 16 * ks + r + 8 * (mi & 1), (dim0 + 16 * jp) / 8 + (mi >> 1)), b);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          mma_bf16(acc[m] + 8 * jp, a[m], b[0], b[1]);
          mma_bf16(acc[m] + 8 * jp + 4, a[m], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the tile is free for the next one
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) store_output<8>(acc[m], 16 * m, dim0, out_row);
}

// wgmma: warpgroup g owns all 64 heads x channels [256g, 256g + 256) (m64n256k16, 128 accumulators per
// thread); warp w of the group supplies the P fragments of heads 16w.. from shared memory.
__device__ void compute_output_wgmma(const Layout& s, const KeySource& src, int tiles, uint16_t* out_row) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

  const auto* probs = reinterpret_cast<const uint8_t*>(s.logits);
  TileRecords<kTileKeys> records;
  if (tiles > 0) load_tile(s, src, 0, records);
  for (int tile = 0; tile < tiles; ++tile) {
    tile_mark(s, tile, 15);
    store_tile<kTileKeys>(s.tile, src, tile, records);
    tile_mark(s, tile, 16);
    __syncthreads();
    if (tile + 1 < tiles) load_tile(s, src, tile + 1, records);
    issue_pv_wgmma<4>(acc, probs, s.prob_row_bytes, tile * kTileKeys / 8, smem_address(s.tile), kSlabBytes);
    wait_wgmma(acc);
    tile_mark(s, tile, 17);
    __syncthreads();  // the tile is free for the next one
    tile_mark(s, tile, 18);
  }
  store_output<32>(acc, 16 * (warp & 3), 256 * (warp >> 2), out_row);
}

// wgmma is compiled for sm_90a only: the compute_90 PTX embedded for other devices runs the mma.sync path
// in every variant.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kHaveWgmma = true;
#else
constexpr bool kHaveWgmma = false;
#endif

// Diagnostics: clock64() and %globaltimer of CTA 0's thread 0 at profile point `point` (see the header).
__device__ inline void profile_point(unsigned long long* profile, int point) {
  if (profile == nullptr || blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  profile[point] = static_cast<unsigned long long>(clock64());
  profile[5 + point] = ns;
}

// Implementations: 0 mma.sync (the portable path: what the compute_90 PTX runs on a later device), 1 wgmma.
template <int kRequested>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_kernel(SparseAttentionArgs args, int key_stride, float scale) {
  constexpr int kImpl = kHaveWgmma ? kRequested : 0;
  // No static shared memory: the dynamic block then starts at the CTA's (1024-byte aligned) shared window,
  // which the swizzled wgmma tiles need.
  extern __shared__ __align__(1024) uint8_t smem[];
  if constexpr (kImpl != 0) {
    if ((smem_address(smem) & 1023u) != 0) {  // never seen; leaves the output unwritten rather than wrong
      if (threadIdx.x == 0 && blockIdx.x == 0)
        printf("sparse_attention: dynamic shared memory at %u is not 1024-byte aligned\n",
               smem_address(smem));
      return;
    }
  }
  Layout s;
  s.tile = smem;
  s.logits = reinterpret_cast<float*>(smem + kTileBytes);
  s.keys = reinterpret_cast<int32_t*>(s.logits + static_cast<size_t>(kHeads) * key_stride);
  s.counts = s.keys + key_stride;
  s.key_stride = key_stride;
  s.prob_row_bytes = key_stride * 4;
  s.profile = args.profile;

  const int64_t row = blockIdx.x;
  profile_point(args.profile, 0);
  // Loads that need no key list are issued first, so their latency (the first touch of each array in the
  // launch) overlaps the key list's: this warp's Q fragments, and the sinks of its softmax rows.
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const KeySlots slots = load_key_slots(args, row);
  uint32_t qa[16][4];
  load_q_fragments(args.q + row * kHeads * kDim, 16 * (warp & 3), 256 * (warp >> 2), qa);
  const float lane_sink = lane < 8 ? args.sink[softmax_row(warp, lane / 2, lane % 2)] : 0.0f;
  compact_key_list(args, slots, reinterpret_cast<int*>(s.logits), s.keys, s.counts);  // logits area: free yet
  profile_point(args.profile, 1);
  const KeySource src{args.window_records, args.entry_records, s.counts[0], s.counts[1]};
  const int tiles = (src.total + kTileKeys - 1) / kTileKeys;

  uint16_t* out_row = args.out + row * kHeads * kDim;
  compute_logits<kImpl == 1>(s, src, qa, tiles);
  profile_point(args.profile, 2);
  compute_probabilities(s, src.total, tiles, lane_sink, scale);
  profile_point(args.profile, 3);
  if constexpr (kImpl == 0) {
    compute_output_mma(s, src, tiles, out_row);
  } else {
    compute_output_wgmma(s, src, tiles, out_row);
  }
  __syncthreads();
  profile_point(args.profile, 4);
}

// The one-pass kernels' check of the 1024-byte alignment their swizzled tiles need (never seen; the kernel
// then returns, leaving the output unwritten rather than wrong).
__device__ inline bool shared_misaligned(const uint8_t* smem) {
  if ((smem_address(smem) & 1023u) == 0) return false;
  if (threadIdx.x == 0 && blockIdx.x == 0)
    printf("sparse_attention: dynamic shared memory at %u is not 1024-byte aligned\n", smem_address(smem));
  return true;
}

// A yes/no property of the current device, asked once per device (0-63; others every time) and cached: the
// small batches' calls pay every host microsecond.
class DeviceFlag {
 public:
  template <typename Ask>
  bool get(Ask&& ask) {
    int device = 0;
    FKV_CUDA_CHECK(cudaGetDevice(&device));
    const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
    if (bit != 0 && (asked_.load(std::memory_order_acquire) & bit) != 0)
      return (set_.load(std::memory_order_acquire) & bit) != 0;
    const bool value = ask(device);
    if (value) set_.fetch_or(bit, std::memory_order_release);
    asked_.fetch_or(bit, std::memory_order_release);
    return value;
  }

 private:
  std::atomic<uint64_t> asked_{0}, set_{0};
};

// Raises `kernel`'s shared-memory limit to `bytes` once per device (setting it on every call costs host
// time that shows at small batches).
template <typename Kernel>
void configure_once(Kernel kernel, DeviceFlag& configured, size_t bytes) {
  configured.get([&](int) {
    FKV_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
  });
}

// ---- single pass: online softmax (kOnline)
// ----------------------------------------------------------------- Each key tile is decoded ONCE and serves
// both products: S = Q·Kᵀ (K-major B) and O += P·V (MN-major B, the same bytes). The softmax runs online: per
// head a running max m (base 2, starting at the sink's logit) and a running sum l; a tile's P = BF16(2^(u −
// m)) with m the max so far, raised (and O and l rescaled by 2^(m_old − m)) only when a logit exceeds it by
// more than kMaxSlack, so P < 2^8; at the end out = BF16(O / (l + 2^(sink − m))). So P is rounded before it
// is normalised: not the CPU's faithful order; the error bound is derived in
// tests/gpu/test_sparse_attention.cpp.
//
// One CTA (two warpgroups) per query row. Q (64 heads x 512, BF16) sits in shared memory in the tiles'
// swizzled K-major layout (cp.async at the start) and is the A operand of Q·Kᵀ by descriptor; warpgroup g
// multiplies channels [256g, 256g + 256) of all 64 keys, then takes the softmax of keys [32g, 32g + 32): the
// other warpgroup's partial dot products of those keys come through shared memory (fp32, one barrier), and
// P of the other half comes back the same way (BF16, a second barrier). The running max m of a row is the
// same in both warpgroups: it only moves in a CTA-wide round (both warpgroups' peaks through shared memory,
// the same fmax in each) on a tile where some logit exceeds it by more than kMaxSlack, so P and the rescale
// factors agree bit for bit. Warpgroup g owns O[64 heads][256g .. 256g + 256) (128 fp32 per thread) and l of
// its keys (the two l add up at the end); P goes to P·V from registers (the m64n64 accumulator layout is the
// m64n256k16 A fragment layout). Tiles of 64 keys in two buffers: while
// the tensor cores run tile t's Q·Kᵀ and then its P·V, every warp decodes half of tile t + 1 into the other
// buffer, and reloads that half's records (registers) for tile t + 2 as soon as it is decoded.

// The exchange area of the one-pass kernel: the partial dot products of the other warpgroup's keys (8 KB per
// warpgroup), P of each warpgroup's keys (4 KB each), the rows' peaks or sums (1 KB each).
struct OnlineExchange {
  float4 s[2][4][128];
  uint4 p[2][2][128];
  float2 rows[2][128];
};

size_t online_shared_bytes(int key_stride) {
  return 3 * static_cast<size_t>(kTileBytes) + sizeof(OnlineExchange) +
         static_cast<size_t>(key_stride) * sizeof(int32_t) + 2 * sizeof(int) + kHeads * sizeof(float);
}

__device__ inline void cp_async_16(uint32_t shared_address, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global) : "memory");
}

__device__ inline void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// cp.async of kBytes (4, 8 or 16: .cg takes only 16).
template <int kBytes>
__device__ inline void cp_async(uint32_t shared_address, const void* global) {
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared_address), "l"(global), "n"(kBytes)
                 : "memory");
  }
}

// 16-byte pieces [kBegin, kEnd) of Q of the row into `q_tile`: head h as key h of a tile (8 slabs of 64
// channels, 128-byte swizzle), piece i = 8 channels of head i / 64. 16-byte cp.async when q is 16-byte
// aligned (the contract promises 4). 256 threads.
constexpr int kQPieces = kHeads * kDim / 8;
template <int kBegin, int kEnd>
__device__ void stage_q(const uint16_t* q_row, uint8_t* q_tile) {
  const bool aligned = (reinterpret_cast<uintptr_t>(q_row) & 15u) == 0;
  for (int i = kBegin + static_cast<int>(threadIdx.x); i < kEnd; i += kThreads) {
    uint8_t* dst = q_tile + tile_offset(i / (kDim / 8), i % (kDim / 8));
    if (aligned) {
      cp_async_16(smem_address(dst), q_row + 8 * i);
    } else {
      const auto* words = reinterpret_cast<const uint32_t*>(q_row + 8 * i);
      *reinterpret_cast<uint4*>(dst) =
          make_uint4(__ldg(words), __ldg(words + 1), __ldg(words + 2), __ldg(words + 3));
    }
  }
}

// Issues S = Q·Kᵀ over channels [dim0, dim0 + 16·kSteps) for the tile at `tile_base`, both operands by
// descriptor, and commits it. acc: keys 8j.. of the tile in the m16n8k16 C layout (acc[4j .. 4j+3]).
// The descriptors are built once and stepped by their start-address field (descriptor_step): the s5 profile
// had ~15 instructions of descriptor math per wgmma, 243 per warp and tile, 12% of the kernel's stall
// samples.
template <int kSteps>
__device__ inline void issue_qk_shared(float (&acc)[32], uint32_t q_base, uint32_t tile_base, int dim0) {
  const auto first = static_cast<uint32_t>((dim0 / 64) * kSlabBytes);
  const uint64_t a = sw128_descriptor(q_base + first, 16, 1024);
  const uint64_t b = sw128_descriptor(tile_base + first, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    constexpr int kUnit = 16;  // the start-address field counts 16-byte units
    const auto step = static_cast<uint32_t>(((ks / 4) * kSlabBytes + (ks % 4) * 32) / kUnit);
    wgmma_m64n64k16_ss(acc, descriptor_step(a, step), descriptor_step(b, step), ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// The running softmax state of this thread's two head rows (g and g + 8 of its warp's 16).
struct OnlineRows {
  float max[2];  // base-2 logits; start at the sink's
  float sum[2];  // this thread's share of Σ 2^(u − max) over its warpgroup's keys (the quad's four shares and
                 // the two warpgroups' add up at the end)
};

// How far (base 2) a logit may exceed its row's running max before the max is raised. P = 2^(u − m) then
// stays below 2^8, which BF16 and the fp32 sums hold with the same relative rounding as below 1, and the max
// moves (a CTA-wide round of the rows' peaks and a rescale of O and l) only on the few tiles that raise a
// logit that far; otherwise P is taken against the max as it stands and nothing is rescaled.
constexpr float kMaxSlack = 8.0f;

// The barrier of the two warpgroups that share a tile's softmax (a policy: rounds s5r1/s5r2's
// warp-specialised variant, code in git at 8fe313b, used named barrier 1 of its 256 consumer threads).
struct CtaBarrier {
  __device__ static void sync() { __syncthreads(); }
  __device__ static bool sync_or(bool p) { return __syncthreads_or(p ? 1 : 0) != 0; }
};

// Warpgroup g takes the softmax of keys [32g, 32g + 32) of the tile. The tile's rows are stored rotated in
// the upper channel slabs (kRotateUpper), so each warpgroup's own keys are its accumulators 0-15 and the
// other's 16-31: it hands the latter over through shared memory and adds the other's partial dot products of
// its own keys (thread i of each warpgroup holds the same positions). s: S of its keys, raw dot products.
template <typename Barrier>
__device__ inline void exchange_keys(const float (&acc)[32], OnlineExchange& x, float (&s)[16]) {
  const int group = static_cast<int>(threadIdx.x) / 128;
  const int i = static_cast<int>(threadIdx.x) % 128;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    x.s[group][k][i] = make_float4(acc[16 + 4 * k], acc[17 + 4 * k], acc[18 + 4 * k], acc[19 + 4 * k]);
  Barrier::sync();
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float4 v = x.s[1 - group][k][i];
    s[4 * k] = acc[4 * k] + v.x;
    s[4 * k + 1] = acc[4 * k + 1] + v.y;
    s[4 * k + 2] = acc[4 * k + 2] + v.z;
    s[4 * k + 3] = acc[4 * k + 3] + v.w;
  }
}

// P = BF16(2^(u − m)) of this warpgroup's keys (u = scale2·s) against the rows' maxima, as the A fragments
// of P·V's first two k-steps (pa[0], pa[1]), and this thread's share of the rows' sums. Returns whether some
// u exceeds its row's max by more than kMaxSlack.
__device__ inline bool half_probabilities(const float (&s)[16], const OnlineRows& rows, float scale2,
                                          uint32_t (&pa)[4][4], float (&partial)[2]) {
  float e[16];
  float excess = -INFINITY;
  partial[0] = partial[1] = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int r = (i / 2) % 2;
    const float u = fmaf(s[i], scale2, -rows.max[r]);
    excess = fmaxf(excess, u);
    e[i] = exp2_approx(u);
    partial[r] += e[i];
  }
  // A fragment of k-step ks (keys 16ks.. of the half): rows g / g+8 at keys 16ks + 2c (+1), 16ks + 8 + 2c
  // (+1)
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
    for (int w = 0; w < 4; ++w) pa[ks][w] = bf16x2_bits(e[8 * ks + 2 * w], e[8 * ks + 2 * w + 1]);
  }
  return excess > kMaxSlack;
}

// O *= the rows' rescale factors (rows g / g+8 of the warp's 16: accumulators 4j, 4j+1 / 4j+2, 4j+3),
// skipped when neither row's max grew anywhere in the warp (factors exactly 1).
__device__ inline void rescale_rows(float (&o)[128], const float (&alpha)[2]) {
  if (__all_sync(0xffffffffu, alpha[0] == 1.0f && alpha[1] == 1.0f)) return;
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] *= alpha[(i / 2) % 2];
}

// The CTA-wide round after some logit exceeded its row's max by more than kMaxSlack (every thread takes it):
// the rows' maxima are raised to their true maxima so far (each warpgroup's peaks of its keys meet through
// shared memory; both compute the same maxima, fmax being commutative), l and O are rescaled by 2^(m_old −
// m). The caller recomputes P.
template <typename Barrier>
__device__ inline void raise_maxima(const float (&s)[16], float scale2, OnlineRows& rows, OnlineExchange& x,
                                    float (&o)[128]) {
  const int group = static_cast<int>(threadIdx.x) / 128;
  const int i = static_cast<int>(threadIdx.x) % 128;
  float peak[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int k = 0; k < 16; ++k) peak[(k / 2) % 2] = fmaxf(peak[(k / 2) % 2], s[k]);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    peak[r] = fmaxf(peak[r], __shfl_xor_sync(0xffffffffu, peak[r], 1));
    peak[r] = fmaxf(peak[r], __shfl_xor_sync(0xffffffffu, peak[r], 2));
    peak[r] *= scale2;  // scale2 > 0: the max of the scaled values, exactly
  }
  x.rows[group][i] = make_float2(peak[0], peak[1]);
  Barrier::sync();
  const float2 theirs = x.rows[1 - group][i];
  const float other[2] = {theirs.x, theirs.y};
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float grown = fmaxf(rows.max[r], fmaxf(peak[r], other[r]));
    alpha[r] = exp2_approx(rows.max[r] - grown);
    rows.max[r] = grown;
    rows.sum[r] *= alpha[r];
  }
  rescale_rows(o, alpha);
}

// The tile's P (BF16) as the A fragments of P·V's four k-steps over the tile's rows as this warpgroup's slabs
// hold them: its own keys first (half_probabilities), then the other warpgroup's (through shared memory).
// Raises the maxima first when some logit of either warpgroup exceeds its row's max by more than kMaxSlack
// (a CTA-uniform decision: the barrier that publishes P also ORs the threads' flags).
template <typename Barrier>
__device__ inline void tile_probabilities(const float (&s)[16], float scale2, OnlineRows& rows,
                                          OnlineExchange& x, float (&o)[128], uint32_t (&pa)[4][4]) {
  const int group = static_cast<int>(threadIdx.x) / 128;
  const int i = static_cast<int>(threadIdx.x) % 128;
  float partial[2];
  const bool exceeds = half_probabilities(s, rows, scale2, pa, partial);
  const auto publish = [&] {
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) x.p[group][ks][i] = make_uint4(pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3]);
  };
  publish();
  if (Barrier::sync_or(exceeds)) {
    raise_maxima<Barrier>(s, scale2, rows, x, o);
    half_probabilities(s, rows, scale2, pa, partial);
    publish();  // (the other warpgroup reads P only after the next barrier)
    Barrier::sync();
  }
  rows.sum[0] += partial[0];
  rows.sum[1] += partial[1];
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const uint4 v = x.p[1 - group][ks][i];
    pa[2 + ks][0] = v.x;
    pa[2 + ks][1] = v.y;
    pa[2 + ks][2] = v.z;
    pa[2 + ks][3] = v.w;
  }
}

// S of the tile (this warpgroup's channel half of all 64 keys, in acc) -> P of all 64 keys as P·V's A
// fragments (pa), keys [key0, key0 + 64) with those at or past `total` weighted 0.
template <typename Barrier>
__device__ inline void tile_softmax(const float (&acc)[32], OnlineExchange& x, int key0, int total,
                                    float scale2, OnlineRows& rows, float (&o)[128], uint32_t (&pa)[4][4]) {
  const int group = static_cast<int>(threadIdx.x) / 128;
  const int c = static_cast<int>(threadIdx.x) % 4;
  float part[16];
  exchange_keys<Barrier>(acc, x, part);
  if (key0 + kTileKeys > total) {  // keys past the row's end: u = −∞, p = 0
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      if (key0 + 32 * group + 8 * (k / 4) + 2 * c + k % 2 >= total) part[k] = -INFINITY;
    }
  }
  tile_probabilities<Barrier>(part, scale2, rows, x, o, pa);
}

// out = O / (l + 2^(sink − m)) in place: the quad's four shares of l added, then the two warpgroups' through
// x.rows (both get the same sum: a + b == b + a). The caller has ordered the last reads of x.rows. sinks: the
// 64 heads' sink logits (natural base, in shared memory).
template <typename Barrier>
__device__ inline void normalise_output(OnlineRows& rows, OnlineExchange& x, const float* sinks,
                                        float (&o)[128]) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int group = static_cast<int>(threadIdx.x) / 128;
  const int i = static_cast<int>(threadIdx.x) % 128;
  const int head0 = 16 * (i / 32);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rows.sum[r] += __shfl_xor_sync(0xffffffffu, rows.sum[r], 1);
    rows.sum[r] += __shfl_xor_sync(0xffffffffu, rows.sum[r], 2);
  }
  x.rows[group][i] = make_float2(rows.sum[0], rows.sum[1]);
  Barrier::sync();
  const float2 theirs = x.rows[1 - group][i];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = rows.sum[r] + (r == 0 ? theirs.x : theirs.y);
    const float sink2 = sinks[head0 + i % 32 / 4 + 8 * r] * kLog2e;  // (as the running maxima started)
    const float inverse = 1.0f / (sum + exp2_approx(sink2 - rows.max[r]));
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      o[4 * j + 2 * r] *= inverse;
      o[4 * j + 2 * r + 1] *= inverse;
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    online_attention_kernel(SparseAttentionArgs args, int key_stride, float scale2) {
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(1024) uint8_t smem[];
  if (shared_misaligned(smem)) return;
  uint8_t* q_tile = smem;
  uint8_t* buffers = smem + kTileBytes;  // two key tiles
  auto& exchange = *reinterpret_cast<OnlineExchange*>(smem + 3 * kTileBytes);
  Layout s{};
  s.tile = buffers;
  s.keys = reinterpret_cast<int32_t*>(smem + 3 * kTileBytes + sizeof(OnlineExchange));
  s.counts = s.keys + key_stride;
  s.key_stride = key_stride;
  s.profile = args.profile;

  const int64_t row = blockIdx.x;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int group = warpgroup_index();
  const int head0 = 16 * (warp & 3);
  profile_point(args.profile, 0);
  // the key list's loads first: everything else waits for their round trip. The sinks go to shared memory by
  // cp.async (the running maxima start at them after the prologue's barrier; the output normalisation takes
  // them at the end): the s6 profile had warps 0-1 waiting for a sink load queued behind Q's 64 KB of copies
  // before the key list's first barrier (~1 us of the prologue), and ptxas hoists a register load's consumer.
  const KeySlots slots = load_key_slots(args, row);
  float* sinks = reinterpret_cast<float*>(s.counts + 2);
  if (threadIdx.x < kHeads) cp_async<4>(smem_address(sinks + threadIdx.x), args.sink + threadIdx.x);
  // Q's first half now (its copies overlap the key list's round trip), the second after tile 0's record
  // loads: the s6 profile had those loads queued behind all of Q's copies in the prologue (long scoreboard
  // stalls on their operand reads)
  stage_q<0, kQPieces / 2>(args.q + row * kHeads * kDim, q_tile);
  compact_key_list(args, slots, reinterpret_cast<int*>(&exchange), s.keys, s.counts);  // exchange: free yet
  profile_point(args.profile, 1);
  const KeySource src{args.window_records, args.entry_records, s.counts[0], s.counts[1]};
  const int tiles = (src.total + kTileKeys - 1) / kTileKeys;

  // tiles 0 and 1 requested together (O's registers are free yet), so tile 1's round trip hides behind tile
  // 0's decode instead of stalling the loop's first decode
  TileRecords<kTileKeys> records;
  constexpr int kHalf = TileRecords<kTileKeys>::kChunks / 2;
  constexpr int kAll = TileRecords<kTileKeys>::kChunks;
  {
    TileRecords<kTileKeys> first;
    if (tiles > 0) load_tile(s, src, 0, first);
    if (tiles > 1) load_tile(s, src, 1, records);
    stage_q<kQPieces / 2, kQPieces>(args.q + row * kHeads * kDim, q_tile);
    if (tiles > 0) store_tile<kTileKeys, true, 0, -1, true>(buffers, src, 0, first);
  }
  cp_async_wait_all();
  fence_proxy_async();  // Q's copies, read by wgmma
  __syncthreads();      // (and the sinks' copies, read by every thread)
  profile_point(args.profile, 2);
  const float max0 = sinks[head0 + lane / 4] * kLog2e, max1 = sinks[head0 + lane / 4 + 8] * kLog2e;

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  OnlineRows rows{{max0, max1}, {0.0f, 0.0f}};
  const uint32_t q_base = smem_address(q_tile);
  for (int tile = 0; tile < tiles; ++tile) {
    const uint32_t current = smem_address(buffers + (tile & 1) * kTileBytes);
    uint8_t* next = buffers + ((tile + 1) & 1) * kTileBytes;
    tile_mark(s, tile, 10);
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    issue_qk_shared<16>(acc, q_base, current, 256 * group);
    tile_mark(s, tile, 14);
    tile_mark(s, tile, 17);  // (a staging stage in round s6r1; the bench prints its three marks)
    if (tile + 1 < tiles) store_tile<kTileKeys, true, 0, kHalf, true>(next, src, tile + 1, records);
    tile_mark(s, tile, 11);
    wait_wgmma(acc);
    tile_mark(s, tile, 12);
    uint32_t pa[4][4];
    tile_softmax<CtaBarrier>(acc, exchange, tile * kTileKeys, src.total, scale2, rows, o, pa);
    issue_pv_fragments<4>(o, pa, current, kSlabBytes);
    tile_mark(s, tile, 13);
    // the first half's records of tile t + 2 only now: in flight during the softmax they cost spills
    if (tile + 2 < tiles) load_tile<kTileKeys, 0, kHalf>(s, src, tile + 2, records);
    if (tile + 1 < tiles) store_tile<kTileKeys, true, kHalf, kAll, true>(next, src, tile + 1, records);
    if (tile + 2 < tiles) load_tile<kTileKeys, kHalf, kAll>(s, src, tile + 2, records);
    tile_mark(s, tile, 15);
    wait_wgmma(o);
    tile_mark(s, tile, 16);
    __syncthreads();  // tile t + 1 decoded; P·V of tile t done (its buffer takes tile t + 2); exchange free
  }
  profile_point(args.profile, 3);
  normalise_output<CtaBarrier>(rows, exchange, sinks, o);  // (the loop ended with a CTA barrier)
  uint16_t* out_row = args.out + row * kHeads * kDim;
  if (aligned16(out_row)) {  // (the buffers are free: the loop ended with a CTA barrier)
    stage_output(o, head0, 256 * group, buffers);
    __syncthreads();
    copy_output(buffers, out_row, static_cast<int>(threadIdx.x), kThreads);
  } else {
    store_output<32>(o, head0, 256 * group, out_row);
  }
  profile_point(args.profile, 4);
}

void launch_online(const SparseAttentionArgs& args, int key_stride, float scale, cudaStream_t stream) {
  static DeviceFlag configured;
  configure_once(online_attention_kernel, configured, online_shared_bytes(kSparseAttentionMaxKeys));
  online_attention_kernel<<<static_cast<unsigned>(args.n), kThreads, online_shared_bytes(key_stride),
                            stream>>>(args, key_stride, scale * 1.4426950408889634f);
  FKV_CUDA_CHECK_LAUNCH();
}

constexpr int kSplitPairBytes = kHeads * kTileKeys * sizeof(float);  // 64 x 64 fp32 (16 KB)

// ---- split keys in one launch: a cluster of CTAs per query row (kSplitKeys) ----------------------------
// The three-launch form of sessions 2-7 (in git at d8eb6a9) spent most of a small batch's time outside
// arithmetic (s7final b1: 34.3 µs per call for ~84 MFLOP): three launches and the gaps between them, the key
// list and the tile decoded twice, the logits and statistics through device memory, and the output kernel's
// 32-bit partial stores. Here the CTAs of one row (one per 64 keys) form a thread-block cluster, so they are
// co-scheduled, write each other's shared memory (DSMEM) and meet at cluster barriers:
//   1. every CTA: the row's key list, its 64 keys decoded into its tile, S = Q·Kᵀ, its statistics per head
//      (max m, Σ 2^(u − m)) pushed into every CTA's statistics table (DSMEM); cluster barrier;
//   2. M = max(sink, m_i) and Z = Σ_i z_i·2^(m_i − M) + 2^(sink − M) from the table (the same shuffle trees
//      and order as the three-launch form), P of the CTA's keys rounded to BF16, partial O = P·V (wgmma);
//   3. the partial O to device scratch in 16-byte stores (full sectors); cluster barrier; CTA r of S adds the
//      partials of heads [64r/S, 64(r+1)/S) in split order and writes BF16.
// Round s8r1 pushed the partials through DSMEM instead: 11.7K cycles for a CTA's 128 KB (~11 B/cycle), half
// of the CTA's time; the L2 takes 16-byte stores and loads at several times that.
// So P is normalised before its rounding and the partials are added in split order: the three-launch form's
// faithful-order numerics. CTAs past the row's last key (short rows) skip the arithmetic but keep the
// barriers and own their output heads.

constexpr int kSplitProbBytes = kHeads * kTileKeys * 2;   // P of one CTA's 64 keys, BF16 (8 KB)
constexpr int kSplitStatsBytes = kMaxTiles * kHeads * 8;  // the statistics table (m, z): [split][head]

// Shared memory: tile (64 KB) | Q (64 KB, the tile's layout: Q·Kᵀ's A operand) | P (8 KB) | pair sums
// (16 KB) | statistics table | key list (key_stride indices), the list's chunk counts (kKeyChunks) and the
// counts (2).
constexpr int kSplitQOffset = kTileBytes;
constexpr int kSplitProbOffset = kSplitQOffset + kTileBytes;
constexpr int kSplitPairOffset = kSplitProbOffset + kSplitProbBytes;
constexpr int kSplitStatsOffset = kSplitPairOffset + kSplitPairBytes;
// Device scratch of the partial outputs: [n][key_stride / 64][64][512] fp32.
size_t split_partial_bytes(int64_t n, int key_stride) {
  return static_cast<size_t>(n) * static_cast<size_t>(key_stride / kTileKeys) * kHeads * kDim * sizeof(float);
}

size_t split_cluster_shared_bytes(int key_stride) {
  return static_cast<size_t>(kSplitStatsOffset + kSplitStatsBytes) +
         (static_cast<size_t>(key_stride) + kKeyChunks + 2) * sizeof(int32_t);
}

__device__ inline uint32_t cluster_cta_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// The shared::cluster address of this CTA's shared address `address` in the cluster's CTA `rank`.
__device__ inline uint32_t cluster_address(uint32_t address, uint32_t rank) {
  uint32_t mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(address), "r"(rank));
  return mapped;
}

__device__ inline void store_cluster(uint32_t address, float x, float y) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(address), "f"(x), "f"(y) : "memory");
}

// Cluster barrier halves. arrive (release) + wait (acquire): what any thread of the cluster wrote before its
// arrive is visible to every thread after its wait. The relaxed arrive only says "this CTA has started".
__device__ inline void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ inline void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ inline void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ inline void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// Steps 1-2 per head row: lane (j, q) of warp w takes head 8w + j (j = lane / 4) and the CTA's keys
// [16q, 16q + 16), so a warp's 8 heads go side by side and each reduction over a head's 64 keys is 16 values
// in registers plus two shuffles (s8r2: one head at a time over 32 lanes, ten dependent shuffles per
// reduction, took 3.4K cycles for the statistics and most of step 2's 5.9K).
static_assert(kMaxTiles <= 12, "a head's splits: three table entries per lane of its four");

// Step 1's statistics: this lane's 16 base-2 logits into `u` (kept in registers for step 2), the head's
// (m, z) pushed into the tables of the row's CTAs that hold keys (lane q writes those of CTAs q, q + 4, ...).
__device__ inline void push_split_statistics(const float* pair, int split, int total, int active,
                                             float scale2, uint32_t stats_table, float (&u)[16]) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int q = lane % 4;
  const int h = warp * 8 + lane / 4;
  float m = -INFINITY;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // keys k0 .. k0 + 7 sit at columns logit_column(h, k0) + 0..7 (the swizzle moves whole groups of 8)
    const int k0 = 16 * q + 8 * half;
    const float* at = pair + h * kTileKeys + logit_column(h, k0);
    const float4 lo = *reinterpret_cast<const float4*>(at);
    const float4 hi = *reinterpret_cast<const float4*>(at + 4);
    const float raw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      u[8 * half + i] = split * kTileKeys + k0 + i < total ? raw[i] * scale2 : -INFINITY;
      m = fmaxf(m, u[8 * half + i]);
    }
  }
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  float z = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) z += exp2_approx(u[i] - m);  // 2^-inf = 0 past the row's keys
  z += __shfl_xor_sync(0xffffffffu, z, 1);
  z += __shfl_xor_sync(0xffffffffu, z, 2);
  for (int r = q; r < active; r += 4) {
    store_cluster(cluster_address(stats_table, static_cast<uint32_t>(r)) +
                      static_cast<uint32_t>((split * kHeads + h) * 8),
                  m, z);
  }
}

// Step 2's P of this lane's head and 16 keys (BF16, [64 heads][64 keys] at 128 B per head, chunk c of head
// h at c ^ (h mod 8)) from the statistics table and the logits `u`: M = max(sink, m_i), Z = Σ z_i·2^(m_i − M)
// + 2^(sink − M), p = 2^(u − M) / Z rounded to BF16.
__device__ inline void split_probabilities(const float2* stats, int split, int total, int active,
                                           float lane_sink, const float (&u)[16], uint8_t* probs) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int q = lane % 4;
  const int h = warp * 8 + lane / 4;
  const float sink2 = __shfl_sync(0xffffffffu, lane_sink, lane / 4) * kLog2e;
  float2 split_stats[3];  // the table entries of splits q, q + 4, q + 8
  float peak = sink2;
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int r = q + 4 * i;
    split_stats[i] = r < active ? stats[r * kHeads + h] : make_float2(-INFINITY, 0.0f);
    peak = fmaxf(peak, split_stats[i].x);
  }
  peak = fmaxf(peak, __shfl_xor_sync(0xffffffffu, peak, 1));
  peak = fmaxf(peak, __shfl_xor_sync(0xffffffffu, peak, 2));
  float z = 0.0f;
#pragma unroll
  for (int i = 0; i < 3; ++i)
    z += split_stats[i].y > 0.0f ? split_stats[i].y * exp2_approx(split_stats[i].x - peak) : 0.0f;
  z += __shfl_xor_sync(0xffffffffu, z, 1);
  z += __shfl_xor_sync(0xffffffffu, z, 2);
  const float inverse = __frcp_rn(z + exp2_approx(sink2 - peak));
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = split * kTileKeys + 16 * q + 8 * half + 2 * i;
      const float p0 = t < total ? exp2_approx(u[8 * half + 2 * i] - peak) * inverse : 0.0f;
      const float p1 = t + 1 < total ? exp2_approx(u[8 * half + 2 * i + 1] - peak) * inverse : 0.0f;
      words[i] = bf16x2_bits(p0, p1);
    }
    const int chunk = 2 * q + half;  // keys 8·chunk .. 8·chunk + 7
    *reinterpret_cast<uint4*>(probs + h * 128 + ((chunk ^ (h & 7)) << 4)) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// Step 3, sending side: this thread's partial O (acc: heads head0 + g (+8), channels 256·group + 8j + 2c
// (+1)) into `partial` ([64 heads][512] fp32). Lane pairs (c, c ^ 1) swap half of their values, so that each
// lane stores whole 16-byte chunks of one head: the even lane 4 channels of head head0 + g, the odd lane 4
// of head head0 + g + 8; a warp's store of one j then fills 16 whole 32-byte sectors.
__device__ inline void store_split_partial(const float (&acc)[128], float* partial) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const bool odd = (c & 1) != 0;
  float* row = partial + (16 * (warp & 3) + g + (odd ? 8 : 0)) * kDim + 256 * (warp >> 2) + 2 * (c & 2);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    // the even lane gives its head-(g + 8) pair, the odd lane its head-g pair
    const float take0 = __shfl_xor_sync(0xffffffffu, odd ? acc[4 * j] : acc[4 * j + 2], 1);
    const float take1 = __shfl_xor_sync(0xffffffffu, odd ? acc[4 * j + 1] : acc[4 * j + 3], 1);
    *reinterpret_cast<float4*>(row + 8 * j) = odd ? make_float4(take0, take1, acc[4 * j + 2], acc[4 * j + 3])
                                                  : make_float4(acc[4 * j], acc[4 * j + 1], take0, take1);
  }
}

// Step 3, owning side: out = BF16(Σ partials of the splits holding keys, in split order) for this CTA's
// heads, four channels per thread and step; `partials`: the row's [splits][64][512] fp32 (written by the
// cluster before its barrier: read through the L2).
__device__ inline void reduce_split_partials(const float* partials, int split, int splits, int active,
                                             uint16_t* out_row) {
  const int first = kHeads * split / splits;
  const int count = (kHeads * (split + 1) / splits - first) * (kDim / 4);  // float4s of this CTA's heads
  const auto* part = reinterpret_cast<const float4*>(partials) + first * (kDim / 4);
  for (int i = static_cast<int>(threadIdx.x); i < count; i += kThreads) {
    float4 v[kMaxTiles];
#pragma unroll
    for (int s = 0; s < kMaxTiles; ++s) {  // (all loads in flight before the sum)
      if (s < active) v[s] = __ldcg(part + s * (kHeads * kDim / 4) + i);
    }
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < kMaxTiles; ++s) {
      if (s < active) {
        sum.x += v[s].x;
        sum.y += v[s].y;
        sum.z += v[s].z;
        sum.w += v[s].w;
      }
    }
    reinterpret_cast<uint2*>(out_row + first * kDim)[i] =
        make_uint2(bf16x2_bits(sum.x, sum.y), bf16x2_bits(sum.z, sum.w));
  }
}

// Diagnostics: clock64() of the profiled CTA's thread 0 into profile word `word` (see the header).
__device__ inline void split_mark(unsigned long long* profile, int word) {
  if (profile == nullptr || blockIdx.x != 0 || threadIdx.x != 0) return;
  profile[word] = static_cast<unsigned long long>(clock64());
}

// Grid (S·rows), cluster (S) with S = key_stride / 64: CTA r of cluster i takes keys [64r, 64r + 64) of row
// i.
__global__ void __launch_bounds__(kThreads, 1)
    split_cluster_kernel(SparseAttentionArgs args, int key_stride, float scale2, float* partials) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int splits = key_stride / kTileKeys;
  const int split = static_cast<int>(cluster_cta_rank());
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int dim0 = 256 * (warp >> 2);
  Layout s;
  s.tile = smem;
  uint8_t* q_tile = smem + kSplitQOffset;
  uint8_t* probs = smem + kSplitProbOffset;
  s.logits = reinterpret_cast<float*>(smem + kSplitPairOffset);  // 64 x 64 fp32 pair sums
  auto* stats = reinterpret_cast<float2*>(smem + kSplitStatsOffset);
  s.keys = reinterpret_cast<int32_t*>(smem + kSplitStatsOffset + kSplitStatsBytes);
  s.counts = s.keys + key_stride + kKeyChunks;
  s.key_stride = key_stride;
  s.prob_row_bytes = kTileKeys * 2;
  s.profile = nullptr;
  const int64_t row = blockIdx.x / splits;
  unsigned long long* profile = row == 0 ? args.profile : nullptr;
  profile_point(profile, 0);
  // this CTA has started: the others may write into its shared memory once they have waited for this
  cluster_arrive_relaxed();
  const float lane_sink = lane < 8 ? __ldg(args.sink + warp * 8 + lane) : 0.0f;
  // Q into shared memory by cp.async as kOnline stages it: its first half now (overlapping the key list's
  // round trip), the second after the records' loads, so that these do not queue behind all of Q (s8r2, Q
  // as 64 scalar fragment loads per thread before the key list: the decode step took 7.1K cycles)
  const KeySlots slots = load_key_slots(args, row);
  stage_q<0, kQPieces / 2>(args.q + row * kHeads * kDim, q_tile);
  compact_key_list(args, slots, s.keys + key_stride, s.keys, s.counts);  // (chunk counts after the list)
  const KeySource src{args.window_records, args.entry_records, s.counts[0], s.counts[1]};
  const int active = (src.total + kTileKeys - 1) / kTileKeys;  // the row's CTAs that hold keys
  const bool holds_keys = split < active;                      // (uniform over the CTA)
  profile_point(profile, 1);
  float u[16];
  if (holds_keys) {
    TileRecords<kTileKeys> records;
    load_tile(s, src, split, records);
    stage_q<kQPieces / 2, kQPieces>(args.q + row * kHeads * kDim, q_tile);
    store_tile<kTileKeys>(s.tile, src, split, records);
    cp_async_wait_all();
    fence_proxy_async();  // Q's copies, read by wgmma
    __syncthreads();
    split_mark(profile, 13);
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    issue_qk_shared<16>(acc, smem_address(q_tile), smem_address(s.tile), dim0);
    wait_wgmma(acc);
    sum_halves<8>(s.logits, kTileKeys, 0, acc);
    __syncthreads();
  } else {
    cp_async_wait_all();  // (Q's first half, unused here: no copy outlives the CTA)
  }
  split_mark(profile, 14);
  cluster_wait();  // every CTA of the cluster has started
  split_mark(profile, 15);
  if (holds_keys) push_split_statistics(s.logits, split, src.total, active, scale2, smem_address(stats), u);
  profile_point(profile, 2);
  cluster_sync();   // the statistics of every split are in every table
  __syncthreads();  // (implied by the cluster barrier; stated for racecheck, which sees CTA barriers)
  split_mark(profile, 16);
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  if (holds_keys) {
    split_probabilities(stats, split, src.total, active, lane_sink, u, probs);
    __syncthreads();
    issue_pv_wgmma<4>(acc, probs, kTileKeys * 2, 0, smem_address(s.tile), kSlabBytes);
    wait_wgmma(acc);
  }
  profile_point(profile, 3);
  float* row_partials = partials + row * splits * (kHeads * kDim);
  if (holds_keys) store_split_partial(acc, row_partials + split * (kHeads * kDim));
  split_mark(profile, 11);
  cluster_sync();  // every partial is in the L2 (release: the stores are done; acquire: L1 invalidated)
  split_mark(profile, 12);
  reduce_split_partials(row_partials, split, splits, active, args.out + row * kHeads * kDim);
  profile_point(profile, 4);
}

size_t shared_bytes(int key_stride) {
  return kTileBytes + static_cast<size_t>(kHeads) * key_stride * sizeof(float) +
         static_cast<size_t>(key_stride) * sizeof(int32_t) + 2 * sizeof(int);
}

// Raises the kernel's shared-memory limit once per device (setting it on every call costs host time that
// shows at small batches), at the largest size any call uses; then launches it.
template <int kImpl>
void launch(const SparseAttentionArgs& args, int key_stride, float scale, cudaStream_t stream) {
  static DeviceFlag configured;
  configure_once(sparse_attention_kernel<kImpl>, configured, shared_bytes(kSparseAttentionMaxKeys));
  sparse_attention_kernel<kImpl>
      <<<static_cast<unsigned>(args.n), kThreads, shared_bytes(key_stride), stream>>>(args, key_stride,
                                                                                      scale);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace

// True when the current device executes this file's sm_90a machine code (compute capability 9.0).
bool runs_sm90a_code() {
  static DeviceFlag sm90a;
  return sm90a.get([](int device) {
    int major = 0, minor = 0;
    FKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    FKV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
  });
}

// The largest shared-memory size of split_cluster_kernel over all key counts.
size_t split_cluster_shared_bytes_max() {
  size_t most = 0;
  for (int tiles = 1; tiles <= kMaxTiles; ++tiles)
    most = std::max(most, split_cluster_shared_bytes(tiles * kTileKeys));
  return most;
}

// The launch configuration of split_cluster_kernel: grid (splits·rows), cluster (splits).
struct SplitLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster{};

  SplitLaunch(int splits, int64_t rows, size_t shared_bytes, cudaStream_t stream) {
    config.gridDim = dim3(static_cast<unsigned>(splits * rows), 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = static_cast<unsigned>(splits);
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  SplitLaunch(const SplitLaunch&) = delete;  // (config points at cluster)
  SplitLaunch& operator=(const SplitLaunch&) = delete;
};

// Once per device: raises split_cluster_kernel's shared-memory limit and allows clusters above the portable
// 8 CTAs.
void configure_split_clusters() {
  static DeviceFlag configured;
  configured.get([](int) {
    FKV_CUDA_CHECK(cudaFuncSetAttribute(split_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(split_cluster_shared_bytes_max())));
    FKV_CUDA_CHECK(
        cudaFuncSetAttribute(split_cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  });
}

// How many clusters of `key_stride` / 64 CTAs the current device runs at once.
int split_active_clusters(int key_stride) {
  configure_split_clusters();
  const SplitLaunch launch(key_stride / kTileKeys, 1, split_cluster_shared_bytes(key_stride), nullptr);
  int clusters = 0;
  FKV_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, split_cluster_kernel, &launch.config));
  return clusters;
}

// Whether a cluster of the most CTAs (kMaxTiles, the largest shared-memory size) can be scheduled on the
// current device at all (asked once per device); false sends kSplitKeys to the one-CTA faithful kernel.
bool split_clusters_fit() {
  static DeviceFlag fits;
  return fits.get([](int) { return split_active_clusters(kSparseAttentionMaxKeys) > 0; });
}

// The split-keys path: one launch, a cluster of key_stride / 64 CTAs per query row; the partial outputs in
// the caller's workspace or in scratch from the stream-ordered allocator, freed in stream order.
void launch_split(const SparseAttentionArgs& args, int key_stride, float scale, cudaStream_t stream) {
  const size_t bytes = split_partial_bytes(args.n, key_stride);
  const bool own = args.workspace == nullptr || args.workspace_bytes < bytes;
  void* partials = args.workspace;
  if (own) FKV_CUDA_CHECK(cudaMallocAsync(&partials, bytes, stream));
  const SplitLaunch launch(key_stride / kTileKeys, args.n, split_cluster_shared_bytes(key_stride), stream);
  const cudaError_t launched = cudaLaunchKernelEx(&launch.config, split_cluster_kernel, args, key_stride,
                                                  scale * 1.4426950408889634f, static_cast<float*>(partials));
  if (own) FKV_CUDA_CHECK(cudaFreeAsync(partials, stream));
  FKV_CUDA_CHECK(launched);
}

size_t sparse_attention_workspace_bytes(int64_t n, int window_cap, int topk) {
  const int keys = std::max(window_cap + topk, 0);
  return split_partial_bytes(std::max<int64_t>(n, 0),
                             std::max(kTileKeys, (keys + kTileKeys - 1) / kTileKeys * kTileKeys));
}

// Rows kSplitKeys runs at once for the widest rows (clusters of kMaxTiles CTAs) on the current device, asked
// once per device (0-63) and cached.
int split_rows_at_once() {
  static std::atomic<int> cached[64] = {};  // rows + 1; 0: not asked yet
  int device = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 64) return split_active_clusters(kSparseAttentionMaxKeys);
  int rows = cached[device].load(std::memory_order_acquire) - 1;
  if (rows < 0) {
    rows = split_clusters_fit() ? split_active_clusters(kSparseAttentionMaxKeys) : 0;
    cached[device].store(rows + 1, std::memory_order_release);
  }
  return rows;
}

int sparse_attention_split_clusters(int window_cap, int topk) {
  if (window_cap < 0 || topk < 0 || window_cap + topk > kSparseAttentionMaxKeys || !runs_sm90a_code())
    return 0;
  const int keys = window_cap + topk;
  return split_active_clusters(std::max(kTileKeys, (keys + kTileKeys - 1) / kTileKeys * kTileKeys));
}

SparseAttentionVariant sparse_attention_auto_variant(int64_t n) {
  // elsewhere than sm_90a every variant runs the mma.sync kernel
  if (!runs_sm90a_code()) return SparseAttentionVariant::kMmaSync;
  // measured on the H200 (2026-11-30, round s8final, 640 keys, 7 clusters of 10 CTAs at once): split keys
  // while its row clusters run in at most two waves (b1-b4 19.1-20.6 us per call vs kOnline 39.9-43.2; b8,
  // two waves: 32.5 vs 40.6), kOnline above (b16, three waves: 44.5 vs 42.0)
  if (n <= 2 * split_rows_at_once()) return SparseAttentionVariant::kSplitKeys;
  return SparseAttentionVariant::kOnline;
}

void sparse_attention(const SparseAttentionArgs& args, cudaStream_t stream, SparseAttentionVariant variant) {
  validate_sparse_attention_args(args);
  if (args.n == 0) return;
  const int keys = args.window_cap + args.topk;
  const int key_stride = std::max(kTileKeys, (keys + kTileKeys - 1) / kTileKeys * kTileKeys);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kDim)));
  if (variant == SparseAttentionVariant::kAuto) variant = sparse_attention_auto_variant(args.n);
  switch (variant) {
    case SparseAttentionVariant::kAuto:  // (resolved above)
    case SparseAttentionVariant::kWgmma:
      return launch<1>(args, key_stride, scale, stream);
    case SparseAttentionVariant::kOnline:
      // wgmma-only, like kSplitKeys: elsewhere the mma.sync kernel
      if (runs_sm90a_code()) return launch_online(args, key_stride, scale, stream);
      return launch<0>(args, key_stride, scale, stream);
    case SparseAttentionVariant::kSplitKeys:
      // its kernels are wgmma-only: elsewhere (the compute_90 PTX on a later device) the mma.sync kernel;
      // where its clusters cannot be scheduled, the one-CTA faithful kernel
      if (!runs_sm90a_code()) return launch<0>(args, key_stride, scale, stream);
      // (a grid of splits · n CTAs: up to 2^31 − 1, i.e. ~2·10^8 rows at most)
      if (split_clusters_fit() && args.n <= std::numeric_limits<int32_t>::max() / kMaxTiles)
        return launch_split(args, key_stride, scale, stream);
      return launch<1>(args, key_stride, scale, stream);
    case SparseAttentionVariant::kMmaSync:
      return launch<0>(args, key_stride, scale, stream);
  }
}

}  // namespace flashkv::cuda
