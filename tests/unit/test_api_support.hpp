// Shared by the test_api_*.cpp files: tiny checkpoints generated once per run
// by tools/make-tiny-checkpoint (seeded from the clock unless FLASHKV_API_SEED
// is set; the seed is printed), Models loaded once per (config, numerics),
// random prompts, and the relative-error measure of the reference's compare.py.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <flashkv/flashkv.hpp>
#include <nlohmann/json.hpp>

#include "catch.hpp"

namespace api_test {

namespace fs = std::filesystem;

inline uint64_t run_seed() {
  static const uint64_t seed = []() -> uint64_t {
    if (const char* text = std::getenv("FLASHKV_API_SEED")) return std::strtoull(text, nullptr, 10);
    return static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  }();
  return seed;
}

// Removed at exit.
struct TempRoot {
  fs::path path;
  TempRoot() {
    path = fs::temp_directory_path() / ("flashkv-api-tests-" + std::to_string(run_seed()));
    fs::create_directories(path);
  }
  ~TempRoot() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

inline const fs::path& temp_root() {
  static const TempRoot root;
  return root.path;
}

inline fs::path repo_root() {
  return fs::path(FLASHKV_TEST_DATA).parent_path().parent_path();
}

// tests/data/configs/NAME/config.json
inline fs::path config_file(const std::string& name) {
  return fs::path(FLASHKV_TEST_DATA) / "configs" / name / "config.json";
}

// A checkpoint of config NAME generated once per run from run_seed().
inline const fs::path& tiny_checkpoint(const std::string& name) {
  static std::map<std::string, fs::path> made;
  auto found = made.find(name);
  if (found != made.end()) return found->second;
  const fs::path out = temp_root() / name;
  const std::string command = "python3 \"" + (repo_root() / "tools" / "make-tiny-checkpoint").string() +
                              "\" --config " + name + " --seed " + std::to_string(run_seed() % 1000000007) +
                              " --out \"" + out.string() + "\" > /dev/null";
  std::fprintf(stderr,
               "test_api: %s checkpoint from seed %llu (FLASHKV_API_SEED=%llu "
               "repeats this run)\n",
               name.c_str(), static_cast<unsigned long long>(run_seed() % 1000000007),
               static_cast<unsigned long long>(run_seed()));
  if (std::system(command.c_str()) != 0) FAIL("make-tiny-checkpoint failed: " << command);
  return made.emplace(name, out).first->second;
}

// A copy of `checkpoint` whose config.json is `edit(config json)`; the shards
// are hard links or copies.
template <typename Edit>
fs::path edited_checkpoint(const fs::path& checkpoint, const std::string& name, Edit edit) {
  const fs::path out = temp_root() / name;
  fs::remove_all(out);
  fs::create_directories(out);
  for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint)) {
    if (entry.path().filename() != "config.json") fs::copy_file(entry.path(), out / entry.path().filename());
  }
  std::ifstream in(checkpoint / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  std::ofstream(out / "config.json") << config.dump(2);
  return out;
}

inline flashkv::Model tiny_model(const std::string& name, flashkv::Numerics numerics) {
  static std::map<std::pair<std::string, flashkv::Numerics>, flashkv::Model> loaded;
  const auto key = std::make_pair(name, numerics);
  auto found = loaded.find(key);
  if (found != loaded.end()) return found->second;
  flashkv::LoadOptions options;
  options.numerics = numerics;
  return loaded.emplace(key, flashkv::Model::load(tiny_checkpoint(name), options)).first->second;
}

inline std::vector<int32_t> random_tokens(std::mt19937_64& rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(n);
  for (int32_t& token : tokens) token = pick(rng);
  return tokens;
}

inline std::vector<int32_t> concat(std::span<const int32_t> a, std::span<const int32_t> b) {
  std::vector<int32_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// max |b - a| / max |a| (tests/reference/compare.py relative_error); a length
// mismatch is infinitely wrong.
inline double relative_error(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(b[i]) - a[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
  }
  return diff / scale;
}

inline std::vector<float> copy_of(std::span<const float> logits) {
  return {logits.begin(), logits.end()};
}

inline std::vector<int32_t> copy_of(std::span<const int32_t> tokens) {
  return {tokens.begin(), tokens.end()};
}

// Clean-mode results that differ only in how rows were grouped into forwards
// agree to fp32 rounding.
constexpr double kCleanTolerance = 1e-5;

inline flashkv::GenerateOptions greedy(int64_t max_tokens) {
  flashkv::GenerateOptions options;
  options.sampling.temperature = 0.0f;
  options.max_tokens = max_tokens;
  options.stop_at_eos = false;
  return options;
}

inline flashkv::GenerateOptions sampled(int64_t max_tokens, uint64_t seed) {
  flashkv::GenerateOptions options;
  options.sampling.temperature = 1.0f;
  options.sampling.top_p = 0.95f;
  options.sampling.seed = seed;
  options.max_tokens = max_tokens;
  options.stop_at_eos = false;
  return options;
}

}  // namespace api_test
