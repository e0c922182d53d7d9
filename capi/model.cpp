// fkv_model: load with the ABI version check and the log callback, free, and the config / memory queries.
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "boundary.hpp"
#include "handles.hpp"
#include "options.hpp"
#include "struct_io.hpp"

namespace flashkv::capi {

namespace {

constexpr uint32_t kAbiMajor = FKV_ABI_VERSION >> 16;
constexpr uint32_t kAbiMinor = FKV_ABI_VERSION & 0xffffu;

// A caller may use this library if it speaks the same major version and expects nothing newer.
void check_abi_version(uint32_t caller) {
  const uint32_t major = caller >> 16, minor = caller & 0xffffu;
  if (major != kAbiMajor || minor > kAbiMinor) {
    fail(ErrorCode::kUnsupported,
         "abi_version {}.{} (0x{:08x}) of the caller's flashkv.h does not match this libflashkv's ABI {}.{}: "
         "pass FKV_ABI_VERSION and build against the flashkv.h installed with the library",
         major, minor, caller, kAbiMajor, kAbiMinor);
  }
}

void check_path(const char* checkpoint_dir) {
  if (require(checkpoint_dir, "checkpoint_dir") == '\0') {  // require gives the first character
    fail(ErrorCode::kInvalidArgument, "checkpoint_dir is empty (give the checkpoint's directory)");
  }
}

// Hands a line to the host's log callback; its non-zero return cancels the load.
void log_line(const fkv_load_options& options, int32_t level, const std::string& line) {
  if (options.log == nullptr) return;
  if (options.log(options.log_user_data, level, line.c_str()) != 0) {
    fail(ErrorCode::kCancelled, "load cancelled by the log callback");
  }
}

std::string describe(const LoadOptions& options) {
  return fmt::format("device {}, numerics {}, prefill {}, threads {}, prefill_chunk {}",
                     device_name(options.device), numerics_name(options.numerics),
                     prefill_mode_name(options.prefill), options.threads, options.prefill_chunk);
}

Model load_logged(const char* checkpoint_dir, const fkv_load_options& c_options) {
  const LoadOptions options = to_load_options(c_options);
  log_line(c_options, FKV_LOG_INFO, fmt::format("loading {} ({})", checkpoint_dir, describe(options)));
  try {
    Model model = Model::load(std::filesystem::path(checkpoint_dir), options);
    const ModelMemory memory = model.memory();
    log_line(c_options, FKV_LOG_INFO,
             fmt::format("loaded {}: {} layers, vocab {}, {} weight bytes ({})", checkpoint_dir,
                         model.config().num_hidden_layers, model.vocab_size(), memory.resident_weight_bytes,
                         memory.weight_storage));
    return model;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCancelled && c_options.log != nullptr) {
      c_options.log(c_options.log_user_data, FKV_LOG_ERROR, e.what());  // failing anyway: return ignored
    }
    throw;
  }
}

fkv_config config_of(const Model& model) {
  const ModelConfig& c = model.config();
  fkv_config out{};
  out.num_hidden_layers = c.num_hidden_layers;
  out.vocab_size = c.vocab_size;
  out.hidden_size = c.hidden_size;
  out.num_attention_heads = c.num_attention_heads;
  out.head_dim = c.head_dim;
  out.qk_rope_head_dim = c.qk_rope_head_dim;
  out.sliding_window = c.sliding_window;
  out.max_position_embeddings = c.max_position_embeddings;
  out.n_routed_experts = c.n_routed_experts;
  out.n_shared_experts = c.n_shared_experts;
  out.num_experts_per_tok = c.num_experts_per_tok;
  out.moe_intermediate_size = c.moe_intermediate_size;
  out.index_topk = c.index_topk;
  out.bos_token_id = c.bos_token_id;
  out.eos_token_id = c.eos_token_id;
  out.num_nextn_predict_layers = c.num_nextn_predict_layers;
  out.num_engram_layers = static_cast<int32_t>(c.engram_layer_ids.size());
  return out;
}

}  // namespace

}  // namespace flashkv::capi

using flashkv::capi::guarded;
using flashkv::capi::require;

extern "C" uint32_t fkv_abi_version(void) {
  return FKV_ABI_VERSION;
}

extern "C" const char* fkv_version_string(void) {
  return FLASHKV_VERSION_STRING;
}

extern "C" fkv_status fkv_model_load(uint32_t abi_version, const char* checkpoint_dir,
                                     const fkv_load_options* options, fkv_model** out_model) {
  return guarded("fkv_model_load", [&] {
    flashkv::capi::check_abi_version(abi_version);
    flashkv::capi::check_path(checkpoint_dir);
    fkv_model*& out = require(out_model, "out_model");
    const fkv_load_options read = flashkv::capi::read_load_options(options);
    flashkv::Model model = flashkv::capi::load_logged(checkpoint_dir, read);
    flashkv::ModelMemory memory = model.memory();
    out = new fkv_model{std::move(model), std::move(memory)};
  });
}

extern "C" void fkv_model_free(fkv_model* model) {
  delete model;
}

extern "C" fkv_status fkv_model_load_options(const fkv_model* model, fkv_load_options* options) {
  return guarded("fkv_model_load_options", [&] {
    const fkv_model& m = require(model, "model");
    flashkv::capi::write_struct(require(options, "options"),
                                flashkv::capi::from_load_options(m.model.options()),
                                flashkv::capi::kLoadOptionsSizeV1, "fkv_load_options");
  });
}

extern "C" fkv_status fkv_model_config(const fkv_model* model, fkv_config* config) {
  return guarded("fkv_model_config", [&] {
    const fkv_model& m = require(model, "model");
    flashkv::capi::write_struct(require(config, "config"), flashkv::capi::config_of(m.model),
                                flashkv::capi::kConfigSizeV1, "fkv_config");
  });
}

extern "C" fkv_status fkv_model_memory(const fkv_model* model, fkv_memory* memory) {
  return guarded("fkv_model_memory", [&] {
    const fkv_model& m = require(model, "model");
    fkv_memory& out = require(memory, "memory");
    const flashkv::MemoryReport& r = m.memory.report;
    fkv_memory value{};
    value.global_kv_bytes_per_token = r.global_kv_bytes_per_token;
    value.kv_entry_bytes = r.kv_entry_bytes;
    value.index_key_bytes = r.index_key_bytes;
    value.window_row_bytes = r.window_row_bytes;
    value.window_bytes_per_session = r.window_bytes_per_session;
    value.compressor_state_bytes_per_session = r.compressor_state_bytes_per_session;
    value.weight_bytes_estimate = r.weight_bytes;
    value.resident_weight_bytes = m.memory.resident_weight_bytes;
    value.parameters_total = r.parameters.total;
    value.parameters_active_per_token = r.parameters.active_per_token;
    value.weight_storage = m.memory.weight_storage.c_str();
    flashkv::capi::write_struct(out, value, flashkv::capi::kMemorySizeV1, "fkv_memory");
  });
}

extern "C" fkv_status fkv_model_global_kv_bytes(const fkv_model* model, uint64_t tokens,
                                                uint64_t* out_bytes) {
  return guarded("fkv_model_global_kv_bytes", [&] {
    const fkv_model& m = require(model, "model");
    uint64_t& out = require(out_bytes, "out_bytes");
    out = m.memory.report.global_kv_bytes(tokens);
  });
}
