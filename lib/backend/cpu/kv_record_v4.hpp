// The V4-Flash KV record (RecordFormat::kFp8Bf16Rope, backend.hpp): window rows and compressed entries of a
// deepseek_v4 model in faithful mode. The non-RoPE channels are FP8 E4M3 with one power-of-two (UE8M0) scale
// per 64 channels, chosen as for the V4.1 window row (§2.2.1: 2^ceil(log2(max(amax, 1e-4)/448))); the
// trailing rope_dim RoPE channels are kept as BF16, because V4 quantizes only the non-RoPE part. Layout: FP8
// codes, scales, zeros up to an 8-byte boundary, BF16 RoPE channels (448 + 7 + 1 + 128 = 584 B for the
// official 512-channel head with 64 RoPE channels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

namespace flashkv::backend::cpu {

constexpr int kV4ScaleBlock = 64;

inline int v4_scale_blocks(int nope) {
  return (nope + kV4ScaleBlock - 1) / kV4ScaleBlock;
}

inline size_t v4_rope_offset(int nope) {
  const size_t packed = static_cast<size_t>(nope) + static_cast<size_t>(v4_scale_blocks(nope));
  return (packed + 7) / 8 * 8;
}

inline size_t v4_record_bytes(int channels, int rope) {
  return v4_rope_offset(channels - rope) + static_cast<size_t>(rope) * 2;
}

inline void quantize_v4_record(const float* x, int channels, int rope, uint8_t* out) {
  const int nope = channels - rope;
  std::memset(out, 0, v4_record_bytes(channels, rope));
  uint8_t* scales = out + nope;
  for (int block = 0; block < v4_scale_blocks(nope); ++block) {
    const int first = block * kV4ScaleBlock;
    const int width = nope - first < kV4ScaleBlock ? nope - first : kV4ScaleBlock;
    const uint8_t code = numeric::fp8_block_scale_code(numeric::block_amax(x + first, width));
    const float scale = numeric::e8m0_to_float(code);
    for (int i = 0; i < width; ++i) out[first + i] = numeric::fp8_encode(x[first + i], scale);
    scales[block] = code;
  }
  uint8_t* tail = out + v4_rope_offset(nope);
  for (int i = 0; i < rope; ++i) {
    const uint16_t bits = numeric::bf16_from_float(x[nope + i]);
    std::memcpy(tail + 2 * i, &bits, 2);
  }
}

inline void dequantize_v4_record(const uint8_t* in, int channels, int rope, float* out) {
  const int nope = channels - rope;
  const uint8_t* scales = in + nope;
  for (int c = 0; c < nope; ++c)
    out[c] = numeric::fp8_decode(in[c], numeric::e8m0_to_float(scales[c / kV4ScaleBlock]));
  const uint8_t* tail = in + v4_rope_offset(nope);
  for (int i = 0; i < rope; ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, tail + 2 * i, 2);
    out[nope + i] = numeric::bf16_to_float(bits);
  }
}

}  // namespace flashkv::backend::cpu
