// Exhaustive proof, on the device, that the fast element codecs of kernels/kv_element_codecs.cuh equal
// the host encoders of <flashkv/numeric/...> (compiled for the device here) on their whole domain:
// every fp32 bit pattern, and for the NVFP4 division every E4M3 scale with every quotient a record can
// produce. With FLASHKV_TEST_SCALE=small (sanitizer runs) a strided sample of each domain is checked.
#include <cuda_runtime.h>

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "catch.hpp"
#include "cuda_check.cuh"
#include "kv_element_codecs.cuh"

namespace {

namespace nm = flashkv::numeric;
namespace fast = flashkv::cuda::kv_fast;

bool small_scale() {
  const char* scale = std::getenv("FLASHKV_TEST_SCALE");
  return scale != nullptr && std::string(scale) == "small";
}

// Every pattern in full runs; a co-prime stride (about 2^20 samples of 2^32) in small runs.
uint32_t pattern_stride() {
  return small_scale() ? 4093u : 1u;
}

struct Mismatches {
  unsigned long long count;
  unsigned long long first;  // smallest failing input (pattern, or scale code << 32 | pattern)
};

__device__ void record_mismatch(Mismatches* out, unsigned long long input) {
  atomicAdd(&out->count, 1ull);
  atomicMin(&out->first, input);
}

// Runs `kernel(out, stride)` on a fresh Mismatches and returns it.
template <typename Kernel>
Mismatches run_check(Kernel kernel, dim3 grid, uint32_t stride) {
  Mismatches* device = nullptr;
  FKV_CUDA_CHECK(cudaMalloc(&device, sizeof(Mismatches)));
  const Mismatches start{0, ~0ull};
  FKV_CUDA_CHECK(cudaMemcpy(device, &start, sizeof start, cudaMemcpyHostToDevice));
  kernel<<<grid, 256>>>(device, stride);
  FKV_CUDA_CHECK(cudaGetLastError());
  Mismatches result{};
  FKV_CUDA_CHECK(cudaMemcpy(&result, device, sizeof result, cudaMemcpyDeviceToHost));
  FKV_CUDA_CHECK(cudaFree(device));
  return result;
}

// The grid-stride walk over the 32-bit patterns 0, stride, 2*stride, ... below 2^32.
__device__ uint64_t first_step() {
  return blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
}
__device__ uint64_t grid_threads() {
  return static_cast<uint64_t>(gridDim.x) * blockDim.x;
}
__device__ uint64_t pattern_steps(uint32_t stride) {
  return ((uint64_t{1} << 32) + stride - 1) / stride;
}

__global__ void check_e2m1(Mismatches* out, uint32_t stride) {
  for (uint64_t step = first_step(); step < pattern_steps(stride); step += grid_threads()) {
    const auto bits = static_cast<uint32_t>(step * stride);
    const float v = __uint_as_float(bits);
    if (nm::is_nan(v)) continue;  // NaN never reaches an element encoder (poisoned block)
    const uint32_t want = nm::e2m1_from_float(nm::clamp_symmetric(v, nm::kE2m1Max));
    if (fast::e2m1_code(fabsf(v), v) != want) record_mismatch(out, bits);
  }
}

__global__ void check_e4m3(Mismatches* out, uint32_t stride) {
  for (uint64_t step = first_step(); step < pattern_steps(stride); step += grid_threads()) {
    const auto bits = static_cast<uint32_t>(step * stride);
    const float v0 = __uint_as_float(bits);
    if (nm::is_nan(v0)) continue;  // NaN never reaches an element encoder (poisoned block)
    const float reversed = __uint_as_float(__brev(bits));  // the high lane sees a different pattern
    const float v1 = nm::is_nan(reversed) ? 1.0f : reversed;
    const uint32_t want =
        nm::e4m3_from_float(nm::clamp_symmetric(v0, nm::kE4m3Max)) |
        (static_cast<uint32_t>(nm::e4m3_from_float(nm::clamp_symmetric(v1, nm::kE4m3Max))) << 8);
    if (fast::e4m3x2_codes(v0, v1) != want) record_mismatch(out, bits);
  }
}

// x * (1/s) == x / s for power-of-two scales, for the E8M0 scale code in blockIdx.y's table entry.
__constant__ uint8_t kPow2Codes[] = {0, 1, 2, 3, 64, 126, 127, 128, 200, 252, 253, 254};

__global__ void check_pow2_division(Mismatches* out, uint32_t stride) {
  const uint8_t code = kPow2Codes[blockIdx.y];
  const float scale = nm::e8m0_to_float(code);
  const float inverse = nm::div_rn(1.0f, scale);
  for (uint64_t step = first_step(); step < pattern_steps(stride); step += grid_threads()) {
    const auto bits = static_cast<uint32_t>(step * stride);
    const float x = __uint_as_float(bits);
    if (nm::is_nan(x)) continue;
    if (__float_as_uint(__fmul_rn(x, inverse)) != __float_as_uint(nm::div_rn(x, scale))) {
      record_mismatch(out, (static_cast<unsigned long long>(code) << 32) | bits);
    }
  }
}

// NVFP4: for every finite positive E4M3 scale s (codes 0x01..0x7E, blockIdx.y + 1) and every |x| up to
// 16 s (a record's |x| / s stays below 9), e2m1_code(divide_by_scale(|x|, s, 1/s), x) == fp4_encode(x, s),
// for both signs.
__global__ void check_nvfp4_elements(Mismatches* out, uint32_t stride) {
  const auto code = static_cast<uint8_t>(blockIdx.y + 1);
  const float scale = nm::e4m3_to_float(code);
  const float reciprocal = nm::div_rn(1.0f, scale);
  const uint32_t last = __float_as_uint(16.0f * scale);
  for (uint64_t step = first_step(); step * stride <= last; step += grid_threads()) {
    const auto bits = static_cast<uint32_t>(step * stride);
    const float a = __uint_as_float(bits);
    const uint32_t magnitude = fast::e2m1_magnitude_code(fast::divide_by_scale(a, scale, reciprocal));
    const bool positive_ok = magnitude == nm::fp4_encode(a, scale);
    const bool negative_ok = (magnitude | 8u) == nm::fp4_encode(-a, scale);
    if (!positive_ok || !negative_ok)
      record_mismatch(out, (static_cast<unsigned long long>(code) << 32) | bits);
  }
}

// BF16 inputs: e2m1x2_codes_bf16 (f16x2 rounding of RN(x * RN(1/s))) equals fp4_encode(x, s) for every
// finite BF16 x (paired with a scrambled partner) and every scale: blockIdx.y < 0x7E walks the E4M3 scale
// codes 0x01..0x7E (NVFP4), the rest the E8M0 codes 0x00..0xFE (MXFP4).
__global__ void check_bf16_fp4_elements(Mismatches* out, uint32_t stride) {
  const unsigned y = blockIdx.y;
  const float scale = y < 0x7Eu ? nm::e4m3_to_float(static_cast<uint8_t>(y + 1))
                                : nm::e8m0_to_float(static_cast<uint8_t>(y - 0x7Eu));
  const float reciprocal = nm::div_rn(1.0f, scale);
  // Every BF16 pattern in the low channel; the high channel sees a scrambled partner pattern.
  for (uint64_t step = first_step(); step < (uint64_t{1} << 16); step += grid_threads()) {
    const auto low = static_cast<uint32_t>(step);
    const uint32_t bits = low | (((low * 0x9E37u + y * 0x3Bu + stride) & 0xffffu) << 16);
    const float x0 = nm::bf16_to_float(static_cast<uint16_t>(bits & 0xffffu));
    const float x1 = nm::bf16_to_float(static_cast<uint16_t>(bits >> 16));
    if (!nm::is_finite(x0) || !nm::is_finite(x1)) continue;  // poisoned blocks skip the encoder
    const uint32_t want = nm::fp4_encode(x0, scale) | (static_cast<uint32_t>(nm::fp4_encode(x1, scale)) << 4);
    if (fast::e2m1x2_codes_bf16(x0, x1, reciprocal) != want)
      record_mismatch(out, (static_cast<unsigned long long>(y) << 32) | bits);
  }
}

// Decoders: every code of each element format times every scale of its record kind equals the host's
// fp8_decode / fp4_decode bit for bit (NaN results only need to be NaN). blockIdx.x: the scale code.
__global__ void check_decoders(Mismatches* out, uint32_t /*stride*/) {
  const auto scale_code = static_cast<uint8_t>(blockIdx.x);
  const float e8m0_scale = nm::e8m0_to_float(scale_code);
  const float e4m3_scale = nm::e4m3_to_float(scale_code);
  const uint32_t code = threadIdx.x;  // 0..255
  auto same = [](float got, float want) {
    return nm::is_nan(want) ? nm::is_nan(got) : __float_as_uint(got) == __float_as_uint(want);
  };
  float y[4];
  fast::e4m3x4_decode(code * 0x01010101u, e8m0_scale, y);
  bool ok = same(y[0], nm::fp8_decode(static_cast<uint8_t>(code), e8m0_scale)) && same(y[3], y[0]);
  const uint32_t nibbles = (code & 0xfu) * 0x1111u;
  for (float scale : {e8m0_scale, e4m3_scale}) {
    fast::e2m1x4_decode(nibbles, scale, y);
    ok = ok && same(y[0], nm::fp4_decode(static_cast<uint8_t>(code & 0xfu), scale)) && same(y[2], y[0]);
  }
  if (!ok) record_mismatch(out, (static_cast<unsigned long long>(scale_code) << 32) | code);
}

// max.NaN against the host's NaN-propagating amax_update: same value, or NaN on both sides.
__global__ void check_amax(Mismatches* out, uint32_t stride) {
  const float others[] = {
      0.0f, 1.0f, 3.5e-39f, 448.0f, __uint_as_float(0x7F800000u), __uint_as_float(0x7FC00000u)};
  for (uint64_t step = first_step(); step < pattern_steps(stride); step += grid_threads()) {
    const auto bits = static_cast<uint32_t>(step * stride);
    const float x = __uint_as_float(bits);
    for (float amax : others) {
      const float want = nm::amax_update(amax, x);
      const float got = fast::amax_update(amax, x);
      const bool same = nm::is_nan(want) ? nm::is_nan(got) : __float_as_uint(got) == __float_as_uint(want);
      if (!same) record_mismatch(out, bits);
    }
  }
}

void require_none(const Mismatches& m, const char* what) {
  INFO(what << ": " << m.count << " mismatches, first input 0x" << std::hex << m.first);
  REQUIRE(m.count == 0);
}

}  // namespace

TEST_CASE("fast E2M1 encoding equals the host encoder on every fp32", "[gpu][kv_quant][exhaustive]") {
  require_none(run_check(check_e2m1, dim3(4096), pattern_stride()), "e2m1_code");
}

TEST_CASE("hardware E4M3 conversion equals the host encoder on every fp32", "[gpu][kv_quant][exhaustive]") {
  require_none(run_check(check_e4m3, dim3(4096), pattern_stride()), "e4m3x2_codes");
}

TEST_CASE("multiplying by 2^-e equals dividing by 2^e on every fp32", "[gpu][kv_quant][exhaustive]") {
  const auto scales = static_cast<unsigned>(sizeof(kPow2Codes));
  require_none(run_check(check_pow2_division, dim3(1024, scales), pattern_stride()), "power-of-two division");
}

TEST_CASE("fast NVFP4 element coding equals fp4_encode for every E4M3 scale", "[gpu][kv_quant][exhaustive]") {
  require_none(run_check(check_nvfp4_elements, dim3(256, 0x7E), pattern_stride()), "nvfp4 element");
}

TEST_CASE("max.NaN amax equals the host's NaN-propagating amax", "[gpu][kv_quant][exhaustive]") {
  require_none(run_check(check_amax, dim3(4096), pattern_stride()), "amax_update");
}

TEST_CASE("f16x2 E2M1 coding of BF16 inputs equals fp4_encode for every NVFP4 and MXFP4 scale",
          "[gpu][kv_quant][exhaustive]") {
  require_none(run_check(check_bf16_fp4_elements, dim3(64, 0x7E + 0xFF), 1), "bf16 fp4 element");
}

TEST_CASE("fast E4M3 and E2M1 decoders equal the host decoders for every code and scale",
          "[gpu][kv_quant][exhaustive]") {
  require_none(run_check(check_decoders, dim3(256), 1), "decoders");
}
