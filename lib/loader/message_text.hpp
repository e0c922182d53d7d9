// Quoting of untrusted names (tensor names, shard paths) for error messages: a hostile checkpoint must
// not be able to flood a log line or smuggle control characters into it.
#pragma once

#include <string>
#include <string_view>

namespace flashkv::loader {

// `text` in single quotes, control and non-ASCII bytes as \xNN, cut after 160 bytes with "...".
std::string quote_untrusted(std::string_view text);

}  // namespace flashkv::loader
