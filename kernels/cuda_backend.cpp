// CudaBackend (see cuda_backend.hpp): host views in, device buffers, kernels, host views out.
#include "cuda_backend.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include "backend/cpu/cpu_backend.hpp"
#include "compressor_pool.cuh"
#include "cuda_check.cuh"
#include "indexer.cuh"
#include "kv_quant.cuh"
#include "kv_record_v4.cuh"
#include "pinned_staging.hpp"
#include "rms_norm.cuh"
#include "rope.cuh"
#include "sparse_attention.cuh"
#include "topk.cuh"

namespace flashkv::cuda {
namespace {

// The stream of the calling host thread: concurrent callers do not serialize on one stream.
cudaStream_t stream() {
  return cudaStreamPerThread;
}

// A stream-ordered device allocation of `count` T, freed (stream-ordered) on scope exit.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    if (count_ > 0) FKV_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data_), bytes(), stream()));
  }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream());
  }
  DeviceArray(DeviceArray&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray& operator=(DeviceArray&&) = delete;
  T* data() const { return data_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

template <typename T>
DeviceArray<T> upload(const T* host, size_t count) {
  DeviceArray<T> device(count);
  if (count > 0)
    FKV_CUDA_CHECK(cudaMemcpyAsync(device.data(), host, device.bytes(), cudaMemcpyHostToDevice, stream()));
  return device;
}

template <typename T>
void download_async(const DeviceArray<T>& device, T* host, size_t count) {
  if (count > 0)
    FKV_CUDA_CHECK(cudaMemcpyAsync(host, device.data(), count * sizeof(T), cudaMemcpyDeviceToHost, stream()));
}

template <typename T>
void download(const DeviceArray<T>& device, T* host, size_t count) {
  download_async(device, host, count);
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

size_t elements(backend::ConstMatrix m) {
  return static_cast<size_t>(m.rows * m.cols);
}

}  // namespace

CudaBackend::CudaBackend(int cpu_threads, DeviceThresholds thresholds)
    : cpu_(std::make_unique<backend::cpu::CpuBackend>(cpu_threads)),
      thresholds_(thresholds),
      staging_(std::make_unique<StagingPool>()) {}

CudaBackend::~CudaBackend() = default;

int CudaBackend::threads() const {
  return cpu_->threads();
}

std::unique_ptr<backend::Backend> make_cuda_backend(int cpu_threads, DeviceThresholds thresholds) {
  return std::make_unique<CudaBackend>(cpu_threads, thresholds);
}

// ---- on the GPU -------------------------------------------------------------------------------------------

void CudaBackend::index_scores(const backend::IndexScoring& problem, backend::Matrix scores,
                               backend::Rounding rounding) const {
  const backend::RecordRows& keys = problem.keys;
  const bool supported =
      (keys.format == backend::RecordFormat::kMxfp4 || keys.format == backend::RecordFormat::kFp32) &&
      scores.cols == keys.count && problem.queries.cols == problem.heads * keys.dim;
  if (!supported || scores.rows == 0 || scores.cols == 0) {
    if (scores.rows > 0 && scores.cols > 0) cpu_->index_scores(problem, scores, rounding);
    return;
  }
  const int64_t n = scores.rows;
  const auto d_queries = upload(problem.queries.data, static_cast<size_t>(n * problem.queries.cols));
  const auto d_weights = upload(problem.head_weights.data, static_cast<size_t>(n * problem.heads));
  const auto d_keys = upload(keys.data, static_cast<size_t>(keys.count) * keys.row_bytes());
  const auto d_visible = upload(problem.n_visible.data(), static_cast<size_t>(n));
  DeviceArray<float> d_scores(static_cast<size_t>(n * scores.cols));
  IndexScoringArgs args;
  args.queries = d_queries.data();
  args.head_weights = d_weights.data();
  args.n = n;
  args.heads = static_cast<int>(problem.heads);
  args.dim = static_cast<int>(keys.dim);
  args.keys = d_keys.data();
  args.key_format =
      keys.format == backend::RecordFormat::kMxfp4 ? IndexKeyFormat::kMxfp4 : IndexKeyFormat::kFp32;
  args.key_count = keys.count;
  args.n_visible = d_visible.data();
  args.scores = d_scores.data();
  args.faithful = rounding == backend::Rounding::kFaithful;
  cuda::index_scores(args, stream());
  download(d_scores, scores.data, static_cast<size_t>(n * scores.cols));
}

void CudaBackend::candidate_pool(backend::ConstMatrix scores, std::span<const int64_t> n_visible,
                                 int64_t block_size, int64_t topk_blocks, std::span<uint8_t> pool) const {
  if (scores.rows == 0 || scores.cols == 0) return;
  const auto d_scores = upload(scores.data, elements(scores));
  const auto d_visible = upload(n_visible.data(), static_cast<size_t>(scores.rows));
  DeviceArray<uint8_t> d_pool(elements(scores));
  DeviceArray<uint8_t> workspace(
      candidate_pool_workspace_bytes(scores.rows, scores.cols, block_size, topk_blocks));
  cuda::candidate_pool(d_scores.data(), scores.rows, scores.cols, d_visible.data(), block_size, topk_blocks,
                       d_pool.data(), workspace.data(), workspace.bytes(), stream());
  download(d_pool, pool.data(), elements(scores));
}

void CudaBackend::restrict_to_pool(backend::Matrix scores, std::span<const uint8_t> pool) const {
  if (scores.rows == 0 || scores.cols == 0) return;
  auto d_scores = upload(scores.data, elements(scores));
  const auto d_pool = upload(pool.data(), elements(scores));
  cuda::restrict_to_pool(d_scores.data(), scores.rows, scores.cols, d_pool.data(), stream());
  download(d_scores, scores.data, elements(scores));
}

void CudaBackend::top_k(backend::ConstMatrix scores, int64_t k, std::span<int32_t> out) const {
  if (scores.rows == 0 || k == 0) return;
  const auto d_scores = upload(scores.data, elements(scores));
  DeviceArray<int32_t> d_out(static_cast<size_t>(scores.rows * k));
  DeviceArray<uint8_t> workspace(top_k_workspace_bytes(scores.rows, scores.cols, k));
  top_k_rows(d_scores.data(), ScoreType::kFp32, scores.rows, scores.cols, k, d_out.data(), workspace.data(),
             workspace.bytes(), stream());
  download(d_out, out.data(), static_cast<size_t>(scores.rows * k));
}

// ---- sparse attention (cudaattn) ----
namespace {

// The kernel's shape: V4.1 faithful attention (64 heads x 512, NVFP4 entries), at most 640 keys per row.
bool attention_kernel_fits(const backend::SparseAttention& p, backend::Rounding rounding) {
  const bool entries_ok =
      p.topk == 0 || p.entries.count == 0 ||
      (p.entries.format == backend::RecordFormat::kNvfp4 && p.entries.dim == kSparseAttentionDim);
  return rounding == backend::Rounding::kFaithful && p.heads == kSparseAttentionHeads &&
         p.window.cols == kSparseAttentionDim && p.q.cols == p.heads * p.window.cols && entries_ok &&
         p.topk <= kSparseAttentionMaxKeys;
}

// FP8 records of the (dequantized) window rows. Rows decoded from FP8 encode back to the same values (the
// block scale can only stay or halve, which keeps every code representable); returns false otherwise, e.g.
// for rows that never were FP8.
bool window_records(backend::ConstMatrix window, std::vector<uint8_t>& records) {
  const int dim = static_cast<int>(window.cols);
  const size_t bytes = numeric::fp8_row_bytes(dim);
  records.resize(static_cast<size_t>(window.rows) * bytes);
  std::vector<float> decoded(static_cast<size_t>(dim));
  for (int64_t t = 0; t < window.rows; ++t) {
    uint8_t* record = records.data() + static_cast<size_t>(t) * bytes;
    numeric::quantize_fp8_row(window.row(t), dim, record);
    numeric::dequantize_fp8_row(record, dim, decoded.data());
    if (std::memcmp(decoded.data(), window.row(t), decoded.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

// BF16 bits of q; false when a value is not a BF16 value (faithful q always is).
bool bf16_bits(backend::ConstMatrix q, std::vector<uint16_t>& bits) {
  bits.resize(static_cast<size_t>(q.rows * q.cols));
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = numeric::bf16_from_float(q.data[i]);
    if (numeric::bf16_to_float(bits[i]) != q.data[i]) return false;
  }
  return true;
}

}  // namespace

void CudaBackend::sparse_attention(const backend::SparseAttention& p, backend::Matrix out,
                                   backend::Rounding rounding) const {
  const int64_t n = p.q.rows;
  // the kernel takes explicit per-row lists of visible window rows (s - W < t <= s)
  std::vector<std::vector<int32_t>> visible(static_cast<size_t>(n));
  size_t window_cap = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t s = p.query_positions[static_cast<size_t>(r)];
    for (int64_t t = 0; t < p.window.rows; ++t) {
      const int64_t position = p.window_positions[static_cast<size_t>(t)];
      if (position <= s && position > s - p.sliding_window)
        visible[static_cast<size_t>(r)].push_back(static_cast<int32_t>(t));
    }
    window_cap = std::max(window_cap, visible[static_cast<size_t>(r)].size());
  }
  std::vector<uint8_t> records;
  std::vector<uint16_t> q_bits;
  if (n == 0 || !attention_kernel_fits(p, rounding) ||
      static_cast<int64_t>(window_cap) + p.topk > kSparseAttentionMaxKeys ||
      !window_records(p.window, records) || !bf16_bits(p.q, q_bits)) {
    cpu_->sparse_attention(p, out, rounding);
    return;
  }
  std::vector<int32_t> window_rows(static_cast<size_t>(n) * window_cap, -1);
  for (size_t r = 0; r < visible.size(); ++r)
    std::copy(visible[r].begin(), visible[r].end(), window_rows.begin() + r * window_cap);

  const auto d_q = upload(q_bits.data(), q_bits.size());
  const auto d_window = upload(records.data(), records.size());
  const auto d_window_rows = upload(window_rows.data(), window_rows.size());
  const size_t entry_bytes =
      p.entries.count > 0 ? static_cast<size_t>(p.entries.count) * p.entries.row_bytes() : 0;
  DeviceArray<uint8_t> d_entries(std::max<size_t>(entry_bytes, 16));  // non-null even with no entries
  if (entry_bytes > 0) {
    FKV_CUDA_CHECK(
        cudaMemcpyAsync(d_entries.data(), p.entries.data, entry_bytes, cudaMemcpyHostToDevice, stream()));
  }
  const auto d_selection = upload(p.selection.data(), static_cast<size_t>(n * p.topk));
  const auto d_sink = upload(p.sink.data(), p.sink.size());
  DeviceArray<uint16_t> d_out(q_bits.size());

  SparseAttentionArgs args;
  args.q = d_q.data();
  args.n = n;
  args.window_records = d_window.data();
  args.window_rows = d_window_rows.data();
  args.window_cap = static_cast<int>(window_cap);
  args.entry_records = d_entries.data();
  args.selection = d_selection.data();
  args.topk = static_cast<int>(p.topk);
  args.sink = d_sink.data();
  args.out = d_out.data();
  cuda::sparse_attention(args, stream());
  std::vector<uint16_t> result(q_bits.size());
  download(d_out, result.data(), result.size());
  for (size_t i = 0; i < result.size(); ++i) out.data[i] = numeric::bf16_to_float(result[i]);
}
// ---- end sparse attention ----

// ---- KV write path (wire) ----
namespace {

// Rows of one record format and width, encoded and decoded on the device.
struct RecordCodec {
  backend::RecordFormat format = backend::RecordFormat::kFp32;
  int64_t channels = 0;
  int64_t rope_dim = 0;  // kFp8Bf16Rope's trailing BF16 channels

  // Whether the launchers take this format and width (kv_quant.cuh: a multiple of the block, at most
  // kMaxKvChannels; every width otherwise).
  bool on_device() const {
    switch (format) {
      case backend::RecordFormat::kFp32:
        return channels > 0;
      case backend::RecordFormat::kFp8Bf16Rope:
        return channels > 0 && channels <= INT_MAX && rope_dim >= 0 && rope_dim <= channels;
      default: {
        const int64_t block =
            format == backend::RecordFormat::kNvfp4 ? numeric::kNvfp4Block : numeric::kFp8RowBlock;
        return channels > 0 && channels % block == 0 && channels <= kMaxKvChannels;
      }
    }
  }
  size_t row_bytes() const { return backend::record_bytes(format, channels, rope_dim); }

  void encode(const float* rows, int64_t n, uint8_t* records) const {
    const int c = static_cast<int>(channels);
    switch (format) {
      case backend::RecordFormat::kFp32:
        FKV_CUDA_CHECK(cudaMemcpyAsync(records, rows, static_cast<size_t>(n) * row_bytes(),
                                       cudaMemcpyDeviceToDevice, stream()));
        return;
      case backend::RecordFormat::kFp8:
        return quantize_fp8_rows(rows, n, c, records, stream());
      case backend::RecordFormat::kNvfp4:
        return quantize_nvfp4_entries(rows, n, c, records, stream());
      case backend::RecordFormat::kMxfp4:
        return quantize_mxfp4_keys(rows, n, c, records, stream());
      case backend::RecordFormat::kFp8Bf16Rope:
        return quantize_v4_records(rows, n, c, static_cast<int>(rope_dim), records, stream());
    }
  }

  void decode(const uint8_t* records, int64_t n, float* rows) const {
    const int c = static_cast<int>(channels);
    switch (format) {
      case backend::RecordFormat::kFp32:
        FKV_CUDA_CHECK(cudaMemcpyAsync(rows, records, static_cast<size_t>(n) * row_bytes(),
                                       cudaMemcpyDeviceToDevice, stream()));
        return;
      case backend::RecordFormat::kFp8:
        return dequantize_fp8_rows(records, n, c, rows, stream());
      case backend::RecordFormat::kNvfp4:
        return dequantize_nvfp4_entries(records, n, c, rows, stream());
      case backend::RecordFormat::kMxfp4:
        return dequantize_mxfp4_keys(records, n, c, rows, stream());
      case backend::RecordFormat::kFp8Bf16Rope:
        return dequantize_v4_records(records, n, c, static_cast<int>(rope_dim), rows, stream());
    }
  }
};

bool is_quantized(backend::RecordFormat format) {
  return format == backend::RecordFormat::kFp8 || format == backend::RecordFormat::kNvfp4 ||
         format == backend::RecordFormat::kMxfp4;
}

bool rope_fits(int64_t cols, int64_t heads, const backend::RopeTable& table) {
  return heads > 0 && cols % heads == 0 && rope_supported(cols / heads, table.rope_dim) &&
         static_cast<int64_t>(table.freqs.size()) >= table.rope_dim / 2;
}

// Whether a call of x.rows·x.cols elements stays on the CPU (DeviceThresholds).
bool below(backend::ConstMatrix x, int64_t threshold) {
  return x.rows * x.cols < threshold;
}

size_t float_bytes(int64_t count) {
  return static_cast<size_t>(count) * sizeof(float);
}

// A call's record outputs in its staging layout (download segments): the records and, when asked for, the
// values they decode to.
struct RecordOutputs {
  Segment records;
  Segment decoded;  // 0 bytes: not asked for

  RecordOutputs(StagingLayout& layout, const RecordCodec& codec, int64_t n, bool with_decoded)
      : records(layout.download(static_cast<size_t>(n) * codec.row_bytes())),
        decoded(layout.download(with_decoded ? float_bytes(n * codec.channels) : 0)) {}

  // The kernels, and the results' way into the caller's views at the download.
  void enqueue(Staging& staging, const RecordCodec& codec, const float* d_rows, int64_t n,
               std::span<uint8_t> out, backend::Matrix dequantized) const {
    codec.encode(d_rows, n, staging.device<uint8_t>(records));
    if (decoded.bytes > 0) codec.decode(staging.device<uint8_t>(records), n, staging.device<float>(decoded));
    staging.get(records, out.data());
    staging.get(decoded, dequantized.data);
  }
};

// The positions and frequencies a RoPE launch reads (upload segments).
struct RopeInputs {
  Segment positions;
  Segment freqs;

  RopeInputs(StagingLayout& layout, int64_t n, const backend::RopeTable& table)
      : positions(layout.upload(static_cast<size_t>(n) * sizeof(int64_t))),
        freqs(layout.upload(static_cast<size_t>(table.rope_dim / 2) * sizeof(double))) {}

  void fill(Staging& staging, std::span<const int64_t> row_positions, const backend::RopeTable& table) const {
    staging.put(positions, row_positions.data());
    staging.put(freqs, table.freqs.data());
  }

  // RoPE of n device rows [n, heads·head_dim] in place; row flags (rope.cuh) into d_flags.
  void enqueue(const Staging& staging, float* d_rows, int64_t n, int64_t heads, int64_t cols,
               const backend::RopeTable& table, bool inverse, backend::Rounding rounding,
               uint8_t* d_flags) const {
    RopeRowsArgs args;
    args.x = d_rows;
    args.n = n;
    args.heads = heads;
    args.head_dim = cols / heads;
    args.rope_dim = table.rope_dim;
    args.positions = staging.device<int64_t>(positions);
    args.freqs = staging.device<double>(freqs);
    args.inverse = inverse;
    args.fp32_angles = table.rounding == backend::Rounding::kFaithful;
    args.round_bf16 = rounding == backend::Rounding::kFaithful;
    args.row_flags = d_flags;
    rope_rows(args, stream());
  }
};

// Indices of the flagged entries of n row flags.
std::vector<int64_t> flagged(const uint8_t* flags, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (flags[i] != 0) out.push_back(i);
  }
  return out;
}

// quantize_rows / quantize_rope_rows on the device: one upload of the rows, one download of the results.
void quantize_on_device(StagingPool& pool, const RecordCodec& codec, backend::ConstMatrix x,
                        std::span<uint8_t> records, backend::Matrix dequantized) {
  if (x.rows == 0) return;
  StagingLayout layout;
  const Segment rows = layout.upload(float_bytes(x.rows * x.cols));
  const RecordOutputs outputs(layout, codec, x.rows, dequantized.rows > 0);
  const auto staging = pool.acquire(layout, stream());
  staging->put(rows, x.data);
  staging->upload(layout, stream());
  outputs.enqueue(*staging, codec, staging->device<float>(rows), x.rows, records, dequantized);
  staging->download(layout, stream());
}

}  // namespace

void CudaBackend::quantize_rows(backend::ConstMatrix x, backend::RecordFormat format,
                                std::span<uint8_t> records, backend::Matrix dequantized) const {
  const RecordCodec codec{format, x.cols, 0};
  // kFp32 (a copy), other widths and small calls stay on the CPU
  if (!is_quantized(format) || !codec.on_device() || below(x, thresholds_.record_elements)) {
    cpu_->quantize_rows(x, format, records, dequantized);
    return;
  }
  quantize_on_device(*staging_, codec, x, records, dequantized);
}

void CudaBackend::quantize_rope_rows(backend::ConstMatrix x, int64_t rope_dim, std::span<uint8_t> records,
                                     backend::Matrix dequantized) const {
  const RecordCodec codec{backend::RecordFormat::kFp8Bf16Rope, x.cols, rope_dim};
  if (!codec.on_device() || below(x, thresholds_.record_elements)) {
    cpu_->quantize_rope_rows(x, rope_dim, records, dequantized);
    return;
  }
  quantize_on_device(*staging_, codec, x, records, dequantized);
}

void CudaBackend::fake_quantize(backend::Matrix x, backend::RecordFormat format) const {
  const RecordCodec codec{format, x.cols, 0};
  // kFp32 and kFp8Bf16Rope leave x as it is
  if (!is_quantized(format) || !codec.on_device() || below(x, thresholds_.record_elements)) {
    cpu_->fake_quantize(x, format);
    return;
  }
  if (x.rows == 0) return;
  // decode(encode(x)): the host's fakequant_* compute exactly the record's scale and codes, then decode them
  StagingLayout layout;
  const Segment rows = layout.upload_download(float_bytes(x.rows * x.cols));
  const Segment records = layout.scratch(static_cast<size_t>(x.rows) * codec.row_bytes());
  const auto staging = staging_->acquire(layout, stream());
  staging->put(rows, x.data);
  staging->upload(layout, stream());
  codec.encode(staging->device<float>(rows), x.rows, staging->device<uint8_t>(records));
  codec.decode(staging->device<uint8_t>(records), x.rows, staging->device<float>(rows));
  staging->get(rows, x.data);
  staging->download(layout, stream());
}

namespace {

// Whether every channel RoPE leaves alone (the first `first` of each head) already is a BF16 value and not
// NaN, so that the faithful cast point is the identity: OR and max reductions the compiler vectorizes, one
// read at memory speed (the engine's rows come from BF16 GEMMs).
bool unrotated_are_bf16(backend::ConstMatrix x, int64_t heads, int64_t head_dim, int64_t first) {
  uint32_t low_bits = 0;
  uint32_t magnitude = 0;
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* head = x.row(r) + h * head_dim;
      for (int64_t c = 0; c < first; ++c) {
        const auto bits = std::bit_cast<uint32_t>(head[c]);
        low_bits |= bits & 0xFFFFu;
        magnitude = std::max(magnitude, bits & 0x7FFFFFFFu);
      }
    }
  }
  return low_bits == 0 && magnitude <= 0x7F800000u;  // above: NaN, which BF16 rounding canonicalises
}

// The faithful cast point of the channels RoPE leaves alone: BF16, with the CPU's function.
void round_unrotated_to_bf16(backend::Matrix x, int64_t heads, int64_t head_dim, int64_t first) {
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      float* head = x.row(r) + h * head_dim;
      for (int64_t c = 0; c < first; ++c) {
        uint32_t bits = 0;
        std::memcpy(&bits, head + c, sizeof bits);
        if ((bits & 0xFFFFu) != 0 || std::isnan(head[c])) {
          head[c] = numeric::bf16_to_float(numeric::bf16_from_float(head[c]));
        }
      }
    }
  }
}

}  // namespace

void CudaBackend::rope(backend::Matrix x, int64_t heads, std::span<const int64_t> positions,
                       const backend::RopeTable& table, bool inverse, backend::Rounding rounding) const {
  if (x.rows == 0) return;
  if (!rope_fits(x.cols, heads, table) || table.rope_dim == 0 || x.rows < thresholds_.rope_rows) {
    cpu_->rope(x, heads, positions, table, inverse, rounding);
    return;
  }
  // Only the rotated channels cross to the device (64 of V4.1's 512 per head); the others get their cast
  // point here.
  const int64_t head_dim = x.cols / heads;
  const int64_t rope_dim = table.rope_dim;
  const int64_t first = head_dim - rope_dim;
  const int64_t row_rotated = heads * rope_dim;
  StagingLayout layout;
  const RopeInputs inputs(layout, x.rows, table);
  const Segment rotated = layout.upload_download(float_bytes(x.rows * row_rotated));
  const Segment flags = layout.upload_download(static_cast<size_t>(x.rows));
  const auto staging = staging_->acquire(layout, stream());
  float* staged = staging->host<float>(rotated);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      std::copy_n(x.row(r) + h * head_dim + first, rope_dim, staged + (r * heads + h) * rope_dim);
    }
  }
  inputs.fill(*staging, positions, table);
  std::memset(staging->host<uint8_t>(flags), 0, flags.bytes);
  staging->upload(layout, stream());
  inputs.enqueue(*staging, staging->device<float>(rotated), x.rows, heads, row_rotated, table, inverse,
                 rounding, staging->device<uint8_t>(flags));
  if (rounding == backend::Rounding::kFaithful && !unrotated_are_bf16(x, heads, head_dim, first)) {
    round_unrotated_to_bf16(x, heads, head_dim, first);  // overlaps the kernel
  }
  staging->download(layout, stream());
  const uint8_t* row_flags = staging->host<uint8_t>(flags);
  int64_t redone = 0;
  for (int64_t r = 0; r < x.rows; ++r) {
    if (row_flags[r] != 0) {
      // not certified: the CPU rotates the row's original channels (its cast point of the others is
      // idempotent)
      cpu_->rope(backend::Matrix{x.row(r), 1, x.cols}, heads, positions.subspan(static_cast<size_t>(r), 1),
                 table, inverse, rounding);
      ++redone;
      continue;
    }
    for (int64_t h = 0; h < heads; ++h) {
      std::copy_n(staged + (r * heads + h) * rope_dim, rope_dim, x.row(r) + h * head_dim + first);
    }
  }
  recomputed_rows_ += redone;
}

void CudaBackend::norm_rope_quantize(backend::ConstMatrix x, std::span<const float> norm_weight, double eps,
                                     std::span<const int64_t> positions, const backend::RopeTable& table,
                                     backend::RecordFormat format, int64_t record_rope_dim,
                                     std::span<uint8_t> records, backend::Matrix dequantized,
                                     backend::Rounding rounding) const {
  const RecordCodec codec{format, x.cols, record_rope_dim};
  if (!codec.on_device() || !rope_fits(x.cols, 1, table) || below(x, thresholds_.record_elements)) {
    cpu_->norm_rope_quantize(x, norm_weight, eps, positions, table, format, record_rope_dim, records,
                             dequantized, rounding);
    return;
  }
  if (x.rows == 0) return;
  // the rows cross once: RMSNorm (rms_norm.cuh, exact), RoPE (certified) and the records stay on the device
  StagingLayout layout;
  const Segment rows = layout.upload(float_bytes(x.rows * x.cols));
  const Segment weight = layout.upload(float_bytes(x.cols));
  const RopeInputs rope_inputs(layout, x.rows, table);
  const Segment flags = layout.upload_download(static_cast<size_t>(x.rows));
  const RecordOutputs outputs(layout, codec, x.rows, dequantized.rows > 0);
  const Segment normed = layout.scratch(float_bytes(x.rows * x.cols));
  const auto staging = staging_->acquire(layout, stream());
  staging->put(rows, x.data);
  staging->put(weight, norm_weight.data());
  rope_inputs.fill(*staging, positions, table);
  std::memset(staging->host<uint8_t>(flags), 0, flags.bytes);
  staging->upload(layout, stream());
  float* d_normed = staging->device<float>(normed);
  uint8_t* d_flags = staging->device<uint8_t>(flags);
  rms_norm_rows(staging->device<float>(rows), x.rows, x.cols, staging->device<float>(weight), eps,
                rounding == backend::Rounding::kFaithful, d_normed, d_flags, stream());
  rope_inputs.enqueue(*staging, d_normed, x.rows, 1, x.cols, table, /*inverse=*/false, rounding, d_flags);
  outputs.enqueue(*staging, codec, d_normed, x.rows, records, dequantized);
  staging->download(layout, stream());
  // rows with a non-finite norm or an uncertified RoPE: the CPU's records for those
  const std::vector<int64_t> redo = flagged(staging->host<uint8_t>(flags), x.rows);
  const size_t bytes = codec.row_bytes();
  for (const int64_t r : redo) {
    const backend::Matrix row_out =
        dequantized.rows > 0 ? backend::Matrix{dequantized.row(r), 1, x.cols} : backend::Matrix{};
    cpu_->norm_rope_quantize(backend::ConstMatrix{x.row(r), 1, x.cols}, norm_weight, eps,
                             positions.subspan(static_cast<size_t>(r), 1), table, format, record_rope_dim,
                             records.subspan(static_cast<size_t>(r) * bytes, bytes), row_out, rounding);
  }
  recomputed_rows_ += static_cast<int64_t>(redo.size());
}

void CudaBackend::compressor_pool(backend::ConstMatrix v, backend::ConstMatrix g, int64_t ratio,
                                  backend::Matrix pooled, backend::Rounding rounding) const {
  const int64_t groups = pooled.rows;
  if (groups == 0 || pooled.cols == 0) return;
  if (ratio < 1 || v.cols != pooled.cols || g.cols != pooled.cols ||
      groups * ratio * pooled.cols < thresholds_.pool_elements) {
    cpu_->compressor_pool(v, g, ratio, pooled, rounding);
    return;
  }
  const int64_t dim = pooled.cols;
  StagingLayout layout;
  const Segment v_rows = layout.upload(float_bytes(groups * ratio * dim));
  const Segment g_rows = layout.upload(v_rows.bytes);
  const Segment flags = layout.upload_download(static_cast<size_t>(groups));
  const Segment out = layout.download(float_bytes(groups * dim));
  const auto staging = staging_->acquire(layout, stream());
  staging->put(v_rows, v.data);
  staging->put(g_rows, g.data);
  std::memset(staging->host<uint8_t>(flags), 0, flags.bytes);
  staging->upload(layout, stream());
  CompressorPoolArgs args;
  args.v = staging->device<float>(v_rows);
  args.g = staging->device<float>(g_rows);
  args.groups = groups;
  args.ratio = ratio;
  args.dim = dim;
  args.round_bf16 = rounding == backend::Rounding::kFaithful;
  args.pooled = staging->device<float>(out);
  args.group_flags = staging->device<uint8_t>(flags);
  cuda::compressor_pool(args, stream());
  staging->get(out, pooled.data);
  staging->download(layout, stream());
  // channels not certified (NaN in a flagged group): the CPU's value, from that channel's column alone
  const std::vector<int64_t> redo = flagged(staging->host<uint8_t>(flags), groups);
  std::vector<float> v_column(static_cast<size_t>(ratio)), g_column(v_column.size());
  for (const int64_t j : redo) {
    for (int64_t c = 0; c < dim; ++c) {
      if (!std::isnan(pooled.row(j)[c])) continue;
      for (int64_t t = 0; t < ratio; ++t) {
        v_column[static_cast<size_t>(t)] = v.row(j * ratio + t)[c];
        g_column[static_cast<size_t>(t)] = g.row(j * ratio + t)[c];
      }
      cpu_->compressor_pool(backend::ConstMatrix{v_column.data(), ratio, 1},
                            backend::ConstMatrix{g_column.data(), ratio, 1}, ratio,
                            backend::Matrix{pooled.row(j) + c, 1, 1}, rounding);
    }
  }
  recomputed_rows_ += static_cast<int64_t>(redo.size());
}

void CudaBackend::output_projection(backend::ConstMatrix o, int64_t heads, std::span<const int64_t> positions,
                                    const backend::RopeTable& table, backend::ConstMatrix wo_a,
                                    int64_t groups, backend::Matrix a, backend::Rounding rounding) const {
  // as the CPU backend: o rotated back (on the GPU above the RoPE threshold), then the grouped projection
  std::vector<float> unrotated(o.data, o.data + o.rows * o.cols);
  const backend::Matrix x{unrotated.data(), o.rows, o.cols};
  rope(x, heads, positions, table, /*inverse=*/true, rounding);
  cpu_->grouped_projection(x, wo_a, groups, a, rounding);
}
// ---- end KV write path ----

// ---- CPU delegation --------------------------------------------------------------------------------------

void CudaBackend::gemm(backend::ConstMatrix x, backend::ConstMatrix w, backend::Matrix y,
                       backend::OutputCast cast, backend::Rounding rounding) const {
  cpu_->gemm(x, w, y, cast, rounding);
}
void CudaBackend::rms_norm(backend::ConstMatrix x, std::span<const float> weight, double eps,
                           backend::Matrix y, backend::Rounding rounding) const {
  cpu_->rms_norm(x, weight, eps, y, rounding);
}
void CudaBackend::hadamard_rotate(backend::Matrix x, backend::Rounding rounding) const {
  cpu_->hadamard_rotate(x, rounding);
}
void CudaBackend::hc_head(backend::ConstMatrix streams, const backend::MixerWeights& weights,
                          const backend::MixerShape& shape, backend::Matrix pre,
                          backend::Rounding rounding) const {
  cpu_->hc_head(streams, weights, shape, pre, rounding);
}
void CudaBackend::hc_mixer(backend::ConstMatrix streams, const backend::MixerWeights& weights,
                           const backend::MixerShape& shape, backend::Matrix pre, backend::Matrix post,
                           backend::Matrix comb, backend::Rounding rounding) const {
  cpu_->hc_mixer(streams, weights, shape, pre, post, comb, rounding);
}
void CudaBackend::hc_collapse(backend::ConstMatrix streams, backend::ConstMatrix pre, backend::Matrix out,
                              backend::Rounding rounding) const {
  cpu_->hc_collapse(streams, pre, out, rounding);
}
void CudaBackend::hc_expand(backend::ConstMatrix y, backend::Matrix streams, backend::ConstMatrix post,
                            backend::ConstMatrix comb, backend::Rounding rounding) const {
  cpu_->hc_expand(y, streams, post, comb, rounding);
}
void CudaBackend::engram_gather(std::span<const int64_t> rows, int64_t cols, backend::ConstMatrix table,
                                backend::Matrix out) const {
  cpu_->engram_gather(rows, cols, table, out);
}
void CudaBackend::engram_gate(backend::Matrix streams, backend::ConstMatrix kv, std::span<const float> omega,
                              int64_t hc, double eps, backend::Rounding rounding) const {
  cpu_->engram_gate(streams, kv, omega, hc, eps, rounding);
}
void CudaBackend::route(backend::ConstMatrix v, const backend::RouterWeights& router,
                        std::span<int32_t> experts, backend::Matrix weights,
                        backend::Rounding rounding) const {
  cpu_->route(v, router, experts, weights, rounding);
}
void CudaBackend::route_given(backend::ConstMatrix v, const backend::RouterWeights& router,
                              std::span<const int32_t> experts, backend::Matrix weights,
                              backend::Rounding rounding) const {
  cpu_->route_given(v, router, experts, weights, rounding);
}
void CudaBackend::moe_experts(backend::ConstMatrix v, std::span<const backend::ExpertWeights> experts,
                              std::span<const int32_t> selected, backend::ConstMatrix routing,
                              const backend::ExpertWeights* shared, double swiglu_limit, backend::Matrix out,
                              backend::Rounding rounding) const {
  cpu_->moe_experts(v, experts, selected, routing, shared, swiglu_limit, out, rounding);
}
// ---- end CPU delegation

}  // namespace flashkv::cuda
