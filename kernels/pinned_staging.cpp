// Pinned staging buffers (pinned_staging.hpp).
#include "pinned_staging.hpp"

#include <flashkv/error.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <utility>

#include "cuda_check.cuh"

namespace flashkv::cuda {
namespace {

// Segment alignment: covers every vector load of the kernels and keeps segments on separate cache lines.
constexpr size_t kAlignment = 256;
// The smallest buffer: a decode call (one row of a few KB) never grows it again.
constexpr size_t kMinCapacity = size_t{64} << 10;

size_t align_up(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

size_t capacity_for(size_t bytes) {
  return bytes <= kMinCapacity ? kMinCapacity : std::bit_ceil(bytes);
}

// `buffer` (of `capacity` bytes, from `allocate`) replaced by a larger one when `bytes` do not fit.
void grow(uint8_t*& buffer, size_t& capacity, size_t bytes, cudaError_t (*allocate)(void**, size_t),
          cudaError_t (*release)(void*)) {
  if (bytes <= capacity) return;
  if (buffer != nullptr) FKV_CUDA_CHECK(release(buffer));
  buffer = nullptr;
  capacity = 0;
  const size_t size = capacity_for(bytes);
  FKV_CUDA_CHECK(allocate(reinterpret_cast<void**>(&buffer), size));
  capacity = size;
}

}  // namespace

Segment StagingLayout::add(Phase phase, size_t bytes) {
  if (phase < phase_) fail(ErrorCode::kInternal, "StagingLayout: segments declared out of order");
  phase_ = phase;
  const Segment segment{end_, bytes};
  if ((phase == Phase::kBoth || phase == Phase::kDownload) && !downloads_) {
    downloads_ = true;
    download_begin_ = end_;
  }
  end_ = align_up(end_ + bytes);
  if (phase == Phase::kUpload || phase == Phase::kBoth) upload_end_ = segment.offset + bytes;
  if (phase == Phase::kBoth || phase == Phase::kDownload) download_end_ = segment.offset + bytes;
  return segment;
}

Staging::~Staging() {
  // errors ignored: a destructor cannot report them, and at process exit the runtime may be gone already
  if (host_ != nullptr) cudaFreeHost(host_);
  if (device_ != nullptr) cudaFree(device_);
}

void Staging::reserve(const StagingLayout& layout) {
  direct_uploads_.clear();  // a call that threw may have left its transfers
  direct_downloads_.clear();
  staged_downloads_.clear();
  grow(host_, host_capacity_, layout.host_bytes(), cudaMallocHost, cudaFreeHost);
  grow(device_, device_capacity_, layout.device_bytes(), cudaMalloc, cudaFree);
}

void Staging::put(Segment s, const void* src) {
  if (s.bytes >= kDirectBytes) {
    direct_uploads_.push_back({s, const_cast<void*>(src)});
  } else if (s.bytes > 0) {
    std::memcpy(host_ + s.offset, src, s.bytes);
  }
}

void Staging::get(Segment s, void* dst) {
  if (s.bytes == 0) return;
  (s.bytes >= kDirectBytes ? direct_downloads_ : staged_downloads_).push_back({s, dst});
}

template <typename Copy>
void Staging::staged_runs(std::vector<Transfer>& direct, size_t begin, size_t end, Copy copy) {
  std::sort(direct.begin(), direct.end(),
            [](const Transfer& a, const Transfer& b) { return a.segment.offset < b.segment.offset; });
  size_t cursor = begin;
  for (const Transfer& t : direct) {
    if (t.segment.offset > cursor) copy(cursor, t.segment.offset - cursor);
    cursor = std::max(cursor, t.segment.offset + t.segment.bytes);
  }
  if (end > cursor) copy(cursor, end - cursor);
}

void Staging::upload(const StagingLayout& layout, cudaStream_t stream) {
  staged_runs(direct_uploads_, 0, layout.upload_end(), [&](size_t offset, size_t bytes) {
    FKV_CUDA_CHECK(cudaMemcpyAsync(device_ + offset, host_ + offset, bytes, cudaMemcpyHostToDevice, stream));
  });
  for (const Transfer& t : direct_uploads_) {
    FKV_CUDA_CHECK(
        cudaMemcpyAsync(device_ + t.segment.offset, t.host, t.segment.bytes, cudaMemcpyHostToDevice, stream));
  }
  direct_uploads_.clear();
}

void Staging::download(const StagingLayout& layout, cudaStream_t stream) {
  staged_runs(direct_downloads_, layout.download_begin(), layout.download_end(),
              [&](size_t offset, size_t bytes) {
                FKV_CUDA_CHECK(
                    cudaMemcpyAsync(host_ + offset, device_ + offset, bytes, cudaMemcpyDeviceToHost, stream));
              });
  for (const Transfer& t : direct_downloads_) {
    FKV_CUDA_CHECK(
        cudaMemcpyAsync(t.host, device_ + t.segment.offset, t.segment.bytes, cudaMemcpyDeviceToHost, stream));
  }
  direct_downloads_.clear();
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (const Transfer& t : staged_downloads_) std::memcpy(t.host, host_ + t.segment.offset, t.segment.bytes);
  staged_downloads_.clear();
}

StagingPool::Lease::Lease(StagingPool& pool, std::unique_ptr<Staging> staging, const StagingLayout& layout,
                          cudaStream_t stream)
    : pool_(pool), staging_(std::move(staging)), stream_(stream), exceptions_(std::uncaught_exceptions()) {
  staging_->reserve(layout);  // if this throws, the Staging is freed instead of returned
}

StagingPool::Lease::~Lease() {
  if (std::uncaught_exceptions() > exceptions_)
    cudaStreamSynchronize(stream_);  // its error is the one thrown
  pool_.give_back(std::move(staging_));
}

StagingPool::StagingPool() {
  FKV_CUDA_CHECK(cudaFree(nullptr));
}

StagingPool::Lease StagingPool::acquire(const StagingLayout& layout, cudaStream_t stream) {
  std::unique_ptr<Staging> staging;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      staging = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (!staging) staging = std::make_unique<Staging>();
  return Lease(*this, std::move(staging), layout, stream);
}

void StagingPool::give_back(std::unique_ptr<Staging> staging) {
  const std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(staging));
}

}  // namespace flashkv::cuda
