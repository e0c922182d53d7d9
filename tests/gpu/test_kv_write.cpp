// The fused KV write path (kernels/kv_write.cuh) against the CPU backend's operations in the order the CPU
// engine strings them (lib/runtime/attention_sublayer.cpp, kv_publish.cpp, window_ring.cpp), on fresh random
// inputs:
//   - window rows: rms_norm -> rope -> quantize_rows(kFp8) for several row counts (1, odd, even, > ring),
//     written both densely and into a ring whose capacity the chunk may exceed; faithful records
//     byte-identical, ring slots and their positions as append_window_rows leaves them;
//   - compressed entries, ratio 2 and ratio 1: a sequence fed in chunks of random sizes (single tokens, odd
//   and
//     even chunks, so a group often straddles two calls through the device pending state), with CED-style
//     early publication (first_entry past the chunk's first group); entries in a paged DeviceKvPool whose
//     pages are handed out out of order; the emitted latents equal the CPU's;
//   - index keys from the CPU's wk GEMM output: rms_norm -> rope -> quantize_rows(kMxfp4), byte-identical.
// Clean numerics (fp32 records) are checked too: equal within 2 fp32 ulps (the double cos/sin/exp of glibc
// and libdevice may differ in the last double bit), and the test prints how many values are bit-identical.
// Rows include tiny elements (so the sum of squares is not exact in double and the kernel must take the CPU's
// summation order), exact zeros, and both eps of the configs. Poisoned outputs catch unwritten bytes.
// FLASHKV_TEST_SCALE=small shrinks the cases (compute-sanitizer runs).
#include <cuda_runtime.h>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "cuda_check.cuh"
#include "device_array.hpp"
#include "gpu_test_env.hpp"
#include "kv_write.cuh"

namespace {

namespace be = flashkv::backend;
namespace fc = flashkv::cuda;
namespace nm = flashkv::numeric;
using flashkv::test::DeviceArray;

const be::Backend& cpu() {
  static const std::unique_ptr<be::Backend> backend = be::make_cpu_backend(2);
  return *backend;
}

bool faithful(fc::KvNumerics numerics) {
  return numerics == fc::KvNumerics::kFaithful;
}

be::Rounding rounding_of(fc::KvNumerics numerics) {
  return faithful(numerics) ? be::Rounding::kFaithful : be::Rounding::kClean;
}

float bf16_round(float x) {
  return nm::bf16_to_float(nm::bf16_from_float(x));
}

// Rows of normal values; about one row in four also gets tiny elements (1e-9 .. 1e-20 scale: the row's sum
// of squares then needs more than 53 bits) and one element in 64 is an exact zero.
std::vector<float> random_rows(int64_t rows, int dim, float sigma, bool bf16_valued, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> x(static_cast<size_t>(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    const bool tiny_row = pick(rng) < 16;
    for (int c = 0; c < dim; ++c) {
      float v = normal(rng);
      const int roll = pick(rng);
      if (roll == 0) v = 0.0f;
      if (tiny_row && roll == 1) v *= std::pow(10.0f, -static_cast<float>(9 + pick(rng) % 12));
      x[static_cast<size_t>(r * dim + c)] = bf16_valued ? bf16_round(v) : v;
    }
  }
  return x;
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = nm::bf16_from_float(x[i]);
  return bits;
}

std::vector<float> norm_weight(int dim, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> w(static_cast<size_t>(dim));
  for (float& x : w) x = u(rng);
  return w;
}

be::RopeTable rope_table(int rope_dim, fc::KvNumerics numerics) {
  const flashkv::RopeScaling yarn;  // the V4.1 compress RoPE: factor 16, original 65536, betas 32 / 1
  return be::make_rope_table(rope_dim, 160000.0, &yarn, rounding_of(numerics));
}

// The CPU engine's chain for rows at `positions`: RMSNorm, RoPE, then the record (faithful) or fp32 (clean).
std::vector<uint8_t> cpu_records(std::vector<float> x, int dim, std::span<const int64_t> positions,
                                 const std::vector<float>& weight, double eps, const be::RopeTable& rope,
                                 be::RecordFormat format, fc::KvNumerics numerics) {
  const auto rows = static_cast<int64_t>(positions.size());
  const be::Matrix m{x.data(), rows, dim};
  cpu().rms_norm(m, weight, eps, m, rounding_of(numerics));
  cpu().rope(m, 1, positions, rope, false, rounding_of(numerics));
  if (!faithful(numerics)) format = be::RecordFormat::kFp32;
  std::vector<uint8_t> records(static_cast<size_t>(rows) * be::record_bytes(format, dim));
  cpu().quantize_rows(m, format, records, be::Matrix{});
  return records;
}

// Faithful records must be identical bytes; clean records are fp32 values within 2 ulps. Reports the first
// difference (record, byte, both values) so a GPU log is enough to debug from.
void compare_records(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& expected,
                     size_t record_bytes, fc::KvNumerics numerics, const std::string& what) {
  REQUIRE(gpu.size() == expected.size());
  if (faithful(numerics)) {
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      if (gpu[i] != expected[i] && mismatches++ == 0) first = i;
    }
    if (mismatches > 0) {
      std::printf("%s: %zu of %zu bytes differ; first at record %zu byte %zu: gpu 0x%02x cpu 0x%02x\n",
                  what.c_str(), mismatches, gpu.size(), first / record_bytes, first % record_bytes,
                  gpu[first], expected[first]);
    }
    CHECK(mismatches == 0);
    return;
  }
  std::vector<float> a(gpu.size() / 4), b(expected.size() / 4);
  std::memcpy(a.data(), gpu.data(), gpu.size());
  std::memcpy(b.data(), expected.data(), expected.size());
  size_t identical = 0, far = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float ulp = std::max(std::fabs(std::nextafter(b[i], INFINITY) - b[i]), 1e-44f);
    if (std::memcmp(&a[i], &b[i], 4) == 0) {
      ++identical;
    } else if (!(std::fabs(a[i] - b[i]) <= 2 * ulp) && far++ == 0) {
      first = i;
    }
  }
  std::printf("%s (clean): %zu of %zu values bit-identical\n", what.c_str(), identical, a.size());
  if (far > 0) {
    std::printf("%s: %zu of %zu values beyond 2 ulps; first at value %zu: gpu %.9g cpu %.9g\n", what.c_str(),
                far, a.size(), first, static_cast<double>(a[first]), static_cast<double>(b[first]));
  }
  CHECK(far == 0);
}

// The key launcher's arguments: BF16 rows (faithful) or fp32 (clean) of the same keys.
fc::IndexKeyWriteArgs key_write_args(fc::KvNumerics numerics, const uint16_t* bf16, const float* f32,
                                     int64_t count, int key_dim, int64_t first, int ratio,
                                     const float* weight, double eps, fc::RopeParams rope,
                                     fc::RecordPagesView records) {
  fc::IndexKeyWriteArgs k;
  k.numerics = numerics;
  k.keys =
      faithful(numerics) ? fc::DeviceRows{bf16, fc::RowType::kBf16} : fc::DeviceRows{f32, fc::RowType::kFp32};
  k.count = count;
  k.key_dim = key_dim;
  k.first_entry = first;
  k.ratio = ratio;
  k.norm_weight = weight;
  k.eps = eps;
  k.rope = rope;
  k.records = records;
  return k;
}

struct Shape {
  int dim;
  int rope_dim;
  double eps;
};

// ---- window rows
// ------------------------------------------------------------------------------------------------

void check_window(const Shape& shape, int64_t n, int64_t start, int64_t capacity, fc::KvNumerics numerics,
                  bool bf16_input, uint64_t seed) {
  INFO("window: dim " << shape.dim << " rope " << shape.rope_dim << " n " << n << " start " << start
                      << " ring " << capacity << " faithful " << faithful(numerics) << " bf16 " << bf16_input
                      << " seed " << seed);
  std::mt19937_64 rng(seed);
  const int dim = shape.dim;
  const std::vector<float> kv = random_rows(n, dim, 1.0f, faithful(numerics), rng);
  const std::vector<float> weight = norm_weight(dim, rng);
  const be::RopeTable rope = rope_table(shape.rope_dim, numerics);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = start + i;
  const size_t record_bytes = fc::window_record_bytes(numerics, dim);
  const std::vector<uint8_t> expected =
      cpu_records(kv, dim, positions, weight, shape.eps, rope, be::RecordFormat::kFp8, numerics);
  REQUIRE(expected.size() == static_cast<size_t>(n) * record_bytes);

  DeviceArray<float> kv_f32(kv);
  DeviceArray<uint16_t> kv_bf16(to_bf16_bits(kv));
  DeviceArray<float> d_weight(weight);
  DeviceArray<double> d_freqs(rope.freqs);
  DeviceArray<uint8_t> records(expected.size());
  DeviceArray<uint8_t> ring(static_cast<size_t>(capacity) * record_bytes);
  DeviceArray<int64_t> ring_positions(std::vector<int64_t>(static_cast<size_t>(capacity), -1));
  records.fill_bytes(0xA5);
  ring.fill_bytes(0x5A);

  fc::WindowWriteArgs args;
  args.numerics = numerics;
  args.kv = bf16_input ? fc::DeviceRows{kv_bf16.data(), fc::RowType::kBf16}
                       : fc::DeviceRows{kv_f32.data(), fc::RowType::kFp32};
  args.n = n;
  args.dim = dim;
  args.start = start;
  args.norm_weight = d_weight.data();
  args.eps = shape.eps;
  args.rope = {d_freqs.data(), shape.rope_dim};
  args.records = records.data();
  args.ring = ring.data();
  args.ring_positions = ring_positions.data();
  args.ring_capacity = capacity;
  fc::write_window_rows(args, nullptr);
  FKV_CUDA_CHECK(cudaDeviceSynchronize());

  compare_records(records.download(), expected, record_bytes, numerics, "window records");

  // The ring as the CPU's append_window_rows leaves it: the chunk's last `capacity` rows in slot p mod
  // capacity.
  std::vector<uint8_t> ring_expected(static_cast<size_t>(capacity) * record_bytes, 0x5A);
  std::vector<int64_t> positions_expected(static_cast<size_t>(capacity), -1);
  for (int64_t i = std::max<int64_t>(0, n - capacity); i < n; ++i) {
    const int64_t slot = (start + i) % capacity;
    std::memcpy(ring_expected.data() + static_cast<size_t>(slot) * record_bytes,
                expected.data() + static_cast<size_t>(i) * record_bytes, record_bytes);
    positions_expected[static_cast<size_t>(slot)] = start + i;
  }
  const std::vector<uint8_t> ring_gpu = ring.download();
  if (faithful(numerics)) {
    compare_records(ring_gpu, ring_expected, record_bytes, numerics, "window ring");
  } else {
    // unwritten slots hold the poison, not fp32 values: compare only written slots
    for (int64_t slot = 0; slot < capacity; ++slot) {
      if (positions_expected[static_cast<size_t>(slot)] < 0) continue;
      const size_t at = static_cast<size_t>(slot) * record_bytes;
      compare_records(
          std::vector<uint8_t>(ring_gpu.begin() + static_cast<std::ptrdiff_t>(at),
                               ring_gpu.begin() + static_cast<std::ptrdiff_t>(at + record_bytes)),
          std::vector<uint8_t>(ring_expected.begin() + static_cast<std::ptrdiff_t>(at),
                               ring_expected.begin() + static_cast<std::ptrdiff_t>(at + record_bytes)),
          record_bytes, numerics, "window ring slot");
    }
  }
  CHECK(ring_positions.download() == positions_expected);
}

// ---- compressor
// -------------------------------------------------------------------------------------------------

// The CPU side of one owner: the engine's per-chunk steps of kv_publish.cpp on the CPU backend.
struct CpuOwner {
  int ratio;
  int dim;
  int key_dim;
  int64_t count = 0;                        // published entries
  std::vector<float> pending_v, pending_g;  // ratio 2: the open group's token
  std::vector<uint8_t> entries;
  std::vector<uint8_t> keys;
  std::vector<float> latents;   // of the last call: normalised, un-rotated
  std::vector<float> key_rows;  // of the last call: wk·latent (the GEMM's BF16 output in faithful mode)
};

struct OwnerWeights {
  std::vector<float> norm;    // [dim]
  std::vector<float> wk;      // [key_dim, dim]
  std::vector<float> k_norm;  // [key_dim]
};

// Publishes the entries completed by tokens [start, start+n) from rows `v` (and `g`), as kv_publish.cpp does.
void cpu_publish(CpuOwner& owner, const OwnerWeights& w, const std::vector<float>& v,
                 const std::vector<float>& g, int64_t start, int64_t n, int64_t first,
                 const be::RopeTable& rope, double eps, fc::KvNumerics numerics) {
  const int dim = owner.dim;
  const int64_t last = fc::compressor_last_entry(start, n, owner.ratio);
  const int64_t count = std::max<int64_t>(0, last - first);
  owner.latents.assign(static_cast<size_t>(count * dim), 0.0f);
  const be::Rounding rounding = rounding_of(numerics);
  if (owner.ratio == 1) {
    if (count > 0) {
      std::copy_n(v.begin() + (first - start) * dim, count * dim, owner.latents.begin());
    }
  } else if (count > 0) {
    std::vector<float> gv(static_cast<size_t>(2 * count * dim)), gg(gv.size());
    for (int64_t t = 0; t < 2 * count; ++t) {
      const int64_t row = 2 * first + t - start;
      const float* sv = row < 0 ? owner.pending_v.data() : v.data() + row * dim;
      const float* sg = row < 0 ? owner.pending_g.data() : g.data() + row * dim;
      std::copy_n(sv, dim, gv.begin() + t * dim);
      std::copy_n(sg, dim, gg.begin() + t * dim);
    }
    cpu().compressor_pool(be::ConstMatrix{gv.data(), 2 * count, dim},
                          be::ConstMatrix{gg.data(), 2 * count, dim}, 2,
                          be::Matrix{owner.latents.data(), count, dim}, rounding);
  }
  if (count > 0) {
    const be::Matrix latents{owner.latents.data(), count, dim};
    cpu().rms_norm(latents, w.norm, eps, latents, rounding);
    std::vector<int64_t> positions(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) positions[static_cast<size_t>(i)] = (first + i) * owner.ratio;
    owner.key_rows.assign(static_cast<size_t>(count * owner.key_dim), 0.0f);
    cpu().gemm(latents, be::ConstMatrix{w.wk.data(), owner.key_dim, dim},
               be::Matrix{owner.key_rows.data(), count, owner.key_dim}, be::OutputCast::kBf16, rounding);
    std::vector<float> rotated = owner.latents;
    const be::Matrix r{rotated.data(), count, dim};
    cpu().rope(r, 1, positions, rope, false, rounding);
    const be::RecordFormat entry_format =
        faithful(numerics) ? be::RecordFormat::kNvfp4 : be::RecordFormat::kFp32;
    std::vector<uint8_t> entry_bytes(static_cast<size_t>(count) * be::record_bytes(entry_format, dim));
    cpu().quantize_rows(r, entry_format, entry_bytes, be::Matrix{});
    owner.entries.insert(owner.entries.end(), entry_bytes.begin(), entry_bytes.end());
    const std::vector<uint8_t> key_bytes = cpu_records(owner.key_rows, owner.key_dim, positions, w.k_norm,
                                                       eps, rope, be::RecordFormat::kMxfp4, numerics);
    owner.keys.insert(owner.keys.end(), key_bytes.begin(), key_bytes.end());
    owner.count = last;
  } else {
    owner.key_rows.clear();
  }
  if (owner.ratio == 2 && (start + n) % 2 == 1) {
    owner.pending_v.assign(v.end() - dim, v.end());
    owner.pending_g.assign(g.end() - dim, g.end());
  }
}

// Chunk sizes summing to `total`: single tokens, odd and even sizes, one large chunk.
std::vector<int64_t> chunk_sizes(int64_t total, std::mt19937_64& rng) {
  std::vector<int64_t> sizes;
  std::uniform_int_distribution<int64_t> pick(1, 9);
  int64_t left = total;
  while (left > 0) {
    int64_t size = pick(rng);
    if (size == 9) size = std::max<int64_t>(1, total / 3);  // now and then a large chunk
    size = std::min(size, left);
    sizes.push_back(size);
    left -= size;
  }
  return sizes;
}

void check_compressor(int ratio, const Shape& shape, int key_dim, int64_t total, fc::KvNumerics numerics,
                      uint64_t seed) {
  INFO("compressor: ratio " << ratio << " dim " << shape.dim << " key_dim " << key_dim << " tokens " << total
                            << " faithful " << faithful(numerics) << " seed " << seed);
  std::mt19937_64 rng(seed);
  const int dim = shape.dim;
  const be::RopeTable rope = rope_table(shape.rope_dim, numerics);
  const be::RopeTable key_rope = rope_table(std::min(shape.rope_dim, key_dim), numerics);
  OwnerWeights w{norm_weight(dim, rng), random_rows(key_dim, dim, 0.05f, true, rng),
                 norm_weight(key_dim, rng)};
  CpuOwner owner{ratio, dim, key_dim, 0, {}, {}, {}, {}, {}, {}};

  // Device side: a paged pool whose pages are handed out out of order (a dummy table takes and returns some).
  const size_t entry_bytes = fc::entry_record_bytes(numerics, dim);
  const size_t key_bytes = fc::key_record_bytes(numerics, key_dim);
  const int64_t per_page = 5;
  const int64_t pages = total / ratio / per_page + 8;
  fc::DeviceKvPool entry_pool(static_cast<int64_t>(entry_bytes), per_page, pages);
  fc::DeviceKvPool key_pool(static_cast<int64_t>(key_bytes), per_page, pages);
  {
    fc::DeviceRecordTable scratch(entry_pool);
    scratch.reserve(3 * per_page);
  }  // pages 0..2 go back to the free list in reverse: the owner gets 2, 1, 0, 3, …
  fc::DeviceRecordTable entries(entry_pool), keys(key_pool);
  entries.reserve(1);
  keys.reserve(1);
  FKV_CUDA_CHECK(cudaMemset(entry_pool.arena(), 0xA5, static_cast<size_t>(pages * per_page) * entry_bytes));
  FKV_CUDA_CHECK(cudaMemset(key_pool.arena(), 0x5A, static_cast<size_t>(pages * per_page) * key_bytes));
  DeviceArray<float> pending(static_cast<size_t>(2 * dim));
  pending.fill_bytes(0x7f);  // NaN-ish: a read of an unset pending state would show
  DeviceArray<float> d_norm(w.norm), d_k_norm(w.k_norm);
  DeviceArray<double> d_freqs(rope.freqs), d_key_freqs(key_rope.freqs);

  // One publish call on both sides for tokens [start, start+n) of rows v, g (first n rows used).
  const auto publish = [&](const std::vector<float>& v, const std::vector<float>& g, int64_t start,
                           int64_t n) {
    INFO("call start " << start << " n " << n << " published " << owner.count);
    const int64_t first = std::max(owner.count, start / ratio);
    const int64_t last = fc::compressor_last_entry(start, n, ratio);
    const int64_t count = std::max<int64_t>(0, last - first);
    const std::vector<float> v_rows(v.begin(), v.begin() + n * dim), g_rows(g.begin(), g.begin() + n * dim);
    cpu_publish(owner, w, v_rows, g_rows, start, n, first, rope, shape.eps, numerics);

    entries.reserve(std::max<int64_t>(1, last));
    keys.reserve(std::max<int64_t>(1, last));
    DeviceArray<float> d_v(v_rows), d_g(g_rows);
    DeviceArray<uint16_t> d_v_bf16(to_bf16_bits(v_rows));
    DeviceArray<float> latents(static_cast<size_t>(std::max<int64_t>(1, count * dim)));
    latents.fill_bytes(0x3c);
    fc::CompressorWriteArgs a;
    a.numerics = numerics;
    a.ratio = ratio;
    a.start = start;
    a.n = n;
    a.dim = dim;
    a.v = ratio == 1 && faithful(numerics) ? fc::DeviceRows{d_v_bf16.data(), fc::RowType::kBf16}
                                           : fc::DeviceRows{d_v.data(), fc::RowType::kFp32};
    a.g = d_g.data();
    a.pending = pending.data();
    a.first_entry = first;
    a.norm_weight = d_norm.data();
    a.eps = shape.eps;
    a.rope = {d_freqs.data(), shape.rope_dim};
    a.entries = entries.view();
    a.latents = latents.data();
    fc::write_compressed_entries(a, nullptr);
    if (count == 0) {
      FKV_CUDA_CHECK(cudaDeviceSynchronize());
      return;
    }
    // The wk GEMM stays on the CPU here (the split of kv_write.cuh): its output feeds the key launcher.
    DeviceArray<float> d_keys_f32(owner.key_rows);
    DeviceArray<uint16_t> d_keys_bf16(to_bf16_bits(owner.key_rows));
    fc::write_index_keys(
        key_write_args(numerics, d_keys_bf16.data(), d_keys_f32.data(), count, key_dim, first, ratio,
                       d_k_norm.data(), shape.eps, {d_key_freqs.data(), static_cast<int>(key_rope.rope_dim)},
                       keys.view()),
        nullptr);
    FKV_CUDA_CHECK(cudaDeviceSynchronize());

    // The latents the GEMM reads: BF16 bits (faithful) or fp32 (clean), as the CPU's.
    std::vector<float> got(static_cast<size_t>(count * dim));
    if (faithful(numerics)) {
      std::vector<uint16_t> raw(got.size());
      FKV_CUDA_CHECK(cudaMemcpy(raw.data(), latents.data(), raw.size() * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < got.size(); ++i) got[i] = nm::bf16_to_float(raw[i]);
    } else {
      FKV_CUDA_CHECK(cudaMemcpy(got.data(), latents.data(), got.size() * 4, cudaMemcpyDeviceToHost));
    }
    std::vector<uint8_t> gpu_bytes(got.size() * 4), cpu_bytes(got.size() * 4);
    std::memcpy(gpu_bytes.data(), got.data(), gpu_bytes.size());
    std::memcpy(cpu_bytes.data(), owner.latents.data(), cpu_bytes.size());
    compare_records(gpu_bytes, cpu_bytes, static_cast<size_t>(dim) * 4, numerics, "latents");
  };

  int64_t start = 0;
  int call = 0;
  for (const int64_t n : chunk_sizes(total, rng)) {
    const std::vector<float> v = random_rows(n, dim, 1.0f, ratio == 1 && faithful(numerics), rng);
    const std::vector<float> g = random_rows(n, dim, 2.0f, false, rng);
    // CED-style early publication now and then: a prefix of the chunk is published first, so the full call
    // starts past the chunk's first group (first_entry > start / ratio).
    if (n >= 3 && call++ % 3 == 0) publish(v, g, start, n - 2);
    publish(v, g, start, n);
    start += n;
  }

  REQUIRE(owner.count == fc::compressor_last_entry(total, 0, ratio));
  std::vector<uint8_t> gpu_entries(static_cast<size_t>(owner.count) * entry_bytes);
  std::vector<uint8_t> gpu_keys(static_cast<size_t>(owner.count) * key_bytes);
  entries.download(0, owner.count, gpu_entries.data());
  keys.download(0, owner.count, gpu_keys.data());
  compare_records(gpu_entries, owner.entries, entry_bytes, numerics, "entries");
  compare_records(gpu_keys, owner.keys, key_bytes, numerics, "index keys");
}

// V4 index keys written straight from rows with tiny channels and exact zeros (random_rows), not from the
// wk GEMM of check_compressor (whose outputs rarely need the exact Σx² or the fallbacks): the key kernel's
// RMSNorm then takes its exact-sum (the CPU's summation order) and fallback paths.
void check_keys(int64_t count, int64_t first, int ratio, fc::KvNumerics numerics, uint64_t seed) {
  INFO("keys: count " << count << " first " << first << " ratio " << ratio << " faithful "
                      << faithful(numerics) << " seed " << seed);
  constexpr int kKeyDim = 128, kRopeDim = 64;
  std::mt19937_64 rng(seed);
  const std::vector<float> rows = random_rows(count, kKeyDim, 1.0f, true, rng);
  const std::vector<float> weight = norm_weight(kKeyDim, rng);
  const be::RopeTable rope = rope_table(kRopeDim, numerics);
  std::vector<int64_t> positions(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) positions[static_cast<size_t>(i)] = (first + i) * ratio;
  const double eps = 1e-20;
  const std::vector<uint8_t> expected =
      cpu_records(rows, kKeyDim, positions, weight, eps, rope, be::RecordFormat::kMxfp4, numerics);
  const size_t record = fc::key_record_bytes(numerics, kKeyDim);
  const int64_t per_page = 7, pages = (first + count) / per_page + 1;
  std::vector<int32_t> table(static_cast<size_t>(pages));
  for (int64_t p = 0; p < pages; ++p) table[static_cast<size_t>(p)] = static_cast<int32_t>(pages - 1 - p);
  DeviceArray<uint8_t> pool(static_cast<size_t>(pages * per_page) * record);
  pool.fill_bytes(0x5A);
  DeviceArray<int32_t> d_table(table);
  DeviceArray<uint16_t> d_bf16(to_bf16_bits(rows));
  DeviceArray<float> d_f32(rows), d_weight(weight);
  DeviceArray<double> d_freqs(rope.freqs);
  fc::write_index_keys(key_write_args(numerics, d_bf16.data(), d_f32.data(), count, kKeyDim, first, ratio,
                                      d_weight.data(), eps, {d_freqs.data(), kRopeDim},
                                      {pool.data(), d_table.data(), per_page, static_cast<int64_t>(record)}),
                       nullptr);
  FKV_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> arena = pool.download();
  std::vector<uint8_t> got(static_cast<size_t>(count) * record);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = first + i, page = table[static_cast<size_t>(j / per_page)];
    std::memcpy(got.data() + static_cast<size_t>(i) * record,
                arena.data() + static_cast<size_t>(page * per_page + j % per_page) * record, record);
  }
  compare_records(got, expected, record, numerics, "index keys");
}

constexpr Shape kV41{512, 64, 1e-20};
constexpr Shape kSmall{64, 16, 1e-6};

}  // namespace

TEST_CASE("kv_write: window rows equal the CPU engine's records", "[gpu][kv_write]") {
  const bool small = flashkv::test::small_scale();
  const uint64_t seed = flashkv::test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> position(0, 1 << 20);
  const std::vector<int64_t> counts =
      small ? std::vector<int64_t>{1, 7, 130} : std::vector<int64_t>{1, 2, 7, 64, 131, 1000};
  for (const fc::KvNumerics numerics : {fc::KvNumerics::kFaithful, fc::KvNumerics::kClean}) {
    for (const int64_t n : counts) {
      check_window(kV41, n, position(rng), 130, numerics, faithful(numerics), rng());
    }
    check_window(kSmall, 37, position(rng), 16, numerics, false, rng());
    check_window(Shape{128, 32, 1e-6}, 9, position(rng), 8, numerics, faithful(numerics), rng());
  }
  // faithful from fp32 rows holding BF16 values (the CPU engine's own buffers)
  check_window(kV41, 33, position(rng), 130, fc::KvNumerics::kFaithful, false, rng());
}

TEST_CASE("kv_write: compressed entries and index keys equal the CPU engine's", "[gpu][kv_write]") {
  const bool small = flashkv::test::small_scale();
  const uint64_t seed = flashkv::test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t tokens = small ? 23 : 301;
  for (const fc::KvNumerics numerics : {fc::KvNumerics::kFaithful, fc::KvNumerics::kClean}) {
    check_compressor(2, kV41, 128, tokens, numerics, rng());
    check_compressor(1, kV41, 128, tokens, numerics, rng());
    check_compressor(2, kSmall, 32, tokens / 2 + 1, numerics, rng());
  }
}

TEST_CASE("kv_write: index keys from rows with tiny channels and zeros equal the CPU engine's",
          "[gpu][kv_write]") {
  const bool small = flashkv::test::small_scale();
  const uint64_t seed = flashkv::test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> first(0, 1 << 18);
  for (const fc::KvNumerics numerics : {fc::KvNumerics::kFaithful, fc::KvNumerics::kClean}) {
    for (const int64_t count :
         small ? std::vector<int64_t>{1, 5, 301} : std::vector<int64_t>{1, 5, 301, 4099}) {
      check_keys(count, first(rng), 4, numerics, rng());
    }
  }
  // one CTA: every warp walks many key groups through its ring (refills, the idle tail rows)
  struct GridLimit {
    GridLimit() { fc::set_grid_limit_for_tests(1); }
    ~GridLimit() { fc::set_grid_limit_for_tests(0); }
  } limit;
  check_keys(small ? 203 : 2003, first(rng), 4, fc::KvNumerics::kFaithful, rng());
}

TEST_CASE("kv_write: one CTA streams many rows per warp through its input rings", "[gpu][kv_write]") {
  // With the grid limited to one CTA every warp walks tens of rows, so the cp.async ring slots are refilled
  // many times (four BF16 rows or two fp32 rows in flight per lane) and the tail rows redo the last one.
  struct GridLimit {
    GridLimit() { fc::set_grid_limit_for_tests(1); }
    ~GridLimit() { fc::set_grid_limit_for_tests(0); }
  } limit;
  const bool small = flashkv::test::small_scale();
  const uint64_t seed = flashkv::test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> position(0, 1 << 20);
  const int64_t n = small ? 100 : 1000;
  for (const fc::KvNumerics numerics : {fc::KvNumerics::kFaithful, fc::KvNumerics::kClean}) {
    check_window(kV41, n, position(rng), 130, numerics, faithful(numerics), rng());
    check_window(kV41, n / 3, position(rng), 130, numerics, false, rng());
    check_window(Shape{128, 32, 1e-6}, n + 3, position(rng), 8, numerics, faithful(numerics), rng());
    check_compressor(1, kV41, 128, small ? 67 : 301, numerics, rng());
    check_compressor(2, kV41, 128, small ? 67 : 301, numerics, rng());
  }
}

TEST_CASE("kv_write: bad arguments throw before any launch", "[gpu][kv_write]") {
  fc::WindowWriteArgs args;
  args.n = 1;
  args.dim = 100;
  CHECK_THROWS_AS(fc::write_window_rows(args, nullptr), flashkv::Error);
  fc::CompressorWriteArgs c;
  c.ratio = 3;
  c.dim = 512;
  CHECK_THROWS_AS(fc::write_compressed_entries(c, nullptr), flashkv::Error);
}
