// RoPE with frequency-only YaRN (spec §2.3, §5.8): interleaved pairs of the last rope_dim channels of each
// head.
//
// Faithful mode follows the reference's fp32 tables: frequencies built in fp32, angles s·f_i as fp32
// products, cos/sin of that fp32 angle rounded to fp32 (computed in double, so they do not depend on a vector
// math library), the rotated pair rounded to fp32, then BF16. Clean mode uses double angles.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend {
namespace {

struct YarnRamp {
  int64_t low = 0;
  int64_t high = 0;
};

// low = max(floor(d·ln(L0/(β_f·2π))/(2 ln θ)), 0), high = min(ceil(d·ln(L0/(β_s·2π))/(2 ln θ)), d−1).
YarnRamp yarn_ramp(int64_t rope_dim, double theta, const RopeScaling& yarn) {
  const double length = static_cast<double>(yarn.original_max_position_embeddings);
  const auto bound = [&](double beta) {
    return static_cast<double>(rope_dim) * std::log(length / (beta * 2 * std::numbers::pi)) /
           (2 * std::log(theta));
  };
  return {std::max<int64_t>(static_cast<int64_t>(std::floor(bound(yarn.beta_fast))), 0),
          std::min<int64_t>(static_cast<int64_t>(std::ceil(bound(yarn.beta_slow))), rope_dim - 1)};
}

std::vector<double> fp32_frequencies(int64_t rope_dim, double theta, const RopeScaling* yarn) {
  const int64_t pairs = rope_dim / 2;
  std::vector<double> out(static_cast<size_t>(pairs));
  const float dim = static_cast<float>(rope_dim);
  const float base = static_cast<float>(theta);
  std::optional<YarnRamp> ramp_bounds;
  if (yarn != nullptr) ramp_bounds = yarn_ramp(rope_dim, theta, *yarn);
  for (int64_t i = 0; i < pairs; ++i) {
    const float exponent = static_cast<float>(2 * i) / dim;
    // fp32 power correctly rounded from double, independent of the libm's powf.
    float f = 1.0f / static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    if (ramp_bounds) {
      const float span = static_cast<float>(
          std::max<double>(static_cast<double>(ramp_bounds->high - ramp_bounds->low), 1e-3));
      const float ramp =
          std::clamp((static_cast<float>(i) - static_cast<float>(ramp_bounds->low)) / span, 0.0f, 1.0f);
      const float factor = static_cast<float>(yarn->factor);
      const float scaled = f / factor * ramp;
      const float kept = f * (1.0f - ramp);
      f = scaled + kept;
    }
    out[static_cast<size_t>(i)] = f;
  }
  return out;
}

std::vector<double> double_frequencies(int64_t rope_dim, double theta, const RopeScaling* yarn) {
  const int64_t pairs = rope_dim / 2;
  std::vector<double> out(static_cast<size_t>(pairs));
  std::optional<YarnRamp> ramp_bounds;
  if (yarn != nullptr) ramp_bounds = yarn_ramp(rope_dim, theta, *yarn);
  for (int64_t i = 0; i < pairs; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rope_dim));
    if (ramp_bounds) {
      const double span = std::max<double>(static_cast<double>(ramp_bounds->high - ramp_bounds->low), 1e-3);
      const double ramp =
          std::clamp((static_cast<double>(i) - static_cast<double>(ramp_bounds->low)) / span, 0.0, 1.0);
      f = f / yarn->factor * ramp + f * (1.0 - ramp);
    }
    out[static_cast<size_t>(i)] = f;
  }
  return out;
}

}  // namespace

RopeTable make_rope_table(int64_t rope_dim, double theta, const RopeScaling* yarn, Rounding rounding) {
  RopeTable table;
  table.rope_dim = rope_dim;
  table.rounding = rounding;
  table.freqs = rounding == Rounding::kFaithful ? fp32_frequencies(rope_dim, theta, yarn)
                                                : double_frequencies(rope_dim, theta, yarn);
  return table;
}

namespace cpu {
namespace {

// cos and sin of position·f_i for every pair.
void angles_of(const RopeTable& table, int64_t position, std::vector<double>& cosines,
               std::vector<double>& sines) {
  const size_t pairs = table.freqs.size();
  cosines.resize(pairs);
  sines.resize(pairs);
  for (size_t i = 0; i < pairs; ++i) {
    if (table.rounding == Rounding::kFaithful) {
      const float angle = static_cast<float>(position) * static_cast<float>(table.freqs[i]);
      cosines[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sines[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    } else {
      const double angle = static_cast<double>(position) * table.freqs[i];
      cosines[i] = std::cos(angle);
      sines[i] = std::sin(angle);
    }
  }
}

}  // namespace

void CpuBackend::rope(Matrix x, int64_t heads, std::span<const int64_t> positions, const RopeTable& table,
                      bool inverse, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t head_dim = x.cols / heads;
  const int64_t first = head_dim - table.rope_dim;
  const int64_t pairs = table.rope_dim / 2;
  parallel_for(x.rows, static_cast<double>(x.rows * x.cols) * 2, [&](int64_t r) {
    std::vector<double> cosines, sines;
    angles_of(table, positions[r], cosines, sines);
    float* row = x.row(r);
    for (int64_t h = 0; h < heads; ++h) {
      float* head = row + h * head_dim;
      for (int64_t i = 0; i < pairs; ++i) {
        const double c = cosines[static_cast<size_t>(i)];
        const double s = inverse ? -sines[static_cast<size_t>(i)] : sines[static_cast<size_t>(i)];
        const double re = head[first + 2 * i];
        const double im = head[first + 2 * i + 1];
        // the complex product is rounded to fp32 (the reference's complex64 multiply), then the cast point
        head[first + 2 * i] = static_cast<float>(re * c - im * s);
        head[first + 2 * i + 1] = static_cast<float>(re * s + im * c);
      }
      if (exact) {
        for (int64_t c = 0; c < head_dim; ++c) head[c] = round_bf16(head[c]);
      }
    }
  });
}

}  // namespace cpu
}  // namespace flashkv::backend
