// The records of new KV rows (Backend::norm_rope_quantize): RMSNorm, RoPE and the record quantizer in
// sequence, on a copy of the rows. The CPU backend gains nothing from fusing; it exists so that a device
// backend can take the three steps in one call (the rows cross to the device once).
#include <vector>

#include "backend/cpu/cpu_backend.hpp"

namespace flashkv::backend::cpu {

void CpuBackend::norm_rope_quantize(ConstMatrix x, std::span<const float> norm_weight, double eps,
                                    std::span<const int64_t> positions, const RopeTable& table,
                                    RecordFormat format, int64_t record_rope_dim, std::span<uint8_t> records,
                                    Matrix dequantized, Rounding rounding) const {
  std::vector<float> rows(static_cast<size_t>(x.rows * x.cols));
  const Matrix work{rows.data(), x.rows, x.cols};
  rms_norm(x, norm_weight, eps, work, rounding);
  rope(work, 1, positions, table, /*inverse=*/false, rounding);
  if (format == RecordFormat::kFp8Bf16Rope) {
    quantize_rope_rows(work, record_rope_dim, records, dequantized);
  } else {
    quantize_rows(work, format, records, dequantized);
  }
}

}  // namespace flashkv::backend::cpu
