// flashkv::Error — the one exception type the C++ API throws.
//
// Contract: every failure a caller can cause or observe (bad file, bad config field, bad argument,
// unsupported feature, device failure) surfaces as flashkv::Error carrying an ErrorCode and a message
// that names the file, tensor, field or argument at fault. Code values are stable: the C ABI maps them
// one to one onto fkv_status, so never renumber, only append.
// Threading: Error is an ordinary value type; nothing here is shared.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace flashkv {

enum class ErrorCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,   // a caller-supplied value is out of range or inconsistent
  kInvalidConfig = 2,     // config.json is malformed or breaks a rule of the model
  kInvalidCheckpoint = 3, // a checkpoint file is malformed, truncated, or disagrees with the config
  kNotFound = 4,          // a file, tensor or key that must exist does not
  kIo = 5,                // the OS refused a read, write, open or map
  kUnsupported = 6,       // valid input this build cannot handle (dtype, feature, device)
  kDevice = 7,            // a CUDA call failed
  kOutOfMemory = 8,
  kCancelled = 9,         // a callback asked to stop
  kInternal = 10,         // a broken invariant inside flashkv: a bug, please report it
};

// Stable lower-case name of a code ("invalid_config"), for messages and bindings.
std::string_view error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Throws Error(code, formatted message). Kept out of line of hot paths by callers' own checks.
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace flashkv
