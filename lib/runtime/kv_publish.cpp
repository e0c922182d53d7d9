// The compressor of a KV source (spec §5.3): per-token latents (ratio 1) or softmax pooling over the aligned
// groups {r·j, …, r·j+r−1} (ratio r >= 2), then the two records every entry publishes: the compressed entry
// C_j = Q(RoPE_{j·r}(latent_j)) and the index key K_j = Q(RoPE_{j·r}(RMSNorm_k(wk·latent_j))) (from the
// un-rotated latent). An incomplete group publishes nothing: its tokens' fp32 (v, g) wait in the owner's
// history (the pending state) until a later chunk or step completes it. Entries already published (CED
// prefill publishes the candidate source's entries before its decoder pass) are not published again.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <flashkv/error.hpp>

#include "runtime/forward_pass.hpp"
#include "runtime/state_access.hpp"

namespace flashkv::runtime {
namespace {

using backend::ConstMatrix;
using backend::Matrix;
using backend::OutputCast;

void remember(CompressorHistory& history, int64_t position, const float* v, const float* g) {
  const int64_t slot = position % history.capacity;
  std::copy_n(v, history.dim, history.v.data() + slot * history.dim);
  std::copy_n(g, history.dim, history.g.data() + slot * history.dim);
  history.positions[static_cast<size_t>(slot)] = position;
}

}  // namespace

CompressorInput compressor_input(const Segment& segment, const CompressorHistory& history,
                                 const std::vector<float>& v_rows, const std::vector<float>& g_rows,
                                 int64_t position, int layer) {
  const int64_t dim = history.dim;
  if (position >= segment.start) {
    const int64_t row = segment.first_row + (position - segment.start);
    return {v_rows.data() + row * dim, g_rows.data() + row * dim};
  }
  const int64_t slot = position % history.capacity;
  if (history.positions[static_cast<size_t>(slot)] != position) {
    fail(ErrorCode::kInternal, "layer {}: the pending compressor state of position {} is gone", layer,
         position);
  }
  return {history.v.data() + slot * dim, history.g.data() + slot * dim};
}

void remember_inputs(CompressorHistory& history, const Segment& segment, const std::vector<float>& v_rows,
                     const std::vector<float>& g_rows) {
  for (int64_t i = std::max<int64_t>(0, segment.count - history.capacity); i < segment.count; ++i) {
    const int64_t row = segment.first_row + i;
    remember(history, segment.start + i, v_rows.data() + row * history.dim,
             g_rows.data() + row * history.dim);
  }
}

void ForwardPass::quantize(ConstMatrix x, backend::RecordFormat format, int64_t rope_dim,
                           std::span<uint8_t> records, Matrix dequantized) const {
  if (format == backend::RecordFormat::kFp8Bf16Rope) {
    backend_.quantize_rope_rows(x, rope_dim, records, dequantized);
  } else {
    backend_.quantize_rows(x, format, records, dequantized);
  }
}

void ForwardPass::publish(const LayerRole& role, ConstMatrix u) {
  if (model_.v4()) return publish_v4(role, u);
  const AttentionWeights& w = model_.weights->layers[static_cast<size_t>(role.index)].attn;
  const int64_t dim = config_.head_dim;
  const int64_t ratio = role.ratio;

  // Projections of every row of the batch: latents (ratio 1) or fp32 (v, g) (ratio >= 2).
  std::vector<float> projected =
      gemm(u, w.compressor_wkv, ratio == 1 ? OutputCast::kBf16 : OutputCast::kFp32);
  std::vector<float> gates;
  if (ratio == 1) {
    rms_norm(projected, dim, w.compressor_norm);
  } else {
    gates = gemm(u, w.compressor_wgate, OutputCast::kFp32);
  }

  for (Segment& segment : batch_.segments) {
    OwnerCache& owner = owner_cache(*segment.state, role.index);
    const int64_t end = segment.start + segment.count;
    const int64_t first = std::max(owner.count, ratio == 1 ? segment.start : segment.start / ratio);
    const int64_t last = end / ratio;  // groups [first, last) complete inside this segment and are new
    if (first < last && first != owner.count) {
      fail(ErrorCode::kInternal, "layer {}: entry {} would follow {} published entries", role.index, first,
           owner.count);
    }
    if (first < last) {
      std::vector<float> latents;
      if (ratio == 1) {
        const int64_t row = segment.first_row + (first - segment.start);
        latents.assign(projected.begin() + row * dim, projected.begin() + (row + last - first) * dim);
      } else {
        latents = pooled_latents(role, segment, owner, first, last, projected, gates);
      }
      append_entries(role, owner, first, std::move(latents));
    }
    if (ratio > 1) remember_inputs(owner.history, segment, projected, gates);
    if (trace_ != nullptr) record_cache(role, owner);
  }
}

std::vector<float> ForwardPass::pooled_latents(const LayerRole& role, const Segment& segment,
                                               const OwnerCache& owner, int64_t first, int64_t last,
                                               const std::vector<float>& v_rows,
                                               const std::vector<float>& g_rows) {
  const int64_t dim = config_.head_dim;
  const int64_t ratio = role.ratio;
  const int64_t groups = last - first;
  // each group's rows: from this segment, or from the history for tokens of an earlier call (the pending
  // state)
  std::vector<float> v(static_cast<size_t>(groups * ratio * dim)), g(v.size());
  for (int64_t t = 0; t < groups * ratio; ++t) {
    const CompressorInput input =
        compressor_input(segment, owner.history, v_rows, g_rows, first * ratio + t, role.index);
    std::copy_n(input.v, dim, v.data() + t * dim);
    std::copy_n(input.g, dim, g.data() + t * dim);
  }
  std::vector<float> latents(static_cast<size_t>(groups * dim));
  backend_.compressor_pool(ConstMatrix{v.data(), groups * ratio, dim},
                           ConstMatrix{g.data(), groups * ratio, dim}, ratio,
                           Matrix{latents.data(), groups, dim}, model_.rounding);
  rms_norm(latents, dim, model_.weights->layers[static_cast<size_t>(role.index)].attn.compressor_norm);
  return latents;
}

void ForwardPass::append_entries(const LayerRole& role, OwnerCache& owner, int64_t first,
                                 std::vector<float> latents) {
  const AttentionWeights& w = model_.weights->layers[static_cast<size_t>(role.index)].attn;
  const backend::RopeTable& rope = model_.rope(role);
  const int64_t dim = config_.head_dim;
  const int64_t key_dim = config_.index_head_dim;
  const int64_t count = static_cast<int64_t>(latents.size()) / dim;
  std::vector<int64_t> positions(static_cast<size_t>(count));  // entry j is rotated at j·ratio
  for (int64_t i = 0; i < count; ++i) positions[static_cast<size_t>(i)] = (first + i) * role.ratio;
  // the index key comes from the un-rotated, un-quantized latent: wk·latent, then RMSNorm, RoPE and its
  // record in one backend call
  const std::vector<float> key =
      gemm(ConstMatrix{latents.data(), count, dim}, w.indexer_wk, OutputCast::kBf16);
  backend_.rope(Matrix{latents.data(), count, dim}, 1, positions, rope, false, model_.rounding);
  store_entries(owner, latents, [&](std::span<uint8_t> key_records) {
    backend_.norm_rope_quantize(ConstMatrix{key.data(), count, key_dim}, w.indexer_k_norm.vector(),
                                config_.rms_norm_eps, positions, rope, owner.key_format, 0, key_records,
                                Matrix{}, model_.rounding);
  });
}

// Appends the records of `latents` (RoPE'd entries) and `keys` (RoPE'd index keys; none when the owner keeps
// no keys) to the owner's cache.
void ForwardPass::store_entries(OwnerCache& owner, const std::vector<float>& latents,
                                const std::vector<float>& keys) {
  const int64_t count = static_cast<int64_t>(latents.size()) / owner.entry_dim;
  store_entries(owner, latents, [&](std::span<uint8_t> key_records) {
    quantize(ConstMatrix{keys.data(), count, owner.key_dim}, owner.key_format, 0, key_records, Matrix{});
  });
}

// The same with the new keys' records written by `write_key_records` (called only when the owner keeps keys,
// with the span of the new records).
void ForwardPass::store_entries(OwnerCache& owner, const std::vector<float>& latents,
                                const std::function<void(std::span<uint8_t>)>& write_key_records) {
  const int64_t count = static_cast<int64_t>(latents.size()) / owner.entry_dim;
  const size_t entry_bytes = owner.entry_rows().row_bytes();
  owner.entries.resize(owner.entries.size() + static_cast<size_t>(count) * entry_bytes);
  quantize(ConstMatrix{latents.data(), count, owner.entry_dim}, owner.entry_format, owner.entry_rope_dim,
           std::span(owner.entries).subspan(static_cast<size_t>(owner.count) * entry_bytes), Matrix{});
  if (owner.key_dim > 0) {
    const size_t key_bytes = owner.key_rows().row_bytes();
    owner.keys.resize(owner.keys.size() + static_cast<size_t>(count) * key_bytes);
    write_key_records(
        std::span(owner.keys)
            .subspan(static_cast<size_t>(owner.count) * key_bytes, static_cast<size_t>(count) * key_bytes));
  }
  owner.count += count;
}

void ForwardPass::record_cache(const LayerRole& role, const OwnerCache& owner) {
  const int64_t dim = owner.entry_dim;
  const int64_t key_dim = owner.key_dim;
  std::vector<float> values(static_cast<size_t>(owner.count * dim));
  for (int64_t j = 0; j < owner.count; ++j) owner.entry_rows().dequantize(j, values.data() + j * dim);
  record(role, "entries", {owner.count, dim}, values.data());
  if (key_dim == 0) return;
  values.resize(static_cast<size_t>(owner.count * key_dim));
  for (int64_t j = 0; j < owner.count; ++j) owner.key_rows().dequantize(j, values.data() + j * key_dim);
  record(role, "index_keys", {owner.count, key_dim}, values.data());
}

}  // namespace flashkv::runtime
