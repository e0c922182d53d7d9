// flashkv::Model — one loaded DeepSeek-V4.1 checkpoint: config, layer plan and weights on one backend.
//
// Contract:
// - Model::load(dir, options) reads DIR/config.json and the safetensors shards it lists, checks every tensor
//   against the config, and places the weights on the chosen device. On the CPU backend every weight is
//   dequantized to fp32 at load (FP8 32x32 blocks, MXFP4 experts, FP8 Engram rows); memory() says how many
//   bytes that takes.
// - A Model is immutable after load. It is a cheap handle: copies share the same loaded weights, and every
//   Session / KVHandle made from it keeps those weights alive, so a Model may go out of scope before them.
// - numerics and prefill choose how sessions compute (see the enums); they are fixed for the Model's life.
// Ownership: the Model owns its weights (shared among copies); it keeps no reference to the directory or the
// files after load returns.
// Threading: all const members may be called from any number of threads at once; Sessions of one Model may
// run concurrently on different threads.
// - When the directory holds tokenizer.json (+ tokenizer_config.json), it is loaded too: tokenizer() and
//   encode_chat() (the DeepSeek-V4.1 chat prompt, include/flashkv/chat.hpp) work on the model.
// Errors (flashkv::Error): kNotFound / kIo (missing or unreadable file), kInvalidConfig (config.json breaks a
// rule; the message names the field), kInvalidCheckpoint (a tensor is missing, misshapen or of the wrong
// dtype for the config; the message names the tensor), kUnsupported (device cuda in this build, an unknown
// model_type), kInvalidArgument (bad LoadOptions, naming the field).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <flashkv/chat.hpp>
#include <flashkv/config.hpp>
#include <flashkv/tokenizer.hpp>

namespace flashkv {

enum class Device { kCpu, kCuda };

// clean: fp32 arithmetic with the KV quantizers off (compares with the numpy reference at ~1e-5).
// faithful: the released checkpoint's storage formats and cast points (FP8/NVFP4/MXFP4 KV records, BF16
// activations); the default, and what a deployment runs.
enum class Numerics { kClean, kFaithful };

// exact: every prompt row runs through every layer. ced: the causal encoder-decoder approximation of
// MODEL.md §8.4 (decoder layers on the last window only) for a session's first append; later appends and
// decode steps are exact either way.
enum class PrefillMode { kExact, kCed };

struct LoadOptions {
  Device device = Device::kCpu;
  int threads = 0;  // worker threads of the backend; 0: the hardware's concurrency. Must be >= 0.
  Numerics numerics = Numerics::kFaithful;
  PrefillMode prefill = PrefillMode::kExact;  // default of sessions made from this model
  int64_t prefill_chunk = 512;                // rows per prefill forward; sessions may override. Must be > 0.
};

// The config's cache and weight figures (MemoryReport: global KV bytes per token, window bytes per session,
// record sizes, parameter counts) plus what this load actually holds.
struct ModelMemory {
  MemoryReport report;
  uint64_t resident_weight_bytes = 0;  // bytes of weights held by the backend after load
  std::string weight_storage;          // how they are held, e.g. "fp32, dequantized at load"
};

namespace detail {
struct ModelCore;  // the loaded engine and its options; shared by Model copies, Sessions and KVHandles
}

class Model {
 public:
  // Loads `checkpoint_dir`. See the header comment for errors.
  static Model load(const std::filesystem::path& checkpoint_dir, const LoadOptions& options = {});

  const ModelConfig& config() const;
  const LayerPlan& plan() const;
  const LoadOptions& options() const;
  ModelMemory memory() const;

  // Token ids accepted by sessions are [0, vocab_size()).
  int64_t vocab_size() const;
  // Longest sequence a session may hold (max_position_embeddings of the config).
  int64_t max_tokens() const;

  // The checkpoint's tokenizer (DIR/tokenizer.json); tokenizer() throws kNotFound when there is none.
  bool has_tokenizer() const;
  const Tokenizer& tokenizer() const;
  // The token ids of a conversation's V4.1 prompt under this model's tokenizer (ChatEncoder::encode).
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages,
                                   const ChatOptions& options = {}) const;

  // Two handles are equal when they share one load.
  friend bool operator==(const Model& a, const Model& b) { return a.core_ == b.core_; }

 private:
  friend class Session;
  friend class KVHandle;
  explicit Model(std::shared_ptr<const detail::ModelCore> core) : core_(std::move(core)) {}

  std::shared_ptr<const detail::ModelCore> core_;
};

// Stable lower-case names: "cpu"/"cuda", "clean"/"faithful", "exact"/"ced".
const char* device_name(Device device) noexcept;
const char* numerics_name(Numerics numerics) noexcept;
const char* prefill_mode_name(PrefillMode mode) noexcept;

}  // namespace flashkv
