#include "callbacks.hpp"

namespace flashkv::capi {

ProgressCallback wrap_progress(fkv_progress_fn progress, void* user_data) {
  if (progress == nullptr) return {};
  return [progress, user_data](int64_t done, int64_t total) { return progress(user_data, done, total) == 0; };
}

TokenCallback wrap_token(fkv_token_fn on_token, void* user_data) {
  if (on_token == nullptr) return {};
  return [on_token, user_data](int32_t token) { return on_token(user_data, token) == 0; };
}

}  // namespace flashkv::capi
