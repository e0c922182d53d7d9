// The tensors a deepseek_v41 / deepseek_v4 checkpoint must hold for a given config, and the check of a Checkpoint
// against them (spec/MODEL.md §2.1 storage formats, §2.4 names and shapes).
//
// Names are those of the released checkpoint (no "model." prefix): "embed.weight", "head.weight",
// "norm.weight", and per layer "layers.{i}.<suffix>"; a quantized weight "<base>.weight" has its E8M0
// scales in "<base>.scale". Shapes are torch [out, in]. Which layers own compressor and indexer tensors
// follows the LayerPlan: KV sources own compressor.{wkv,norm} and indexer.{wk,k_norm} (ratio > 1 also
// compressor.wgate); index sources own indexer.{wq_b,weights_proj}; Engram layers own engram.*.
//
// Accepted storage per kind (see docs/checkpoint-format.md):
//   kUnquantized  BF16, F16 or F32 at the logical shape.
//   kFp8Block32   F8_E4M3 [out, in] + scale [ceil(out/32), ceil(in/32)];
//   kFp8Block128  F8_E4M3 [out, in] + scale [ceil(out/128), ceil(in/128)] (V4);
//   kIntegerTable I32 or I64 at the logical shape, no scale (V4 ffn.gate.tid2eid);
//   kMxfp4        I8 or U8 [out, in/2] (two E2M1 per byte) + scale [out, ceil(in/32)];
//   kFp8Rows32    F8_E4M3 [rows, cols] + scale [rows, ceil(cols/32)] (Engram tables);
//                 scales as F8_E8M0, U8 or F32. Each quantized kind may instead be stored unquantized
//                 (BF16/F16/F32 at the logical shape, no scale), as a dequantized checkpoint is.
// Tensors under mtp., vision., aligner. and image_ (DSpark, vision: out of scope here) are not checked.
//
// Threading: pure functions. Errors: require_valid_checkpoint throws kInvalidCheckpoint listing the first
// problems; the other functions do not throw for checkpoint content (only std::bad_alloc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <flashkv/config.hpp>

#include "config/tensor_inventory.hpp"
#include "loader/checkpoint.hpp"

namespace flashkv::loader {

// The expected tensors are the config's (config/tensor_inventory.hpp); the loader checks files against them.
using config::ExpectedTensor;
using config::StorageKind;
using config::expected_tensors;
using config::has_scale;
using config::scale_name;
using config::scale_shape;
using config::stored_weight_shape;

struct CheckpointProblem {
  std::string tensor;  // the tensor at fault
  std::string what;    // e.g. "missing", "shape [4, 8], expected [8, 4]"
};

// Missing tensors, wrong shapes and dtypes, scales missing or misplaced, and unexpected tensors outside
// the unchecked prefixes; empty when the checkpoint fits the config. Sorted by tensor name.
std::vector<CheckpointProblem> check_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config,
                                                const LayerPlan& plan);

// Throws Error(kInvalidCheckpoint) naming the checkpoint, the problem count and the first few problems.
void require_valid_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config, const LayerPlan& plan);

// One row per tensor of the checkpoint, sorted by name, for `flashkv info DIR`.
struct TensorRow {
  std::string name;
  std::string dtype;  // safetensors spelling
  std::vector<std::int64_t> shape;
  std::uint64_t bytes = 0;
  std::string file;  // path of the file holding it
};
std::vector<TensorRow> describe_checkpoint(const Checkpoint& checkpoint);

}  // namespace flashkv::loader
