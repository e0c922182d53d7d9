// Output projection (spec §5.8): the attention output carries rotated channels (V = K), so each head is
// rotated back by −s·f (rope.cpp, inverse), then group g of heads is projected by its own block of wo_a
// (grouped_projection; the caller applies wo_b).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm_kernel.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::output_projection(ConstMatrix o, int64_t heads, std::span<const int64_t> positions,
                                   const RopeTable& table, ConstMatrix wo_a, int64_t groups, Matrix a,
                                   Rounding rounding) const {
  std::vector<float> rotated(o.data, o.data + o.rows * o.cols);
  const Matrix unrotated{rotated.data(), o.rows, o.cols};
  rope(unrotated, heads, positions, table, /*inverse=*/true, rounding);
  grouped_projection(unrotated, wo_a, groups, a, rounding);
}

void CpuBackend::grouped_projection(ConstMatrix x, ConstMatrix wo_a, int64_t groups, Matrix a,
                                    Rounding rounding) const {
  const bool bf16 = faithful(rounding);
  const int64_t group_width = x.cols / groups;
  const int64_t rank = wo_a.rows / groups;
  const double work = static_cast<double>(x.rows * wo_a.rows * group_width);
  parallel_for(groups, work, [&](int64_t g) {
    // the group's heads as a contiguous [n, group_width] block, then one GEMM with its rows of wo_a
    std::vector<float> block(static_cast<size_t>(x.rows * group_width));
    for (int64_t r = 0; r < x.rows; ++r) {
      std::copy_n(x.row(r) + g * group_width, group_width, block.data() + r * group_width);
    }
    std::vector<float> projected(static_cast<size_t>(x.rows * rank));
    gemm_serial(ConstMatrix{block.data(), x.rows, group_width},
                ConstMatrix{wo_a.row(g * rank), rank, group_width}, Matrix{projected.data(), x.rows, rank},
                bf16);
    for (int64_t r = 0; r < x.rows; ++r) std::copy_n(projected.data() + r * rank, rank, a.row(r) + g * rank);
  });
}

}  // namespace flashkv::backend::cpu
