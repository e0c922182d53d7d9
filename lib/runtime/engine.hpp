// Engine — the internal forward of one DeepSeek-V4.1 model over per-sequence state.
//
// This is the seam between the public objects (Model, Session, KVHandle in include/flashkv, which own
// policy: chunking, sampling, cancellation, snapshots) and the math (lib/backend: one file per mechanism).
// The Engine knows the config, the layer plan and the weights placed on one Backend; it runs the spec's
// forward (spec/MODEL.md §3-§8) for a run of new tokens of one or several sequences.
//
// Contract:
// - forward() appends `tokens` to `state` (positions state.length() ... +n-1) running every layer on every
//   new row (exact prefill / decode, §8.3). Splitting a token run into several forward() calls in any way
//   gives the same results as one call (chunk invariance; odd chunks leave ratio-2 pending state).
// - prefill_ced() is the CED deployment approximation of §8.4 for a prompt on an EMPTY state.
// - Logits are fp32 [rows, vocab]; LogitsRows says which rows are returned (the last row only, or all).
// - numerics: kClean = fp32 with the KV quantizers off; kFaithful = the KV quantizers of §2.2 and the
//   BF16 casts of §2.1, as the numpy reference (tests/reference) does.
// Ownership: the Engine borrows nothing from the caller after construction returns; it owns its weights.
// SequenceState is a value: copying it is a deep copy (fork); it refers to no Engine.
// Threading: an Engine is immutable after construction and may be shared; forward() on different states
// may run concurrently. One SequenceState is used by one thread at a time.
// Errors: flashkv::Error kInvalidArgument for token ids out of [0, vocab), an empty run, or a state that
// would pass max_position_embeddings; the state is unchanged when forward() throws for a bad argument.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include <flashkv/config.hpp>

namespace flashkv::backend {
class Backend;  // lib/backend/backend.hpp
}  // namespace flashkv::backend

namespace flashkv::runtime {

enum class Numerics { kClean, kFaithful };
enum class LogitsRows { kLast, kAll };

// Everything a later forward() needs (spec §8.2): window rings, compressed entries and index keys of the
// KV owners, ratio-2 pending (v, g), Engram history, the token ids so far. Defined in sequence_state.hpp.
struct SequenceState;

struct ForwardResult {
  std::vector<float> logits;  // rows x vocab, row-major
  int64_t rows = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const LayerPlan& plan() const = 0;
  virtual Numerics numerics() const = 0;

  virtual std::unique_ptr<SequenceState> new_state() const = 0;
  virtual std::unique_ptr<SequenceState> copy_state(const SequenceState& state) const = 0;
  virtual int64_t length(const SequenceState& state) const = 0;
  virtual std::span<const int32_t> tokens(const SequenceState& state) const = 0;

  // Exact forward of `tokens` appended to `state`.
  virtual ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens, LogitsRows rows) const = 0;

  // One decode step for several sequences at once (one new token each); results equal per-sequence forward().
  virtual std::vector<ForwardResult> forward_batch(std::span<SequenceState* const> states,
                                                   std::span<const int32_t> next_tokens) const = 0;

  // CED prefill (§8.4) of `prompt` into an empty `state`; returns the last row's logits.
  virtual ForwardResult prefill_ced(SequenceState& state, std::span<const int32_t> prompt) const = 0;

  // Drops the last n tokens of `state` (rewind). Exact within the state's retained history; throws
  // kInvalidArgument naming the limit when the rows needed to continue were not retained.
  virtual void truncate(SequenceState& state, int64_t n) const = 0;

  // Bytes held by the state: global KV records, window rows, pending state.
  virtual int64_t state_bytes(const SequenceState& state) const = 0;
};

struct EngineOptions {
  Numerics numerics = Numerics::kFaithful;
  int threads = 0;              // 0: hardware concurrency
  int64_t rewind_margin = 256;  // window rows kept beyond sliding_window so rewind/DSpark rollback is exact
};

}  // namespace flashkv::runtime

namespace flashkv::runtime {

// Loads a checkpoint directory (config.json + safetensors) onto the CPU backend. Weights are dequantized
// to fp32 at load (FP8 32x32 blocks, MXFP4 experts, FP8 Engram rows); see docs/architecture.md.
// Errors: those of the config parser and the loader (kInvalidConfig, kInvalidCheckpoint naming the tensor).
std::unique_ptr<Engine> load_cpu_engine(const std::filesystem::path& checkpoint_dir, const EngineOptions& options);

// The same engine with its kernel layer injected: every layer calls only the Backend interface, so a backend
// built outside lib/ (the CUDA one in kernels/) runs the unchanged forward. load_cpu_engine() passes
// backend::make_cpu_backend(options.threads). The engine owns `backend`; it must be non-null.
// Errors: those of load_cpu_engine(); kInvalidArgument for a null backend.
std::unique_ptr<Engine> load_engine_with_backend(const std::filesystem::path& checkpoint_dir,
                                                 const EngineOptions& options,
                                                 std::unique_ptr<backend::Backend> backend);

}  // namespace flashkv::runtime
