// KV quantizers (spec §2.2): rows into FP8 window rows, NVFP4 entries or MXFP4 index keys, with the numeric
// codecs of include/flashkv/numeric/kv_records.hpp (the bytes the GPU kernels must also produce).
#include <cstring>

#include <flashkv/numeric/kv_records.hpp>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/kv_record_v4.hpp"

namespace flashkv::backend::cpu {
namespace {

void quantize_row(const float* x, int channels, RecordFormat format, uint8_t* record) {
  switch (format) {
    case RecordFormat::kFp32:
      std::memcpy(record, x, static_cast<size_t>(channels) * sizeof(float));
      return;
    case RecordFormat::kFp8:
      return numeric::quantize_fp8_row(x, channels, record);
    case RecordFormat::kNvfp4:
      return numeric::quantize_nvfp4_entry(x, channels, record);
    case RecordFormat::kMxfp4:
      return numeric::quantize_mxfp4_key(x, channels, record);
    case RecordFormat::kFp8Bf16Rope:
      break;  // needs rope_dim: quantize_rope_rows
  }
}

}  // namespace

void CpuBackend::quantize_rows(ConstMatrix x, RecordFormat format, std::span<uint8_t> records,
                               Matrix dequantized) const {
  const size_t bytes = record_bytes(format, x.cols);
  const RecordRows view{format, records.data(), x.rows, x.cols};
  for (int64_t r = 0; r < x.rows; ++r) {
    quantize_row(x.row(r), static_cast<int>(x.cols), format, records.data() + static_cast<size_t>(r) * bytes);
    if (dequantized.rows > 0) view.dequantize(r, dequantized.row(r));
  }
}

void CpuBackend::quantize_rope_rows(ConstMatrix x, int64_t rope_dim, std::span<uint8_t> records,
                                    Matrix dequantized) const {
  const RecordRows view{RecordFormat::kFp8Bf16Rope, records.data(), x.rows, x.cols, rope_dim};
  for (int64_t r = 0; r < x.rows; ++r) {
    quantize_v4_record(x.row(r), static_cast<int>(x.cols), static_cast<int>(rope_dim),
                       records.data() + static_cast<size_t>(r) * view.row_bytes());
    if (dequantized.rows > 0) view.dequantize(r, dequantized.row(r));
  }
}

void CpuBackend::fake_quantize(Matrix x, RecordFormat format) const {
  const int channels = static_cast<int>(x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    float* row = x.row(r);
    switch (format) {
      case RecordFormat::kFp32:
        break;
      case RecordFormat::kFp8:
        numeric::fakequant_fp8_row(row, channels, row);
        break;
      case RecordFormat::kNvfp4:
        numeric::fakequant_nvfp4(row, channels, row);
        break;
      case RecordFormat::kMxfp4:
        numeric::fakequant_mxfp4(row, channels, row);
        break;
      case RecordFormat::kFp8Bf16Rope:
        break;  // a storage format only (never fake-quantized in registers)
    }
  }
}

}  // namespace flashkv::backend::cpu
