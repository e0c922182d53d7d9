// Candidate pool of the candidate-source layer (spec §5.5) and the pool restriction of later index sources.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/topk_kernel.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::candidate_pool(ConstMatrix scores, std::span<const int64_t> n_visible, int64_t block_size,
                                int64_t topk_blocks, std::span<uint8_t> pool) const {
  const int64_t m = scores.cols;
  const int64_t blocks = (m + block_size - 1) / block_size;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  parallel_for(scores.rows, static_cast<double>(scores.rows * m) * 8, [&](int64_t r) {
    const float* row = scores.row(r);
    std::vector<float> block_scores(static_cast<size_t>(blocks), -kInf);
    for (int64_t j = 0; j < m; ++j) {
      float& best = block_scores[static_cast<size_t>(j / block_size)];
      best = std::max(best, row[j]);
    }
    const int64_t visible = n_visible[static_cast<size_t>(r)];
    if (visible > 0) block_scores[static_cast<size_t>((visible - 1) / block_size)] = kInf;  // newest block
    std::vector<int32_t> kept(static_cast<size_t>(topk_blocks));
    select_top_k(block_scores.data(), blocks, topk_blocks, kept.data());
    uint8_t* out = pool.data() + r * m;
    std::fill(out, out + m, uint8_t{0});
    for (const int32_t block : kept) {
      if (block < 0) continue;
      const int64_t end = std::min({(block + 1) * block_size, m, visible});
      for (int64_t j = block * block_size; j < end; ++j) out[j] = 1;
    }
  });
}

void CpuBackend::restrict_to_pool(Matrix scores, std::span<const uint8_t> pool) const {
  for (int64_t r = 0; r < scores.rows; ++r) {
    for (int64_t j = 0; j < scores.cols; ++j) {
      if (pool[static_cast<size_t>(r * scores.cols + j)] == 0)
        scores.row(r)[j] = -std::numeric_limits<float>::infinity();
    }
  }
}

}  // namespace flashkv::backend::cpu
