// Row top-k with the reference's tie rule, shared by the top-k operation and the candidate pool.
#pragma once

#include <cstdint>

namespace flashkv::backend::cpu {

// out[k]: indices of the k largest of scores[m] (lowest index among equals; NaN counts as −∞), sorted
// ascending; −∞ entries and missing columns are −1, after the valid ones.
void select_top_k(const float* scores, int64_t m, int64_t k, int32_t* out);

}  // namespace flashkv::backend::cpu
