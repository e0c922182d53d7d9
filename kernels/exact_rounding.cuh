// Certified fp32 rounding of a double computed on the GPU with transcendental functions (cos, sin, exp).
//
// Why: the CPU backend evaluates RoPE and compressor pooling in double with glibc's cos/sin/exp, then rounds
// to fp32 (and BF16). CUDA's libdevice versions are not bit-identical to glibc (both are within 1-2 ulp of
// the exact value), so a GPU double can round to a different fp32 when it lies within a few double ulps of an
// fp32 rounding midpoint (about 2^-25 of values). A kernel therefore computes, next to each double `value`, a
// bound on |value − the CPU's double| and asks float_rounding_is_certain(value, bound): when the whole
// interval [value − bound, value + bound] rounds to one fp32 (rounding is monotone, so checking its two ends
// suffices; the ends are rounded outwards), the CPU's double rounds to that same fp32 and everything derived
// from it by correctly rounded operations (BF16 rounding, products) is bit-identical. Otherwise the kernel
// flags its row and the host recomputes that row with the CPU backend.
#pragma once

namespace flashkv::cuda {

__device__ inline bool float_rounding_is_certain(double value, double bound) {
  if (!isfinite(value) || !isfinite(bound)) return false;  // NaN/Inf: the host's own code decides
  // bits, not values: an interval around 0 rounds to −0 at one end and +0 at the other
  return __float_as_uint(__double2float_rn(__dsub_rd(value, bound))) ==
         __float_as_uint(__double2float_rn(__dadd_ru(value, bound)));
}

// Relative slack of a libdevice vs glibc double result: each is within 2 ulp (2^-51 relative) of the exact
// value; 2^-48 leaves a factor 4 of margin.
constexpr double kTranscendentalSlack = 0x1p-48;

}  // namespace flashkv::cuda
