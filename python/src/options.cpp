#include "options.hpp"

#include <flashkv/error.hpp>

namespace flashkv::python {

Device parse_device(std::string_view name, std::string_view field) {
  if (name == device_name(Device::kCpu)) return Device::kCpu;
  if (name == device_name(Device::kCuda)) return Device::kCuda;
  fail(ErrorCode::kInvalidArgument, "{} must be 'cpu' or 'cuda', got '{}'", field, name);
}

Numerics parse_numerics(std::string_view name, std::string_view field) {
  if (name == numerics_name(Numerics::kFaithful)) return Numerics::kFaithful;
  if (name == numerics_name(Numerics::kClean)) return Numerics::kClean;
  fail(ErrorCode::kInvalidArgument, "{} must be 'faithful' or 'clean', got '{}'", field, name);
}

PrefillMode parse_prefill(std::string_view name, std::string_view field) {
  if (name == prefill_mode_name(PrefillMode::kExact)) return PrefillMode::kExact;
  if (name == prefill_mode_name(PrefillMode::kCed)) return PrefillMode::kCed;
  fail(ErrorCode::kInvalidArgument, "{} must be 'exact' or 'ced', got '{}'", field, name);
}

std::optional<PrefillMode> parse_optional_prefill(const std::optional<std::string>& name,
                                                  std::string_view field) {
  if (!name) return std::nullopt;
  return parse_prefill(*name, field);
}

SamplingParams sampling_params(float temperature, int32_t top_k, float top_p, float min_p,
                               float repetition_penalty, float presence_penalty, float frequency_penalty,
                               uint64_t seed) {
  return SamplingParams{temperature,       top_k, top_p, min_p, repetition_penalty, presence_penalty,
                        frequency_penalty, seed};
}

const char* stop_reason_name(StopReason reason) noexcept {
  switch (reason) {
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kContextFull:
      return "context_full";
  }
  return "unknown";
}

}  // namespace flashkv::python
