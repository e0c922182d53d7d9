// bench_tokenizer — encode throughput of flashkv::Tokenizer on a text file, single-threaded.
//
//   bench_tokenizer TOKENIZER_DIR_OR_JSON TEXT_FILE [--runs N] [--ids-out FILE] [--paragraphs 0|1]
//
// Loads the tokenizer (load time reported), encodes the whole file as plain text (allow_special = false) --
// as one call, or with --paragraphs 1 one call per paragraph (pieces cut at each "\n\n", ids concatenated) --
// `--runs` times after one untimed warm-up, and reports the best and median MB/s and tokens/s. The text and
// the timing rule are bench/run-tokenizer-bench's, which times Hugging Face `tokenizers` on the same file in
// the same run and prints the ratio; --ids-out writes the ids (one per line) so the driver can check they are
// the same ids. Output: a line of figures, then one "FKV_BENCH {...}" JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) flashkv::fail(flashkv::ErrorCode::kIo, "{}: cannot open", path);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

struct Args {
  std::string tokenizer;
  std::string text;
  int runs = 5;
  std::string ids_out;
  bool paragraphs = false;
};

Args parse(int argc, char** argv) {
  if (argc < 3)
    flashkv::fail(flashkv::ErrorCode::kInvalidArgument,
                  "usage: bench_tokenizer TOKENIZER TEXT [--runs N] [--ids-out FILE]");
  Args args;
  args.tokenizer = argv[1];
  args.text = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") {
      args.runs = std::max(1, std::stoi(argv[i + 1]));
    } else if (flag == "--paragraphs") {
      args.paragraphs = std::string(argv[i + 1]) == "1";
    } else if (flag == "--ids-out") {
      args.ids_out = argv[i + 1];
    } else {
      flashkv::fail(flashkv::ErrorCode::kInvalidArgument, "unknown option {}", flag);
    }
  }
  return args;
}

// The text cut after each "\n\n" (the cut keeps the separator with the piece before it).
std::vector<std::string_view> paragraphs_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t cut = text.find("\n\n");
    const std::size_t length = cut == std::string_view::npos ? text.size() : cut + 2;
    out.push_back(text.substr(0, length));
    text.remove_prefix(length);
  }
  return out;
}

std::vector<int32_t> encode_all(const flashkv::Tokenizer& tokenizer,
                                const std::vector<std::string_view>& parts) {
  std::vector<int32_t> ids;
  for (const std::string_view part : parts) tokenizer.encode_into(part, ids);
  return ids;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  const Clock::time_point load_start = Clock::now();
  const flashkv::Tokenizer tokenizer = flashkv::Tokenizer::load(args.tokenizer);
  const double load_s = seconds_since(load_start);
  const std::string text = read_all(args.text);

  const std::vector<std::string_view> parts =
      args.paragraphs ? paragraphs_of(text) : std::vector<std::string_view>{std::string_view(text)};
  std::vector<int32_t> ids = encode_all(tokenizer, parts);  // warm-up
  std::vector<double> times;
  for (int run = 0; run < args.runs; ++run) {
    const Clock::time_point start = Clock::now();
    ids = encode_all(tokenizer, parts);
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  const double best = times.front();
  const double median = times[times.size() / 2];
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf(
      "flashkv encode (%zu calls): %.3f MB, %zu tokens, best %.1f ms (%.2f MB/s, %.0f tok/s), "
      "median %.1f ms; load %.0f ms\n",
      parts.size(), mb, ids.size(), best * 1e3, mb / best, static_cast<double>(ids.size()) / best,
      median * 1e3, load_s * 1e3);
  std::printf(
      "FKV_BENCH {\"bench\": \"tokenizer_encode\", \"impl\": \"flashkv\", \"calls\": %zu, \"bytes\": %zu, "
      "\"tokens\": %zu, \"best_s\": %.6f, \"median_s\": %.6f, \"load_s\": %.4f}\n",
      parts.size(), text.size(), ids.size(), best, median, load_s);
  if (!args.ids_out.empty()) {
    std::ofstream out(args.ids_out);
    for (const int32_t id : ids) out << id << '\n';
  }
  return 0;
} catch (const flashkv::Error& e) {
  std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
  return 1;
}
