// Defaults and translation of the C options structs, and their *_init functions.
#include "options.hpp"

#include "boundary.hpp"
#include "struct_io.hpp"

namespace flashkv::capi {

namespace {

Device to_device(int32_t value) {
  switch (value) {
    case FKV_DEVICE_CPU:
      return Device::kCpu;
    case FKV_DEVICE_CUDA:
      return Device::kCuda;
    default:
      fail(ErrorCode::kInvalidArgument, "fkv_load_options.device: {} is not an FKV_DEVICE_* value", value);
  }
}

Numerics to_numerics(int32_t value) {
  switch (value) {
    case FKV_NUMERICS_CLEAN:
      return Numerics::kClean;
    case FKV_NUMERICS_FAITHFUL:
      return Numerics::kFaithful;
    default:
      fail(ErrorCode::kInvalidArgument, "fkv_load_options.numerics: {} is not an FKV_NUMERICS_* value",
           value);
  }
}

PrefillMode to_prefill(int32_t value, const char* field) {
  switch (value) {
    case FKV_PREFILL_EXACT:
      return PrefillMode::kExact;
    case FKV_PREFILL_CED:
      return PrefillMode::kCed;
    default:
      fail(ErrorCode::kInvalidArgument, "{}: {} is not an FKV_PREFILL_* value", field, value);
  }
}

}  // namespace

fkv_load_options default_load_options() {
  const LoadOptions defaults;
  fkv_load_options options = from_load_options(defaults);
  options.struct_size = sizeof(fkv_load_options);
  return options;
}

fkv_session_options default_session_options() {
  fkv_session_options options{};
  options.struct_size = sizeof(fkv_session_options);
  options.prefill = FKV_PREFILL_MODEL;
  options.prefill_chunk = 0;
  return options;
}

fkv_sampling_params default_sampling_params() {
  const SamplingParams defaults;
  fkv_sampling_params params{};
  params.struct_size = sizeof(fkv_sampling_params);
  params.temperature = defaults.temperature;
  params.top_k = defaults.top_k;
  params.top_p = defaults.top_p;
  params.min_p = defaults.min_p;
  params.repetition_penalty = defaults.repetition_penalty;
  params.presence_penalty = defaults.presence_penalty;
  params.frequency_penalty = defaults.frequency_penalty;
  params.seed = defaults.seed;
  return params;
}

fkv_generate_options default_generate_options() {
  const GenerateOptions defaults;
  fkv_generate_options options{};
  options.struct_size = sizeof(fkv_generate_options);
  options.stop_at_eos = defaults.stop_at_eos ? 1 : 0;
  options.max_tokens = defaults.max_tokens;
  return options;
}

fkv_load_options from_load_options(const LoadOptions& options) {
  fkv_load_options c{};
  c.struct_size = sizeof(fkv_load_options);
  c.device = options.device == Device::kCuda ? FKV_DEVICE_CUDA : FKV_DEVICE_CPU;
  c.threads = options.threads;
  c.numerics = options.numerics == Numerics::kClean ? FKV_NUMERICS_CLEAN : FKV_NUMERICS_FAITHFUL;
  c.prefill = options.prefill == PrefillMode::kCed ? FKV_PREFILL_CED : FKV_PREFILL_EXACT;
  c.prefill_chunk = options.prefill_chunk;
  return c;
}

fkv_load_options read_load_options(const fkv_load_options* options) {
  if (options == nullptr) return default_load_options();
  fkv_load_options read =
      read_struct(*options, default_load_options(), kLoadOptionsSizeV1, "fkv_load_options");
  if (read.reserved0 != 0) {
    fail(ErrorCode::kInvalidArgument, "fkv_load_options.reserved0 must be 0, got {}", read.reserved0);
  }
  return read;
}

LoadOptions to_load_options(const fkv_load_options& options) {
  LoadOptions cpp;
  cpp.device = to_device(options.device);
  cpp.threads = options.threads;
  cpp.numerics = to_numerics(options.numerics);
  cpp.prefill = to_prefill(options.prefill, "fkv_load_options.prefill");
  cpp.prefill_chunk = options.prefill_chunk;
  return cpp;
}

SessionOptions to_session_options(const fkv_session_options* options) {
  const fkv_session_options read =
      options == nullptr
          ? default_session_options()
          : read_struct(*options, default_session_options(), kSessionOptionsSizeV1, "fkv_session_options");
  SessionOptions cpp;
  cpp.prefill_chunk = read.prefill_chunk;
  if (read.prefill != FKV_PREFILL_MODEL)
    cpp.prefill = to_prefill(read.prefill, "fkv_session_options.prefill");
  return cpp;
}

SamplingParams to_sampling_params(const fkv_sampling_params* params, const char* name) {
  const fkv_sampling_params read =
      params == nullptr ? default_sampling_params()
                        : read_struct(*params, default_sampling_params(), kSamplingParamsSizeV1, name);
  SamplingParams cpp;
  cpp.temperature = read.temperature;
  cpp.top_k = read.top_k;
  cpp.top_p = read.top_p;
  cpp.min_p = read.min_p;
  cpp.repetition_penalty = read.repetition_penalty;
  cpp.presence_penalty = read.presence_penalty;
  cpp.frequency_penalty = read.frequency_penalty;
  cpp.seed = read.seed;
  return cpp;
}

fkv_generate_options read_generate_options(const fkv_generate_options* options) {
  if (options == nullptr) return default_generate_options();
  const fkv_generate_options read =
      read_struct(*options, default_generate_options(), kGenerateOptionsSizeV1, "fkv_generate_options");
  if (read.stop_tokens == nullptr && read.n_stop_tokens != 0) {
    fail(ErrorCode::kInvalidArgument, "fkv_generate_options.stop_tokens is NULL but n_stop_tokens is {}",
         read.n_stop_tokens);
  }
  return read;
}

GenerateOptions to_generate_options(const fkv_generate_options& options) {
  GenerateOptions cpp;
  cpp.sampling = to_sampling_params(options.sampling, "fkv_generate_options.sampling");
  cpp.max_tokens = options.max_tokens;
  if (options.n_stop_tokens != 0)
    cpp.stop_tokens.assign(options.stop_tokens, options.stop_tokens + options.n_stop_tokens);
  cpp.stop_at_eos = options.stop_at_eos != 0;
  return cpp;
}

}  // namespace flashkv::capi

using flashkv::capi::guarded;
using flashkv::capi::require;
using flashkv::capi::write_prefix;

extern "C" fkv_status fkv_load_options_init(fkv_load_options* options) {
  return guarded("fkv_load_options_init", [&] {
    write_prefix(&require(options, "options"), flashkv::capi::default_load_options(),
                 flashkv::capi::kLoadOptionsSizeV1);
  });
}

extern "C" fkv_status fkv_session_options_init(fkv_session_options* options) {
  return guarded("fkv_session_options_init", [&] {
    write_prefix(&require(options, "options"), flashkv::capi::default_session_options(),
                 flashkv::capi::kSessionOptionsSizeV1);
  });
}

extern "C" fkv_status fkv_sampling_params_init(fkv_sampling_params* params) {
  return guarded("fkv_sampling_params_init", [&] {
    write_prefix(&require(params, "params"), flashkv::capi::default_sampling_params(),
                 flashkv::capi::kSamplingParamsSizeV1);
  });
}

extern "C" fkv_status fkv_generate_options_init(fkv_generate_options* options) {
  return guarded("fkv_generate_options_init", [&] {
    write_prefix(&require(options, "options"), flashkv::capi::default_generate_options(),
                 flashkv::capi::kGenerateOptionsSizeV1);
  });
}
