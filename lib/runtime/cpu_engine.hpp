// CpuEngine — the Engine of engine.hpp on the CPU backend: weights dequantized to fp32 at load, the forward
// of forward_pass.hpp, per-sequence state of sequence_state.hpp. load_cpu_engine() returns one.
//
// Beyond the Engine contract it offers traced variants of forward() and prefill_ced() that fill a
// ForwardTrace with per-layer arrays (test and debugging aid: the reference comparison reads top-k selections
// and scores from it). copy_state() is a deep copy (no shared pages yet). truncate() is exact for n <=
// rewind_margin + 1 (always when the sequence is shorter than sliding_window + rewind_margin); beyond, it
// throws kInvalidArgument naming the limit. Threading and errors: as Engine.
#pragma once

#include <filesystem>
#include <memory>

#include "backend/backend.hpp"
#include "runtime/engine.hpp"
#include "runtime/engram_hash.hpp"
#include "runtime/forward_pass.hpp"
#include "runtime/forward_trace.hpp"
#include "runtime/model_weights.hpp"
#include "runtime/sequence_state.hpp"

namespace flashkv::runtime {

class CpuEngine final : public Engine {
 public:
  CpuEngine(const std::filesystem::path& checkpoint_dir, const EngineOptions& options);
  // Runs on `backend` (owned; non-null) instead of a CpuBackend: see load_engine_with_backend().
  CpuEngine(const std::filesystem::path& checkpoint_dir, const EngineOptions& options,
            std::unique_ptr<backend::Backend> injected);

  const ModelConfig& config() const override { return config_; }
  const LayerPlan& plan() const override { return plan_; }
  Numerics numerics() const override { return options_.numerics; }

  std::unique_ptr<SequenceState> new_state() const override;
  std::unique_ptr<SequenceState> copy_state(const SequenceState& state) const override;
  int64_t length(const SequenceState& state) const override { return state.length; }
  std::span<const int32_t> tokens(const SequenceState& state) const override { return state.tokens; }

  ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens,
                        LogitsRows rows) const override;
  std::vector<ForwardResult> forward_batch(std::span<SequenceState* const> states,
                                           std::span<const int32_t> next_tokens) const override;
  ForwardResult prefill_ced(SequenceState& state, std::span<const int32_t> prompt) const override;
  void truncate(SequenceState& state, int64_t n) const override;
  int64_t state_bytes(const SequenceState& state) const override;

  ForwardResult forward_traced(SequenceState& state, std::span<const int32_t> tokens, LogitsRows rows,
                               ForwardTrace* trace) const;
  ForwardResult prefill_ced_traced(SequenceState& state, std::span<const int32_t> prompt,
                                   ForwardTrace* trace) const;

  uint64_t weight_bytes() const { return weights_.bytes; }
  int threads() const { return backend_->threads(); }
  const EngramHasher& engram() const { return engram_; }

 private:
  std::vector<ForwardResult> run(std::span<SequenceState* const> states,
                                 std::span<const std::span<const int32_t>> runs, LogitsRows rows,
                                 ForwardTrace* trace) const;
  void check_state(const SequenceState& state) const;
  backend::RecordFormat row_format() const;
  backend::RecordFormat entry_format() const;
  void check_run(const SequenceState& state, std::span<const int32_t> tokens) const;

  ModelConfig config_;
  LayerPlan plan_;
  EngineOptions options_;
  std::unique_ptr<backend::Backend> backend_;
  ModelWeights weights_;
  EngramHasher engram_;
  ModelContext context_;
};

}  // namespace flashkv::runtime
