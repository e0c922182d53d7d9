// The fused KV write path of spec/MODEL.md §5.2-§5.3 on the GPU, and the device pools its records live in.
//
// Per new token row of a layer (one group of lanes per row, the row read once and its record written once):
//   - window row:  FP8(RoPE_s(RMSNorm_kv(kv_s)))                          -> ring slot s mod capacity (528 B)
//   - KV source:   latent_j = RMSNorm_c(pool_r(v, g) or the ratio-1 row) -> entry NVFP4(RoPE_{j·r}(latent_j))
//                  (288 B); the un-rotated latent is also written out for the index-key projection
//   - index key:   MXFP4(RoPE_{j·r}(RMSNorm_k(wk·latent_j)))              -> key record (68 B)
// Split: the wk GEMM (512 -> 128) is NOT fused. write_compressed_entries emits the normalised latents (BF16
// in faithful mode), the caller runs the GEMM (Backend::gemm, cast BF16), and write_index_keys takes its
// output. A fused GEMM would have to follow the CPU backend's double-precision dot-product order to stay
// byte-identical, which costs more device time per entry (65K double FMAs) than moving the entry's bytes
// does.
//
// Numerics (KvNumerics):
//   - kFaithful: the CPU backend's faithful path (lib/backend/cpu: rmsnorm.cpp, rope.cpp, compressor.cpp,
//     kv_quant.cpp) reproduced operation by operation: double arithmetic rounded at the same cast points
//     (fp32, then BF16), the sum of squares in the CPU's order whenever its rounding could matter, RoPE
//     angles as fp32 products. Records are byte-identical to the CPU path on the same inputs, with one
//     caveat: the CPU takes cos/sin/exp from glibc and the GPU from CUDA's libdevice, both within 1-2 ulp in
//     double; a value whose fp32 rounding falls between the two (about 2^-28 per value) would differ. Never
//     seen in the tests. (RoPE's fp32 fast path is exact for any cos/sin within an fp32 ulp; only the rare
//     pairs it leaves open use libdevice's.)
//   - kClean: fp32 rows, no quantizers (records are dim fp32 values), double angles; same operation order.
//
// Record layouts (faithful) are those of <flashkv/numeric/kv_records.hpp>; where records live:
//   - window rows: a contiguous ring of `capacity` records, position p in slot p mod capacity, and a device
//     int64 array of the position held by each slot (-1: empty), as runtime/window_ring.hpp on the CPU.
//   - entries and index keys: record j of an owner at record_address(view, j): records back to back inside
//     fixed-size pages of a DeviceKvPool, the owner's pages listed in order in a device page table (an owner
//     whose records fit one page, or whose pages are consecutive, is one flat array as on the CPU).
//
// Contract common to the launchers:
//   - dim (and key_dim) is 32, 64, 128, 256 or 512; rope_dim is even, 0 < rope_dim <= min(dim, 64); the
//   rotated
//     channels are the last rope_dim of the row (heads = 1), pair i = channels (dim-rope_dim+2i, +2i+1).
//   - Input rows are dense [rows, dim], 16-byte aligned: fp32 or BF16 bits (RowType). Faithful inputs are
//     what the CPU's faithful GEMMs produce (BF16-valued, except the fp32 ratio-2 v and g).
//   - All pointers are device pointers; outputs do not overlap inputs; n >= 0 (0 launches nothing).
//   - rope.freqs holds RopeTable::freqs (rope_dim/2 doubles; fp32-valued in faithful mode) on the device.
//   - Work is enqueued on `stream`; nothing synchronizes. Errors: bad arguments throw
//     flashkv::Error(kInvalidArgument) before anything is enqueued; a failed launch throws Error(kDevice).
//   - Threading: launchers keep no state; concurrent calls on different streams writing different records
//     are safe.
// This header is C++17 (included by .cu files); kv_write.cpp holds the host-only parts.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashkv::cuda {

enum class KvNumerics { kClean, kFaithful };
enum class RowType { kFp32, kBf16 };

// Bytes of one record of `dim` channels: faithful FP8 window row, NVFP4 entry, MXFP4 key; clean: dim fp32.
size_t window_record_bytes(KvNumerics numerics, int dim);
size_t entry_record_bytes(KvNumerics numerics, int dim);
size_t key_record_bytes(KvNumerics numerics, int key_dim);

// Where record j of one owner lives (see above). A plain view; the pool and the table own the memory.
struct RecordPagesView {
  uint8_t* pool = nullptr;              // the pool's arena
  const int32_t* page_table = nullptr;  // device: page id of records [p·per_page, (p+1)·per_page)
  int64_t records_per_page = 0;
  int64_t record_bytes = 0;
};

#if defined(__CUDACC__)
__host__ __device__
#endif
    inline uint8_t*
    record_address(const RecordPagesView& view, int64_t j) {
  const int64_t page = view.page_table[j / view.records_per_page];
  return view.pool + (page * view.records_per_page + j % view.records_per_page) * view.record_bytes;
}

struct RopeParams {
  const double* freqs = nullptr;  // device, rope_dim / 2
  int rope_dim = 0;
};

struct DeviceRows {
  const void* data = nullptr;
  RowType type = RowType::kBf16;
};

// §5.2: window rows of positions start … start+n−1 (one sequence).
struct WindowWriteArgs {
  KvNumerics numerics = KvNumerics::kFaithful;
  DeviceRows kv;  // [n, dim] = wkv·u (faithful: BF16-valued)
  int64_t n = 0;
  int dim = 0;
  int64_t start = 0;
  const float* norm_weight = nullptr;  // [dim] kv_norm
  double eps = 0;
  RopeParams rope;
  uint8_t* records = nullptr;  // optional: [n] records back to back (what this chunk's attention reads)
  // optional ring: only the last `ring_capacity` rows of the chunk are kept, as on the CPU
  uint8_t* ring = nullptr;            // [ring_capacity] records
  int64_t* ring_positions = nullptr;  // [ring_capacity]
  int64_t ring_capacity = 0;
};
void write_window_rows(const WindowWriteArgs& args, cudaStream_t stream);

// Diagnostics for bench_kv_write only: later write_window_rows calls leave stages out (their records are then
// wrong), to place the kernel's time: 1 RoPE, 4 the RMSNorm's double fallback, 8 RMSNorm and RoPE (load,
// quantize, store only); faithful rows of dim 512 only (each is its own compiled kernel). 0 restores the
// full kernel. Not thread-safe.
void set_window_ablation_for_bench(unsigned stages);

// Diagnostics for tests only: later launches use at most `ctas` CTAs (0: as many as are resident), so every
// warp walks many rows and the input rings wrap around. Not thread-safe.
void set_grid_limit_for_tests(int ctas);

// §5.3: the compressor of a KV source over the tokens start … start+n−1 of one sequence. Entry j covers the
// tokens [j·ratio, (j+1)·ratio); the launch publishes entries first_entry … compressor_last_entry(start, n,
// ratio) − 1 (first_entry >= floor(start / ratio): the caller's count of published entries, CED publishes
// some early). Ratio 2: a group opened by an earlier call (start odd) takes token start−1 from `pending`, and
// when start+n is odd the launcher copies token start+n−1's (v, g) into `pending` after the kernel (stream
// order makes reading and rewriting the same buffer in one call safe).
struct CompressorWriteArgs {
  KvNumerics numerics = KvNumerics::kFaithful;
  int ratio = 2;  // 1 or 2
  int64_t start = 0;
  int64_t n = 0;
  int dim = 0;
  DeviceRows v;              // ratio 2: v = Wc·u, fp32 only; ratio 1: the latent projection (faithful BF16)
  const float* g = nullptr;  // ratio 2: gate logits Wg·u, fp32 [n, dim]
  float* pending = nullptr;  // ratio 2: [2, dim] fp32, v then g of the open group's token
  int64_t first_entry = 0;
  const float* norm_weight = nullptr;  // [dim] compressor.norm
  double eps = 0;
  RopeParams rope;
  RecordPagesView entries;  // entry j at record_address(entries, j); record_bytes = entry_record_bytes
  void* latents = nullptr;  // optional [last − first, dim] normalised, un-rotated latents for wk (faithful
                            // BF16 bits, clean fp32)
};
int64_t compressor_last_entry(int64_t start, int64_t n, int ratio);
void write_compressed_entries(const CompressorWriteArgs& args, cudaStream_t stream);

// §5.3 index keys of entries first_entry … first_entry+count−1 from keys = wk·latent (faithful: BF16-valued).
struct IndexKeyWriteArgs {
  KvNumerics numerics = KvNumerics::kFaithful;
  DeviceRows keys;  // [count, key_dim]
  int64_t count = 0;
  int key_dim = 0;
  int64_t first_entry = 0;
  int ratio = 1;                       // entry j is rotated at position j·ratio
  const float* norm_weight = nullptr;  // [key_dim] indexer.k_norm
  double eps = 0;
  RopeParams rope;
  RecordPagesView records;  // key j at record_address(records, j)
};
void write_index_keys(const IndexKeyWriteArgs& args, cudaStream_t stream);

// ---- device pools -------------------------------------------------------------------------------------

// A fixed arena of `pages` pages of `records_per_page` records each, allocated once with cudaMalloc. Pages
// are handed out and returned by id; the arena never moves, so views stay valid while the pool lives.
// Ownership: owns the device memory (move-only). Threading: one thread at a time.
// Errors: allocation failures throw flashkv::Error(kOutOfMemory or kDevice); an exhausted pool throws
// Error(kOutOfMemory); a bad page id throws Error(kInvalidArgument).
class DeviceKvPool {
 public:
  DeviceKvPool(int64_t record_bytes, int64_t records_per_page, int64_t pages);
  ~DeviceKvPool();
  DeviceKvPool(DeviceKvPool&& other) noexcept;
  DeviceKvPool& operator=(DeviceKvPool&& other) noexcept;
  DeviceKvPool(const DeviceKvPool&) = delete;
  DeviceKvPool& operator=(const DeviceKvPool&) = delete;

  int32_t allocate_page();
  void release_page(int32_t page);
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  uint8_t* arena() const { return arena_; }
  int64_t record_bytes() const { return record_bytes_; }
  int64_t records_per_page() const { return records_per_page_; }

 private:
  uint8_t* arena_ = nullptr;
  int64_t record_bytes_ = 0;
  int64_t records_per_page_ = 0;
  int64_t pages_ = 0;
  std::vector<int32_t> free_;  // ids of free pages; the next allocation takes the back
};

// The records 0 … capacity−1 of one owner (one layer of one sequence) in pages of a pool, with their page
// table on the device. reserve() grows it a page at a time (the new table is uploaded synchronously: it
// happens once per page of records). Ownership: holds its pages until destroyed (the pool must outlive it);
// move-only. Threading: one thread at a time.
class DeviceRecordTable {
 public:
  explicit DeviceRecordTable(DeviceKvPool& pool);
  ~DeviceRecordTable();
  DeviceRecordTable(DeviceRecordTable&& other) noexcept;
  DeviceRecordTable(const DeviceRecordTable&) = delete;
  DeviceRecordTable& operator=(const DeviceRecordTable&) = delete;
  DeviceRecordTable& operator=(DeviceRecordTable&&) = delete;

  void reserve(int64_t records);  // capacity >= records afterwards
  int64_t capacity() const;
  RecordPagesView view() const;
  const std::vector<int32_t>& pages() const { return pages_; }
  // Copies records [first, first+count) back to back into `host` (count·record_bytes bytes); synchronous.
  void download(int64_t first, int64_t count, uint8_t* host) const;

 private:
  DeviceKvPool* pool_;
  std::vector<int32_t> pages_;
  int32_t* device_table_ = nullptr;
  int64_t table_capacity_ = 0;  // entries the device table can hold
};

}  // namespace flashkv::cuda
