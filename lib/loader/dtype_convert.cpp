#include "loader/dtype_convert.hpp"

#include <cstring>

#include <flashkv/error.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include "loader/message_text.hpp"

namespace flashkv::loader {
namespace {

[[noreturn]] void fail_dtype(const TensorView& view, std::string_view allowed) {
  fail(ErrorCode::kUnsupported, "tensor {} in '{}' is stored as {}; expected {}", quote_untrusted(view.name),
       view.file, dtype_name(view.dtype), allowed);
}

template <typename Code>
Code code_at(const TensorView& view, std::uint64_t index) {
  Code code;
  std::memcpy(&code, view.bytes.data() + index * sizeof(Code), sizeof(Code));
  return code;
}

template <typename Code, typename Decode>
void decode_all(const TensorView& view, std::span<float> out, Decode decode) {
  for (std::uint64_t i = 0; i < out.size(); ++i) out[i] = decode(code_at<Code>(view, i));
}

std::span<const std::uint8_t> as_u8(const TensorView& view) {
  return {reinterpret_cast<const std::uint8_t*>(view.bytes.data()), view.bytes.size()};
}

// The E8M0 code of an exact power of two 2^-127 .. 2^127; fails for anything else.
std::uint8_t e8m0_code_of_power_of_two(const TensorView& view, std::uint64_t index) {
  const float value = code_at<float>(view, index);
  const std::uint8_t code = numeric::e8m0_from_float(value);
  if (code == numeric::kE8m0Nan ||
      numeric::float_to_bits(numeric::e8m0_to_float(code)) != numeric::float_to_bits(value)) {
    fail(ErrorCode::kInvalidCheckpoint,
         "scale tensor {} in '{}' is F32 but element {} is {}, not a power of two in [2^-127, 2^127]",
         quote_untrusted(view.name), view.file, index, value);
  }
  return code;
}

}  // namespace

float f16_to_float(std::uint16_t code) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x8000u) << 16;
  const std::uint32_t exponent = (code >> 10) & 0x1Fu;
  const std::uint32_t mantissa = code & 0x3FFu;
  if (exponent == 0x1Fu) return numeric::bits_to_float(sign | 0x7F800000u | (mantissa << 13));  // Inf, NaN
  if (exponent == 0) {
    // Subnormal (or zero): mantissa · 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return numeric::bits_to_float(sign | numeric::float_to_bits(magnitude));
  }
  return numeric::bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

void read_float32(const TensorView& view, std::span<float> out) {
  if (out.size() != view.element_count()) {
    fail(ErrorCode::kInvalidArgument, "read_float32: tensor {} has {} elements, output holds {}",
         quote_untrusted(view.name), view.element_count(), out.size());
  }
  switch (view.dtype) {
    case DType::kF32:
      if (!out.empty()) std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
      return;
    case DType::kF16:
      return decode_all<std::uint16_t>(view, out, f16_to_float);
    case DType::kBF16:
      return decode_all<std::uint16_t>(view, out, numeric::bf16_to_float);
    case DType::kF8E4M3:
      return decode_all<std::uint8_t>(view, out, numeric::e4m3_to_float);
    case DType::kF8E8M0:
      return decode_all<std::uint8_t>(view, out, numeric::e8m0_to_float);
    default:
      fail_dtype(view, "F32, F16, BF16, F8_E4M3 or F8_E8M0");
  }
}

std::vector<float> read_float32(const TensorView& view) {
  std::vector<float> values(view.element_count());
  read_float32(view, values);
  return values;
}

std::vector<std::uint8_t> read_e8m0_codes(const TensorView& view) {
  if (view.dtype == DType::kF8E8M0 || view.dtype == DType::kU8) {
    const auto bytes = as_u8(view);
    return {bytes.begin(), bytes.end()};
  }
  if (view.dtype != DType::kF32) fail_dtype(view, "an E8M0 scale as F8_E8M0, U8 or F32 powers of two");
  std::vector<std::uint8_t> codes(view.element_count());
  for (std::uint64_t i = 0; i < codes.size(); ++i) codes[i] = e8m0_code_of_power_of_two(view, i);
  return codes;
}

std::span<const std::uint8_t> e8m0_code_bytes(const TensorView& view) {
  if (view.dtype != DType::kF8E8M0 && view.dtype != DType::kU8)
    fail_dtype(view, "an E8M0 scale as F8_E8M0 or U8");
  return as_u8(view);
}

std::span<const std::uint8_t> packed_e2m1_bytes(const TensorView& view) {
  if (view.dtype != DType::kI8 && view.dtype != DType::kU8) fail_dtype(view, "packed E2M1 pairs as I8 or U8");
  return as_u8(view);
}

std::span<const std::uint8_t> e4m3_codes(const TensorView& view) {
  if (view.dtype != DType::kF8E4M3) fail_dtype(view, "F8_E4M3");
  return as_u8(view);
}

}  // namespace flashkv::loader
