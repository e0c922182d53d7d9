// Row top-k by radix select and index-order compaction (see topk.cuh for the contract).
//
// Selection law (the CPU's select_top_k): order by (score descending, index ascending) and take the first k;
// drop −∞ (and NaN) entries; emit sorted by index. With T the key of the k-th entry of that order and `need`
// the number of entries equal to T among the first k, the selected set is {key > T} ∪ {the `need`
// lowest-index entries with key == T}. Radix select finds T and `need` digit by digit (the entries whose
// key matches the digits chosen so far are the candidates; `need` is what is still missing from them).
// Compaction then walks the row in index order, so the output is sorted without a sort.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <flashkv/error.hpp>

#include <algorithm>
#include <string>

#include "cuda_check.cuh"
#include "topk.cuh"

namespace flashkv::cuda {
namespace {

constexpr int kBins = 2048;                    // 11-bit digits
constexpr uint32_t kNegInfKey = ~0xFF800000u;  // key of −∞, the smallest key any score maps to

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
// BF16 keys have 16 significant bits: two digits decide them.
template <typename T>
constexpr int passes_for() {
  return sizeof(T) == 2 ? 2 : 3;
}

// Per-row radix state: the digits chosen so far (prefix) and how many entries matching them are still
// needed; `arrived` counts the CTAs of a pass that have flushed their histogram (multi-CTA path).
struct RowState {
  uint32_t prefix;
  uint32_t need;
  uint32_t arrived;
  uint32_t done;  // the chosen bin is taken whole: later digits are not needed
};

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
  // Thread t sums bins [t*per, (t+1)*per) counted from the top (bin kBins-1 first).
  constexpr int kPer = kBins / kThreads;
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t found_digit, found_remaining;
  __shared__ bool found_whole;
  uint32_t local = 0;
  for (int i = 0; i < kPer; ++i) local += hist[kBins - 1 - (threadIdx.x * kPer + i)];
  uint32_t before = 0;
  Scan(scan_storage).ExclusiveSum(local, before);
  if (threadIdx.x == 0) {
    found_digit = 0;
    found_remaining = need;
    found_whole = false;
  }
  __syncthreads();
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

// ---- one CTA per row ----------------------------------------------------------------------------------

constexpr int kRowThreads = 512;
constexpr int kRowItems = 8;
constexpr int kRowTile = kRowThreads * kRowItems;
constexpr int64_t kMaxCachedKeys = 48 * 1024;  // 192 KB of keys in shared memory

template <typename T>
__device__ inline T negative_infinity();
template <>
__device__ inline float negative_infinity<float>() {
  return -INFINITY;
}
template <>
__device__ inline uint16_t negative_infinity<uint16_t>() {
  return 0xFF80u;  // BF16 −∞
}

// CTA (segment s, row r) selects the top k of scores[r, s·L, min(n, (s+1)·L)) (L = `segment`; one segment
// is the whole row) into out[(r·segments + s)·k, +k) as row indices. With out_scores non-null the selected
// scores go beside them (−∞ padding): the candidates of the two-stage path.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    top_k_row_kernel(const T* scores, int64_t n, int64_t segment, int64_t k, int32_t* out, T* out_scores,
                     bool cached) {
  extern __shared__ uint32_t cache[];
  __shared__ uint32_t hist[kBins];
  const int64_t row = blockIdx.y;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * segment;
  const int64_t len = min(segment, n - begin);
  const T* data = scores + row * n + begin;
  const int64_t slot0 = (row * gridDim.x + blockIdx.x) * k;
  int32_t* row_out = out + slot0;
  T* row_scores = out_scores != nullptr ? out_scores + slot0 : nullptr;
  if (cached) {
    for (int64_t i = threadIdx.x; i < len; i += kRowThreads) cache[i] = order_key(data[i]);
  }
  const auto key_at = [&](int64_t i) { return cached ? cache[i] : order_key(data[i]); };
  uint32_t prefix = 0;
  uint32_t need = static_cast<uint32_t>(min(k, len));
  for (int pass = 0; pass < passes_for<T>(); ++pass) {
    for (int b = threadIdx.x; b < kBins; b += kRowThreads) hist[b] = 0;
    __syncthreads();
    const uint32_t mask = chosen_mask(pass);
    for (int64_t i = threadIdx.x; i < len; i += kRowThreads) {
      const uint32_t key = key_at(i);
      if ((key & mask) == prefix) atomicAdd(&hist[digit_of(key, pass)], 1u);
    }
    __syncthreads();
    uint32_t digit = 0, remaining = 0;
    bool whole = false;
    choose_digit<kRowThreads>(hist, need, &digit, &remaining, &whole);
    prefix |= digit << digit_shift(pass);
    need = whole ? 0xFFFFFFFFu : remaining;
    __syncthreads();
    if (whole) break;
  }
  for (int64_t i = threadIdx.x; i < k; i += kRowThreads) {
    row_out[i] = -1;
    if (row_scores != nullptr) row_scores[i] = negative_infinity<T>();
  }
  __syncthreads();
  const auto emit = [&](uint32_t slot, int64_t i) {
    row_out[slot] = static_cast<int32_t>(begin + i);
    if (row_scores != nullptr) row_scores[slot] = data[i];
  };
  uint32_t greater_seen = 0, equal_seen = 0;
  for (int64_t base = 0; base < len; base += kRowTile)
    compact_tile<kRowThreads, kRowItems>(key_at, base, len, prefix, need, emit, greater_seen, equal_seen);
}

// out[r, i] = candidates[r, positions[r, i]] (−1 stays −1): stage two's picks back to row indices.
__global__ void gather_candidates_kernel(const int32_t* positions, const int32_t* candidates, int64_t width,
                                         int64_t k, int32_t* out) {
  const int64_t row = blockIdx.y;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < k;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t p = positions[row * k + i];
    out[row * k + i] = p >= 0 ? candidates[row * width + p] : -1;
  }
}

// ---- several CTAs per row (long rows) -------------------------------------------------------------------

constexpr int kChunkThreads = 512;
constexpr int kChunkItems = 8;
constexpr int kChunkTile = kChunkThreads * kChunkItems;

struct ChunkCounts {
  uint32_t greater;  // entries with key > T that are valid
  uint32_t equal;    // entries with key == T
};

struct Workspace {
  RowState* state;      // [rows]
  uint32_t* hist;       // [rows, kBins]
  ChunkCounts* counts;  // [rows, chunks]
};

// Histogram of digit `pass` over one chunk of a row; the last CTA of the row to finish picks the digit.
template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    chunk_histogram_kernel(const T* scores, int64_t n, int64_t k, int64_t chunk, int pass, Workspace ws) {
  __shared__ uint32_t hist[kBins];
  __shared__ bool last;
  const int64_t row = blockIdx.y;
  const T* data = scores + row * n;
  RowState* state = ws.state + row;
  uint32_t* row_hist = ws.hist + row * kBins;
  if (pass > 0 && state->done != 0) return;  // settled by an earlier digit
  for (int b = threadIdx.x; b < kBins; b += kChunkThreads) hist[b] = 0;
  __syncthreads();
  const uint32_t prefix = pass == 0 ? 0u : state->prefix;
  const uint32_t mask = chosen_mask(pass);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = min(begin + chunk, n);
  for (int64_t i = begin + threadIdx.x; i < end; i += kChunkThreads) {
    const uint32_t key = order_key(data[i]);
    if ((key & mask) == prefix) atomicAdd(&hist[digit_of(key, pass)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += kChunkThreads) {
    if (hist[b] != 0) atomicAdd(&row_hist[b], hist[b]);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&state->arrived, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int b = threadIdx.x; b < kBins; b += kChunkThreads) {
    hist[b] = __ldcg(&row_hist[b]);
    row_hist[b] = 0;  // ready for the next pass
  }
  __syncthreads();
  const uint32_t need = pass == 0 ? static_cast<uint32_t>(min(k, n)) : state->need;
  uint32_t digit = 0, remaining = 0;
  bool whole = false;
  choose_digit<kChunkThreads>(hist, need, &digit, &remaining, &whole);
  if (threadIdx.x == 0) {
    state->prefix = prefix | (digit << digit_shift(pass));
    state->need = whole ? 0xFFFFFFFFu : remaining;
    state->done = whole ? 1u : 0u;
    state->arrived = 0;
  }
}

// Per chunk: how many valid entries are above the threshold and how many equal it.
template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    chunk_count_kernel(const T* scores, int64_t n, int64_t chunk, Workspace ws) {
  using Reduce = cub::BlockReduce<uint32_t, kChunkThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  const int64_t row = blockIdx.y;
  const T* data = scores + row * n;
  const uint32_t threshold = ws.state[row].prefix;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = min(begin + chunk, n);
  uint32_t packed = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kChunkThreads) {
    const uint32_t key = order_key(data[i]);
    packed += key == threshold ? 0x10000u : (key > threshold && key > kNegInfKey ? 1u : 0u);
  }
  // A chunk holds at most 65535 entries (checked by the launcher), so the halves never carry.
  const uint32_t total = Reduce(reduce_storage).Sum(packed);
  if (threadIdx.x == 0) ws.counts[row * gridDim.x + blockIdx.x] = {total & 0xFFFFu, total >> 16};
}

// Per chunk: its output offset from the earlier chunks' counts, then the index-order compaction.
template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    chunk_write_kernel(const T* scores, int64_t n, int64_t k, int64_t chunk, int32_t* out, Workspace ws) {
  using Reduce = cub::BlockReduce<uint32_t, kChunkThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  __shared__ uint32_t s_greater, s_equal;
  const int64_t row = blockIdx.y;
  const T* data = scores + row * n;
  const uint32_t threshold = ws.state[row].prefix;
  const uint32_t need = ws.state[row].need;
  uint32_t greater = 0, equal = 0;
  for (uint32_t c = threadIdx.x; c < blockIdx.x; c += kChunkThreads) {
    const ChunkCounts counts = ws.counts[row * gridDim.x + c];
    greater += counts.greater;
    equal += counts.equal;
  }
  const uint32_t greater_before = Reduce(reduce_storage).Sum(greater);
  __syncthreads();
  const uint32_t equal_before = Reduce(reduce_storage).Sum(equal);
  if (threadIdx.x == 0) {
    s_greater = greater_before;
    s_equal = equal_before;
  }
  __syncthreads();
  uint32_t greater_seen = s_greater, equal_seen = s_equal;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = min(begin + chunk, n);
  const auto key_at = [&](int64_t i) { return order_key(data[i]); };
  int32_t* row_out = out + row * k;
  const auto emit = [&](uint32_t slot, int64_t i) { row_out[slot] = static_cast<int32_t>(i); };
  for (int64_t base = begin; base < end; base += kChunkTile)
    compact_tile<kChunkThreads, kChunkItems>(key_at, base, end, threshold, need, emit, greater_seen,
                                             equal_seen);
}

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "top_k_rows: " + message);
}

// Entries per chunk on the multi-CTA path: enough CTAs to fill the GPU twice, tiles of kChunkTile, and
// at most 65535 entries (the packed 16-bit counters of chunk_count_kernel).
int64_t chunk_size(int64_t rows, int64_t n) {
  constexpr int64_t kTargetCtas = 264;
  const int64_t per_row = std::max<int64_t>(1, kTargetCtas / std::max<int64_t>(rows, 1));
  int64_t chunk = (n + per_row - 1) / per_row;
  chunk = std::clamp<int64_t>(chunk, kChunkTile, 8 * kChunkTile);
  return (chunk + kChunkTile - 1) / kChunkTile * kChunkTile;
}

// Rows short enough for one CTA with cached keys, or too many rows for splitting to pay, take the
// one-CTA-per-row kernel.
bool one_cta_per_row(int64_t rows, int64_t n) {
  return n <= kMaxCachedKeys || rows >= 132;
}

// Two stages for many long rows: segments of kSegment entries each give their top k (one CTA each, keys in
// shared memory: the scores are read once), then one CTA per row selects the top k of those candidates.
// Exact: an entry of the row's top k has fewer than k entries before it in the (score, index) order, so
// also within its segment; candidates sit in index order, so stage two's tie rule is the row's.
constexpr int64_t kSegment = 16 * 1024;

int64_t segments(int64_t n) {
  return (n + kSegment - 1) / kSegment;
}

bool two_stage(int64_t rows, int64_t n, int64_t k) {
  return rows >= 4 && n > kMaxCachedKeys && segments(n) * k <= kMaxCachedKeys;
}

struct WorkspaceLayout {
  size_t state = 0, hist = 0, counts = 0;                      // multi-CTA path
  size_t candidates = 0, candidate_scores = 0, positions = 0;  // two-stage path
  size_t total = 0;
};

size_t round_up(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

WorkspaceLayout layout(int64_t rows, int64_t n, int64_t k) {
  WorkspaceLayout l;
  if (two_stage(rows, n, k)) {
    const size_t width = static_cast<size_t>(rows * segments(n) * k);
    l.candidate_scores = round_up(width * sizeof(int32_t));
    l.positions = l.candidate_scores + round_up(width * sizeof(float));
    l.total = l.positions + round_up(static_cast<size_t>(rows * k) * sizeof(int32_t));
    return l;
  }
  if (one_cta_per_row(rows, n)) return l;
  const int64_t chunks = (n + chunk_size(rows, n) - 1) / chunk_size(rows, n);
  l.hist = round_up(static_cast<size_t>(rows) * sizeof(RowState));
  l.counts = l.hist + round_up(static_cast<size_t>(rows) * kBins * sizeof(uint32_t));
  l.total = l.counts + round_up(static_cast<size_t>(rows * chunks) * sizeof(ChunkCounts));
  return l;
}

template <typename T>
void launch_per_segment(const T* scores, int64_t rows, int64_t n, int64_t segment, int64_t k, int32_t* out,
                        T* out_scores, cudaStream_t stream) {
  static const bool configured = [] {
    FKV_CUDA_CHECK(cudaFuncSetAttribute(top_k_row_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kMaxCachedKeys * sizeof(uint32_t))));
    return true;
  }();
  (void)configured;
  const bool cached = segment <= kMaxCachedKeys;
  const size_t smem = cached ? static_cast<size_t>(segment) * sizeof(uint32_t) : 0;
  const dim3 grid(static_cast<unsigned>((n + segment - 1) / segment), static_cast<unsigned>(rows));
  top_k_row_kernel<T><<<grid, kRowThreads, smem, stream>>>(scores, n, segment, k, out, out_scores, cached);
  FKV_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch(const T* scores, int64_t rows, int64_t n, int64_t k, int32_t* out, void* workspace,
            cudaStream_t stream) {
  auto* base = static_cast<uint8_t*>(workspace);
  const WorkspaceLayout l = layout(rows, n, k);
  if (two_stage(rows, n, k)) {
    const int64_t width = segments(n) * k;
    auto* candidates = reinterpret_cast<int32_t*>(base + l.candidates);
    auto* candidate_scores = reinterpret_cast<T*>(base + l.candidate_scores);
    auto* positions = reinterpret_cast<int32_t*>(base + l.positions);
    launch_per_segment(scores, rows, n, kSegment, k, candidates, candidate_scores, stream);
    launch_per_segment(static_cast<const T*>(candidate_scores), rows, width, width, k, positions,
                       static_cast<T*>(nullptr), stream);
    gather_candidates_kernel<<<dim3(static_cast<unsigned>((k + 255) / 256), static_cast<unsigned>(rows)), 256,
                               0, stream>>>(positions, candidates, width, k, out);
    FKV_CUDA_CHECK_LAUNCH();
    return;
  }
  if (one_cta_per_row(rows, n)) {
    launch_per_segment(scores, rows, n, n, k, out, static_cast<T*>(nullptr), stream);
    return;
  }
  const Workspace ws{reinterpret_cast<RowState*>(base + l.state), reinterpret_cast<uint32_t*>(base + l.hist),
                     reinterpret_cast<ChunkCounts*>(base + l.counts)};
  FKV_CUDA_CHECK(cudaMemsetAsync(workspace, 0, l.counts, stream));  // states and histograms
  FKV_CUDA_CHECK(cudaMemsetAsync(out, 0xFF, static_cast<size_t>(rows * k) * sizeof(int32_t), stream));
  const int64_t chunk = chunk_size(rows, n);
  const dim3 grid(static_cast<unsigned>((n + chunk - 1) / chunk), static_cast<unsigned>(rows));
  for (int pass = 0; pass < passes_for<T>(); ++pass) {
    chunk_histogram_kernel<T><<<grid, kChunkThreads, 0, stream>>>(scores, n, k, chunk, pass, ws);
    FKV_CUDA_CHECK_LAUNCH();
  }
  chunk_count_kernel<T><<<grid, kChunkThreads, 0, stream>>>(scores, n, chunk, ws);
  FKV_CUDA_CHECK_LAUNCH();
  chunk_write_kernel<T><<<grid, kChunkThreads, 0, stream>>>(scores, n, k, chunk, out, ws);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t top_k_workspace_bytes(int64_t rows, int64_t n, int64_t k) {
  if (rows <= 0 || n <= 0 || k <= 0) return 0;
  return layout(rows, n, k).total;
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
