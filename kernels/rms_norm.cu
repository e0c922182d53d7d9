// RMSNorm rows (rms_norm.cuh): one warp per row. Lanes 0-7 each run one of the CPU's eight partial sums in
// its sequential order, lane 8 the tail; every lane then forms the same combine and root and writes its
// strided channels.
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>

#include "cuda_check.cuh"
#include "rms_norm.cuh"

namespace flashkv::cuda {
namespace {

constexpr int kWarpsPerCta = 8;
constexpr int64_t kMaxGrid = 1 << 20;
constexpr unsigned kFullMask = 0xffffffffu;

// Σ x² in the order of numerics.hpp dot(x, x, d).
__device__ inline double sum_of_squares(const float* x, int64_t d, int lane) {
  const int64_t body = d - d % 8;
  double own = 0;
  if (lane < 8) {
    for (int64_t i = lane; i < body; i += 8) own = __dadd_rn(own, __dmul_rn(x[i], x[i]));
  } else if (lane == 8) {
    for (int64_t i = body; i < d; ++i) own = __dadd_rn(own, __dmul_rn(x[i], x[i]));
  }
  double p[9];
#pragma unroll
  for (int j = 0; j < 9; ++j) p[j] = __shfl_sync(kFullMask, own, j);
  const double left = __dadd_rn(__dadd_rn(p[0], p[4]), __dadd_rn(p[1], p[5]));
  const double right = __dadd_rn(__dadd_rn(p[2], p[6]), __dadd_rn(p[3], p[7]));
  return __dadd_rn(__dadd_rn(left, right), p[8]);
}

__global__ void __launch_bounds__(kWarpsPerCta * 32)
    rms_norm_kernel(const float* x, int64_t n, int64_t d, const float* weight, double eps, bool round_bf16,
                    float* y, uint8_t* row_flags) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerCta;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerCta) + threadIdx.x / 32; r < n; r += warps) {
    const float* xr = x + r * d;
    const double root =
        __dsqrt_rn(__dadd_rn(__ddiv_rn(sum_of_squares(xr, d, lane), static_cast<double>(d)), eps));
    __syncwarp();  // every lane has read the row before any writes it (y may be x)
    for (int64_t c = lane; c < d; c += 32) {
      float out = __double2float_rn(__dmul_rn(weight[c], __ddiv_rn(xr[c], root)));
      if (round_bf16) out = numeric::bf16_to_float(numeric::bf16_from_float(out));
      y[r * d + c] = out;
      if (row_flags != nullptr && !isfinite(out)) row_flags[r] = 1;  // benign race: every writer stores 1
    }
  }
}

}  // namespace

void rms_norm_rows(const float* x, int64_t n, int64_t d, const float* weight, double eps, bool round_bf16,
                   float* y, uint8_t* row_flags, cudaStream_t stream) {
  if (n <= 0 || d <= 0) return;
  const auto grid = static_cast<unsigned>(std::min((n + kWarpsPerCta - 1) / kWarpsPerCta, kMaxGrid));
  rms_norm_kernel<<<grid, kWarpsPerCta * 32, 0, stream>>>(x, n, d, weight, eps, round_bf16, y, row_flags);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace flashkv::cuda
