// Serial GEMM kernel shared by the CPU operations that run a small product inside one task (experts, Engram).
#pragma once

#include "backend/backend.hpp"

namespace flashkv::backend::cpu {

// y[r, c] = store(x[r]·w[c], bf16) for rows [row_begin, row_end) and columns [col_begin, col_end).
void gemm_tile(ConstMatrix x, ConstMatrix w, Matrix y, bool bf16, int64_t row_begin, int64_t row_end,
               int64_t col_begin, int64_t col_end);

// y[r·w.rows + c] = x[r]·w[c] unrounded (double), every row and column.
void gemm_double(ConstMatrix x, ConstMatrix w, double* y);

inline void gemm_serial(ConstMatrix x, ConstMatrix w, Matrix y, bool bf16) {
  gemm_tile(x, w, y, bf16, 0, x.rows, 0, w.rows);
}

}  // namespace flashkv::backend::cpu
