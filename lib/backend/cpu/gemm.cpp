// GEMM: y = x·wᵀ with fp32 weights dequantized at load; double accumulation, one rounding per output.
//
// Every output is the dot product of numerics.hpp's dot(): eight partial sums over k ≡ lane (mod 8), combined
// in a fixed order, plus a scalar tail. The register-blocked kernel below keeps exactly those eight lanes in
// one 8-wide double vector per output, so it gives the same bits as dot() on every instruction set. It is
// compiled for AVX-512, AVX2 and the baseline (GCC target_clones, chosen at load time); a fused multiply-add
// rounds like a multiply then an add here because the product of two fp32 values is exact in double.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm_kernel.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {
namespace {

constexpr int64_t kRowTile = 16;  // rows sharing one pass over a weight tile
constexpr int64_t kColTile = 32;  // weight rows kept hot in L1/L2 by a tile
constexpr int64_t kLanes = 8;

typedef double Lanes __attribute__((vector_size(kLanes * sizeof(double))));
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));

int64_t tiles(int64_t n, int64_t tile) {
  return (n + tile - 1) / tile;
}

// An R×C block of outputs: rows x[r0 …], weight rows w[c0 …]; emit(row, col, sum) stores each.
template <int R, int C, typename Emit>
__attribute__((always_inline)) inline void micro_tile(ConstMatrix x, ConstMatrix w, const Emit& emit,
                                                      int64_t r0, int64_t c0) {
  const int64_t k = x.cols;
  const int64_t body = k - k % kLanes;
  Lanes acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = Lanes{0, 0, 0, 0, 0, 0, 0, 0};
  }
  for (int64_t i = 0; i < body; i += kLanes) {
    Lanes xs[R];
    for (int r = 0; r < R; ++r) {
      Floats f;
      std::memcpy(&f, x.row(r0 + r) + i, sizeof f);
      xs[r] = __builtin_convertvector(f, Lanes);
    }
    for (int c = 0; c < C; ++c) {
      Floats f;
      std::memcpy(&f, w.row(c0 + c) + i, sizeof f);
      const Lanes ws = __builtin_convertvector(f, Lanes);
      for (int r = 0; r < R; ++r) acc[r][c] += xs[r] * ws;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      const float* a = x.row(r0 + r);
      const float* b = w.row(c0 + c);
      double tail = 0;
      for (int64_t i = body; i < k; ++i) tail += static_cast<double>(a[i]) * static_cast<double>(b[i]);
      const Lanes& p = acc[r][c];
      const double sum = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7])) + tail;
      emit(r0 + r, c0 + c, sum);
    }
  }
}

template <int R, typename Emit>
__attribute__((always_inline)) inline void row_block(ConstMatrix x, ConstMatrix w, const Emit& emit,
                                                     int64_t r0, int64_t col_begin, int64_t col_end) {
  int64_t c = col_begin;
  for (; c + 4 <= col_end; c += 4) micro_tile<R, 4>(x, w, emit, r0, c);
  for (; c < col_end; ++c) micro_tile<R, 1>(x, w, emit, r0, c);
}

template <typename Emit>
__attribute__((always_inline)) inline void tile(ConstMatrix x, ConstMatrix w, const Emit& emit,
                                                int64_t row_begin, int64_t row_end, int64_t col_begin,
                                                int64_t col_end) {
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) row_block<4>(x, w, emit, r, col_begin, col_end);
  switch (row_end - r) {
    case 3:
      return row_block<3>(x, w, emit, r, col_begin, col_end);
    case 2:
      return row_block<2>(x, w, emit, r, col_begin, col_end);
    case 1:
      return row_block<1>(x, w, emit, r, col_begin, col_end);
    default:
      return;
  }
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void gemm_tile(
    ConstMatrix x, ConstMatrix w, Matrix y, bool bf16, int64_t row_begin, int64_t row_end, int64_t col_begin,
    int64_t col_end) {
  tile(
      x, w, [&](int64_t r, int64_t c, double sum) { y.row(r)[c] = store(sum, bf16); }, row_begin, row_end,
      col_begin, col_end);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void gemm_double(ConstMatrix x, ConstMatrix w,
                                                                              double* y) {
  tile(
      x, w, [&](int64_t r, int64_t c, double sum) { y[r * w.rows + c] = sum; }, 0, x.rows, 0, w.rows);
}

void CpuBackend::gemm(ConstMatrix x, ConstMatrix w, Matrix y, OutputCast cast, Rounding rounding) const {
  const bool bf16 = faithful(rounding) && cast == OutputCast::kBf16;
  const int64_t row_tiles = tiles(x.rows, kRowTile);
  const int64_t col_tiles = tiles(w.rows, kColTile);
  const double work = static_cast<double>(x.rows) * static_cast<double>(w.rows) * static_cast<double>(x.cols);
  parallel_for(row_tiles * col_tiles, work, [&](int64_t tile) {
    const int64_t rt = tile % row_tiles;  // neighbouring tasks share a weight tile
    const int64_t ct = tile / row_tiles;
    gemm_tile(x, w, y, bf16, rt * kRowTile, std::min(x.rows, (rt + 1) * kRowTile), ct * kColTile,
              std::min(w.rows, (ct + 1) * kColTile));
  });
}

}  // namespace flashkv::backend::cpu
