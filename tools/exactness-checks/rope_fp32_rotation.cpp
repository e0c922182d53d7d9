// Checks kv_write_rope.cuh's faithful RoPE fast path (cos_sin_f32 + rotate_pair): cos/sin of the fp32 angle
// in fp32 from the k·π/128 table (kernels/rope_sincos_table.inc, the kernel's own constants) and short
// polynomials, the rotation in fp32, and the decision "BF16(RD(u − B)) == BF16(RU(u + B)) for both values"
// with B = RN(RN(|re| + |im|)·5·2^-24 + 2^-120). The kernel's operations, with std::fma, -ffp-contract=off
// and the directed roundings by fesetround.
//   A) cos/sin error against long double cosl/sinl, in units of 2^-24 (absolute); the kernel's bound
//      kRotationBound assumes at most 1.2.
//   B) every decided pair against the CPU's rotate (rope.cpp: c32 = RN32(cos(double a)) with glibc, the
//      rotation in double, RN32, then BF16), and against the same with c32, s32 from long double (another
//      faithful cos/sin: the decision must hold for any c32, s32 within an fp32 ulp).
// Angles pos·f (pos < 2^20 and < 2^24, rope dim 64 frequencies of bases 1e4 and 1.6e5, with and without a
// YaRN factor 16), and random fp32 in [2^-31, 2^24); pairs: random BF16 with exponents in [-40, 20], half of
// them near-cancelling (|im| = |re|·2^-j or equal), plus zeros and tiny values; and one pair of independent
// normal values per angle ("plain": the decline rate of RMSNorm outputs).
// Usage: rope_fp32_rotation [cases]   Expected: "... bad 0 ...", worst cos/sin error <= 1.2, exit 0.
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

struct F2 {
  float x, y;
};
static const F2 kTable[256] = {
#include "../../kernels/rope_sincos_table.inc"
};

static uint32_t bits32(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}
static float from_bits(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}
static uint64_t bits64(double x) {
  uint64_t b;
  memcpy(&b, &x, 8);
  return b;
}
// cvt.rn.bf16.f32 (RNE; NaN -> 0x7fff)
static uint32_t bf16(float x) {
  const uint32_t b = bits32(x);
  if (std::isnan(x)) return 0x7fffu;
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}
static float round_down_sub(float a, float b) {
  std::fesetround(FE_DOWNWARD);
  volatile float va = a, vb = b;
  const float r = va - vb;
  std::fesetround(FE_TONEAREST);
  return r;
}
static float round_up_add(float a, float b) {
  std::fesetround(FE_UPWARD);
  volatile float va = a, vb = b;
  const float r = va + vb;
  std::fesetround(FE_TONEAREST);
  return r;
}

// cos_sin_f32, operation by operation.
static void cos_sin_f32(float angle, float& c, float& s) {
  const double a = angle;
  const double t = std::fma(a, 0x1.45f306dc9c883p+5, 0x1.8p52);
  const double k = t - 0x1.8p52;
  const float r = (float)std::fma(-k, 0x1.921fb54442d18p-6, a);
  const F2 e = kTable[(uint32_t)bits64(t) & 255u];
  const float h = (r * r) * -0.5f;
  const float sin_r = std::fma(r * h, 0x1.555556p-2f, r);
  s = e.x + std::fma(e.x, h, e.y * sin_r);
  c = e.y + std::fma(e.y, h, -(e.x * sin_r));
}

// rotate_pair's fast path: true and the BF16 pair when decided.
static bool rotate_fast(float re, float im, float angle, uint32_t& out) {
  float c, s;
  cos_sin_f32(angle, c, s);
  const float u = std::fma(re, c, -(im * s));
  const float v = std::fma(im, c, re * s);
  const float sum = std::fabs(re) + std::fabs(im);
  const float bound = std::fma(sum, 0x1.4p-22f, 0x1p-120f);
  const uint32_t low = bf16(round_down_sub(u, bound)) | bf16(round_down_sub(v, bound)) << 16;
  const uint32_t high = bf16(round_up_add(u, bound)) | bf16(round_up_add(v, bound)) << 16;
  out = low;
  return low == high && sum < 0x1p100f && std::fabs(angle) < 0x1p24f;
}

// rope.cpp's faithful rotation from fp32 cos/sin (as doubles).
static uint32_t rotate_cpu(float re, float im, double c, double s) {
  const double r = re, i = im;
  const float a = (float)(r * c - i * s), b = (float)(r * s + i * c);
  return bf16(a) | bf16(b) << 16;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 20000000;
  std::mt19937_64 rng(20261130);
  std::uniform_int_distribution<int> pos20(0, (1 << 20) - 1), pos24(0, (1 << 24) - 1), pair(0, 31);
  std::uniform_int_distribution<uint32_t> any_angle(0x30000000u, 0x4b7fffffu);  // [2^-31, 2^24)
  std::uniform_int_distribution<int> exponent(-40, 20), shift(0, 24), kind(0, 15);
  std::uniform_int_distribution<uint32_t> mantissa(0, 127), coin(0, 1);
  double worst_cs = 0;
  long decided = 0, bad = 0, bad_ld = 0, values = 0, plain = 0, plain_declined = 0;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random_bf16 = [&](int e) {
    const uint32_t b = (coin(rng) << 31) | ((uint32_t)(e + 127) << 23) | (mantissa(rng) << 16);
    return from_bits(b);
  };
  for (long i = 0; i < n; ++i) {
    float a;
    const int m = (int)(i % 4);
    if (m < 3) {
      const double base = (i / 4) % 2 ? 10000.0 : 160000.0;
      float f = (float)(1.0 / std::pow(base, 2.0 * pair(rng) / 64.0));
      if ((i / 8) % 2) f = f / 16.0f;  // a YaRN-scaled frequency
      a = (float)(m == 2 ? pos24(rng) : pos20(rng)) * f;
    } else {
      a = from_bits(any_angle(rng));
    }
    // A) cos/sin error (absolute, units of 2^-24)
    float c, s;
    cos_sin_f32(a, c, s);
    const long double ec = cosl((long double)a), es = sinl((long double)a);
    const double err = (double)(fmaxl(fabsl((long double)c - ec), fabsl((long double)s - es)) * 0x1p24L);
    if (err > worst_cs) worst_cs = err;
    // B) the rotation of a few pairs at this angle
    for (int p = 0; p < 5; ++p) {
      float re = random_bf16(exponent(rng)), im;
      const int k = p == 4 ? -1 : kind(rng);
      switch (k) {
        case -1:  // plain: RMSNorm-like values, independent normal (the decline rate of real rows)
          re = from_bits(bf16(normal(rng)) << 16);
          im = from_bits(bf16(normal(rng)) << 16);
          break;
        case 0:
          im = re;
          break;  // equal
        case 1:
          im = -re;
          break;  //
        case 2:
          im = 0.0f;
          break;  // zero
        case 3:   // tiny, subnormal
          im = from_bits(bits32(re) & 0x807f0000u);
          re = from_bits((bits32(re) & 0x807f0000u) | 0x00800000u);
          break;
        case 4:
        case 5:
        case 6:
        case 7:  // |im| = |re|·2^-j
          im = std::ldexp(random_bf16(0), (int)std::ilogb(re) - shift(rng));
          break;
        default:
          im = random_bf16(exponent(rng));
      }
      if (coin(rng)) std::swap(re, im);
      uint32_t fast;
      ++values;
      plain += k == -1;
      if (!rotate_fast(re, im, a, fast)) {
        plain_declined += k == -1;
        continue;
      }
      ++decided;
      const uint32_t cpu = rotate_cpu(re, im, (float)std::cos((double)a), (float)std::sin((double)a));
      const uint32_t cpu_ld = rotate_cpu(re, im, (float)ec, (float)es);
      if (fast != cpu) {
        if (bad < 5) printf("mismatch a=%a re=%a im=%a fast %08x cpu %08x\n", a, re, im, fast, cpu);
        ++bad;
      }
      if (fast != cpu_ld) ++bad_ld;
    }
  }
  printf(
      "angles %ld: worst cos/sin error %.4f·2^-24 (bound 1.2); pairs %ld decided %ld (declined %.4f%%); "
      "plain pairs declined %.4f%%; bad %ld (glibc cos/sin) %ld (long double)\n",
      n, worst_cs, values, decided, 100.0 * (double)(values - decided) / (double)values,
      100.0 * (double)plain_declined / (double)plain, bad, bad_ld);
  return bad != 0 || bad_ld != 0 || worst_cs > 1.2;
}
