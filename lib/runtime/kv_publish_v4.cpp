// The V4-Flash compressors of a KV source (transformers DeepseekV4CSACompressor / DeepseekV4HCACompressor /
// DeepseekV4Indexer): per channel a softmax over the window's gate logits plus the absolute position bias
// `ape` [ratio, width] (by the token's slot in its window) weights the window's values; the pooled row is
// RMS-normalised with the compressor's norm and rotated at the window's first position j·ratio.
//
// - HCA (ratio 128 in the release): window j is tokens [j·r, (j+1)·r), projections head_dim wide.
// - CSA (ratio 4), overlapping: projections are 2·dim wide, two series per token; entry j pools the first
//   series of window j−1's tokens with the second series of window j's tokens (2·r slots; window −1 does not
//   exist, its slots get weight 0). A CSA layer's indexer runs the same overlapping compressor at
//   index_head_dim with its own weights: those pooled rows are the index keys (V4.1 instead projects the main
//   latents with indexer.wk). In faithful mode the keys are Hadamard-rotated before their MXFP4 records, as
//   the official V4 indexer does (and its queries, index_selection.cpp).
// The (v, g) projections of tokens whose window is still open, and of the last closed window (its first
// series feeds the next entry), wait in the owner's histories between calls: the pending state.
#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <flashkv/error.hpp>

#include "runtime/forward_pass.hpp"
#include "runtime/state_access.hpp"

namespace flashkv::runtime {

using backend::ConstMatrix;
using backend::Matrix;
using backend::OutputCast;

// One compressor's weights and its (v, g) projections of every row of the batch.
struct ForwardPass::V4Compressor {
  const Tensor* norm = nullptr;  // [dim]
  const Tensor* ape = nullptr;   // [ratio, width]
  std::vector<float> v, g;       // [rows, width], fp32
  int64_t width = 0;             // 2·dim when overlapping, else dim
  int64_t dim = 0;
};

void ForwardPass::publish_v4(const LayerRole& role, ConstMatrix u) {
  const AttentionWeights& w = model_.weights->layers[static_cast<size_t>(role.index)].attn;
  const auto project = [&](const Tensor& wkv, const Tensor& wgate, const Tensor& ape, const Tensor& norm) {
    V4Compressor c;
    c.norm = &norm;
    c.ape = &ape;
    c.v = gemm(u, wkv, OutputCast::kFp32);
    c.g = gemm(u, wgate, OutputCast::kFp32);
    c.width = wkv.rows;
    c.dim = norm.cols;
    return c;
  };
  const V4Compressor main =
      project(w.compressor_wkv, w.compressor_wgate, w.compressor_ape, w.compressor_norm);
  V4Compressor index;
  if (role.indexer_has_compressor) {
    index = project(w.indexer_compressor_wkv, w.indexer_compressor_wgate, w.indexer_compressor_ape,
                    w.indexer_compressor_norm);
  }
  const int64_t ratio = role.ratio;
  for (Segment& segment : batch_.segments) {
    OwnerCache& owner = owner_cache(*segment.state, role.index);
    const int64_t first = std::max(owner.count, segment.start / ratio);
    const int64_t last = (segment.start + segment.count) / ratio;  // windows closed in this segment, new
    if (first < last && first != owner.count) {
      fail(ErrorCode::kInternal, "layer {}: entry {} would follow {} published entries", role.index, first,
           owner.count);
    }
    if (first < last) {
      const std::vector<float> entries = compressed_windows(role, main, segment, owner.history, first, last);
      std::vector<float> keys;
      if (role.indexer_has_compressor) {
        keys = compressed_windows(role, index, segment, owner.index_history, first, last);
        if (model_.faithful()) {  // rotated before MXFP4, as the queries (index_selection.cpp)
          backend_.hadamard_rotate(Matrix{keys.data(), last - first, index.dim}, model_.rounding);
        }
      }
      store_entries(owner, entries, keys);
    }
    remember_inputs(owner.history, segment, main.v, main.g);
    if (role.indexer_has_compressor) remember_inputs(owner.index_history, segment, index.v, index.g);
    if (trace_ != nullptr) record_cache(role, owner);
  }
}

std::vector<float> ForwardPass::compressed_windows(const LayerRole& role, const V4Compressor& compressor,
                                                   const Segment& segment, const CompressorHistory& history,
                                                   int64_t first, int64_t last) {
  const int64_t ratio = role.ratio;
  const int64_t dim = compressor.dim;
  const bool overlapping = role.overlapping_compressor;
  const int64_t slots = overlapping ? 2 * ratio : ratio;
  const int64_t windows = last - first;
  // slot rows of every window: (value, gate + ape) in fp32, as transformers adds the bias in fp32
  std::vector<float> v(static_cast<size_t>(windows * slots * dim)), g(v.size());
  const auto put = [&](int64_t window, int64_t slot, int64_t position, int64_t series) {
    const CompressorInput input =
        compressor_input(segment, history, compressor.v, compressor.g, position, role.index);
    const float* bias = compressor.ape->matrix().row(position % ratio) + series * dim;
    float* v_out = v.data() + (window * slots + slot) * dim;
    float* g_out = g.data() + (window * slots + slot) * dim;
    for (int64_t c = 0; c < dim; ++c) {
      v_out[c] = input.v[series * dim + c];
      g_out[c] = input.g[series * dim + c] + bias[c];
    }
  };
  for (int64_t i = 0; i < windows; ++i) {
    const int64_t j = first + i;
    const int64_t own = overlapping ? ratio : 0;  // slot of the window's own first token
    for (int64_t t = 0; t < ratio; ++t) put(i, own + t, j * ratio + t, overlapping ? 1 : 0);
    if (!overlapping) continue;
    for (int64_t t = 0; t < ratio; ++t) {
      if (j > 0) {
        put(i, t, (j - 1) * ratio + t, 0);
      } else {  // no window before the first: value 0, gate −∞ (softmax weight 0)
        std::fill_n(g.data() + (i * slots + t) * dim, dim, -std::numeric_limits<float>::infinity());
      }
    }
  }
  std::vector<float> pooled(static_cast<size_t>(windows * dim));
  backend_.compressor_pool(ConstMatrix{v.data(), windows * slots, dim},
                           ConstMatrix{g.data(), windows * slots, dim}, slots,
                           Matrix{pooled.data(), windows, dim}, model_.rounding);
  rms_norm(pooled, dim, *compressor.norm);
  std::vector<int64_t> positions(static_cast<size_t>(windows));
  for (int64_t i = 0; i < windows; ++i) positions[static_cast<size_t>(i)] = (first + i) * ratio;
  backend_.rope(Matrix{pooled.data(), windows, dim}, 1, positions, model_.rope(role), false, model_.rounding);
  return pooled;
}

}  // namespace flashkv::runtime
