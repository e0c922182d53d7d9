// The C options structs: their defaults, their first published sizes, and their translation into the C++
// API's option types (validating the enumeration fields, which C cannot type-check).
#pragma once

#include <cstddef>

#include <flashkv/flashkv.hpp>

#include "flashkv.h"

namespace flashkv::capi {

// Sizes of the ABI 1.0 layouts. These expressions stay the 1.0 sizes when fields are appended later.
inline constexpr size_t kLoadOptionsSizeV1 = offsetof(fkv_load_options, log_user_data) + sizeof(void*);
inline constexpr size_t kSessionOptionsSizeV1 =
    offsetof(fkv_session_options, prefill_chunk) + sizeof(int64_t);
inline constexpr size_t kSamplingParamsSizeV1 = offsetof(fkv_sampling_params, seed) + sizeof(uint64_t);
inline constexpr size_t kGenerateOptionsSizeV1 =
    offsetof(fkv_generate_options, on_progress_user_data) + sizeof(void*);
inline constexpr size_t kConfigSizeV1 = offsetof(fkv_config, num_engram_layers) + sizeof(int32_t);
inline constexpr size_t kMemorySizeV1 = offsetof(fkv_memory, weight_storage) + sizeof(const char*);

fkv_load_options default_load_options();
fkv_session_options default_session_options();
fkv_sampling_params default_sampling_params();
fkv_generate_options default_generate_options();

// Each reads the caller's struct (NULL: defaults) and checks every field the C++ API cannot see is wrong.
fkv_load_options read_load_options(const fkv_load_options* options);
LoadOptions to_load_options(const fkv_load_options& options);
SessionOptions to_session_options(const fkv_session_options* options);
SamplingParams to_sampling_params(const fkv_sampling_params* params, const char* name);
fkv_generate_options read_generate_options(const fkv_generate_options* options);
// The C++ options of a read fkv_generate_options, without its callbacks (the caller wires those).
GenerateOptions to_generate_options(const fkv_generate_options& options);

// The C view of the options a model was loaded with (no log callback).
fkv_load_options from_load_options(const LoadOptions& options);

}  // namespace flashkv::capi
