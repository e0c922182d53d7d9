// The tensors a deepseek_v41 or deepseek_v4 checkpoint holds for a given config: names, logical shapes and
// storage kinds (spec/MODEL.md §2.1 storage formats, §2.4 names and shapes; V4: docs/config.md). The one description of the checkpoint that
// the loader checks files against and the memory report counts parameters and bytes from.
//
// Names are those of the released checkpoint (no "model." prefix): "embed.weight", "head.weight",
// "norm.weight", and per layer "layers.{i}.<suffix>"; a quantized weight "<base>.weight" has its E8M0
// scales in "<base>.scale". Shapes are torch [out, in]. Which layers own compressor and indexer tensors
// follows the LayerPlan: KV sources own compressor.{wkv,norm} and indexer.{wk,k_norm} (ratio > 1 also
// compressor.wgate); index sources own indexer.{wq_b,weights_proj}; Engram layers own engram.*.
// V4 (plan.family): global hc_head_{fn,base,scale}; every compressed layer owns compressor.{wkv,wgate,ape,
// norm} (CSA: 2*head_dim wide); CSA layers own indexer.{wq_b,weights_proj} and indexer.compressor.{wkv,
// wgate,ape,norm}; hash-routed layers own ffn.gate.tid2eid instead of ffn.gate.bias; no gate.bias_vl.
//
// Storage per kind (the loader also accepts each quantized kind stored unquantized, see
// docs/checkpoint-format.md):
//   kUnquantized  BF16, F16 or F32 at the logical shape (FP32 in the release for hc_*, attn_sink, gate.bias*).
//   kFp8Block32   F8_E4M3 [out, in] + scale [ceil(out/32), ceil(in/32)] (V4.1);
//   kFp8Block128  F8_E4M3 [out, in] + scale [ceil(out/128), ceil(in/128)] (V4: weight_block_size 128);
//   kMxfp4        E2M1 pairs [out, in/2] + scale [out, ceil(in/32)];
//   kFp8Rows32    F8_E4M3 [rows, cols] + scale [rows, ceil(cols/32)] (Engram tables);
//   kIntegerTable I32 or I64 at the logical shape, no scale (V4 ffn.gate.tid2eid: expert ids per token).
// Threading: pure functions. Errors: none for a validated config (only std::bad_alloc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <flashkv/config.hpp>

namespace flashkv::config {

enum class StorageKind { kUnquantized, kFp8Block32, kFp8Block128, kMxfp4, kFp8Rows32, kIntegerTable };

// Edge of the square scale tile of an FP8 block kind (32 or 128); 0 for the other kinds.
std::int64_t fp8_tile(StorageKind storage);

// True for the kinds stored with a `<base>.scale` companion.
bool has_scale(StorageKind storage);

struct ExpectedTensor {
  std::string name;                 // the weight's name, e.g. "layers.2.attn.wkv.weight"
  std::vector<std::int64_t> shape;  // logical (dequantized) shape, torch [out, in]
  StorageKind storage = StorageKind::kUnquantized;
  bool required = true;  // false for tensors a text-only engine may lack (ffn.gate.bias_vl)
};

// Every tensor of the backbone in a stable order: global tensors, then layer by layer.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config, const LayerPlan& plan);

// "<base>.scale" for "<base>.weight" (and "<name>.scale" for a name without the suffix).
std::string scale_name(const std::string& weight_name);

// The shapes a tensor is stored with: the weight's stored shape and its scale's shape (empty when the
// storage kind has no scale).
std::vector<std::int64_t> stored_weight_shape(const ExpectedTensor& expected);
std::vector<std::int64_t> scale_shape(const ExpectedTensor& expected);

}  // namespace flashkv::config
