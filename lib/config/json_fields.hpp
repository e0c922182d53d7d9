// Typed, error-reporting access to the fields of one JSON object of config.json.
// Why: every field read must fail with a message naming the file and the field (as it is spelled in the
// file, e.g. 'text_config.head_dim') and saying what was expected, never with a JSON library exception.
// A field whose value is null counts as absent (HF writes null for unset optional fields).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashkv::config {

class JsonFields {
 public:
  // `object` must outlive this reader. `prefix` is prepended to field names in messages ("text_config.").
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix);

  bool has(std::string_view key) const;
  std::string field_name(std::string_view key) const;
  const std::string& source() const { return source_; }

  int64_t required_int(std::string_view key) const;
  int64_t optional_int(std::string_view key, int64_t fallback) const;
  int required_small_int(std::string_view key) const;  // fits in int (layer ids, counts)
  int optional_small_int(std::string_view key, int fallback) const;
  double optional_number(std::string_view key, double fallback) const;
  bool optional_bool(std::string_view key, bool fallback) const;
  std::string optional_string(std::string_view key, std::string fallback) const;
  std::vector<int> required_small_int_list(std::string_view key) const;
  std::vector<int> optional_small_int_list(std::string_view key) const;  // empty when absent
  std::vector<int64_t> optional_int_list(std::string_view key) const;    // empty when absent
  // The list under `key` when its value is an array, nullopt when it is anything else (or absent).
  std::optional<std::vector<int64_t>> optional_int_list_if_array(std::string_view key) const;
  std::vector<std::string> optional_string_list(std::string_view key) const;

  // The nested object under `key`, or nullptr when absent; fails when present but not an object.
  const nlohmann::json* optional_object(std::string_view key) const;

 private:
  const nlohmann::json& value(std::string_view key) const;
  [[noreturn]] void fail_missing(std::string_view key) const;
  [[noreturn]] void fail_type(std::string_view key, std::string_view expected,
                              const nlohmann::json& got) const;
  int64_t as_int(std::string_view key, const nlohmann::json& v, std::string_view expected) const;
  int as_small_int(std::string_view key, const nlohmann::json& v, std::string_view expected) const;

  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace flashkv::config
