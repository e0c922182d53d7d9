// bench_cpu_engine — prefill and decode tokens/s of the CPU engine on a checkpoint (tiny ones in CI).
//
//   bench_cpu_engine CHECKPOINT_DIR [--runs N] [--threads N] [--prefill 96,512] [--decode 64]
//                    [--decode-prompt 32] [--numerics clean,faithful]
//
// The work is defined so that bench/bench_reference.py can repeat it in the numpy reference and
// bench/run-cpu-bench can print the ratio: prompt token i is (1 + 7919 i) mod vocab; prefill = one exact
// forward of T tokens on an empty state (last-row logits); decode = `--decode` greedy steps of one token
// after a `--decode-prompt`-token prefill, the argmax taken by the Sampler (included in the time, as in a
// session). Each figure is the median over `--runs` runs after one untimed warm-up forward. A sampler line
// times Sampler::sample on a row of the official vocabulary (129280) to show its share of a decode step.
// Output: a table, then one "FKV_BENCH {...}" JSON line per result.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <flashkv/error.hpp>
#include <flashkv/sampling.hpp>

#include "runtime/engine.hpp"
#include "runtime/sampling.hpp"
#include "runtime/sequence_state.hpp"

namespace {

using flashkv::runtime::Engine;
using flashkv::runtime::EngineOptions;
using flashkv::runtime::LogitsRows;
using flashkv::runtime::Numerics;
using Clock = std::chrono::steady_clock;

constexpr const char* kProgram = "bench_cpu_engine";
constexpr int64_t kOfficialVocab = 129280;

struct Options {
  std::string checkpoint;
  int runs = 5;
  int threads = 0;
  std::vector<int64_t> prefill_lengths = {96, 512};
  int64_t decode_steps = 64;
  int64_t decode_prompt = 32;
  std::vector<std::string> numerics = {"clean", "faithful"};
};

struct Result {
  std::string numerics;
  std::string phase;  // "prefill", "decode", "sampler"
  std::string detail;
  int64_t tokens = 0;
  double median_s = 0;
  double tok_s = 0;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "%s\nusage: %s CHECKPOINT_DIR [--runs N] [--threads N] [--prefill 96,512] [--decode 64] "
               "[--decode-prompt 32] [--numerics clean,faithful]\n",
               problem.c_str(), kProgram);
  std::exit(2);
}

int64_t parse_int(std::string_view flag, const std::string& text, int64_t min) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < min)
    usage(fmt::format("{} needs an integer >= {}, got '{}'", flag, min, text));
  return value;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

Options parse_options(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) usage(fmt::format("{} needs a value", a));
      return args[++i];
    };
    if (a == "--runs") {
      o.runs = static_cast<int>(parse_int(a, value(), 1));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(parse_int(a, value(), 0));
    } else if (a == "--prefill") {
      o.prefill_lengths.clear();
      for (const std::string& part : split(value())) o.prefill_lengths.push_back(parse_int(a, part, 1));
    } else if (a == "--decode") {
      o.decode_steps = parse_int(a, value(), 0);
    } else if (a == "--decode-prompt") {
      o.decode_prompt = parse_int(a, value(), 1);
    } else if (a == "--numerics") {
      o.numerics = split(value());
      for (const std::string& n : o.numerics) {
        if (n != "clean" && n != "faithful") usage(fmt::format("--numerics: unknown mode '{}'", n));
      }
    } else if (!a.empty() && a[0] == '-') {
      usage(fmt::format("unknown option {}", a));
    } else if (o.checkpoint.empty()) {
      o.checkpoint = a;
    } else {
      usage(fmt::format("unexpected argument '{}'", a));
    }
  }
  if (o.checkpoint.empty()) usage("missing CHECKPOINT_DIR");
  return o;
}

// The benchmark prompt; bench_reference.py uses the same rule.
std::vector<int32_t> bench_tokens(int64_t count, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((1 + 7919 * i) % vocab);
  return ids;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <typename Body>
double median_seconds(int runs, Body&& body) {
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) times.push_back(body());
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  return times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
}

Result time_prefill(const Engine& engine, const std::string& mode, int64_t length, int runs) {
  const std::vector<int32_t> prompt = bench_tokens(length, engine.config().vocab_size);
  const double median = median_seconds(runs, [&] {
    auto state = engine.new_state();
    const auto start = Clock::now();
    engine.forward(*state, prompt, LogitsRows::kLast);
    return seconds_since(start);
  });
  return {mode, "prefill", "exact", length, median, static_cast<double>(length) / median};
}

Result time_decode(const Engine& engine, const std::string& mode, const Options& o) {
  const std::vector<int32_t> prompt = bench_tokens(o.decode_prompt, engine.config().vocab_size);
  flashkv::SamplingParams greedy;
  greedy.temperature = 0.0f;
  const double median = median_seconds(o.runs, [&] {
    auto state = engine.new_state();
    flashkv::runtime::ForwardResult out = engine.forward(*state, prompt, LogitsRows::kLast);
    flashkv::runtime::Sampler sampler(greedy);
    const auto start = Clock::now();
    for (int64_t step = 0; step < o.decode_steps; ++step) {
      const int32_t next = sampler.sample(out.logits, engine.tokens(*state));
      out = engine.forward(*state, std::span<const int32_t>(&next, 1), LogitsRows::kLast);
    }
    return seconds_since(start);
  });
  return {mode,           "decode", fmt::format("after {}", o.decode_prompt),
          o.decode_steps, median,   static_cast<double>(o.decode_steps) / median};
}

// Sampler cost on one official-vocabulary row: the floor a decode step pays whatever the model size.
Result time_sampler(const char* name, const flashkv::SamplingParams& params, int runs) {
  // Normal(0, 3) logits (Box-Muller): peaked like a language model's row, so top-p keeps a few hundred
  // tokens.
  std::vector<float> logits(static_cast<size_t>(kOfficialVocab));
  flashkv::runtime::SampleRng fill(12345);
  for (float& x : logits) {
    const double radius = std::sqrt(-2.0 * std::log(1.0 - fill.next_unit()));
    x = static_cast<float>(3.0 * radius * std::cos(6.283185307179586 * fill.next_unit()));
  }
  const std::vector<int32_t> history = bench_tokens(256, kOfficialVocab);
  flashkv::runtime::Sampler sampler(params);
  constexpr int kCalls = 20;
  const double median = median_seconds(runs, [&] {
    const auto start = Clock::now();
    for (int c = 0; c < kCalls; ++c) sampler.sample(logits, history);
    return seconds_since(start) / kCalls;
  });
  return {"-", "sampler", name, kOfficialVocab, median, 1.0 / median};
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string utc_date() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%MZ", std::gmtime(&now));
  return date;
}

void print_result(const Result& r) {
  const std::string rate =
      r.phase == "sampler" ? fmt::format("{:10.0f} /s", r.tok_s) : fmt::format("{:10.1f} tok/s", r.tok_s);
  fmt::print("  {:<9} {:<8} {:<11} {:>7} {:>11.3f} ms {}\n", r.numerics, r.phase, r.detail, r.tokens,
             r.median_s * 1e3, rate);
  nlohmann::ordered_json j;
  j["program"] = kProgram;
  j["numerics"] = r.numerics;
  j["phase"] = r.phase;
  j["detail"] = r.detail;
  j["tokens"] = r.tokens;
  j["median_s"] = r.median_s;
  j["tok_s"] = r.tok_s;
  fmt::print("FKV_BENCH {}\n", j.dump());
  std::fflush(stdout);
}

int run(const Options& o) {
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  nlohmann::ordered_json header;
  header["program"] = kProgram;
  header["cpu"] = cpu_model();
  header["threads"] = threads;
  header["runs"] = o.runs;
  header["checkpoint"] = o.checkpoint;
  header["date"] = utc_date();
  fmt::print("{} on {} ({} threads), {}, checkpoint {}, median of {} runs\n", kProgram,
             header["cpu"].get<std::string>(), threads, header["date"].get<std::string>(), o.checkpoint,
             o.runs);
  fmt::print("FKV_BENCH {}\n", header.dump());
  fmt::print("  {:<9} {:<8} {:<11} {:>7} {:>14} {}\n", "numerics", "phase", "detail", "tokens", "median",
             "rate");

  for (const std::string& mode : o.numerics) {
    EngineOptions options;
    options.numerics = mode == "clean" ? Numerics::kClean : Numerics::kFaithful;
    options.threads = o.threads;
    const auto load_start = Clock::now();
    const std::unique_ptr<Engine> engine = flashkv::runtime::load_cpu_engine(o.checkpoint, options);
    const double load_s = seconds_since(load_start);
    fmt::print("  {:<9} load     {:>31.3f} ms\n", mode, load_s * 1e3);
    {  // warm-up: first-touch of weights and allocator pools
      auto state = engine->new_state();
      engine->forward(*state, bench_tokens(16, engine->config().vocab_size), LogitsRows::kLast);
    }
    for (int64_t length : o.prefill_lengths) print_result(time_prefill(*engine, mode, length, o.runs));
    if (o.decode_steps > 0) print_result(time_decode(*engine, mode, o));
  }

  flashkv::SamplingParams greedy;
  greedy.temperature = 0.0f;
  flashkv::SamplingParams plain;
  flashkv::SamplingParams top_p;
  top_p.top_p = 0.9f;
  top_p.repetition_penalty = 1.1f;
  flashkv::SamplingParams top_k;
  top_k.top_k = 50;
  top_k.top_p = 0.9f;
  print_result(time_sampler("greedy", greedy, o.runs));
  print_result(time_sampler("temp", plain, o.runs));
  print_result(time_sampler("top_p+pen", top_p, o.runs));
  print_result(time_sampler("top_k+p", top_k, o.runs));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  try {
    return run(options);
  } catch (const flashkv::Error& error) {
    std::fprintf(stderr, "%s: error (%s): %s\n", kProgram,
                 std::string(flashkv::error_code_name(error.code())).c_str(), error.what());
    return 1;
  }
}
