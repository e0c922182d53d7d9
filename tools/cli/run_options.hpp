// The options of `flashkv run` and their parser. Usage errors are reported here
// (one line on stderr).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <flashkv/model.hpp>
#include <flashkv/sampling.hpp>

namespace flashkv::cli {

struct RunOptions {
  std::string model_dir;
  std::vector<int32_t> prompt;
  std::optional<std::string> prompt_text;  // --prompt: encoded with the checkpoint's tokenizer after BOS
  std::string chat_file;                   // --chat: OpenAI-style chat JSON, encoded as a V4.1 prompt
  int64_t max_tokens = 16;
  SamplingParams sampling;  // temperature 0 (greedy) unless --temperature is given
  LoadOptions load;
  int64_t prefill_chunk = 0;  // 0: the model's default
  std::vector<int32_t> stop_tokens;
  bool ignore_eos = false;
  bool json = false;
};

// Parses the words after "run"; prints one line on stderr and returns nullopt
// on a usage error.
std::optional<RunOptions> parse_run_options(std::span<const std::string_view> args);

}  // namespace flashkv::cli
