// Reading one model weight as fp32, dequantizing its storage kind (FP8 block32/128, MXFP4, FP8 rows32) with
// its
// `<base>.scale` companion, or converting it when stored unquantized (BF16/F16/F32).
//
// The values are flashkv::numeric's dequantizers applied to the checkpoint bytes, so they are exactly what
// the reference decodes (code x 2^(scale-127), fp32). Intended for tensors that fit in memory as fp32 (the
// CPU backend, tests); the Engram tables (~98 G elements each in the release) are read per row from
// e4m3_codes() and e8m0_code_bytes()/read_e8m0_codes() instead.
//
// Errors: kNotFound when the weight or its scale is missing; kInvalidCheckpoint naming the tensor when the
// stored dtype or shape does not fit `expected` (check_checkpoint reports the same problems up front), or
// when an MXFP4 width is not a multiple of 32; kUnsupported when a dimension exceeds the dequantizers'
// int range; kInvalidArgument when `out` has the wrong size. Threading: pure; reads only the mapping.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loader/checkpoint.hpp"
#include "loader/tensor_inventory.hpp"

namespace flashkv::loader {

// The ids of an integer table (kIntegerTable: V4 ffn.gate.tid2eid, stored I32 or I64) as int32, row-major;
// kInvalidCheckpoint naming the tensor and the element for an id outside [0, limit) (the expert count).
std::vector<std::int32_t> read_index_table(const Checkpoint& checkpoint, const ExpectedTensor& expected,
                                           std::int64_t limit);

// Row-major fp32 values of the logical shape `expected.shape` (not for kIntegerTable).
void read_weight_float32(const Checkpoint& checkpoint, const ExpectedTensor& expected, std::span<float> out);
std::vector<float> read_weight_float32(const Checkpoint& checkpoint, const ExpectedTensor& expected);

}  // namespace flashkv::loader
