#include "info_command.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include <flashkv/error.hpp>

#include "checkpoint_description.hpp"
#include "info_format.hpp"

namespace flashkv::cli {

namespace {

struct InfoArgs {
  std::string path;
  bool json = false;
};

std::optional<InfoArgs> parse_info_args(std::span<const std::string_view> args) {
  InfoArgs parsed;
  bool have_path = false;
  for (const std::string_view arg : args) {
    if (arg == "--json") {
      parsed.json = true;
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "flashkv info: unknown option '%.*s'\n", static_cast<int>(arg.size()), arg.data());
      return std::nullopt;
    } else if (have_path) {
      std::fprintf(stderr, "flashkv info: more than one PATH given\n");
      return std::nullopt;
    } else {
      parsed.path = std::string(arg);
      have_path = true;
    }
  }
  if (!have_path) {
    std::fprintf(stderr, "flashkv info: missing PATH (usage: flashkv info PATH [--json])\n");
    return std::nullopt;
  }
  return parsed;
}

}  // namespace

int run_info(std::span<const std::string_view> args) {
  const std::optional<InfoArgs> parsed = parse_info_args(args);
  if (!parsed) return 2;
  try {
    const CheckpointDescription description = describe_checkpoint(parsed->path);
    const std::string out = parsed->json ? format_info_json(description) : format_info_text(description);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "flashkv info: %s\n", e.what());
    return 1;
  }
}

}  // namespace flashkv::cli
