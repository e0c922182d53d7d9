#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include <flashkv/numeric/kv_records.hpp>

#include "backend/cpu/kv_record_v4.hpp"

namespace flashkv::backend {

size_t record_bytes(RecordFormat format, int64_t dim, int64_t rope_dim) {
  const int channels = static_cast<int>(dim);
  switch (format) {
    case RecordFormat::kFp32:
      return static_cast<size_t>(dim) * sizeof(float);
    case RecordFormat::kFp8:
      return numeric::fp8_row_bytes(channels);
    case RecordFormat::kNvfp4:
      return numeric::nvfp4_entry_bytes(channels);
    case RecordFormat::kMxfp4:
      return numeric::mxfp4_key_bytes(channels);
    case RecordFormat::kFp8Bf16Rope:
      return cpu::v4_record_bytes(channels, static_cast<int>(rope_dim));
  }
  return 0;
}

void RecordRows::dequantize(int64_t i, float* out) const {
  const uint8_t* record = row(i);
  const int channels = static_cast<int>(dim);
  switch (format) {
    case RecordFormat::kFp32:
      std::memcpy(out, record, static_cast<size_t>(dim) * sizeof(float));
      return;
    case RecordFormat::kFp8:
      return numeric::dequantize_fp8_row(record, channels, out);
    case RecordFormat::kNvfp4:
      return numeric::dequantize_nvfp4_entry(record, channels, out);
    case RecordFormat::kMxfp4:
      return numeric::dequantize_mxfp4_key(record, channels, out);
    case RecordFormat::kFp8Bf16Rope:
      return cpu::dequantize_v4_record(record, channels, static_cast<int>(rope_dim), out);
  }
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<cpu::CpuBackend>(threads);
}

namespace cpu {

CpuBackend::CpuBackend(int threads)
    : pool_(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

void CpuBackend::parallel_for(int64_t count, double work, const std::function<void(int64_t)>& body) const {
  // Below ~64K multiply-adds the hand-off to the workers costs more than it saves (measured, tiny configs).
  constexpr double kMinParallelWork = 65536.0;
  if (count <= 1 || work < kMinParallelWork || pool_.size() == 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  pool_.parallel_for(count, body);
}

}  // namespace cpu
}  // namespace flashkv::backend
