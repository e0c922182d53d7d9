// CpuEngine: loading, states, and the ways to run the forward (exact forward, batched decode, CED prefill).
#include "runtime/cpu_engine.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include <flashkv/error.hpp>

#include "loader/checkpoint.hpp"
#include "runtime/window_ring.hpp"

namespace flashkv::runtime {

using backend::RecordFormat;
using backend::Rounding;

CpuEngine::CpuEngine(const std::filesystem::path& checkpoint_dir, const EngineOptions& options)
    : CpuEngine(checkpoint_dir, options, backend::make_cpu_backend(options.threads)) {}

CpuEngine::CpuEngine(const std::filesystem::path& checkpoint_dir, const EngineOptions& options,
                     std::unique_ptr<backend::Backend> injected)
    : config_(load_model_config(checkpoint_dir)),
      plan_(make_layer_plan(config_)),
      options_(options),
      backend_(std::move(injected)) {
  if (!backend_) fail(ErrorCode::kInvalidArgument, "the engine's backend must not be null");
  if (options.rewind_margin < 0) {
    fail(ErrorCode::kInvalidArgument, "EngineOptions.rewind_margin must be >= 0, got {}",
         options.rewind_margin);
  }
  if (options.threads < 0)
    fail(ErrorCode::kInvalidArgument, "EngineOptions.threads must be >= 0, got {}", options.threads);
  const int64_t index_dim = config_.index_head_dim;
  if (options.numerics == Numerics::kFaithful && config_.family == ModelFamily::kDeepseekV4 &&
      (index_dim % 32 != 0 || (index_dim & (index_dim - 1)) != 0)) {
    // V4.1 configs are validated for MXFP4 widths; V4 configs may use narrower index heads (clean numerics
    // only)
    fail(ErrorCode::kUnsupported,
         "faithful numerics Hadamard-rotate index keys and queries and quantize them in MXFP4 blocks of 32 "
         "channels, so index_head_dim must be a power of two >= 32, but it is {}: use clean numerics for "
         "this model",
         index_dim);
  }
  const loader::Checkpoint checkpoint = loader::Checkpoint::open(checkpoint_dir);
  weights_ = load_model_weights(checkpoint, config_, plan_);
  engram_ = EngramHasher(config_, load_engram_token_map(checkpoint_dir, config_));
  const Rounding rounding = options.numerics == Numerics::kFaithful ? Rounding::kFaithful : Rounding::kClean;
  context_.config = &config_;
  context_.plan = &plan_;
  context_.backend = backend_.get();
  context_.weights = &weights_;
  context_.engram = &engram_;
  context_.rounding = rounding;
  context_.base_rope =
      backend::make_rope_table(config_.qk_rope_head_dim, config_.rope_theta, nullptr, rounding);
  context_.compress_rope = backend::make_rope_table(config_.qk_rope_head_dim, config_.compress_rope_theta,
                                                    &config_.rope_scaling, rounding);
  context_.row_format = row_format();
  context_.row_rope_dim = context_.v4() ? config_.qk_rope_head_dim : 0;
  context_.unit_weight.assign(static_cast<size_t>(config_.head_dim), 1.0f);
}

// Window rows and compressed entries: fp32 (clean); faithful V4.1 FP8 rows and NVFP4 entries, faithful V4 its
// FP8 + BF16 RoPE record for both.
RecordFormat CpuEngine::row_format() const {
  if (!context_.faithful()) return RecordFormat::kFp32;
  return context_.v4() ? RecordFormat::kFp8Bf16Rope : RecordFormat::kFp8;
}

RecordFormat CpuEngine::entry_format() const {
  if (!context_.faithful()) return RecordFormat::kFp32;
  return context_.v4() ? RecordFormat::kFp8Bf16Rope : RecordFormat::kNvfp4;
}

namespace {

CompressorHistory make_history(int64_t dim, int64_t capacity) {
  CompressorHistory history;
  history.dim = dim;
  history.capacity = capacity;
  history.v.assign(static_cast<size_t>(capacity * dim), 0.0f);
  history.g = history.v;
  history.positions.assign(static_cast<size_t>(capacity), -1);
  return history;
}

}  // namespace

std::unique_ptr<SequenceState> CpuEngine::new_state() const {
  auto state = std::make_unique<SequenceState>();
  const int64_t capacity = config_.sliding_window + options_.rewind_margin;
  for (size_t layer = 0; layer < plan_.layers.size(); ++layer) {
    state->windows.push_back(
        make_window_ring(row_format(), config_.head_dim, context_.row_rope_dim, capacity));
  }
  for (const LayerRole& role : plan_.layers) {
    if (!role.is_kv_source) continue;
    OwnerCache owner;
    owner.layer = role.index;
    owner.ratio = role.ratio;
    owner.entry_format = entry_format();
    owner.key_format = context_.faithful() ? RecordFormat::kMxfp4 : RecordFormat::kFp32;
    owner.entry_dim = config_.head_dim;
    owner.entry_rope_dim = context_.row_rope_dim;
    // V4 HCA layers have no indexer, hence no keys
    owner.key_dim = context_.v4() && !role.is_index_source ? 0 : config_.index_head_dim;
    owner.overlap_windows = role.overlapping_compressor ? 1 : 0;
    if (role.ratio > 1) {
      // the open window, plus (overlapping) the closed one before it, plus the rewind margin
      const int64_t kept = options_.rewind_margin + role.ratio * (1 + owner.overlap_windows);
      const int64_t series = role.overlapping_compressor ? 2 : 1;
      owner.history = make_history(series * config_.head_dim, kept);
      if (role.indexer_has_compressor) owner.index_history = make_history(2 * config_.index_head_dim, kept);
    }
    state->owners.push_back(std::move(owner));
  }
  return state;
}

void CpuEngine::check_state(const SequenceState& state) const {
  const bool faithful = context_.faithful();
  const auto sources = std::count_if(plan_.layers.begin(), plan_.layers.end(),
                                     [](const LayerRole& role) { return role.is_kv_source; });
  const bool fits = state.windows.size() == plan_.layers.size() &&
                    static_cast<int64_t>(state.owners.size()) == static_cast<int64_t>(sources) &&
                    static_cast<int64_t>(state.tokens.size()) == state.length &&
                    (state.windows.empty() || (state.windows[0].format != RecordFormat::kFp32) == faithful) &&
                    std::all_of(state.owners.begin(), state.owners.end(), [&](const OwnerCache& owner) {
                      return static_cast<size_t>(owner.layer) < plan_.layers.size() &&
                             plan_.layers[static_cast<size_t>(owner.layer)].is_kv_source;
                    });
  if (!fits) {
    fail(ErrorCode::kInvalidArgument,
         "sequence state was not made by this engine (config or numerics differ)");
  }
}

void CpuEngine::check_run(const SequenceState& state, std::span<const int32_t> tokens) const {
  check_state(state);
  if (tokens.empty()) fail(ErrorCode::kInvalidArgument, "forward: the token run is empty");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      fail(ErrorCode::kInvalidArgument, "forward: token id {} at index {} is outside the vocabulary [0, {})",
           tokens[i], i, config_.vocab_size);
    }
  }
  const int64_t end = state.length + static_cast<int64_t>(tokens.size());
  if (end > config_.max_position_embeddings) {
    fail(ErrorCode::kInvalidArgument,
         "forward: {} tokens after {} would pass max_position_embeddings ({}) of the config", tokens.size(),
         state.length, config_.max_position_embeddings);
  }
}

std::unique_ptr<SequenceState> CpuEngine::copy_state(const SequenceState& state) const {
  check_state(state);
  return std::make_unique<SequenceState>(state);
}

std::vector<ForwardResult> CpuEngine::run(std::span<SequenceState* const> states,
                                          std::span<const std::span<const int32_t>> runs, LogitsRows rows,
                                          ForwardTrace* trace) const {
  Batch batch;
  std::vector<int32_t> ids;
  std::vector<int64_t> ngrams;
  for (size_t i = 0; i < states.size(); ++i) {
    Segment segment;
    segment.state = states[i];
    segment.first_row = batch.rows();
    segment.count = static_cast<int64_t>(runs[i].size());
    segment.start = states[i]->length;
    for (int64_t t = 0; t < segment.count; ++t) batch.positions.push_back(segment.start + t);
    ids.insert(ids.end(), runs[i].begin(), runs[i].end());
    batch.tokens.insert(batch.tokens.end(), runs[i].begin(), runs[i].end());
    if (engram_.enabled()) {
      const std::vector<int64_t> own = engram_.ngram_ids(states[i]->tokens, runs[i]);
      ngrams.insert(ngrams.end(), own.begin(), own.end());
    }
    batch.segments.push_back(std::move(segment));
  }
  ForwardPass pass(context_, batch, trace);
  Activations x = pass.embed(ids);
  pass.run_layers(0, config_.num_hidden_layers, x, ngrams);
  std::vector<int64_t> logit_rows;
  for (const Segment& segment : batch.segments) {
    const int64_t first =
        rows == LogitsRows::kAll ? segment.first_row : segment.first_row + segment.count - 1;
    for (int64_t r = first; r < segment.first_row + segment.count; ++r) logit_rows.push_back(r);
  }
  const std::vector<float> logits = pass.logits(x, logit_rows);
  std::vector<ForwardResult> results;
  size_t offset = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    ForwardResult result;
    result.rows = rows == LogitsRows::kAll ? static_cast<int64_t>(runs[i].size()) : 1;
    const size_t count = static_cast<size_t>(result.rows * config_.vocab_size);
    result.logits.assign(logits.begin() + static_cast<std::ptrdiff_t>(offset),
                         logits.begin() + static_cast<std::ptrdiff_t>(offset + count));
    offset += count;
    results.push_back(std::move(result));
    states[i]->tokens.insert(states[i]->tokens.end(), runs[i].begin(), runs[i].end());
    states[i]->length += static_cast<int64_t>(runs[i].size());
  }
  return results;
}

ForwardResult CpuEngine::forward(SequenceState& state, std::span<const int32_t> tokens,
                                 LogitsRows rows) const {
  return forward_traced(state, tokens, rows, nullptr);
}

ForwardResult CpuEngine::forward_traced(SequenceState& state, std::span<const int32_t> tokens,
                                        LogitsRows rows, ForwardTrace* trace) const {
  check_run(state, tokens);
  SequenceState* const states[] = {&state};
  const std::span<const int32_t> runs[] = {tokens};
  return std::move(run(states, runs, rows, trace).front());
}

std::vector<ForwardResult> CpuEngine::forward_batch(std::span<SequenceState* const> states,
                                                    std::span<const int32_t> next_tokens) const {
  if (states.size() != next_tokens.size()) {
    fail(ErrorCode::kInvalidArgument, "forward_batch: {} states but {} tokens", states.size(),
         next_tokens.size());
  }
  if (states.empty()) return {};
  std::set<const SequenceState*> distinct;
  std::vector<std::span<const int32_t>> runs;
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i] == nullptr || !distinct.insert(states[i]).second) {
      fail(ErrorCode::kInvalidArgument, "forward_batch: state {} is null or appears twice", i);
    }
    runs.push_back(next_tokens.subspan(i, 1));
    check_run(*states[i], runs.back());
  }
  return run(states, runs, LogitsRows::kLast, nullptr);
}

ForwardResult CpuEngine::prefill_ced(SequenceState& state, std::span<const int32_t> prompt) const {
  return prefill_ced_traced(state, prompt, nullptr);
}

ForwardResult CpuEngine::prefill_ced_traced(SequenceState& state, std::span<const int32_t> prompt,
                                            ForwardTrace* trace) const {
  const int boundary = plan_.candidate_source_layer;
  if (boundary < 0) {
    fail(ErrorCode::kUnsupported,
         "prefill_ced: the config has no candidate source layer (no encoder/decoder split)");
  }
  for (const LayerRole& role : plan_.layers) {
    if (role.is_kv_source && role.index > boundary) {
      fail(ErrorCode::kUnsupported, "prefill_ced: KV source {} lies inside the decoder (layers >= {})",
           role.index, boundary);
    }
  }
  check_run(state, prompt);
  if (state.length != 0) {
    fail(ErrorCode::kInvalidArgument,
         "prefill_ced: the state already holds {} tokens (CED prefill needs an empty one)", state.length);
  }
  const int64_t count = static_cast<int64_t>(prompt.size());
  Batch batch;
  batch.segments.push_back(Segment{&state, 0, count, 0, {}, {}, 0});
  for (int64_t t = 0; t < count; ++t) batch.positions.push_back(t);
  batch.tokens.assign(prompt.begin(), prompt.end());
  const std::vector<int64_t> ngrams =
      engram_.enabled() ? engram_.ngram_ids({}, prompt) : std::vector<int64_t>{};
  ForwardPass encoder(context_, batch, trace);
  Activations x = encoder.embed(prompt);
  encoder.run_layers(0, boundary, x, ngrams);
  // the decoder's global KV: the candidate source's compressor over every prompt row
  const LayerRole& source = plan_.layers[static_cast<size_t>(boundary)];
  Activations collapsed = x;
  encoder.engram(source, collapsed, ngrams);
  const std::vector<float> u = encoder.attention_input(source, collapsed);
  ForwardPass publisher(context_, batch, nullptr);
  publisher.publish(source, backend::ConstMatrix{u.data(), count, config_.hidden_size});
  // the decoder on the last window of rows; its rings hold nothing before P − W
  const int64_t tail = std::min(count, config_.sliding_window);
  const int64_t skip = count - tail;
  const int64_t hc = config_.hc_mult;
  const int64_t width = hc * config_.hidden_size;
  Batch tail_batch;
  tail_batch.segments.push_back(Segment{&state, 0, tail, skip, {}, {}, 0});
  for (int64_t t = skip; t < count; ++t) tail_batch.positions.push_back(t);
  tail_batch.tokens.assign(prompt.begin() + skip, prompt.end());
  Activations y;
  y.rows = tail;
  y.streams.assign(x.streams.begin() + skip * width, x.streams.end());
  y.pre.assign(x.pre.begin() + skip * hc, x.pre.end());
  const std::span<const int64_t> tail_ngrams =
      ngrams.empty()
          ? std::span<const int64_t>{}
          : std::span<const int64_t>(ngrams).subspan(static_cast<size_t>(skip * engram_.max_ngram()));
  ForwardPass decoder(context_, tail_batch, trace);
  decoder.run_layers(boundary, config_.num_hidden_layers, y, tail_ngrams);
  const int64_t last[] = {tail - 1};
  ForwardResult result;
  result.logits = decoder.logits(y, last);
  result.rows = 1;
  state.tokens.assign(prompt.begin(), prompt.end());
  state.length = count;
  return result;
}

void CpuEngine::truncate(SequenceState& state, int64_t n) const {
  check_state(state);
  if (n < 0 || n > state.length) {
    fail(ErrorCode::kInvalidArgument, "truncate: cannot drop {} of the state's {} tokens", n, state.length);
  }
  const int64_t length = state.length - n;
  // the next query at `length` reads window rows from max(0, length − W + 1)
  const int64_t needed = std::max<int64_t>(0, length - config_.sliding_window + 1);
  for (const WindowRing& ring : state.windows) {
    const int64_t kept_from = std::max<int64_t>(0, state.length - ring.capacity);
    if (needed < kept_from) {
      fail(ErrorCode::kInvalidArgument,
           "truncate: dropping {} tokens needs window rows from position {}, but the rings keep positions >= "
           "{} "
           "(sliding_window {} + rewind_margin {})",
           n, needed, kept_from, config_.sliding_window, options_.rewind_margin);
    }
  }
  for (const OwnerCache& owner : state.owners) {
    if (owner.ratio < 2) continue;
    // the next entry pools the open window (and, overlapping, the closed one before it)
    const int64_t reopened = std::max<int64_t>(0, length / owner.ratio - owner.overlap_windows) * owner.ratio;
    for (int64_t p = reopened; p < length; ++p) {
      if (owner.history.positions[static_cast<size_t>(p % owner.history.capacity)] != p) {
        fail(ErrorCode::kInvalidArgument,
             "truncate: dropping {} tokens reopens the compressor group of position {} (layer {}), which is "
             "no longer "
             "kept (rewind_margin {})",
             n, p, owner.layer, options_.rewind_margin);
      }
    }
  }
  for (WindowRing& ring : state.windows) truncate_window(ring, length);
  for (OwnerCache& owner : state.owners) {
    owner.count = std::min(owner.count, length / owner.ratio);
    owner.entries.resize(static_cast<size_t>(owner.count) * owner.entry_rows().row_bytes());
    if (owner.key_dim > 0) owner.keys.resize(static_cast<size_t>(owner.count) * owner.key_rows().row_bytes());
    for (CompressorHistory* history : {&owner.history, &owner.index_history}) {
      for (int64_t& position : history->positions) {
        if (position >= length) position = -1;
      }
    }
  }
  state.tokens.resize(static_cast<size_t>(length));
  state.length = length;
}

int64_t CpuEngine::state_bytes(const SequenceState& state) const {
  size_t bytes = state.tokens.size() * sizeof(int32_t);
  for (const WindowRing& ring : state.windows) bytes += ring.records.size();
  for (const OwnerCache& owner : state.owners) {
    bytes += owner.entries.size() + owner.keys.size();
    for (const CompressorHistory* history : {&owner.history, &owner.index_history})
      bytes += (history->v.size() + history->g.size()) * sizeof(float);
  }
  return static_cast<int64_t>(bytes);
}

std::unique_ptr<Engine> load_cpu_engine(const std::filesystem::path& checkpoint_dir,
                                        const EngineOptions& options) {
  return std::make_unique<CpuEngine>(checkpoint_dir, options);
}

std::unique_ptr<Engine> load_engine_with_backend(const std::filesystem::path& checkpoint_dir,
                                                 const EngineOptions& options,
                                                 std::unique_ptr<backend::Backend> injected) {
  return std::make_unique<CpuEngine>(checkpoint_dir, options, std::move(injected));
}

}  // namespace flashkv::runtime
