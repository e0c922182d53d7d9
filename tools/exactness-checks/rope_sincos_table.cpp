// Checks kv_write.cu faithful_cos_sin (k·π/32 table + short polynomials, decided when > 1024 double ulps from an
// fp32 midpoint) against the bit-exact libdevice sincos transcription and a long-double sinl/cosl reference.
// Cases: 10^8 angles (argv[1]), 2 values each: pos·freq (rope bases 1e4, 1.6e5) and random fp32 in [2^-31, 2^25).
// Expected: "... fp32 mismatches vs libdevice 0, vs long double 0" (worst table error 12.885 ulp), exit 0.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
static const double kTable[64][2] = {
#include "../../kernels/rope_sincos_table.inc"
};
static uint64_t bits64(double x) { uint64_t b; memcpy(&b, &x, 8); return b; }
static const double kTrig[16] = {
    0x1.45f306dc9c883p-1, 0x1.921fb54442d18p+0, 0x1.1a62633145c00p-54, 0x1.b839a252049c0p-104,
    0x1.1eea7c1ef8528p-29, -0x1.8ff8320fd8164p-37, -0x1.27e4f8e06e6d9p-22, 0x1.a01a019ddbce9p-16,
    -0x1.6c16c16c15d47p-10, 0x1.5555555555551p-5, -0x1.ae5f12cb0d246p-26, 0x1.5db65f9785ebap-33,
    0x1.71de369ace392p-19, -0x1.a01a019db62a1p-13, 0x1.1111111110818p-7, -0x1.5555555555554p-3};
static void libdevice_sc(double a, double& sine, double& cosine) {
  const double kRound = 0x1.8p52;
  const double t = a * kTrig[0] + kRound;
  const int quadrant = (int)(uint32_t)bits64(t);
  const double k = t - kRound;
  double r = std::fma(-k, kTrig[1], a);
  r = std::fma(-k, kTrig[2], r);
  r = std::fma(-k, kTrig[3], r);
  const double z = r * r;
  double c = std::fma(z, kTrig[5], kTrig[4]);
  for (int i = 6; i < 10; ++i) c = std::fma(z, c, kTrig[i]);
  c = std::fma(z, c, -0.5);
  c = std::fma(z, c, 1.0);
  double s = std::fma(z, kTrig[11], kTrig[10]);
  for (int i = 12; i < 16; ++i) s = std::fma(z, s, kTrig[i]);
  s = std::fma(z * s, r, r);
  if (quadrant & 1) { const double w = s; s = c; c = -w; }
  if (quadrant & 2) { s = -s; c = -c; }
  sine = s; cosine = c;
}
// The kernel's table method, operation by operation.
static void table_sc(double a, double& sine, double& cosine) {
  const double kRound = 0x1.8p52;
  const double t = a * 0x1.45f306dc9c883p+3 + kRound;  // a·32/π, rounded to an integer k
  const int index = (int)((uint32_t)bits64(t) & 63u);
  const double k = t - kRound;
  double r = std::fma(-k, 0x1.921fb54442d18p-4, a);  // a − k·π/32, libdevice's π/2 parts / 16
  r = std::fma(-k, 0x1.1a62633145c00p-58, r);
  r = std::fma(-k, 0x1.b839a252049c0p-108, r);
  const double z = r * r;
  double c = std::fma(z, -0x1.6c16c16c16c17p-10, 0x1.5555555555555p-5);
  c = std::fma(z, c, -0.5);
  const double cm1 = z * c;  // cos r − 1
  double s = std::fma(z, -0x1.a01a01a01a01ap-13, 0x1.1111111111111p-7);
  s = std::fma(z, s, -0x1.5555555555555p-3);
  const double sr = std::fma(r * z, s, r);  // sin r
  const double S = kTable[index][0], C = kTable[index][1];
  sine = S + std::fma(S, cm1, C * sr);
  cosine = C + std::fma(C, cm1, -(S * sr));
}
constexpr uint32_t kMargin = 1024;  // double ulps around an fp32 midpoint that are declined
static bool decided(double v) {
  const uint64_t b = bits64(v);
  if (((b >> 52) & 0x7ff) < 1023 - 126) return false;  // fp32 subnormal range or zero: declined
  const uint32_t low = (uint32_t)b & 0x1fffffffu;
  return low + kMargin - 0x10000000u > 2 * kMargin;  // unsigned: |low − 2^28| > kMargin
}
int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 100000000;
  std::mt19937_64 rng(20261129);
  std::uniform_int_distribution<int> pos(0, 1 << 24);
  std::uniform_int_distribution<int> pair(0, 31);
  std::uniform_int_distribution<uint32_t> any(0x30000000u, 0x4c000000u);  // fp32 in [2^-31, 2^25)
  double worst_table = 0, worst_lib = 0;
  long declined = 0, mismatch_lib = 0, mismatch_exact = 0;
  for (long i = 0; i < n; ++i) {
    float a;
    if (i % 2 == 0) {  // position · frequency, frequencies of rope dim 64 with bases 1e4 and 1.6e5
      const double base = (i % 4 == 0) ? 10000.0 : 160000.0;
      const float f = (float)std::pow(base, -2.0 * pair(rng) / 64.0);
      a = (float)pos(rng) * f;
    } else {
      const uint32_t b = any(rng);
      memcpy(&a, &b, 4);
    }
    double ts, tc, ls, lc;
    table_sc(a, ts, tc);
    libdevice_sc(a, ls, lc);
    const long double es = sinl((long double)a), ec = cosl((long double)a);
    for (int v = 0; v < 2; ++v) {
      const double t = v ? tc : ts, l = v ? lc : ls;
      const long double e = v ? ec : es;
      const long double ulp = ldexpl(1.0L, ilogbl(e) - 52);
      const double et = (double)(fabsl((long double)t - e) / ulp), el = (double)(fabsl((long double)l - e) / ulp);
      if (et > worst_table) worst_table = et;
      if (el > worst_lib) worst_lib = el;
      if (!decided(t)) { ++declined; continue; }
      if ((float)t != (float)l) { if (mismatch_lib < 5) printf("lib mismatch a=%a v=%d %a %a\n", a, v, t, l); ++mismatch_lib; }
      if ((float)t != (float)e) ++mismatch_exact;
    }
  }
  printf("angles %ld: worst error table %.3f ulp, libdevice %.3f ulp (vs long double); declined %ld values; "
         "fp32 mismatches vs libdevice %ld, vs long double %ld\n",
         n, worst_table, worst_lib, declined, mismatch_lib, mismatch_exact);
  return mismatch_lib != 0;
}
