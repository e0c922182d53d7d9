// ForwardTrace — optional per-layer record of what one forward computed, named like the reference's dumps
// (tests/reference/dumps.py: "layer{L}.topk", "layer{L}.index_scores", "layer{L}.attn_input", "logits", ...),
// so a test can locate a disagreement to a layer and a mechanism. Filled only for single-sequence calls;
// costs nothing when absent. Test and debugging aid, not part of the public API.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flashkv::runtime {

enum class TraceKind { kFloat, kInteger, kBool };

struct TraceArray {
  std::vector<int64_t> shape;
  std::vector<double> values;  // floats, integers (exact below 2^53) and 0/1
  TraceKind kind = TraceKind::kFloat;
};

class ForwardTrace {
 public:
  template <typename T>
  void put(const std::string& name, std::vector<int64_t> shape, const T* data,
           TraceKind kind = TraceKind::kFloat) {
    TraceArray& array = arrays[name];
    int64_t count = 1;
    for (const int64_t dim : shape) count *= dim;
    array.shape = std::move(shape);
    array.values.assign(data, data + count);
    array.kind = kind;
  }
  std::map<std::string, TraceArray> arrays;
};

}  // namespace flashkv::runtime
