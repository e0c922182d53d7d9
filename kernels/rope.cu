// RoPE rows (rope.cuh): one CTA per row. The CTA first forms cos/sin of the row's position for every pair in
// shared memory (once per row, shared by all heads), then walks the row's channel pairs: rotated pairs are
// the CPU's double expression with explicit _rn intrinsics (no FMA contraction), then the BF16 cast point.
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>

#include "cuda_check.cuh"
#include "exact_rounding.cuh"
#include "rope.cuh"

namespace flashkv::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 1 << 20;

__device__ inline float round_bf16(float x) {
  return numeric::bf16_to_float(numeric::bf16_from_float(x));
}

__device__ inline void flag_row(const RopeRowsArgs& a, int64_t r) {
  a.row_flags[r] = 1;  // benign race: every writer stores 1
}

// cos/sin of the row's angle for pair i, as rope.cpp's angles_of(); false when the fp32 rounding of a
// libdevice value is not certain to match glibc's.
__device__ inline bool angles_of(const RopeRowsArgs& a, int64_t position, int64_t i, double& c, double& s) {
  bool certain = true;
  if (a.fp32_angles) {
    const float angle = __fmul_rn(__ll2float_rn(position), __double2float_rn(a.freqs[i]));
    double sine, cosine;
    sincos(static_cast<double>(angle), &sine, &cosine);
    certain = float_rounding_is_certain(cosine, fabs(cosine) * kTranscendentalSlack) &&
              float_rounding_is_certain(sine, fabs(sine) * kTranscendentalSlack);
    c = __double2float_rn(cosine);
    s = __double2float_rn(sine);
  } else {
    sincos(__dmul_rn(__ll2double_rn(position), a.freqs[i]), &s, &c);
  }
  if (a.inverse) s = -s;
  return certain;
}

// Rotates one pair; false when a result may round differently from the CPU's or is not finite.
__device__ inline bool rotate(const RopeRowsArgs& a, double c, double s, float& x0, float& x1) {
  const double re = x0, im = x1;
  const double out_re = __dsub_rn(__dmul_rn(re, c), __dmul_rn(im, s));
  const double out_im = __dadd_rn(__dmul_rn(re, s), __dmul_rn(im, c));
  x0 = __double2float_rn(out_re);
  x1 = __double2float_rn(out_im);
  if (a.fp32_angles) return isfinite(x0) && isfinite(x1);  // c and s are the CPU's: the rest is exact IEEE
  // double angles: c and s may each differ from glibc's by 2^-50 relative; both sides add two products'
  // and one sum's roundings. 2·slack·(|re·c| + |im·s|) covers it with margin (the same for the other output).
  const double bound = 2 * kTranscendentalSlack *
                       (fabs(re) * fabs(c) + fabs(im) * fabs(s) + fabs(re) * fabs(s) + fabs(im) * fabs(c));
  return float_rounding_is_certain(out_re, bound) && float_rounding_is_certain(out_im, bound);
}

__global__ void __launch_bounds__(kThreads) rope_rows_kernel(RopeRowsArgs a) {
  extern __shared__ double table[];  // cos [pairs], then sin [pairs]
  const int64_t pairs = a.rope_dim / 2;
  const int64_t first = a.head_dim - a.rope_dim;
  const int64_t row_pairs = a.heads * a.head_dim / 2;
  for (int64_t r = blockIdx.x; r < a.n; r += gridDim.x) {
    const int64_t position = a.positions[r];
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
      if (!angles_of(a, position, i, table[i], table[pairs + i])) flag_row(a, r);
    }
    __syncthreads();
    float2* row = reinterpret_cast<float2*>(a.x + r * a.heads * a.head_dim);
    for (int64_t k = threadIdx.x; k < row_pairs; k += blockDim.x) {
      const int64_t channel = (2 * k) % a.head_dim;
      const bool rotated = channel >= first;
      if (!rotated && !a.round_bf16) continue;
      float2 v = row[k];
      if (rotated) {
        const int64_t i = (channel - first) / 2;
        if (!rotate(a, table[i], table[pairs + i], v.x, v.y)) flag_row(a, r);
      }
      if (a.round_bf16) {
        v.x = round_bf16(v.x);
        v.y = round_bf16(v.y);
      }
      row[k] = v;
    }
    __syncthreads();  // the table is rewritten for the next row
  }
}

}  // namespace

void rope_rows(const RopeRowsArgs& args, cudaStream_t stream) {
  if (args.n <= 0) return;
  const size_t shared = static_cast<size_t>(std::max<int64_t>(args.rope_dim, 1)) * sizeof(double);
  const auto grid = static_cast<unsigned>(std::min(args.n, kMaxGrid));
  rope_rows_kernel<<<grid, kThreads, shared, stream>>>(args);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace flashkv::cuda
