// Pinned staging for device calls on host views (CudaBackend's KV write path): each call lays its buffers out
// in one StagingLayout, copies its inputs into a page-locked host buffer, moves them with ONE host-to-device
// copy, runs its kernels on the device mirror of that layout, and brings every result back with ONE
// device-to-host copy followed by one synchronization. The buffers are reused across calls (a StagingPool
// hands them out), so a call makes no allocation, no pageable copy (which the driver stages and synchronizes
// piecewise) and no memset: at one row it is ~1 copy + launches + 1 copy + 1 sync.
// Large caller arrays (put()/get() of kDirectBytes or more: prefill) skip the pinned buffer and are copied
// straight between the caller's memory and the device segment: a host memcpy into pinned memory followed by
// the DMA costs more than the driver's pipelined pageable copy of the same bytes (session-4 round 1: 16 MB
// of pooling inputs 1.43 -> 1.99 ms staged). The staged segments around them still move in as few copies as
// the direct ones leave contiguous runs (one each way when there are none).
//
// Layout: segments are declared in this order (checked): `upload` (host → device), `upload_download` (both
// ways: in-place rows, row flags the kernels set), `download` (device → host), `scratch` (device only). Each
// segment starts on a 256-byte boundary, on the host and on the device alike.
//
// Ownership and threading: a StagingPool owns its Staging buffers (pinned host memory and device memory on
// the device current when they were allocated) and frees them in its destructor, which must not run while a
// lease is out. acquire() is safe from several threads at once (a mutex guards the free list); a lease is
// used by one thread, on that thread's stream, and must have synchronized (download()) before it is returned:
// the next holder may be another thread on another stream. A buffer grows (to the next power of two) when a
// layout does not fit and keeps its size: memory held = the largest call so far, per concurrently calling
// thread. Errors: CUDA failures throw flashkv::Error (kOutOfMemory for allocations), as FKV_CUDA_CHECK.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace flashkv::cuda {

struct Segment {
  size_t offset = 0;
  size_t bytes = 0;
};

class StagingLayout {
 public:
  Segment upload(size_t bytes) { return add(Phase::kUpload, bytes); }
  Segment upload_download(size_t bytes) { return add(Phase::kBoth, bytes); }
  Segment download(size_t bytes) { return add(Phase::kDownload, bytes); }
  Segment scratch(size_t bytes) { return add(Phase::kScratch, bytes); }

  size_t upload_end() const { return upload_end_; }          // the host-to-device copy is [0, upload_end)
  size_t download_begin() const { return download_begin_; }  // the device-to-host copy is
  size_t download_end() const { return download_end_; }      //   [download_begin, download_end)
  size_t host_bytes() const { return download_end_; }
  size_t device_bytes() const { return end_; }

 private:
  enum class Phase { kUpload, kBoth, kDownload, kScratch };
  Segment add(Phase phase, size_t bytes);

  Phase phase_ = Phase::kUpload;
  size_t end_ = 0;
  size_t upload_end_ = 0;
  size_t download_begin_ = 0;
  size_t download_end_ = 0;
  bool downloads_ = false;
};

// One pinned host buffer and its device mirror.
class Staging {
 public:
  Staging() = default;
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Capacity for `layout`; contents are not kept when a buffer grows.
  void reserve(const StagingLayout& layout);

  template <typename T>
  T* host(Segment s) const {
    return reinterpret_cast<T*>(host_ + s.offset);
  }
  template <typename T>
  T* device(Segment s) const {
    return reinterpret_cast<T*>(device_ + s.offset);
  }

  // The caller's `s.bytes` of input for an upload / upload_download segment: into the pinned buffer now, or
  // (kDirectBytes and more) straight to the device in upload(). `src` must stay valid until upload().
  void put(Segment s, const void* src);
  // Where a download / upload_download segment's result goes: copied there by download() (straight from
  // the device from kDirectBytes on). Segments read through host<T>() instead are simply not named here.
  void get(Segment s, void* dst);

  // The host-to-device copy of the layout's upload and upload_download segments (one, unless put() sent
  // some straight), on `stream`.
  void upload(const StagingLayout& layout, cudaStream_t stream);
  // The device-to-host copy of its upload_download and download segments (one, unless get() takes some
  // straight), a synchronization of `stream`, then the get() results into place: afterwards host segments
  // hold the results and the buffers may be reused.
  void download(const StagingLayout& layout, cudaStream_t stream);

  static constexpr size_t kDirectBytes = size_t{256} << 10;

 private:
  struct Transfer {
    Segment segment;
    void* host = nullptr;
  };
  // The pinned runs of [begin, end) between the direct transfers (sorted here), each copied by `copy`.
  template <typename Copy>
  static void staged_runs(std::vector<Transfer>& direct, size_t begin, size_t end, Copy copy);

  uint8_t* host_ = nullptr;
  uint8_t* device_ = nullptr;
  size_t host_capacity_ = 0;
  size_t device_capacity_ = 0;
  // this call's transfers (a Staging serves one call at a time)
  std::vector<Transfer> direct_uploads_;
  std::vector<Transfer> direct_downloads_;
  std::vector<Transfer> staged_downloads_;
};

class StagingPool {
 public:
  // Initializes the CUDA runtime (if no call did yet), so that a pool in a static object is destroyed before
  // the runtime's exit-time teardown: its buffers are freed, not reported as leaks.
  StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A Staging held by one call; returned to the pool on destruction (after a synchronization of `stream`
  // when an exception unwinds the call, so that no copy still in flight reaches the next holder).
  class Lease {
   public:
    Lease(StagingPool& pool, std::unique_ptr<Staging> staging, const StagingLayout& layout,
          cudaStream_t stream);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Staging* operator->() const { return staging_.get(); }
    Staging& operator*() const { return *staging_; }

   private:
    StagingPool& pool_;
    std::unique_ptr<Staging> staging_;
    cudaStream_t stream_;
    int exceptions_;
  };

  // A free Staging (a new one when none is free) with capacity for `layout`.
  Lease acquire(const StagingLayout& layout, cudaStream_t stream);

 private:
  void give_back(std::unique_ptr<Staging> staging);

  std::mutex mutex_;
  std::vector<std::unique_ptr<Staging>> free_;
};

}  // namespace flashkv::cuda
