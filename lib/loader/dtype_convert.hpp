// Reading checkpoint tensors in the forms the engine consumes, with the storage-dtype leniency of
// spec/MODEL.md §2.4 ("loader robustness"):
//   - unquantized tensors: F32, F16 or BF16, converted to fp32 (F8_E4M3 and F8_E8M0 codes decode too);
//   - E8M0 scale tensors: F8_E8M0 or U8 (raw exponent bytes), or F32 holding exact powers of two;
//   - packed E2M1 pairs (MXFP4 experts): I8 or U8;
//   - FP8 weights and tables: F8_E4M3.
// Scalar decodes are flashkv::numeric's codecs (ml_dtypes-exact); F16 is decoded here (exact).
//
// Errors: kUnsupported naming the tensor and its dtype when a tensor is stored in a dtype its role does
// not allow; kInvalidCheckpoint naming the tensor, the element and the value for an F32 scale that is not
// a power of two in [2^-127, 2^127]; kInvalidArgument when an output span has the wrong size.
// Threading: pure functions of their arguments. Spans returned point into the view's mapping (same
// lifetime as the view).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loader/tensor_view.hpp"

namespace flashkv::loader {

// Values of an F32, F16, BF16, F8_E4M3 (codes, unscaled) or F8_E8M0 tensor as fp32, row-major.
void read_float32(const TensorView& view, std::span<float> out);
std::vector<float> read_float32(const TensorView& view);

// E8M0 codes (value 2^(code-127); 0xFF is NaN) of a scale tensor stored as F8_E8M0, U8 or F32.
std::vector<std::uint8_t> read_e8m0_codes(const TensorView& view);

// The same codes without a copy, for scales stored as F8_E8M0 or U8 (kUnsupported for F32: use
// read_e8m0_codes). Meant for the large Engram scale tables.
std::span<const std::uint8_t> e8m0_code_bytes(const TensorView& view);

// The bytes of packed E2M1 pairs (low nibble = even column), stored as I8 or U8. No copy.
std::span<const std::uint8_t> packed_e2m1_bytes(const TensorView& view);

// The E4M3 codes of an F8_E4M3 tensor. No copy.
std::span<const std::uint8_t> e4m3_codes(const TensorView& view);

// Exact IEEE half -> fp32 (subnormals, ±Inf and NaN payloads kept).
float f16_to_float(std::uint16_t code) noexcept;

}  // namespace flashkv::loader
