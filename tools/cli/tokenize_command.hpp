// `flashkv tokenize -m DIR --text T [--json] [--special]`: the token ids of a text under a checkpoint's
// tokenizer.json (DIR needs only that file, and optionally tokenizer_config.json).
#pragma once

#include <span>
#include <string_view>

namespace flashkv::cli {

extern const char* const kTokenizeUsage;

// `args` are the words after "tokenize". Returns 0 ok, 1 runtime error (stderr), 2 usage error.
int run_tokenize(std::span<const std::string_view> args);

}  // namespace flashkv::cli
