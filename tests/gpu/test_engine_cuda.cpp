// End to end: the engine's unchanged forward on the CUDA backend (kernels/cuda_backend.hpp, injected through
// runtime::load_engine_with_backend) against the same engine on the CPU backend, faithful numerics, on tiny
// checkpoints generated for this run by tools/make-tiny-checkpoint from a fresh seed (printed). A prompt of
// random ids is prefilled, then greedy decode steps run on both engines; the greedy tokens must be identical
// and the logits close.
//
// Tolerance: the indexer scores, candidate pools, pool restriction and top-k lists of the CUDA backend are
// bit-identical to the CPU backend's (tests/gpu/test_indexer.cpp, test_topk.cpp), and so are the KV write
// path's operations it runs on the GPU — records of every format, fake quantization, RoPE (also the output
// projection's inverse RoPE), compressor pooling (tests/gpu/test_cuda_backend_ops.cpp; RoPE rows and pooled
// groups the GPU cannot certify are recomputed on the CPU, and the test prints how many) — while every other
// operation is delegated to the CPU backend. Two CUDA engines run beside the CPU one: one with every call the
// kernels take on the device (kAlwaysDevice: the tiny configs' one-row decode calls too), one with the
// default size thresholds (what an application gets: small calls on the CPU). So the only source of
// difference is sparse attention where the GPU kernel applies (64 heads x 512, NVFP4 entries; otherwise it
// too falls back to the CPU). There the kernel rounds P to BF16 like the CPU faithful path and differs only
// in fp32 accumulation order, ~1e-6 relative per attention output; a P value sitting on a BF16 rounding
// boundary can flip by one BF16 ulp (2^-8 relative of that weight). Through the layers this stays far below
// kLogitTolerance (relative to the largest |logit| of the row), which is tight enough that a wrong selection,
// a wrong pool, a wrong record or a broken kernel (errors of the order of the logits themselves) fails. Where
// attention falls back too (the tiny configs: 4 heads), every operation is bit-identical and so must be the
// logits: the test then requires a max difference of exactly 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "cuda_backend.hpp"
#include "gpu_test_env.hpp"
#include "runtime/engine.hpp"
#include "runtime/sequence_state.hpp"
#include "sparse_attention.cuh"

namespace {

namespace fs = std::filesystem;
using flashkv::runtime::Engine;
using flashkv::runtime::ForwardResult;
using flashkv::runtime::LogitsRows;

constexpr double kLogitTolerance = 1e-3;

// A temporary directory removed when the test ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / name) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Generates the tiny checkpoint of tests/data/configs/CONFIG into `out`; a failure fails the test.
void make_checkpoint(const std::string& config, uint64_t seed, const fs::path& out) {
  const fs::path repo = fs::path(FLASHKV_TEST_DATA).parent_path().parent_path();
  const std::string command = "python3 \"" + (repo / "tools" / "make-tiny-checkpoint").string() +
                              "\" --config " + config + " --seed " + std::to_string(seed) + " --out \"" +
                              out.string() + "\" > /dev/null";
  INFO("command: " << command);
  REQUIRE(std::system(command.c_str()) == 0);
}

int32_t greedy(const ForwardResult& result) {
  const auto best = std::max_element(result.logits.begin(), result.logits.end());
  return static_cast<int32_t>(best - result.logits.begin());
}

// max |a - b| over the row, and the tolerance scaled by the row's largest |logit| (at least 1).
struct RowDiff {
  double max_diff = 0.0;
  double limit = 0.0;
};

RowDiff compare_row(const ForwardResult& cpu, const ForwardResult& gpu) {
  REQUIRE(cpu.logits.size() == gpu.logits.size());
  RowDiff diff;
  double scale = 1.0;
  for (size_t i = 0; i < cpu.logits.size(); ++i) {
    REQUIRE(std::isfinite(gpu.logits[i]));
    diff.max_diff = std::max(diff.max_diff, std::abs(double(cpu.logits[i]) - double(gpu.logits[i])));
    scale = std::max(scale, std::abs(double(cpu.logits[i])));
  }
  diff.limit = kLogitTolerance * scale;
  return diff;
}

// An engine on a CudaBackend with the given thresholds, its sequence and its latest result.
struct CudaEngine {
  const flashkv::cuda::CudaBackend* backend = nullptr;  // owned by the engine
  std::unique_ptr<Engine> engine;
  std::unique_ptr<flashkv::runtime::SequenceState> state;
  ForwardResult out;
  const char* what = "";
  double max_diff = 0.0;
};

CudaEngine load_cuda_engine(const fs::path& dir, const flashkv::runtime::EngineOptions& options,
                            flashkv::cuda::DeviceThresholds thresholds, const char* what) {
  auto backend = std::make_unique<flashkv::cuda::CudaBackend>(0, thresholds);
  CudaEngine out;
  out.backend = backend.get();
  out.engine = flashkv::runtime::load_engine_with_backend(dir, options, std::move(backend));
  out.state = out.engine->new_state();
  out.what = what;
  return out;
}

void check_engine_on_cuda(const std::string& config) {
  const uint64_t seed = flashkv::test::fresh_seed();
  const uint64_t checkpoint_seed = seed % 1000000007;
  std::printf("engine on cuda (%s): seed %llu\n", config.c_str(), static_cast<unsigned long long>(seed));
  const TempDir dir("flashkv-gpu-engine-" + config + "-" + std::to_string(seed));
  make_checkpoint(config, checkpoint_seed, dir.path);

  flashkv::runtime::EngineOptions options;
  options.numerics = flashkv::runtime::Numerics::kFaithful;
  const std::unique_ptr<Engine> cpu = flashkv::runtime::load_cpu_engine(dir.path, options);
  std::vector<CudaEngine> gpus;
  gpus.push_back(load_cuda_engine(dir.path, options, flashkv::cuda::kAlwaysDevice, "always device"));
  gpus.push_back(
      load_cuda_engine(dir.path, options, flashkv::cuda::kDefaultThresholds, "default thresholds"));

  // the GPU's sparse attention kernel takes V4.1's shape only; elsewhere every operation is bit-identical
  const bool attention_on_gpu = cpu->config().num_attention_heads == flashkv::cuda::kSparseAttentionHeads &&
                                cpu->config().head_dim == flashkv::cuda::kSparseAttentionDim;
  const bool small = flashkv::test::small_scale();
  const int prompt_length = small ? 48 : 96;  // 48 > 32 pool entries: the pool still restricts
  const int decode_steps = small ? 4 : 16;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cpu->config().vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_length));
  for (int32_t& id : prompt) id = token(rng);

  const std::unique_ptr<flashkv::runtime::SequenceState> cpu_state = cpu->new_state();
  ForwardResult cpu_out = cpu->forward(*cpu_state, prompt, LogitsRows::kLast);
  for (CudaEngine& g : gpus) g.out = g.engine->forward(*g.state, prompt, LogitsRows::kLast);
  for (int step = 0;; ++step) {
    const int32_t next = greedy(cpu_out);
    for (CudaEngine& g : gpus) {
      const RowDiff diff = compare_row(cpu_out, g.out);
      g.max_diff = std::max(g.max_diff, diff.max_diff);
      INFO("seed " << seed << " " << g.what << " step " << step << ": max |logit diff| " << diff.max_diff
                   << ", limit " << diff.limit);
      REQUIRE(diff.max_diff <= diff.limit);
      if (!attention_on_gpu) REQUIRE(diff.max_diff == 0.0);
      REQUIRE(greedy(g.out) == next);
    }
    if (step == decode_steps) break;
    const std::vector<int32_t> one{next};
    cpu_out = cpu->forward(*cpu_state, one, LogitsRows::kLast);
    for (CudaEngine& g : gpus) g.out = g.engine->forward(*g.state, one, LogitsRows::kLast);
  }
  for (const CudaEngine& g : gpus) {
    std::printf(
        "engine on cuda (%s, %s): prompt %d + %d greedy steps identical, max |logit diff| %.3g, %lld RoPE "
        "rows "
        "/ pooled groups recomputed on the CPU\n",
        config.c_str(), g.what, prompt_length, decode_steps, g.max_diff,
        static_cast<long long>(g.backend->recomputed_rows()));
  }
}

}  // namespace

TEST_CASE("engine on the CUDA backend decodes like the CPU backend: tiny-v4", "[gpu][engine]") {
  check_engine_on_cuda("tiny-v4");
}

TEST_CASE("engine on the CUDA backend decodes like the CPU backend: tiny-v41 (candidate pool)",
          "[gpu][engine]") {
  check_engine_on_cuda("tiny-v41");
}
