// The block loop of the forward (spec §3): Engram, attention site, FFN site with single-pass mHC (V4:
// per-sublayer mHC, hash-routed MoE layers); embedding and head (V4: hc_head collapse). The attention
// sublayer is in attention_sublayer.cpp, the compressor in kv_publish.cpp, the indexer in
// index_selection.cpp.
#include "runtime/forward_pass.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <flashkv/numeric/scalar_codecs.hpp>

namespace flashkv::runtime {

using backend::ConstMatrix;
using backend::Matrix;
using backend::OutputCast;

ForwardPass::ForwardPass(const ModelContext& model, Batch& batch, ForwardTrace* trace)
    : model_(model),
      config_(*model.config),
      backend_(*model.backend),
      batch_(batch),
      trace_(batch.segments.size() == 1 ? trace : nullptr) {}

std::vector<float> ForwardPass::gemm(ConstMatrix x, const Tensor& w, OutputCast cast) const {
  std::vector<float> y(static_cast<size_t>(x.rows * w.rows));
  backend_.gemm(x, w.matrix(), Matrix{y.data(), x.rows, w.rows}, cast, model_.rounding);
  return y;
}

void ForwardPass::rms_norm(std::vector<float>& x, int64_t cols, const Tensor& w) const {
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  backend_.rms_norm(ConstMatrix{x.data(), rows, cols}, w.vector(), config_.rms_norm_eps,
                    Matrix{x.data(), rows, cols}, model_.rounding);
}

void ForwardPass::record(const LayerRole& role, const char* name, std::vector<int64_t> shape,
                         const float* data) {
  if (trace_ != nullptr) trace_->put(fmt::format("layer{}.{}", role.index, name), std::move(shape), data);
}

Activations ForwardPass::embed(std::span<const int32_t> ids) {
  const int64_t d = config_.hidden_size;
  const int64_t hc = config_.hc_mult;
  Activations x;
  x.rows = static_cast<int64_t>(ids.size());
  x.streams.resize(static_cast<size_t>(x.rows * hc * d));
  x.pre.assign(static_cast<size_t>(x.rows * hc), 0.0f);
  std::vector<float> first(static_cast<size_t>(x.rows * d));
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* row = model_.weights->embed.matrix().row(ids[static_cast<size_t>(r)]);
    std::copy_n(row, d, first.data() + r * d);
  }
  if (model_.faithful()) {
    // the embedding is stored BF16 (§2.4): round, in case a checkpoint stores it wider
    for (float& value : first) value = numeric::bf16_to_float(numeric::bf16_from_float(value));
  }
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t i = 0; i < hc; ++i)
      std::copy_n(first.data() + r * d, d, x.streams.data() + (r * hc + i) * d);
    x.pre[static_cast<size_t>(r * hc)] = 1.0f;
  }
  if (trace_ != nullptr) {
    trace_->put("positions", {x.rows}, batch_.positions.data(), TraceKind::kInteger);
    trace_->put("embed", {x.rows, d}, first.data());
  }
  return x;
}

void ForwardPass::run_layers(int begin, int end, Activations& x, std::span<const int64_t> ngrams) {
  for (int layer = begin; layer < end; ++layer)
    block(model_.plan->layers[static_cast<size_t>(layer)], x, ngrams);
}

void ForwardPass::engram(const LayerRole& role, Activations& x, std::span<const int64_t> ngrams) {
  if (!role.has_engram()) return;
  const EngramWeights& w = *model_.weights->layers[static_cast<size_t>(role.index)].engram;
  const int64_t columns = model_.engram->columns();
  const std::vector<int64_t> rows = model_.engram->table_rows(role.engram_slot, ngrams, x.rows);
  std::vector<float> memory(static_cast<size_t>(x.rows * columns * w.table.cols));
  backend_.engram_gather(rows, columns, w.table.matrix(),
                         Matrix{memory.data(), x.rows, columns * w.table.cols});
  const std::vector<float> kv =
      gemm(ConstMatrix{memory.data(), x.rows, columns * w.table.cols}, w.wkv, OutputCast::kBf16);
  const int64_t width = config_.hc_mult * config_.hidden_size;
  backend_.engram_gate(Matrix{x.streams.data(), x.rows, width}, ConstMatrix{kv.data(), x.rows, w.wkv.rows},
                       w.omega, config_.hc_mult, config_.rms_norm_eps, model_.rounding);
  if (trace_ != nullptr) {
    trace_->put(fmt::format("layer{}.engram_rows", role.index), {x.rows, columns}, rows.data(),
                TraceKind::kInteger);
    record(role, "engram_streams", {x.rows, config_.hc_mult, config_.hidden_size}, x.streams.data());
  }
}

std::vector<float> ForwardPass::attention_input(const LayerRole& role, const Activations& x) {
  const int64_t d = config_.hidden_size;
  std::vector<float> u(static_cast<size_t>(x.rows * d));
  backend_.hc_collapse(ConstMatrix{x.streams.data(), x.rows, config_.hc_mult * d},
                       ConstMatrix{x.pre.data(), x.rows, config_.hc_mult}, Matrix{u.data(), x.rows, d},
                       model_.rounding);
  rms_norm(u, d, model_.weights->layers[static_cast<size_t>(role.index)].attn_norm);
  return u;
}

void ForwardPass::block(const LayerRole& role, Activations& x, std::span<const int64_t> ngrams) {
  const LayerWeights& w = model_.weights->layers[static_cast<size_t>(role.index)];
  const int64_t d = config_.hidden_size;
  const int64_t hc = config_.hc_mult;
  const backend::MixerShape shape = model_.mixer_shape();
  const Matrix streams{x.streams.data(), x.rows, hc * d};
  // V4.1 (single-pass mHC): the attention site collapses with the pre carried from the previous FFN site and
  // the FFN site with the attention site's pre. V4 (per-sublayer): each site collapses with its own pre.
  const bool per_sublayer = model_.v4();
  engram(role, x, ngrams);

  std::vector<float> a_pre(static_cast<size_t>(x.rows * hc)), a_post(a_pre.size()),
      a_comb(static_cast<size_t>(x.rows * hc * hc));
  backend_.hc_mixer(streams, w.hc_attn.view(), shape, Matrix{a_pre.data(), x.rows, hc},
                    Matrix{a_post.data(), x.rows, hc}, Matrix{a_comb.data(), x.rows, hc * hc},
                    model_.rounding);
  if (per_sublayer) x.pre = a_pre;
  const std::vector<float> u = attention_input(role, x);
  const std::vector<float> y = attention(role, ConstMatrix{u.data(), x.rows, d});
  backend_.hc_expand(ConstMatrix{y.data(), x.rows, d}, streams, ConstMatrix{a_post.data(), x.rows, hc},
                     ConstMatrix{a_comb.data(), x.rows, hc * hc}, model_.rounding);

  std::vector<float> f_pre(a_pre.size()), f_post(a_pre.size()), f_comb(a_comb.size());
  backend_.hc_mixer(streams, w.hc_ffn.view(), shape, Matrix{f_pre.data(), x.rows, hc},
                    Matrix{f_post.data(), x.rows, hc}, Matrix{f_comb.data(), x.rows, hc * hc},
                    model_.rounding);
  std::vector<float> v(static_cast<size_t>(x.rows * d));
  backend_.hc_collapse(streams, ConstMatrix{(per_sublayer ? f_pre : a_pre).data(), x.rows, hc},
                       Matrix{v.data(), x.rows, d}, model_.rounding);
  rms_norm(v, d, w.ffn_norm);
  const std::vector<float> z = moe(role, ConstMatrix{v.data(), x.rows, d});
  backend_.hc_expand(ConstMatrix{z.data(), x.rows, d}, streams, ConstMatrix{f_post.data(), x.rows, hc},
                     ConstMatrix{f_comb.data(), x.rows, hc * hc}, model_.rounding);
  x.pre = std::move(f_pre);

  record(role, "attn_input", {x.rows, d}, u.data());
  record(role, "attn_output", {x.rows, d}, y.data());
  record(role, "ffn_output", {x.rows, d}, z.data());
  record(role, "streams", {x.rows, hc, d}, x.streams.data());
}

std::vector<float> ForwardPass::moe(const LayerRole& role, ConstMatrix v) {
  const MoeWeights& w = model_.weights->layers[static_cast<size_t>(role.index)].ffn;
  const int64_t k = config_.num_experts_per_tok;
  std::vector<int32_t> experts(static_cast<size_t>(v.rows * k));
  std::vector<float> routing(static_cast<size_t>(v.rows * k));
  const backend::RouterWeights router{w.gate.matrix(), w.bias.vector(), k, config_.routed_scaling_factor};
  if (role.hash_routed) {
    // V4 hash routing: the experts are tid2eid[token]; the gate only weights them
    for (int64_t r = 0; r < v.rows; ++r) {
      const int64_t token = batch_.tokens[static_cast<size_t>(r)];
      std::copy_n(w.tid2eid.begin() + token * k, k, experts.begin() + r * k);
    }
    backend_.route_given(v, router, experts, Matrix{routing.data(), v.rows, k}, model_.rounding);
  } else {
    backend_.route(v, router, experts, Matrix{routing.data(), v.rows, k}, model_.rounding);
  }
  std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
  std::optional<backend::ExpertWeights> shared;
  if (w.shared) shared = w.shared->view();
  backend_.moe_experts(v, w.expert_views, experts, ConstMatrix{routing.data(), v.rows, k},
                       shared ? &*shared : nullptr, config_.swiglu_limit, Matrix{out.data(), v.rows, v.cols},
                       model_.rounding);
  if (trace_ != nullptr) {
    trace_->put(fmt::format("layer{}.experts", role.index), {v.rows, k}, experts.data(), TraceKind::kInteger);
    record(role, "routing", {v.rows, k}, routing.data());
  }
  return out;
}

std::vector<float> ForwardPass::logits(const Activations& x, std::span<const int64_t> rows) {
  const int64_t d = config_.hidden_size;
  const int64_t hc = config_.hc_mult;
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<float> streams(static_cast<size_t>(n * hc * d)), pre(static_cast<size_t>(n * hc));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rows[static_cast<size_t>(i)];
    std::copy_n(x.streams.data() + r * hc * d, hc * d, streams.data() + i * hc * d);
    std::copy_n(x.pre.data() + r * hc, hc, pre.data() + i * hc);
  }
  if (model_.weights->hc_head) {  // V4: the head's own collapse weights
    backend_.hc_head(ConstMatrix{streams.data(), n, hc * d}, model_.weights->hc_head->view(),
                     model_.mixer_shape(), Matrix{pre.data(), n, hc}, model_.rounding);
  }
  std::vector<float> hidden(static_cast<size_t>(n * d));
  backend_.hc_collapse(ConstMatrix{streams.data(), n, hc * d}, ConstMatrix{pre.data(), n, hc},
                       Matrix{hidden.data(), n, d}, model_.rounding);
  rms_norm(hidden, d, model_.weights->norm);
  std::vector<float> out = gemm(ConstMatrix{hidden.data(), n, d}, model_.weights->head, OutputCast::kFp32);
  if (trace_ != nullptr) {
    trace_->put("final_hidden", {n, d}, hidden.data());
    trace_->put("logits", {n, config_.vocab_size}, out.data());
  }
  return out;
}

}  // namespace flashkv::runtime
