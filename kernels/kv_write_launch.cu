// Host side of the KV write launch glue (kv_write_launch.cuh), and the record sizes of kv_write.cuh.
#include "kv_write_launch.cuh"

#include <flashkv/numeric/kv_records.hpp>

#include "cuda_check.cuh"

namespace flashkv::cuda {
namespace kv_write_launch {
namespace {

int g_grid_limit = 0;  // set_grid_limit_for_tests; 0: none

}  // namespace

int resident_ctas(const void* kernel, size_t dynamic_shared) {
  struct Entry {
    const void* kernel;
    int device;
    int ctas;
  };
  thread_local Entry cache[32] = {};
  thread_local int next = 0;
  int device = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  for (const Entry& e : cache) {
    if (e.kernel == kernel && e.device == device) return e.ctas;
  }
  // The input rings take 32 KB per CTA: ask for the largest shared-memory carveout, so the register cap
  // (not the L1 split) decides how many CTAs are resident.
  FKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
  if (dynamic_shared > 0) {  // the ratio-2 ring (72 KB) is above the default 48 KB
    FKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(dynamic_shared)));
  }
  int sms = 0, per_sm = 0;
  FKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FKV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, dynamic_shared));
  const int ctas = sms * (per_sm > 0 ? per_sm : 1);
  cache[next] = {kernel, device, ctas};
  next = (next + 1) % 32;
  return ctas;
}

int grid_limit() {
  return g_grid_limit;
}

}  // namespace kv_write_launch

size_t window_record_bytes(KvNumerics numerics, int dim) {
  return numerics == KvNumerics::kFaithful ? nm::fp8_row_bytes(dim)
                                           : static_cast<size_t>(dim) * sizeof(float);
}
size_t entry_record_bytes(KvNumerics numerics, int dim) {
  return numerics == KvNumerics::kFaithful ? nm::nvfp4_entry_bytes(dim)
                                           : static_cast<size_t>(dim) * sizeof(float);
}
size_t key_record_bytes(KvNumerics numerics, int key_dim) {
  return numerics == KvNumerics::kFaithful ? nm::mxfp4_key_bytes(key_dim)
                                           : static_cast<size_t>(key_dim) * sizeof(float);
}

int64_t compressor_last_entry(int64_t start, int64_t n, int ratio) {
  return (start + n) / ratio;
}

void set_grid_limit_for_tests(int ctas) {
  kv_write_launch::g_grid_limit = ctas;
}

}  // namespace flashkv::cuda
