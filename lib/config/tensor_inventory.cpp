#include "config/tensor_inventory.hpp"

#include <string_view>

#include <fmt/format.h>

namespace flashkv::config {
namespace {

using Shape = std::vector<std::int64_t>;

constexpr std::int64_t kScaleBlock = 32;

std::int64_t blocks(std::int64_t n, std::int64_t block = kScaleBlock) {
  return (n + block - 1) / block;
}

StorageKind dense_fp8(const ModelConfig& c) {
  return c.weight_block_size == 128 ? StorageKind::kFp8Block128 : StorageKind::kFp8Block32;
}

// Collects the expected tensors of one layer under its "layers.{i}." prefix.
class LayerTensors {
 public:
  LayerTensors(std::vector<ExpectedTensor>& out, int layer)
      : out_(out), prefix_(fmt::format("layers.{}.", layer)) {}

  void add(std::string_view suffix, Shape shape, StorageKind storage = StorageKind::kUnquantized,
           bool required = true) {
    out_.push_back(ExpectedTensor{prefix_ + std::string(suffix), std::move(shape), storage, required});
  }

 private:
  std::vector<ExpectedTensor>& out_;
  std::string prefix_;
};

void add_norms_and_mixers(LayerTensors& layer, const ModelConfig& c) {
  const std::int64_t mix = (2 + c.hc_mult) * c.hc_mult;  // pre + post + comb (spec §4)
  layer.add("attn_norm.weight", {c.hidden_size});
  layer.add("ffn_norm.weight", {c.hidden_size});
  for (const std::string_view site : {"attn", "ffn"}) {
    layer.add(fmt::format("hc_{}_fn", site), {mix, c.hc_mult * c.hidden_size});
    layer.add(fmt::format("hc_{}_base", site), {mix});
    layer.add(fmt::format("hc_{}_scale", site), {3});
  }
}

void add_attention(LayerTensors& layer, const ModelConfig& c, const LayerRole& role) {
  const auto fp8 = dense_fp8(c);
  const std::int64_t heads_width = c.num_attention_heads * c.head_dim;
  layer.add("attn.wq_a.weight", {c.q_lora_rank, c.hidden_size}, fp8);
  layer.add("attn.q_norm.weight", {c.q_lora_rank});
  layer.add("attn.wq_b.weight", {heads_width, c.q_lora_rank}, fp8);
  layer.add("attn.wkv.weight", {c.head_dim, c.hidden_size}, fp8);
  layer.add("attn.kv_norm.weight", {c.head_dim});
  layer.add("attn.wo_a.weight", {c.o_groups * c.o_lora_rank, heads_width / c.o_groups}, fp8);
  layer.add("attn.wo_b.weight", {c.hidden_size, c.o_groups * c.o_lora_rank}, fp8);
  layer.add("attn.attn_sink", {c.num_attention_heads});
  if (c.family == ModelFamily::kDeepseekV4) return;  // compressors and indexers: add_v4_compression
  if (role.is_kv_source) {
    layer.add("attn.compressor.wkv.weight", {c.head_dim, c.hidden_size});
    layer.add("attn.compressor.norm.weight", {c.head_dim});
    if (role.ratio > 1) layer.add("attn.compressor.wgate.weight", {c.head_dim, c.hidden_size});
    layer.add("attn.indexer.wk.weight", {c.index_head_dim, c.head_dim});
    layer.add("attn.indexer.k_norm.weight", {c.index_head_dim});
  }
  if (role.is_index_source) {
    layer.add("attn.indexer.wq_b.weight", {c.index_n_heads * c.index_head_dim, c.q_lora_rank}, fp8);
    layer.add("attn.indexer.weights_proj.weight", {c.index_n_heads, c.hidden_size});
  }
}

// A V4 compressor pools `width` channels; overlapping (CSA) ones project two half-window series.
void add_v4_compressor(LayerTensors& layer, const ModelConfig& c, const LayerRole& role, std::string_view at,
                       std::int64_t width) {
  const std::int64_t series = role.overlapping_compressor ? 2 * width : width;
  layer.add(fmt::format("{}.wkv.weight", at), {series, c.hidden_size});
  layer.add(fmt::format("{}.wgate.weight", at), {series, c.hidden_size});
  layer.add(fmt::format("{}.ape", at), {role.ratio, series});  // absolute position bias per window slot
  layer.add(fmt::format("{}.norm.weight", at), {width});
}

void add_v4_compression(LayerTensors& layer, const ModelConfig& c, const LayerRole& role) {
  if (!role.is_kv_source) return;
  add_v4_compressor(layer, c, role, "attn.compressor", c.head_dim);
  if (!role.is_index_source) return;
  layer.add("attn.indexer.wq_b.weight", {c.index_n_heads * c.index_head_dim, c.q_lora_rank}, dense_fp8(c));
  layer.add("attn.indexer.weights_proj.weight", {c.index_n_heads, c.hidden_size});
  add_v4_compressor(layer, c, role, "attn.indexer.compressor", c.index_head_dim);
}

void add_router(LayerTensors& layer, const ModelConfig& c, const LayerRole& role) {
  layer.add("ffn.gate.weight", {c.n_routed_experts, c.hidden_size});
  if (role.hash_routed) {
    layer.add("ffn.gate.tid2eid", {c.vocab_size, c.num_experts_per_tok}, StorageKind::kIntegerTable);
    return;
  }
  layer.add("ffn.gate.bias", {c.n_routed_experts});
  if (c.family == ModelFamily::kDeepseekV41) {
    layer.add("ffn.gate.bias_vl", {c.n_routed_experts}, StorageKind::kUnquantized, /*required=*/false);
  }
}

void add_moe(LayerTensors& layer, const ModelConfig& c, const LayerRole& role) {
  add_router(layer, c, role);
  const std::int64_t inter = c.moe_intermediate_size;
  for (std::int64_t expert = 0; expert < c.n_routed_experts; ++expert) {
    layer.add(fmt::format("ffn.experts.{}.w1.weight", expert), {inter, c.hidden_size}, StorageKind::kMxfp4);
    layer.add(fmt::format("ffn.experts.{}.w2.weight", expert), {c.hidden_size, inter}, StorageKind::kMxfp4);
    layer.add(fmt::format("ffn.experts.{}.w3.weight", expert), {inter, c.hidden_size}, StorageKind::kMxfp4);
  }
  if (c.n_shared_experts == 0) return;
  const std::int64_t shared = inter * c.n_shared_experts;
  layer.add("ffn.shared_experts.w1.weight", {shared, c.hidden_size}, dense_fp8(c));
  layer.add("ffn.shared_experts.w2.weight", {c.hidden_size, shared}, dense_fp8(c));
  layer.add("ffn.shared_experts.w3.weight", {shared, c.hidden_size}, dense_fp8(c));
}

void add_engram(LayerTensors& layer, const ModelConfig& c, const LayerRole& role) {
  const std::int64_t rows = c.engram_num_embeddings.at(static_cast<std::size_t>(role.engram_slot));
  const std::int64_t memory_width = (c.engram_max_ngram_size - 1) * c.engram_n_heads * c.engram_head_dim;
  layer.add("engram.embed.weight", {rows, c.engram_head_dim}, StorageKind::kFp8Rows32);
  // keys for each of the hc_mult streams, then the value (spec §7)
  layer.add("engram.wkv.weight", {(c.hc_mult + 1) * c.hidden_size, memory_width}, dense_fp8(c));
  layer.add("engram.q_weight", {c.hc_mult, c.hidden_size});
  layer.add("engram.k_weight", {c.hc_mult, c.hidden_size});
}

}  // namespace

std::int64_t fp8_tile(StorageKind storage) {
  if (storage == StorageKind::kFp8Block32) return 32;
  if (storage == StorageKind::kFp8Block128) return 128;
  return 0;
}

bool has_scale(StorageKind storage) {
  return storage != StorageKind::kUnquantized && storage != StorageKind::kIntegerTable;
}

std::string scale_name(const std::string& weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  const std::string_view name = weight_name;
  if (name.size() >= kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix) {
    return std::string(name.substr(0, name.size() - kSuffix.size())) + ".scale";
  }
  return weight_name + ".scale";
}
std::vector<std::int64_t> stored_weight_shape(const ExpectedTensor& expected) {
  if (expected.storage != StorageKind::kMxfp4) return expected.shape;
  return {expected.shape.at(0), expected.shape.at(1) / 2};
}
std::vector<std::int64_t> scale_shape(const ExpectedTensor& expected) {
  if (!has_scale(expected.storage)) return {};
  const std::int64_t rows = expected.shape.at(0);
  const std::int64_t cols = expected.shape.at(1);
  switch (expected.storage) {
    case StorageKind::kFp8Block32:
    case StorageKind::kFp8Block128:
      return {blocks(rows, fp8_tile(expected.storage)), blocks(cols, fp8_tile(expected.storage))};
    case StorageKind::kMxfp4:
    case StorageKind::kFp8Rows32:
      return {rows, blocks(cols)};
    case StorageKind::kUnquantized:
    case StorageKind::kIntegerTable:
      break;
  }
  return {};
}
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config, const LayerPlan& plan) {
  std::vector<ExpectedTensor> out{
      {"embed.weight", {config.vocab_size, config.hidden_size}, StorageKind::kUnquantized, true},
      {"head.weight", {config.vocab_size, config.hidden_size}, StorageKind::kUnquantized, true},
      {"norm.weight", {config.hidden_size}, StorageKind::kUnquantized, true},
  };
  if (plan.has_hc_head) {  // V4: the final collapse of the hc_mult streams (pre weights only)
    const std::int64_t hc = config.hc_mult;
    out.push_back({"hc_head_fn", {hc, hc * config.hidden_size}, StorageKind::kUnquantized, true});
    out.push_back({"hc_head_base", {hc}, StorageKind::kUnquantized, true});
    out.push_back({"hc_head_scale", {1}, StorageKind::kUnquantized, true});
  }
  for (const LayerRole& role : plan.layers) {
    LayerTensors layer(out, role.index);
    add_norms_and_mixers(layer, config);
    add_attention(layer, config, role);
    if (plan.family == ModelFamily::kDeepseekV4) add_v4_compression(layer, config, role);
    add_moe(layer, config, role);
    if (role.has_engram()) add_engram(layer, config, role);
  }
  return out;
}

}  // namespace flashkv::config
