#include "config/weight_inventory.hpp"

#include <string_view>

#include <flashkv/error.hpp>

#include "config/tensor_inventory.hpp"

namespace flashkv::config {

namespace {

uint64_t u(int64_t v) {
  return static_cast<uint64_t>(v);
}
uint64_t blocks_of(uint64_t n, uint64_t block) {
  return n / block + (n % block != 0 ? 1 : 0);
}
uint64_t blocks_of_32(uint64_t n) {
  return blocks_of(n, 32);
}

// Sizes come from an untrusted file: a product that wraps would print a plausible wrong count.
[[noreturn]] void overflow() {
  fail(ErrorCode::kInvalidConfig, "config: tensor sizes overflow 64-bit element/byte counts (sizes too large)");
}
uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}
uint64_t sum(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

bool contains(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

// The component a tensor's parameters are reported under, from its released name.
uint64_t& component_of(ParameterCounts& p, std::string_view name) {
  if (name == "embed.weight") return p.embedding;
  if (name == "head.weight") return p.head;
  if (contains(name, "engram.embed.")) return p.engram_tables;
  if (contains(name, "engram.")) return p.engram_projections;
  if (contains(name, "attn.compressor.") || contains(name, "attn.indexer.")) return p.compressor_indexer;
  if (contains(name, ".hc_") || name.substr(0, 8) == "hc_head_") return p.mhc;
  if (contains(name, "ffn.gate.")) return p.router;
  if (contains(name, "ffn.experts.")) return p.routed_experts;
  if (contains(name, "ffn.shared_experts.")) return p.shared_experts;
  if (contains(name, "attn.") && !contains(name, "_norm.")) return p.attention;
  if (contains(name, "attn.q_norm.") || contains(name, "attn.kv_norm.")) return p.attention;
  return p.norms;  // norm.weight, attn_norm, ffn_norm
}

// FP32 in the release: mHC parameters (hc_head too), attention sinks, router biases (spec §2.1), V4
// compressor position biases (ape); BF16 for the rest.
uint64_t unquantized_element_bytes(std::string_view name) {
  const bool fp32 = contains(name, "hc_") || contains(name, "attn_sink") || contains(name, "ffn.gate.bias") ||
                    contains(name, "compressor.ape");
  return fp32 ? 4 : 2;
}

uint64_t storage_bytes(const ExpectedTensor& t) {
  const uint64_t rows = u(t.shape.front());
  const uint64_t cols = t.shape.size() > 1 ? u(t.shape[1]) : 1;
  const uint64_t elements = mul(rows, cols);
  switch (t.storage) {
    case StorageKind::kFp8Block32:
    case StorageKind::kFp8Block128: {
      const auto tile = static_cast<uint64_t>(fp8_tile(t.storage));
      return sum(elements, mul(blocks_of(rows, tile), blocks_of(cols, tile)));
    }
    case StorageKind::kIntegerTable: return mul(elements, 4);  // I32 in the release
    case StorageKind::kMxfp4: return sum(elements / 2, mul(rows, blocks_of_32(cols)));
    case StorageKind::kFp8Rows32: return mul(rows, sum(cols, blocks_of_32(cols)));
    case StorageKind::kUnquantized: return mul(elements, unquantized_element_bytes(t.name));
  }
  return 0;
}

uint64_t active_per_token(const ParameterCounts& p, const ModelConfig& c) {
  const uint64_t per_expert = mul(3, mul(u(c.moe_intermediate_size), u(c.hidden_size)));
  const uint64_t active_experts = mul(u(c.num_hidden_layers), mul(u(c.num_experts_per_tok), per_expert));
  // A token reads one embedding row and a few Engram rows: count neither table.
  return sum(p.total - p.embedding - p.engram_tables - p.routed_experts, active_experts);
}

}  // namespace

WeightInventory count_weights(const ModelConfig& config, const LayerPlan& plan) {
  WeightInventory result;
  for (const ExpectedTensor& tensor : expected_tensors(config, plan)) {
    if (!tensor.required) continue;  // optional tensors (ffn.gate.bias_vl) are not needed for text
    if (tensor.name == "head.weight" && config.tie_word_embeddings) continue;
    result.bytes = sum(result.bytes, storage_bytes(tensor));
    if (tensor.storage == StorageKind::kIntegerTable) continue;  // tid2eid: a lookup table, not parameters
    uint64_t elements = 1;
    for (const int64_t extent : tensor.shape) elements = mul(elements, u(extent));
    uint64_t& component = component_of(result.parameters, tensor.name);
    component = sum(component, elements);
    result.parameters.total = sum(result.parameters.total, elements);
  }
  result.parameters.active_per_token = active_per_token(result.parameters, config);
  return result;
}

}  // namespace flashkv::config
