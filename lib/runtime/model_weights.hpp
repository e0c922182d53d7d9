// ModelWeights — every backbone weight of a checkpoint as fp32, in the structure the forward reads.
//
// Loading dequantizes each stored format at load time (FP8 32x32 blocks, MXFP4 experts, FP8 Engram rows;
// BF16/F16 converted) through lib/loader (Checkpoint + tensor inventory check + read_weight_float32): the CPU
// backend's GEMMs then read plain fp32. Weight bytes in memory are 4 per parameter (memory report:
// "dequantized fp32"). Errors: those of the loader (kInvalidCheckpoint naming the tensor, kNotFound, kIo).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <flashkv/config.hpp>

#include "backend/backend.hpp"
#include "loader/checkpoint.hpp"

namespace flashkv::runtime {

struct Tensor {
  std::vector<float> values;
  int64_t rows = 0;  // 1-D tensors: rows = 1
  int64_t cols = 0;
  backend::ConstMatrix matrix() const { return {values.data(), rows, cols}; }
  std::span<const float> vector() const { return values; }
};

struct AttentionWeights {
  Tensor wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sink;
  Tensor compressor_wkv, compressor_wgate, compressor_norm, indexer_wk, indexer_k_norm;  // KV sources
  Tensor indexer_wq_b, indexer_weights_proj;                                             // index sources
  // V4 KV sources: the compressor's absolute position bias [ratio, width] (added to the gate logits) and,
  // for CSA layers, the indexer's own compressor (indexer_wk / indexer_k_norm stay empty).
  Tensor compressor_ape;
  Tensor indexer_compressor_wkv, indexer_compressor_wgate, indexer_compressor_ape, indexer_compressor_norm;
};

struct ExpertTensors {
  Tensor w1, w3, w2;
  backend::ExpertWeights view() const { return {w1.matrix(), w3.matrix(), w2.matrix()}; }
};

struct MoeWeights {
  Tensor gate, bias;             // bias empty on V4 hash-routed layers
  std::vector<int32_t> tid2eid;  // V4 hash-routed layers: [vocab, top_k] expert ids by token
  std::vector<ExpertTensors> experts;
  std::optional<ExpertTensors> shared;
  std::vector<backend::ExpertWeights> expert_views;  // views of `experts`, for the backend
};

struct EngramWeights {
  Tensor table;              // [rows, head_dim]
  Tensor wkv;                // [(hc+1)·D, columns·head_dim]
  std::vector<float> omega;  // q_weight ⊙ k_weight, [hc·D], fp32
};

struct MixerTensors {
  Tensor fn, base, scale;
  backend::MixerWeights view() const { return {fn.matrix(), base.vector(), scale.vector()}; }
};

struct LayerWeights {
  Tensor attn_norm, ffn_norm;
  MixerTensors hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
  std::optional<EngramWeights> engram;
};

struct ModelWeights {
  Tensor embed, head, norm;
  std::optional<MixerTensors> hc_head;  // V4: hc_head_{fn [hc, hc·D], base [hc], scale [1]}
  std::vector<LayerWeights> layers;
  uint64_t bytes = 0;  // fp32 bytes held
};

ModelWeights load_model_weights(const loader::Checkpoint& checkpoint, const ModelConfig& config,
                                const LayerPlan& plan);

}  // namespace flashkv::runtime
