#include "run_options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>

namespace flashkv::cli {

namespace {

struct UsageError {
  std::string message;
};

template <typename T>
T parse_integer(std::string_view option, std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw UsageError{std::string(option) + " expects an integer, got '" + std::string(text) + "'"};
  }
  return value;
}

float parse_float(std::string_view option, std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const float value = std::strtof(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value)) {
    throw UsageError{std::string(option) + " expects a finite number, got '" + copy + "'"};
  }
  return value;
}

std::vector<int32_t> parse_id_list(std::string_view option, std::string_view text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view part = text.substr(start, comma - start);
    if (!part.empty()) ids.push_back(parse_integer<int32_t>(option, part));
    start = comma + 1;
  }
  return ids;
}

template <typename Enum>
Enum parse_choice(std::string_view option, std::string_view text, std::string_view first, Enum first_value,
                  std::string_view second, Enum second_value) {
  if (text == first) return first_value;
  if (text == second) return second_value;
  throw UsageError{std::string(option) + " expects " + std::string(first) + " or " + std::string(second) +
                   ", got '" + std::string(text) + "'"};
}

// Applies one option that takes a value.
void apply_valued(RunOptions& o, std::string_view option, std::string_view value) {
  if (option == "-m" || option == "--model") {
    o.model_dir = std::string(value);
  } else if (option == "--prompt-ids") {
    o.prompt = parse_id_list(option, value);
    if (o.prompt.empty()) throw UsageError{"--prompt-ids is empty"};
  } else if (option == "--prompt") {
    o.prompt_text = std::string(value);
  } else if (option == "--chat") {
    o.chat_file = std::string(value);
  } else if (option == "-n") {
    o.max_tokens = parse_integer<int64_t>(option, value);
    if (o.max_tokens < 0) throw UsageError{"-n must be >= 0"};
  } else if (option == "--temperature") {
    o.sampling.temperature = parse_float(option, value);
  } else if (option == "--top-p") {
    o.sampling.top_p = parse_float(option, value);
  } else if (option == "--top-k") {
    o.sampling.top_k = parse_integer<int32_t>(option, value);
  } else if (option == "--min-p") {
    o.sampling.min_p = parse_float(option, value);
  } else if (option == "--repetition-penalty") {
    o.sampling.repetition_penalty = parse_float(option, value);
  } else if (option == "--presence-penalty") {
    o.sampling.presence_penalty = parse_float(option, value);
  } else if (option == "--seed") {
    o.sampling.seed = parse_integer<uint64_t>(option, value);
  } else if (option == "--device") {
    o.load.device = parse_choice(option, value, "cpu", Device::kCpu, "cuda", Device::kCuda);
  } else if (option == "--prefill") {
    o.load.prefill = parse_choice(option, value, "exact", PrefillMode::kExact, "ced", PrefillMode::kCed);
  } else if (option == "--numerics") {
    o.load.numerics = parse_choice(option, value, "clean", Numerics::kClean, "faithful", Numerics::kFaithful);
  } else if (option == "--threads") {
    o.load.threads = parse_integer<int>(option, value);
    if (o.load.threads < 0) throw UsageError{"--threads must be >= 0"};
  } else if (option == "--prefill-chunk") {
    o.prefill_chunk = parse_integer<int64_t>(option, value);
    if (o.prefill_chunk <= 0) throw UsageError{"--prefill-chunk must be > 0"};
  } else if (option == "--stop-ids") {
    o.stop_tokens = parse_id_list(option, value);
  } else {
    throw UsageError{"option '" + std::string(option) + "' is listed but not handled"};
  }
}

constexpr std::string_view kValuedOptions[] = {"-m",
                                               "--model",
                                               "--prompt-ids",
                                               "--prompt",
                                               "--chat",
                                               "-n",
                                               "--temperature",
                                               "--top-p",
                                               "--top-k",
                                               "--min-p",
                                               "--repetition-penalty",
                                               "--presence-penalty",
                                               "--seed",
                                               "--device",
                                               "--prefill",
                                               "--numerics",
                                               "--threads",
                                               "--prefill-chunk",
                                               "--stop-ids"};

bool takes_value(std::string_view option) {
  return std::find(std::begin(kValuedOptions), std::end(kValuedOptions), option) != std::end(kValuedOptions);
}

RunOptions parse_or_throw(std::span<const std::string_view> args) {
  RunOptions o;
  o.sampling.temperature = 0.0f;  // greedy unless asked
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view option = args[i];
    if (!option.starts_with("-")) throw UsageError{"unexpected argument '" + std::string(option) + "'"};
    if (option == "--json") {
      o.json = true;
    } else if (option == "--ignore-eos") {
      o.ignore_eos = true;
    } else if (!takes_value(option)) {
      throw UsageError{"unknown option '" + std::string(option) + "'"};
    } else if (i + 1 == args.size()) {
      throw UsageError{std::string(option) + " needs a value"};
    } else {
      apply_valued(o, option, args[++i]);
    }
  }
  if (o.model_dir.empty()) throw UsageError{"missing -m DIR (the checkpoint directory)"};
  const int prompts = (o.prompt.empty() ? 0 : 1) + (o.prompt_text ? 1 : 0) + (o.chat_file.empty() ? 0 : 1);
  if (prompts == 0)
    throw UsageError{"missing the prompt: --prompt-ids 1,2,3, --prompt TEXT or --chat FILE.json"};
  if (prompts > 1) throw UsageError{"give one of --prompt-ids, --prompt and --chat"};
  return o;
}

}  // namespace

std::optional<RunOptions> parse_run_options(std::span<const std::string_view> args) {
  try {
    return parse_or_throw(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "flashkv run: %s (see flashkv --help)\n", e.message.c_str());
    return std::nullopt;
  }
}

}  // namespace flashkv::cli
