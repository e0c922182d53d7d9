// Index sources (spec §5.4, §5.5): index queries and head weights, scores over the visible index keys of the
// owner, the candidate pool (candidate source, from its own scores before its top-k), the pool restriction of
// later index sources (Reindex), and the top-k selection that this layer and the Reuse layers after it attend
// to.
#include <cmath>

#include <fmt/format.h>
#include <flashkv/error.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include "runtime/forward_pass.hpp"
#include "runtime/state_access.hpp"

namespace flashkv::runtime {

using backend::ConstMatrix;
using backend::Matrix;
using backend::OutputCast;

void ForwardPass::select(const LayerRole& role, ConstMatrix u, ConstMatrix cq) {
  const AttentionWeights& w = model_.weights->layers[static_cast<size_t>(role.index)].attn;
  const int64_t n = u.rows;
  const int64_t heads = config_.index_n_heads;
  const int64_t dim = config_.index_head_dim;

  // q^I = MXFP4(RoPE(wq_b·cq)); w = bf16(weights_proj·u) × dim^-½ × heads^-½
  std::vector<float> queries = gemm(cq, w.indexer_wq_b, OutputCast::kBf16);
  backend_.rope(Matrix{queries.data(), n, heads * dim}, heads, batch_.positions, model_.rope(role), false,
                model_.rounding);
  if (model_.faithful()) {
    // V4 rotates index queries (and keys, kv_publish_v4.cpp) by a Hadamard matrix before MXFP4
    if (model_.v4()) backend_.hadamard_rotate(Matrix{queries.data(), n * heads, dim}, model_.rounding);
    backend_.fake_quantize(Matrix{queries.data(), n, heads * dim}, backend::RecordFormat::kMxfp4);
  }
  std::vector<float> head_weights = gemm(u, w.indexer_weights_proj, OutputCast::kBf16);
  const double scale = std::pow(static_cast<double>(dim), -0.5) * std::pow(static_cast<double>(heads), -0.5);
  // V4.1 rounds the scaled weights and the scores to BF16 (faithful); the official V4 indexer keeps fp32
  const bool bf16 = model_.faithful() && !model_.v4();
  const backend::Rounding score_rounding = model_.v4() ? backend::Rounding::kClean : model_.rounding;
  for (float& value : head_weights) {
    const float scaled = static_cast<float>(static_cast<double>(value) * scale);
    value = bf16 ? numeric::bf16_to_float(numeric::bf16_from_float(scaled)) : scaled;
  }

  for (Segment& segment : batch_.segments) {
    const OwnerCache& owner = owner_cache(*segment.state, role.kv_owner);
    const int64_t width = owner.count;
    std::vector<int64_t> n_visible(static_cast<size_t>(segment.count));
    for (int64_t i = 0; i < segment.count; ++i)
      n_visible[static_cast<size_t>(i)] = (segment.start + i + 1) / role.ratio;
    std::vector<float> scores(static_cast<size_t>(segment.count * width));
    backend::IndexScoring problem;
    problem.queries =
        ConstMatrix{queries.data() + segment.first_row * heads * dim, segment.count, heads * dim};
    problem.head_weights = ConstMatrix{head_weights.data() + segment.first_row * heads, segment.count, heads};
    problem.heads = heads;
    problem.keys = owner.key_rows();
    problem.n_visible = n_visible;
    const Matrix score_matrix{scores.data(), segment.count, width};
    backend_.index_scores(problem, score_matrix, score_rounding);
    if (role.is_candidate_source) {
      segment.pool.assign(static_cast<size_t>(segment.count * width), 0);
      segment.pool_width = width;
      backend_.candidate_pool(score_matrix, n_visible, config_.candidate_block_size,
                              config_.candidate_topk_blocks, segment.pool);
      if (trace_ != nullptr) {
        trace_->put(fmt::format("layer{}.pool", role.index), {segment.count, width}, segment.pool.data(),
                    TraceKind::kBool);
      }
    }
    if (role.candidate_pool_source >= 0) {
      if (segment.pool_width != width) {
        fail(ErrorCode::kInternal, "layer {}: candidate pool of width {} for {} entries", role.index,
             segment.pool_width, width);
      }
      backend_.restrict_to_pool(score_matrix, segment.pool);
    }
    record(role, "index_scores", {segment.count, width}, scores.data());
    std::vector<int32_t>& selection = segment.selections[role.index];
    selection.assign(static_cast<size_t>(segment.count * config_.index_topk), -1);
    backend_.top_k(score_matrix, config_.index_topk, selection);
  }
}

}  // namespace flashkv::runtime
