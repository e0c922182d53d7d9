// Engram conditional memory (spec §7): gather of the hashed table rows, and the per-stream gate that adds the
// memory value to the streams. The hashing itself is host-side integer work (lib/runtime/engram_hash.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {
namespace {

constexpr double kGateFloor = 1e-6;  // |dot| floor under the signed square root (§7)

}  // namespace

void CpuBackend::engram_gather(std::span<const int64_t> rows, int64_t cols, ConstMatrix table,
                               Matrix out) const {
  const int64_t head_dim = table.cols;
  for (int64_t r = 0; r < out.rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float* source = table.row(rows[static_cast<size_t>(r * cols + c)]);
      std::memcpy(out.row(r) + c * head_dim, source, static_cast<size_t>(head_dim) * sizeof(float));
    }
  }
}

void CpuBackend::engram_gate(Matrix streams, ConstMatrix kv, std::span<const float> omega, int64_t hc,
                             double eps, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t d = streams.cols / hc;
  const double root_d = std::sqrt(static_cast<double>(d));
  parallel_for(streams.rows, static_cast<double>(streams.rows * streams.cols) * 3, [&](int64_t r) {
    const float* value = kv.row(r) + hc * d;
    for (int64_t i = 0; i < hc; ++i) {
      float* x = streams.row(r) + i * d;
      const float* key = kv.row(r) + i * d;
      const float* w = omega.data() + i * d;
      const double rstd = 1.0 / std::sqrt(sum_of_squares(x, d) / static_cast<double>(d) + eps) /
                          std::sqrt(sum_of_squares(key, d) / static_cast<double>(d) + eps);
      double weighted = 0;
      for (int64_t c = 0; c < d; ++c) {
        weighted += static_cast<double>(x[c]) * static_cast<double>(w[c]) * static_cast<double>(key[c]);
      }
      const double dot_value = fp32_if(weighted * rstd / root_d, exact);
      // copysign: a dot of exactly 0 takes the + branch, as the ports' kernels (and the reference) do
      const double signed_root =
          std::copysign(std::sqrt(std::max(std::fabs(dot_value), kGateFloor)), dot_value);
      const double gate = fp32_if(sigmoid(signed_root), exact);
      for (int64_t c = 0; c < d; ++c)
        x[c] = store(static_cast<double>(x[c]) + gate * static_cast<double>(value[c]), exact);
    }
  });
}

}  // namespace flashkv::backend::cpu
