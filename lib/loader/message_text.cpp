#include "loader/message_text.hpp"

#include <fmt/format.h>

namespace flashkv::loader {

std::string quote_untrusted(std::string_view text) {
  constexpr std::size_t kMaxShown = 160;
  std::string out = "'";
  const std::size_t shown = text.size() > kMaxShown ? kMaxShown : text.size();
  for (std::size_t i = 0; i < shown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte >= 0x7f || byte == '\\') {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += static_cast<char>(byte);
    }
  }
  if (shown < text.size()) out += "...";
  out += "'";
  return out;
}

}  // namespace flashkv::loader
