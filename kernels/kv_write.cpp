// Host parts of the KV write path (kv_write.cuh): argument validation and the device pools.
#include <flashkv/error.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "cuda_check.cuh"
#include "kv_write.hpp"

namespace flashkv::cuda {
namespace {

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

void check_dim(const char* fn, const char* name, int dim) {
  if (dim != 32 && dim != 64 && dim != 128 && dim != 256 && dim != 512) {
    fail(ErrorCode::kInvalidArgument, "{}: {} = {} is not one of 32, 64, 128, 256, 512", fn, name, dim);
  }
}

void check_pointer(const char* fn, const char* name, const void* p) {
  if (p == nullptr) fail(ErrorCode::kInvalidArgument, "{}: {} is null", fn, name);
  if (!aligned16(p)) fail(ErrorCode::kInvalidArgument, "{}: {} = {} is not 16-byte aligned", fn, name, p);
}

void check_common(const char* fn, KvNumerics numerics, int dim, const RopeParams& rope, const float* weight,
                  double eps) {
  check_dim(fn, "dim", dim);
  if (rope.rope_dim <= 0 || rope.rope_dim % 2 != 0 || rope.rope_dim > dim || rope.rope_dim > 64) {
    fail(ErrorCode::kInvalidArgument, "{}: rope_dim = {} is not even in (0, min({}, 64)]", fn, rope.rope_dim,
         dim);
  }
  if (rope.freqs == nullptr) fail(ErrorCode::kInvalidArgument, "{}: rope.freqs is null", fn);
  check_pointer(fn, "norm_weight", weight);
  if (!(eps >= 0)) fail(ErrorCode::kInvalidArgument, "{}: eps = {} is negative or NaN", fn, eps);
  if (numerics != KvNumerics::kClean && numerics != KvNumerics::kFaithful) {
    fail(ErrorCode::kInvalidArgument, "{}: unknown numerics {}", fn, static_cast<int>(numerics));
  }
}

void check_pages(const char* fn, const char* name, const RecordPagesView& view, size_t record_bytes) {
  if (view.pool == nullptr || view.page_table == nullptr || view.records_per_page <= 0) {
    fail(ErrorCode::kInvalidArgument, "{}: {} has no pool, page table or page size", fn, name);
  }
  if (view.record_bytes != static_cast<int64_t>(record_bytes)) {
    fail(ErrorCode::kInvalidArgument, "{}: {}.record_bytes = {}, the records are {} B", fn, name,
         view.record_bytes, record_bytes);
  }
}

}  // namespace

void validate_window_write(const WindowWriteArgs& a) {
  const char* fn = "write_window_rows";
  check_common(fn, a.numerics, a.dim, a.rope, a.norm_weight, a.eps);
  if (a.n < 0 || a.start < 0) fail(ErrorCode::kInvalidArgument, "{}: n = {}, start = {}", fn, a.n, a.start);
  if (a.n == 0) return;
  check_pointer(fn, "kv", a.kv.data);
  if (a.records == nullptr && a.ring == nullptr) {
    fail(ErrorCode::kInvalidArgument, "{}: neither records nor ring is given", fn);
  }
  if (a.records != nullptr) check_pointer(fn, "records", a.records);
  if (a.ring != nullptr) {
    check_pointer(fn, "ring", a.ring);
    if (a.ring_positions == nullptr || a.ring_capacity <= 0) {
      fail(ErrorCode::kInvalidArgument, "{}: ring without positions or capacity ({})", fn, a.ring_capacity);
    }
  }
}

void validate_compressor_write(const CompressorWriteArgs& a) {
  const char* fn = "write_compressed_entries";
  check_common(fn, a.numerics, a.dim, a.rope, a.norm_weight, a.eps);
  if (a.ratio != 1 && a.ratio != 2) fail(ErrorCode::kInvalidArgument, "{}: ratio = {} (1 or 2)", fn, a.ratio);
  if (a.n < 0 || a.start < 0) fail(ErrorCode::kInvalidArgument, "{}: n = {}, start = {}", fn, a.n, a.start);
  if (a.first_entry < a.start / a.ratio) {
    fail(ErrorCode::kInvalidArgument, "{}: first_entry = {} precedes the chunk's first group {}", fn,
         a.first_entry, a.start / a.ratio);
  }
  if (a.n == 0) return;
  check_pointer(fn, "v", a.v.data);
  if (a.ratio == 2) {
    if (a.v.type != RowType::kFp32) fail(ErrorCode::kInvalidArgument, "{}: ratio 2 takes fp32 v rows", fn);
    check_pointer(fn, "g", a.g);
    const bool needs_pending = a.start % 2 == 1 || (a.start + a.n) % 2 == 1;
    if (needs_pending) check_pointer(fn, "pending", a.pending);
  }
  if (compressor_last_entry(a.start, a.n, a.ratio) > a.first_entry) {
    check_pages(fn, "entries", a.entries, entry_record_bytes(a.numerics, a.dim));
    if (a.latents != nullptr) check_pointer(fn, "latents", a.latents);
  }
}

void validate_index_key_write(const IndexKeyWriteArgs& a) {
  const char* fn = "write_index_keys";
  check_common(fn, a.numerics, a.key_dim, a.rope, a.norm_weight, a.eps);
  if (a.count < 0 || a.first_entry < 0 || a.ratio < 1) {
    fail(ErrorCode::kInvalidArgument, "{}: count = {}, first_entry = {}, ratio = {}", fn, a.count,
         a.first_entry, a.ratio);
  }
  if (a.count == 0) return;
  check_pointer(fn, "keys", a.keys.data);
  check_pages(fn, "records", a.records, key_record_bytes(a.numerics, a.key_dim));
}

// ---- DeviceKvPool
// ----------------------------------------------------------------------------------------------

DeviceKvPool::DeviceKvPool(int64_t record_bytes, int64_t records_per_page, int64_t pages)
    : record_bytes_(record_bytes), records_per_page_(records_per_page), pages_(pages) {
  if (record_bytes <= 0 || records_per_page <= 0 || pages <= 0 || pages > INT32_MAX) {
    fail(ErrorCode::kInvalidArgument, "DeviceKvPool: record_bytes = {}, records_per_page = {}, pages = {}",
         record_bytes, records_per_page, pages);
  }
  FKV_CUDA_CHECK(cudaMalloc(&arena_, static_cast<size_t>(record_bytes * records_per_page * pages)));
  free_.reserve(static_cast<size_t>(pages));
  for (int64_t p = pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));  // page 0 first
}

DeviceKvPool::~DeviceKvPool() {
  if (arena_ != nullptr) cudaFree(arena_);
}

DeviceKvPool::DeviceKvPool(DeviceKvPool&& other) noexcept
    : arena_(std::exchange(other.arena_, nullptr)),
      record_bytes_(other.record_bytes_),
      records_per_page_(other.records_per_page_),
      pages_(other.pages_),
      free_(std::move(other.free_)) {}

DeviceKvPool& DeviceKvPool::operator=(DeviceKvPool&& other) noexcept {
  if (this != &other) {
    if (arena_ != nullptr) cudaFree(arena_);
    arena_ = std::exchange(other.arena_, nullptr);
    record_bytes_ = other.record_bytes_;
    records_per_page_ = other.records_per_page_;
    pages_ = other.pages_;
    free_ = std::move(other.free_);
  }
  return *this;
}

int32_t DeviceKvPool::allocate_page() {
  if (free_.empty()) fail(ErrorCode::kOutOfMemory, "DeviceKvPool: all {} pages are in use", pages_);
  const int32_t page = free_.back();
  free_.pop_back();
  return page;
}

void DeviceKvPool::release_page(int32_t page) {
  if (page < 0 || page >= pages_)
    fail(ErrorCode::kInvalidArgument, "DeviceKvPool: page {} out of range", page);
  free_.push_back(page);
}

// ---- DeviceRecordTable
// ---------------------------------------------------------------------------------------

DeviceRecordTable::DeviceRecordTable(DeviceKvPool& pool) : pool_(&pool) {}

DeviceRecordTable::~DeviceRecordTable() {
  if (pool_ == nullptr) return;
  for (int32_t page : pages_) pool_->release_page(page);
  if (device_table_ != nullptr) cudaFree(device_table_);
}

DeviceRecordTable::DeviceRecordTable(DeviceRecordTable&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      pages_(std::move(other.pages_)),
      device_table_(std::exchange(other.device_table_, nullptr)),
      table_capacity_(std::exchange(other.table_capacity_, 0)) {}

int64_t DeviceRecordTable::capacity() const {
  return static_cast<int64_t>(pages_.size()) * pool_->records_per_page();
}

void DeviceRecordTable::reserve(int64_t records) {
  if (records <= capacity()) return;
  while (capacity() < records) pages_.push_back(pool_->allocate_page());
  const auto needed = static_cast<int64_t>(pages_.size());
  if (needed > table_capacity_) {
    // Room for twice as many pages, so a growing owner re-allocates its table rarely.
    int32_t* grown = nullptr;
    FKV_CUDA_CHECK(cudaMalloc(&grown, static_cast<size_t>(2 * needed) * sizeof(int32_t)));
    if (device_table_ != nullptr) FKV_CUDA_CHECK(cudaFree(device_table_));
    device_table_ = grown;
    table_capacity_ = 2 * needed;
  }
  // Synchronous upload: launches enqueued earlier still read the old entries, which are unchanged.
  FKV_CUDA_CHECK(
      cudaMemcpy(device_table_, pages_.data(), pages_.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
}

RecordPagesView DeviceRecordTable::view() const {
  return {pool_->arena(), device_table_, pool_->records_per_page(), pool_->record_bytes()};
}

void DeviceRecordTable::download(int64_t first, int64_t count, uint8_t* host) const {
  if (first < 0 || count < 0 || first + count > capacity()) {
    fail(ErrorCode::kInvalidArgument, "DeviceRecordTable::download: records [{}, {}) outside capacity {}",
         first, first + count, capacity());
  }
  const int64_t per_page = pool_->records_per_page();
  const int64_t bytes = pool_->record_bytes();
  for (int64_t j = first; j < first + count;) {
    const int64_t in_page = j % per_page;
    const int64_t run = std::min(per_page - in_page, first + count - j);
    const uint8_t* src =
        pool_->arena() +
        (static_cast<int64_t>(pages_[static_cast<size_t>(j / per_page)]) * per_page + in_page) * bytes;
    FKV_CUDA_CHECK(cudaMemcpy(host + (j - first) * bytes, src, static_cast<size_t>(run * bytes),
                              cudaMemcpyDeviceToHost));
    j += run;
  }
}

}  // namespace flashkv::cuda
