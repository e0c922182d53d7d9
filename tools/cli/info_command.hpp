// `flashkv info PATH [--json]`.
#pragma once

#include <span>
#include <string_view>

namespace flashkv::cli {

// `args` are the words after "info". Returns the process exit code: 0 ok, 1 runtime error (message on
// stderr), 2 usage error.
int run_info(std::span<const std::string_view> args);

}  // namespace flashkv::cli
