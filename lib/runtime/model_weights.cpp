#include "runtime/model_weights.hpp"

#include <map>
#include <string>

#include <fmt/format.h>
#include <flashkv/error.hpp>

#include "loader/tensor_inventory.hpp"
#include "loader/weight_reader.hpp"

namespace flashkv::runtime {
namespace {

class TensorSource {
 public:
  TensorSource(const loader::Checkpoint& checkpoint, const ModelConfig& config, const LayerPlan& plan)
      : checkpoint_(checkpoint) {
    for (loader::ExpectedTensor& expected : loader::expected_tensors(config, plan)) {
      const std::string name = expected.name;
      expected_.emplace(name, std::move(expected));
    }
  }

  Tensor read(const std::string& name) {
    const loader::ExpectedTensor& expected = find(name);
    Tensor tensor;
    const std::vector<int64_t>& shape = expected.shape;
    tensor.rows = shape.size() == 2 ? shape[0] : 1;
    tensor.cols = shape.back();
    tensor.values = loader::read_weight_float32(checkpoint_, expected);
    bytes_ += tensor.values.size() * sizeof(float);
    return tensor;
  }

  // An integer table (V4 tid2eid), checked to hold ids in [0, limit).
  std::vector<int32_t> read_index_table(const std::string& name, int64_t limit) {
    std::vector<int32_t> table = loader::read_index_table(checkpoint_, find(name), limit);
    bytes_ += table.size() * sizeof(int32_t);
    return table;
  }

  uint64_t bytes() const { return bytes_; }

 private:
  const loader::ExpectedTensor& find(const std::string& name) const {
    const auto it = expected_.find(name);
    if (it == expected_.end()) fail(ErrorCode::kInternal, "weight {} is not in the tensor inventory", name);
    return it->second;
  }

  const loader::Checkpoint& checkpoint_;
  std::map<std::string, loader::ExpectedTensor> expected_;
  uint64_t bytes_ = 0;
};

AttentionWeights read_attention(TensorSource& source, const std::string& p, const LayerRole& role,
                                ModelFamily family) {
  AttentionWeights a;
  a.wq_a = source.read(p + "attn.wq_a.weight");
  a.q_norm = source.read(p + "attn.q_norm.weight");
  a.wq_b = source.read(p + "attn.wq_b.weight");
  a.wkv = source.read(p + "attn.wkv.weight");
  a.kv_norm = source.read(p + "attn.kv_norm.weight");
  a.wo_a = source.read(p + "attn.wo_a.weight");
  a.wo_b = source.read(p + "attn.wo_b.weight");
  a.sink = source.read(p + "attn.attn_sink");
  if (role.is_kv_source) {
    a.compressor_wkv = source.read(p + "attn.compressor.wkv.weight");
    a.compressor_norm = source.read(p + "attn.compressor.norm.weight");
    if (role.ratio > 1) a.compressor_wgate = source.read(p + "attn.compressor.wgate.weight");
    if (family == ModelFamily::kDeepseekV4) {
      a.compressor_ape = source.read(p + "attn.compressor.ape");
    } else {
      a.indexer_wk = source.read(p + "attn.indexer.wk.weight");
      a.indexer_k_norm = source.read(p + "attn.indexer.k_norm.weight");
    }
  }
  if (role.indexer_has_compressor) {
    a.indexer_compressor_wkv = source.read(p + "attn.indexer.compressor.wkv.weight");
    a.indexer_compressor_wgate = source.read(p + "attn.indexer.compressor.wgate.weight");
    a.indexer_compressor_ape = source.read(p + "attn.indexer.compressor.ape");
    a.indexer_compressor_norm = source.read(p + "attn.indexer.compressor.norm.weight");
  }
  if (role.is_index_source) {
    a.indexer_wq_b = source.read(p + "attn.indexer.wq_b.weight");
    a.indexer_weights_proj = source.read(p + "attn.indexer.weights_proj.weight");
  }
  return a;
}

ExpertTensors read_expert(TensorSource& source, const std::string& base) {
  return {source.read(base + "w1.weight"), source.read(base + "w3.weight"), source.read(base + "w2.weight")};
}

MoeWeights read_moe(TensorSource& source, const std::string& p, const ModelConfig& config,
                    const LayerRole& role) {
  MoeWeights m;
  m.gate = source.read(p + "ffn.gate.weight");
  if (role.hash_routed) {
    m.tid2eid = source.read_index_table(p + "ffn.gate.tid2eid", config.n_routed_experts);
  } else {
    m.bias = source.read(p + "ffn.gate.bias");
  }
  for (int64_t e = 0; e < config.n_routed_experts; ++e) {
    m.experts.push_back(read_expert(source, fmt::format("{}ffn.experts.{}.", p, e)));
  }
  if (config.n_shared_experts > 0) m.shared = read_expert(source, p + "ffn.shared_experts.");
  for (const ExpertTensors& expert : m.experts) m.expert_views.push_back(expert.view());
  return m;
}

EngramWeights read_engram(TensorSource& source, const std::string& p) {
  EngramWeights e;
  e.table = source.read(p + "engram.embed.weight");
  e.wkv = source.read(p + "engram.wkv.weight");
  const Tensor q = source.read(p + "engram.q_weight");
  const Tensor k = source.read(p + "engram.k_weight");
  e.omega.resize(q.values.size());
  for (size_t i = 0; i < q.values.size(); ++i) {
    e.omega[i] = static_cast<float>(static_cast<double>(q.values[i]) * static_cast<double>(k.values[i]));
  }
  return e;
}

}  // namespace

ModelWeights load_model_weights(const loader::Checkpoint& checkpoint, const ModelConfig& config,
                                const LayerPlan& plan) {
  loader::require_valid_checkpoint(checkpoint, config, plan);
  TensorSource source(checkpoint, config, plan);
  ModelWeights w;
  w.embed = source.read("embed.weight");
  w.head = source.read("head.weight");
  w.norm = source.read("norm.weight");
  if (plan.has_hc_head) {
    w.hc_head =
        MixerTensors{source.read("hc_head_fn"), source.read("hc_head_base"), source.read("hc_head_scale")};
  }
  for (const LayerRole& role : plan.layers) {
    const std::string p = fmt::format("layers.{}.", role.index);
    LayerWeights layer;
    layer.attn_norm = source.read(p + "attn_norm.weight");
    layer.ffn_norm = source.read(p + "ffn_norm.weight");
    layer.hc_attn = {source.read(p + "hc_attn_fn"), source.read(p + "hc_attn_base"),
                     source.read(p + "hc_attn_scale")};
    layer.hc_ffn = {source.read(p + "hc_ffn_fn"), source.read(p + "hc_ffn_base"),
                    source.read(p + "hc_ffn_scale")};
    layer.attn = read_attention(source, p, role, config.family);
    layer.ffn = read_moe(source, p, config, role);
    if (role.has_engram()) layer.engram = read_engram(source, p);
    w.layers.push_back(std::move(layer));
  }
  w.bytes = source.bytes();
  return w;
}

}  // namespace flashkv::runtime
