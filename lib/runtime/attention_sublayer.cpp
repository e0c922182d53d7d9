// The attention sublayer of one layer (spec §5.1-§5.8, modes of §5.6): own query and window row; the KV
// source publishes compressed entries (kv_publish.cpp, V4: kv_publish_v4.cpp); index sources select entries
// (index_selection.cpp); Reuse layers take the latest selection; V4 HCA layers attend every visible entry;
// attention with sink over window ∪ selected entries; inverse RoPE and the grouped output projection. The
// window rows join the ring after every segment's attention has read it.
#include <algorithm>

#include <fmt/format.h>

#include "runtime/forward_pass.hpp"
#include "runtime/state_access.hpp"
#include "runtime/window_ring.hpp"

namespace flashkv::runtime {
namespace {

// V4 HCA attends every entry visible to the row (§5.4: j < (s+1)/ratio), no indexer: the selection lists
// them all, −1 after the row's last. Returns the selection's width.
int64_t every_visible_entry(const Segment& segment, int64_t ratio, std::vector<int32_t>& selection) {
  const int64_t width = (segment.start + segment.count) / ratio;
  selection.assign(static_cast<size_t>(segment.count * width), -1);
  for (int64_t i = 0; i < segment.count; ++i) {
    const int64_t visible = (segment.start + i + 1) / ratio;
    for (int64_t j = 0; j < visible; ++j)
      selection[static_cast<size_t>(i * width + j)] = static_cast<int32_t>(j);
  }
  return width;
}

}  // namespace

using backend::ConstMatrix;
using backend::Matrix;
using backend::OutputCast;
using backend::RecordFormat;

std::vector<float> ForwardPass::attention(const LayerRole& role, ConstMatrix u) {
  const AttentionWeights& w = model_.weights->layers[static_cast<size_t>(role.index)].attn;
  const int64_t n = u.rows;
  const int64_t heads = config_.num_attention_heads;
  const int64_t dim = config_.head_dim;
  const backend::RopeTable& rope = model_.rope(role);
  const std::span<const int64_t> positions = batch_.positions;

  // §5.1 query: cq = RMSNorm_q(wq_a·u); q = RoPE(wq_b·cq)
  std::vector<float> cq = gemm(u, w.wq_a, OutputCast::kBf16);
  rms_norm(cq, config_.q_lora_rank, w.q_norm);
  std::vector<float> q = gemm(ConstMatrix{cq.data(), n, config_.q_lora_rank}, w.wq_b, OutputCast::kBf16);
  if (model_.v4()) {
    // V4: each head's query is RMS-normalised without a weight (transformers q_b_norm; V4.1 has none)
    backend_.rms_norm(ConstMatrix{q.data(), n * heads, dim}, model_.unit_weight, config_.rms_norm_eps,
                      Matrix{q.data(), n * heads, dim}, model_.rounding);
  }
  backend_.rope(Matrix{q.data(), n, heads * dim}, heads, positions, rope, /*inverse=*/false, model_.rounding);

  // §5.2 window row: RMSNorm, RoPE, then quantized (FP8 in faithful mode), in one backend call
  const std::vector<float> kv = gemm(u, w.wkv, OutputCast::kBf16);
  const size_t row_bytes = backend::record_bytes(model_.row_format, dim, model_.row_rope_dim);
  std::vector<uint8_t> records(static_cast<size_t>(n) * row_bytes);
  std::vector<float> rows(static_cast<size_t>(n * dim));
  backend_.norm_rope_quantize(ConstMatrix{kv.data(), n, dim}, w.kv_norm.vector(), config_.rms_norm_eps,
                              positions, rope, model_.row_format, model_.row_rope_dim, records,
                              Matrix{rows.data(), n, dim}, model_.rounding);

  if (role.ratio > 0) {
    if (role.is_kv_source) publish(role, u);
    if (role.is_index_source) select(role, u, ConstMatrix{cq.data(), n, config_.q_lora_rank});
  }

  std::vector<float> o(static_cast<size_t>(n * heads * dim));
  std::vector<float> window_rows;
  std::vector<int64_t> window_positions;
  for (Segment& segment : batch_.segments) {
    SequenceState& state = *segment.state;
    window_history(state.windows[static_cast<size_t>(role.index)], segment.start, config_.sliding_window,
                   window_rows, window_positions);
    window_rows.insert(window_rows.end(), rows.begin() + segment.first_row * dim,
                       rows.begin() + (segment.first_row + segment.count) * dim);
    for (int64_t i = 0; i < segment.count; ++i) window_positions.push_back(segment.start + i);
    backend::SparseAttention problem;
    problem.q = ConstMatrix{q.data() + segment.first_row * heads * dim, segment.count, heads * dim};
    problem.heads = heads;
    problem.window = ConstMatrix{window_rows.data(), static_cast<int64_t>(window_positions.size()), dim};
    problem.window_positions = window_positions;
    problem.query_positions =
        positions.subspan(static_cast<size_t>(segment.first_row), static_cast<size_t>(segment.count));
    problem.sliding_window = config_.sliding_window;
    problem.sink = w.sink.vector();
    std::vector<int32_t> every_visible;
    if (role.mode == AttentionMode::kHca) {
      problem.entries = owner_cache(state, role.kv_owner).entry_rows();
      problem.topk = every_visible_entry(segment, role.ratio, every_visible);
      problem.selection = every_visible;
    } else if (role.ratio > 0) {
      problem.entries = owner_cache(state, role.kv_owner).entry_rows();
      problem.selection = segment.selections.at(role.topk_source);
      problem.topk = config_.index_topk;
    }
    if (role.ratio > 0 && trace_ != nullptr) {
      trace_->put(fmt::format("layer{}.topk", role.index), {segment.count, problem.topk},
                  problem.selection.data(), TraceKind::kInteger);
    }
    backend_.sparse_attention(problem,
                              Matrix{o.data() + segment.first_row * heads * dim, segment.count, heads * dim},
                              model_.rounding);
  }
  for (Segment& segment : batch_.segments) {
    append_window_rows(segment.state->windows[static_cast<size_t>(role.index)],
                       records.data() + static_cast<size_t>(segment.first_row) * row_bytes, segment.start,
                       segment.count);
  }
  record(role, "window_row", {n, dim}, rows.data());

  // §5.8 RoPE⁻¹, grouped wo_a, wo_b
  const int64_t a_width = config_.o_groups * config_.o_lora_rank;
  std::vector<float> a(static_cast<size_t>(n * a_width));
  backend_.output_projection(ConstMatrix{o.data(), n, heads * dim}, heads, positions, rope, w.wo_a.matrix(),
                             config_.o_groups, Matrix{a.data(), n, a_width}, model_.rounding);
  return gemm(ConstMatrix{a.data(), n, a_width}, w.wo_b, OutputCast::kBf16);
}

}  // namespace flashkv::runtime
