// Status mapping and the thread-local last-error message.
#include "boundary.hpp"

#include <exception>
#include <new>
#include <string_view>

namespace flashkv::capi {

namespace {

thread_local std::string last_error_message;

// fkv_status values are the C++ ErrorCode values (flashkv.h promises it); checked here once for all.
static_assert(FKV_OK == static_cast<int32_t>(ErrorCode::kOk));
static_assert(FKV_ERR_INVALID_ARGUMENT == static_cast<int32_t>(ErrorCode::kInvalidArgument));
static_assert(FKV_ERR_INVALID_CONFIG == static_cast<int32_t>(ErrorCode::kInvalidConfig));
static_assert(FKV_ERR_INVALID_CHECKPOINT == static_cast<int32_t>(ErrorCode::kInvalidCheckpoint));
static_assert(FKV_ERR_NOT_FOUND == static_cast<int32_t>(ErrorCode::kNotFound));
static_assert(FKV_ERR_IO == static_cast<int32_t>(ErrorCode::kIo));
static_assert(FKV_ERR_UNSUPPORTED == static_cast<int32_t>(ErrorCode::kUnsupported));
static_assert(FKV_ERR_DEVICE == static_cast<int32_t>(ErrorCode::kDevice));
static_assert(FKV_ERR_OUT_OF_MEMORY == static_cast<int32_t>(ErrorCode::kOutOfMemory));
static_assert(FKV_ERR_CANCELLED == static_cast<int32_t>(ErrorCode::kCancelled));
static_assert(FKV_ERR_INTERNAL == static_cast<int32_t>(ErrorCode::kInternal));

constexpr fkv_status kLastStatus = FKV_ERR_INTERNAL;

fkv_status record(fkv_status status, const char* function, std::string_view message) noexcept {
  try {
    last_error_message.assign(function);
    last_error_message.append(": ");
    last_error_message.append(message);
  } catch (...) {
    // Out of memory while building the message: keep a static one rather than lose the status.
    last_error_message.clear();
  }
  return status;
}

}  // namespace

fkv_status status_of_current_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return record(static_cast<fkv_status>(e.code()), function, e.what());
  } catch (const std::bad_alloc&) {
    return record(FKV_ERR_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception& e) {
    return record(FKV_ERR_INTERNAL, function, e.what());
  } catch (...) {
    return record(FKV_ERR_INTERNAL, function, "an unknown exception (a bug in flashkv, please report it)");
  }
}

}  // namespace flashkv::capi

extern "C" const char* fkv_last_error(void) {
  return flashkv::capi::last_error_message.c_str();
}

extern "C" const char* fkv_status_string(fkv_status status) {
  if (status < FKV_OK || status > flashkv::capi::kLastStatus) return "unknown";
  // error_code_name returns views of string literals, so .data() is NUL-terminated static storage.
  return flashkv::error_code_name(static_cast<flashkv::ErrorCode>(status)).data();
}
