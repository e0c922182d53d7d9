// Checks kv_write_rms_norm.cuh's RMSNorm fast path (r = RN32(one double Newton step from rsqrt.approx, eps0 up to 2^-20),
// estimate RN(RN(w·x)·r) since session 7 (was RN(w·RN(x·r)); argv[2] = "old" checks that one), margin 3) and the
// fallback's double w·(x·r1) (decided at 2^-39) against the CPU's bf16(fp32(w·(x/sqrt(ms)))). Cases: 400000 rows
// (argv[1]) x 512 channels = 2.048·10^8, with zeros and tiny x. Expected (README): bad 0 on both paths.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>
static uint32_t u(float x){uint32_t b; memcpy(&b,&x,4); return b;}
static float f(uint32_t b){float x; memcpy(&x,&b,4); return x;}
static float bf16(float x){ uint32_t b=u(x); if ((b&0x7fffffff)>0x7f800000) return x; b = (b + 0x7fffu + ((b>>16)&1u)) & 0xffff0000u; return f(b); }
static const uint32_t kMargin = 3;
// The kernel's fast-path test: midpoint key on e, range on BF16(e) (estimates_tiny, session 6; was |e| >= 2^-60).
static bool declined(float e){ uint32_t off = (u(e)<<16) - ((0x8000u-kMargin)<<16); return !(std::fabs(bf16(e)) >= 0x1p-60f) || off <= (((2*kMargin)<<16)|0xffffu); }
// double_norm_bf16 with bound 2^-39; returns -1 when open
static bool dnorm_ok; static double dnorm(float x, float w, double r1){ dnorm_ok = false;
  const double v = (double)w * ((double)x * r1);
  if (v == 0.0) return -2;  // exact zero: not checked here
  const double m = std::fabs(v);
  if (!(m >= 0x1p-100 && m < 0x1p100)) return -1;
  const float fv = (float)v; if ((u(fv) & 0x7fffff) == 0) return -1;
  const double off = std::fabs(v - (double)fv);
  int ex; std::frexp((double)fv, &ex);  // fv = m·2^ex, m in [0.5,1): ulp = 2^(ex-24), half = 2^(ex-25)
  const double half = std::ldexp(1.0, ex - 25);
  if (!(half - off > 0x1p-39 * m)) return -1;
  dnorm_ok = true; return bf16(fv);
}
int main(int argc, char** argv){
  const int rows = argc > 1 ? atoi(argv[1]) : 400000;
  const bool old_order = argc > 2 && std::strcmp(argv[2], "old") == 0;
  // "wide": x scales 2^-100 … 2^59 and weight scales 2^-60 … 2^59 (w·x near fp32 underflow and overflow)
  const bool wide = argc > 2 && std::strcmp(argv[2], "wide") == 0;
  std::uniform_int_distribution<int> wide_x(-100, 59), wide_w(-60, 55);
  std::mt19937_64 rng(12); std::normal_distribution<float> n(0,1); std::uniform_int_distribution<int> pick(0,63);
  long bad=0, fast=0, total=0, fb_bad=0, fb_dec=0, fb_tot=0; const int dim=512;
  std::vector<float> x(dim), w(dim);
  for (int row=0; row<rows; ++row){
    float scale = std::ldexp(1.0f, wide ? wide_x(rng) : (int)(pick(rng)) - 32);
    float wscale = std::ldexp(1.0f, wide ? wide_w(rng) : (int)(pick(rng)%40) - 20);
    for (int c=0;c<dim;++c){ float v=n(rng)*scale; int r=pick(rng); if(r==0) v=0; if(r==1) v*=1e-12f; x[c]=bf16(v); w[c]=n(rng)*wscale; }
    double S=0; for (int c=0;c<dim;++c) S += (double)x[c]*(double)x[c];
    double eps = (row%2)?1e-6:1e-20;
    double ms = S/dim + eps;
    double ms_gpu = ms * (1.0 + ((row%3)-1)*0x1p-44);
    float msf = (float)ms_gpu;
    if (!(msf >= 0x1p-120f && msf <= 0x1p120f)) continue;
    const int k = row % 5;
    const double e0 = k == 0 ? 0x1p-20 : k == 1 ? -0x1p-20 : k == 2 ? 0x1p-22 : k == 3 ? -0x1p-22 : (double)n(rng) * 0x1p-23;
    const float r0 = (float)((1.0/std::sqrt((double)msf)) * (1.0 + e0));
    const double r0d = r0;
    const double ee = std::fma(-ms_gpu, r0d * r0d, 1.0);
    const double r1 = std::fma(r0d * 0.5, ee, r0d);
    const float r = (float)r1;
    double root = std::sqrt(ms);
    for (int c=0;c<dim;++c){
      const float e = old_order ? w[c] * (x[c] * r) : (w[c] * x[c]) * r;
      ++total;
      float cpu = bf16((float)((double)w[c] * ((double)x[c]/root)));
      if (std::fabs(w[c]) >= 0x1p60f) continue;
      if (declined(e)) {
        ++fb_tot; const double d = dnorm(x[c], w[c], r1);
        if (dnorm_ok) { ++fb_dec; if ((float)d != cpu) { if (fb_bad < 10) printf("fallback bad x %g w %g\n", x[c], w[c]); ++fb_bad; } }
        continue;
      }
      ++fast;
      if (bf16(e) != cpu) { if (bad<10) printf("bad x %g w %g e %a cpu %a\n", x[c], w[c], e, cpu); ++bad; }
    }
  }
  printf("%s: total %ld fast %ld declined %.4f%% bad %ld | fallback decided %ld of %ld, bad %ld\n", old_order ? "RN(w·RN(x·r))" : wide ? "RN(RN(w·x)·r) wide" : "RN(RN(w·x)·r)", total, fast, 100.0*(total-fast)/total, bad, fb_dec, fb_tot, fb_bad);
}
