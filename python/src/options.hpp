// Python-side option values -> the C++ API's option structs. Names are the C++ API's lower-case names
// (device_name, numerics_name, prefill_mode_name), so Python and `flashkv run` spell options the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <flashkv/generate.hpp>
#include <flashkv/model.hpp>
#include <flashkv/sampling.hpp>

namespace flashkv::python {

// Each throws flashkv::Error(kInvalidArgument) naming `field` and the accepted values.
Device parse_device(std::string_view name, std::string_view field);
Numerics parse_numerics(std::string_view name, std::string_view field);
PrefillMode parse_prefill(std::string_view name, std::string_view field);
std::optional<PrefillMode> parse_optional_prefill(const std::optional<std::string>& name,
                                                  std::string_view field);

// "max_tokens", "stop_token", "context_full".
const char* stop_reason_name(StopReason reason) noexcept;

// The keyword arguments of Session.sample and Session.generate, in SamplingParams' field order. Not validated
// here: the C++ API validates where it uses them (validate_sampling_params names the field).
SamplingParams sampling_params(float temperature, int32_t top_k, float top_p, float min_p,
                               float repetition_penalty, float presence_penalty, float frequency_penalty,
                               uint64_t seed);

}  // namespace flashkv::python
