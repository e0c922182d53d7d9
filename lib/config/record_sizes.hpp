// Byte sizes of the KV-cache records of spec/MODEL.md §2.2, computed from a channel count.
// Why here: the memory report must follow the same formulas the KV pools use; these mirror the formats'
// definitions (data bits + one scale byte per block) until include/flashkv/numeric/kv_records.hpp lands,
// after which they forward to it.
#pragma once

#include <cstdint>

namespace flashkv::config {

// NVFP4 compressed/global entry: E2M1 pairs (C/2 bytes) + one E4M3 scale per 16 channels.
constexpr uint64_t nvfp4_entry_bytes(uint64_t channels) {
  return channels / 2 + channels / 16;
}

// MXFP4 index key: E2M1 pairs (C/2 bytes) + one UE8M0 scale per 32 channels.
constexpr uint64_t mxfp4_key_bytes(uint64_t channels) {
  return channels / 2 + channels / 32;
}

// FP8 E4M3 window row: one byte per channel + one UE8M0 scale per 32 channels.
constexpr uint64_t fp8_row_bytes(uint64_t channels) {
  return channels + channels / 32;
}

static_assert(nvfp4_entry_bytes(512) == 288);
static_assert(mxfp4_key_bytes(128) == 68);
static_assert(fp8_row_bytes(512) == 528);

}  // namespace flashkv::config
