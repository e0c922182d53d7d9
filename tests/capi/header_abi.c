/* Compile test of flashkv.h: valid C99, C11 and C++ under -Wall -Wextra -pedantic -Werror (CTest compiles
   this file in each language), and the exact signature of every function, pinned by typed pointers (external,
   so that none is unused): a changed signature breaks every FFI binding, so it must break this file first. */
#include "flashkv.h"

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
  return version == 0x00010000u && sizes > 0 && constants[0] == 0 ? 0 : 1;
}
