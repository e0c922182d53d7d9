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

__global__ void __launch_bounds__(kScoreThreads) exact_scores_kernel(IndexScoringArgs args) {
  extern __shared__ float shared[];
  const int heads = args.heads, dim = args.dim;
  const int64_t row = blockIdx.y;
  float* query = shared;                 // heads * dim
  float* weights = query + heads * dim;  // heads
  float* keys = weights + heads;         // kScoreThreads rows of dim + 1
  const float* q_row = args.queries + row * heads * dim;
  for (int i = threadIdx.x; i < heads * dim; i += kScoreThreads) query[i] = q_row[i];
  for (int h = threadIdx.x; h < heads; h += kScoreThreads) weights[h] = args.head_weights[row * heads + h];
  const int64_t entry = static_cast<int64_t>(blockIdx.x) * kScoreThreads + threadIdx.x;
  const int64_t visible = min(args.n_visible[row], args.key_count);
  float* key = keys + threadIdx.x * (dim + 1);
  if (entry < visible) decode_key(args.keys, args.key_format, dim, entry, key);
  __syncthreads();
  if (entry >= args.key_count) return;
  float* out = args.scores + row * args.key_count + entry;
  if (entry >= visible) {
    *out = -INFINITY;
    return;
  }
  double sum = 0;
  for (int h = 0; h < heads; ++h) {
    const double product = bf16_if(cpu_order_dot(query + h * dim, key, dim), args.faithful);
    const double relu = product < 0.0 ? 0.0 : product;  // std::max(product, 0.0), NaN kept
    // Explicit roundings: a fused multiply-add here would differ from the CPU's product-then-sum.
    sum = __dadd_rn(sum, bf16_if(__dmul_rn(relu, static_cast<double>(weights[h])), args.faithful));
  }
  const float value = __double2float_rn(sum);
  *out = args.faithful ? nm::bf16_to_float(nm::bf16_from_float(value)) : value;
}

size_t exact_scores_smem(int heads, int dim) {
  return sizeof(float) *
         (static_cast<size_t>(heads) * dim + heads + static_cast<size_t>(kScoreThreads) * (dim + 1));
}

void launch_exact_scores(const IndexScoringArgs& args, cudaStream_t stream) {
  const size_t smem = exact_scores_smem(args.heads, args.dim);
  FKV_CUDA_CHECK(cudaFuncSetAttribute(exact_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((args.key_count + kScoreThreads - 1) / kScoreThreads),
                  static_cast<unsigned>(args.n));
  exact_scores_kernel<<<grid, kScoreThreads, smem, stream>>>(args);
  FKV_CUDA_CHECK_LAUNCH();
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
  if (exact_scores_smem(args.heads, args.dim) > 200 * 1024) invalid(kFn, "heads * dim too large");
  if (args.n == 0 || args.key_count == 0) return;
  if (!args.queries || !args.head_weights || !args.keys || !args.n_visible || !args.scores)
    invalid(kFn, "null pointer");
  launch_exact_scores(args, stream);
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
