// make_memory_report: per-token and per-session cache bytes from the record sizes of spec/MODEL.md §2.2,
// summed over the plan's KV sources; plus the weight estimate.
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

MemoryReport make_memory_report(const ModelConfig& config, const LayerPlan& plan) {
  // Validation caps channel counts at 65536, so the int the record helpers take cannot overflow.
  const auto head_dim = static_cast<uint64_t>(config.head_dim);
  const auto head_channels = static_cast<int>(config.head_dim);
  MemoryReport report;
  report.kv_entry_bytes = numeric::nvfp4_entry_bytes(head_channels);
  report.index_key_bytes = numeric::mxfp4_key_bytes(static_cast<int>(config.index_head_dim));
  report.window_row_bytes = numeric::fp8_row_bytes(head_channels);

  for (const LayerRole& role : plan.layers) {
    if (!role.is_kv_source) continue;
    report.kv_sources.push_back({role.index, role.ratio, report.kv_entry_bytes, report.index_key_bytes});
    report.global_kv_bytes_per_token +=
        static_cast<double>(report.kv_entry_bytes + report.index_key_bytes) / static_cast<double>(role.ratio);
    // A ratio-r owner holds up to r-1 tokens of an open group as fp32 (v, g) pairs.
    report.compressor_state_bytes_per_session += static_cast<uint64_t>(role.ratio - 1) * 2 * head_dim * 4;
  }
  report.window_bytes_per_session = static_cast<uint64_t>(plan.layers.size()) *
                                    static_cast<uint64_t>(config.sliding_window) * report.window_row_bytes;

  const config::WeightInventory weights = config::count_weights(config, plan);
  report.parameters = weights.parameters;
  report.weight_bytes = weights.bytes;
  return report;
}

}  // namespace flashkv
