// flashkv — command-line front end. Subcommands are added per milestone; output formats stay stable
// (docs/config.md describes `info`).
#include <cstdio>
#include <exception>
#include <span>
#include <string_view>
#include <vector>

#include "info_command.hpp"
#include "run_command.hpp"
#include "tokenize_command.hpp"

#ifndef FLASHKV_VERSION_STRING
#define FLASHKV_VERSION_STRING "unknown"
#endif

namespace {

constexpr const char* kUsage =
    "usage: flashkv info PATH [--json]\n"
    "       flashkv run -m DIR --prompt-ids 1,2,3 | --prompt TEXT | --chat FILE.json [options]\n"
    "       flashkv tokenize -m DIR --text TEXT [--json]\n"
    "       flashkv --help | --version\n"
    "\n"
    "commands:\n"
    "  info PATH [--json]  describe a checkpoint directory or a config.json: config summary, layer plan,\n"
    "                      memory report (and the tensor listing for a checkpoint directory)\n";

constexpr const char* kUsageTail =
    "\n"
    "exit status: 0 success, 1 runtime error (message on stderr), 2 usage error\n";

void print_usage() {
  std::fputs(kUsage, stdout);
  std::fputs(flashkv::cli::kRunUsage, stdout);
  std::fputs(flashkv::cli::kTokenizeUsage, stdout);
  std::fputs(kUsageTail, stdout);
}

int run(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage();
    return 2;
  }
  const std::string_view command = args.front();
  if (command == "--help" || command == "-h" || command == "help") {
    print_usage();
    return 0;
  }
  if (command == "--version") {
    std::printf("flashkv %s\n", FLASHKV_VERSION_STRING);
    return 0;
  }
  if (command == "info") return flashkv::cli::run_info(std::span(args).subspan(1));
  if (command == "run") return flashkv::cli::run_run(std::span(args).subspan(1));
  if (command == "tokenize") return flashkv::cli::run_tokenize(std::span(args).subspan(1));
  std::fprintf(stderr, "flashkv: unknown command '%.*s' (see flashkv --help)\n",
               static_cast<int>(command.size()), command.data());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    // Errors the commands did not expect (allocation failure, a bug): still one line and a failing status.
    std::fprintf(stderr, "flashkv: internal error: %s\n", e.what());
    return 1;
  }
}
