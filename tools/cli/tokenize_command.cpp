// `flashkv tokenize`: loads only the tokenizer (no weights) and prints the ids of --text, one line of
// space-separated ids, or with --json one object {"ids": [...], "tokens": [...], "count": N}.
#include "tokenize_command.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>
#include <nlohmann/json.hpp>

namespace flashkv::cli {

const char* const kTokenizeUsage =
    "  tokenize -m DIR --text TEXT [--special] [--json]\n"
    "                      token ids of TEXT under DIR/tokenizer.json (DIR needs nothing else);\n"
    "                      --special recognises control tokens such as <｜User｜> in TEXT (off: plain "
    "text);\n"
    "                      --json prints {\"ids\": [...], \"tokens\": [...], \"count\": N}\n";

namespace {

struct TokenizeOptions {
  std::string dir;
  std::string text;
  bool has_text = false;
  bool special = false;
  bool json = false;
};

// Returns false after printing a usage error.
bool parse(std::span<const std::string_view> args, TokenizeOptions& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view option = args[i];
    const bool valued = option == "-m" || option == "--model" || option == "--text";
    if (valued && i + 1 == args.size()) {
      std::fprintf(stderr, "flashkv tokenize: %.*s needs a value\n", static_cast<int>(option.size()),
                   option.data());
      return false;
    }
    if (option == "-m" || option == "--model") {
      o.dir = std::string(args[++i]);
    } else if (option == "--text") {
      o.text = std::string(args[++i]);
      o.has_text = true;
    } else if (option == "--special") {
      o.special = true;
    } else if (option == "--json") {
      o.json = true;
    } else {
      std::fprintf(stderr, "flashkv tokenize: unknown argument '%.*s'\n", static_cast<int>(option.size()),
                   option.data());
      return false;
    }
  }
  if (o.dir.empty() || !o.has_text) {
    std::fputs("flashkv tokenize: needs -m DIR and --text TEXT\n", stderr);
    return false;
  }
  return true;
}

}  // namespace

int run_tokenize(std::span<const std::string_view> args) {
  TokenizeOptions o;
  if (!parse(args, o)) return 2;
  try {
    const Tokenizer tokenizer = Tokenizer::load(o.dir);
    const std::vector<int32_t> ids = tokenizer.encode(o.text, o.special);
    if (o.json) {
      nlohmann::ordered_json j;
      j["ids"] = ids;
      std::vector<std::string> tokens;
      for (const int32_t id : ids) tokens.push_back(tokenizer.id_to_token(id));
      j["tokens"] = tokens;
      j["count"] = ids.size();
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      for (size_t i = 0; i < ids.size(); ++i) std::printf(i == 0 ? "%d" : " %d", ids[i]);
      std::printf("\n");
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "flashkv tokenize: %s\n", e.what());
    return 1;
  }
}

}  // namespace flashkv::cli
