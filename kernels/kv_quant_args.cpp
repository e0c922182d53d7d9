#include "kv_quant_args.hpp"

#include <flashkv/error.hpp>

#include <cstdint>
#include <limits>

#include "kv_quant.cuh"

namespace flashkv::cuda {
namespace {

bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto a0 = reinterpret_cast<uintptr_t>(a);
  const auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

bool aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

}  // namespace

void validate_kv_quant_args(const KvQuantArgs& args) {
  const char* fn = args.function;
  if (args.n < 0) fail(ErrorCode::kInvalidArgument, "{}: row count n = {} is negative", fn, args.n);
  if (args.channels <= 0 || args.channels % args.block != 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: channel count C = {} is not a positive multiple of the block size {}", fn, args.channels,
         args.block);
  }
  if (args.channels > kMaxKvChannels) {
    fail(ErrorCode::kInvalidArgument, "{}: channel count C = {} exceeds the supported maximum {}", fn,
         args.channels, kMaxKvChannels);
  }
  if (args.n == 0) return;
  if (args.input == nullptr)
    fail(ErrorCode::kInvalidArgument, "{}: input pointer is null with n = {}", fn, args.n);
  if (args.output == nullptr)
    fail(ErrorCode::kInvalidArgument, "{}: output pointer is null with n = {}", fn, args.n);
  if (!aligned(args.input, args.input_element_bytes)) {
    fail(ErrorCode::kInvalidArgument, "{}: input pointer {} is not aligned to its {}-byte elements", fn,
         args.input, args.input_element_bytes);
  }
  if (!aligned(args.output, args.output_element_bytes)) {
    fail(ErrorCode::kInvalidArgument, "{}: output pointer {} is not aligned to its {}-byte elements", fn,
         static_cast<const void*>(args.output), args.output_element_bytes);
  }
  const size_t widest_row =
      args.input_row_bytes > args.output_row_bytes ? args.input_row_bytes : args.output_row_bytes;
  const auto rows = static_cast<uint64_t>(args.n);
  if (rows > std::numeric_limits<uintptr_t>::max() / widest_row) {
    fail(ErrorCode::kInvalidArgument, "{}: n = {} rows of C = {} channels overflow the address space", fn,
         args.n, args.channels);
  }
  const size_t input_bytes = rows * args.input_row_bytes;
  const size_t output_bytes = rows * args.output_row_bytes;
  if (ranges_overlap(args.input, input_bytes, args.output, output_bytes)) {
    fail(ErrorCode::kInvalidArgument, "{}: input [{}, +{} B) and output [{}, +{} B) overlap", fn, args.input,
         input_bytes, static_cast<const void*>(args.output), output_bytes);
  }
}

}  // namespace flashkv::cuda
