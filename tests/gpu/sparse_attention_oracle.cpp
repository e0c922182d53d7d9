#include "sparse_attention_oracle.hpp"

#include <memory>
#include <span>

#include "backend/backend.hpp"

namespace flashkv::test {

void cpu_sparse_attention_faithful(const AttentionProblem& p, float* out) {
  static const std::unique_ptr<backend::Backend> cpu = backend::make_cpu_backend(0);
  backend::SparseAttention problem;
  problem.q = backend::ConstMatrix{p.q, p.n, p.heads * p.dim};
  problem.heads = p.heads;
  problem.window = backend::ConstMatrix{p.window, p.window_count, p.dim};
  problem.window_positions = std::span(p.window_positions, static_cast<size_t>(p.window_count));
  problem.query_positions = std::span(p.query_positions, static_cast<size_t>(p.n));
  problem.sliding_window = p.sliding_window;
  problem.entries = backend::RecordRows{backend::RecordFormat::kNvfp4, p.entries, p.entry_count, p.dim};
  problem.selection = std::span(p.selection, static_cast<size_t>(p.n * p.topk));
  problem.topk = p.topk;
  problem.sink = std::span(p.sink, static_cast<size_t>(p.heads));
  cpu->sparse_attention(problem, backend::Matrix{out, p.n, p.heads * p.dim}, backend::Rounding::kFaithful);
}

}  // namespace flashkv::test
