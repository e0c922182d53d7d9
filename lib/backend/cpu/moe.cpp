// MoE experts (spec §6): the selected routed experts and the shared expert, each a clamped SwiGLU; the
// routing weight scales the hidden before W2 (V4 reference order). Experts run as parallel tasks over their
// rows; the per-row sum is formed afterwards in ascending expert order, then the shared expert, as the
// reference adds them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm_kernel.hpp"
#include "backend/cpu/numerics.hpp"

namespace flashkv::backend::cpu {
namespace {

struct ExpertRows {
  const ExpertWeights* weights = nullptr;
  std::vector<int64_t> rows;       // input rows routed here
  std::vector<int64_t> slots;      // where each result goes: row·(k+1) + slot
  std::vector<float> row_weights;  // routing weight per row (1 for the shared expert)
};

// One expert on its rows; results written to contributions[slot] (D floats each).
void run_expert(const ExpertRows& task, ConstMatrix v, double limit, bool exact,
                std::vector<float>& contributions) {
  const int64_t n = static_cast<int64_t>(task.rows.size());
  const int64_t d = v.cols;
  const int64_t inter = task.weights->w1.rows;
  std::vector<float> x(static_cast<size_t>(n * d)), gate(static_cast<size_t>(n * inter)),
      up(static_cast<size_t>(n * inter)), out(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n; ++i) std::copy_n(v.row(task.rows[static_cast<size_t>(i)]), d, x.data() + i * d);
  const ConstMatrix input{x.data(), n, d};
  gemm_serial(input, task.weights->w1, Matrix{gate.data(), n, inter}, exact);
  gemm_serial(input, task.weights->w3, Matrix{up.data(), n, inter}, exact);
  for (int64_t i = 0; i < n; ++i) {
    const double scale = task.row_weights[static_cast<size_t>(i)];
    for (int64_t j = 0; j < inter; ++j) {
      const size_t at = static_cast<size_t>(i * inter + j);
      const double g = std::min(static_cast<double>(gate[at]), limit);
      const double u = std::clamp(static_cast<double>(up[at]), -limit, limit);
      const double activated = fp32_if(g * sigmoid(g) * u, exact);
      gate[at] = store(activated * scale, exact);  // the hidden, reusing the buffer
    }
  }
  gemm_serial(ConstMatrix{gate.data(), n, inter}, task.weights->w2, Matrix{out.data(), n, d}, exact);
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(out.data() + i * d, d, contributions.data() + task.slots[static_cast<size_t>(i)] * d);
  }
}

}  // namespace

void CpuBackend::moe_experts(ConstMatrix v, std::span<const ExpertWeights> experts,
                             std::span<const int32_t> selected, ConstMatrix routing,
                             const ExpertWeights* shared, double swiglu_limit, Matrix out,
                             Rounding rounding) const {
  const bool exact = faithful(rounding);
  const int64_t n = v.rows, d = v.cols, k = routing.cols;
  const int64_t slots = k + 1;  // routed slots, then the shared expert
  std::vector<ExpertRows> tasks(experts.size() + 1);
  for (size_t e = 0; e < experts.size(); ++e) tasks[e].weights = &experts[e];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) {
      ExpertRows& task = tasks[static_cast<size_t>(selected[static_cast<size_t>(r * k + i)])];
      task.rows.push_back(r);
      task.slots.push_back(r * slots + i);
      task.row_weights.push_back(routing.row(r)[i]);
    }
  }
  if (shared != nullptr) {
    ExpertRows& task = tasks.back();
    task.weights = shared;
    for (int64_t r = 0; r < n; ++r) {
      task.rows.push_back(r);
      task.slots.push_back(r * slots + k);
      task.row_weights.push_back(1.0f);
    }
  }
  std::erase_if(tasks, [](const ExpertRows& task) { return task.rows.empty(); });
  std::vector<float> contributions(static_cast<size_t>(n * slots * d), 0.0f);
  const double work =
      static_cast<double>(n * slots * d) * static_cast<double>(experts.empty() ? 0 : experts[0].w1.rows) * 3;
  parallel_for(static_cast<int64_t>(tasks.size()), work, [&](int64_t t) {
    run_expert(tasks[static_cast<size_t>(t)], v, swiglu_limit, exact, contributions);
  });
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return selected[static_cast<size_t>(r * k + a)] < selected[static_cast<size_t>(r * k + b)];
    });
    if (shared != nullptr) order.push_back(k);
    for (int64_t c = 0; c < d; ++c) {
      double sum = 0;
      for (const int64_t slot : order) sum += contributions[static_cast<size_t>((r * slots + slot) * d + c)];
      out.row(r)[c] = store(sum, exact);
    }
  }
}

}  // namespace flashkv::backend::cpu
