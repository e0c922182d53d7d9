// The exception boundary of the C ABI: every entry point runs its body through `guarded`, which turns any
// exception into an fkv_status and the calling thread's fkv_last_error() message, so nothing unwinds into C.
#pragma once

#include <string>

#include <flashkv/error.hpp>

#include "flashkv.h"

namespace flashkv::capi {

// Maps the exception being handled (call only inside a catch block) to a status and records its message,
// prefixed with `function`, as this thread's last error. Never throws.
fkv_status status_of_current_exception(const char* function) noexcept;

template <typename Body>
fkv_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return FKV_OK;
  } catch (...) {
    return status_of_current_exception(function);
  }
}

// Throws Error(kInvalidArgument) naming `what` when `pointer` is NULL; returns *pointer otherwise.
template <typename T>
T& require(T* pointer, const char* what) {
  if (pointer == nullptr) fail(ErrorCode::kInvalidArgument, "{} is NULL", what);
  return *pointer;
}

}  // namespace flashkv::capi
