// Parameter counts and weight bytes of a deepseek_v41 backbone, from the config shapes and the storage
// formats of spec/MODEL.md §2.1/§2.4 (FP8 E4M3 dense projections with 32x32 UE8M0 blocks, MXFP4 routed
// experts, FP8 Engram tables with one scale per 32 columns, FP32 mHC and sinks, BF16 for the rest).
// An estimate for `flashkv info` and Model::memory(); the loader's tensor inventory is the authority.
#pragma once

#include <flashkv/config.hpp>

namespace flashkv::config {

struct WeightInventory {
  ParameterCounts parameters;
  uint64_t bytes = 0;
};

WeightInventory count_weights(const ModelConfig& config, const LayerPlan& plan);

}  // namespace flashkv::config
