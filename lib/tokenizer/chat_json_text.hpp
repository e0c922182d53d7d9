// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, because the V4.1 prompt was
// trained on that spelling: ", " and ": " separators, floats in repr() form (1e+20, 1.5e-07, 100000.0),
// keys in their original order, non-ASCII characters verbatim, control characters as \uXXXX.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace flashkv::chat {

using Json = nlohmann::ordered_json;

// Appends the Python spelling of `value` to `out`.
void append_python_json(const Json& value, std::string& out);
std::string python_json(const Json& value);
// A JSON string literal of `text` (quotes included), escaped as json.dumps does.
std::string python_json_string(std::string_view text);

// Parses `text` as JSON keeping key order; nullopt when it is not valid JSON or holds a non-finite number.
std::optional<Json> parse_json(std::string_view text);

}  // namespace flashkv::chat
