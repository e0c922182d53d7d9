// Row top-k (see topk.cuh for the contract).
//
// Selection law (the CPU's select_top_k): order by (score descending, index ascending) and take the first k;
// drop −∞ (and NaN) entries; emit sorted by index. With T the key of the k-th entry of that order and `need`
// the number of entries equal to T among the first k, the selected set is {key > T} ∪ {the `need`
// lowest-index entries with key == T}. Radix select finds T and `need` digit by digit (the entries whose
// key matches the digits chosen so far are the candidates; `need` is what is still missing from them).
// Compaction then walks the entries in index order, so the output is sorted without a sort.
//
// Speed comes from not running the radix passes over the whole row: a lower bound L on the threshold is
// guessed from a sample (the sample's max and a log-scale histogram of the distances to it), the entries
// with key >= L are gathered in index order (one read of the scores), and the exact selection runs on
// those few candidates. The guess is checked, never trusted: when at least k entries are >= L, T >= L and
// the top k are all candidates; when L is the lowest valid key, every valid entry is a candidate. A failed
// guess costs time, not exactness (short rows retake every valid entry; long rows run the radix select on
// the whole row).
#include <cub/block/block_scan.cuh>

#include <flashkv/error.hpp>

#include <algorithm>
#include <string>

#include "cuda_check.cuh"
#include "topk.cuh"

namespace flashkv::cuda {
namespace {

// Phase stamps for bench/bench_topk_phases.cu, which compiles this file with FLASHKV_TOPK_PHASES: thread 0
// of the first CTA of a kernel records the global timer (ns) and the SM clock as it passes point `slot`.
// Nothing in the library build.
#ifdef FLASHKV_TOPK_PHASES
__device__ unsigned long long topk_phase_stamps[32][2];
#define TOPK_PHASE(slot)                                                       \
  do {                                                                         \
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) {              \
      unsigned long long ns;                                                   \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));                   \
      topk_phase_stamps[slot][0] = ns;                                         \
      topk_phase_stamps[slot][1] = static_cast<unsigned long long>(clock64()); \
    }                                                                          \
  } while (0)
#else
#define TOPK_PHASE(slot) \
  do {                   \
  } while (0)
#endif

constexpr int kBins = 2048;                    // 11-bit digits
constexpr uint32_t kNegInfKey = ~0xFF800000u;  // key of −∞, the smallest key any score maps to
constexpr uint32_t kLowestValidKey = kNegInfKey + 1u;

__device__ inline bool valid_key(uint32_t key) {
  return key > kNegInfKey;
}

// Order-preserving key: a > b as scores iff key(a) > key(b); −0 and +0 equal; NaN as −∞.
__device__ inline uint32_t order_key(float f) {
  uint32_t u = __float_as_uint(f);
  if (f != f) u = 0xFF800000u;
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// The low 16 bits are cleared (they would be all ones for negative scores): the two digits of a BF16
// key then determine it completely, and −∞ stays at or below kNegInfKey.
__device__ inline uint32_t order_key(uint16_t bf16) {
  return order_key(__uint_as_float(static_cast<uint32_t>(bf16) << 16)) & 0xFFFF0000u;
}

// ---- CTA-wide helpers ---------------------------------------------------------------------------------

// Maximum of `value` over the CTA; every thread gets it. Two calls need a barrier between them (its shared
// words are not guarded against a next call: one barrier, not two).
template <int kThreads>
__device__ uint32_t block_max(uint32_t value) {
  __shared__ uint32_t per_warp[kThreads / 32];
  const unsigned lane = threadIdx.x & 31u;
  value = __reduce_max_sync(~0u, value);
  if (lane == 0) per_warp[threadIdx.x >> 5] = value;
  __syncthreads();
  return __reduce_max_sync(~0u, lane < kThreads / 32 ? per_warp[lane] : 0u);
}

// Exclusive prefix sum of `value` over the CTA in thread order (warp scans, then the sums of the warps
// before: one barrier); `total` gets the sum over the CTA. Two calls need a barrier between them.
template <int kThreads>
__device__ uint32_t block_exclusive_sum(uint32_t value, uint32_t* total = nullptr) {
  __shared__ uint32_t warp_sums[kThreads / 32];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  uint32_t inclusive = value;
  for (unsigned offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(~0u, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  const uint32_t sum = lane < kThreads / 32 ? warp_sums[lane] : 0u;
  if (total != nullptr) *total = __reduce_add_sync(~0u, sum);
  return __reduce_add_sync(~0u, lane < warp ? sum : 0u) + inclusive - value;
}

// Given the candidates' histogram (bins in shared memory, `need` > 0 of them wanted), picks the digit
// whose bin holds the need-th largest candidate: the new prefix digit and what is still needed from it.
// When fewer than `need` candidates exist (k > valid count) bin 0 is chosen with `need` reduced by
// everything above it, which keeps every candidate. `whole` is set when the chosen bin is taken entirely:
// then every candidate >= the prefix (lower digits zero) is selected and the search can stop, with the
// threshold at that prefix and no limit on the entries equal to it. Must be called by all threads of the
// CTA; the results are the same in every thread.
template <int kThreads>
__device__ void choose_digit(const uint32_t* hist, uint32_t need, uint32_t* digit, uint32_t* remaining,
                             bool* whole) {
  // Thread t sums bins [t*per, (t+1)*per) counted from the top (bin kBins-1 first); the exclusive prefix
  // of those sums is a warp scan plus the sums of the warps before (one barrier, every warp adds them).
  constexpr int kPer = kBins / kThreads;
  constexpr unsigned kWarps = kThreads / 32;
  __shared__ uint32_t warp_sums[kWarps];
  __shared__ uint32_t found_digit, found_remaining;
  __shared__ bool found_whole;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  uint32_t local = 0;
  for (int i = 0; i < kPer; ++i) local += hist[kBins - 1 - (threadIdx.x * kPer + i)];
  uint32_t inclusive = local;
  for (unsigned offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(~0u, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  if (threadIdx.x == 0) {
    found_digit = 0;
    found_remaining = need;
    found_whole = false;
  }
  __syncthreads();
  const uint32_t warp_sum = lane < kWarps ? warp_sums[lane] : 0u;
  const uint32_t before = __reduce_add_sync(~0u, lane < warp ? warp_sum : 0u) + inclusive - local;
  // Exactly one thread's segment contains the crossing (if any), and it alone writes.
  if (before < need && before + local >= need) {
    uint32_t cumulative = before;
    for (int i = 0; i < kPer; ++i) {
      const int bin = kBins - 1 - (threadIdx.x * kPer + i);
      if (cumulative + hist[bin] >= need) {
        found_digit = static_cast<uint32_t>(bin);
        found_remaining = need - cumulative;
        found_whole = hist[bin] == need - cumulative;
        break;
      }
      cumulative += hist[bin];
    }
  } else if (threadIdx.x == kThreads - 1 && before + local < need) {
    found_digit = 0;  // fewer candidates than needed: keep them all
    found_remaining = need - (before + local - hist[0]);
  }
  __syncthreads();
  *digit = found_digit;
  *remaining = found_remaining;
  *whole = found_whole;
}

// ---- exact radix select over a whole row (k above the candidate path's limit, or a failed guess) --------

constexpr int kRowThreads = 512;
constexpr int kRowItems = 8;
constexpr int64_t kMaxCachedKeys = 48 * 1024;  // 192 KB of keys in shared memory

// Digit p covers bits [shift, shift + width) of the key: 31..21, 20..10, 9..0.
__host__ __device__ constexpr int digit_shift(int pass) {
  return pass == 0 ? 21 : (pass == 1 ? 10 : 0);
}
// Bits of the key above digit `pass` (the digits already chosen).
__host__ __device__ constexpr uint32_t chosen_mask(int pass) {
  return pass == 0 ? 0u : (pass == 1 ? 0xFFE00000u : 0xFFFFFC00u);
}
__device__ inline uint32_t digit_of(uint32_t key, int pass) {
  return (key >> digit_shift(pass)) & (kBins - 1u);
}
// BF16 keys have 16 significant bits: two digits decide them.
template <typename T>
constexpr int passes_for() {
  return sizeof(T) == 2 ? 2 : 3;
}
// Low bits that are zero in every key (BF16: the 16 cleared ones).
template <typename T>
constexpr int low_bits() {
  return sizeof(T) == 2 ? 16 : 0;
}

// Compaction of one tile of kThreads * kItems consecutive entries [base, min(base + tile, end)) in index
// order. An entry's output slot is (valid entries above T before it) + min(entries equal to T before it,
// need); `greater_seen` and `equal_seen` carry those counts over the earlier tiles (same in every thread).
// emit(slot, index) writes one selected entry.
template <int kThreads, int kItems, typename KeyAt, typename Emit>
__device__ void compact_tile(KeyAt key_at, int64_t base, int64_t end, uint32_t threshold, uint32_t need,
                             Emit emit, uint32_t& greater_seen, uint32_t& equal_seen) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t tile_total;
  const bool threshold_valid = threshold > kNegInfKey;
  const auto taken_equal = [&](uint32_t equal_before) {
    return threshold_valid ? min(equal_before, need) : 0u;
  };
  uint32_t keys[kItems];
  uint32_t packed = 0;  // (equal count << 16) | valid-and-greater count over this thread's items (< 2^16)
  const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kItems;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    keys[i] = first + i < end ? key_at(first + i) : 0u;
    if (first + i < end)
      packed += keys[i] == threshold ? 0x10000u : (keys[i] > threshold && keys[i] > kNegInfKey ? 1u : 0u);
  }
  uint32_t before = 0, total = 0;
  Scan(scan_storage).ExclusiveSum(packed, before, total);
  uint32_t equal_rank = equal_seen + (before >> 16);
  uint32_t greater_rank = greater_seen + (before & 0xFFFFu);
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t index = first + i;
    if (index >= end) break;
    const uint32_t key = keys[i];
    if (key == threshold) {
      if (threshold_valid && equal_rank < need) emit(greater_rank + taken_equal(equal_rank), index);
      ++equal_rank;
    } else if (key > threshold && key > kNegInfKey) {
      emit(greater_rank + taken_equal(equal_rank), index);
      ++greater_rank;
    }
  }
  if (threadIdx.x == 0) tile_total = total;
  __syncthreads();
  greater_seen += tile_total & 0xFFFFu;
  equal_seen += tile_total >> 16;
  __syncthreads();  // tile_total and the scan storage are reused by the next tile
}

// The top k of data[0, len) into row_out[0, k), by kThreads threads: radix passes over every entry
// (keys cached in shared memory when `cache` is non-null, else read from global memory each pass).
template <typename T, int kThreads>
__device__ void select_row_radix(const T* data, int64_t len, int64_t k, int32_t* row_out, uint32_t* cache) {
  __shared__ uint32_t hist[kBins];
  if (cache != nullptr) {
    for (int64_t i = threadIdx.x; i < len; i += kThreads) cache[i] = order_key(data[i]);
  }
  const auto key_at = [&](int64_t i) { return cache != nullptr ? cache[i] : order_key(data[i]); };
  uint32_t prefix = 0;
  uint32_t need = static_cast<uint32_t>(min(k, len));
  for (int pass = 0; pass < passes_for<T>(); ++pass) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
    __syncthreads();
    const uint32_t mask = chosen_mask(pass);
    for (int64_t i = threadIdx.x; i < len; i += kThreads) {
      const uint32_t key = key_at(i);
      if ((key & mask) == prefix) atomicAdd(&hist[digit_of(key, pass)], 1u);
    }
    __syncthreads();
    uint32_t digit = 0, remaining = 0;
    bool whole = false;
    choose_digit<kThreads>(hist, need, &digit, &remaining, &whole);
    prefix |= digit << digit_shift(pass);
    need = whole ? 0xFFFFFFFFu : remaining;
    if (whole) break;  // the same in every thread
    __syncthreads();   // hist and choose_digit's results are rewritten by the next pass
  }
  for (int64_t i = threadIdx.x; i < k; i += kThreads) row_out[i] = -1;
  __syncthreads();
  const auto emit = [&](uint32_t slot, int64_t i) { row_out[slot] = static_cast<int32_t>(i); };
  uint32_t greater_seen = 0, equal_seen = 0;
  const bool threshold_valid = valid_key(prefix);
  for (int64_t base = 0; base < len; base += kThreads * kRowItems) {
    compact_tile<kThreads, kRowItems>(key_at, base, len, prefix, need, emit, greater_seen, equal_seen);
    // Once k entries are out nothing later is selected: rows of few distinct values (the fallback's usual
    // case) stop after their first tiles instead of walking the whole row.
    const uint32_t emitted = greater_seen + (threshold_valid ? min(equal_seen, need) : 0u);
    if (static_cast<int64_t>(emitted) >= k) break;  // the same in every thread
  }
}

// One CTA per row (blockIdx.x), keys cached in dynamic shared memory when `cached`.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    top_k_row_kernel(const T* scores, int64_t n, int64_t k, int32_t* out, bool cached) {
  extern __shared__ uint32_t cache[];
  const int64_t row = blockIdx.x;
  select_row_radix<T, kRowThreads>(scores + row * n, n, k, out + row * k, cached ? cache : nullptr);
}

// ---- the threshold guess ------------------------------------------------------------------------------

// Distances d = max_key - key in 240 log-scale buckets: exact below 8, then 8 buckets per octave (each
// 12.5% of its distance wide), so the top of any distribution is resolved finely.
constexpr int kDistanceBuckets = 256;
// The histogram keeps bucket b in word b + b / 8: lane l's eight buckets 8l..8l+7 start at word 9l, so a
// warp reading them (rank_bucket, by every warp) hits 32 different banks.
constexpr int kHistogramWords = kDistanceBuckets + kDistanceBuckets / 8;
__device__ inline uint32_t histogram_word(uint32_t bucket) {
  return bucket + (bucket >> 3);
}
constexpr uint32_t kEveryBucket = 255;

// Without branches (every sample of the guess takes it): for d >= 8 with top bit e, d truncated to a float
// has the exponent field 127 + e and its top three mantissa bits are those of d below bit e, so bits 20 and
// up of the float are (127 + e)·8 + those three, which is the bucket 8 + (e − 3)·8 + them plus 1032.
__device__ inline uint32_t distance_bucket(uint32_t d) {
  const uint32_t bits = __float_as_uint(__uint2float_rz(d));
  return d < 8u ? d : (bits >> 20) - 1032u;
}
// The largest distance in bucket b (every distance from the last bucket, 239, on).
__device__ inline uint32_t bucket_top(uint32_t b) {
  if (b < 8u) return b;
  if (b >= 239u) return 0xFFFFFFFFu;
  const uint32_t e = 3u + (b - 8u) / 8u;
  return ((9u + (b - 8u) % 8u) << (e - 3u)) - 1u;
}
// Lower bound L: the lowest key within bucket b's distances of max_key, never below the lowest valid key.
__device__ inline uint32_t lower_key(uint32_t max_key, uint32_t bucket) {
  if (!valid_key(max_key)) return kLowestValidKey;
  const uint32_t span = bucket_top(bucket);
  return max_key - kLowestValidKey <= span ? kLowestValidKey : max_key - span;
}
// Which sampled entry's bucket bounds the guess. Of `samples` evenly spread entries, about λ = k·samples/n
// lie at or above the row's k-th largest (uniform rows: a Poisson count), and the guess fails (fewer than k
// entries >= L: a whole-row radix select, hundreds of us) when the rank-th largest sampled entry lies above
// it: rank = max(2λ, λ + 4√λ + 4, 16) keeps that near or below 1e-5 for every λ (2λ alone, used up to
// session 6: 8e-3 at λ = 8, 3e-4 at λ = 16), at about rank·n/samples candidates (2k for λ >= 32, 2.25k at
// λ = 16, 3k at λ = 8, 4k at λ = 4), each costing the merge ~1.5 cycles (s7r1), so the margin is no larger;
// its middle term stays below capacity/2 expected candidates (overflow is the other failure). Same
// arithmetic in every CTA of a row: the same rank.
__device__ inline uint32_t sample_rank(int64_t k, int64_t samples, int64_t n, int64_t capacity) {
  const float per_entry = static_cast<float>(samples) / static_cast<float>(n);
  const float lambda = static_cast<float>(k) * per_entry;
  const float margin =
      fminf(lambda + 4.0f * sqrtf(lambda) + 4.0f, 0.5f * static_cast<float>(capacity) * per_entry);
  const float rank = ceilf(fmaxf(2.0f * lambda, margin));
  return rank >= 2147483647.0f ? 0x7FFFFFFFu : max(static_cast<uint32_t>(rank), 16u);
}
// By one warp: the smallest bucket whose cumulative count reaches `rank`, or kEveryBucket when the histogram
// holds fewer entries.
__device__ uint32_t rank_bucket(const uint32_t* hist, uint32_t rank) {
  static_assert(kDistanceBuckets == 32 * 8);
  const unsigned lane = threadIdx.x & 31u;
  uint32_t counts[8];
  uint32_t local = 0;
#pragma unroll
  for (unsigned i = 0; i < 8; ++i) {
    counts[i] = hist[lane * 9 + i];  // buckets 8·lane + i (see histogram_word)
    local += counts[i];
  }
  uint32_t inclusive = local;
  for (unsigned offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(~0u, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  uint32_t found = kEveryBucket;
  if (inclusive >= rank && inclusive - local < rank) {
    uint32_t cumulative = inclusive - local;
#pragma unroll
    for (unsigned i = 0; i < 8; ++i) {
      cumulative += counts[i];
      if (cumulative >= rank && found == kEveryBucket) found = lane * 8 + i;
    }
  }
  return __reduce_min_sync(~0u, found);
}

// L from the sample histogram of a CTA (its counts published by a barrier): warp 0 finds the rank's bucket
// and a barrier hands L to every thread (s5r2: every warp finding it itself cost more issue slots than the
// barrier saves). Once per kernel.
__device__ uint32_t lower_from_histogram(const uint32_t* hist, uint32_t max_key, uint32_t rank) {
  __shared__ uint32_t shared_lower;
  if (threadIdx.x < 32) {
    const uint32_t lower = lower_key(max_key, rank_bucket(hist, rank));
    if (threadIdx.x == 0) shared_lower = lower;
  }
  __syncthreads();
  return shared_lower;
}

// ---- candidates in index order ------------------------------------------------------------------------

// The score whose order key is `key` (a valid key): x >= key_score(L) exactly when order_key(x) >= L, NaN
// comparing false like its −∞ key (the key 0x7FFFFFFF of −0, never produced, reads as x >= 0).
__device__ inline float key_score(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// The threshold as a score (entries >= it are the candidates). BF16 keys are multiples of 2^16, so L rounded
// up to one keeps the same entries at or above it.
template <typename T>
__device__ inline float threshold_score(uint32_t lower) {
  return key_score(sizeof(T) == 2 ? (lower + 0xFFFFu) & 0xFFFF0000u : lower);
}

// ---- tiles in registers: N consecutive entries per thread in packed 32-bit words ----------------------
//
// Thread t of a CTA of kThreads holds entries base + t·N + [0, N) of a tile (kThreads · N entries), so a
// tile's index order is thread order: a thread's candidates are placed by one exclusive scan of the threads'
// counts. Entry e lives in word e·sizeof(T)/4 of `words` (BF16: the low half for even e, as a vector load
// puts it). Aligned rows (16-byte rows) load them as 16-byte vectors (V = kVector), others entry by entry
// (V = 1). A thread first tests its max (one comparison); only threads holding a candidate flag entries, and
// only warps holding one scan. N <= 32 (the flags are one word).

template <typename T, int N>
constexpr int kWords = static_cast<int>(sizeof(T)) * N / 4;

// Entries per 16-byte vector load (V on aligned rows).
template <typename T>
constexpr int kVector = 16 / static_cast<int>(sizeof(T));

template <typename T, int N>
__device__ inline float entry_score(const uint32_t (&words)[kWords<T, N>], int e) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(words[e]);
  } else {
    const uint32_t w = words[e >> 1];
    return __uint_as_float((e & 1) ? (w & 0xFFFF0000u) : (w << 16));
  }
}

__device__ inline uint32_t max_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));  // a NaN half yields the other operand's
  return d;
}

// The largest of the thread's scores (NaN only when all are NaN; then every comparison is false).
template <typename T, int N>
__device__ inline float thread_max(const uint32_t (&words)[kWords<T, N>]) {
  if constexpr (sizeof(T) == 4) {
    float m = __uint_as_float(words[0]);
#pragma unroll
    for (int w = 1; w < kWords<T, N>; ++w) m = fmaxf(m, __uint_as_float(words[w]));
    return m;
  } else {
    uint32_t m = words[0];
#pragma unroll
    for (int w = 1; w < kWords<T, N>; ++w) m = max_bf16x2(m, words[w]);
    return fmaxf(__uint_as_float(m << 16), __uint_as_float(m & 0xFFFF0000u));
  }
}

// Bit e set when entry e is >= the threshold score.
template <typename T, int N>
__device__ inline uint32_t entry_flags(const uint32_t (&words)[kWords<T, N>], float threshold) {
  static_assert(N <= 32);
  uint32_t flags = 0;
#pragma unroll
  for (int e = 0; e < N; ++e) flags |= static_cast<uint32_t>(entry_score<T, N>(words, e) >= threshold) << e;
  return flags;
}

// The 16 bytes at `p` (part of an aligned row).
__device__ inline uint4 load_vector(const void* p) {
  return *static_cast<const uint4*>(p);
}

// The words of tile [base, base + kThreads · N) of a row or chunk ending at `end`, padded with −∞ past the
// end.
template <typename T, int N, int V, int kThreads>
__device__ inline void load_tile(const T* data, int64_t base, int64_t end, uint32_t (&words)[kWords<T, N>]) {
  constexpr uint32_t kPadding = sizeof(T) == 4 ? 0xFF800000u : 0xFF80FF80u;  // −∞ (BF16: two of them)
  const int64_t first = base + static_cast<int64_t>(threadIdx.x) * N;
  const bool whole = base + static_cast<int64_t>(kThreads) * N <= end;
  if constexpr (V == 1) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const int64_t i = first + e;
      uint32_t bits = 0xFF800000u;
      if (whole || i < end) {
        if constexpr (sizeof(T) == 4)
          bits = __float_as_uint(data[i]);
        else
          bits = static_cast<uint32_t>(data[i]) << 16;
      }
      if constexpr (sizeof(T) == 4)
        words[e] = bits;
      else if (e & 1)
        words[e >> 1] |= bits;
      else
        words[e >> 1] = bits >> 16;
    }
  } else {
    // Aligned rows: n is a multiple of V, so a vector lies wholly inside or wholly past the end.
#pragma unroll
    for (int q = 0; q < N / V; ++q) {
      const int64_t i = first + V * q;
      const uint4 v =
          whole || i < end ? load_vector(data + i) : make_uint4(kPadding, kPadding, kPadding, kPadding);
      words[4 * q] = v.x;
      words[4 * q + 1] = v.y;
      words[4 * q + 2] = v.z;
      words[4 * q + 3] = v.w;
    }
  }
}

// A thread's entries >= the threshold: their flags (bit e) and the inclusive scan of the counts over the
// warp's lanes (zero in warps without any). Warp-collective.
struct TileFlags {
  uint32_t flags = 0, inclusive = 0;
};
template <typename T, int N>
__device__ inline TileFlags tile_flags(const uint32_t (&words)[kWords<T, N>], float threshold) {
  TileFlags f;
  const bool any = thread_max<T, N>(words) >= threshold;
  if (!__any_sync(~0u, any)) return f;
  if (any) f.flags = entry_flags<T, N>(words, threshold);
  f.inclusive = static_cast<uint32_t>(__popc(f.flags));
  const unsigned lane = threadIdx.x & 31u;
#pragma unroll
  for (unsigned offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(~0u, f.inclusive, offset);
    if (lane >= offset) f.inclusive += other;
  }
  return f;
}

// The key of a score (its float bits `u`) at or above a valid threshold (so neither NaN nor −∞): order_key
// without its NaN test, the sign flip as one xor (−0 first made +0); BF16 keys with the low 16 bits cleared,
// as order_key(uint16_t).
template <typename T>
__device__ inline uint32_t candidate_key_of(uint32_t u) {
  u = u == 0x80000000u ? 0u : u;
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u;
  return (u ^ flip) & (sizeof(T) == 2 ? 0xFFFF0000u : 0xFFFFFFFFu);
}

// words[w] for a run-time w < kWords: selects on w's bits, halving the candidates per bit (static indices,
// so `words` stays in registers).
template <int kSpan>
__device__ inline uint32_t select_word(const uint32_t* words, int w) {
  if constexpr (kSpan == 1) {
    return words[0];
  } else {
    const uint32_t low = select_word<kSpan / 2>(words, w),
                   high = select_word<kSpan / 2>(words + kSpan / 2, w);
    return (w & (kSpan / 2)) != 0 ? high : low;
  }
}

template <typename T, int N>
__device__ inline uint32_t word_at(const uint32_t (&words)[kWords<T, N>], int w) {
  static_assert((kWords<T, N> & (kWords<T, N> - 1)) == 0);
  return select_word<kWords<T, N>>(words, w);
}

// emit(slot, key, index) for the thread's flagged entries, in index order from slot `position` on: one
// iteration per flagged entry (lowest first), the entry fetched by word_at: a warp loops as often as its lane
// with the most candidates (long rows: one or two; short rows: ~1 in 12 entries flagged, a few), not once per
// entry position with a branch or a predicated store each (s5r1: short-row placement 1.28 us that way).
template <typename T, int N, typename Emit>
__device__ inline void place_flagged(const uint32_t (&words)[kWords<T, N>], uint32_t flags, int64_t first,
                                     uint32_t position, Emit emit) {
  while (flags != 0) {
    const int e = __ffs(flags) - 1;
    flags &= flags - 1u;
    const uint32_t w = word_at<T, N>(words, e * static_cast<int>(sizeof(T)) / 4);
    const uint32_t bits = sizeof(T) == 4 ? w : ((e & 1) ? (w & 0xFFFF0000u) : (w << 16));  // as entry_score
    emit(position++, candidate_key_of<T>(bits), first + e);
  }
}

// The top k of `count` candidates (keys and row indices in shared memory, in index order, all valid, all
// in [base, top]) into out[0, k): radix passes on key − base from the highest set bit of top − base (the
// candidates sit near the top of the row, so these distances spread over the bins), then the index-order
// compaction; −1 pads. Keys are multiples of 2^kLowBits (BF16: 16), which the distances drop. `hist`: kBins
// shared words, zeroed by the caller before a barrier (saves the first pass one). Once per kernel.
template <int kThreads, int kLowBits>
__device__ void select_candidates(const uint32_t* keys, const int32_t* indices, uint32_t count, int64_t k,
                                  uint32_t base, uint32_t top, int32_t* out, uint32_t* hist) {
  // Taken: distance >> shift above prefix, or equal to it among the first `need` in index order.
  int shift = 32;
  uint64_t prefix = 0;
  uint32_t need = count;
  constexpr uint32_t kUnit = (1u << kLowBits) - 1u;
  base = (base + kUnit) & ~kUnit;  // no overflow: base <= top, a key; the same keys lie at or above it
  const auto distance = [&](uint32_t key) { return (key - base) >> kLowBits; };
  if (count > k) {
    shift = top == base ? 0 : 32 - __clz(distance(top));
    need = static_cast<uint32_t>(k);
    while (shift > 0) {
      const int low = max(shift - 11, 0);
      const uint32_t mask = (1u << (shift - low)) - 1u;
      // Plain increments (s7r2: matching a warp's equal bins first, one atomic per bin and warp, made the
      // radix passes slower: fp32 1M b1 7825 vs 2164 cycles, BF16 256K b1 2337 vs 1970).
      for (uint32_t i = threadIdx.x; i < count; i += kThreads) {
        const uint32_t e = distance(keys[i]);
        if ((static_cast<uint64_t>(e) >> shift) == prefix) atomicAdd(&hist[(e >> low) & mask], 1u);
      }
      __syncthreads();
      uint32_t digit = 0, remaining = 0;
      bool whole = false;
      choose_digit<kThreads>(hist, need, &digit, &remaining, &whole);
      prefix = (prefix << (shift - low)) | digit;
      shift = low;
      need = remaining;
      if (whole || shift == 0) break;  // the same in every thread
      // choose_digit's last barrier is past every read of hist; the barrier also guards its results.
      for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
      __syncthreads();
    }
  }
  TOPK_PHASE(5);
  // Compaction: thread t walks candidates [t·per, (t+1)·per); counts packed as (equal << 16) | greater.
  const uint32_t per = (count + kThreads - 1) / kThreads;
  const uint32_t first = min(count, threadIdx.x * per), last = min(count, first + per);
  const auto level = [&](uint32_t i) { return static_cast<uint64_t>(distance(keys[i])) >> shift; };
  uint32_t packed = 0;
  for (uint32_t i = first; i < last; ++i) {
    const uint64_t q = level(i);
    packed += q == prefix ? 0x10000u : (q > prefix ? 1u : 0u);
  }
  const uint32_t before = block_exclusive_sum<kThreads>(packed);
  TOPK_PHASE(7);
  // Straight to out (s7r2: staging the indices in shared memory for coalesced rows cost 300-500 cycles more).
  uint32_t greater_rank = before & 0xFFFFu, equal_rank = before >> 16;
  for (uint32_t i = first; i < last; ++i) {
    const uint64_t q = level(i);
    if (q == prefix) {
      if (equal_rank < need) out[greater_rank + equal_rank] = indices[i];
      ++equal_rank;
    } else if (q > prefix) {
      out[greater_rank + min(equal_rank, need)] = indices[i];
      ++greater_rank;
    }
  }
  TOPK_PHASE(8);
  for (int64_t i = min(static_cast<int64_t>(count), k) + threadIdx.x; i < k; i += kThreads) out[i] = -1;
}

// ---- short rows: one CTA per row, the row in registers ---------------------------------------------------

constexpr int kShortThreads = 1024;
constexpr int kShortItems = 16;
constexpr int64_t kShortMax = kShortThreads * kShortItems;
constexpr int kShortWarps = kShortThreads / 32;

// Row blockIdx.x (n <= kShortMax): the row in registers as one tile (16 consecutive entries per thread), the
// guess from min(n, 1024) evenly spread entries, candidates gathered into dynamic shared memory (n keys,
// then n indices), a failed guess retaken with every valid entry.
template <typename T, int V>
__global__ void __launch_bounds__(kShortThreads, 1)
    top_k_short_kernel(const T* scores, int64_t n, int64_t k, int32_t* out) {
  extern __shared__ uint32_t candidate_keys[];
  int32_t* candidate_indices = reinterpret_cast<int32_t*>(candidate_keys + n);
  __shared__ uint32_t sample_hist[kHistogramWords];
  __shared__ uint32_t select_hist[kBins];
  __shared__ uint32_t warp_counts[2][kShortWarps];
  TOPK_PHASE(0);
  const int64_t row = blockIdx.x;
  const T* data = scores + row * n;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int b = threadIdx.x; b < kHistogramWords; b += kShortThreads) sample_hist[b] = 0;
  for (int b = threadIdx.x; b < kBins; b += kShortThreads) select_hist[b] = 0;
  const int64_t samples = min(n, static_cast<int64_t>(kShortThreads));
  uint32_t words[kWords<T, kShortItems>];
  load_tile<T, kShortItems, V, kShortThreads>(data, 0, n, words);
  // Entry floor(t·n / samples), samples being 1024 or n (a shift, not a 64-bit division).
  const int64_t sampled = n >= kShortThreads ? (threadIdx.x * n) / kShortThreads : threadIdx.x;
  const uint32_t sample = threadIdx.x < samples ? order_key(data[sampled]) : 0u;
  // The max as a score (fmaxf skips NaN, whose key is −∞'s anyway), then its key.
  const float local_max = fmaxf(thread_max<T, kShortItems>(words), -INFINITY);  // −∞ where all are NaN
  const uint32_t max_key =
      block_max<kShortThreads>(order_key(local_max) & (sizeof(T) == 2 ? 0xFFFF0000u : 0xFFFFFFFFu));
  TOPK_PHASE(1);
  if (valid_key(sample)) atomicAdd(&sample_hist[histogram_word(distance_bucket(max_key - sample))], 1u);
  __syncthreads();
  uint32_t lower = lower_from_histogram(sample_hist, max_key, sample_rank(k, samples, n, n));
  TOPK_PHASE(2);
  // Flags by float comparisons, counts scanned per warp; a failed guess (fewer than k flagged, not every
  // valid entry) is retaken with every valid entry, in the other count buffer.
  TileFlags f;
  uint32_t total = 0;
  int attempt = 0;
  for (;; ++attempt) {
    f = tile_flags<T, kShortItems>(words, threshold_score<T>(lower));
    if (lane == 31) warp_counts[attempt][warp] = f.inclusive;
    __syncthreads();
    total = __reduce_add_sync(~0u, warp_counts[attempt][lane]);
    if (static_cast<int64_t>(total) >= k || lower == kLowestValidKey) break;
    lower = kLowestValidKey;
  }
  TOPK_PHASE(3);
  const uint32_t warps_before = __reduce_add_sync(~0u, lane < warp ? warp_counts[attempt][lane] : 0u);
  place_flagged<T, kShortItems>(words, f.flags, static_cast<int64_t>(threadIdx.x) * kShortItems,
                                warps_before + f.inclusive - static_cast<uint32_t>(__popc(f.flags)),
                                [&](uint32_t slot, uint32_t key, int64_t index) {
                                  candidate_keys[slot] = key;
                                  candidate_indices[slot] = static_cast<int32_t>(index);
                                });
  __syncthreads();
  TOPK_PHASE(4);
  select_candidates<kShortThreads, low_bits<T>()>(candidate_keys, candidate_indices, total, k, lower, max_key,
                                                  out + row * k, select_hist);
  TOPK_PHASE(6);
}

// ---- long rows: a filter pass over chunks, then a per-row selection of the candidates ---------------------

constexpr int kFilterThreads = 512;
// 64 bytes per thread and tile for either type (16 fp32 / 32 BF16 entries): a CTA has one tile in flight
// while it tests the previous one, so bytes per tile set how close to the memory bandwidth it runs (BF16
// tiles of 16 entries per thread ran at the fp32 tiles' time per tile, half their bandwidth).
template <typename T>
constexpr int kFilterItems = 64 / static_cast<int>(sizeof(T));
constexpr int kFilterWarps = kFilterThreads / 32;
template <typename T>
constexpr int64_t kFilterTile = static_cast<int64_t>(kFilterThreads) * kFilterItems<T>;
constexpr int64_t kSamples = 8192;              // at most 256 runs of 32 consecutive entries
constexpr uint32_t kCapacity = 8192;            // candidates per row (and per chunk)
constexpr int64_t kFilterMaxK = kCapacity / 4;  // a guess for 2k stays well inside it
constexpr int kMergeThreads = 1024;             // short per-thread chains in the gather and the selection
constexpr int64_t kTargetCtas = 264;            // two filter CTAs per SM of an H100/H200

struct FilterWorkspace {
  uint32_t* lower;   // [rows] the guess L
  uint32_t* counts;  // [rows, chunks] entries >= L per chunk (may exceed kCapacity)
  uint2* kept;       // [rows, chunks, kCapacity] (key, index) of those entries, in index order
};

// A row's sample for the guess: sample_count(n, k) entries of a row of n > kShortMax in evenly spaced runs of
// 32 (the same in every CTA that takes it), up to kSamples / kThreads of them per thread. Every filter CTA
// of the row pays for its loads, keys and atomics (s6: L known 2.6 us after the start with 4096 entries,
// 3.3 us with 8192), so rows take half of kSamples wherever the candidates expected from its rank stay
// within 3/8 of kCapacity (k = 512: rows up to 512K entries; the overflow chance is then negligible).
template <typename T, int kThreads>
using RowSample = T[kSamples / kThreads];

__device__ inline int64_t sample_count(int64_t n, int64_t k) {
  constexpr int64_t kHalf = kSamples / 2;
  const bool half_fits =
      static_cast<int64_t>(sample_rank(k, kHalf, n, kCapacity)) * n <= kCapacity * 3 / 8 * kHalf;
  return half_fits ? kHalf : kSamples;
}

template <typename T, int kThreads>
__device__ inline void load_sample(const T* data, int64_t n, int64_t k, RowSample<T, kThreads>& sample) {
  // 32-bit offsets and division (n < 2^31; the last run ends at or before n - 1): the 64-bit form cost ~15
  // instructions per sampled entry (s6 profile: a third of a one-tile filter CTA's instructions were the
  // sample's). Thread t takes entry t mod 32 of runs t / 32 + (kThreads / 32)·i: one pointer, a fixed step.
  const int64_t count = sample_count(n, k);
  const uint32_t stride = (static_cast<uint32_t>(n) - 32u) / static_cast<uint32_t>(count / 32 - 1);
  const int per_thread = static_cast<int>(count / kThreads);
  const T* first = data + (threadIdx.x >> 5) * stride + (threadIdx.x & 31u);
  const uint32_t step = kThreads / 32 * stride;
#pragma unroll
  for (int i = 0; i < static_cast<int>(kSamples / kThreads); ++i) {
    if (i >= per_thread) break;  // the same in every thread
    sample[i] = first[static_cast<uint32_t>(i) * step];
  }
}

// A sampled score's key: order_key's order with cheaper special cases (NaN as −∞ through fmaxf; −0 one
// below +0), which only the guess sees (any L is exact; the same samples give the same L in every CTA).
template <typename T>
__device__ inline uint32_t sample_key(T score) {
  float f;
  if constexpr (sizeof(T) == 2)
    f = __uint_as_float(static_cast<uint32_t>(score) << 16);
  else
    f = score;
  const uint32_t u = __float_as_uint(fmaxf(f, -INFINITY));
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u;
  return (u ^ flip) & (sizeof(T) == 2 ? 0xFFFF0000u : 0xFFFFFFFFu);
}

// The keys of a thread's first `taken` sampled entries (0, an invalid key counted nowhere, for the rest) and
// their max.
template <typename T, int N>
__device__ inline uint32_t sample_keys(const T (&sample)[N], int taken, uint32_t (&keys)[N]) {
  uint32_t local_max = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    keys[i] = i < taken ? sample_key(sample[i]) : 0u;
    local_max = max(local_max, keys[i]);
  }
  return local_max;
}

// L for a row of n entries from its sample (same entries, same arithmetic in every CTA: the same L), by
// kThreads threads; every thread gets it. Uses block_max and lower_from_histogram (once per kernel).
template <typename T, int kThreads>
__device__ uint32_t sampled_lower_key(const RowSample<T, kThreads>& sample, int64_t n, int64_t k) {
  constexpr int kPerThread = static_cast<int>(kSamples / kThreads);
  __shared__ uint32_t hist[kHistogramWords];
  for (int b = threadIdx.x; b < kHistogramWords; b += kThreads) hist[b] = 0;
  const int64_t count = sample_count(n, k);
  uint32_t keys[kPerThread];
  const uint32_t max_key = block_max<kThreads>(sample_keys(sample, static_cast<int>(count / kThreads), keys));
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    if (valid_key(keys[i])) atomicAdd(&hist[histogram_word(distance_bucket(max_key - keys[i]))], 1u);
  }
  __syncthreads();
  return lower_from_histogram(hist, max_key, sample_rank(k, count, n, kCapacity));
}

// One tile of the filter: this thread's words of it tested against the threshold, the warps' counts exchanged
// through `warp_counts` (one barrier; double-buffered by the caller: the next tile's barrier separates this
// tile's reads from the rewrite two tiles on), the candidates emitted in index order from slot `written` on.
// prefetch() runs first (the next tile's loads overlap this tile's tests). Returns the candidate count.
template <typename T, typename Prefetch, typename Emit>
__device__ inline uint32_t filter_tile(const uint32_t (&current)[kWords<T, kFilterItems<T>>], float threshold,
                                       int64_t base, uint32_t written, uint32_t* warp_counts,
                                       Prefetch prefetch, Emit emit) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  prefetch();
  const TileFlags f = tile_flags<T, kFilterItems<T>>(current, threshold);
  if (lane == 31) warp_counts[warp] = f.inclusive;
  __syncthreads();
  const uint32_t count = lane < kFilterWarps ? warp_counts[lane] : 0u;
  const uint32_t tile_total = __reduce_add_sync(~0u, count);
  const uint32_t warps_before = __reduce_add_sync(~0u, lane < warp ? count : 0u);
  place_flagged<T, kFilterItems<T>>(
      current, f.flags, base + static_cast<int64_t>(threadIdx.x) * kFilterItems<T>,
      written + warps_before + f.inclusive - static_cast<uint32_t>(__popc(f.flags)), emit);
  return tile_total;
}

// The tiles of [begin, end) of a row (`raw` holds the first tile's words, loaded by the caller; each later
// tile's loads go out while the previous one is tested): the entries >= the threshold score emitted in index
// order as emit(slot, key, index), slots from 0. Returns how many there are (the same in every thread).
template <typename T, int V, typename Emit>
__device__ inline uint32_t filter_chunk_tiles(const T* data, int64_t begin, int64_t end,
                                              uint32_t (&raw)[kWords<T, kFilterItems<T>>], float threshold,
                                              uint32_t (&warp_counts)[2][kFilterWarps], Emit emit) {
  constexpr int kN = kFilterItems<T>;
  constexpr int64_t kTile = kFilterTile<T>;
  uint32_t written = 0;
  int parity = 0;
  for (int64_t base = begin; base < end; base += kTile) {
    uint32_t current[kWords<T, kN>];
#pragma unroll
    for (int w = 0; w < kWords<T, kN>; ++w) current[w] = raw[w];
    const auto prefetch = [&] {
      if (base + kTile < end) load_tile<T, kN, V, kFilterThreads>(data, base + kTile, end, raw);
    };
    written += filter_tile<T>(current, threshold, base, written, warp_counts[parity], prefetch, emit);
    parity ^= 1;
  }
  return written;
}

// For candidates thread + kThreads·g (g < kBatch) of a row: the chunk c holding each (the last with
// offsets[c] <= p; never an empty one) and offsets[c], by halvings over `span` (a power of two >= the chunk
// count; offsets reads 0xFFFFFFFF from the chunk count on). The batch's searches run step by step together
// (independent shared loads in flight).
template <int kThreads, int kBatch>
__device__ inline void locate_candidates(const uint32_t* offsets, int span, int (&chunk)[kBatch],
                                         uint32_t (&start)[kBatch]) {
#pragma unroll
  for (int g = 0; g < kBatch; ++g) {
    chunk[g] = 0;
    start[g] = 0;  // chunk 0 starts at 0
  }
  for (int step = span / 2; step > 0; step >>= 1) {
#pragma unroll
    for (int g = 0; g < kBatch; ++g) {
      const uint32_t p = threadIdx.x + static_cast<uint32_t>(kThreads * g);
      const uint32_t o = offsets[chunk[g] + step];  // unconditional: the loads go out together
      const bool after = o <= p;
      chunk[g] = after ? chunk[g] + step : chunk[g];
      start[g] = after ? o : start[g];
    }
  }
}

// CTA (chunk c, row r): keeps the entries >= L of scores[r, c·chunk, min(n, (c+1)·chunk)) in index order (the
// first kCapacity of them) and counts them. The scores are read once, in coalesced tiles. Every CTA takes
// the row's sample itself (the same L in all; CTA 0 of the row stores it for the merge kernel): s5r1's
// same-run A/B had this faster than a sample kernel ahead of the filter (a third launch) on every shape.
template <typename T, int V>
__global__ void __launch_bounds__(kFilterThreads, 2)
    top_k_filter_kernel(const T* scores, int64_t n, int64_t k, int64_t chunk, FilterWorkspace ws) {
  __shared__ uint32_t warp_counts[2][kFilterWarps];
  TOPK_PHASE(10);
  // The merge kernel may start now (programmatic dependent launch): its launch latency hides behind this
  // grid, and it waits for this grid's completion and memory before reading anything.
  asm volatile("griddepcontrol.launch_dependents;");
  const int64_t row = blockIdx.y;
  const T* data = scores + row * n;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = min(n, begin + chunk);
  // The sample's loads go out first (it is needed first), then the first tile's (they do not depend on L);
  // each later tile's while the previous one is tested: the memory latency is not exposed once per tile.
  constexpr int kN = kFilterItems<T>;
  uint32_t raw[kWords<T, kN>];
  RowSample<T, kFilterThreads> sample;
  load_sample<T, kFilterThreads>(data, n, k, sample);
  load_tile<T, kN, V, kFilterThreads>(data, begin, end, raw);
  const uint32_t lower = sampled_lower_key<T, kFilterThreads>(sample, n, k);
  if (threadIdx.x == 0 && blockIdx.x == 0) ws.lower[row] = lower;
  // Entries are flagged by a float comparison (no key per entry; keys only for the candidates).
  const float lower_score = threshold_score<T>(lower);
  TOPK_PHASE(11);
  uint2* kept = ws.kept + (row * gridDim.x + blockIdx.x) * static_cast<int64_t>(kCapacity);
  const uint32_t written = filter_chunk_tiles<T, V>(
      data, begin, end, raw, lower_score, warp_counts, [&](uint32_t slot, uint32_t key, int64_t index) {
        if (slot < kCapacity) kept[slot] = make_uint2(key, static_cast<uint32_t>(index));
      });
  if (threadIdx.x == 0) ws.counts[row * gridDim.x + blockIdx.x] = written;
  TOPK_PHASE(12);
}

// Row blockIdx.x: the chunks' candidates gathered in chunk order (= index order) into dynamic shared memory
// (kCapacity keys, then kCapacity indices) and selected; when the guess failed (fewer than k candidates and
// not every valid entry, or more than kCapacity) the exact radix select over the whole row instead.
template <typename T>
__global__ void __launch_bounds__(kMergeThreads)
    top_k_merge_kernel(const T* scores, int64_t n, int64_t k, int32_t* out, int chunks, FilterWorkspace ws) {
  extern __shared__ uint32_t candidate_keys[];
  int32_t* candidate_indices = reinterpret_cast<int32_t*>(candidate_keys + kCapacity);
  __shared__ uint32_t offsets[kMergeThreads];
  __shared__ uint32_t select_hist[kBins];
  for (int b = threadIdx.x; b < kBins; b += kMergeThreads) select_hist[b] = 0;  // while the filter runs
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the filter grid has completed, its writes visible
  TOPK_PHASE(13);
  const int64_t row = blockIdx.x;
  const uint32_t lower = ws.lower[row];  // loaded with the counts and the first candidates: one latency
  const uint32_t size = static_cast<int>(threadIdx.x) < chunks ? ws.counts[row * chunks + threadIdx.x] : 0u;
  // The first `window` entries of every chunk (a power of two, window · chunks <= kCapacity) are loaded
  // before the counts are known: slot s = thread + 1024·e is entry s mod window of chunk s / window. Entries
  // past a chunk's count are dropped once the counts are in; chunks with more than `window` take the search
  // below. (s6r2: a window of about twice a chunk's expected share was no faster at 256K and overflowed into
  // the search at 1M, fp32 1M b1 gather 5.1 us.)
  const uint2* kept = ws.kept + row * chunks * static_cast<int64_t>(kCapacity);
  constexpr int kPerThread = kCapacity / kMergeThreads;
  const int window_bits = 31 - __clz(static_cast<int>(kCapacity) / chunks);
  uint2 early[kPerThread];
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const uint32_t slot = threadIdx.x + static_cast<uint32_t>(kMergeThreads * e);
    const uint32_t c = slot >> window_bits, j = slot & ((1u << window_bits) - 1u);
    early[e] =
        c < static_cast<uint32_t>(chunks) ? kept[static_cast<int64_t>(c) * kCapacity + j] : make_uint2(0, 0);
  }
  uint32_t total = 0;
  const uint32_t offset = block_exclusive_sum<kMergeThreads>(size, &total);
  // Past the last chunk the table reads "starts after every candidate": the searches need no bound check.
  offsets[threadIdx.x] = static_cast<int>(threadIdx.x) < chunks ? offset : 0xFFFFFFFFu;
  const bool overflow = __syncthreads_or(size > (1u << window_bits));  // some chunk holds more
  int32_t* row_out = out + row * k;
  if (total > kCapacity || (static_cast<int64_t>(total) < k && lower != kLowestValidKey)) {
    select_row_radix<T, kMergeThreads>(scores + row * n, n, k, row_out, static_cast<uint32_t*>(nullptr));
    return;
  }
  uint32_t top = 0;  // candidates can lie above the sample's max
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const uint32_t slot = threadIdx.x + static_cast<uint32_t>(kMergeThreads * e);
    const uint32_t c = slot >> window_bits, j = slot & ((1u << window_bits) - 1u);
    if (c >= static_cast<uint32_t>(chunks)) continue;
    const uint32_t first = offsets[c], next = min(offsets[c + 1], total);  // the sentinel reads as total
    if (first + j >= next) continue;
    candidate_keys[first + j] = early[e].x;
    candidate_indices[first + j] = static_cast<int32_t>(early[e].y);
    top = max(top, early[e].x);
  }
  if (overflow) {  // the same in every thread
    // Candidate p of the row is entry p − offsets[c] of chunk c, the last chunk with offsets[c] <= p (that
    // one is not empty), found in a fixed number of halvings; those within the window are in place already.
    // A thread takes candidates p = thread + 1024·g, g < 8, whose searches run step by step together
    // (independent shared loads in flight), then issues their global loads before using any.
    constexpr int kSearchSpan = 512;  // a power of two above the chunk count (<= kTargetCtas)
    static_assert(kTargetCtas <= kSearchSpan && kSearchSpan <= kMergeThreads);
    int lo[kPerThread];
    uint32_t start[kPerThread];
    locate_candidates<kMergeThreads, kPerThread>(offsets, kSearchSpan, lo, start);
    uint2 entries[kPerThread];
#pragma unroll
    for (int g = 0; g < kPerThread; ++g) {
      const uint32_t p = threadIdx.x + static_cast<uint32_t>(kMergeThreads * g);
      const bool needed = p < total && p - start[g] >= (1u << window_bits);
      entries[g] = needed ? kept[static_cast<int64_t>(lo[g]) * kCapacity + (p - start[g])] : make_uint2(0, 0);
    }
#pragma unroll
    for (int g = 0; g < kPerThread; ++g) {
      const uint32_t p = threadIdx.x + static_cast<uint32_t>(kMergeThreads * g);
      if (p >= total || p - start[g] < (1u << window_bits)) continue;
      candidate_keys[p] = entries[g].x;
      candidate_indices[p] = static_cast<int32_t>(entries[g].y);
      top = max(top, entries[g].x);
    }
  }
  top = block_max<kMergeThreads>(top);  // its barrier also publishes the gathered candidates
  TOPK_PHASE(14);
  select_candidates<kMergeThreads, low_bits<T>()>(candidate_keys, candidate_indices, total, k, lower, top,
                                                  row_out, select_hist);
  TOPK_PHASE(15);
}

// ---- host side ----------------------------------------------------------------------------------------

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "top_k_rows: " + message);
}

enum class Path { kShort, kFilter, kRadix };

Path path_for(int64_t n, int64_t k) {
  if (n <= kShortMax) return Path::kShort;
  return k <= kFilterMaxK ? Path::kFilter : Path::kRadix;
}

// Entries per filter CTA: whole tiles of `tile` entries, about kTargetCtas CTAs over all rows (at most that
// many per row, which also bounds the merge kernel's per-chunk table).
int64_t filter_chunk(int64_t rows, int64_t n, int64_t tile) {
  const int64_t tiles = (n + tile - 1) / tile;
  const int64_t per_row = std::clamp<int64_t>(kTargetCtas / rows, 1, tiles);
  return (tiles + per_row - 1) / per_row * tile;
}

int64_t filter_chunks(int64_t rows, int64_t n, int64_t tile) {
  const int64_t chunk = filter_chunk(rows, n, tile);
  return (n + chunk - 1) / chunk;
}

struct WorkspaceLayout {
  size_t counts = 0, kept = 0, total = 0;  // lower at offset 0
};

size_t round_up(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The layout for filter tiles of `tile` entries (the score type's).
WorkspaceLayout layout(int64_t rows, int64_t n, int64_t k, int64_t tile) {
  WorkspaceLayout l;
  if (path_for(n, k) != Path::kFilter) return l;
  const auto chunk_slots = static_cast<size_t>(rows * filter_chunks(rows, n, tile));
  l.counts = round_up(static_cast<size_t>(rows) * sizeof(uint32_t));
  l.kept = l.counts + round_up(chunk_slots * sizeof(uint32_t));
  l.total = l.kept + chunk_slots * kCapacity * sizeof(uint2);
  return l;
}

// Raises a kernel's dynamic shared memory limit once per process.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  FKV_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// A launch configuration with one attribute (which must outlive the configuration's use).
cudaLaunchConfig_t launch_config(dim3 grid, int threads, size_t shared_bytes, cudaStream_t stream,
                                 cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

// Launches `kernel` as a programmatic dependent of the previous kernel on `stream`: it may be scheduled
// before that one finishes and must wait for it (griddepcontrol.wait) before touching its results.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, int threads, size_t shared_bytes,
                      cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  const cudaLaunchConfig_t config = launch_config(grid, threads, shared_bytes, stream, &attribute);
  FKV_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Every row starts on a 16-byte boundary (then every filter tile and group does).
template <typename T>
bool vector_aligned(const T* scores, int64_t n) {
  return reinterpret_cast<uintptr_t>(scores) % 16 == 0 && n % kVector<T> == 0;
}

template <typename T>
void launch(const T* scores, int64_t rows, int64_t n, int64_t k, int32_t* out, void* workspace,
            cudaStream_t stream) {
  static const bool configured = [] {
    allow_shared_memory(top_k_short_kernel<T, 1>, kShortMax * 2 * sizeof(uint32_t));
    allow_shared_memory(top_k_short_kernel<T, kVector<T>>, kShortMax * 2 * sizeof(uint32_t));
    allow_shared_memory(top_k_merge_kernel<T>, kCapacity * 2 * sizeof(uint32_t));
    allow_shared_memory(top_k_row_kernel<T>, kMaxCachedKeys * sizeof(uint32_t));
    return true;
  }();
  (void)configured;
  const auto grid_rows = static_cast<unsigned>(rows);
  switch (path_for(n, k)) {
    case Path::kShort: {
      const size_t smem = static_cast<size_t>(n) * 2 * sizeof(uint32_t);
      if (vector_aligned(scores, n))
        top_k_short_kernel<T, kVector<T>><<<grid_rows, kShortThreads, smem, stream>>>(scores, n, k, out);
      else
        top_k_short_kernel<T, 1><<<grid_rows, kShortThreads, smem, stream>>>(scores, n, k, out);
      FKV_CUDA_CHECK_LAUNCH();
      return;
    }
    case Path::kFilter: {
      auto* base = static_cast<uint8_t*>(workspace);
      constexpr int64_t kTile = kFilterTile<T>;
      const WorkspaceLayout l = layout(rows, n, k, kTile);
      const FilterWorkspace ws{reinterpret_cast<uint32_t*>(base),
                               reinterpret_cast<uint32_t*>(base + l.counts),
                               reinterpret_cast<uint2*>(base + l.kept)};
      const int64_t chunks = filter_chunks(rows, n, kTile);
      const int64_t chunk = filter_chunk(rows, n, kTile);
      const dim3 grid(static_cast<unsigned>(chunks), grid_rows);
      if (vector_aligned(scores, n))
        top_k_filter_kernel<T, kVector<T>><<<grid, kFilterThreads, 0, stream>>>(scores, n, k, chunk, ws);
      else
        top_k_filter_kernel<T, 1><<<grid, kFilterThreads, 0, stream>>>(scores, n, k, chunk, ws);
      FKV_CUDA_CHECK_LAUNCH();
      launch_dependent(top_k_merge_kernel<T>, dim3(grid_rows), kMergeThreads,
                       kCapacity * 2 * sizeof(uint32_t), stream, scores, n, k, out, static_cast<int>(chunks),
                       ws);
      return;
    }
    case Path::kRadix: {
      const bool cached = n <= kMaxCachedKeys;
      const size_t smem = cached ? static_cast<size_t>(n) * sizeof(uint32_t) : 0;
      top_k_row_kernel<T><<<grid_rows, kRowThreads, smem, stream>>>(scores, n, k, out, cached);
      FKV_CUDA_CHECK_LAUNCH();
      return;
    }
  }
}

}  // namespace

size_t top_k_workspace_bytes(int64_t rows, int64_t n, int64_t k) {
  if (rows <= 0 || n <= 0 || k <= 0) return 0;
  // Either score type's layout fits (the caller's workspace does not depend on the type).
  return std::max(layout(rows, n, k, kFilterTile<float>).total,
                  layout(rows, n, k, kFilterTile<uint16_t>).total);
}

void top_k_rows(const void* scores, ScoreType type, int64_t rows, int64_t n, int64_t k, int32_t* out,
                void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (rows < 0 || n < 0 || k < 0) invalid("rows, n and k must be >= 0");
  if (n > INT32_MAX || k > INT32_MAX || rows > 65535)
    invalid("n or k above 2^31 - 1, or more than 65535 rows");
  if (rows == 0 || k == 0) return;
  if (out == nullptr) invalid("out is null");
  if (n == 0) {
    FKV_CUDA_CHECK(cudaMemsetAsync(out, 0xFF, static_cast<size_t>(rows * k) * sizeof(int32_t), stream));
    return;
  }
  if (scores == nullptr) invalid("scores is null");
  if (workspace_bytes < top_k_workspace_bytes(rows, n, k)) invalid("workspace too small");
  if (type == ScoreType::kFp32)
    launch(static_cast<const float*>(scores), rows, n, k, out, workspace, stream);
  else
    launch(static_cast<const uint16_t*>(scores), rows, n, k, out, workspace, stream);
}

}  // namespace flashkv::cuda
