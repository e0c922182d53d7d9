// The three KV-cache records of spec/MODEL.md §2.2, quantized from and dequantized to fp32.
//
// A record holds one row of C channels, split into blocks of B consecutive channels with one scale each:
//   - window row   (SWA KV):        FP8 E4M3 data, B = 32, UE8M0 scale.  fp8_row_bytes(C)     = C + C/32
//   - global entry (compressed KV): NVFP4: E2M1 data, B = 16, E4M3 scale. nvfp4_entry_bytes(C) = C/2 + C/16
//   - index key:                    MXFP4: E2M1 data, B = 32, E8M0 scale. mxfp4_key_bytes(C)   = C/2 + C/32
// Layout: the packed data of all C channels first (E2M1: two codes per byte, LOW nibble = even channel),
// then the C/B scale bytes in block order. Official sizes: 528 (C=512), 288 (C=512), 68 (C=128).
//
// Scales and elements (amax = max |x| over the block; x/scale is a correctly rounded fp32 division):
//   FP8:   scale = 2^ceil(log2(max(amax, 1e-4)/448)), computed as max(amax,1e-4)·(1/448) in fp32 and
//          rounded up to a power of two by the exponent/mantissa bit test; q = e4m3(clamp(x/scale, ±448)).
//   NVFP4: scale = e4m3(max(amax, 6·2^-9) / 6), an fp32 division (NeMo, TensorRT-LLM; vLLM multiplies by
//          1/6, which differs for 15 fp32 amax values, see docs/formats.md); q = e2m1(clamp(x/scale, ±6)).
//   MXFP4: scale = 2^ceil(log2(max(amax, 6·2^-126)/6)), as FP8 with 1/6; q = e2m1(clamp(x/scale, ±6)).
//   Dequantized value = decode(q) · scale, exact in fp32.
// Poisoned blocks: when a block's scale decodes to NaN — the block holds a NaN or ±Inf (amax is computed
// NaN-propagating), or an NVFP4 amax/6 rounds past 448 — its scale byte is the format's NaN (E8M0 0xFF,
// E4M3 0x7F), all its data codes are 0, and every channel dequantizes to NaN. This is defined element by
// element (encode() returns 0 for a NaN scale) so kernels reproduce it without a branch per block.
//
// Contract: C is a positive multiple of the record's block (32, 16, 32): callers validate, these
// functions assume it. Buffers hold C floats / the record's bytes and must not overlap. Pure functions,
// usable from host C++20 and CUDA C++17 device code; no errors are reported.
#pragma once

#include <cstddef>
#include <cstdint>

#include <flashkv/numeric/fp32_ops.hpp>
#include <flashkv/numeric/host_device.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

namespace flashkv::numeric {

constexpr int kFp8RowBlock = 32;
constexpr int kNvfp4Block = 16;
constexpr int kMxfp4Block = 32;

FKV_HOST_DEVICE constexpr size_t fp8_row_bytes(int C) {
  return static_cast<size_t>(C) + static_cast<size_t>(C) / kFp8RowBlock;
}
FKV_HOST_DEVICE constexpr size_t nvfp4_entry_bytes(int C) {
  return static_cast<size_t>(C) / 2 + static_cast<size_t>(C) / kNvfp4Block;
}
FKV_HOST_DEVICE constexpr size_t mxfp4_key_bytes(int C) {
  return static_cast<size_t>(C) / 2 + static_cast<size_t>(C) / kMxfp4Block;
}

// ---- per-block scales (amax from block_amax / amax_update, NaN-propagating) ------------------------------

constexpr float kFp8AmaxFloor = 1e-4f;
constexpr float kNvfp4AmaxFloor = 6.0f * 0x1p-9f;    // the NVFP4 scale never goes below 2^-9
constexpr float kMxfp4AmaxFloor = 6.0f * 0x1p-126f;  // the MXFP4 scale never goes below 2^-126
// fp32(1/448) and fp32(1/6), correctly rounded at compile time (the reference multiplies by these).
constexpr float kInvE4m3Max = 1.0f / kE4m3Max;
constexpr float kInvE2m1Max = 1.0f / kE2m1Max;

// E8M0 code of the smallest power of two >= max(amax, floor)·inv_max, the product rounded to fp32.
// NaN or +Inf amax gives 0xFF.
FKV_HOST_DEVICE inline uint8_t pow2_scale_code(float amax, float floor, float inv_max) {
  return e8m0_ceil_pow2(mul_rn(amax_combine(amax, floor), inv_max));
}

FKV_HOST_DEVICE inline uint8_t fp8_block_scale_code(float amax) {
  return pow2_scale_code(amax, kFp8AmaxFloor, kInvE4m3Max);
}
FKV_HOST_DEVICE inline uint8_t mxfp4_block_scale_code(float amax) {
  return pow2_scale_code(amax, kMxfp4AmaxFloor, kInvE2m1Max);
}
// E4M3 code of e4m3_rne(max(amax, 6·2^-9) / 6); 0x7F (NaN) when amax is NaN/Inf or amax/6 rounds past 448.
FKV_HOST_DEVICE inline uint8_t nvfp4_block_scale_code(float amax) {
  return e4m3_from_float(div_rn(amax_combine(amax, kNvfp4AmaxFloor), kE2m1Max));
}
// The decoded NVFP4 scale (a float with at most 4 significant bits, or NaN).
FKV_HOST_DEVICE inline float nvfp4_block_scale(float amax) {
  return e4m3_to_float(nvfp4_block_scale_code(amax));
}

// ---- per-element coding, given the decoded block scale ---------------------------------------------------

// E4M3 code of clamp(x/scale, ±448); 0 when scale is NaN (poisoned block).
FKV_HOST_DEVICE inline uint8_t fp8_encode(float x, float scale) {
  if (is_nan(scale)) return 0;
  return e4m3_from_float(clamp_symmetric(div_rn(x, scale), kE4m3Max));
}
// E2M1 code (low nibble) of clamp(x/scale, ±6); 0 when scale is NaN (poisoned block).
FKV_HOST_DEVICE inline uint8_t fp4_encode(float x, float scale) {
  if (is_nan(scale)) return 0;
  return e2m1_from_float(clamp_symmetric(div_rn(x, scale), kE2m1Max));
}
// NVFP4 and MXFP4 elements differ only in how the scale was chosen.
FKV_HOST_DEVICE inline uint8_t nvfp4_encode(float x, float scale) {
  return fp4_encode(x, scale);
}
FKV_HOST_DEVICE inline uint8_t mxfp4_encode(float x, float scale) {
  return fp4_encode(x, scale);
}

FKV_HOST_DEVICE inline float fp8_decode(uint8_t code, float scale) {
  return mul_rn(e4m3_to_float(code), scale);
}
FKV_HOST_DEVICE inline float fp4_decode(uint8_t code, float scale) {
  return mul_rn(e2m1_to_float(code), scale);
}

// ---- whole records ----------------------------------------------------------------------------------------

FKV_HOST_DEVICE inline void quantize_fp8_row(const float* x, int C, uint8_t* out) {
  uint8_t* scales = out + C;
  for (int block = 0; block < C / kFp8RowBlock; ++block) {
    const float* xb = x + block * kFp8RowBlock;
    const uint8_t code = fp8_block_scale_code(block_amax(xb, kFp8RowBlock));
    const float scale = e8m0_to_float(code);
    for (int i = 0; i < kFp8RowBlock; ++i) out[block * kFp8RowBlock + i] = fp8_encode(xb[i], scale);
    scales[block] = code;
  }
}

FKV_HOST_DEVICE inline void dequantize_fp8_row(const uint8_t* in, int C, float* out) {
  const uint8_t* scales = in + C;
  for (int c = 0; c < C; ++c) out[c] = fp8_decode(in[c], e8m0_to_float(scales[c / kFp8RowBlock]));
}

namespace detail {

// One E2M1 block: `block` codes packed into block/2 bytes at `packed`, low nibble = even channel.
FKV_HOST_DEVICE inline void encode_fp4_block(const float* x, int block, float scale, uint8_t* packed) {
  for (int i = 0; i < block; i += 2) {
    const uint8_t lo = fp4_encode(x[i], scale);
    const uint8_t hi = fp4_encode(x[i + 1], scale);
    packed[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

FKV_HOST_DEVICE inline void decode_fp4_block(const uint8_t* packed, int block, float scale, float* out) {
  for (int i = 0; i < block; i += 2) {
    out[i] = fp4_decode(static_cast<uint8_t>(packed[i / 2] & 0xFu), scale);
    out[i + 1] = fp4_decode(static_cast<uint8_t>(packed[i / 2] >> 4), scale);
  }
}

}  // namespace detail

FKV_HOST_DEVICE inline void quantize_nvfp4_entry(const float* x, int C, uint8_t* out) {
  uint8_t* scales = out + C / 2;
  for (int block = 0; block < C / kNvfp4Block; ++block) {
    const float* xb = x + block * kNvfp4Block;
    const uint8_t code = nvfp4_block_scale_code(block_amax(xb, kNvfp4Block));
    detail::encode_fp4_block(xb, kNvfp4Block, e4m3_to_float(code), out + block * (kNvfp4Block / 2));
    scales[block] = code;
  }
}

FKV_HOST_DEVICE inline void dequantize_nvfp4_entry(const uint8_t* in, int C, float* out) {
  const uint8_t* scales = in + C / 2;
  for (int block = 0; block < C / kNvfp4Block; ++block) {
    detail::decode_fp4_block(in + block * (kNvfp4Block / 2), kNvfp4Block, e4m3_to_float(scales[block]),
                             out + block * kNvfp4Block);
  }
}

FKV_HOST_DEVICE inline void quantize_mxfp4_key(const float* x, int C, uint8_t* out) {
  uint8_t* scales = out + C / 2;
  for (int block = 0; block < C / kMxfp4Block; ++block) {
    const float* xb = x + block * kMxfp4Block;
    const uint8_t code = mxfp4_block_scale_code(block_amax(xb, kMxfp4Block));
    detail::encode_fp4_block(xb, kMxfp4Block, e8m0_to_float(code), out + block * (kMxfp4Block / 2));
    scales[block] = code;
  }
}

FKV_HOST_DEVICE inline void dequantize_mxfp4_key(const uint8_t* in, int C, float* out) {
  const uint8_t* scales = in + C / 2;
  for (int block = 0; block < C / kMxfp4Block; ++block) {
    detail::decode_fp4_block(in + block * (kMxfp4Block / 2), kMxfp4Block, e8m0_to_float(scales[block]),
                             out + block * kMxfp4Block);
  }
}

// ---- fake quantization (quantize then dequantize in place of a record; e.g. index queries) --------------

FKV_HOST_DEVICE inline void fakequant_fp8_row(const float* x, int C, float* out) {
  for (int block = 0; block < C / kFp8RowBlock; ++block) {
    const float* xb = x + block * kFp8RowBlock;
    const float scale = e8m0_to_float(fp8_block_scale_code(block_amax(xb, kFp8RowBlock)));
    for (int i = 0; i < kFp8RowBlock; ++i)
      out[block * kFp8RowBlock + i] = fp8_decode(fp8_encode(xb[i], scale), scale);
  }
}

FKV_HOST_DEVICE inline void fakequant_nvfp4(const float* x, int C, float* out) {
  for (int block = 0; block < C / kNvfp4Block; ++block) {
    const float* xb = x + block * kNvfp4Block;
    const float scale = nvfp4_block_scale(block_amax(xb, kNvfp4Block));
    for (int i = 0; i < kNvfp4Block; ++i)
      out[block * kNvfp4Block + i] = fp4_decode(fp4_encode(xb[i], scale), scale);
  }
}

FKV_HOST_DEVICE inline void fakequant_mxfp4(const float* x, int C, float* out) {
  for (int block = 0; block < C / kMxfp4Block; ++block) {
    const float* xb = x + block * kMxfp4Block;
    const float scale = e8m0_to_float(mxfp4_block_scale_code(block_amax(xb, kMxfp4Block)));
    for (int i = 0; i < kMxfp4Block; ++i)
      out[block * kMxfp4Block + i] = fp4_decode(fp4_encode(xb[i], scale), scale);
  }
}

}  // namespace flashkv::numeric
