// Checkpoint weight formats of spec/MODEL.md §2.1, dequantized to (and quantized from) fp32 row-major.
//
//   - FP8 block32 (dense projections `attn.wq_a` …, shared experts, `engram.wkv`): E4M3 codes [rows, cols]
//     and one E8M0 scale per 32x32 tile, scales [ceil(rows/32), ceil(cols/32)] row-major; rows and cols
//     need not be multiples of 32 (the last tile row/column is partial).
//   - MXFP4 (routed experts): E2M1 codes packed [rows, cols/2], LOW nibble = even column, and one E8M0
//     scale per 32 columns of a row, scales [rows, cols/32]. cols must be a multiple of 32.
//   - FP8 rows32 (Engram tables, official row = 256 codes + 8 scales): E4M3 codes [rows, cols] and one
//     E8M0 scale per 32 columns of a row, scales [rows, ceil(cols/32)].
// Value = decode(code) · 2^(scale-127), exact in fp32 (it can overflow to ±Inf only for scale codes the
// quantizers below never produce); a 0xFF scale makes its block NaN.
//
// Quantizers (the tiny-checkpoint tool uses the numpy twins in tests/reference/formats.py; these are the
// same rule in C++): scale = the smallest power of two that maps the block's amax into range,
// 2^ceil(log2(max(amax, M·2^-126)/M)) with M = 448 (FP8) or 6 (E2M1), the quotient taken as an fp32
// product with 1/M and rounded up by the bit test, as for the KV scales; q = encode(clamp(w/scale, ±M)).
// A block holding NaN/Inf gets scale 0xFF and all-zero codes (see kv_records.hpp, poisoned blocks).
//
// Contract: rows, cols >= 0 and within the stated multiples (callers validate); buffers sized as above and
// not overlapping. Pure functions, usable from host C++20 and CUDA C++17 device code; no errors reported.
#pragma once

#include <cstddef>
#include <cstdint>

#include <flashkv/numeric/fp32_ops.hpp>
#include <flashkv/numeric/host_device.hpp>
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

namespace flashkv::numeric {

constexpr int kWeightBlock = 32;
constexpr float kFp8WeightAmaxFloor = 448.0f * 0x1p-126f;  // the FP8 weight scale never goes below 2^-126

// Number of 32-wide scale blocks covering n rows or columns.
FKV_HOST_DEVICE constexpr int weight_blocks(int n) {
  return (n + kWeightBlock - 1) / kWeightBlock;
}

FKV_HOST_DEVICE inline uint8_t fp8_weight_scale_code(float amax) {
  return pow2_scale_code(amax, kFp8WeightAmaxFloor, kInvE4m3Max);
}
// Same rule and floor as the MXFP4 index-key scale.
FKV_HOST_DEVICE inline uint8_t mxfp4_weight_scale_code(float amax) {
  return mxfp4_block_scale_code(amax);
}

// ---- FP8 E4M3, one E8M0 scale per tile x tile block (V4 ships 128x128) -----------------------------------

// Scales [ceil(rows/tile), ceil(cols/tile)] row-major; tile > 0.
FKV_HOST_DEVICE inline void dequantize_fp8_tiles(const uint8_t* q, const uint8_t* scales, int rows, int cols,
                                                 int tile, float* out) {
  const int scale_cols = (cols + tile - 1) / tile;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* scale_row = scales + static_cast<size_t>(r / tile) * static_cast<size_t>(scale_cols);
    const size_t base = static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int c = 0; c < cols; ++c)
      out[base + c] = fp8_decode(q[base + c], e8m0_to_float(scale_row[c / tile]));
  }
}

// ---- FP8 E4M3, one E8M0 scale per 32x32 tile ----------------------------------------------------------

FKV_HOST_DEVICE inline void dequantize_fp8_block32(const uint8_t* q, const uint8_t* scales, int rows,
                                                   int cols, float* out) {
  const int scale_cols = weight_blocks(cols);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* scale_row =
        scales + static_cast<size_t>(r / kWeightBlock) * static_cast<size_t>(scale_cols);
    const size_t base = static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int c = 0; c < cols; ++c)
      out[base + c] = fp8_decode(q[base + c], e8m0_to_float(scale_row[c / kWeightBlock]));
  }
}

FKV_HOST_DEVICE inline void quantize_fp8_block32(const float* w, int rows, int cols, uint8_t* q,
                                                 uint8_t* scales) {
  const int scale_cols = weight_blocks(cols);
  for (int tile_r = 0; tile_r < weight_blocks(rows); ++tile_r) {
    const int r0 = tile_r * kWeightBlock;
    const int r1 = r0 + kWeightBlock < rows ? r0 + kWeightBlock : rows;
    for (int tile_c = 0; tile_c < scale_cols; ++tile_c) {
      const int c0 = tile_c * kWeightBlock;
      const int c1 = c0 + kWeightBlock < cols ? c0 + kWeightBlock : cols;
      float amax = 0.0f;
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c)
          amax = amax_update(amax, w[static_cast<size_t>(r) * static_cast<size_t>(cols) + c]);
      }
      const uint8_t code = fp8_weight_scale_code(amax);
      const float scale = e8m0_to_float(code);
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          const size_t i = static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c);
          q[i] = fp8_encode(w[i], scale);
        }
      }
      scales[static_cast<size_t>(tile_r) * static_cast<size_t>(scale_cols) + static_cast<size_t>(tile_c)] =
          code;
    }
  }
}

// ---- FP8 E4M3, one E8M0 scale per 32 columns of a row (Engram tables) -----------------------------------

FKV_HOST_DEVICE inline void dequantize_fp8_rows32(const uint8_t* q, const uint8_t* scales, int rows, int cols,
                                                  float* out) {
  const int scale_cols = weight_blocks(cols);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* scale_row = scales + static_cast<size_t>(r) * static_cast<size_t>(scale_cols);
    const size_t base = static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int c = 0; c < cols; ++c)
      out[base + c] = fp8_decode(q[base + c], e8m0_to_float(scale_row[c / kWeightBlock]));
  }
}

FKV_HOST_DEVICE inline void quantize_fp8_rows32(const float* w, int rows, int cols, uint8_t* q,
                                                uint8_t* scales) {
  const int scale_cols = weight_blocks(cols);
  for (int r = 0; r < rows; ++r) {
    const size_t base = static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int block = 0; block < scale_cols; ++block) {
      const int c0 = block * kWeightBlock;
      const int width = c0 + kWeightBlock < cols ? kWeightBlock : cols - c0;
      const uint8_t code = fp8_weight_scale_code(block_amax(w + base + c0, width));
      const float scale = e8m0_to_float(code);
      for (int c = c0; c < c0 + width; ++c) q[base + c] = fp8_encode(w[base + c], scale);
      scales[static_cast<size_t>(r) * static_cast<size_t>(scale_cols) + static_cast<size_t>(block)] = code;
    }
  }
}

// ---- MXFP4: E2M1 pairs [rows, cols/2] + one E8M0 scale per 32 columns [rows, cols/32] ---------------------

FKV_HOST_DEVICE inline void dequantize_mxfp4_weight(const uint8_t* packed, const uint8_t* scales, int rows,
                                                    int cols, float* out) {
  const int scale_cols = cols / kWeightBlock;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* packed_row = packed + static_cast<size_t>(r) * static_cast<size_t>(cols / 2);
    const uint8_t* scale_row = scales + static_cast<size_t>(r) * static_cast<size_t>(scale_cols);
    for (int block = 0; block < scale_cols; ++block) {
      detail::decode_fp4_block(
          packed_row + block * (kWeightBlock / 2), kWeightBlock, e8m0_to_float(scale_row[block]),
          out + static_cast<size_t>(r) * static_cast<size_t>(cols) + block * kWeightBlock);
    }
  }
}

FKV_HOST_DEVICE inline void quantize_mxfp4_weight(const float* w, int rows, int cols, uint8_t* packed,
                                                  uint8_t* scales) {
  const int scale_cols = cols / kWeightBlock;
  for (int r = 0; r < rows; ++r) {
    const float* w_row = w + static_cast<size_t>(r) * static_cast<size_t>(cols);
    uint8_t* packed_row = packed + static_cast<size_t>(r) * static_cast<size_t>(cols / 2);
    for (int block = 0; block < scale_cols; ++block) {
      const float* wb = w_row + block * kWeightBlock;
      const uint8_t code = mxfp4_weight_scale_code(block_amax(wb, kWeightBlock));
      detail::encode_fp4_block(wb, kWeightBlock, e8m0_to_float(code),
                               packed_row + block * (kWeightBlock / 2));
      scales[static_cast<size_t>(r) * static_cast<size_t>(scale_cols) + static_cast<size_t>(block)] = code;
    }
  }
}

}  // namespace flashkv::numeric
