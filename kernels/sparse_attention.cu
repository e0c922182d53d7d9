// Sparse attention with sink on the tensor cores (see sparse_attention.cuh for the contract).
//
// One CTA (8 warps) per query row, three phases over the row's keys in tiles of 64:
//   1. S = Q·Kᵀ: each warp keeps the A fragments of 16 heads x 256 channels of Q in registers (heads = M);
//      the two warps sharing a head group add their half-dot-products in shared memory. Raw logits of the
//      whole row (64 heads x up to 640 keys, fp32) stay in shared memory.
//   2. Softmax per head row (one warp per 8 rows): max with the sink, fp32 sum, p = fp32(e / Z) rounded to
//      BF16 — written in place over the first half of the row's fp32 logits.
//   3. O = P·V: each warp owns 64 heads x 64 channels of O (a 64x64 warp tile), V tiles dequantized again.
// Key tiles are dequantized from their records straight into shared memory (swizzled BF16 rows); the records
// of the next tile are loaded into registers while the current one is multiplied.
#include "sparse_attention.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

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
constexpr int kFp8RecordBytes = kDim + kDim / 32;                       // 528
constexpr int kNvfp4RecordBytes = kDim / 2 + kDim / 16;                 // 288
constexpr int kChunk = 16;                                              // channels per dequantization chunk
constexpr int kChunksPerKey = kDim / kChunk;                            // 32: one warp covers one key row
constexpr int kChunksPerThread = kTileKeys * kChunksPerKey / kThreads;  // 8
constexpr int kTileRowBytes = kDim * 2;                                 // 1024 B of BF16 per key
constexpr int kTileBytes = kTileKeys * kTileRowBytes;                   // 64 KB
constexpr int kMaxTiles = kSparseAttentionMaxKeys / kTileKeys;          // 10

static_assert(kSparseAttentionMaxKeys % kTileKeys == 0, "whole tiles of keys");
static_assert(kChunksPerThread * kThreads == kTileKeys * kChunksPerKey, "chunks divide over the CTA");

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
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline uint32_t bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return bits;
}

// ---- shared-memory layout
// ---------------------------------------------------------------------------------- logits: [64
// heads][key_stride] fp32, column t of row h stored at t ^ 8·(h mod 8) (the accumulator stores of
//         8 rows then hit different banks). After phase 2 the first key_stride·2 bytes of row h hold P as
//         BF16 in 16-byte chunks, chunk j stored at j ^ (h mod 8) (conflict-free ldmatrix).
// tile:   [64 keys][512] BF16, 16-byte chunk j of key k stored at j ^ (k mod 8).
// keys:   [key_stride] record indices: the row's visible window rows, then its selected entries.

struct Layout {
  float* logits;
  uint8_t* tile;
  int32_t* keys;
  int key_stride;
};

__device__ inline int logit_column(int h, int t) {
  return t ^ ((h & 7) << 3);
}

__device__ inline uint32_t tile_chunk_address(const uint8_t* tile, int key, int chunk) {
  return smem_address(tile + key * kTileRowBytes + ((chunk ^ (key & 7)) << 4));
}

__device__ inline uint8_t* prob_chunk(const Layout& s, int h, int chunk) {
  return reinterpret_cast<uint8_t*>(s.logits + static_cast<size_t>(h) * s.key_stride) +
         ((chunk ^ (h & 7)) << 4);
}

// ---- key list
// ----------------------------------------------------------------------------------------------

// Appends the non-negative entries of list[0, count) to keys[base...] in order (one warp); returns the new
// length.
__device__ inline int append_valid(const int32_t* list, int count, int32_t* keys, int base, int lane) {
  for (int start = 0; start < count; start += 32) {
    const int i = start + lane;
    const int32_t v = i < count ? list[i] : -1;
    const unsigned valid = __ballot_sync(0xffffffffu, v >= 0);
    if (v >= 0) keys[base + __popc(valid & ((1u << lane) - 1u))] = v;
    base += __popc(valid);
  }
  return base;
}

// ---- dequantization of one key tile
// ------------------------------------------------------------------------

// One thread's share of a tile in flight: raw codes and the decoded block scale of each 16-channel chunk.
struct TileRecords {
  uint4 codes[kChunksPerThread];
  float scale[kChunksPerThread];
};

struct KeySource {
  const uint8_t* window_records;
  const uint8_t* entry_records;
  int window_keys;  // keys [0, window_keys) are window rows, [window_keys, total) entries
  int total;
};

// Chunk i of this thread: key (tid + 256 i) / 32 of the tile, 16-channel chunk (tid mod 32). A warp reads
// one key row's record contiguously.
__device__ inline void load_tile(const Layout& s, const KeySource& src, int tile, TileRecords& r) {
#pragma unroll
  for (int i = 0; i < kChunksPerThread; ++i) {
    const int q = static_cast<int>(threadIdx.x) + i * kThreads;
    const int t = tile * kTileKeys + q / kChunksPerKey;
    const int chunk = q % kChunksPerKey;
    r.codes[i] = make_uint4(0, 0, 0, 0);
    r.scale[i] = 0.0f;
    if (t < src.window_keys) {
      const uint8_t* record = src.window_records + static_cast<size_t>(s.keys[t]) * kFp8RecordBytes;
      r.codes[i] = __ldg(reinterpret_cast<const uint4*>(record + chunk * kChunk));
      r.scale[i] = numeric::e8m0_to_float(__ldg(record + kDim + chunk / 2));
    } else if (t < src.total) {
      const uint8_t* record = src.entry_records + static_cast<size_t>(s.keys[t]) * kNvfp4RecordBytes;
      const uint2 codes = __ldg(reinterpret_cast<const uint2*>(record + chunk * (kChunk / 2)));
      r.codes[i] = make_uint4(codes.x, codes.y, 0, 0);
      r.scale[i] = numeric::e4m3_to_float(__ldg(record + kDim / 2 + chunk));
    }
  }
}

// Decodes the loaded chunks to BF16 (exact: E4M3·2^e and E2M1·E4M3 have at most 6 significant bits) into the
// tile. Keys past the row's end decode to zeros (codes and scale 0), so P·V never meets stale data.
__device__ inline void store_tile(const Layout& s, const KeySource& src, int tile, const TileRecords& r) {
#pragma unroll
  for (int i = 0; i < kChunksPerThread; ++i) {
    const int q = static_cast<int>(threadIdx.x) + i * kThreads;
    const int key = q / kChunksPerKey;
    const int chunk = q % kChunksPerKey;
    const bool fp8 = tile * kTileKeys + key < src.window_keys;
    float v[kChunk];
    const uint32_t words[4] = {r.codes[i].x, r.codes[i].y, r.codes[i].z, r.codes[i].w};
    if (fp8) {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float y[4];
        kv_fast::e4m3x4_decode(words[w], r.scale[i], y);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[4 * w + j] = y[j];
      }
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float y[4];
        kv_fast::e2m1x4_decode(words[w / 2] >> (16 * (w % 2)), r.scale[i], y);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[4 * w + j] = y[j];
      }
    }
    uint4 lo, hi;
    lo.x = bf16x2_bits(v[0], v[1]);
    lo.y = bf16x2_bits(v[2], v[3]);
    lo.z = bf16x2_bits(v[4], v[5]);
    lo.w = bf16x2_bits(v[6], v[7]);
    hi.x = bf16x2_bits(v[8], v[9]);
    hi.y = bf16x2_bits(v[10], v[11]);
    hi.z = bf16x2_bits(v[12], v[13]);
    hi.w = bf16x2_bits(v[14], v[15]);
    uint8_t* row = s.tile + key * kTileRowBytes;
    *reinterpret_cast<uint4*>(row + (((2 * chunk) ^ (key & 7)) << 4)) = lo;
    *reinterpret_cast<uint4*>(row + (((2 * chunk + 1) ^ (key & 7)) << 4)) = hi;
  }
}

// ---- phase 1: raw logits S = Q·Kᵀ
// --------------------------------------------------------------------------

__device__ void compute_logits(const Layout& s, const KeySource& src, const uint16_t* q_row, int tiles) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int head0 = 16 * (warp & 3);   // this warp's 16 heads
  const int dim0 = 256 * (warp >> 2);  // and its half of the channels
  const bool second_half = (warp >> 2) != 0;

  // A fragments of Q[head0 .. +16][dim0 .. +256]: 16 k-steps of m16n8k16.
  uint32_t qa[16][4];
  const auto q_pair = [&](int head, int dim) {
    return __ldg(reinterpret_cast<const uint32_t*>(q_row + head * kDim + dim));
  };
#pragma unroll
  for (int ks = 0; ks < 16; ++ks) {
    const int d = dim0 + 16 * ks + 2 * c;
    qa[ks][0] = q_pair(head0 + g, d);
    qa[ks][1] = q_pair(head0 + g + 8, d);
    qa[ks][2] = q_pair(head0 + g, d + 8);
    qa[ks][3] = q_pair(head0 + g + 8, d + 8);
  }

  const int mi = lane / 8, r = lane % 8;
  TileRecords records;
  if (tiles > 0) load_tile(s, src, 0, records);
  for (int tile = 0; tile < tiles; ++tile) {
    store_tile(s, src, tile, records);
    __syncthreads();  // tile complete; the previous tile's partial sums are in
    if (tile + 1 < tiles) load_tile(s, src, tile + 1, records);

    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) {
      const int chunk = (dim0 + 16 * ks) / 8 + (mi & 1);
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        uint32_t b[4];
        ldmatrix_x4(tile_chunk_address(s.tile, 16 * jp + r + 8 * (mi >> 1), chunk), b);
        mma_bf16(acc[2 * jp], qa[ks], b[0], b[1]);
        mma_bf16(acc[2 * jp + 1], qa[ks], b[2], b[3]);
      }
    }
    // rows head0+g and head0+g+8, columns tile·64 + 8j + 2c (+1)
    const auto slot = [&](int j, int half) {
      const int h = head0 + g + 8 * half;
      return reinterpret_cast<float2*>(s.logits + static_cast<size_t>(h) * s.key_stride +
                                       logit_column(h, tile * kTileKeys + 8 * j + 2 * c));
    };
    if (!second_half) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *slot(j, 0) = make_float2(acc[j][0], acc[j][1]);
        *slot(j, 1) = make_float2(acc[j][2], acc[j][3]);
      }
    }
    __syncthreads();  // first halves stored; every warp is done reading the tile
    if (second_half) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float2* lo = slot(j, 0);
        float2* hi = slot(j, 1);
        *lo = make_float2(lo->x + acc[j][0], lo->y + acc[j][1]);
        *hi = make_float2(hi->x + acc[j][2], hi->y + acc[j][3]);
      }
    }
  }
  __syncthreads();
}

// ---- phase 2: probabilities
// --------------------------------------------------------------------------------

// p_t = BF16(fp32(exp(l_t − M) / Z)), l = scale·S, M = max(sink, l), Z = Σ exp(l − M) + exp(sink − M): the
// CPU backend's order of operations (it uses double where this uses fp32). Columns past the row's keys get 0.
__device__ void compute_probabilities(const Layout& s, int total, int tiles, const float* sink, float scale) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int h = warp * 8; h < warp * 8 + 8; ++h) {
    const float* row = s.logits + static_cast<size_t>(h) * s.key_stride;
    const float sink_logit = sink[h];
    float2 e[kMaxTiles];
    float peak = sink_logit;
#pragma unroll
    for (int i = 0; i < kMaxTiles; ++i) {
      const int t = i * kTileKeys + 2 * lane;
      e[i] = make_float2(-INFINITY, -INFINITY);
      if (i < tiles) {
        const float2 raw = *reinterpret_cast<const float2*>(row + logit_column(h, t));
        if (t < total) e[i].x = raw.x * scale;
        if (t + 1 < total) e[i].y = raw.y * scale;
        peak = fmaxf(peak, fmaxf(e[i].x, e[i].y));
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      peak = fmaxf(peak, __shfl_xor_sync(0xffffffffu, peak, offset));
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxTiles; ++i) {
      if (i < tiles) {
        e[i].x = expf(e[i].x - peak);  // exp(-inf) = 0 for columns past the keys
        e[i].y = expf(e[i].y - peak);
        sum += e[i].x + e[i].y;
      }
    }
    // butterfly: every lane adds the same two operands at each step, so all lanes hold the same sum
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float denominator = sum + expf(sink_logit - peak);
    __syncwarp();  // every lane has read the row before it is overwritten by P
#pragma unroll
    for (int i = 0; i < kMaxTiles; ++i) {
      if (i < tiles) {
        const int t = i * kTileKeys + 2 * lane;
        const uint32_t p = bf16x2_bits(__fdiv_rn(e[i].x, denominator), __fdiv_rn(e[i].y, denominator));
        *reinterpret_cast<uint32_t*>(prob_chunk(s, h, t / 8) + (t % 8) * 2) = p;
      }
    }
  }
  __syncthreads();
}

// ---- phase 3: O = P·V
// --------------------------------------------------------------------------------------

__device__ void compute_output(const Layout& s, const KeySource& src, int tiles, uint16_t* out_row) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int mi = lane / 8, r = lane % 8;
  const int dim0 = 64 * warp;  // this warp's 64 output channels, all 64 heads

  float acc[4][8][4];
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;

  TileRecords records;
  if (tiles > 0) load_tile(s, src, 0, records);
  for (int tile = 0; tile < tiles; ++tile) {
    store_tile(s, src, tile, records);
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
          mma_bf16(acc[m][2 * jp], a[m], b[0], b[1]);
          mma_bf16(acc[m][2 * jp + 1], a[m], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the tile is free for the next one
  }

#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int d = dim0 + 8 * j + 2 * c;
      uint16_t* lo = out_row + (16 * m + g) * kDim + d;
      uint16_t* hi = out_row + (16 * m + g + 8) * kDim + d;
      *reinterpret_cast<uint32_t*>(lo) = bf16x2_bits(acc[m][j][0], acc[m][j][1]);
      *reinterpret_cast<uint32_t*>(hi) = bf16x2_bits(acc[m][j][2], acc[m][j][3]);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_kernel(SparseAttentionArgs args, int key_stride, float scale) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int row_counts[2];
  Layout s;
  s.logits = reinterpret_cast<float*>(smem);
  s.tile = smem + static_cast<size_t>(kHeads) * key_stride * sizeof(float);
  s.keys = reinterpret_cast<int32_t*>(s.tile + kTileBytes);
  s.key_stride = key_stride;

  const int64_t row = blockIdx.x;
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    const int window_keys = args.window_cap > 0 ? append_valid(args.window_rows + row * args.window_cap,
                                                               args.window_cap, s.keys, 0, lane)
                                                : 0;
    const int total =
        args.topk > 0 ? append_valid(args.selection + row * args.topk, args.topk, s.keys, window_keys, lane)
                      : window_keys;
    if (lane == 0) {
      row_counts[0] = window_keys;
      row_counts[1] = total;
    }
  }
  __syncthreads();
  const KeySource src{args.window_records, args.entry_records, row_counts[0], row_counts[1]};
  const int tiles = (src.total + kTileKeys - 1) / kTileKeys;

  compute_logits(s, src, args.q + row * kHeads * kDim, tiles);
  compute_probabilities(s, src.total, tiles, args.sink, scale);
  compute_output(s, src, tiles, args.out + row * kHeads * kDim);
}

}  // namespace

void sparse_attention(const SparseAttentionArgs& args, cudaStream_t stream) {
  validate_sparse_attention_args(args);
  if (args.n == 0) return;
  const int keys = args.window_cap + args.topk;
  const int key_stride = std::max(kTileKeys, (keys + kTileKeys - 1) / kTileKeys * kTileKeys);
  const size_t smem = static_cast<size_t>(kHeads) * key_stride * sizeof(float) + kTileBytes +
                      static_cast<size_t>(key_stride) * sizeof(int32_t);
  // once per device, at the largest size any call uses (setting it on every call costs host time that shows
  // at small batches)
  static std::atomic<uint64_t> configured_devices{0};
  int device = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (configured_devices.load(std::memory_order_acquire) & bit) == 0) {
    const size_t most = static_cast<size_t>(kHeads) * kSparseAttentionMaxKeys * sizeof(float) + kTileBytes +
                        static_cast<size_t>(kSparseAttentionMaxKeys) * sizeof(int32_t);
    FKV_CUDA_CHECK(cudaFuncSetAttribute(sparse_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(most)));
    configured_devices.fetch_or(bit, std::memory_order_release);
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kDim)));
  sparse_attention_kernel<<<static_cast<unsigned>(args.n), kThreads, smem, stream>>>(args, key_stride, scale);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace flashkv::cuda
