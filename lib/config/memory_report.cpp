// make_memory_report: per-token and per-session cache bytes from the record sizes of spec/MODEL.md §2.2
// (V4: §2.2 last paragraph and §8.2), summed over the plan's KV sources; plus the weight estimate.
#include <flashkv/config.hpp>
#include <flashkv/numeric/kv_records.hpp>

#include "config/weight_inventory.hpp"

namespace flashkv {

uint64_t MemoryReport::global_kv_bytes(uint64_t tokens) const {
  uint64_t bytes = 0;
  for (const KvSourceFootprint& source : kv_sources) {
    // Only complete groups of `ratio` tokens have published an entry.
    bytes += tokens / static_cast<uint64_t>(source.ratio) * (source.entry_bytes + source.index_key_bytes);
  }
  return bytes;
}

namespace {

// V4 stores a KV row (window row or compressed entry) as the non-RoPE channels in FP8 E4M3 with one UE8M0
// scale per 64 of them, plus the RoPE channels in BF16, the record padded to 8 bytes: 448 + 7 (+1) + 128 =
// 584 bytes for head_dim 512 / rope 64 (spec §2.2, §8.2) [I: the padding is inferred from the 584 figure].
constexpr uint64_t kV4ScaleGroup = 64;
constexpr uint64_t kV4RecordAlign = 8;

uint64_t v4_kv_record_bytes(const ModelConfig& c) {
  const auto rope = static_cast<uint64_t>(c.qk_rope_head_dim);
  const uint64_t nope = static_cast<uint64_t>(c.head_dim) - rope;
  const uint64_t bytes = nope + (nope + kV4ScaleGroup - 1) / kV4ScaleGroup + 2 * rope;
  return (bytes + kV4RecordAlign - 1) / kV4RecordAlign * kV4RecordAlign;
}

// MXFP4 index key: two E2M1 codes per byte and one E8M0 scale per 32 channels, the last block partial for
// V4 widths that are not a multiple of 32 (68 bytes for 128 channels, as V4.1).
uint64_t v4_index_key_bytes(const ModelConfig& c) {
  const auto channels = static_cast<uint64_t>(c.index_head_dim);
  return (channels + 1) / 2 + (channels + 31) / 32;
}

// fp32 compressor inputs a V4 layer may hold between calls: (r-1) pending tokens of each series, plus for an
// overlapping compressor the previous window's carried half-series (r tokens); kv and gate each.
uint64_t v4_compressor_state_bytes(const LayerRole& role, uint64_t width) {
  const auto r = static_cast<uint64_t>(role.ratio);
  const uint64_t series = role.overlapping_compressor ? 2 * width : width;
  const uint64_t carried = role.overlapping_compressor ? r * width : 0;
  return ((r - 1) * series + carried) * 2 * sizeof(float);
}

void add_v4_sources(const ModelConfig& config, const LayerPlan& plan, MemoryReport& report) {
  for (const LayerRole& role : plan.layers) {
    if (!role.is_kv_source) continue;
    const uint64_t key_bytes = role.is_index_source ? report.index_key_bytes : 0;
    report.kv_sources.push_back({role.index, role.ratio, report.kv_entry_bytes, key_bytes});
    report.global_kv_bytes_per_token +=
        static_cast<double>(report.kv_entry_bytes + key_bytes) / static_cast<double>(role.ratio);
    report.compressor_state_bytes_per_session +=
        v4_compressor_state_bytes(role, static_cast<uint64_t>(config.head_dim));
    if (role.indexer_has_compressor) {
      report.compressor_state_bytes_per_session +=
          v4_compressor_state_bytes(role, static_cast<uint64_t>(config.index_head_dim));
    }
  }
}

void add_v41_sources(const ModelConfig& config, const LayerPlan& plan, MemoryReport& report) {
  const auto head_dim = static_cast<uint64_t>(config.head_dim);
  for (const LayerRole& role : plan.layers) {
    if (!role.is_kv_source) continue;
    report.kv_sources.push_back({role.index, role.ratio, report.kv_entry_bytes, report.index_key_bytes});
    report.global_kv_bytes_per_token +=
        static_cast<double>(report.kv_entry_bytes + report.index_key_bytes) / static_cast<double>(role.ratio);
    // A ratio-r owner holds up to r-1 tokens of an open group as fp32 (v, g) pairs.
    report.compressor_state_bytes_per_session += static_cast<uint64_t>(role.ratio - 1) * 2 * head_dim * 4;
  }
}

}  // namespace

MemoryReport make_memory_report(const ModelConfig& config, const LayerPlan& plan) {
  // Validation caps channel counts at 65536, so the int the record helpers take cannot overflow.
  const auto head_channels = static_cast<int>(config.head_dim);
  MemoryReport report;
  if (plan.family == ModelFamily::kDeepseekV4) {
    report.index_key_bytes = v4_index_key_bytes(config);
    report.kv_entry_bytes = v4_kv_record_bytes(config);
    report.window_row_bytes = report.kv_entry_bytes;
    add_v4_sources(config, plan, report);
  } else {
    report.index_key_bytes = numeric::mxfp4_key_bytes(static_cast<int>(config.index_head_dim));
    report.kv_entry_bytes = numeric::nvfp4_entry_bytes(head_channels);
    report.window_row_bytes = numeric::fp8_row_bytes(head_channels);
    add_v41_sources(config, plan, report);
  }
  report.window_bytes_per_session = static_cast<uint64_t>(plan.layers.size()) *
                                    static_cast<uint64_t>(config.sliding_window) * report.window_row_bytes;

  const config::WeightInventory weights = config::count_weights(config, plan);
  report.parameters = weights.parameters;
  report.weight_bytes = weights.bytes;
  return report;
}

}  // namespace flashkv
