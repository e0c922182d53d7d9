/* Compile test of flashkv.h: valid C99, C11 and C++ under -Wall -Wextra -pedantic -Werror (CTest compiles
   this file in each language), and the exact signature of every function, pinned by typed pointers (external,
   so that none is unused): a changed signature breaks every FFI binding, so it must break this file first. */
#include "flashkv.h"

#include <stddef.h>

/* The ABI 1.0 layouts on LP64 (x86-64, aarch64 Linux): the offsets FFI bindings hard-code (docs/c-abi.md).
   A failed check is a negative array size. */
#if UINTPTR_MAX == 0xffffffffffffffffu
#define FKV_LAYOUT(name, expression, value) typedef char name[(expression) == (value) ? 1 : -1]
FKV_LAYOUT(load_options_struct_size, offsetof(fkv_load_options, struct_size), 0);
FKV_LAYOUT(load_options_device, offsetof(fkv_load_options, device), 4);
FKV_LAYOUT(load_options_threads, offsetof(fkv_load_options, threads), 8);
FKV_LAYOUT(load_options_numerics, offsetof(fkv_load_options, numerics), 12);
FKV_LAYOUT(load_options_prefill, offsetof(fkv_load_options, prefill), 16);
FKV_LAYOUT(load_options_reserved0, offsetof(fkv_load_options, reserved0), 20);
FKV_LAYOUT(load_options_prefill_chunk, offsetof(fkv_load_options, prefill_chunk), 24);
FKV_LAYOUT(load_options_log, offsetof(fkv_load_options, log), 32);
FKV_LAYOUT(load_options_log_user_data, offsetof(fkv_load_options, log_user_data), 40);
FKV_LAYOUT(size_of_load_options, sizeof(fkv_load_options), 48);
FKV_LAYOUT(session_options_struct_size, offsetof(fkv_session_options, struct_size), 0);
FKV_LAYOUT(session_options_prefill, offsetof(fkv_session_options, prefill), 4);
FKV_LAYOUT(session_options_prefill_chunk, offsetof(fkv_session_options, prefill_chunk), 8);
FKV_LAYOUT(size_of_session_options, sizeof(fkv_session_options), 16);
FKV_LAYOUT(sampling_params_struct_size, offsetof(fkv_sampling_params, struct_size), 0);
FKV_LAYOUT(sampling_params_temperature, offsetof(fkv_sampling_params, temperature), 4);
FKV_LAYOUT(sampling_params_top_k, offsetof(fkv_sampling_params, top_k), 8);
FKV_LAYOUT(sampling_params_top_p, offsetof(fkv_sampling_params, top_p), 12);
FKV_LAYOUT(sampling_params_min_p, offsetof(fkv_sampling_params, min_p), 16);
FKV_LAYOUT(sampling_params_repetition_penalty, offsetof(fkv_sampling_params, repetition_penalty), 20);
FKV_LAYOUT(sampling_params_presence_penalty, offsetof(fkv_sampling_params, presence_penalty), 24);
FKV_LAYOUT(sampling_params_frequency_penalty, offsetof(fkv_sampling_params, frequency_penalty), 28);
FKV_LAYOUT(sampling_params_seed, offsetof(fkv_sampling_params, seed), 32);
FKV_LAYOUT(size_of_sampling_params, sizeof(fkv_sampling_params), 40);
FKV_LAYOUT(generate_options_struct_size, offsetof(fkv_generate_options, struct_size), 0);
FKV_LAYOUT(generate_options_stop_at_eos, offsetof(fkv_generate_options, stop_at_eos), 4);
FKV_LAYOUT(generate_options_max_tokens, offsetof(fkv_generate_options, max_tokens), 8);
FKV_LAYOUT(generate_options_sampling, offsetof(fkv_generate_options, sampling), 16);
FKV_LAYOUT(generate_options_stop_tokens, offsetof(fkv_generate_options, stop_tokens), 24);
FKV_LAYOUT(generate_options_n_stop_tokens, offsetof(fkv_generate_options, n_stop_tokens), 32);
FKV_LAYOUT(generate_options_on_token, offsetof(fkv_generate_options, on_token), 40);
FKV_LAYOUT(generate_options_on_token_user_data, offsetof(fkv_generate_options, on_token_user_data), 48);
FKV_LAYOUT(generate_options_on_progress, offsetof(fkv_generate_options, on_progress), 56);
FKV_LAYOUT(generate_options_on_progress_user_data, offsetof(fkv_generate_options, on_progress_user_data), 64);
FKV_LAYOUT(size_of_generate_options, sizeof(fkv_generate_options), 72);
FKV_LAYOUT(config_struct_size, offsetof(fkv_config, struct_size), 0);
FKV_LAYOUT(config_num_hidden_layers, offsetof(fkv_config, num_hidden_layers), 4);
FKV_LAYOUT(config_vocab_size, offsetof(fkv_config, vocab_size), 8);
FKV_LAYOUT(config_hidden_size, offsetof(fkv_config, hidden_size), 16);
FKV_LAYOUT(config_num_attention_heads, offsetof(fkv_config, num_attention_heads), 24);
FKV_LAYOUT(config_head_dim, offsetof(fkv_config, head_dim), 32);
FKV_LAYOUT(config_qk_rope_head_dim, offsetof(fkv_config, qk_rope_head_dim), 40);
FKV_LAYOUT(config_sliding_window, offsetof(fkv_config, sliding_window), 48);
FKV_LAYOUT(config_max_position_embeddings, offsetof(fkv_config, max_position_embeddings), 56);
FKV_LAYOUT(config_n_routed_experts, offsetof(fkv_config, n_routed_experts), 64);
FKV_LAYOUT(config_n_shared_experts, offsetof(fkv_config, n_shared_experts), 72);
FKV_LAYOUT(config_num_experts_per_tok, offsetof(fkv_config, num_experts_per_tok), 80);
FKV_LAYOUT(config_moe_intermediate_size, offsetof(fkv_config, moe_intermediate_size), 88);
FKV_LAYOUT(config_index_topk, offsetof(fkv_config, index_topk), 96);
FKV_LAYOUT(config_bos_token_id, offsetof(fkv_config, bos_token_id), 104);
FKV_LAYOUT(config_eos_token_id, offsetof(fkv_config, eos_token_id), 112);
FKV_LAYOUT(config_num_nextn_predict_layers, offsetof(fkv_config, num_nextn_predict_layers), 120);
FKV_LAYOUT(config_num_engram_layers, offsetof(fkv_config, num_engram_layers), 124);
FKV_LAYOUT(size_of_config, sizeof(fkv_config), 128);
FKV_LAYOUT(memory_struct_size, offsetof(fkv_memory, struct_size), 0);
FKV_LAYOUT(memory_reserved0, offsetof(fkv_memory, reserved0), 4);
FKV_LAYOUT(memory_global_kv_bytes_per_token, offsetof(fkv_memory, global_kv_bytes_per_token), 8);
FKV_LAYOUT(memory_kv_entry_bytes, offsetof(fkv_memory, kv_entry_bytes), 16);
FKV_LAYOUT(memory_index_key_bytes, offsetof(fkv_memory, index_key_bytes), 24);
FKV_LAYOUT(memory_window_row_bytes, offsetof(fkv_memory, window_row_bytes), 32);
FKV_LAYOUT(memory_window_bytes_per_session, offsetof(fkv_memory, window_bytes_per_session), 40);
FKV_LAYOUT(memory_compressor_state_bytes_per_session,
           offsetof(fkv_memory, compressor_state_bytes_per_session), 48);
FKV_LAYOUT(memory_weight_bytes_estimate, offsetof(fkv_memory, weight_bytes_estimate), 56);
FKV_LAYOUT(memory_resident_weight_bytes, offsetof(fkv_memory, resident_weight_bytes), 64);
FKV_LAYOUT(memory_parameters_total, offsetof(fkv_memory, parameters_total), 72);
FKV_LAYOUT(memory_parameters_active_per_token, offsetof(fkv_memory, parameters_active_per_token), 80);
FKV_LAYOUT(memory_weight_storage, offsetof(fkv_memory, weight_storage), 88);
FKV_LAYOUT(size_of_memory, sizeof(fkv_memory), 96);
#endif

const char* (*status_string)(fkv_status) = fkv_status_string;
const char* (*last_error)(void) = fkv_last_error;
uint32_t (*abi_version)(void) = fkv_abi_version;
const char* (*version_string)(void) = fkv_version_string;
fkv_status (*load_options_init)(fkv_load_options*) = fkv_load_options_init;
fkv_status (*session_options_init)(fkv_session_options*) = fkv_session_options_init;
fkv_status (*sampling_params_init)(fkv_sampling_params*) = fkv_sampling_params_init;
fkv_status (*generate_options_init)(fkv_generate_options*) = fkv_generate_options_init;
fkv_status (*model_load)(uint32_t, const char*, const fkv_load_options*, fkv_model**) = fkv_model_load;
void (*model_free)(fkv_model*) = fkv_model_free;
fkv_status (*model_load_options)(const fkv_model*, fkv_load_options*) = fkv_model_load_options;
fkv_status (*model_config)(const fkv_model*, fkv_config*) = fkv_model_config;
fkv_status (*model_memory)(const fkv_model*, fkv_memory*) = fkv_model_memory;
fkv_status (*model_global_kv_bytes)(const fkv_model*, uint64_t, uint64_t*) = fkv_model_global_kv_bytes;
fkv_status (*session_create)(const fkv_model*, const fkv_session_options*,
                             fkv_session**) = fkv_session_create;
void (*session_free)(fkv_session*) = fkv_session_free;
fkv_status (*session_append)(fkv_session*, const int32_t*, uint64_t, fkv_progress_fn,
                             void*) = fkv_session_append;
fkv_status (*session_logits)(const fkv_session*, float*, uint64_t*) = fkv_session_logits;
fkv_status (*session_sample)(const fkv_session*, const fkv_sampling_params*, int32_t*) = fkv_session_sample;
fkv_status (*session_generate)(fkv_session*, const int32_t*, uint64_t, const fkv_generate_options*, int32_t*,
                               uint64_t, uint64_t*, int32_t*) = fkv_session_generate;
fkv_status (*session_rewind)(fkv_session*, int64_t) = fkv_session_rewind;
fkv_status (*session_length)(const fkv_session*, int64_t*) = fkv_session_length;
fkv_status (*session_tokens)(const fkv_session*, int32_t*, uint64_t*) = fkv_session_tokens;
fkv_status (*session_kv_bytes)(const fkv_session*, int64_t*) = fkv_session_kv_bytes;
fkv_status (*session_kv)(const fkv_session*, fkv_kv**) = fkv_session_kv;
fkv_status (*session_restore)(fkv_session*, const fkv_kv*) = fkv_session_restore;
fkv_status (*decode)(fkv_session* const*, const int32_t*, uint64_t) = fkv_decode;
fkv_status (*kv_fork)(const fkv_kv*, fkv_kv**) = fkv_kv_fork;
void (*kv_free)(fkv_kv*) = fkv_kv_free;
fkv_status (*kv_tokens)(const fkv_kv*, int32_t*, uint64_t*) = fkv_kv_tokens;
fkv_status (*kv_bytes)(const fkv_kv*, int64_t*) = fkv_kv_bytes;
/* ABI 1.1 */
fkv_status (*tokenize)(const fkv_model*, const char*, uint64_t, int32_t, int32_t*, uint64_t*) = fkv_tokenize;
fkv_status (*detokenize)(const fkv_model*, const int32_t*, uint64_t, int32_t, char*, uint64_t*) = fkv_detokenize;
fkv_status (*chat_encode)(const fkv_model*, const char*, uint64_t, int32_t*, uint64_t*) = fkv_chat_encode;

int32_t (*token_callback)(void*, int32_t) = (fkv_token_fn)0;
int32_t (*progress_callback)(void*, int64_t, int64_t) = (fkv_progress_fn)0;
int32_t (*log_callback)(void*, int32_t, const char*) = (fkv_log_fn)0;

int main(void) {
  const int32_t constants[] = {FKV_OK,
                               FKV_ERR_INVALID_ARGUMENT,
                               FKV_ERR_INVALID_CONFIG,
                               FKV_ERR_INVALID_CHECKPOINT,
                               FKV_ERR_NOT_FOUND,
                               FKV_ERR_IO,
                               FKV_ERR_UNSUPPORTED,
                               FKV_ERR_DEVICE,
                               FKV_ERR_OUT_OF_MEMORY,
                               FKV_ERR_CANCELLED,
                               FKV_ERR_INTERNAL,
                               FKV_DEVICE_CPU,
                               FKV_DEVICE_CUDA,
                               FKV_NUMERICS_CLEAN,
                               FKV_NUMERICS_FAITHFUL,
                               FKV_PREFILL_MODEL,
                               FKV_PREFILL_EXACT,
                               FKV_PREFILL_CED,
                               FKV_STOP_MAX_TOKENS,
                               FKV_STOP_TOKEN,
                               FKV_STOP_CONTEXT_FULL,
                               FKV_LOG_DEBUG,
                               FKV_LOG_INFO,
                               FKV_LOG_WARNING,
                               FKV_LOG_ERROR};
  const uint32_t version = FKV_ABI_VERSION;
  const size_t sizes = sizeof(fkv_load_options) + sizeof(fkv_session_options) + sizeof(fkv_sampling_params) +
                       sizeof(fkv_generate_options) + sizeof(fkv_config) + sizeof(fkv_memory);
  return version == 0x00010001u && sizes > 0 && constants[0] == 0 ? 0 : 1;
}
