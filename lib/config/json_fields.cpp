#include "config/json_fields.hpp"

#include <limits>

#include <flashkv/error.hpp>

namespace flashkv::config {

namespace {

// Long values (a whole nested object by mistake) are cut so the message stays one readable line.
std::string short_dump(const nlohmann::json& v) {
  std::string text = v.dump();
  constexpr size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string source, std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

bool JsonFields::has(std::string_view key) const {
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

std::string JsonFields::field_name(std::string_view key) const {
  return prefix_ + std::string(key);
}

const nlohmann::json& JsonFields::value(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) fail_missing(key);
  return *it;
}

void JsonFields::fail_missing(std::string_view key) const {
  fail(ErrorCode::kInvalidConfig, "{}: required field '{}' is missing", source_, field_name(key));
}

void JsonFields::fail_type(std::string_view key, std::string_view expected, const nlohmann::json& got) const {
  fail(ErrorCode::kInvalidConfig, "{}: field '{}' must be {}, got {}", source_, field_name(key), expected,
       short_dump(got));
}

int64_t JsonFields::as_int(std::string_view key, const nlohmann::json& v, std::string_view expected) const {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail_type(key, expected, v);
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) fail_type(key, expected, v);
  return v.get<int64_t>();
}

int JsonFields::as_small_int(std::string_view key, const nlohmann::json& v, std::string_view expected) const {
  const int64_t x = as_int(key, v, expected);
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) fail_type(key, expected, v);
  return static_cast<int>(x);
}

int64_t JsonFields::required_int(std::string_view key) const {
  return as_int(key, value(key), "an integer");
}

int64_t JsonFields::optional_int(std::string_view key, int64_t fallback) const {
  return has(key) ? required_int(key) : fallback;
}

int JsonFields::required_small_int(std::string_view key) const {
  return as_small_int(key, value(key), "a 32-bit integer");
}

int JsonFields::optional_small_int(std::string_view key, int fallback) const {
  return has(key) ? required_small_int(key) : fallback;
}

double JsonFields::optional_number(std::string_view key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& v = value(key);
  if (!v.is_number()) fail_type(key, "a number", v);
  return v.get<double>();
}

bool JsonFields::optional_bool(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = value(key);
  if (!v.is_boolean()) fail_type(key, "true or false", v);
  return v.get<bool>();
}

std::string JsonFields::optional_string(std::string_view key, std::string fallback) const {
  if (!has(key)) return fallback;
  const auto& v = value(key);
  if (!v.is_string()) fail_type(key, "a string", v);
  return v.get<std::string>();
}

std::vector<int> JsonFields::required_small_int_list(std::string_view key) const {
  const auto& v = value(key);
  if (!v.is_array()) fail_type(key, "a list of integers", v);
  std::vector<int> out;
  out.reserve(v.size());
  for (const auto& item : v) out.push_back(as_small_int(key, item, "a list of 32-bit integers"));
  return out;
}

std::vector<int> JsonFields::optional_small_int_list(std::string_view key) const {
  return has(key) ? required_small_int_list(key) : std::vector<int>{};
}

std::vector<int64_t> JsonFields::optional_int_list(std::string_view key) const {
  if (!has(key)) return {};
  const auto& v = value(key);
  if (!v.is_array()) fail_type(key, "a list of integers", v);
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const auto& item : v) out.push_back(as_int(key, item, "a list of integers"));
  return out;
}

std::optional<std::vector<int64_t>> JsonFields::optional_int_list_if_array(std::string_view key) const {
  if (!has(key) || !value(key).is_array()) return std::nullopt;
  return optional_int_list(key);
}

std::vector<std::string> JsonFields::optional_string_list(std::string_view key) const {
  if (!has(key)) return {};
  const auto& v = value(key);
  if (!v.is_array()) fail_type(key, "a list of strings", v);
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (!item.is_string()) fail_type(key, "a list of strings", v);
    out.push_back(item.get<std::string>());
  }
  return out;
}

const nlohmann::json* JsonFields::optional_object(std::string_view key) const {
  if (!has(key)) return nullptr;
  const auto& v = value(key);
  if (!v.is_object()) fail_type(key, "an object", v);
  return &v;
}

}  // namespace flashkv::config
