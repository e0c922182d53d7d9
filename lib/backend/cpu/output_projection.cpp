// Output projection (spec §5.8): the attention output carries rotated channels (V = K), so each head is
// rotated back by −s·f, then group g of heads is projected by its own block of wo_a (the caller applies
// wo_b).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::output_projection(ConstMatrix o, int64_t heads, std::span<const int64_t> positions,
                                   const RopeTable& table, ConstMatrix wo_a, int64_t groups, Matrix a,
                                   Rounding rounding) const {
  const bool bf16 = faithful(rounding);
  std::vector<float> rotated(o.data, o.data + o.rows * o.cols);
  const Matrix unrotated{rotated.data(), o.rows, o.cols};
  rope(unrotated, heads, positions, table, /*inverse=*/true, rounding);
  const int64_t group_width = o.cols / groups;
  const int64_t rank = wo_a.rows / groups;
  const double work = static_cast<double>(o.rows * wo_a.rows * group_width);
  parallel_for(o.rows, work, [&](int64_t r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* input = unrotated.row(r) + g * group_width;
      for (int64_t i = 0; i < rank; ++i)
        a.row(r)[g * rank + i] = store(dot(input, wo_a.row(g * rank + i), group_width), bf16);
    }
  });
}

}  // namespace flashkv::backend::cpu
