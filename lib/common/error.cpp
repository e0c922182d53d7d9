#include <flashkv/error.hpp>

namespace flashkv {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInvalidConfig: return "invalid_config";
    case ErrorCode::kInvalidCheckpoint: return "invalid_checkpoint";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kDevice: return "device";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace flashkv
