// The attention sublayer of one layer (spec §5.1-§5.8, modes of §5.6): own query and window row; the KV
// source publishes compressed entries (kv_publish.cpp); index sources select entries (index_selection.cpp);
// Reuse layers take the latest selection; attention with sink over window ∪ selected entries; inverse RoPE
// and the grouped output projection. The window rows join the ring after every segment's attention has read
// it.
#include <algorithm>

#include <fmt/format.h>

#include "runtime/forward_pass.hpp"
#include "runtime/state_access.hpp"
#include "runtime/window_ring.hpp"

namespace flashkv::runtime {

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
  backend_.rope(Matrix{q.data(), n, heads * dim}, heads, positions, rope, /*inverse=*/false, model_.rounding);

  // §5.2 window row: quantized after RoPE (FP8 in faithful mode)
  std::vector<float> kv = gemm(u, w.wkv, OutputCast::kBf16);
  rms_norm(kv, dim, w.kv_norm);
  backend_.rope(Matrix{kv.data(), n, dim}, 1, positions, rope, /*inverse=*/false, model_.rounding);
  const RecordFormat row_format = model_.faithful() ? RecordFormat::kFp8 : RecordFormat::kFp32;
  const size_t row_bytes = backend::record_bytes(row_format, dim);
  std::vector<uint8_t> records(static_cast<size_t>(n) * row_bytes);
  std::vector<float> rows(static_cast<size_t>(n * dim));
  backend_.quantize_rows(ConstMatrix{kv.data(), n, dim}, row_format, records, Matrix{rows.data(), n, dim});

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
    if (role.ratio > 0) {
      problem.entries = owner_cache(state, role.kv_owner).entry_rows();
      problem.selection = segment.selections.at(role.topk_source);
      problem.topk = config_.index_topk;
      if (trace_ != nullptr) {
        trace_->put(fmt::format("layer{}.topk", role.index), {segment.count, config_.index_topk},
                    problem.selection.data(), TraceKind::kInteger);
      }
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
