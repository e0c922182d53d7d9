#include "config/weight_inventory.hpp"

#include <flashkv/error.hpp>

namespace flashkv::config {

namespace {

uint64_t u(int64_t v) {
  return static_cast<uint64_t>(v);
}
uint64_t blocks_of_32(uint64_t n) {
  return n / 32 + (n % 32 != 0 ? 1 : 0);
}

// Sizes come from an untrusted file: a product that wraps would print a plausible wrong count.
[[noreturn]] void overflow() {
  fail(ErrorCode::kInvalidConfig,
       "config: tensor sizes overflow 64-bit element/byte counts (sizes too large)");
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

// Adds each tensor to one component's parameter count and to the byte total in its storage format.
class Tally {
 public:
  void fp8_blocks(uint64_t& component, uint64_t rows, uint64_t cols) {
    add(component, mul(rows, cols), sum(mul(rows, cols), mul(blocks_of_32(rows), blocks_of_32(cols))));
  }
  // Linear in rows, so experts stacked along rows count exactly as separate tensors.
  void mxfp4(uint64_t& component, uint64_t rows, uint64_t cols) {
    add(component, mul(rows, cols), sum(mul(rows, cols) / 2, mul(rows, blocks_of_32(cols))));
  }
  void fp8_rows(uint64_t& component, uint64_t rows, uint64_t cols) {
    add(component, mul(rows, cols), mul(rows, sum(cols, blocks_of_32(cols))));
  }
  void bf16(uint64_t& component, uint64_t elements) { add(component, elements, mul(2, elements)); }
  void fp32(uint64_t& component, uint64_t elements) { add(component, elements, mul(4, elements)); }

  WeightInventory result;

 private:
  void add(uint64_t& component, uint64_t elements, uint64_t bytes) {
    component = sum(component, elements);
    result.parameters.total = sum(result.parameters.total, elements);
    result.bytes = sum(result.bytes, bytes);
  }
};

void add_attention(Tally& t, const ModelConfig& c) {
  uint64_t& a = t.result.parameters.attention;
  const uint64_t d = u(c.hidden_size), hd = u(c.head_dim), heads = u(c.num_attention_heads);
  const uint64_t group_out = mul(u(c.o_groups), u(c.o_lora_rank));
  t.fp8_blocks(a, u(c.q_lora_rank), d);                        // wq_a
  t.bf16(a, u(c.q_lora_rank));                                 // q_norm
  t.fp8_blocks(a, mul(heads, hd), u(c.q_lora_rank));           // wq_b
  t.fp8_blocks(a, hd, d);                                      // wkv
  t.bf16(a, hd);                                               // kv_norm
  t.fp8_blocks(a, group_out, mul(heads, hd) / u(c.o_groups));  // wo_a
  t.fp8_blocks(a, d, group_out);                               // wo_b
  t.fp32(a, heads);                                            // attn_sink
}

void add_compressor_indexer(Tally& t, const ModelConfig& c, const LayerRole& role) {
  uint64_t& ci = t.result.parameters.compressor_indexer;
  const uint64_t d = u(c.hidden_size), hd = u(c.head_dim), ihd = u(c.index_head_dim);
  if (role.is_kv_source) {
    t.bf16(ci, mul(hd, d));                      // compressor.wkv
    t.bf16(ci, hd);                              // compressor.norm
    if (role.ratio > 1) t.bf16(ci, mul(hd, d));  // compressor.wgate
    t.bf16(ci, mul(ihd, hd));                    // indexer.wk
    t.bf16(ci, ihd);                             // indexer.k_norm
  }
  if (role.is_index_source) {
    t.fp8_blocks(ci, mul(u(c.index_n_heads), ihd), u(c.q_lora_rank));  // indexer.wq_b
    t.bf16(ci, mul(u(c.index_n_heads), d));                            // indexer.weights_proj
  }
}

void add_mhc_and_norms(Tally& t, const ModelConfig& c) {
  const uint64_t hc = u(c.hc_mult), d = u(c.hidden_size);
  const uint64_t mix = sum(mul(2, hc), mul(hc, hc));  // pre, post, and the hc x hc combination matrix
  for (int site = 0; site < 2; ++site) {
    t.fp32(t.result.parameters.mhc, mul(mix, mul(hc, d)));  // fn
    t.fp32(t.result.parameters.mhc, mix);                   // base
    t.fp32(t.result.parameters.mhc, 3);                     // scale
  }
  t.bf16(t.result.parameters.norms, mul(2, d));  // attn_norm, ffn_norm
}

void add_moe(Tally& t, const ModelConfig& c) {
  const uint64_t d = u(c.hidden_size), width = u(c.moe_intermediate_size), experts = u(c.n_routed_experts);
  t.bf16(t.result.parameters.router, mul(experts, d));                          // gate.weight
  t.bf16(t.result.parameters.router, mul(2, experts));                          // gate.bias, gate.bias_vl
  t.mxfp4(t.result.parameters.routed_experts, mul(experts, mul(2, width)), d);  // w1, w3 of every expert
  t.mxfp4(t.result.parameters.routed_experts, mul(experts, d), width);          // w2 of every expert
  for (int64_t e = 0; e < c.n_shared_experts; ++e) {
    t.fp8_blocks(t.result.parameters.shared_experts, width, d);  // w1
    t.fp8_blocks(t.result.parameters.shared_experts, width, d);  // w3
    t.fp8_blocks(t.result.parameters.shared_experts, d, width);  // w2
  }
}

void add_engram(Tally& t, const ModelConfig& c, const LayerRole& role) {
  if (!role.has_engram()) return;
  const uint64_t d = u(c.hidden_size), hc = u(c.hc_mult);
  const uint64_t columns = mul(u(c.engram_max_ngram_size - 1), u(c.engram_n_heads));
  const uint64_t rows = u(c.engram_num_embeddings[static_cast<size_t>(role.engram_slot)]);
  t.fp8_rows(t.result.parameters.engram_tables, rows, u(c.engram_head_dim));
  t.fp8_blocks(t.result.parameters.engram_projections, mul(hc + 1, d),
               mul(columns, u(c.engram_head_dim)));                    // wkv
  t.bf16(t.result.parameters.engram_projections, mul(2, mul(hc, d)));  // q_weight, k_weight
}

uint64_t active_per_token(const ParameterCounts& p, const ModelConfig& c) {
  const uint64_t per_expert = mul(3, mul(u(c.moe_intermediate_size), u(c.hidden_size)));
  const uint64_t active_experts = mul(u(c.num_hidden_layers), mul(u(c.num_experts_per_tok), per_expert));
  // A token reads one embedding row and a few Engram rows: count neither table.
  return sum(p.total - p.embedding - p.engram_tables - p.routed_experts, active_experts);
}

}  // namespace

WeightInventory count_weights(const ModelConfig& config, const LayerPlan& plan) {
  Tally t;
  const uint64_t vocab_by_width = mul(u(config.vocab_size), u(config.hidden_size));
  t.bf16(t.result.parameters.embedding, vocab_by_width);
  if (!config.tie_word_embeddings) t.bf16(t.result.parameters.head, vocab_by_width);
  t.bf16(t.result.parameters.norms, u(config.hidden_size));  // final norm
  for (const LayerRole& role : plan.layers) {
    add_attention(t, config);
    add_compressor_indexer(t, config, role);
    add_mhc_and_norms(t, config);
    add_moe(t, config);
    add_engram(t, config, role);
  }
  t.result.parameters.active_per_token = active_per_token(t.result.parameters, config);
  return t.result;
}

}  // namespace flashkv::config
