#include "sparse_attention_args.hpp"

#include <flashkv/error.hpp>

#include <cstdint>
#include <limits>

namespace flashkv::cuda {
namespace {

constexpr const char* kFunction = "sparse_attention";

void require_pointer(const void* p, size_t alignment, const char* name) {
  if (p == nullptr) fail(ErrorCode::kInvalidArgument, "{}: {} is null", kFunction, name);
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    fail(ErrorCode::kInvalidArgument, "{}: {} = {} is not {}-byte aligned", kFunction, name, p, alignment);
  }
}

}  // namespace

void validate_sparse_attention_args(const SparseAttentionArgs& args) {
  if (args.n < 0 || args.n > std::numeric_limits<int32_t>::max()) {
    fail(ErrorCode::kInvalidArgument, "{}: row count n = {} is outside [0, 2^31)", kFunction, args.n);
  }
  if (args.window_cap < 0 || args.topk < 0 || args.window_cap + args.topk > kSparseAttentionMaxKeys) {
    fail(ErrorCode::kInvalidArgument,
         "{}: window_cap = {} and topk = {} must be non-negative with a sum of at most {}", kFunction,
         args.window_cap, args.topk, kSparseAttentionMaxKeys);
  }
  if (args.n == 0) return;
  require_pointer(args.q, 4, "q");
  require_pointer(args.sink, 4, "sink");
  require_pointer(args.out, 4, "out");
  if (args.window_cap > 0) {
    require_pointer(args.window_records, 16, "window_records");
    require_pointer(args.window_rows, 4, "window_rows");
  }
  if (args.topk > 0) {
    require_pointer(args.entry_records, 16, "entry_records");
    require_pointer(args.selection, 4, "selection");
  }
  const size_t row_bytes = size_t{kSparseAttentionHeads} * kSparseAttentionDim * sizeof(uint16_t);
  const auto q0 = reinterpret_cast<uintptr_t>(args.q);
  const auto o0 = reinterpret_cast<uintptr_t>(args.out);
  const size_t bytes = static_cast<size_t>(args.n) * row_bytes;
  if (q0 < o0 + bytes && o0 < q0 + bytes) fail(ErrorCode::kInvalidArgument, "{}: out overlaps q", kFunction);
}

}  // namespace flashkv::cuda
