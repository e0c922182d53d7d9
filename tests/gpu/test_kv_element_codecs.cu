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
