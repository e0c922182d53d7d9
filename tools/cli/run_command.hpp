// `flashkv run -m DIR --prompt-ids 1,2,3 [options]`: generation from a
// checkpoint with timing and KV figures.
#pragma once

#include <span>
#include <string_view>

namespace flashkv::cli {

// Usage text of `run`, shown by `flashkv --help` and on usage errors.
extern const char* const kRunUsage;

// `args` are the words after "run". Returns the process exit code: 0 ok, 1
// runtime error (one line on stderr naming what is wrong), 2 usage error.
int run_run(std::span<const std::string_view> args);

}  // namespace flashkv::cli
