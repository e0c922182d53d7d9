#include "bridge.h"

#include "_cgo_export.h"

static void *user_data_of(uintptr_t handle) { return (void *)handle; }

fkv_status flashkv_go_load(const char *path, fkv_load_options options, uintptr_t log_handle, fkv_model **out) {
  if (log_handle != 0) {
    options.log = (fkv_log_fn)flashkvGoLog;
    options.log_user_data = user_data_of(log_handle);
  }
  return fkv_model_load(FKV_ABI_VERSION, path, &options, out);
}

fkv_status flashkv_go_append(fkv_session *session, const int32_t *tokens, uint64_t n_tokens,
                             uintptr_t progress_handle) {
  if (progress_handle == 0) return fkv_session_append(session, tokens, n_tokens, NULL, NULL);
  return fkv_session_append(session, tokens, n_tokens, (fkv_progress_fn)flashkvGoProgress,
                            user_data_of(progress_handle));
}

fkv_status flashkv_go_generate(fkv_session *session, const int32_t *prompt, uint64_t n_prompt,
                               fkv_generate_options options, const fkv_sampling_params *sampling,
                               const int32_t *stop_tokens, uint64_t n_stop_tokens, uintptr_t token_handle,
                               uintptr_t progress_handle, int32_t *stop_reason) {
  options.sampling = sampling;
  options.stop_tokens = stop_tokens;
  options.n_stop_tokens = n_stop_tokens;
  options.on_token = (fkv_token_fn)flashkvGoToken;
  options.on_token_user_data = user_data_of(token_handle);
  if (progress_handle != 0) {
    options.on_progress = (fkv_progress_fn)flashkvGoProgress;
    options.on_progress_user_data = user_data_of(progress_handle);
  }
  return fkv_session_generate(session, prompt, n_prompt, &options, NULL, 0, NULL, stop_reason);
}
