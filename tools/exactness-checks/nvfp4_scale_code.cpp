// Checks kv_write_records.cuh nvfp4_scale_code_fast (divide_by_scale(max.NaN(amax, floor), 6, RN(1/6)) with fma, then the
// satfinite E4M3 conversion, q > 464 -> 0x7F) against the CPU's nvfp4_block_scale_code (include/flashkv/numeric).
// Cases: every non-negative and every NaN fp32 amax bit pattern (2^31 + NaNs); needs -I include.
// Expected: "<N> amax values, 0 mismatches", exit 0.
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
namespace nm = flashkv::numeric;
static float bits(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
static float nanmax(float a, float b) { if (std::isnan(a) || std::isnan(b)) return std::nanf(""); return a > b ? a : b; }
int main() {
  uint64_t bad = 0, n = 0;
  for (uint64_t b = 0; b <= 0xffffffffull; ++b) {
    const float amax = std::fabs(bits(static_cast<uint32_t>(b)));  // amax >= 0 or NaN
    if ((b >> 31) && !std::isnan(bits(static_cast<uint32_t>(b)))) continue;  // negative: amax is |x|
    const uint8_t want = nm::nvfp4_block_scale_code(amax);
    const float a = nanmax(amax, nm::kNvfp4AmaxFloor);
    const float r = nm::kInvE2m1Max;
    const float q0 = a * r;
    const float res = std::fma(-q0, 6.0f, a);
    const float q = std::fma(res, r, q0);
    const uint8_t got = q <= 464.0f ? nm::e4m3_from_float_satfinite(q) : 0x7f;
    ++n;
    if (got != want) { if (bad < 10) std::printf("amax %a: want %02x got %02x (q %a)\n", amax, want, got, q); ++bad; }
  }
  std::printf("%llu amax values, %llu mismatches\n", (unsigned long long)n, (unsigned long long)bad);
  return bad != 0;
}
