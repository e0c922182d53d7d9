// Sparse attention with sink (spec §5.7): per head one softmax over the visible window rows and the selected
// compressed entries, with exp(sink_h) added to the denominator only; V = K. Entries are read from their
// records (dequantized per query row, as a kernel reading the cache would).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::sparse_attention(const SparseAttention& p, Matrix out, Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t dim = p.window.cols;
  const int64_t n = p.q.rows;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  const double work =
      static_cast<double>(n * p.heads * dim) * static_cast<double>(p.sliding_window + p.topk) * 2;
  parallel_for(n, work, [&](int64_t r) {
    const int64_t position = p.query_positions[static_cast<size_t>(r)];
    // keys of this row: visible window rows, then the selected entries (dequantized)
    std::vector<const float*> keys;
    for (int64_t t = 0; t < p.window.rows; ++t) {
      const int64_t key_position = p.window_positions[static_cast<size_t>(t)];
      if (key_position <= position && key_position > position - p.sliding_window)
        keys.push_back(p.window.row(t));
    }
    const size_t window_keys = keys.size();
    std::vector<float> entries;
    if (p.entries.count > 0 && p.topk > 0) {
      const int32_t* chosen = p.selection.data() + r * p.topk;
      int64_t used = 0;
      for (int64_t i = 0; i < p.topk; ++i) used += chosen[i] >= 0 ? 1 : 0;
      entries.resize(static_cast<size_t>(used * dim));
      int64_t slot = 0;
      for (int64_t i = 0; i < p.topk; ++i) {
        if (chosen[i] < 0) continue;
        p.entries.dequantize(chosen[i], entries.data() + slot * dim);
        ++slot;
      }
      for (int64_t s = 0; s < used; ++s) keys.push_back(entries.data() + s * dim);
    }
    std::vector<double> logits(keys.size());
    std::vector<double> probs(keys.size());
    std::vector<double> from_window(static_cast<size_t>(dim)), from_entries(static_cast<size_t>(dim));
    for (int64_t h = 0; h < p.heads; ++h) {
      const float* q = p.q.row(r) + h * dim;
      const double sink = p.sink[static_cast<size_t>(h)];
      double peak = sink;
      for (size_t t = 0; t < keys.size(); ++t) {
        logits[t] = dot(q, keys[t], dim) * scale;
        peak = std::max(peak, logits[t]);
      }
      double denominator = 0;
      for (size_t t = 0; t < keys.size(); ++t) denominator += (probs[t] = std::exp(logits[t] - peak));
      denominator += std::exp(sink - peak);
      for (size_t t = 0; t < keys.size(); ++t)
        probs[t] = bf16_if(fp32_if(probs[t] / denominator, exact), exact);
      // Σ over keys in key order for every channel: window rows and entries summed apart, then added
      std::fill(from_window.begin(), from_window.end(), 0.0);
      std::fill(from_entries.begin(), from_entries.end(), 0.0);
      for (size_t t = 0; t < keys.size(); ++t) {
        double* acc = t < window_keys ? from_window.data() : from_entries.data();
        const double weight = probs[t];
        const float* key = keys[t];
        for (int64_t c = 0; c < dim; ++c) acc[c] += weight * static_cast<double>(key[c]);
      }
      float* o = out.row(r) + h * dim;
      for (int64_t c = 0; c < dim; ++c) {
        o[c] = store(from_window[static_cast<size_t>(c)] + from_entries[static_cast<size_t>(c)], exact);
      }
    }
  });
}

}  // namespace flashkv::backend::cpu
