// Sparse attention decode (kernels/sparse_attention.cuh) at the V4.1 shape: per query row 64 heads x 512,
// 128 FP8 window rows + 512 NVFP4 entries selected at random from a 1M-entry pool (so the entry reads miss
// the L2 as they would on a long context). Batch 1..256 query rows.
//
// Effective rate counts 2·64·512·640·2 FLOP per query row (Q·Kᵀ and P·V), the anchor FlashMLA reports
// (410 TFLOP/s for sparse FP8 decode on H800); ceilings measured in the same run: cuBLAS BF16 GEMM at 8192³
// and cuBLAS on the same per-query shape (strided batched 64x640x512, no dequantization, no softmax).
// Prints a table and "FKV_BENCH {...}" lines.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "gpu_bench.cuh"
#include "kv_quant.cuh"
#include "sparse_attention.cuh"

namespace {

namespace fb = flashkv::bench;
namespace fc = flashkv::cuda;

constexpr const char* kProgram = "bench_sparse_attention";
constexpr int kHeads = fc::kSparseAttentionHeads;
constexpr int kDim = fc::kSparseAttentionDim;
constexpr int kWindow = 128;
constexpr int kTopk = 512;
constexpr int64_t kEntryPool = int64_t{1} << 20;
constexpr int kMaxBatch = 256;
constexpr int kFp8Bytes = kDim + kDim / 32;
constexpr int kNvfp4Bytes = kDim / 2 + kDim / 16;
constexpr int kProfileWords = 20;  // SparseAttentionArgs::profile

double flop_per_query() {
  return 2.0 * kHeads * kDim * (kWindow + kTopk) * 2.0;
}

// Row b sees window rows [b·128, b·128 + 128) and 512 pseudo-random entries of the pool.
__global__ void make_indices(int32_t* window_rows, int32_t* selection, uint64_t seed) {
  const int b = blockIdx.x;
  for (int i = threadIdx.x; i < kWindow; i += blockDim.x) window_rows[b * kWindow + i] = b * kWindow + i;
  for (int i = threadIdx.x; i < kTopk; i += blockDim.x) {
    selection[b * kTopk + i] =
        static_cast<int32_t>(fb::hash_u32(seed ^ (static_cast<uint64_t>(b) * kTopk + i)) % kEntryPool);
  }
}

// Records of `rows` random latent rows, written in chunks through an fp32 staging buffer.
void random_records(uint8_t* records, int64_t rows, bool fp8, uint64_t seed, cudaStream_t stream) {
  constexpr int64_t kChunkRows = 65536;
  fb::DeviceBuffer staging(static_cast<size_t>(kChunkRows) * kDim * sizeof(float));
  for (int64_t first = 0; first < rows; first += kChunkRows) {
    const int64_t n = std::min(kChunkRows, rows - first);
    fb::fill_random(staging.as<float>(), n * kDim, seed + static_cast<uint64_t>(first), 2.0f, stream);
    if (fp8) {
      fc::quantize_fp8_rows(staging.as<float>(), n, kDim, records + first * kFp8Bytes, stream);
    } else {
      fc::quantize_nvfp4_entries(staging.as<float>(), n, kDim, records + first * kNvfp4Bytes, stream);
    }
  }
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// cuBLAS on the per-query shape: S[b] = K[b]·Q[b]ᵀ (640 x 64, k = 512), BF16, fp32 accumulate, `batch`
// queries; TFLOP/s counting the same 2·64·512·640 FLOP per query as one half of attention.
double cublas_attention_shape_tflops(int batch, cudaStream_t stream) {
  const int64_t keys = kWindow + kTopk;
  fb::DeviceBuffer q(static_cast<size_t>(batch) * kHeads * kDim * 2),
      k(static_cast<size_t>(batch) * keys * kDim * 2), s(static_cast<size_t>(batch) * keys * kHeads * 2);
  fb::fill_random(q.as<uint16_t>(), static_cast<int64_t>(batch) * kHeads * kDim, 3, 1.0f, stream);
  fb::fill_random(k.as<uint16_t>(), static_cast<int64_t>(batch) * keys * kDim, 4, 1.0f, stream);
  cublasHandle_t handle{};
  fb::check_cublas(cublasCreate(&handle), "cublasCreate");
  fb::check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  // column-major: S (keys x heads) = Kᵀ(keys x dim, from row-major K) · Q (dim x heads, from row-major Q)
  const double ms = fb::median_ms(stream, [&] {
    fb::check_cublas(cublasGemmStridedBatchedEx(
                         handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(keys), kHeads, kDim, &alpha,
                         k.as<void>(), CUDA_R_16BF, kDim, keys * kDim, q.as<void>(), CUDA_R_16BF, kDim,
                         int64_t{kHeads} * kDim, &beta, s.as<void>(), CUDA_R_16BF, static_cast<int>(keys),
                         keys * kHeads, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmStridedBatchedEx");
  });
  fb::check_cublas(cublasDestroy(handle), "cublasDestroy");
  return batch * flop_per_query() / 2.0 / (ms * 1e-3) / 1e12;
}

// The one-pass variants (their own profile marks; agreement and _queued rows).
bool online_variant(fc::SparseAttentionVariant v) {
  return v == fc::SparseAttentionVariant::kOnline;
}

// Where one CTA's time goes: CTA 0's clock64 / %globaltimer at the kernel's phase boundaries (one extra
// launch with args.profile set).
void print_profile(fc::SparseAttentionArgs args, cudaStream_t stream, fc::SparseAttentionVariant variant,
                   unsigned long long* device_profile, const std::string& name) {
  FKV_CUDA_CHECK(cudaMemsetAsync(device_profile, 0, kProfileWords * sizeof(unsigned long long), stream));
  args.profile = device_profile;
  fc::sparse_attention(args, stream, variant);
  unsigned long long p[kProfileWords];
  FKV_CUDA_CHECK(cudaMemcpyAsync(p, device_profile, sizeof p, cudaMemcpyDeviceToHost, stream));
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto us = [&](int a, int b) { return static_cast<double>(p[5 + b] - p[5 + a]) * 1e-3; };
  const auto kcycles = [&](int a, int b) { return static_cast<double>(p[b] - p[a]) * 1e-3; };
  const auto d = [&](int a, int b) {
    return p[a] != 0 && p[b] != 0 ? static_cast<double>(p[b] - p[a]) : 0.0;
  };
  // phases between profile points 1-2, 2-3, 3-4: the one-pass and the cluster variants have their own
  const bool online = online_variant(variant);
  const bool split = variant == fc::SparseAttentionVariant::kSplitKeys;
  const char* const phase[3] = {online  ? "tile 0"
                                : split ? "tile+Q.K^T+stats"
                                        : "Q.K^T",
                                online  ? "loop"
                                : split ? "stats barrier+P.V"
                                        : "softmax",
                                online  ? "output"
                                : split ? "partials+combine"
                                        : "P.V"};
  std::printf(
      "  profile %s (CTA 0): key list %.1f us (%.1fK cyc), %s %.1f us (%.1fK), %s %.1f us (%.1fK), %s %.1f "
      "us "
      "(%.1fK), total %.1f us (%.1fK cycles)\n",
      name.c_str(), us(0, 1), kcycles(0, 1), phase[0], us(1, 2), kcycles(1, 2), phase[1], us(2, 3),
      kcycles(2, 3), phase[2], us(3, 4), kcycles(3, 4), us(0, 4), kcycles(0, 4));
  // the sixth key tile's iteration by stage (cycles; 0 where the variant has no such mark)
  if (split) {  // (one tile per CTA: no tile marks; the CTA's steps instead)
    std::printf(
        "  steps %s (CTA 0, cycles): decode %.0f | Q.K^T %.0f | cluster start %.0f | statistics %.0f | "
        "barrier %.0f | P.V %.0f | partial store %.0f | barrier %.0f | sum + store %.0f\n",
        name.c_str(), d(1, 13), d(13, 14), d(14, 15), d(15, 2), d(2, 16), d(16, 3), d(3, 11), d(11, 12),
        d(12, 4));
    return;
  }
  if (online) {
    std::printf(
        "  tile 5 %s (CTA 0, cycles): Q.K^T issue %.0f | staging %.0f | half decode %.0f | Q.K^T wait %.0f | "
        "exchanges, softmax, P.V issue %.0f | half decode %.0f | P.V wait %.0f\n",
        name.c_str(), d(10, 14), d(14, 17), d(17, 11), d(11, 12), d(12, 13), d(13, 15), d(15, 16));
  } else {
    std::printf(
        "  tile 5 %s (CTA 0, cycles): Q.K^T decode %.0f | barrier+MMA %.0f | halves sum %.0f, P.V decode "
        "%.0f | barrier+MMA %.0f | barrier %.0f\n",
        name.c_str(), d(10, 11), d(11, 12), d(12, 13), d(15, 16), d(16, 17), d(17, 18));
  }
}

// The one-pass variants against kWgmma (the faithful order) on the bench's data: the largest difference
// relative to the largest |output|, printed beside the timing as a sanity check (the GPU test holds them to
// their derived bound against the CPU backend).
void print_agreement(fc::SparseAttentionArgs args, cudaStream_t stream, fc::SparseAttentionVariant variant,
                     uint16_t* reference, const std::string& name) {
  fc::sparse_attention(args, stream, variant);
  fc::SparseAttentionArgs faithful = args;
  faithful.out = reference;
  fc::sparse_attention(faithful, stream, fc::SparseAttentionVariant::kWgmma);
  const size_t count = static_cast<size_t>(args.n) * kHeads * kDim;
  std::vector<uint16_t> got(count), want(count);
  FKV_CUDA_CHECK(cudaMemcpyAsync(got.data(), args.out, count * 2, cudaMemcpyDeviceToHost, stream));
  FKV_CUDA_CHECK(cudaMemcpyAsync(want.data(), reference, count * 2, cudaMemcpyDeviceToHost, stream));
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto value = [](uint16_t bits) {
    const uint32_t word = static_cast<uint32_t>(bits) << 16;
    float x;
    std::memcpy(&x, &word, sizeof x);
    return static_cast<double>(x);
  };
  double worst = 0.0, largest = 0.0;
  size_t equal = 0;
  for (size_t i = 0; i < count; ++i) {
    const double a = value(got[i]), b = value(want[i]);
    worst = std::isnan(a - b) ? HUGE_VAL : std::max(worst, std::fabs(a - b));
    largest = std::max(largest, std::fabs(b));
    equal += got[i] == want[i] ? 1 : 0;
  }
  std::printf("  agreement %s vs wgmma: max |diff| %.3g (%.3g of max |out| %.3g), %.1f%% bit-equal\n",
              name.c_str(), worst, largest > 0.0 ? worst / largest : 0.0, largest,
              100.0 * static_cast<double>(equal) / static_cast<double>(count));
}

}  // namespace

int main() {
  try {
    fb::print_device_header(kProgram);
    cudaStream_t stream{};
    FKV_CUDA_CHECK(cudaStreamCreate(&stream));

    // The ceilings run only when selected: under FLASHKV_BENCH_ONLY=<one sparse configuration> (ncu, which
    // profiles the first kernels of the timed NVTX range) they would otherwise be the kernels profiled.
    double gemm = 0.0;
    if (fb::selected("cublas_bf16_gemm_8192")) {
      gemm = fb::bf16_gemm_tflops(8192, stream);
      fb::print_result(kProgram, "cublas_bf16_gemm_8192", gemm, "TFLOP/s", 1.0);
    }
    if (fb::selected("cublas_qk_shape_batch128")) {
      const double shape = cublas_attention_shape_tflops(128, stream);
      fb::print_result(kProgram, "cublas_qk_shape_batch128", shape, "TFLOP/s",
                       gemm > 0.0 ? shape / gemm : 0.0);
    }

    fb::DeviceBuffer window(static_cast<size_t>(kMaxBatch) * kWindow * kFp8Bytes);
    fb::DeviceBuffer entries(static_cast<size_t>(kEntryPool) * kNvfp4Bytes);
    random_records(window.as<uint8_t>(), int64_t{kMaxBatch} * kWindow, true, 11, stream);
    random_records(entries.as<uint8_t>(), kEntryPool, false, 12, stream);
    fb::DeviceBuffer q(static_cast<size_t>(kMaxBatch) * kHeads * kDim * 2);
    fb::fill_random(q.as<uint16_t>(), int64_t{kMaxBatch} * kHeads * kDim, 13, 1.0f, stream);
    fb::DeviceBuffer out(static_cast<size_t>(kMaxBatch) * kHeads * kDim * 2);
    fb::DeviceBuffer reference(static_cast<size_t>(kMaxBatch) * kHeads * kDim * 2);
    fb::DeviceBuffer window_rows(static_cast<size_t>(kMaxBatch) * kWindow * 4);
    fb::DeviceBuffer selection(static_cast<size_t>(kMaxBatch) * kTopk * 4);
    fb::DeviceBuffer sink(kHeads * 4);
    fb::fill_random(sink.as<float>(), kHeads, 14, 1.0f, stream);
    // the split-keys scratch allocated once (as an engine would), not per call
    fb::DeviceBuffer workspace(fc::sparse_attention_workspace_bytes(kMaxBatch, kWindow, kTopk));
    fb::DeviceBuffer profile(kProfileWords * sizeof(unsigned long long));
    make_indices<<<kMaxBatch, 256, 0, stream>>>(window_rows.as<int32_t>(), selection.as<int32_t>(), 15);
    FKV_CUDA_CHECK_LAUNCH();
    FKV_CUDA_CHECK(cudaStreamSynchronize(stream));

    std::printf("  %-34s %10s %-7s %7s   (fraction: of the cuBLAS 8192^3 rate)\n", "decode", "value", "unit",
                "of GEMM");
    const struct {
      fc::SparseAttentionVariant variant;
      const char* name;
    } variants[] = {{fc::SparseAttentionVariant::kWgmma, "wgmma"},
                    {fc::SparseAttentionVariant::kOnline, "online"},
                    {fc::SparseAttentionVariant::kSplitKeys, "split_keys"},
                    {fc::SparseAttentionVariant::kMmaSync, "mma"}};
    for (const auto& v : variants) {
      for (int batch : {1, 2, 4, 8, 16, 32, 64, 128, 132, 256}) {
        const std::string name = std::string("sparse_attention_") + v.name + "_b" + std::to_string(batch);
        if (!fb::selected(name + "_us")) continue;
        fc::SparseAttentionArgs args;
        args.q = q.as<uint16_t>();
        args.n = batch;
        args.window_records = window.as<uint8_t>();
        args.window_rows = window_rows.as<int32_t>();
        args.window_cap = kWindow;
        args.entry_records = entries.as<uint8_t>();
        args.selection = selection.as<int32_t>();
        args.topk = kTopk;
        args.sink = sink.as<float>();
        args.out = out.as<uint16_t>();
        args.workspace = workspace.as<void>();
        args.workspace_bytes = workspace.bytes();
        const double ms = fb::median_ms(stream, [&] { fc::sparse_attention(args, stream, v.variant); });
        const double tflops = batch * flop_per_query() / (ms * 1e-3) / 1e12;
        fb::print_result(kProgram, name + "_us", ms * 1e3, "us", 0.0);
        fb::print_result(kProgram, name, tflops, "TFLOP/s", gemm > 0.0 ? tflops / gemm : 0.0);
        const bool profiled = v.variant == fc::SparseAttentionVariant::kSplitKeys
                                  ? batch == 1 || batch == 8
                                  : batch == 1 || batch == 128;
        if (v.variant == fc::SparseAttentionVariant::kSplitKeys && batch == 1) {
          std::printf("  split_keys: %d row clusters of %d CTAs run at once on this device\n",
                      fc::sparse_attention_split_clusters(kWindow, kTopk), (kWindow + kTopk) / 64);
        }
        if (profiled) {
          print_profile(args, stream, v.variant, profile.as<unsigned long long>(), name);
        }
        if (((batch == 1 || batch == 128) && online_variant(v.variant)) ||
            (profiled && v.variant == fc::SparseAttentionVariant::kSplitKeys)) {
          print_agreement(args, stream, v.variant, reference.as<uint16_t>(), name);
        }
        const bool queued_row =
            online_variant(v.variant)
                ? batch == 1 || batch == 128 || batch == 256
                : v.variant == fc::SparseAttentionVariant::kSplitKeys && (batch == 1 || batch == 8);
        if (queued_row) {
          // the GPU kept busy by one untimed call before the start event, so the host's launch latency is
          // outside the event pair (as the indexer's _queued rows; an empty launch measures ~7.5 us above)
          const double queued = fb::median_ms_after(
              stream, [&] { fc::sparse_attention(args, stream, v.variant); },
              [&] { fc::sparse_attention(args, stream, v.variant); });
          fb::print_result(kProgram, name + "_queued", queued * 1e3, "us", 0.0);
        }
      }
    }
    FKV_CUDA_CHECK(cudaStreamDestroy(stream));
    return EXIT_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", kProgram, e.what());
    return EXIT_FAILURE;
  }
}
