// Compressor pooling (compressor_pool.cuh): one thread per (group, channel), consecutive threads on
// consecutive channels (coalesced rows). The CPU keeps the group's weights in an array; the kernel recomputes
// exp(g_t − peak) in each pass instead (the same libdevice call gives the same double), so nothing is staged.
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>

#include "compressor_pool.cuh"
#include "cuda_check.cuh"
#include "exact_rounding.cuh"

namespace flashkv::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 1 << 20;

__global__ void __launch_bounds__(kThreads) compressor_pool_kernel(CompressorPoolArgs a) {
  const int64_t total = a.groups * a.dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e / a.dim;
    const int64_t c = e - j * a.dim;
    const float* g = a.g + j * a.ratio * a.dim + c;
    const float* v = a.v + j * a.ratio * a.dim + c;
    double peak = g[0];
    for (int64_t t = 1; t < a.ratio; ++t) {
      const double x = g[t * a.dim];
      peak = peak < x ? x : peak;  // std::max(peak, x)
    }
    double sum = 0;
    for (int64_t t = 0; t < a.ratio; ++t) sum = __dadd_rn(sum, exp(__dsub_rn(g[t * a.dim], peak)));
    double value = 0;
    double magnitude = 0;  // Σ |p_t·v_t|: the scale of the accumulated differences
    double v_max = 0;
    for (int64_t t = 0; t < a.ratio; ++t) {
      const double term = __dmul_rn(__ddiv_rn(exp(__dsub_rn(g[t * a.dim], peak)), sum), v[t * a.dim]);
      value = __dadd_rn(value, term);
      magnitude = __dadd_rn(magnitude, fabs(term));
      v_max = fmax(v_max, fabs(static_cast<double>(v[t * a.dim])));
    }
    // Each w_t is within 2^-51 (relative) of glibc's; sum, quotients and the accumulation add about
    // (ratio + 4)·2^-52 relative to Σ|p·v| on each side. (ratio + 8)·2^-49 of magnitude covers both with a
    // factor 4; v_max·2^-1000 covers weights in the subnormal range, where ulps are absolute.
    const double bound = __dmul_rn(static_cast<double>(a.ratio + 8) * 0x1p-49, magnitude) + v_max * 0x1p-1000;
    float out = __double2float_rn(value);
    if (a.round_bf16) out = numeric::bf16_to_float(numeric::bf16_from_float(out));
    if (!float_rounding_is_certain(value, bound)) {
      out = __int_as_float(0x7fffffff);  // the caller's marker: recompute this channel
      a.group_flags[j] = 1;              // benign race: every writer stores 1
    }
    a.pooled[e] = out;
  }
}

}  // namespace

void compressor_pool(const CompressorPoolArgs& args, cudaStream_t stream) {
  if (args.groups <= 0 || args.dim <= 0) return;
  const int64_t blocks = (args.groups * args.dim + kThreads - 1) / kThreads;
  compressor_pool_kernel<<<static_cast<unsigned>(std::min(blocks, kMaxGrid)), kThreads, 0, stream>>>(args);
  FKV_CUDA_CHECK_LAUNCH();
}

}  // namespace flashkv::cuda
