// GEMM: y = x·wᵀ with fp32 weights dequantized at load; double accumulation, one rounding per output.
#include <algorithm>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm_kernel.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {
namespace {

constexpr int64_t kRowTile = 16;  // rows sharing one pass over a weight tile
constexpr int64_t kColTile = 32;  // weight rows kept hot in L1/L2 by a tile

int64_t tiles(int64_t n, int64_t tile) {
  return (n + tile - 1) / tile;
}

}  // namespace

void gemm_tile(ConstMatrix x, ConstMatrix w, Matrix y, bool bf16, int64_t row_begin, int64_t row_end,
               int64_t col_begin, int64_t col_end) {
  const int64_t k = x.cols;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x.row(r);
    float* yr = y.row(r);
    for (int64_t c = col_begin; c < col_end; ++c) yr[c] = store(dot(xr, w.row(c), k), bf16);
  }
}

void CpuBackend::gemm(ConstMatrix x, ConstMatrix w, Matrix y, OutputCast cast, Rounding rounding) const {
  const bool bf16 = faithful(rounding) && cast == OutputCast::kBf16;
  const int64_t row_tiles = tiles(x.rows, kRowTile);
  const int64_t col_tiles = tiles(w.rows, kColTile);
  const double work = static_cast<double>(x.rows) * static_cast<double>(w.rows) * static_cast<double>(x.cols);
  parallel_for(row_tiles * col_tiles, work, [&](int64_t tile) {
    const int64_t rt = tile / col_tiles;
    const int64_t ct = tile % col_tiles;
    gemm_tile(x, w, y, bf16, rt * kRowTile, std::min(x.rows, (rt + 1) * kRowTile), ct * kColTile,
              std::min(w.rows, (ct + 1) * kColTile));
  });
}

}  // namespace flashkv::backend::cpu
