// Backend — the kernel-layer contract (DESIGN.md "The kernel layer"): every numeric operation of the V4.1
// forward (and of V4-Flash, whose own operations are marked "V4"), on typed views of memory the caller owns.
// lib/runtime strings these operations together into the model (spec/MODEL.md §3-§8); a backend only
// computes. The CPU implementation lives in lib/backend/cpu (one file per mechanism); the CUDA one in
// kernels/.
//
// Numerics. Every operation takes a Rounding:
//   kClean     results are stored as fp32, nothing else is rounded and the KV quantizers are not involved;
//   kFaithful  results are rounded at the cast points of the numpy reference (tests/reference, listed per
//              operation below and in docs/model-notes.md): BF16 activations between operations, fp32 where
//              the spec keeps fp32.
// The CPU backend evaluates every reduction in double and rounds once at the cast point, as the reference
// (float64 arithmetic rounded at cast points) does: a row's result then does not depend on the batch, the
// chunk or the thread count, and faithful mode reproduces the reference's BF16 roundings (and so its top-k
// selections).
//
// Views: row-major float matrices; weights are [out, in] (torch order). Outputs never alias inputs unless an
// operation says "in place".
// Threading: a Backend is immutable after construction; operations may be called concurrently from several
// threads (the CPU backend's thread pool accepts concurrent callers).
// Errors: operations check nothing the runtime already guarantees (shapes are the caller's contract); they do
// not throw except std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <flashkv/config.hpp>

namespace flashkv::backend {

enum class Rounding { kClean, kFaithful };

// Where a projection's output is rounded (faithful mode; clean mode always stores fp32).
enum class OutputCast { kFp32, kBf16 };

struct Matrix {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  float* row(int64_t r) const { return data + r * cols; }
};

struct ConstMatrix {
  const float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  ConstMatrix() = default;
  ConstMatrix(const float* d, int64_t r, int64_t c) : data(d), rows(r), cols(c) {}
  ConstMatrix(Matrix m) : data(m.data), rows(m.rows), cols(m.cols) {}  // NOLINT: a view narrows implicitly
  const float* row(int64_t r) const { return data + r * cols; }
};

// Storage of cached rows (spec §2.2): plain fp32 (clean mode) or one of the three KV records (faithful mode).
enum class RecordFormat {
  kFp32,   // dim floats
  kFp8,    // SWA window row: FP8 E4M3 + UE8M0 per 32 channels (528 B for 512)
  kNvfp4,  // compressed entry: E2M1 + E4M3 scale per 16 channels (288 B for 512)
  kMxfp4,  // index key: E2M1 + E8M0 per 32 channels (68 B for 128)
  // V4-Flash KV row (window rows and compressed entries of deepseek_v4): the non-RoPE channels FP8 E4M3 with
  // one UE8M0 scale per 64 channels (a partial last block has its own scale), zero padding to an 8-byte
  // boundary, then the trailing rope_dim RoPE channels as BF16 (448 + 7 + 1 + 128 = 584 B for 512 / 64).
  kFp8Bf16Rope,
};

// Bytes of one record; rope_dim (the trailing BF16 channels) matters to kFp8Bf16Rope only.
size_t record_bytes(RecordFormat format, int64_t dim, int64_t rope_dim = 0);

// `count` cached rows of `dim` channels, back to back in `format`.
struct RecordRows {
  RecordFormat format = RecordFormat::kFp32;
  const uint8_t* data = nullptr;
  int64_t count = 0;
  int64_t dim = 0;
  int64_t rope_dim = 0;  // kFp8Bf16Rope only
  size_t row_bytes() const { return record_bytes(format, dim, rope_dim); }
  const uint8_t* row(int64_t i) const { return data + static_cast<size_t>(i) * row_bytes(); }
  void dequantize(int64_t i, float* out) const;  // dim floats
};

// RoPE frequencies of one flavour (spec §2.3): f_i = theta^(-2i/d), blended by frequency-only YaRN when
// given. Faithful mode builds them in fp32 and forms fp32 angles s·f_i (as the reference); clean mode in
// double.
struct RopeTable {
  int64_t rope_dim = 0;       // rotated channels at the end of each head
  std::vector<double> freqs;  // rope_dim / 2
  Rounding rounding = Rounding::kClean;
};
RopeTable make_rope_table(int64_t rope_dim, double theta, const RopeScaling* yarn, Rounding rounding);

// One sparse-attention problem (spec §5.7) for the n query rows of one sequence.
struct SparseAttention {
  ConstMatrix q;  // [n, heads*head_dim], after RoPE
  int64_t heads = 0;
  ConstMatrix window;                         // [m, head_dim] window rows (keys = values), dequantized
  std::span<const int64_t> window_positions;  // [m]
  std::span<const int64_t> query_positions;   // [n]
  int64_t sliding_window = 0;                 // key t visible to query s iff s - W < t <= s
  RecordRows entries;                         // the KV owner's compressed entries (count 0: none)
  std::span<const int32_t> selection;         // [n, topk] entry indices, -1 = none
  int64_t topk = 0;
  std::span<const float> sink;  // [heads] sink logits
};

// One indexer scoring problem (spec §5.5) for n query rows over the owner's index keys.
struct IndexScoring {
  ConstMatrix queries;       // [n, heads*dim], RoPE'd and (faithful) MXFP4 fake-quantized
  ConstMatrix head_weights;  // [n, heads]
  int64_t heads = 0;
  RecordRows keys;                     // owner's index keys; scores has keys.count columns
  std::span<const int64_t> n_visible;  // [n] entries visible to each row (§5.4)
};

struct MixerWeights {
  ConstMatrix fn;                // [(2+hc)·hc, hc·D] fp32
  std::span<const float> base;   // [(2+hc)·hc]
  std::span<const float> scale;  // [3]
};

struct MixerShape {
  int64_t hc = 4;
  int64_t sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double norm_eps = 1e-20;
};

struct ExpertWeights {
  ConstMatrix w1;  // [inter, D]
  ConstMatrix w3;  // [inter, D]
  ConstMatrix w2;  // [D, inter]
};

struct RouterWeights {
  ConstMatrix gate;             // [experts, D]
  std::span<const float> bias;  // [experts] selection bias
  int64_t top_k = 0;
  double routed_scaling = 1.0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual int threads() const = 0;

  // ---- GEMM (gemm.cpp)
  // -------------------------------------------------------------------------------------- y[n, out] = x[n,
  // in] · w[out, in]ᵀ; faithful: rounded to `cast`.
  virtual void gemm(ConstMatrix x, ConstMatrix w, Matrix y, OutputCast cast, Rounding rounding) const = 0;

  // ---- RMSNorm (rmsnorm.cpp)
  // --------------------------------------------------------------------------------- y = w ⊙
  // x·(mean(x²)+eps)^-½ per row; faithful: BF16. y may be x (in place).
  virtual void rms_norm(ConstMatrix x, std::span<const float> weight, double eps, Matrix y,
                        Rounding rounding) const = 0;

  // ---- RoPE (rope.cpp)
  // ---------------------------------------------------------------------------------------- In place on x
  // [n, heads·head_dim]: rotates the last rope_dim channels of each head by s·f_i (inverse: −s·f_i), adjacent
  // pairs (2i, 2i+1). Faithful: the rotated pair is rounded to fp32, then every channel to BF16.
  virtual void rope(Matrix x, int64_t heads, std::span<const int64_t> positions, const RopeTable& table,
                    bool inverse, Rounding rounding) const = 0;

  // ---- KV quantizers (kv_quant.cpp)
  // --------------------------------------------------------------------------- Rows of x [n, dim] into n
  // records of `format` (bytes: n·record_bytes) and, when `dequantized` has rows, the values the records
  // decode to. kFp32 copies.
  virtual void quantize_rows(ConstMatrix x, RecordFormat format, std::span<uint8_t> records,
                             Matrix dequantized) const = 0;
  // The same for kFp8Bf16Rope records, whose layout also depends on the rope_dim trailing channels.
  virtual void quantize_rope_rows(ConstMatrix x, int64_t rope_dim, std::span<uint8_t> records,
                                  Matrix dequantized) const = 0;
  // In place: x ← decode(encode(x)) (index queries, §2.2.3).
  virtual void fake_quantize(Matrix x, RecordFormat format) const = 0;
  // The records of new KV rows (kv_record_write.cpp): rows x [n, dim] through RMSNorm (norm_weight, eps),
  // RoPE at `positions` (heads = 1, forward) and the quantizer of `format` (record_rope_dim: the trailing
  // BF16 channels of kFp8Bf16Rope), with the decoded values in `dequantized` when it has rows. Exactly
  // rms_norm, rope, then quantize_rows / quantize_rope_rows (the CPU backend runs those); one call, so a
  // device backend moves the rows once (§5.2 window rows). x is not modified.
  virtual void norm_rope_quantize(ConstMatrix x, std::span<const float> norm_weight, double eps,
                                  std::span<const int64_t> positions, const RopeTable& table,
                                  RecordFormat format, int64_t record_rope_dim, std::span<uint8_t> records,
                                  Matrix dequantized, Rounding rounding) const = 0;
  // V4 (hadamard.cpp), in place on every row of a power-of-two width d: x ← H·x·d^-½ with H the Sylvester
  // Hadamard matrix (H[i][j] = (−1)^popcount(i & j)); the official V4 indexer rotates its keys and queries
  // so before MXFP4. Faithful: BF16.
  virtual void hadamard_rotate(Matrix x, Rounding rounding) const = 0;

  // ---- mHC (mhc.cpp)
  // ------------------------------------------------------------------------------------------ §4: pre, post
  // [n, hc] and comb [n, hc·hc] (row = input stream) of one site from streams [n, hc·D]. Faithful: z, pre,
  // post and comb fp32.
  virtual void hc_mixer(ConstMatrix streams, const MixerWeights& weights, const MixerShape& shape, Matrix pre,
                        Matrix post, Matrix comb, Rounding rounding) const = 0;
  // out[n, D] = Σ_i pre_i·X_i; faithful: BF16.
  virtual void hc_collapse(ConstMatrix streams, ConstMatrix pre, Matrix out, Rounding rounding) const = 0;
  // In place on streams: X'_j = post_j·y + Σ_i comb[i][j]·X_i; faithful: BF16.
  virtual void hc_expand(ConstMatrix y, Matrix streams, ConstMatrix post, ConstMatrix comb,
                         Rounding rounding) const = 0;
  // V4 hc_head (mhc_head.cpp): the final collapse weights pre[n, hc] = sigmoid(scale·(fn·f)·rms(f)⁻¹ + base)
  // + hc_eps from streams [n, hc·D], with fn [hc, hc·D], base [hc], scale [1]. Faithful: fp32.
  virtual void hc_head(ConstMatrix streams, const MixerWeights& weights, const MixerShape& shape, Matrix pre,
                       Rounding rounding) const = 0;

  // ---- Engram (engram.cpp)
  // ------------------------------------------------------------------------------------ out[n,
  // cols·head_dim] = concatenated table rows rows[n, cols].
  virtual void engram_gather(std::span<const int64_t> rows, int64_t cols, ConstMatrix table,
                             Matrix out) const = 0;
  // §7 gate, in place on streams [n, hc·D], from kv [n, (hc+1)·D] (keys first, then the value) and
  // omega = q_weight ⊙ k_weight [hc·D]. Faithful: dot and gate fp32, streams BF16.
  virtual void engram_gate(Matrix streams, ConstMatrix kv, std::span<const float> omega, int64_t hc,
                           double eps, Rounding rounding) const = 0;

  // ---- compressor (compressor.cpp)
  // ---------------------------------------------------------------------------- §5.3 ratio-r pooling: rows
  // of v, g [groups·ratio, dim] in groups of `ratio`; pooled[j] = Σ_t softmax_t(g)·v. Faithful: fp32 then
  // BF16 (the value the compressor norm reads).
  virtual void compressor_pool(ConstMatrix v, ConstMatrix g, int64_t ratio, Matrix pooled,
                               Rounding rounding) const = 0;

  // ---- indexer (indexer.cpp)
  // ---------------------------------------------------------------------------------- scores[n, keys.count]
  // = Σ_h w_h·ReLU(q_h·k_j) for j < n_visible, −∞ elsewhere; faithful: BF16 after the dot product, after
  // ReLU·w, and after the head sum.
  virtual void index_scores(const IndexScoring& problem, Matrix scores, Rounding rounding) const = 0;

  // ---- candidate pool (candidate_pool.cpp)
  // -------------------------------------------------------------------- §5.5 pool [n, m] (0/1) from the
  // candidate source's scores: blocks of block_size entries scored by their max, the block of the newest
  // visible entry forced to +∞, the top topk_blocks blocks (> −∞, lowest index among equals) kept,
  // intersected with the visible entries.
  virtual void candidate_pool(ConstMatrix scores, std::span<const int64_t> n_visible, int64_t block_size,
                              int64_t topk_blocks, std::span<uint8_t> pool) const = 0;
  // In place: scores outside the pool become −∞.
  virtual void restrict_to_pool(Matrix scores, std::span<const uint8_t> pool) const = 0;

  // ---- top-k (topk.cpp)
  // --------------------------------------------------------------------------------------- out[n, k]: the k
  // largest scores of each row (lowest index among equals), sorted by ascending index; −∞ entries and missing
  // columns are −1, placed after the valid ones.
  virtual void top_k(ConstMatrix scores, int64_t k, std::span<int32_t> out) const = 0;

  // ---- sparse attention (sparse_attention.cpp)
  // ---------------------------------------------------------------- §5.7 out[n, heads·head_dim]: one softmax
  // per head over visible window rows ∪ selected entries plus the sink in the denominator; V = K. Faithful:
  // probabilities fp32 then BF16, output BF16. (The CUDA backend's kernel for more than 8 query rows rounds
  // the probabilities before normalising them — one pass, online softmax — and stays within the per-element
  // bound of kernels/sparse_attention.cuh, kOnline, instead.)
  virtual void sparse_attention(const SparseAttention& problem, Matrix out, Rounding rounding) const = 0;

  // ---- output projection (output_projection.cpp)
  // -------------------------------------------------------------- §5.8 a[n, groups·rank]: o [n,
  // heads·head_dim] rotated back by −s·f (RoPE⁻¹ on the last rope_dim channels of each head), then a_g =
  // wo_a[g]·concat(heads of group g). Faithful: BF16 after each step.
  virtual void output_projection(ConstMatrix o, int64_t heads, std::span<const int64_t> positions,
                                 const RopeTable& table, ConstMatrix wo_a, int64_t groups, Matrix a,
                                 Rounding rounding) const = 0;

  // ---- MoE (router.cpp, moe.cpp)
  // ------------------------------------------------------------------------------ §6 router: σ =
  // sqrt(softplus(gate·v)); experts[n, k] = top-k of σ + bias (descending, lowest index among equals);
  // weights[n, k] = scaling·σ_e / (Σ_selected σ + 1e-20). Faithful: fp32 throughout.
  virtual void route(ConstMatrix v, const RouterWeights& router, std::span<int32_t> experts, Matrix weights,
                     Rounding rounding) const = 0;
  // V4 hash routing: the experts [n, k] are given (tid2eid of each row's token); weights as route() from the
  // unbiased σ of those experts (router.bias is not read).
  virtual void route_given(ConstMatrix v, const RouterWeights& router, std::span<const int32_t> experts,
                           Matrix weights, Rounding rounding) const = 0;
  // out = Σ_selected weight·e(v) + shared(v), e(v) = W2(silu(min(W1 v, L))·clamp(W3 v, ±L)) with the routing
  // weight applied to the hidden before W2. Faithful: W1 v, W3 v, hidden, expert outputs and the sum BF16.
  virtual void moe_experts(ConstMatrix v, std::span<const ExpertWeights> experts,
                           std::span<const int32_t> selected, ConstMatrix routing,
                           const ExpertWeights* shared, double swiglu_limit, Matrix out,
                           Rounding rounding) const = 0;
};

// The CPU backend with `threads` workers in total (0: hardware concurrency).
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace flashkv::backend
