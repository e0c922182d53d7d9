// Indexer scoring, candidate pool and pool restriction (see indexer.cuh for the contract).
//
// Scoring, exact path: one thread per (query row, entry). A CTA stages its query row and head weights in
// shared memory and decodes the keys of its 128 entries there (fp32, one padding column so that the
// threads' rows fall in different banks); each thread then runs the CPU's double-precision arithmetic in
// the CPU's order (numerics.hpp dot: eight interleaved partial sums), so the result is bit-identical.
#include <cuda_bf16.h>

#include <flashkv/error.hpp>
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "cuda_check.cuh"
#include "indexer.cuh"
#include "topk.cuh"

namespace flashkv::cuda {
namespace {

namespace nm = flashkv::numeric;

[[noreturn]] void invalid(const char* function, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, std::string(function) + ": " + message);
}

// ---- exact scoring ------------------------------------------------------------------------------------

constexpr int kScoreThreads = 128;  // entries per CTA

// The CPU's value rounded at a cast point: double -> fp32 (RN) -> BF16 (RNE) when faithful.
__device__ inline double bf16_if(double value, bool faithful) {
  if (!faithful) return value;
  return static_cast<double>(nm::bf16_to_float(nm::bf16_from_float(__double2float_rn(value))));
}

// numerics.hpp dot(): Σ a[i]·b[i] in double, eight interleaved partial sums, then the tail.
__device__ inline double cpu_order_dot(const float* a, const float* b, int n) {
  double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      partial[j] =
          __dadd_rn(partial[j], __dmul_rn(static_cast<double>(a[i + j]), static_cast<double>(b[i + j])));
  }
  double tail = 0;
  for (; i < n; ++i) tail = __dadd_rn(tail, __dmul_rn(static_cast<double>(a[i]), static_cast<double>(b[i])));
  return ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
         ((partial[2] + partial[6]) + (partial[3] + partial[7])) + tail;
}

// Decodes key `entry` into dim floats at out (as RecordRows::dequantize does on the CPU).
__device__ inline void decode_key(const uint8_t* keys, IndexKeyFormat format, int dim, int64_t entry,
                                  float* out) {
  if (format == IndexKeyFormat::kFp32) {
    const float* row = reinterpret_cast<const float*>(keys) + entry * dim;
    for (int c = 0; c < dim; ++c) out[c] = row[c];
    return;
  }
  nm::dequantize_mxfp4_key(keys + static_cast<size_t>(entry) * nm::mxfp4_key_bytes(dim), dim, out);
}

// The CPU's score of one visible entry: query [heads, dim], weights [heads], key [dim] decoded.
__device__ inline float exact_entry_score(const float* query, const float* weights, const float* key,
                                          int heads, int dim, bool faithful) {
  double sum = 0;
  for (int h = 0; h < heads; ++h) {
    const double product = bf16_if(cpu_order_dot(query + h * dim, key, dim), faithful);
    const double relu = product < 0.0 ? 0.0 : product;  // std::max(product, 0.0), NaN kept
    // Explicit roundings: a fused multiply-add here would differ from the CPU's product-then-sum.
    sum = __dadd_rn(sum, bf16_if(__dmul_rn(relu, static_cast<double>(weights[h])), faithful));
  }
  const float value = __double2float_rn(sum);
  return faithful ? nm::bf16_to_float(nm::bf16_from_float(value)) : value;
}

// CTAs stride over the entry tiles of their row.
__global__ void __launch_bounds__(kScoreThreads) exact_scores_kernel(IndexScoringArgs args) {
  extern __shared__ float shared[];
  const int64_t row = blockIdx.y;
  const int heads = args.heads, dim = args.dim;
  float* query = shared;                 // heads * dim
  float* weights = query + heads * dim;  // heads
  float* keys = weights + heads;         // kScoreThreads rows of dim + 1
  const float* q_row = args.queries + row * heads * dim;
  for (int i = threadIdx.x; i < heads * dim; i += kScoreThreads) query[i] = q_row[i];
  for (int h = threadIdx.x; h < heads; h += kScoreThreads) weights[h] = args.head_weights[row * heads + h];
  const int64_t visible = min(args.n_visible[row], args.key_count);
  float* key = keys + threadIdx.x * (dim + 1);
  for (int64_t tile = blockIdx.x; tile * kScoreThreads < args.key_count; tile += gridDim.x) {
    const int64_t entry = tile * kScoreThreads + threadIdx.x;
    __syncthreads();  // the previous tile's keys are no longer read
    if (entry < visible) decode_key(args.keys, args.key_format, dim, entry, key);
    __syncthreads();
    if (entry >= args.key_count) continue;
    float* out = args.scores + row * args.key_count + entry;
    if (entry >= visible) {
      *out = -INFINITY;
      continue;
    }
    *out = exact_entry_score(query, weights, key, heads, dim, args.faithful);
  }
}

size_t exact_scores_smem(int heads, int dim) {
  return sizeof(float) *
         (static_cast<size_t>(heads) * dim + heads + static_cast<size_t>(kScoreThreads) * (dim + 1));
}

int sm_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    FKV_CUDA_CHECK(cudaGetDevice(&device));
    FKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

constexpr size_t kMaxExactSmem = 200 * 1024;

void launch_exact_scores(const IndexScoringArgs& args, cudaStream_t stream) {
  const size_t smem = exact_scores_smem(args.heads, args.dim);
  static const bool configured = [] {
    FKV_CUDA_CHECK(cudaFuncSetAttribute(exact_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kMaxExactSmem)));
    return true;
  }();
  (void)configured;
  const int64_t tiles = (args.key_count + kScoreThreads - 1) / kScoreThreads;
  const int64_t per_row = std::max<int64_t>(1, 4 * sm_count() / std::max<int64_t>(args.n, 1));
  const dim3 grid(static_cast<unsigned>(std::min(tiles, per_row)), static_cast<unsigned>(args.n));
  exact_scores_kernel<<<grid, kScoreThreads, smem, stream>>>(args);
  FKV_CUDA_CHECK_LAUNCH();
}

// ---- tensor-core scoring of MXFP4 queries against MXFP4 keys (dim 128, faithful) -----------------------
//
// Each 32-channel block product of a head is an exact integer: with E2M1 values doubled (integers in
// [-12, 12]) an int8 MMA (m16n8k32: one k step = one scale block) gives I_b = Σ 4·q·k / (scale_q·scale_k).
// The key's signs are split off (A_pos / A_neg magnitudes as u8 through one byte permute each, multiplied
// with B and −B into the same accumulator), so no per-byte negation is needed. The dot product
// Σ_b I_b·2^(e_qb + e_kb − 2) is then accumulated in fp32, which is exact when the scale exponents of the
// head's four blocks span at most 9 binades (every term has < 15 significant bits); otherwise that entry
// is combined in double (exact up to 38 binades). The exact value rounded once to fp32 then BF16 is what
// the CPU computes. Faithful numerics make the rest exact too: the ReLU·w product is one fp32 rounding of
// an exact product (as the CPU's double product rounded to fp32), and the head sum of BF16 terms is exact
// in double in any order.
//
// Query preparation checks that every query block is exactly MXFP4 (decode(encode(q)) == q) with a scale
// in the normal fp32 range; rows that are not go through the exact path.
//
// The common case is cheaper still: when a query row's heads and a tile's keys each span at most 3
// binades over their four blocks, the integers are pre-shifted to the smallest exponent (query values at
// preparation, key magnitudes through a shifted byte table), all 128 channels accumulate in one int32
// and the dot product is that integer times one power of two, exactly.

constexpr int kFastDim = 128;
constexpr int kFastBlocks = kFastDim / 32;
// One CTA per SM: kPipelines independent key pipelines of 4 warps each (their own stages, barriers and
// tile sequence), which share the query slots in shared memory. One query row (decode) is prepared by all
// warps of the CTA at the start (one launch per call, no workspace; per SM once for all pipelines); more
// rows by a preparation kernel of their own (see prepare_queries_kernel).
// Measured (s5r1): 6 pipelines (768 threads at 80 registers, no extra spills) were no faster (1M b1 51.5 vs
// 51.6 us, b4 124.6 vs 124.2, 64K b1 14.7 vs 13.6).
constexpr int kPipelines = 4;  // 512 threads at 128 registers: the register file
constexpr int kPipelineThreads = 128;
constexpr int kFastTileEntries = 128;                         // entries per pipeline stage; 32 per warp
constexpr int kKeyBytes = 68;                                 // mxfp4_key_bytes(128)
constexpr int kFastTileBytes = kFastTileEntries * kKeyBytes;  // 8704, a multiple of 16
constexpr int kFastStages = 3;
// Measured slower than 128 registers with 16 warps per SM: 64 registers / 32 warps / 2 stages (s4r1: 1M b1
// 59.1 vs 55.9 us, 64K b1 16.9 vs 14.2; spill reloads, longer chains per warp, L1 squeezed by shared
// memory) and 80 registers / 24 warps with the fragments read from global memory (s4r2: 1M b1 54.3 vs
// 53.8, b4 124.0 vs 115.6).
constexpr int kFastRows = 4;  // query rows per CTA
constexpr int kMaxFastHeads = 64;
constexpr int kExactSpan = 9;  // binades of scale spread the fp32 accumulation absorbs exactly

// Fragment order of the narrow-term path's query operand: 8-byte slot (j·4 + k)·32 + l holds head j·8 + l/4,
// channels (l%4)·32 + k·8 .. + 8 (the k order of narrow_key_fragments), so a lane's B fragment for head
// group j and k step k is one 8-byte load. Returns the 32-bit word of a row's fragments that holds
// channels 4c .. 4c + 3 of head `head`.
__device__ inline int fragment_word(int head, int c) {
  const int j = head >> 3, slot_lane = 4 * (head & 7) + (c >> 3), k = (c >> 1) & 3;
  return ((j * 4 + k) * 32 + slot_lane) * 2 + (c & 1);
}

// The four int8 values of `word` times 2^shift (each stays an int8: |v|·2^shift <= 96), and their sum.
__device__ inline uint32_t shifted_values(uint32_t word, int shift, int& sum) {
  sum = __dp4a(static_cast<int>(word), 0x01010101, 0) * (1 << shift);
  // Shifting the packed word moves each byte's top bits into the next byte's low bits; those are cleared.
  return (word << shift) & (0x01010101u * ((0xFFu << shift) & 0xFFu));
}

// Preparation (prepare_queries below): warp w of the CTA codes heads w, w + 16, .. of its rows, each lane
// four channels (lanes 8b..8b+7 hold scale block b). A row whose heads each span at most kNarrowSpan
// binades over their four blocks is "narrow": its values are stored shifted to the head's smallest block
// exponent (doubled E2M1 times 2^(e_b - e_min) <= 96, still int8) and every block scale of the head is
// 2^(e_min); its span is then 0. Otherwise values are unshifted and the span is the largest head spread.
constexpr int kNarrowSpan = 3;

// ---- narrow-term path: the common case without conversions ---------------------------------------------
//
// For a narrow row and a narrow tile the dot product is acc·2^(eq + ek − 256) with acc = Σ v_q·v_k the
// integer of the pre-shifted doubled E2M1 values (|acc| < 128·96·96 < 2^21), eq the head's and ek the
// key's smallest block exponent (codes). The CPU's term is bf16(fp32(ReLU(bf16(dot))·w)); in the normal
// fp32 range BF16 and fp32 roundings commute with powers of two, so with x = acc·2^-22 and the scaled
// weight ws = w·2^(eq − 127) the term is T·2^(ek − 107), T = bf16(fp32(bf16(ReLU(x))·ws)), and the score
// is bf16(fp32(Σ T))·2^(ek − 107). Nothing needs a conversion instruction except the BF16 roundings
// (cvt.rn.bf16x2, one per rounding, see narrow_term):
//  - the tensor core starts the accumulator at 0x4B400000 (the bits of 1.5·2^23), so its result read as a
//    float is 1.5·2^23 + acc; one saturating FMA gives max(x, 0) exactly (x < 0.5);
//  - the key operand is unsigned: 96 + the signed pre-shifted value (one IADD3 on the two byte tables of
//    the sign-split magnitudes); the start value subtracts 96·Σ v_q, precomputed per head;
//  - the head sum twice in fp32, rounded down and rounded up (interval arithmetic: the exact sum lies
//    between the two): the CPU's value bf16(fp32(sum)) is monotone in the sum, so when both bounds round
//    to the same BF16 value that is it. Sums of BF16 terms of nearby magnitudes are almost always exact
//    in fp32 (then the bounds are equal, also on a midpoint, where an error bound could not decide);
//    otherwise the warp redoes the tile's terms in double (exact: see kMaxTermSpread) and rounds that.
// Preparation derives, per row, the key exponents ek for which every value of the CPU's chain and of
// the scaled chain is a normal float (or zero); tiles with a key outside take the per-block path.
constexpr int kAccBias = 0x4B400000;  // 1.5·2^23 as float bits
constexpr int kKeyOffset = 96;        // unsigned key operand = 96 + pre-shifted value (<= 96)
// Terms of head h lie in [2^(L_h + ek − 256), 2^(L_h + ek − 234)), L_h = ilogb(w_h) + eq_h, on a grid of
// 2^(L_h + ek − 263): the double sum of 32 of them is exact while max L − min L + 34 <= 53.
constexpr int kMaxTermSpread = 17;

// Per head, in registers of its warp (every lane holds the head-level values).
struct PreparedHead {
  uint32_t doubled;  // 2·E2M1 values of the lane's channels, int8 each (channel order)
  int code;          // E8M0 code of the lane's block
  int low, high;     // smallest and largest block code of the head
};

__device__ inline uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t selector) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(selector));
  return r;
}

// |y| in {0, 1, 2, 3, 4, 6, 8, 12}: y is a doubled E2M1 value (by its bits: 0 and 1 exactly; 2 .. 12 with
// exponents 1..3 and at most the leading mantissa bit).
__device__ inline bool is_doubled_e2m1(float y) {
  const uint32_t m = __float_as_uint(y) & 0x7FFFFFFFu;
  // Bitwise operators: no branches.
  return (m == 0u) | (m == 0x3F800000u) | ((m - 0x40000000u <= 0x01400000u) & ((m & 0x3FFFFFu) == 0u));
}

// Codes head `head` of row `row` from the lane's four channels x; returns whether the head is exactly
// MXFP4 with normal-range scales (2^(code - 129) a normal float, decode(encode(x)) == x).
//
// decode(encode(x)) == x iff y = 2x/scale = x·2^(128 − code) is a doubled E2M1 value: if it is, x/scale is
// an E2M1 value, which encode finds and decode multiplies back exactly (a normal result); if x equals a
// decoded value e·scale, y = 2e. The product is exact whenever it is >= 2^-126 in magnitude (a power of
// two in the normal range: code in [3, 254]); below that only a zero is a doubled E2M1 value, and a zero
// product is exact iff x is zero.
__device__ inline bool code_head(float4 x, PreparedHead& h) {
  const float v[4] = {x.x, x.y, x.z, x.w};
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) amax = nm::amax_update(amax, v[k]);
#pragma unroll
  for (int offset = 1; offset < 8; offset <<= 1)  // the block's 8 lanes
    amax = nm::amax_combine(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  const uint8_t code = nm::mxfp4_block_scale_code(amax);
  bool exact = code >= 3 && code != 0xFF;
  const float unit = __uint_as_float((255u - min(max(static_cast<uint32_t>(code), 3u), 254u)) << 23);
  uint32_t biased[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float y = __fmul_rn(v[k], unit);
    exact = exact & is_doubled_e2m1(y) & ((y != 0.0f) | (v[k] == 0.0f));
    // y + 1.5·2^23 holds the integer y in its low bits (two's complement in the low byte); exact only when
    // y is an integer of magnitude < 2^22, i.e. used only when the head is exact.
    biased[k] = __float_as_uint(__fadd_rn(y, 0x1.8p23f));
  }
  h.doubled =
      byte_perm(byte_perm(biased[0], biased[1], 0x0040u), byte_perm(biased[2], biased[3], 0x0040u), 0x5410u);
  h.code = code;
  h.low = h.high = code;
#pragma unroll
  for (int offset = 8; offset < 32; offset <<= 1) {  // over the four blocks
    h.low = min(h.low, __shfl_xor_sync(0xFFFFFFFFu, h.low, offset));
    h.high = max(h.high, __shfl_xor_sync(0xFFFFFFFFu, h.high, offset));
  }
  return __all_sync(0xFFFFFFFFu, exact);
}

__device__ inline void mma_u8s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- bulk copies (TMA) completing on an mbarrier ----

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ inline void mbarrier_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals)
               : "memory");
}
// Makes the initialized barriers visible to the async proxy (then a CTA barrier for the other threads).
__device__ inline void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also expects `bytes` of bulk-copy transactions before the phase completes.
// (Barriers and stages by their shared-window addresses: computed once, not converted per use.)
__device__ inline void mbarrier_arrive_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// One arrival (release: the arriving thread's earlier shared-memory reads happen before the phase completes).
__device__ inline void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed.
__device__ inline void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// bytes (a multiple of 16, both addresses 16-byte aligned) from global to shared memory, counted on bar.
__device__ inline void bulk_load(uint32_t shared, const void* global, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(shared),
      "l"(global), "r"(bytes), "r"(bar)
      : "memory");
}

// RNE to BF16 in one conversion (cvt.rn.bf16.f32): the host's bf16_from_float on every non-NaN input.
__device__ inline float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

// ---- preparation of several query rows: a kernel of its own -----------------------------------------------
//
// With one row the scores kernel prepares it itself (one launch; its GPU time equals the two-kernel chain's,
// s5r1: 1M b1 queued 47.8 vs 47.7 us, plain 51.6 vs 54.5). With more rows every SM would prepare all of them
// (s5r1: 4 rows cost 5-8 us more GPU time than this kernel, 1M b4 queued 120.6 vs 112.9 us), so they are
// prepared once, by one 1024-thread CTA per row, into a workspace, chained to the scores kernel by
// programmatic dependent launch.

// Programmatic dependent launch (sm_90): the two kernels of a tensor-core call (preparation, scores) are
// chained so that the second one's launch overlaps the first one's run: a kernel started by
// launch_after_previous may run while the previous kernel of the stream still runs (once every CTA of that
// one called allow_next_grid, so no CTA of it still waits for an SM), and calls wait_for_previous_grid before
// it reads that kernel's results (and so before it may exit: the stream's next work then sees the whole chain
// complete). Both are no-ops for kernels launched the ordinary way.

__device__ inline void wait_for_previous_grid() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ inline void allow_next_grid() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

template <class... Params, class... Args>
void launch_after_previous(void (*kernel)(Params...), dim3 grid, unsigned threads, size_t smem,
                           cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  FKV_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Per query row, after preparation.
struct PreparedQueries {
  float* scales;    // [n, heads, 4]: 2^(e − 127 − 2)
  int* fast;        // [n]: kRowExact when the row is MXFP4-exact with normal-range scales, | kRowBf16Weights
                    // when its narrow-term scaled weights are BF16 values
  int* span;        // [n]: max over heads of the block exponent spread
  int2* terms;      // [n, heads]: {accumulator start, scaled weight bits} of the narrow-term path
  int2* key_range;  // [n]: key exponents [lo, hi] the narrow-term path takes (lo > hi: none)
  // [n, heads / 8, 4, 32, 2]: values as the narrow-term path's B fragments (fragment_word).
  uint32_t* frags;
};

// Bits of a row's preparation result (PreparedQueries::fast, the scores kernel's row_fast).
constexpr int kRowExact = 1, kRowBf16Weights = 2;

// Whether the scaled weight ws is a BF16 value (its float bits have a zero lower half): bf16_weight_term.
__device__ inline bool is_bf16_value(float ws) {
  return (__float_as_uint(ws) & 0xFFFFu) == 0u;
}

constexpr int kPrepareThreads = 1024;
constexpr int kPrepareWarps = kPrepareThreads / 32;
constexpr int kHeadsPerPrepareWarp = kMaxFastHeads / kPrepareWarps;

// Narrow-term constants (narrow_terms below) are written for narrow, exact rows: per head the
// accumulator start kAccBias − 96·Σ v_q and ws = w·2^(eq − 127); per row the accepted key exponent range:
// every nonzero value normal for ek >= 130 − eq (dot) and ek >= 130 − L (w·dot), L = ilogb(w) + eq,
// sums finite for ek <= 362 − eq and ek <= 355 − L; the scaled chain normal for 23 <= L <= 248; the
// terms' spread within kMaxTermSpread. Zero weights give zero terms either way.
__global__ void __launch_bounds__(kPrepareThreads)
    prepare_queries_kernel(const float* queries, const float* weights, int heads, PreparedQueries out) {
  __shared__ int all_exact, max_span, key_lo, key_hi, spread_lo, spread_hi, usable, bf16_weights;
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  allow_next_grid();  // the scores kernel may start its key loads (it waits for this grid's results)
  // All loads first (one memory latency).
  float4 x[kHeadsPerPrepareWarp];
  float weight[kHeadsPerPrepareWarp];
#pragma unroll
  for (int i = 0; i < kHeadsPerPrepareWarp; ++i) {
    const int head = warp + i * kPrepareWarps;
    const bool mine = head < heads;
    x[i] = mine ? reinterpret_cast<const float4*>(queries + (row * heads + head) * kFastDim)[lane]
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    weight[i] = mine ? weights[row * heads + head] : 0.0f;
  }
  if (threadIdx.x == 0) {
    all_exact = 1;
    max_span = 0;
    key_lo = 32;  // narrow tiles only have key exponents in [32, 223]
    key_hi = 223;
    spread_lo = 1 << 20;
    spread_hi = -(1 << 20);
    usable = 1;
    bf16_weights = 1;
  }
  __syncthreads();
  PreparedHead h[kHeadsPerPrepareWarp];
#pragma unroll
  for (int i = 0; i < kHeadsPerPrepareWarp; ++i) {
    if (warp + i * kPrepareWarps >= heads) break;
    const bool exact = code_head(x[i], h[i]);
    if (lane == 0) {
      if (!exact) atomicAnd(&all_exact, 0);
      atomicMax(&max_span, h[i].high - h[i].low);
    }
  }
  __syncthreads();
  const bool narrow = max_span <= kNarrowSpan, exact = all_exact != 0;
#pragma unroll
  for (int i = 0; i < kHeadsPerPrepareWarp; ++i) {
    const int head = warp + i * kPrepareWarps;
    if (head >= heads) break;
    int sum = 0;
    const uint32_t values = shifted_values(h[i].doubled, narrow ? h[i].code - h[i].low : 0, sum);
    out.frags[row * heads * (kFastDim / 4) + fragment_word(head, lane)] = values;
    // Lanes 0..3 write the scales of blocks 0..3 (block b's code is on lane 8b).
    const int block_code = __shfl_sync(0xFFFFFFFFu, h[i].code, 8 * (lane & 3));
    if (lane < kFastBlocks) {
      const int e = narrow ? h[i].low : block_code;
      out.scales[(row * heads + head) * kFastBlocks + lane] =
          exact ? __uint_as_float(static_cast<uint32_t>(e - 2) << 23) : 0.0f;
    }
    if (!(narrow && exact)) continue;
    sum = __reduce_add_sync(0xFFFFFFFFu, sum);
    if (lane != 0) continue;
    const float w = weight[i];
    const int eq = h[i].low;
    const float ws = ldexpf(w, eq - 127);
    out.terms[row * heads + head] = make_int2(kAccBias - kKeyOffset * sum, __float_as_int(ws));
    if (!is_bf16_value(ws)) atomicAnd(&bf16_weights, 0);
    if (!isfinite(w)) {
      atomicAnd(&usable, 0);
    } else if (w != 0.0f) {
      const int l = ilogbf(w) + eq;
      atomicMax(&key_lo, max(130 - eq, 130 - l));
      atomicMin(&key_hi, min(362 - eq, 355 - l));
      atomicMin(&spread_lo, l);
      atomicMax(&spread_hi, l);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    out.fast[row] = exact ? kRowExact | (bf16_weights ? kRowBf16Weights : 0) : 0;
    out.span[row] = narrow ? 0 : max_span;
    const bool ok = narrow && exact && usable && spread_lo >= 23 && spread_hi <= 248 &&
                    spread_hi - spread_lo <= kMaxTermSpread;
    out.key_range[row] = ok ? make_int2(key_lo, key_hi) : make_int2(1, 0);
  }
}

// The tensor-core path's dynamic shared memory (fast_scores_kernel: the pipelines' stages, then the query
// slots).
extern __shared__ __align__(16) uint8_t fast_smem[];

struct FastArgs {
  const uint8_t* keys;
  int64_t count;
  const float* queries;  // [n, heads, 128]
  const float* weights;  // [n, heads]
  const int64_t* visible;
  int64_t n;
  int heads;
  float* scores;
  int rows_per_cta;          // min(n, kFastRows): the shared query slots
  bool force_redo;           // IndexScoringArgs::force_exact_redo
  PreparedQueries prepared;  // several rows: the preparation kernel's results
};

// The CTA's prepared query rows in shared memory (dynamic, after the pipelines' stages).
struct QuerySlots {
  uint32_t* frags;  // [rows, heads / 8, 4, 32, 2]: values as the B fragments (fragment_word)
  int4* starts;     // [rows, heads / 2]: accumulator starts {s(2i), s(2i + 1), s(2i), s(2i + 1)}
  float2* ws;       // [rows, heads / 2]: scaled weights of heads 2i, 2i + 1
  float* scales;    // [rows, heads, 4]: 2^(e − 127 − 2) per block (0 for a row that is not MXFP4-exact)
  float* weights;   // [rows, heads]
};

// The one-row preparation's per-head results (prepare_query_row), which every warp reduces to the row's
// (row_results).
struct PrepareShared {
  uint32_t info[kMaxFastHeads];  // smallest block code | spread << 8 | kHeadExact, kHeadUsable, kHeadBf16
  int4 range[kMaxFastHeads];     // the head's narrow-term key range [x, y], its L = ilogb(w) + eq in z and w
};
// MXFP4-exact; weight finite; scaled weight a BF16 value.
constexpr uint32_t kHeadExact = 1u << 16, kHeadUsable = 1u << 17, kHeadBf16 = 1u << 18;

// A row's results as the scores kernel's tile loop uses them.
struct RowInfo {
  int fast;         // kRowExact | kRowBf16Weights bits (0: not MXFP4-exact, the exact path)
  int2 range;       // key exponents the narrow-term path takes ([lo, hi]; lo > hi: none)
  int64_t visible;  // n_visible of the row
  int span;         // largest head spread of the row's block exponents (0: narrow)
};

// The row's results from the per-head ones (after the preparation's barrier), on every lane of the warp:
// MXFP4-exact, narrow (every head spans <= kNarrowSpan binades), the key range of the narrow-term path
// (every head's, within the narrow tiles' [32, 223]; none unless the row is narrow, exact, its weights
// finite and the heads' L within [23, 248] and kMaxTermSpread of each other).
__device__ inline RowInfo row_results(const PrepareShared& p, int heads, int lane, int64_t visible) {
  uint32_t flags = kHeadExact | kHeadUsable | kHeadBf16, span = 0;
  int lo = 32, hi = 223, l_lo = 1 << 20, l_hi = -(1 << 20);
  for (int h = lane; h < heads; h += 32) {
    flags &= p.info[h];
    span = max(span, (p.info[h] >> 8) & 0xFFu);
    const int4 r = p.range[h];
    lo = max(lo, r.x);
    hi = min(hi, r.y);
    l_lo = min(l_lo, r.z);
    l_hi = max(l_hi, r.w);
  }
  flags = __reduce_and_sync(0xFFFFFFFFu, flags);
  span = __reduce_max_sync(0xFFFFFFFFu, span);
  lo = __reduce_max_sync(0xFFFFFFFFu, lo);
  hi = __reduce_min_sync(0xFFFFFFFFu, hi);
  l_lo = __reduce_min_sync(0xFFFFFFFFu, l_lo);
  l_hi = __reduce_max_sync(0xFFFFFFFFu, l_hi);
  const bool exact = (flags & kHeadExact) != 0, narrow = span <= kNarrowSpan;
  const bool ok =
      narrow && exact && (flags & kHeadUsable) && l_lo >= 23 && l_hi <= 248 && l_hi - l_lo <= kMaxTermSpread;
  return {exact ? kRowExact | ((flags & kHeadBf16) ? kRowBf16Weights : 0) : 0,
          ok ? make_int2(lo, hi) : make_int2(1, 0), visible, narrow ? 0 : static_cast<int>(span)};
}

constexpr int kPrepareBatch = 2;  // heads per warp (32 heads over 16 warps) whose loads are issued together

// The lane's four channels of heads base, base + warps, .. (kPrepareBatch of them; zeros past the last)
// and their weights.
struct QueryBatch {
  float4 x[kPrepareBatch];
  float w[kPrepareBatch];
};
__device__ inline QueryBatch load_query_batch(const FastArgs& a, int64_t row0, int heads, int base) {
  const int lane = threadIdx.x & 31, warps = static_cast<int>(blockDim.x >> 5);
  QueryBatch b;
#pragma unroll
  for (int i = 0; i < kPrepareBatch; ++i) {
    const int head = base + i * warps;
    b.x[i] = head < heads
                 ? reinterpret_cast<const float4*>(a.queries + (row0 * heads + head) * kFastDim)[lane]
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    b.w[i] = head < heads ? a.weights[row0 * heads + head] : 0.0f;
  }
  return b;
}

// Narrow-term constants (narrow_terms below), per head: the accumulator start kAccBias − 96·Σ v_q and
// ws = w·2^(eq − 127); per row the accepted key exponent range: every nonzero value normal for
// ek >= 130 − eq (dot) and ek >= 130 − L (w·dot), L = ilogb(w) + eq, sums finite for ek <= 362 − eq and
// ek <= 355 − L; the scaled chain normal for 23 <= L <= 248; the terms' spread within kMaxTermSpread. Zero
// weights give zero terms either way.
//
// One query row, prepared by the CTA's warps: warp w codes heads w, w + 16, .. (code_head) and writes,
// assuming the row narrow (the common case, decided only when every head is coded), the values shifted to
// the head's smallest block exponent, the block scales and the narrow-term constants, with its per-head
// results for row_results. One CTA barrier follows; a row that turns out exact but not narrow is rewritten
// unshifted by finish_wide_row behind a second one (rare). first: the warp's first batch
// (load_query_batch at base = warp), loaded before the key tiles' bulk copies are issued, so that these few
// loads do not queue behind them.
__device__ inline void prepare_query_row(const FastArgs& a, int64_t row0, int heads, QuerySlots q,
                                         PrepareShared& p, const QueryBatch& first) {
  const int lane = threadIdx.x & 31, warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  const int lane_word = fragment_word(0, lane);  // fragment_word(head, lane) = this + fragment_word(head, 0)
  for (int base = warp; base < heads; base += warps * kPrepareBatch) {
    const QueryBatch b = base == warp ? first : load_query_batch(a, row0, heads, base);
#pragma unroll
    for (int i = 0; i < kPrepareBatch; ++i) {
      const int head = base + i * warps;
      if (head >= heads) break;
      PreparedHead h;
      const bool exact = code_head(b.x[i], h);
      // A head spanning more than kNarrowSpan binades is in a wide row (rewritten by finish_wide_row): the
      // bound keeps its values int8 and the shift defined.
      int sum = 0;
      const int shift = min(h.code - h.low, kNarrowSpan);
      q.frags[fragment_word(head, 0) + lane_word] = shifted_values(h.doubled, shift, sum);
      sum = __reduce_add_sync(0xFFFFFFFFu, sum);
      if (lane < kFastBlocks)
        q.scales[head * kFastBlocks + lane] = __uint_as_float(static_cast<uint32_t>(h.low - 2) << 23);
      if (lane != 0) continue;
      const float w = b.w[i];
      int* starts = reinterpret_cast<int*>(q.starts) + (head / 2) * 4 + (head & 1);
      starts[0] = starts[2] = kAccBias - kKeyOffset * sum;
      // w·2^(low − 127) (= ldexpf: one rounding; low is in [3, 254] for an exact head).
      const float ws = __fmul_rn(w, __uint_as_float(static_cast<uint32_t>(h.low) << 23));
      reinterpret_cast<float*>(q.ws)[head] = ws;
      int4 range = make_int4(-(1 << 20), 1 << 20, 1 << 20, -(1 << 20));  // a zero weight: no constraint
      if (isfinite(w) && w != 0.0f) {
        const int l = ilogbf(w) + h.low;
        range = make_int4(max(130 - h.low, 130 - l), min(362 - h.low, 355 - l), l, l);
      }
      p.range[head] = range;
      p.info[head] = static_cast<uint32_t>(h.low) | static_cast<uint32_t>(h.high - h.low) << 8 |
                     (exact ? kHeadExact : 0u) | (isfinite(w) ? kHeadUsable : 0u) |
                     (is_bf16_value(ws) ? kHeadBf16 : 0u);
    }
  }
}

// An exact row that is not narrow (some head spans more than kNarrowSpan binades; rare): the values
// unshifted and the blocks' own scales, for the per-block path.
__device__ inline void finish_wide_row(const FastArgs& a, int64_t row0, int heads, QuerySlots q) {
  const int lane = threadIdx.x & 31, warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  const int lane_word = fragment_word(0, lane);
  for (int base = warp; base < heads; base += warps * kPrepareBatch) {
    const QueryBatch b = load_query_batch(a, row0, heads, base);
#pragma unroll
    for (int i = 0; i < kPrepareBatch; ++i) {
      const int head = base + i * warps;
      if (head >= heads) break;
      PreparedHead h;
      code_head(b.x[i], h);
      q.frags[fragment_word(head, 0) + lane_word] = h.doubled;
      const int code = __shfl_sync(0xFFFFFFFFu, h.code, (lane & 3) * 8);  // lane b < 4: block b's
      if (lane < kFastBlocks)
        q.scales[head * kFastBlocks + lane] = __uint_as_float(static_cast<uint32_t>(code - 2) << 23);
    }
  }
}

// A tile is up to kTileUnits consecutive units of kWarpEntries entries (one unit per warp of the pipeline);
// a unit's records are 2176 bytes, a multiple of 16, so every tile starts on a 16-byte boundary.
constexpr int kWarpEntries = 32;
constexpr int kTileUnits = kFastTileEntries / kWarpEntries;
constexpr int kUnitBytes = kWarpEntries * kKeyBytes;
static_assert(kUnitBytes % 16 == 0, "bulk copies start on 16-byte boundaries");
static_assert(kTileUnits == kPipelineThreads / 32 && (kTileUnits & (kTileUnits - 1)) == 0, "a unit per warp");

// A tile: `units` units from unit `unit`.
struct KeyTile {
  int unit, units;
};

// The tiles of one pipeline (fast_scores_kernel): round r < full its tile of kTileUnits units, the last round
// (when units are left over) its even share of them (s7r2, same run: 1M b4 102.05 vs 102.78 us queued with
// the rest dealt as whole tiles to the first pipelines, b1 43.46 vs 43.49). tail_round: the round whose tile
// holds entries past the key buffer's end (the last pipeline's last tile when the key count is not a multiple
// of kWarpEntries; else -1), which fill_tile_tail completes.
struct KeyRounds {
  int pipeline, pipelines, full, rest, count, tail_round;
  __device__ KeyTile tile(int round) const {
    if (round < full) return {(round * pipelines + pipeline) * kTileUnits, kTileUnits};
    const int base = full * pipelines * kTileUnits;
    const int lo = base + pipeline * rest / pipelines, hi = base + (pipeline + 1) * rest / pipelines;
    return {lo, hi - lo};
  }
};
__device__ inline KeyRounds key_rounds(int64_t count, int pipelines, int pipeline) {
  const int units = static_cast<int>((count + kWarpEntries - 1) / kWarpEntries);
  const int full = units / (pipelines * kTileUnits), rest = units - full * pipelines * kTileUnits;
  KeyRounds r{pipeline, pipelines, full, rest, full + (rest > 0 ? 1 : 0), -1};
  // The tile holding the last unit, when that unit is partial.
  const KeyTile last = r.tile(r.count - 1);
  if (count % kWarpEntries != 0 && last.units > 0 && last.unit + last.units == units)
    r.tail_round = r.count - 1;
  return r;
}

// Tile `tile` of key records into a stage, issued by one thread: its whole 16-byte chunks by one bulk copy
// counted on `bar` (an empty tile completes the phase without a copy); fill_tile_tail completes the tile that
// reaches past the last whole chunk of the key buffer.
__device__ inline void issue_tile(const FastArgs& a, KeyTile tile, uint32_t stage, uint32_t bar) {
  const int64_t first = static_cast<int64_t>(tile.unit) * kUnitBytes;
  const auto bytes = static_cast<uint32_t>(
      max(min(a.count * kKeyBytes - first, static_cast<int64_t>(tile.units) * kUnitBytes), int64_t{0}) &
      ~int64_t{15});
  mbarrier_arrive_expect(bar, bytes);
  if (bytes > 0) bulk_load(stage, a.keys + first, bytes, bar);
}

// The tile of KeyRounds::tail_round after its bulk copy: the tail of its last record (records are 68 bytes, a
// multiple of 4 but not of 16) by 4-byte loads, zeros past it up to the end of its units (no access reaches
// past the key buffer). All threads of the pipeline (`thread` = index in it).
__device__ inline void fill_tile_tail(const FastArgs& a, KeyTile tile, uint8_t* stage, int thread) {
  const int64_t first = static_cast<int64_t>(tile.unit) * kUnitBytes, left = a.count * kKeyBytes - first;
  auto* words = reinterpret_cast<uint32_t*>(stage);
  for (int w = static_cast<int>(left / 16) * 4 + thread; w < tile.units * (kUnitBytes / 4);
       w += kPipelineThreads)
    words[w] = 4 * w < left ? *reinterpret_cast<const uint32_t*>(a.keys + first + 4 * w) : 0u;
}

// The threads of pipeline `pipeline` wait for each other (named barrier 1 + pipeline; 0 is __syncthreads).
__device__ inline void pipeline_sync(int pipeline) {
  asm volatile("bar.sync %0, %1;" ::"r"(pipeline + 1), "r"(kPipelineThreads) : "memory");
}

// Scores of the 16 entries of one m-tile (records at `records`, first entry `entry0`) for query row `row`.
// frags: the row's query values in fragment order (fragment_word).
__device__ __noinline__ void score_m_tile(const FastArgs& a, const uint8_t* records, int64_t entry0,
                                          int64_t row, const uint2* frags, const float* q_scales,
                                          const float* weights, int span_q) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Key block exponents of rows g and g + 8.
  float key_scale[2][kFastBlocks];
  int key_exponent[2][kFastBlocks], key_min[2], span_k[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t scales = *reinterpret_cast<const uint32_t*>(records + (g + 8 * half) * kKeyBytes + 64);
    int lo = 255, hi = 0;
#pragma unroll
    for (int b = 0; b < kFastBlocks; ++b) {
      const uint32_t e = (scales >> (8 * b)) & 0xFFu;
      lo = min(lo, static_cast<int>(e));
      hi = max(hi, static_cast<int>(e));
      key_scale[half][b] = __uint_as_float(e << 23);  // 2^(e - 127) for the fp32 path (e in [32, 223])
      key_exponent[half][b] = static_cast<int>(e);
    }
    key_min[half] = lo;
    // Exponents outside [32, 223] could leave the normal fp32 range in the products: double path.
    span_k[half] = (lo < 32 || hi > 223) ? 1000 : hi - lo;
  }
  // Narrow tile (a narrow query row and keys spanning <= kNarrowSpan binades): magnitudes pre-shifted to
  // each key's smallest block exponent (<= 12·8 = 96: u8 below 0x80, so the sign-replicate zeroing still
  // holds), all four blocks in one integer accumulator (|sum| <= 128·96·96 < 2^24: exact in fp32).
  const bool narrow =
      span_q == 0 && __all_sync(0xFFFFFFFFu, span_k[0] <= kNarrowSpan && span_k[1] <= kNarrowSpan);
  // A fragments: rows g and g + 8, word t of each 16-byte block. byte_perm maps the four nibbles in the low
  // 16 bits to the doubled E2M1 magnitudes {0,1,2,3,4,6,8,12} (shifted) as bytes; a nibble with its sign
  // bit set selects prmt's sign-replicate mode, which gives 0 for a byte below 0x80. So a_pos holds the
  // positive elements' magnitudes, a_neg (sign bits flipped) the negative ones'.
  uint32_t a_pos[kFastBlocks][4], a_neg[kFastBlocks][4];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint8_t* record = records + (g + 8 * half) * kKeyBytes;
#pragma unroll
    for (int b = 0; b < kFastBlocks; ++b) {
      const int shift = narrow ? key_exponent[half][b] - key_min[half] : 0;
      const uint32_t lut_lo = 0x03020100u << shift, lut_hi = 0x0C080604u << shift;
      const uint32_t w = *reinterpret_cast<const uint32_t*>(record + b * 16 + t * 4);
      const uint32_t flipped = w ^ 0x88888888u;
      a_pos[b][half] = byte_perm(lut_lo, lut_hi, w);
      a_pos[b][2 + half] = byte_perm(lut_lo, lut_hi, w >> 16);
      a_neg[b][half] = byte_perm(lut_lo, lut_hi, flipped);
      a_neg[b][2 + half] = byte_perm(lut_lo, lut_hi, flipped >> 16);
    }
  }
  // The per-block fp32 combine is exact while 15 bits (four products of < 2^13) plus the spread of the
  // block exponents fit 24. A narrow row's values carry up to kNarrowSpan of that spread themselves
  // (pre-shifted, span_q == 0), so it counts as that much.
  const int margin_q = span_q == 0 ? kNarrowSpan : span_q;
  const bool exact_f32[2] = {span_k[0] + margin_q <= kExactSpan, span_k[1] + margin_q <= kExactSpan};
  const float key_min_scale[2] = {__uint_as_float(static_cast<uint32_t>(key_min[0]) << 23),
                                  __uint_as_float(static_cast<uint32_t>(key_min[1]) << 23)};
  double head_sum[2] = {0.0, 0.0};
  // One head's dot product -> the CPU's BF16 term of the head sum.
  const auto add_term = [&](int half, int head, float dot) {
    const float product = round_bf16(dot);
    const float relu = product < 0.0f ? 0.0f : product;
    head_sum[half] += static_cast<double>(round_bf16(__fmul_rn(relu, weights[head])));
  };
  for (int j = 0; j < a.heads / 8; ++j) {
    // B column g (head j·8 + g), channels b·32 + t·8 .. + 8: fragment slot (j·4 + t)·32 + 4g + b.
    const uint2* column = frags + (j * 4 + t) * 32 + 4 * g;
    if (narrow) {
      int acc[4] = {0, 0, 0, 0};
#pragma unroll
      for (int b = 0; b < kFastBlocks; ++b) {
        const uint2 pos = column[b];
        const uint2 neg = make_uint2(__vneg4(pos.x), __vneg4(pos.y));
        mma_u8s8(acc, a_pos[b], pos.x, pos.y);
        mma_u8s8(acc, a_neg[b], neg.x, neg.y);
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int half = c >> 1;
        const int head = j * 8 + 2 * t + (c & 1);
        add_term(half, head,
                 __fmul_rn(__fmul_rn(static_cast<float>(acc[c]), q_scales[head * kFastBlocks]),
                           key_min_scale[half]));
      }
      continue;
    }
    int acc[kFastBlocks][4];
#pragma unroll
    for (int b = 0; b < kFastBlocks; ++b) {
      const uint2 pos = column[b];
      const uint2 neg = make_uint2(__vneg4(pos.x), __vneg4(pos.y));
      acc[b][0] = acc[b][1] = acc[b][2] = acc[b][3] = 0;
      mma_u8s8(acc[b], a_pos[b], pos.x, pos.y);
      mma_u8s8(acc[b], a_neg[b], neg.x, neg.y);
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int half = c >> 1;
      const int head = j * 8 + 2 * t + (c & 1);
      float dot;
      if (exact_f32[half]) {
        dot = 0.0f;
#pragma unroll
        for (int b = 0; b < kFastBlocks; ++b)
          dot = __fmaf_rn(__fmul_rn(static_cast<float>(acc[b][c]), q_scales[head * kFastBlocks + b]),
                          key_scale[half][b], dot);
      } else {
        // Exact in double up to 38 binades of spread; a NaN scale (255) makes the CPU's keys NaN.
        double exact = 0.0;
        for (int b = 0; b < kFastBlocks; ++b) {
          const int e = key_exponent[half][b];
          exact += e == 255 ? NAN
                            : ldexp(static_cast<double>(acc[b][c]) *
                                        static_cast<double>(q_scales[head * kFastBlocks + b]),
                                    e - 127);
        }
        dot = __double2float_rn(exact);
      }
      add_term(half, head, dot);
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    head_sum[half] += __shfl_xor_sync(0xFFFFFFFFu, head_sum[half], 1);
    head_sum[half] += __shfl_xor_sync(0xFFFFFFFFu, head_sum[half], 2);
  }
  if (t == 0) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t entry = entry0 + g + 8 * half;
      if (entry >= a.count) continue;
      const float value = entry < a.visible[row] ? round_bf16(__double2float_rn(head_sum[half])) : -INFINITY;
      a.scores[row * a.count + entry] = value;
    }
  }
}

// ---- narrow-term path (see prepare_narrow_terms above) ----

// d = clamp(a·b + c, 0, 1), one rounding.
__device__ inline float fma_saturate(float a, float b, float c) {
  float d;
  asm("fma.rn.sat.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

// RNE to BF16 of a normal float or zero (not of subnormals, infinities or NaN), without a conversion: with
// c = ±2^e (sign and exponent bits of x), fl(x + c·2^16) lies in binade e + 16 whose spacing is BF16's in
// binade e, and 2^(e+16) is an even multiple of it, so fl(x + c·2^16) − c·2^16 (exact) is x rounded to
// nearest-even BF16. (The certificate's bounds are rounded this way: below the normal range it is the
// identity, see score_narrow_entries.)
__device__ inline float round_bf16_normal(float x) {
  const float c = __uint_as_float(__float_as_uint(x) & 0xFF800000u);  // ±2^exponent(x)
  return __fmaf_rn(c, -65536.0f, __fmaf_rn(c, 65536.0f, x));
}

// BF16 rounding by cvt.rn.bf16x2 with a zero in the low half, so that the result read as a float is the
// rounded value itself: one conversion per rounding and no unpacking (two values per conversion cost the
// same conversions plus a LOP3 or shift per value to unpack them). Rounding by FMAs on the exponent
// (round_bf16_normal: 3 instructions) measured 8-15 % slower (rounds 2-3 of session 3, s4r0).
__device__ inline float round_bf16_cvt(float x) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x), "f"(0.0f));
  return __uint_as_float(r);
}

// max(acc, 0)·2^-22, exact, from the biased accumulator (float bits 1.5·2^23 + acc); never −0 (an exact
// zero sum is +0, a negative value saturates to +0).
__device__ inline float relu_scaled(int biased) {
  return fma_saturate(__int_as_float(biased), 0x1p-22f, -3.0f);
}

// T = bf16(fp32(bf16(ReLU(x))·ws)) from the biased accumulator: 4 instructions.
__device__ inline float narrow_term(int biased, float ws) {
  return round_bf16_cvt(__fmul_rn(round_bf16_cvt(relu_scaled(biased)), ws));
}

// Two values rounded to BF16 in one conversion: x_hi in the upper half, x_lo in the lower.
__device__ inline uint32_t round_bf16_pair(float x_hi, float x_lo) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x_hi), "f"(x_lo));
  return r;
}

// Rows whose scaled weights are BF16 values (V4.1 faithful rounds the head weights to BF16): the product
// of two BF16 values is exact in fp32, so the CPU's fp32-then-BF16 rounding of ReLU·w is one BF16 rounding
// of the exact product, which mul.rn.bf16x2 computes. The factor is half kHalf (1: upper) of the pair p
// broadcast to both halves, ws a float with a zero lower half: the upper half of the result is the term,
// the lower one p's half times +0 = +0 (p >= +0), so the result read as a float is the term itself.
// Per two terms: one conversion and two packed multiplies instead of two conversions, two FMULs and two
// conversions (the conversions run on the ALU pipe, half rate, which carries about half of the kernel).
template <int kHalf>
__device__ inline float bf16_weight_term(uint32_t p, float ws) {
  uint32_t d;
  if constexpr (kHalf == 1) {
    asm("{.reg .b16 l, h;\n.reg .b32 a;\nmov.b32 {l, h}, %1;\nmov.b32 a, {h, h};\nmul.rn.bf16x2 %0, a, %2;}"
        : "=r"(d)
        : "r"(p), "r"(__float_as_uint(ws)));
  } else {
    asm("{.reg .b16 l, h;\n.reg .b32 a;\nmov.b32 {l, h}, %1;\nmov.b32 a, {l, l};\nmul.rn.bf16x2 %0, a, %2;}"
        : "=r"(d)
        : "r"(p), "r"(__float_as_uint(ws)));
  }
  return __uint_as_float(d);
}

// The key exponents of a warp's 32 records, as the lane (g, t) uses them: its record q = 0..3 is entry
// g + 8q (m-tile q / 2, fragment row half q % 2), of which it decodes block t.
struct KeyExponents {
  int shift[4];         // record q's block t exponent above the record's smallest (narrow_key_fragments)
  int ek;               // the smallest code of the record of entry g + 8t (the one the lane stores)
  int lowest, highest;  // warp-uniform: the smallest and the largest of the records' smallest codes
  bool narrow;          // warp-uniform: every record spans <= kNarrowSpan binades within [32, 223]
};

// Lane l examines record l once (the warp's 32 records, conflict-free: 68-byte stride), the lanes that
// decode it fetch what they need by shuffles (was: every lane examined its four records, 4x the work).
__device__ inline KeyExponents key_exponents(const uint8_t* records, int lane, int g, int t) {
  const uint32_t scales = *reinterpret_cast<const uint32_t*>(records + lane * kKeyBytes + 64);
  // One byte extraction per prmt (selector 0x444b: byte b, then zeros).
  const uint32_t e0 = byte_perm(scales, 0u, 0x4440u), e1 = byte_perm(scales, 0u, 0x4441u),
                 e2 = byte_perm(scales, 0u, 0x4442u), e3 = scales >> 24;
  const uint32_t lo = min(min(e0, e1), min(e2, e3)), hi = max(max(e0, e1), max(e2, e3));
  // Each block's code above the smallest, per byte (no borrows: every byte is >= lo).
  const uint32_t shifts = scales - lo * 0x01010101u;
  KeyExponents k;
  k.narrow =
      __all_sync(0xFFFFFFFFu, lo >= 32u && hi <= 223u && hi - lo <= static_cast<uint32_t>(kNarrowSpan));
  k.lowest = static_cast<int>(__reduce_min_sync(0xFFFFFFFFu, lo));
  k.highest = static_cast<int>(__reduce_max_sync(0xFFFFFFFFu, lo));
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t record_shifts = __shfl_sync(0xFFFFFFFFu, shifts, g + 8 * q);
    k.shift[q] = static_cast<int>(byte_perm(record_shifts, 0u, 0x4440u + static_cast<uint32_t>(t)));
  }
  k.ek = static_cast<int>(__shfl_sync(0xFFFFFFFFu, lo, g + 8 * t));
  return k;
}

// A fragments of a narrow tile: u8 = 96 + the key's doubled E2M1 value shifted to its smallest block
// exponent. The byte tables give the magnitudes of the positive (resp., with the sign bits flipped,
// negative) codes and 0 for the others (prmt's sign-replicate on bytes below 0x80), so per byte
// 96 + pos − neg lies in [0, 192] and the 32-bit IADD3 never carries between bytes. Pre-shifted values
// share one unit, so the k steps need not follow the scale blocks: lane t takes block t of its records
// (one byte table per record), k step i its word i (channels 32t + 8i .. + 8; the query fragments
// follow the same order).
__device__ inline void narrow_key_fragments(const uint8_t* records, const KeyExponents& k, int g, int t,
                                            uint32_t (&a)[2][kFastBlocks][4]) {
  constexpr uint32_t kOffsets = 0x01010101u * kKeyOffset;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint8_t* block = records + (g + 8 * q) * kKeyBytes + t * 16;
    const int mt = q >> 1, half = q & 1;
    const int shift = k.shift[q];
    const uint32_t lut_lo = 0x03020100u << shift, lut_hi = 0x0C080604u << shift;
    // prmt reads the low 16 bits of its selector. The ALU pipe (half rate) carries about half of this
    // kernel's instructions, so per word: its upper four codes loaded as a 16-bit value of their own (the
    // shared-memory pipe has room), all eight codes flipped by one 32-bit XOR, the flipped upper four moved
    // down by a multiply-high on the FMA pipe (was: two 16-bit flips).
#pragma unroll
    for (int i = 0; i < kFastBlocks; ++i) {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(block + i * 4);
      const uint32_t w_hi = *reinterpret_cast<const uint16_t*>(block + i * 4 + 2);
      const uint32_t flipped = w ^ 0x88888888u, flipped_hi = __umulhi(flipped, 0x10000u);
      a[mt][i][half] = kOffsets + byte_perm(lut_lo, lut_hi, w) - byte_perm(lut_lo, lut_hi, flipped);
      a[mt][i][2 + half] = kOffsets + byte_perm(lut_lo, lut_hi, w_hi) - byte_perm(lut_lo, lut_hi, flipped_hi);
    }
  }
}

// Calls add(q, T) for every head of this lane (heads j·8 + 2t, j·8 + 2t + 1) and record q (entry g + 8q).
// frags: the row's query B fragments in fragment order ([heads / 8][4 blocks][32 lanes], each shared by
// the two m-tiles); starts: the row's accumulator starts per head pair {2i, 2i + 1, 2i, 2i + 1} (the C
// operand as loaded); ws: the scaled weights per head pair. kHeads: heads when known at compile time,
// else 0; kUnroll: the head loop's unroll factor; kBf16Weights: every ws is a BF16 value (bf16_weight_term).
template <int kHeads, int kUnroll, bool kBf16Weights, class Add>
__device__ __forceinline__ void narrow_terms(const uint32_t (&a)[2][kFastBlocks][4], const uint2* frags,
                                             const int4* starts, const float2* ws, int heads, int lane,
                                             Add add) {
  const int t = lane & 3;
#pragma unroll kUnroll
  for (int j = 0; j < heads / 8; ++j) {
    const int4 c0 = starts[j * 4 + t];  // heads j·8 + 2t and j·8 + 2t + 1
    const float2 w = ws[j * 4 + t];
    int acc[2][4] = {{c0.x, c0.y, c0.z, c0.w}, {c0.x, c0.y, c0.z, c0.w}};
#pragma unroll
    for (int b = 0; b < kFastBlocks; ++b) {
      const uint2 q = frags[(j * kFastBlocks + b) * 32 + lane];
      mma_u8s8(acc[0], a[0][b], q.x, q.y);
      mma_u8s8(acc[1], a[1][b], q.x, q.y);
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (kBf16Weights) {
          const uint32_t p = round_bf16_pair(relu_scaled(acc[mt][2 * h]), relu_scaled(acc[mt][2 * h + 1]));
          add(mt * 2 + h, bf16_weight_term<1>(p, w.x));
          add(mt * 2 + h, bf16_weight_term<0>(p, w.y));
        } else {
          add(mt * 2 + h, narrow_term(acc[mt][2 * h], w.x));
          add(mt * 2 + h, narrow_term(acc[mt][2 * h + 1], w.y));
        }
      }
    }
  }
}

// Reduces v[0..3] over the four lanes t of a fragment row group with add(a, b); lane t returns the total
// of v[t].
template <class T, class Add>
__device__ inline T reduce_to_lane(const T (&v)[4], int t, Add add) {
  const bool upper = (t & 2) != 0, odd = (t & 1) != 0;
  T keep0 = upper ? v[2] : v[0], keep1 = upper ? v[3] : v[1];
  keep0 = add(keep0, __shfl_xor_sync(0xFFFFFFFFu, upper ? v[0] : v[2], 2));
  keep1 = add(keep1, __shfl_xor_sync(0xFFFFFFFFu, upper ? v[1] : v[3], 2));
  const T keep = odd ? keep1 : keep0;
  return add(keep, __shfl_xor_sync(0xFFFFFFFFu, odd ? keep0 : keep1, 1));
}

// Scores of the warp's 32 entries for one row on the narrow-term path. Lane t stores entry g + 8t of them:
// `entry` (its index; stores: entry < key count), at `out`, visible: the row's n_visible.
template <int kHeads, int kUnroll, bool kBf16Weights>
__device__ void score_narrow_entries(const FastArgs& a, const uint32_t (&frag_a)[2][kFastBlocks][4], int ek,
                                     const uint2* frags, const int4* starts, const float2* ws, int heads,
                                     int64_t entry, bool stores, float* out, int64_t visible) {
  const int lane = threadIdx.x & 31, t = lane & 3;
  // Lower and upper bounds of the head sums (any order; +0 start: an exact zero sum rounds up to +0, the
  // CPU's sign).
  float low[4] = {0.0f, 0.0f, 0.0f, 0.0f}, high[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  narrow_terms<kHeads, kUnroll, kBf16Weights>(frag_a, frags, starts, ws, heads, lane, [&](int q, float term) {
    low[q] = __fadd_rd(low[q], term);
    high[q] = __fadd_ru(high[q], term);
  });
  const float s_low = reduce_to_lane(low, t, [](float x, float y) { return __fadd_rd(x, y); });
  const float s_high = reduce_to_lane(high, t, [](float x, float y) { return __fadd_ru(x, y); });
  // Monotone rounding: equal roundings of the bounds are the exact sum's. (Below the normal range
  // round_bf16_normal is the identity; two equal such bounds are the exact sum, a multiple of 2^-133 in
  // the CPU's scale, which BF16 represents.)
  float result = round_bf16_normal(s_high);
  const bool certain = round_bf16_normal(s_low) == result && !a.force_redo;
  if (__any_sync(0xFFFFFFFFu, !certain)) {
    // Rare (an inexact fp32 sum near a BF16 midpoint): the terms again, summed exactly.
    double exact[4] = {0.0, 0.0, 0.0, 0.0};
    narrow_terms<kHeads, kUnroll, kBf16Weights>(frag_a, frags, starts, ws, heads, lane,
                                                [&](int q, float term) { exact[q] += term; });
    const double total = reduce_to_lane(exact, t, [](double x, double y) { return x + y; });
    if (!certain) result = round_bf16(__double2float_rn(total));
  }
  if (!stores) return;
  // × 2^(ek − 107): exact (a normal result, or a tiny one that is a multiple of 2^-133 on both sides).
  const float scale = __uint_as_float(static_cast<uint32_t>(ek + 20) << 23);
  *out = entry < visible ? result * scale : -INFINITY;
}

// A row whose queries are not MXFP4-exact: lane l scores entry entry0 + l from its record in the stage in
// the CPU's arithmetic (exact_entry_score on the key decoded as the CPU decodes it). Rare (the engine
// passes fake-quantized queries), so simple.
__device__ __noinline__ void score_exact_entries(const FastArgs& a, int records_offset, int64_t entry0,
                                                 int64_t row, int64_t visible) {
  const uint8_t* records = fast_smem + records_offset;
  const int lane = threadIdx.x & 31;
  const int64_t entry = entry0 + lane;
  if (entry >= a.count) return;
  float value = -INFINITY;
  if (entry < visible) {
    float key[kFastDim];
    nm::dequantize_mxfp4_key(records + lane * kKeyBytes, kFastDim, key);
    value = exact_entry_score(a.queries + row * a.heads * kFastDim, a.weights + row * a.heads, key, a.heads,
                              kFastDim, true);
  }
  a.scores[row * a.count + entry] = value;
}

// The query slots of a CTA with `pipes` pipelines and rows_cta rows (after the pipelines' stages in
// dynamic shared memory).
__device__ inline QuerySlots query_slots(int pipes, int rows_cta, int heads) {
  QuerySlots q;
  q.frags = reinterpret_cast<uint32_t*>(fast_smem + pipes * kFastStages * kFastTileBytes);
  q.starts = reinterpret_cast<int4*>(q.frags + rows_cta * heads * (kFastDim / 4));
  q.ws = reinterpret_cast<float2*>(q.starts + rows_cta * heads / 2);
  q.scales = reinterpret_cast<float*>(q.ws + rows_cta * heads / 2);
  q.weights = q.scales + rows_cta * heads * kFastBlocks;
  return q;
}

// The warp's 32 entries (records at fast_smem + records_offset) for row `row` = slot r on the per-block
// path. Rare and not inlined; it takes offsets, not pointers, so that the common path computes nothing for
// it (generic pointers into shared memory cost 64-bit arithmetic and spills).
__device__ __noinline__ void score_per_block_entries(const FastArgs& a, int records_offset, int64_t entry0,
                                                     int64_t row, int r, int pipes, int rows_cta, int heads,
                                                     int span_q) {
  const QuerySlots q = query_slots(pipes, rows_cta, heads);
  const auto* frags = reinterpret_cast<const uint2*>(q.frags + r * heads * (kFastDim / 4));
  for (int mt = 0; mt < 2; ++mt) {
    score_m_tile(a, fast_smem + records_offset + mt * 16 * kKeyBytes, entry0 + mt * 16, row, frags,
                 q.scales + r * heads * kFastBlocks, q.weights + r * heads, span_q);
  }
}

// kHeads: the head count when it is 32 (the V4.1 shape: the narrow-term loop unrolled, constant offsets),
// else 0 (any multiple of 8 up to kMaxFastHeads, from the arguments).
// kOneRow: one query row (decode): the CTA prepares it itself, the row loop and its offsets fold away; else
// the preparation kernel prepared the rows. kPipes: pipelines per CTA.
template <int kHeads, bool kOneRow, int kPipes>
__global__ void __launch_bounds__(kPipes* kPipelineThreads, 1)
    fast_scores_kernel(const __grid_constant__ FastArgs a) {
  constexpr int kThreads = kPipes * kPipelineThreads;
  static_assert(kFastRows * kMaxFastHeads <= kThreads, "one head weight per thread");
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * a.rows_per_cta;
  const int rows_cta = kOneRow ? 1 : a.rows_per_cta, heads = kHeads > 0 ? kHeads : a.heads;
  const int per_row = heads * kFastDim;
  // Unsigned: shifts and masks (the tile loop recomputes them from the thread index where registers run out;
  // signed, each took four instructions).
  const int pipeline = static_cast<int>(threadIdx.x / kPipelineThreads);
  const int thread = static_cast<int>(threadIdx.x % kPipelineThreads);
  // Shared memory: each pipeline's stages, then the query slots of the CTA's rows (all that the scoring
  // reads of the queries, except the raw rows of the exact path).
  uint8_t* stages = fast_smem + pipeline * kFastStages * kFastTileBytes;  // kFastStages tiles
  const QuerySlots q = query_slots(kPipes, rows_cta, heads);
  __shared__ PrepareShared prepare;
  __shared__ RowInfo row_shared[kFastRows];  // several rows: the preparation kernel's row results
  __shared__ int64_t row_visible[kFastRows];
  __shared__ __align__(8) uint64_t stage_full[kPipes][kFastStages];   // the stage's bulk copy complete
  __shared__ __align__(8) uint64_t stage_empty[kPipes][kFastStages];  // the pipeline's warps read the stage
  const int rows = kOneRow ? 1 : static_cast<int>(min(static_cast<int64_t>(rows_cta), a.n - row0));
  // The key tiles, in rounds: in every round each pipeline of the grid takes one tile, of kTileUnits units
  // (kWarpEntries entries each, one per warp) in all rounds but the last, which splits the units left
  // over evenly (some tiles shorter or empty). So every pipeline, and every SM, gets the same number of
  // units to within one. Was: tiles of four units dealt round-robin, which at 1M keys gave 68 SMs 64 units
  // per pipeline and 64 SMs 60 (the s7 profile: busiest SM 72.3K cycles against an average of 69.1K).
  // Unit counts in 32 bits: key_count < 2^31 · 32.
  const KeyRounds rounds = key_rounds(a.count, static_cast<int>(gridDim.x) * kPipes,
                                      static_cast<int>(blockIdx.x) * kPipes + pipeline);
  const uint32_t stage0 = shared_address(stages), full0 = shared_address(&stage_full[pipeline][0]),
                 empty0 = shared_address(&stage_empty[pipeline][0]);
  // The small loads the preparation waits for first, so that they do not queue behind the tile copies:
  // one row's query heads and their weights (prepare_query_row), the head weights (rows·heads <= 256
  // threads), the rows' visible counts.
  const int lane = threadIdx.x & 31, warp = static_cast<int>(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
  QueryBatch query_batch{};
  if constexpr (kOneRow) query_batch = load_query_batch(a, row0, heads, warp);
  const bool weight_thread = static_cast<int>(threadIdx.x) < rows * heads;
  const float weight = weight_thread ? a.weights[row0 * heads + threadIdx.x] : 0.0f;
  const int64_t visible = static_cast<int>(threadIdx.x) < rows ? a.visible[row0 + threadIdx.x] : 0;
  // Prologue: each pipeline's first kFastStages - 1 tiles in flight during the preparation.
  if (thread == 0) {
    for (int s = 0; s < kFastStages; ++s) {
      mbarrier_init(&stage_full[pipeline][s], 1);
      mbarrier_init(&stage_empty[pipeline][s], kPipelineThreads / 32);
    }
    mbarrier_init_fence();
    for (int s = 0; s < kFastStages - 1 && s < rounds.count; ++s)
      issue_tile(a, rounds.tile(s), stage0 + s * kFastTileBytes, full0 + 8 * s);
  }
  if (weight_thread) q.weights[threadIdx.x] = weight;
  if (static_cast<int>(threadIdx.x) < rows) row_visible[threadIdx.x] = visible;
  RowInfo one_row{};  // one row: its results (below)
  if constexpr (kOneRow) {
    prepare_query_row(a, row0, heads, q, prepare, query_batch);
    __syncthreads();  // the per-head results, the weights and the barriers' initialization
    // Every warp derives the row's results itself, into registers for the whole tile loop (from shared
    // memory per tile they cost loads and the shared window's address each time: ~4 % of the stall samples
    // in the s6 profile).
    one_row = row_results(prepare, heads, lane, row_visible[0]);
    if (one_row.fast && one_row.span != 0) {  // exact but not narrow (CTA-uniform; rare)
      finish_wide_row(a, row0, heads, q);
      __syncthreads();
    }
  } else {  // copy the preparation kernel's results
    wait_for_previous_grid();
    const PreparedQueries& p = a.prepared;
    for (int i = static_cast<int>(threadIdx.x); i < rows * per_row / 16; i += kThreads)
      reinterpret_cast<uint4*>(q.frags)[i] = reinterpret_cast<const uint4*>(p.frags + row0 * per_row / 4)[i];
    for (int i = static_cast<int>(threadIdx.x); i < rows * heads / 2; i += kThreads) {
      const int2 even = p.terms[row0 * heads + 2 * i], odd = p.terms[row0 * heads + 2 * i + 1];
      q.starts[i] = make_int4(even.x, odd.x, even.x, odd.x);
      q.ws[i] = make_float2(__int_as_float(even.y), __int_as_float(odd.y));
    }
    for (int i = static_cast<int>(threadIdx.x); i < rows * heads * kFastBlocks; i += kThreads)
      q.scales[i] = p.scales[row0 * heads * kFastBlocks + i];
    if (threadIdx.x < rows) {
      row_shared[threadIdx.x] = {p.fast[row0 + threadIdx.x], p.key_range[row0 + threadIdx.x], visible,
                                 p.span[row0 + threadIdx.x]};
    }
    __syncthreads();  // the row results and the barriers' initialization
  }
  const auto row_info = [&](int r) -> RowInfo {
    if constexpr (kOneRow) return one_row;
    return row_shared[r];
  };
  int stage = 0;
  uint32_t parity = 0;  // of the stages' current use
  const int pipeline_warp = static_cast<int>((threadIdx.x / 32) % (kPipelineThreads / 32));
  // A stage is released by each warp of the pipeline on its own (stage_empty, one arrival per warp): the
  // thread that refills it waits for that, the other warps go on (was: a pipeline barrier per tile, where
  // warps waited for the slowest, ~7 % of the stall samples in the s6 profile).
  for (int round = 0; round < rounds.count; ++round) {
    // Issue the tile kFastStages - 1 rounds ahead into the stage consumed last iteration, once every warp
    // has released it (its phase of last iteration's use: parity of last iteration).
    const int ahead = round + kFastStages - 1;
    const int ahead_stage = (stage + kFastStages - 1) % kFastStages;
    if (thread == 0 && ahead < rounds.count) {
      if (round != 0) mbarrier_wait(empty0 + 8 * ahead_stage, stage == 0 ? parity ^ 1u : parity);
      issue_tile(a, rounds.tile(ahead), stage0 + ahead_stage * kFastTileBytes, full0 + 8 * ahead_stage);
    }
    mbarrier_wait(full0 + 8 * stage, parity);
    const KeyTile tile = rounds.tile(round);
    if (round == rounds.tail_round) {  // its tail by plain stores after every warp's earlier tiles
      pipeline_sync(pipeline);
      fill_tile_tail(a, tile, stages + stage * kFastTileBytes, thread);
      pipeline_sync(pipeline);
    }
    // The tile's units go to the pipeline's warps rotated by the pipeline index: warp w of every pipeline
    // runs on scheduler w, so unrotated, the last round's short tiles (two or three units each at 1M keys)
    // left one or two of the SM's four schedulers idle for a whole round (s7r1).
    const int unit_index = (pipeline_warp - pipeline) & (kTileUnits - 1);
    if (unit_index < tile.units) {  // a shorter tile of the last round leaves warps without a unit
      const uint8_t* records = stages + stage * kFastTileBytes + unit_index * kUnitBytes;
      const int64_t entry0 = static_cast<int64_t>(tile.unit + unit_index) * kWarpEntries;
      // Decoded once for all rows of the CTA.
      const KeyExponents k = key_exponents(records, lane, g, t);
      uint32_t frag_a[2][kFastBlocks][4];
      if (k.narrow) narrow_key_fragments(records, k, g, t, frag_a);
      const int ek = k.ek;  // entry g + 8t
      const int records_offset = static_cast<int>(records - fast_smem);
      // The entry this lane stores on the narrow-term path (after the head-sum reduction) and its score's
      // place in row r (64-bit index arithmetic once per 32 entries instead of once per row).
      const int64_t entry = entry0 + g + 8 * t;
      const bool stores = entry < a.count;
      float* out = a.scores + row0 * a.count + entry;
      for (int r = 0; r < rows; ++r, out += a.count) {
        const RowInfo row = row_info(r);
        if (!row.fast) {
          score_exact_entries(a, records_offset, entry0, row0 + r, row.visible);
          continue;
        }
        if (k.narrow && k.lowest >= row.range.x && k.highest <= row.range.y) {
          // The head loop unrolled by 2. Fully unrolled (s6r2, one row): no A-fragment spills any more and 30
          // instructions fewer per 32 entries, yet 1M b1 was 1.1 us slower (queued 44.7 vs 43.6 us); several
          // rows spill more fully unrolled (128/176 instead of 104/128 bytes).
          constexpr int kUnroll = 2;
          const auto* frags = reinterpret_cast<const uint2*>(q.frags + r * per_row / 4);
          if (row.fast & kRowBf16Weights) {
            score_narrow_entries<kHeads, kUnroll, true>(a, frag_a, ek, frags, q.starts + r * heads / 2,
                                                        q.ws + r * heads / 2, heads, entry, stores, out,
                                                        row.visible);
          } else {
            score_narrow_entries<kHeads, kUnroll, false>(a, frag_a, ek, frags, q.starts + r * heads / 2,
                                                         q.ws + r * heads / 2, heads, entry, stores, out,
                                                         row.visible);
          }
          continue;
        }
        score_per_block_entries(a, records_offset, entry0, row0 + r, r, kPipes, rows_cta, heads, row.span);
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty0 + 8 * stage);  // the warp's reads of the stage are done
    if (++stage == kFastStages) {
      stage = 0;
      parity ^= 1u;
    }
  }
}

size_t fast_scores_smem(int pipes, int heads, int rows_per_cta) {
  // The pipelines' stages, then per row: fragments (128 B per head), starts (8 B per head), scaled
  // weights (4 B), block scales (16 B) and weights (4 B).
  return static_cast<size_t>(pipes) * kFastStages * kFastTileBytes +
         static_cast<size_t>(rows_per_cta) * heads * (kFastDim + 8 + 4 + 4 * (kFastBlocks + 1));
}

bool fast_path_applies(const IndexScoringArgs& args) {
  return args.faithful && args.key_format == IndexKeyFormat::kMxfp4 && args.dim == kFastDim &&
         args.heads % 8 == 0 && args.heads <= kMaxFastHeads &&
         reinterpret_cast<uintptr_t>(args.keys) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(args.queries) % 16 == 0;
}

// The preparation kernel's workspace layout.
struct PreparedLayout {
  size_t scales = 0, fast = 0, span = 0, terms = 0, key_range = 0, frags = 0, total = 0;
};

PreparedLayout prepared_layout(int64_t n, int heads) {
  const auto round = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t values = static_cast<size_t>(n) * heads * kFastDim;
  PreparedLayout l;
  l.fast = l.scales + round(static_cast<size_t>(n) * heads * kFastBlocks * sizeof(float));
  l.span = l.fast + round(static_cast<size_t>(n) * sizeof(int));
  l.terms = l.span + round(static_cast<size_t>(n) * sizeof(int));
  l.key_range = l.terms + round(static_cast<size_t>(n) * heads * sizeof(int2));
  l.frags = l.key_range + round(static_cast<size_t>(n) * sizeof(int2));
  l.total = l.frags + round(values);
  return l;
}

PreparedQueries prepared_in(void* workspace, int64_t n, int heads) {
  const PreparedLayout l = prepared_layout(n, heads);
  auto* p = static_cast<uint8_t*>(workspace);
  return {reinterpret_cast<float*>(p + l.scales),   reinterpret_cast<int*>(p + l.fast),
          reinterpret_cast<int*>(p + l.span),       reinterpret_cast<int2*>(p + l.terms),
          reinterpret_cast<int2*>(p + l.key_range), reinterpret_cast<uint32_t*>(p + l.frags)};
}

// The CTAs of a row group split its tiles among their pipelines; one CTA per SM.
template <int kHeads, bool kOneRow, int kPipes>
void launch_scores_kernel(const IndexScoringArgs& args, const FastArgs& fast, cudaStream_t stream) {
  const auto kernel = fast_scores_kernel<kHeads, kOneRow, kPipes>;
  static const bool configured = [kernel] {
    const int limit = static_cast<int>(fast_scores_smem(kPipes, kMaxFastHeads, kFastRows));
    FKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    return true;
  }();
  (void)configured;
  const size_t smem = fast_scores_smem(kPipes, args.heads, fast.rows_per_cta);
  const int64_t row_groups = (args.n + fast.rows_per_cta - 1) / fast.rows_per_cta;
  const int64_t tiles = (args.key_count + kFastTileEntries - 1) / kFastTileEntries;
  const int64_t per_group = std::max<int64_t>(1, sm_count() / row_groups);
  const int64_t ctas = std::min((tiles + kPipes - 1) / kPipes, per_group);
  const dim3 grid(static_cast<unsigned>(ctas), static_cast<unsigned>(row_groups));
  if constexpr (kOneRow) {
    kernel<<<grid, kPipes * kPipelineThreads, smem, stream>>>(fast);
    FKV_CUDA_CHECK_LAUNCH();
  } else {
    launch_after_previous(kernel, grid, kPipes * kPipelineThreads, smem, stream, fast);
  }
}

// workspace: index_scores_workspace_bytes(n, heads) bytes (none for one row).
template <int kHeads, bool kOneRow>
void launch_fast_scores_for(const IndexScoringArgs& args, void* workspace, cudaStream_t stream) {
  const int rows_per_cta = static_cast<int>(std::min<int64_t>(args.n, kFastRows));
  FastArgs fast{args.keys,  args.key_count, args.queries, args.head_weights,     args.n_visible,   args.n,
                args.heads, args.scores,    rows_per_cta, args.force_exact_redo, PreparedQueries{}};
  if constexpr (!kOneRow) {
    fast.prepared = prepared_in(workspace, args.n, args.heads);
    prepare_queries_kernel<<<static_cast<unsigned>(args.n), kPrepareThreads, 0, stream>>>(
        args.queries, args.head_weights, args.heads, fast.prepared);
    FKV_CUDA_CHECK_LAUNCH();
  }
  launch_scores_kernel<kHeads, kOneRow, kPipelines>(args, fast, stream);
}

void launch_fast_scores(const IndexScoringArgs& args, void* workspace, cudaStream_t stream) {
  constexpr int kShapeHeads = 32;  // the V4.1 indexer
  const bool one_row = args.n == 1;
  if (args.heads == kShapeHeads) {
    if (one_row) {
      launch_fast_scores_for<kShapeHeads, true>(args, workspace, stream);
    } else {
      launch_fast_scores_for<kShapeHeads, false>(args, workspace, stream);
    }
  } else if (one_row) {
    launch_fast_scores_for<0, true>(args, workspace, stream);
  } else {
    launch_fast_scores_for<0, false>(args, workspace, stream);
  }
}

// ---- candidate pool -----------------------------------------------------------------------------------

// block_scores[r, b] = max of the block's scores (std::max order: NaN never replaces), the block of the
// newest visible entry +∞.
__global__ void block_max_kernel(const float* scores, int64_t m, const int64_t* n_visible, int64_t block_size,
                                 int64_t blocks, float* block_scores) {
  const int64_t row = blockIdx.y;
  const int64_t block = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (block >= blocks) return;
  const float* data = scores + row * m;
  float best = -INFINITY;
  const int64_t end = min((block + 1) * block_size, m);
  for (int64_t j = block * block_size; j < end; ++j) best = best < data[j] ? data[j] : best;
  const int64_t visible = n_visible[row];
  if (visible > 0 && (visible - 1) / block_size == block) best = INFINITY;
  block_scores[row * blocks + block] = best;
}

// pool[r, j] = 1 for the entries j < n_visible of each kept block (pool zeroed before).
__global__ void pool_fill_kernel(const int32_t* kept, int64_t topk_blocks, int64_t m,
                                 const int64_t* n_visible, int64_t block_size, uint8_t* pool) {
  const int64_t row = blockIdx.y;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (slot >= topk_blocks) return;
  const int64_t block = kept[row * topk_blocks + slot];
  if (block < 0) return;
  const int64_t end = min(min((block + 1) * block_size, m), n_visible[row]);
  for (int64_t j = block * block_size; j < end; ++j) pool[row * m + j] = 1;
}

__global__ void restrict_kernel(float* scores, int64_t count, const uint8_t* pool) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (pool[i] == 0) scores[i] = -INFINITY;
  }
}

struct PoolLayout {
  size_t block_scores = 0, kept = 0, topk = 0, total = 0;
};

PoolLayout pool_layout(int64_t rows, int64_t m, int64_t block_size, int64_t topk_blocks) {
  const auto round = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const int64_t blocks = (m + block_size - 1) / block_size;
  PoolLayout l;
  l.block_scores = 0;
  l.kept = round(static_cast<size_t>(rows * blocks) * sizeof(float));
  l.topk = l.kept + round(static_cast<size_t>(rows * topk_blocks) * sizeof(int32_t));
  l.total = l.topk + top_k_workspace_bytes(rows, blocks, topk_blocks);
  return l;
}

unsigned blocks_for(int64_t count, int threads) {
  return static_cast<unsigned>(std::max<int64_t>(1, (count + threads - 1) / threads));
}

}  // namespace

void index_scores(const IndexScoringArgs& args, cudaStream_t stream) {
  constexpr const char* kFn = "index_scores";
  if (args.n < 0 || args.key_count < 0) invalid(kFn, "negative row or key count");
  if (args.heads <= 0 || args.dim <= 0) invalid(kFn, "heads and dim must be positive");
  if (args.key_format == IndexKeyFormat::kMxfp4 && args.dim % nm::kMxfp4Block != 0)
    invalid(kFn, "MXFP4 keys need dim to be a multiple of 32");
  if (args.n > 65535) invalid(kFn, "more than 65535 query rows");
  if (exact_scores_smem(args.heads, args.dim) > kMaxExactSmem) invalid(kFn, "heads * dim too large");
  if (args.n == 0 || args.key_count == 0) return;
  if (!args.queries || !args.head_weights || !args.keys || !args.n_visible || !args.scores)
    invalid(kFn, "null pointer");
  if (!fast_path_applies(args)) {
    launch_exact_scores(args, stream);
    return;
  }
  const size_t needed = index_scores_workspace_bytes(args.n, args.heads);
  if (needed == 0 || args.workspace != nullptr) {
    if (args.workspace_bytes < needed) invalid(kFn, "workspace too small");
    launch_fast_scores(args, args.workspace, stream);
    return;
  }
  void* workspace = nullptr;  // none given: a stream-ordered allocation for this call
  FKV_CUDA_CHECK(cudaMallocAsync(&workspace, needed, stream));
  launch_fast_scores(args, workspace, stream);
  FKV_CUDA_CHECK(cudaFreeAsync(workspace, stream));
}

size_t index_scores_workspace_bytes(int64_t n, int heads) {
  if (n <= 1 || heads <= 0) return 0;  // one row: prepared inside the scores kernel
  return prepared_layout(n, heads).total;
}

size_t candidate_pool_workspace_bytes(int64_t rows, int64_t m, int64_t block_size, int64_t topk_blocks) {
  if (rows <= 0 || m <= 0 || block_size <= 0 || topk_blocks <= 0) return 0;
  return pool_layout(rows, m, block_size, topk_blocks).total;
}

void candidate_pool(const float* scores, int64_t rows, int64_t m, const int64_t* n_visible,
                    int64_t block_size, int64_t topk_blocks, uint8_t* pool, void* workspace,
                    size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* kFn = "candidate_pool";
  if (rows < 0 || m < 0 || block_size <= 0 || topk_blocks < 0) invalid(kFn, "bad sizes");
  if (rows > 65535) invalid(kFn, "more than 65535 rows");
  if (rows == 0 || m == 0) return;
  if (!scores || !n_visible || !pool) invalid(kFn, "null pointer");
  FKV_CUDA_CHECK(cudaMemsetAsync(pool, 0, static_cast<size_t>(rows * m), stream));
  if (topk_blocks == 0) return;
  if (workspace_bytes < candidate_pool_workspace_bytes(rows, m, block_size, topk_blocks))
    invalid(kFn, "workspace too small");
  const PoolLayout l = pool_layout(rows, m, block_size, topk_blocks);
  auto* base = static_cast<uint8_t*>(workspace);
  auto* block_scores = reinterpret_cast<float*>(base + l.block_scores);
  auto* kept = reinterpret_cast<int32_t*>(base + l.kept);
  const int64_t blocks = (m + block_size - 1) / block_size;
  block_max_kernel<<<dim3(blocks_for(blocks, 256), static_cast<unsigned>(rows)), 256, 0, stream>>>(
      scores, m, n_visible, block_size, blocks, block_scores);
  FKV_CUDA_CHECK_LAUNCH();
  top_k_rows(block_scores, ScoreType::kFp32, rows, blocks, topk_blocks, kept, base + l.topk,
             workspace_bytes - l.topk, stream);
  pool_fill_kernel<<<dim3(blocks_for(topk_blocks, 256), static_cast<unsigned>(rows)), 256, 0, stream>>>(
      kept, topk_blocks, m, n_visible, block_size, pool);
  FKV_CUDA_CHECK_LAUNCH();
}

void restrict_to_pool(float* scores, int64_t rows, int64_t m, const uint8_t* pool, cudaStream_t stream) {
  if (rows < 0 || m < 0) invalid("restrict_to_pool", "bad sizes");
  const int64_t count = rows * m;
  if (count == 0) return;
  if (!scores || !pool) invalid("restrict_to_pool", "null pointer");
  restrict_kernel<<<blocks_for(count, 256 * 8), 256, 0, stream>>>(scores, count, pool);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace flashkv::cuda
