// The V4-Flash KV record (RecordFormat::kFp8Bf16Rope, backend.hpp): window rows and compressed entries of a
// deepseek_v4 model in faithful mode. The non-RoPE channels are FP8 E4M3 with one power-of-two (UE8M0) scale
// per 64 channels, chosen as for the V4.1 window row (§2.2.1: 2^ceil(log2(max(amax, 1e-4)/448))); the
// trailing rope_dim RoPE channels are kept as BF16, because V4 quantizes only the non-RoPE part. Layout: FP8
// codes, scales, zeros up to an 8-byte boundary, BF16 RoPE channels (448 + 7 + 1 + 128 = 584 B for the
// official 512-channel head with 64 RoPE channels).
// The functions are FKV_HOST_DEVICE: the CUDA backend's record kernels (kernels/kv_record_v4.cu) call the
// same per-block and per-channel code, so GPU records are byte-identical to these by construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <flashkv/numeric/host_device.hpp>
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

namespace flashkv::backend::cpu {

constexpr int kV4ScaleBlock = 64;

FKV_HOST_DEVICE inline int v4_scale_blocks(int nope) {
  return (nope + kV4ScaleBlock - 1) / kV4ScaleBlock;
}

FKV_HOST_DEVICE inline size_t v4_rope_offset(int nope) {
  const size_t packed = static_cast<size_t>(nope) + static_cast<size_t>(v4_scale_blocks(nope));
  return (packed + 7) / 8 * 8;
}

FKV_HOST_DEVICE inline size_t v4_record_bytes(int channels, int rope) {
  return v4_rope_offset(channels - rope) + static_cast<size_t>(rope) * 2;
}

// Scale block `block` of the nope = channels − rope FP8 channels: its codes and its scale byte.
FKV_HOST_DEVICE inline void quantize_v4_block(const float* x, int nope, int block, uint8_t* out) {
  const int first = block * kV4ScaleBlock;
  const int width = nope - first < kV4ScaleBlock ? nope - first : kV4ScaleBlock;
  const uint8_t code = numeric::fp8_block_scale_code(numeric::block_amax(x + first, width));
  const float scale = numeric::e8m0_to_float(code);
  for (int i = 0; i < width; ++i) out[first + i] = numeric::fp8_encode(x[first + i], scale);
  out[nope + block] = code;
}

// RoPE channel i (of rope) as BF16 in the record's tail.
FKV_HOST_DEVICE inline void store_v4_rope_channel(const float* x, int nope, int i, uint8_t* out) {
  const uint16_t bits = numeric::bf16_from_float(x[nope + i]);
  memcpy(out + v4_rope_offset(nope) + 2 * static_cast<size_t>(i), &bits, 2);
}

inline void quantize_v4_record(const float* x, int channels, int rope, uint8_t* out) {
  const int nope = channels - rope;
  std::memset(out, 0, v4_record_bytes(channels, rope));
  for (int block = 0; block < v4_scale_blocks(nope); ++block) quantize_v4_block(x, nope, block, out);
  for (int i = 0; i < rope; ++i) store_v4_rope_channel(x, nope, i, out);
}

// Channel c of a record's decoded row.
FKV_HOST_DEVICE inline float dequantize_v4_channel(const uint8_t* in, int channels, int rope, int c) {
  const int nope = channels - rope;
  if (c < nope) return numeric::fp8_decode(in[c], numeric::e8m0_to_float(in[nope + c / kV4ScaleBlock]));
  uint16_t bits = 0;
  memcpy(&bits, in + v4_rope_offset(nope) + 2 * static_cast<size_t>(c - nope), 2);
  return numeric::bf16_to_float(bits);
}

inline void dequantize_v4_record(const uint8_t* in, int channels, int rope, float* out) {
  for (int c = 0; c < channels; ++c) out[c] = dequantize_v4_channel(in, channels, rope, c);
}

}  // namespace flashkv::backend::cpu
