// A typed device allocation for host-side GPU tests (C++20 .cpp files): upload a host vector, download it
// back, free on scope exit. Every CUDA call goes through FKV_CUDA_CHECK (a failure throws flashkv::Error).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "cuda_check.cuh"

namespace flashkv::test {

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    if (count_ > 0) FKV_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return data_; }
  size_t size() const { return count_; }
  void upload(const std::vector<T>& host) {
    if (count_ > 0)
      FKV_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0)
      FKV_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fills every byte with `byte` (poison before a launch, so an unwritten element cannot match by luck).
  void fill_bytes(int byte) {
    if (count_ > 0) FKV_CUDA_CHECK(cudaMemset(data_, byte, count_ * sizeof(T)));
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace flashkv::test
