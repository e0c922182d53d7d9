// The C callbacks of flashkv.h (user_data first, non-zero return cancels) as the C++ API's callbacks
// (true continues). An absent C callback becomes an empty std::function, which the C++ API skips.
#pragma once

#include <flashkv/generate.hpp>

#include "flashkv.h"

namespace flashkv::capi {

ProgressCallback wrap_progress(fkv_progress_fn progress, void* user_data);
TokenCallback wrap_token(fkv_token_fn on_token, void* user_data);

}  // namespace flashkv::capi
