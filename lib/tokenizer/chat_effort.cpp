// Reasoning effort: a level name or an integer 1-100, as the number the "Reasoning Effort: N" line carries.
// The numbers of the named levels differ between encoder releases (ChatEffortTable, docs/chat.md).
#include <charconv>
#include <string>

#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>

namespace flashkv {
namespace {

struct Level {
  std::string_view name;
  int v41_flash;      // deepseek-recipe 0.2.0 (its request conversion maps minimal->low, medium->high)
  int v41_reference;  // vLLM deepseek_v41_encoding.py (no minimal/medium there; mapped the same way)
};

constexpr Level kLevels[] = {
    {"minimal", 50, 25}, {"low", 50, 25},   {"medium", 75, 50},
    {"high", 75, 50},    {"xhigh", 75, 75}, {"max", 100, 100},
};

int level_value(const Level& level, ChatEffortTable table) {
  return table == ChatEffortTable::kV41Flash ? level.v41_flash : level.v41_reference;
}

}  // namespace

int ChatEncoder::effort_value(std::string_view effort, ChatEffortTable table) {
  if (effort.empty()) effort = "high";  // both releases default to their "high" level
  for (const Level& level : kLevels) {
    if (level.name == effort) return level_value(level, table);
  }
  int value = 0;
  const auto [end, error] = std::from_chars(effort.data(), effort.data() + effort.size(), value);
  if (error != std::errc{} || end != effort.data() + effort.size() || value < 1 || value > 100) {
    fail(ErrorCode::kInvalidArgument,
         "reasoning effort '{}': expected an integer 1-100 or one of minimal, low, medium, high, xhigh, max",
         effort);
  }
  return value;
}

}  // namespace flashkv
