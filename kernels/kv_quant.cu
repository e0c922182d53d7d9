// KV record quantizers on the GPU (contract in kv_quant.cuh).
//
// Work split: a quantizer thread owns one "chunk" of 32 input bytes of a row (8 fp32 or 16 BF16
// channels); the 2..4 lanes sharing a scale block combine their partial amax with warp shuffles (NVFP4
// from BF16 needs none: a chunk is a whole block). A CTA covers whole rows, so a row's record is written
// by consecutive lanes: packed data as one contiguous run, the scale bytes as a second run. A loop step
// covers kQuantizeTiles row tiles and each thread issues the loads of all of them before computing, to
// keep more bytes in flight per SM. A dequantizer thread decodes 4-channel pieces into one 16-byte
// store each (a warp stores 512 contiguous bytes), kDequantizeTiles row tiles per step. Grids are sized
// to the resident capacity of the device and stride over rows, so any n runs with no tail wave.
// Bulk variants (KvKernelVariant, chosen per launcher by auto_*_variant): quantizers read their chunks
// from a shared-memory ring filled by cp.async.bulk, and dequantizers write through double-buffered
// shared-memory staging and bulk stores, so bytes stay in flight without holding registers.
//
// Numerics: records are byte-identical to the host codecs of <flashkv/numeric/kv_records.hpp>. Block
// scales come from the host functions themselves, compiled for the device (they use explicit _rn
// arithmetic, so nvcc's FMA contraction cannot change them); element codes come from the exact
// shortcuts of kv_element_codecs.cuh (BF16 inputs to FP4 through f16x2 pairs), proven equal to the host
// encoders and decoders by exhaustive device tests.
#include "kv_quant.cuh"

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "kv_element_codecs.cuh"
#include "kv_quant_args.hpp"

namespace flashkv::cuda {
namespace {

namespace nm = flashkv::numeric;

constexpr int kChunkBytesIn = 32;  // input bytes per thread: two 16-byte loads
constexpr int kMinThreads = 256;   // CTA size unless one row needs more threads
constexpr unsigned kFullMask = 0xffffffffu;
// Row tiles per loop step (loads of all of them in flight before any compute): chosen on the H200 among
// 1/2/4 (quantizers) and 2/4/8 (dequantizers), docs/perf-notes/kv-quant.md.
constexpr int kQuantizeTiles = 4;
constexpr int kDequantizeTiles = 8;

// ---- record kinds ------------------------------------------------------------------------------
// Each kind states its block size and element width, chooses the block scale with the host function,
// and encodes a chunk of elements with the exact shortcuts of kv_element_codecs.cuh. Decoding reuses
// the host functions as they are (a dequantizer has fewer elements per byte moved).

struct Fp8Row {
  static constexpr int kBlock = nm::kFp8RowBlock;
  static constexpr int kBitsPerChannel = 8;
  __host__ __device__ static size_t record_bytes(int C) { return nm::fp8_row_bytes(C); }
  __device__ static uint8_t scale_code(float amax) { return nm::fp8_block_scale_code(amax); }
  __device__ static float scale_value(uint8_t code) { return nm::e8m0_to_float(code); }
  template <bool kBf16, int N>
  __device__ static void encode(const float (&x)[N], float scale, uint32_t (&packed)[N / 4]) {
    const float inverse = nm::div_rn(1.0f, scale);  // exact: scale is a power of two
#pragma unroll
    for (int w = 0; w < N / 4; ++w) {
      const float* v = &x[4 * w];
      const uint32_t lo = kv_fast::e4m3x2_codes(nm::mul_rn(v[0], inverse), nm::mul_rn(v[1], inverse));
      const uint32_t hi = kv_fast::e4m3x2_codes(nm::mul_rn(v[2], inverse), nm::mul_rn(v[3], inverse));
      packed[w] = lo | (hi << 16);
    }
  }
  // Four codes (byte i = channel i) times the scale; equals fp8_decode per channel.
  __device__ static void decode4(uint32_t codes, float scale, float (&y)[4]) {
    kv_fast::e4m3x4_decode(codes, scale, y);
  }
};

// E2M1 words of BF16-valued channels, two per f16x2 step (exact for BF16 inputs only; see
// kv_element_codecs.cuh): byte i of a word holds channels 2i (low nibble) and 2i + 1.
template <int N>
__device__ void encode_fp4_bf16(const float (&x)[N], float reciprocal, uint32_t (&packed)[N / 8]) {
#pragma unroll
  for (int w = 0; w < N / 8; ++w) {
    uint32_t word = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int i = 8 * w + 2 * b;
      word |= kv_fast::e2m1x2_codes_bf16(x[i], x[i + 1], reciprocal) << (8 * b);
    }
    packed[w] = word;
  }
}

struct Nvfp4Entry {
  static constexpr int kBlock = nm::kNvfp4Block;
  static constexpr int kBitsPerChannel = 4;
  __host__ __device__ static size_t record_bytes(int C) { return nm::nvfp4_entry_bytes(C); }
  __device__ static uint8_t scale_code(float amax) { return nm::nvfp4_block_scale_code(amax); }
  __device__ static float scale_value(uint8_t code) { return nm::e4m3_to_float(code); }
  template <bool kBf16, int N>
  __device__ static void encode(const float (&x)[N], float scale, uint32_t (&packed)[N / 8]) {
    const float reciprocal = nm::div_rn(1.0f, scale);
    if constexpr (kBf16) {
      encode_fp4_bf16(x, reciprocal, packed);
    } else {
#pragma unroll
      for (int w = 0; w < N / 8; ++w) {
        uint32_t word = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float v = x[8 * w + i];
          const float quotient = kv_fast::divide_by_scale(fabsf(v), scale, reciprocal);
          word |= kv_fast::e2m1_code(quotient, v) << (4 * i);
        }
        packed[w] = word;
      }
    }
  }
  // Four codes (nibble i = channel i) times the scale; equals fp4_decode per channel.
  __device__ static void decode4(uint32_t codes, float scale, float (&y)[4]) {
    kv_fast::e2m1x4_decode(codes, scale, y);
  }
};

struct Mxfp4Key {
  static constexpr int kBlock = nm::kMxfp4Block;
  static constexpr int kBitsPerChannel = 4;
  __host__ __device__ static size_t record_bytes(int C) { return nm::mxfp4_key_bytes(C); }
  __device__ static uint8_t scale_code(float amax) { return nm::mxfp4_block_scale_code(amax); }
  __device__ static float scale_value(uint8_t code) { return nm::e8m0_to_float(code); }
  template <bool kBf16, int N>
  __device__ static void encode(const float (&x)[N], float scale, uint32_t (&packed)[N / 8]) {
    const float inverse = nm::div_rn(1.0f, scale);  // exact: scale is a power of two
    if constexpr (kBf16) {
      encode_fp4_bf16(x, inverse, packed);
    } else {
#pragma unroll
      for (int w = 0; w < N / 8; ++w) {
        uint32_t word = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float v = x[8 * w + i];
          word |= kv_fast::e2m1_code(nm::mul_rn(fabsf(v), inverse), v) << (4 * i);
        }
        packed[w] = word;
      }
    }
  }
  // Four codes (nibble i = channel i) times the scale; equals fp4_decode per channel.
  __device__ static void decode4(uint32_t codes, float scale, float (&y)[4]) {
    kv_fast::e2m1x4_decode(codes, scale, y);
  }
};

// ---- input element types -----------------------------------------------------------------------

struct F32In {
  using Storage = float;
  static constexpr int kChannels = kChunkBytesIn / 4;
  static constexpr bool kBf16 = false;
};

struct Bf16In {
  using Storage = uint16_t;
  static constexpr int kChannels = kChunkBytesIn / 2;
  static constexpr bool kBf16 = true;
};

// ---- memory access -----------------------------------------------------------------------------

// One chunk's 32 input bytes as eight little-endian words, loaded before any of them is used so a
// thread can keep several chunks in flight. kVector: the address is 16-byte aligned (two 16-byte loads).
template <class In, bool kVector>
__device__ void load_chunk_words(const typename In::Storage* src, uint32_t (&words)[8]) {
  if constexpr (kVector) {
    const uint4* src4 = reinterpret_cast<const uint4*>(src);
    const uint4 lo = __ldg(src4);
    const uint4 hi = __ldg(src4 + 1);
    words[0] = lo.x, words[1] = lo.y, words[2] = lo.z, words[3] = lo.w;
    words[4] = hi.x, words[5] = hi.y, words[6] = hi.z, words[7] = hi.w;
  } else if constexpr (In::kChannels == 8) {
#pragma unroll
    for (int i = 0; i < 8; ++i) words[i] = __float_as_uint(__ldg(src + i));
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      words[i] = __ldg(src + 2 * i) | (static_cast<uint32_t>(__ldg(src + 2 * i + 1)) << 16);
  }
}

// The chunk's channels as fp32 (a BF16 is the top half of its fp32).
template <class In>
__device__ void unpack_chunk(const uint32_t (&words)[8], float (&x)[In::kChannels]) {
  if constexpr (In::kChannels == 8) {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = __uint_as_float(words[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[2 * i] = __uint_as_float(words[i] << 16);
      x[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
}

// Stores `kBytes` bytes of `packed` (little-endian: byte 0 first) at `dst`, with the widest
// accesses its runtime alignment allows (records of odd strides are not 16-byte aligned).
template <int kBytes>
__device__ void store_packed(uint8_t* dst, const uint32_t (&packed)[(kBytes + 3) / 4]) {
  const auto address = reinterpret_cast<uintptr_t>(dst);
  if constexpr (kBytes == 16) {
    if ((address & 15u) == 0) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      return;
    }
  }
  if constexpr (kBytes >= 8) {
    if ((address & 7u) == 0) {
#pragma unroll
      for (int i = 0; i < kBytes / 8; ++i) {
        reinterpret_cast<uint2*>(dst)[i] = make_uint2(packed[2 * i], packed[2 * i + 1]);
      }
      return;
    }
  }
  if ((address & 3u) == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 4; ++i) reinterpret_cast<uint32_t*>(dst)[i] = packed[i];
    return;
  }
#pragma unroll
  for (int i = 0; i < kBytes; ++i) dst[i] = static_cast<uint8_t>(packed[i / 4] >> (8 * (i % 4)));
}

// Max over the `kLanes` consecutive lanes (a power of two dividing 32) that share a scale block;
// NaN-propagating like the host's block_amax, so a poisoned block gets the same scale on both sides.
template <int kLanes>
__device__ float group_max(float v) {
#pragma unroll
  for (int offset = 1; offset < kLanes; offset *= 2)
    v = kv_fast::amax_combine(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// ---- asynchronous bulk copies (sm_90) -----------------------------------------------------------
// A bulk copy moves a contiguous run of bytes (16-byte aligned, a multiple of 16 long) between global
// and shared memory without registers, so a CTA keeps tens of KB in flight while its threads compute.
// Loads complete on an mbarrier (expect_tx counts the bytes); stores are tracked per issuing thread in
// bulk async-groups.

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void mbarrier_init(uint64_t* barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(barrier)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Starts a copy of `bytes` from global `src` into shared `dst`, completing the phase of `barrier`.
__device__ inline void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* barrier) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)),
               "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
}

__device__ inline void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred done;\n"
      "WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
      "@!done bra WAIT;\n}" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// Makes this thread's ordinary shared-memory stores visible to a following bulk copy (async proxy).
__device__ inline void fence_shared_for_bulk() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ inline void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(shared_address(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most `kPending` of this thread's bulk stores still read their shared source.
template <int kPending>
__device__ inline void bulk_wait_source_free() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until all of this thread's bulk stores are complete.
__device__ inline void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// ---- kernels -----------------------------------------------------------------------------------

// Row geometry shared by launcher and kernel: which rows and chunk a thread owns.
struct Tiling {
  int threads;        // CTA size
  int rows_per_tile;  // rows a CTA covers per tile; a loop step covers kTiles tiles
};

// Quantizes the chunk `x` of one row (all lanes call it: the scale needs the group's shuffles) and, when
// `active`, writes its packed codes and, from the group's first lane, its scale byte.
template <class Kind, bool kBf16, int kChannels>
__device__ void quantize_chunk(const float (&x)[kChannels], bool active, uint8_t* record, int chunk,
                               size_t data_bytes) {
  constexpr int kLanesPerBlock = Kind::kBlock / kChannels;  // 1, 2 or 4 lanes share a scale
  constexpr int kOutBytes = kChannels * Kind::kBitsPerChannel / 8;
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kChannels; ++i) amax = kv_fast::amax_update(amax, x[i]);
  amax = group_max<kLanesPerBlock>(amax);
  if (!active) return;
  const uint8_t scale_code = Kind::scale_code(amax);
  const float scale = Kind::scale_value(scale_code);
  uint32_t packed[kOutBytes / 4];
  if (nm::is_nan(scale)) {
    // A poisoned block (NaN/Inf inside, or an NVFP4 scale past 448): all codes 0, as on the host.
#pragma unroll
    for (uint32_t& word : packed) word = 0;
  } else {
    Kind::template encode<kBf16>(x, scale, packed);
  }
  store_packed<kOutBytes>(record + static_cast<size_t>(chunk) * kOutBytes, packed);
  if (chunk % kLanesPerBlock == 0) record[data_bytes + chunk / kLanesPerBlock] = scale_code;
}

// A loop step covers kTiles tiles of rows; the thread loads its chunk of every tile first (2 x 16 B
// each), so each thread has kTiles x 32 bytes in flight before it computes anything.
template <class Kind, class In, bool kVectorIn, int kTiles>
__global__ void __launch_bounds__(1024)
    quantize_kernel(const typename In::Storage* __restrict__ rows, int64_t n, int C,
                    uint8_t* __restrict__ records, int rows_per_tile) {
  constexpr int kChannels = In::kChannels;
  static_assert(Kind::kBlock % kChannels == 0, "a chunk must not straddle two scale blocks");

  const int chunks_per_row = C / kChannels;
  const int row_in_tile = static_cast<int>(threadIdx.x) / chunks_per_row;
  const int chunk = static_cast<int>(threadIdx.x) - row_in_tile * chunks_per_row;
  const bool thread_has_row = row_in_tile < rows_per_tile;
  const size_t record_bytes = Kind::record_bytes(C);
  const size_t data_bytes = static_cast<size_t>(C) * Kind::kBitsPerChannel / 8;
  const int64_t rows_per_step = static_cast<int64_t>(rows_per_tile) * kTiles;

  // The loop condition is uniform over the CTA, so every lane reaches the shuffles.
  for (int64_t step = static_cast<int64_t>(blockIdx.x) * rows_per_step; step < n;
       step += static_cast<int64_t>(gridDim.x) * rows_per_step) {
    uint32_t words[kTiles][8];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const int64_t row = step + static_cast<int64_t>(t) * rows_per_tile + row_in_tile;
      if (thread_has_row && row < n) {
        load_chunk_words<In, kVectorIn>(rows + row * C + static_cast<int64_t>(chunk) * kChannels, words[t]);
      } else {
#pragma unroll
        for (uint32_t& w : words[t]) w = 0;
      }
    }
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const int64_t row = step + static_cast<int64_t>(t) * rows_per_tile + row_in_tile;
      float x[kChannels];
      unpack_chunk<In>(words[t], x);
      quantize_chunk<Kind, In::kBf16, kChannels>(
          x, thread_has_row && row < n, records + static_cast<size_t>(row) * record_bytes, chunk, data_bytes);
    }
  }
}

// Quantizer fed by a ring of kStages shared-memory stages, each kTilesPerStage row tiles (the rows are
// contiguous, so a stage is one bulk copy). Thread 0 refills a stage once the whole CTA has read it;
// the other stages stay in flight meanwhile. CTAs take stages round-robin (a persistent grid).
// Requires 16-byte aligned rows and one tile per 256-thread CTA (chunks_per_row <= 256).
template <class Kind, class In, int kStages, int kTilesPerStage>
__global__ void __launch_bounds__(kMinThreads)
    quantize_ring_kernel(const typename In::Storage* __restrict__ rows, int64_t n, int C,
                         uint8_t* __restrict__ records, int rows_per_tile) {
  using Storage = typename In::Storage;
  constexpr int kChannels = In::kChannels;
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ uint64_t filled[kStages];

  const int chunks_per_row = C / kChannels;
  const int row_in_tile = static_cast<int>(threadIdx.x) / chunks_per_row;
  const int chunk = static_cast<int>(threadIdx.x) - row_in_tile * chunks_per_row;
  const bool thread_has_row = row_in_tile < rows_per_tile;
  const size_t record_bytes = Kind::record_bytes(C);
  const size_t data_bytes = static_cast<size_t>(C) * Kind::kBitsPerChannel / 8;
  const int rows_per_stage = rows_per_tile * kTilesPerStage;
  const size_t row_bytes = static_cast<size_t>(C) * sizeof(Storage);
  const size_t stage_bytes = static_cast<size_t>(rows_per_stage) * row_bytes;
  const int64_t stages_total = (n + rows_per_stage - 1) / rows_per_stage;

  auto refill = [&](int slot, int64_t stage) {
    const int64_t first_row = stage * rows_per_stage;
    const int64_t rows_here = n - first_row < rows_per_stage ? n - first_row : rows_per_stage;
    bulk_load(ring + static_cast<size_t>(slot) * stage_bytes, rows + first_row * C,
              static_cast<uint32_t>(static_cast<size_t>(rows_here) * row_bytes), &filled[slot]);
  };
  if (threadIdx.x == 0) {
    for (int slot = 0; slot < kStages; ++slot) mbarrier_init(&filled[slot]);
    for (int slot = 0; slot < kStages; ++slot) {
      const int64_t stage = blockIdx.x + static_cast<int64_t>(slot) * gridDim.x;
      if (stage < stages_total) refill(slot, stage);
    }
  }
  __syncthreads();

  int slot = 0;
  uint32_t parity = 0;
  for (int64_t stage = blockIdx.x; stage < stages_total; stage += gridDim.x) {
    mbarrier_wait(&filled[slot], parity);
    const uint8_t* staged = ring + static_cast<size_t>(slot) * stage_bytes;
    const int64_t first_row = stage * rows_per_stage;
#pragma unroll
    for (int t = 0; t < kTilesPerStage; ++t) {
      const int row_in_stage = t * rows_per_tile + row_in_tile;
      const int64_t row = first_row + row_in_stage;
      const bool active = thread_has_row && row < n;
      uint32_t words[8] = {};
      if (active) {
        const auto* src =
            reinterpret_cast<const uint4*>(staged + static_cast<size_t>(row_in_stage) * row_bytes +
                                           static_cast<size_t>(chunk) * kChunkBytesIn);
        const uint4 lo = src[0];
        const uint4 hi = src[1];
        words[0] = lo.x, words[1] = lo.y, words[2] = lo.z, words[3] = lo.w;
        words[4] = hi.x, words[5] = hi.y, words[6] = hi.z, words[7] = hi.w;
      }
      float x[kChannels];
      unpack_chunk<In>(words, x);
      quantize_chunk<Kind, In::kBf16, kChannels>(x, active, records + static_cast<size_t>(row) * record_bytes,
                                                 chunk, data_bytes);
    }
    __syncthreads();  // every thread is done with this slot
    if (threadIdx.x == 0) {
      const int64_t next = stage + static_cast<int64_t>(kStages) * gridDim.x;
      if (next < stages_total) refill(slot, next);
    }
    if (++slot == kStages) slot = 0, parity ^= 1u;
  }
}

// Dequantizer: a thread decodes pieces of 4 channels (4 or 2 record bytes) into one 16-byte fp32 store,
// so a warp's store covers 512 contiguous bytes. A loop step covers kTiles tiles of rows; the record
// bytes of every tile are loaded first. Rows wider than the CTA are walked in CTA-wide column passes.
constexpr int kPieceChannels = 4;

template <int kBytes>
__device__ uint32_t load_piece(const uint8_t* src) {
  if constexpr (kBytes == 4) {
    if ((reinterpret_cast<uintptr_t>(src) & 3u) == 0) return __ldg(reinterpret_cast<const uint32_t*>(src));
  } else {
    if ((reinterpret_cast<uintptr_t>(src) & 1u) == 0) return __ldg(reinterpret_cast<const uint16_t*>(src));
  }
  uint32_t word = 0;
#pragma unroll
  for (int i = 0; i < kBytes; ++i) word |= static_cast<uint32_t>(__ldg(src + i)) << (8 * i);
  return word;
}

template <class Kind, bool kVectorOut, int kTiles, bool kStreaming = false>
__global__ void __launch_bounds__(1024)
    dequantize_kernel(const uint8_t* __restrict__ records, int64_t n, int C, float* __restrict__ rows,
                      int rows_per_tile) {
  constexpr int kPieceBytes = kPieceChannels * Kind::kBitsPerChannel / 8;
  constexpr int kPiecesPerBlock = Kind::kBlock / kPieceChannels;

  const int pieces_per_row = C / kPieceChannels;
  const int threads = static_cast<int>(blockDim.x);
  // Wide rows (more pieces than threads) take one row per tile and several column passes.
  const int row_in_tile = pieces_per_row >= threads ? 0 : static_cast<int>(threadIdx.x) / pieces_per_row;
  const int first_piece = static_cast<int>(threadIdx.x) - row_in_tile * pieces_per_row;
  if (row_in_tile >= rows_per_tile) return;  // no shuffles here: idle lanes may leave
  const size_t record_bytes = Kind::record_bytes(C);
  const size_t data_bytes = static_cast<size_t>(C) * Kind::kBitsPerChannel / 8;
  const int64_t rows_per_step = static_cast<int64_t>(rows_per_tile) * kTiles;

  for (int64_t step = static_cast<int64_t>(blockIdx.x) * rows_per_step; step < n;
       step += static_cast<int64_t>(gridDim.x) * rows_per_step) {
    for (int piece = first_piece; piece < pieces_per_row; piece += threads) {
      uint32_t codes[kTiles];
      uint8_t scale_codes[kTiles];
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const int64_t row = step + static_cast<int64_t>(t) * rows_per_tile + row_in_tile;
        codes[t] = 0;
        scale_codes[t] = 0;
        if (row < n) {
          const uint8_t* record = records + static_cast<size_t>(row) * record_bytes;
          codes[t] = load_piece<kPieceBytes>(record + static_cast<size_t>(piece) * kPieceBytes);
          scale_codes[t] = __ldg(record + data_bytes + piece / kPiecesPerBlock);
        }
      }
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const int64_t row = step + static_cast<int64_t>(t) * rows_per_tile + row_in_tile;
        if (row >= n) continue;
        float y[kPieceChannels];
        Kind::decode4(codes[t], Kind::scale_value(scale_codes[t]), y);
        float* dst = rows + row * C + static_cast<int64_t>(piece) * kPieceChannels;
        if constexpr (kVectorOut) {
          if constexpr (kStreaming) {
            __stcs(reinterpret_cast<float4*>(dst), make_float4(y[0], y[1], y[2], y[3]));
          } else {
            *reinterpret_cast<float4*>(dst) = make_float4(y[0], y[1], y[2], y[3]);
          }
        } else {
#pragma unroll
          for (int i = 0; i < kPieceChannels; ++i) dst[i] = y[i];
        }
      }
    }
  }
}

// Dequantizer whose outputs go through shared memory: a step's kTiles row tiles are decoded into one of
// two staging buffers (laid out as the rows are in memory) and written by one bulk store, which drains
// while the CTA loads and decodes the next step. Requires 16-byte aligned output rows and one tile per
// 256-thread CTA (C / 4 <= 256).
template <class Kind, int kTiles>
__global__ void __launch_bounds__(kMinThreads)
    dequantize_bulk_store_kernel(const uint8_t* __restrict__ records, int64_t n, int C,
                                 float* __restrict__ rows, int rows_per_tile) {
  constexpr int kPieceBytes = kPieceChannels * Kind::kBitsPerChannel / 8;
  constexpr int kPiecesPerBlock = Kind::kBlock / kPieceChannels;
  extern __shared__ __align__(128) uint8_t staging_bytes[];
  float* const staging = reinterpret_cast<float*>(staging_bytes);

  const int pieces_per_row = C / kPieceChannels;
  const int row_in_tile = static_cast<int>(threadIdx.x) / pieces_per_row;
  const int piece = static_cast<int>(threadIdx.x) - row_in_tile * pieces_per_row;
  const bool thread_has_row = row_in_tile < rows_per_tile;  // all threads stay: the CTA synchronizes
  const size_t record_bytes = Kind::record_bytes(C);
  const size_t data_bytes = static_cast<size_t>(C) * Kind::kBitsPerChannel / 8;
  const int64_t rows_per_step = static_cast<int64_t>(rows_per_tile) * kTiles;
  const size_t buffer_floats = static_cast<size_t>(rows_per_step) * C;

  int buffer = 0;
  for (int64_t step = static_cast<int64_t>(blockIdx.x) * rows_per_step; step < n;
       step += static_cast<int64_t>(gridDim.x) * rows_per_step) {
    uint32_t codes[kTiles];
    uint8_t scale_codes[kTiles];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const int64_t row = step + static_cast<int64_t>(t) * rows_per_tile + row_in_tile;
      codes[t] = 0;
      scale_codes[t] = 0;
      if (thread_has_row && row < n) {
        const uint8_t* record = records + static_cast<size_t>(row) * record_bytes;
        codes[t] = load_piece<kPieceBytes>(record + static_cast<size_t>(piece) * kPieceBytes);
        scale_codes[t] = __ldg(record + data_bytes + piece / kPiecesPerBlock);
      }
    }
    if (threadIdx.x == 0) bulk_wait_source_free<1>();  // the store issued two steps ago has read `buffer`
    __syncthreads();
    float* const out = staging + static_cast<size_t>(buffer) * buffer_floats;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const int row_in_step = t * rows_per_tile + row_in_tile;
      if (!thread_has_row || step + row_in_step >= n) continue;
      float y[kPieceChannels];
      Kind::decode4(codes[t], Kind::scale_value(scale_codes[t]), y);
      *reinterpret_cast<float4*>(out + static_cast<size_t>(row_in_step) * C + piece * kPieceChannels) =
          make_float4(y[0], y[1], y[2], y[3]);
    }
    fence_shared_for_bulk();
    __syncthreads();
    if (threadIdx.x == 0) {
      const int64_t rows_here = n - step < rows_per_step ? n - step : rows_per_step;
      bulk_store(rows + step * C, out,
                 static_cast<uint32_t>(static_cast<size_t>(rows_here) * C * sizeof(float)));
    }
    buffer ^= 1;
  }
  if (threadIdx.x == 0) bulk_wait_all();
}

// ---- launch ------------------------------------------------------------------------------------

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// A CTA covers whole rows: 256 threads, or one row's chunks rounded up to whole warps when a row needs
// more, capped at 1024 (the dequantizer walks wider rows in passes; the quantizers' chunks never exceed
// 1024 per row for C up to kMaxKvChannels).
Tiling tiling_for(int chunks_per_row) {
  if (chunks_per_row <= kMinThreads) return {kMinThreads, kMinThreads / chunks_per_row};
  const int threads = (chunks_per_row + 31) / 32 * 32;
  return {threads < 1024 ? threads : 1024, 1};
}

// Enough CTAs to fill every SM at the kernel's occupancy (with `shared_bytes` of dynamic shared memory
// each), fewer when the rows run out first.
template <typename Kernel>
int grid_for(Kernel kernel, const Tiling& tiling, int64_t rows_per_cta_step, int64_t n, size_t shared_bytes) {
  int device = 0, sms = 0, per_sm = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  FKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (shared_bytes > 48 * 1024) {
    FKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared_bytes)));
  }
  FKV_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tiling.threads, shared_bytes));
  const int64_t resident = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  const int64_t needed = (n + rows_per_cta_step - 1) / rows_per_cta_step;
  return static_cast<int>(needed < resident ? needed : resident);
}

// The tuned choice per launcher (H200, docs/perf-notes/kv-quant.md, run C). FP8 rows gain most from
// the bulk ring; the FP4 quantizers are nearer their instruction budget and lose more to the ring's
// fewer resident warps and per-stage barrier than they gain, except MXFP4 from fp32.
template <class Kind, class In>
KvKernelVariant auto_quantize_variant() {
  if constexpr (std::is_same_v<Kind, Fp8Row>) return KvKernelVariant::kBulkLarge;
  if constexpr (std::is_same_v<Kind, Mxfp4Key> && !In::kBf16) return KvKernelVariant::kBulkMedium;
  return KvKernelVariant::kRegisterTiles;
}
// Dequantizers: bulk stores of 32 KB, double-buffered (3 CTAs/SM); 64 KB buffers leave one CTA per SM
// and too few record loads in flight.
KvKernelVariant auto_dequantize_variant() {
  return KvKernelVariant::kBulkMedium;
}

template <class Kind, class In>
void launch_quantize(const char* function, const typename In::Storage* rows, int64_t n, int C,
                     uint8_t* records, cudaStream_t stream, KvKernelVariant variant) {
  using Storage = typename In::Storage;
  validate_kv_quant_args({function, rows, static_cast<size_t>(C) * sizeof(Storage), sizeof(Storage), records,
                          Kind::record_bytes(C), 1, n, C, Kind::kBlock});
  if (n == 0) return;
  const Tiling tiling = tiling_for(C / In::kChannels);
  auto launch = [&](auto kernel, int tiles, size_t shared_bytes) {
    const int grid =
        grid_for(kernel, tiling, static_cast<int64_t>(tiling.rows_per_tile) * tiles, n, shared_bytes);
    kernel<<<grid, tiling.threads, shared_bytes, stream>>>(rows, n, C, records, tiling.rows_per_tile);
    FKV_CUDA_CHECK_LAUNCH();
  };
  if (!aligned16(rows)) {
    launch(quantize_kernel<Kind, In, false, 1>, 1, 0);
    return;
  }
  if (variant == KvKernelVariant::kAuto) variant = auto_quantize_variant<Kind, In>();
  const size_t tile_bytes =
      static_cast<size_t>(tiling.rows_per_tile) * static_cast<size_t>(C) * sizeof(Storage);
  const bool one_tile_per_cta = tiling.threads == kMinThreads;
  if (one_tile_per_cta && variant == KvKernelVariant::kBulkSmall) {
    launch(quantize_ring_kernel<Kind, In, 4, 1>, 1, 4 * tile_bytes);
  } else if (one_tile_per_cta && variant == KvKernelVariant::kBulkMedium) {
    launch(quantize_ring_kernel<Kind, In, 4, 2>, 2, 8 * tile_bytes);
  } else if (one_tile_per_cta && variant == KvKernelVariant::kBulkLarge) {
    launch(quantize_ring_kernel<Kind, In, 3, 4>, 4, 12 * tile_bytes);
  } else {
    launch(quantize_kernel<Kind, In, true, kQuantizeTiles>, kQuantizeTiles, 0);
  }
}

template <class Kind>
void launch_dequantize(const char* function, const uint8_t* records, int64_t n, int C, float* rows,
                       cudaStream_t stream, KvKernelVariant variant) {
  validate_kv_quant_args({function, records, Kind::record_bytes(C), 1, rows,
                          static_cast<size_t>(C) * sizeof(float), sizeof(float), n, C, Kind::kBlock});
  if (n == 0) return;
  const Tiling tiling = tiling_for(C / kPieceChannels);
  auto launch = [&](auto kernel, int tiles, size_t shared_bytes) {
    const int grid =
        grid_for(kernel, tiling, static_cast<int64_t>(tiling.rows_per_tile) * tiles, n, shared_bytes);
    kernel<<<grid, tiling.threads, shared_bytes, stream>>>(records, n, C, rows, tiling.rows_per_tile);
    FKV_CUDA_CHECK_LAUNCH();
  };
  if (!aligned16(rows)) {
    launch(dequantize_kernel<Kind, false, 1>, 1, 0);
    return;
  }
  if (variant == KvKernelVariant::kAuto) variant = auto_dequantize_variant();
  // Two staging buffers of `tiles` row tiles each.
  const size_t tile_bytes =
      static_cast<size_t>(tiling.rows_per_tile) * static_cast<size_t>(C) * sizeof(float);
  const bool one_tile_per_cta = tiling.threads == kMinThreads;
  if (one_tile_per_cta && variant == KvKernelVariant::kBulkSmall) {
    launch(dequantize_bulk_store_kernel<Kind, 4>, 4, 2 * 4 * tile_bytes);
  } else if (one_tile_per_cta && variant == KvKernelVariant::kBulkMedium) {
    launch(dequantize_bulk_store_kernel<Kind, 8>, 8, 2 * 8 * tile_bytes);
  } else if (one_tile_per_cta && variant == KvKernelVariant::kBulkLarge) {
    launch(dequantize_bulk_store_kernel<Kind, 16>, 16, 2 * 16 * tile_bytes);
  } else if (variant == KvKernelVariant::kStreamingStores) {
    launch(dequantize_kernel<Kind, true, kDequantizeTiles, true>, kDequantizeTiles, 0);
  } else {
    launch(dequantize_kernel<Kind, true, kDequantizeTiles>, kDequantizeTiles, 0);
  }
}

}  // namespace

void quantize_fp8_rows(const float* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                       KvKernelVariant variant) {
  launch_quantize<Fp8Row, F32In>("quantize_fp8_rows", rows, n, C, records, stream, variant);
}
void quantize_fp8_rows_bf16(const uint16_t* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                            KvKernelVariant variant) {
  launch_quantize<Fp8Row, Bf16In>("quantize_fp8_rows_bf16", rows, n, C, records, stream, variant);
}
void dequantize_fp8_rows(const uint8_t* records, int64_t n, int C, float* rows, cudaStream_t stream,
                         KvKernelVariant variant) {
  launch_dequantize<Fp8Row>("dequantize_fp8_rows", records, n, C, rows, stream, variant);
}

void quantize_nvfp4_entries(const float* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                            KvKernelVariant variant) {
  launch_quantize<Nvfp4Entry, F32In>("quantize_nvfp4_entries", rows, n, C, records, stream, variant);
}
void quantize_nvfp4_entries_bf16(const uint16_t* rows, int64_t n, int C, uint8_t* records,
                                 cudaStream_t stream, KvKernelVariant variant) {
  launch_quantize<Nvfp4Entry, Bf16In>("quantize_nvfp4_entries_bf16", rows, n, C, records, stream, variant);
}
void dequantize_nvfp4_entries(const uint8_t* records, int64_t n, int C, float* rows, cudaStream_t stream,
                              KvKernelVariant variant) {
  launch_dequantize<Nvfp4Entry>("dequantize_nvfp4_entries", records, n, C, rows, stream, variant);
}

void quantize_mxfp4_keys(const float* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                         KvKernelVariant variant) {
  launch_quantize<Mxfp4Key, F32In>("quantize_mxfp4_keys", rows, n, C, records, stream, variant);
}
void quantize_mxfp4_keys_bf16(const uint16_t* rows, int64_t n, int C, uint8_t* records, cudaStream_t stream,
                              KvKernelVariant variant) {
  launch_quantize<Mxfp4Key, Bf16In>("quantize_mxfp4_keys_bf16", rows, n, C, records, stream, variant);
}
void dequantize_mxfp4_keys(const uint8_t* records, int64_t n, int C, float* rows, cudaStream_t stream,
                           KvKernelVariant variant) {
  launch_dequantize<Mxfp4Key>("dequantize_mxfp4_keys", records, n, C, rows, stream, variant);
}

}  // namespace flashkv::cuda
