// Pinned staging buffers (pinned_staging.hpp).
#include "pinned_staging.hpp"

#include <flashkv/error.hpp>

#include <bit>
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
  grow(host_, host_capacity_, layout.host_bytes(), cudaMallocHost, cudaFreeHost);
  grow(device_, device_capacity_, layout.device_bytes(), cudaMalloc, cudaFree);
}

void Staging::upload(const StagingLayout& layout, cudaStream_t stream) const {
  if (layout.upload_end() == 0) return;
  FKV_CUDA_CHECK(cudaMemcpyAsync(device_, host_, layout.upload_end(), cudaMemcpyHostToDevice, stream));
}

void Staging::download(const StagingLayout& layout, cudaStream_t stream) const {
  const size_t begin = layout.download_begin();
  if (layout.download_end() > begin) {
    FKV_CUDA_CHECK(cudaMemcpyAsync(host_ + begin, device_ + begin, layout.download_end() - begin,
                                   cudaMemcpyDeviceToHost, stream));
  }
  FKV_CUDA_CHECK(cudaStreamSynchronize(stream));
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
