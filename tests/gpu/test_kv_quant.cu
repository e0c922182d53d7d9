// The CUDA KV record kernels (kernels/kv_quant.cuh) against the host codecs of
// <flashkv/numeric/kv_records.hpp>: on fresh random rows of many shapes (magnitudes from 1e-6 to 1e4,
// outliers, rows at the scale floors, all-equal rows, exact rounding ties, subnormals, zeros), the GPU
// records equal the host records byte for byte and the GPU dequantization equals the host's bit for
// bit. Output buffers are poisoned with two different patterns around separate launches, so a byte
// the kernel forgot to write cannot match by luck, and guard bytes past the end must stay untouched.
//
// FLASHKV_TEST_SCALE=small shrinks the large cases (for compute-sanitizer runs).
#include <cuda_runtime.h>

#include <flashkv/error.hpp>
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "catch.hpp"
#include "cuda_check.cuh"
#include "gpu_test_env.hpp"
#include "kv_quant.cuh"

namespace {

namespace nm = flashkv::numeric;
namespace fc = flashkv::cuda;

constexpr uint8_t kPoisons[2] = {0xA5, 0x5A};
constexpr size_t kGuardBytes = 64;
constexpr auto kAuto = fc::KvKernelVariant::kAuto;

using flashkv::test::fresh_seed;
using flashkv::test::small_scale;

// Owns `bytes` of device memory plus a guard tail; freed on scope exit.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) {
    FKV_CUDA_CHECK(cudaMalloc(&ptr_, bytes + kGuardBytes));
  }
  ~DeviceBytes() { cudaFree(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  size_t bytes() const { return bytes_; }  // usable size; the guard tail follows

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

void upload(DeviceBytes& dst, size_t offset, const void* src, size_t bytes) {
  FKV_CUDA_CHECK(cudaMemcpy(dst.data() + offset, src, bytes, cudaMemcpyHostToDevice));
}

std::vector<uint8_t> download_all(const DeviceBytes& src) {
  std::vector<uint8_t> bytes(src.bytes() + kGuardBytes);
  FKV_CUDA_CHECK(cudaMemcpy(bytes.data(), src.data(), bytes.size(), cudaMemcpyDeviceToHost));
  return bytes;
}

// ---- record kinds under test -------------------------------------------------------------------

struct Kind {
  const char* name;
  int block;
  size_t (*record_bytes)(int);
  void (*host_quantize)(const float*, int, uint8_t*);
  void (*host_dequantize)(const uint8_t*, int, float*);
  void (*gpu_quantize)(const float*, int64_t, int, uint8_t*, cudaStream_t, fc::KvKernelVariant);
  void (*gpu_quantize_bf16)(const uint16_t*, int64_t, int, uint8_t*, cudaStream_t, fc::KvKernelVariant);
  void (*gpu_dequantize)(const uint8_t*, int64_t, int, float*, cudaStream_t, fc::KvKernelVariant);
  float scale_floor_amax;  // amax below which the scale is pinned at its floor (MODEL.md §2.2)
  float max_code_value;    // largest magnitude of the element format: 448 (E4M3) or 6 (E2M1)
  int official_channels;
};

size_t fp8_bytes(int c) {
  return nm::fp8_row_bytes(c);
}
size_t nvfp4_bytes(int c) {
  return nm::nvfp4_entry_bytes(c);
}
size_t mxfp4_bytes(int c) {
  return nm::mxfp4_key_bytes(c);
}
void host_q_fp8(const float* x, int c, uint8_t* out) {
  nm::quantize_fp8_row(x, c, out);
}
void host_d_fp8(const uint8_t* in, int c, float* out) {
  nm::dequantize_fp8_row(in, c, out);
}
void host_q_nvfp4(const float* x, int c, uint8_t* out) {
  nm::quantize_nvfp4_entry(x, c, out);
}
void host_d_nvfp4(const uint8_t* in, int c, float* out) {
  nm::dequantize_nvfp4_entry(in, c, out);
}
void host_q_mxfp4(const float* x, int c, uint8_t* out) {
  nm::quantize_mxfp4_key(x, c, out);
}
void host_d_mxfp4(const uint8_t* in, int c, float* out) {
  nm::dequantize_mxfp4_key(in, c, out);
}

const Kind kFp8{"fp8_row",
                32,
                fp8_bytes,
                host_q_fp8,
                host_d_fp8,
                fc::quantize_fp8_rows,
                fc::quantize_fp8_rows_bf16,
                fc::dequantize_fp8_rows,
                1e-4f,
                448.0f,
                512};
const Kind kNvfp4{"nvfp4_entry",
                  16,
                  nvfp4_bytes,
                  host_q_nvfp4,
                  host_d_nvfp4,
                  fc::quantize_nvfp4_entries,
                  fc::quantize_nvfp4_entries_bf16,
                  fc::dequantize_nvfp4_entries,
                  6.0f * 0x1p-9f,
                  6.0f,
                  512};
const Kind kMxfp4{"mxfp4_key",
                  32,
                  mxfp4_bytes,
                  host_q_mxfp4,
                  host_d_mxfp4,
                  fc::quantize_mxfp4_keys,
                  fc::quantize_mxfp4_keys_bf16,
                  fc::dequantize_mxfp4_keys,
                  6.0f * 0x1p-126f,
                  6.0f,
                  128};

const Kind* kind_named(const std::string& name) {
  for (const Kind* kind : {&kFp8, &kNvfp4, &kMxfp4}) {
    if (name == kind->name) return kind;
  }
  return nullptr;
}

// ---- random rows -------------------------------------------------------------------------------

// Values of one block drawn from one of several regimes, so every branch of the codecs is hit:
// ordinary magnitudes, an outlier, the scale floor, constants, exact ties, subnormals, zeros, and
// poisoned blocks (NaN / Inf).
class RowMaker {
 public:
  static constexpr int kRegimes = 11;

  RowMaker(const Kind& kind, uint64_t seed) : kind_(kind), rng_(seed) {}

  // Half of the rows use one regime for every block, the other half draw a regime per block.
  std::vector<float> rows(int64_t n, int c) {
    std::vector<float> x(static_cast<size_t>(n) * c);
    for (int64_t r = 0; r < n; ++r) {
      const bool one_regime = pick(0, 1) == 0;
      const int row_regime = pick(0, kRegimes - 1);
      for (int b = 0; b < c; b += kind_.block) {
        fill_block(one_regime ? row_regime : pick(0, kRegimes - 1), &x[static_cast<size_t>(r) * c + b]);
      }
    }
    return x;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(rng_); }
  float sign() { return pick(0, 1) ? 1.0f : -1.0f; }

  void fill_block(int regime, float* x) {
    const int b = kind_.block;
    switch (regime) {
      case 0:
      case 1:
      case 2: {  // ordinary: gaussian at a magnitude between 1e-6 and 1e4
        const float magnitude = std::pow(10.0f, uniform(-6.0f, 4.0f));
        for (int i = 0; i < b; ++i) x[i] = normal() * magnitude;
        break;
      }
      case 3: {  // one outlier dominating the block's scale
        const float magnitude = std::pow(10.0f, uniform(-3.0f, 1.0f));
        for (int i = 0; i < b; ++i) x[i] = normal() * magnitude;
        x[pick(0, b - 1)] = sign() * magnitude * uniform(100.0f, 5000.0f);
        break;
      }
      case 4: {  // around the scale floor: amax from 1% to 200% of it
        const float amax = kind_.scale_floor_amax * uniform(0.01f, 2.0f);
        for (int i = 0; i < b; ++i) x[i] = uniform(-amax, amax);
        break;
      }
      case 5: {  // all equal
        const float v = normal() * std::pow(10.0f, uniform(-4.0f, 3.0f));
        for (int i = 0; i < b; ++i) x[i] = v;
        break;
      }
      case 6:  // exact ties of the element grid at a power-of-two scale
        fill_ties(x);
        break;
      case 7: {  // float subnormals and zeros of both signs
        for (int i = 0; i < b; ++i) x[i] = pick(0, 3) == 0 ? sign() * 0.0f : normal() * 1e-39f;
        break;
      }
      case 8: {  // the block max exactly at a scale boundary (amax = max_code * 2^k)
        const float scale = std::ldexp(1.0f, pick(-12, 12));
        for (int i = 0; i < b; ++i) x[i] = uniform(-1.0f, 1.0f) * kind_.max_code_value * scale;
        x[pick(0, b - 1)] = sign() * kind_.max_code_value * scale;
        break;
      }
      case 9: {  // poisoned: a NaN or an infinity among ordinary values (scale NaN, all codes 0)
        for (int i = 0; i < b; ++i) x[i] = normal();
        const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity()};
        x[pick(0, b - 1)] = specials[pick(0, 2)];
        break;
      }
      default: {  // zeros with a single non-zero channel
        for (int i = 0; i < b; ++i) x[i] = 0.0f;
        x[pick(0, b - 1)] = normal();
        break;
      }
    }
  }

  // Block max = max_code * s, the other channels at midpoints between neighbouring codes times s,
  // so x / scale lands exactly on a tie (scale = s for every kind when s is a power of two in range).
  void fill_ties(float* x) {
    const float s = std::ldexp(1.0f, pick(-6, 6));
    const int b = kind_.block;
    for (int i = 0; i < b; ++i) {
      float mid = 0.0f;
      if (kind_.max_code_value == 6.0f) {
        static constexpr float kFp4Midpoints[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
        mid = kFp4Midpoints[pick(0, 6)];
      } else {  // E4M3 normal range: mantissa with one more bit set halfway
        mid = std::ldexp(1.0f + static_cast<float>(2 * pick(0, 7) + 1) / 16.0f, pick(-6, 7));
      }
      x[i] = sign() * mid * s;
    }
    x[pick(0, b - 1)] = sign() * kind_.max_code_value * s;
  }

  const Kind& kind_;
  std::mt19937_64 rng_;
};

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = nm::bf16_from_float(x[i]);
  return bits;
}

std::vector<float> from_bf16(const std::vector<uint16_t>& bits) {
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) x[i] = nm::bf16_to_float(bits[i]);
  return x;
}

std::vector<uint8_t> host_records(const Kind& kind, const std::vector<float>& x, int64_t n, int c) {
  const size_t rb = kind.record_bytes(c);
  std::vector<uint8_t> out(static_cast<size_t>(n) * rb);
  for (int64_t r = 0; r < n; ++r) {
    kind.host_quantize(&x[static_cast<size_t>(r) * c], c, &out[static_cast<size_t>(r) * rb]);
  }
  return out;
}

constexpr size_t kAllBytesRight = SIZE_MAX;

// Index of the first wrong byte of a downloaded buffer: inside the output region [offset, offset +
// want.size()) bytes must equal `want`; outside it (the misalignment gap before, the guard tail
// after) they must still hold the poison. kAllBytesRight when there is none.
size_t first_wrong_byte(const std::vector<uint8_t>& got, size_t offset, const std::vector<uint8_t>& want,
                        uint8_t poison) {
  for (size_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= offset && i - offset < want.size();
    if (got[i] != (inside ? want[i - offset] : poison)) return i;
  }
  return kAllBytesRight;
}

// Runs `launch(device_output)` twice on differently poisoned buffers and checks every byte of the
// output region against `want`, plus the bytes around it.
void check_launch_writes(const std::function<void(uint8_t*)>& launch, const std::vector<uint8_t>& want,
                         size_t out_offset, const std::string& what) {
  DeviceBytes out(out_offset + want.size());
  for (uint8_t poison : kPoisons) {
    FKV_CUDA_CHECK(cudaMemset(out.data(), poison, out.bytes() + kGuardBytes));
    launch(out.data() + out_offset);
    FKV_CUDA_CHECK(cudaGetLastError());
    FKV_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> got = download_all(out);
    const size_t bad = first_wrong_byte(got, out_offset, want, poison);
    INFO(what << ", poison " << int{poison} << ", first wrong byte " << bad << " (output at " << out_offset
              << ", " << want.size() << " bytes)");
    REQUIRE(bad == kAllBytesRight);
  }
}

std::vector<uint8_t> as_bytes(const std::vector<float>& x) {
  std::vector<uint8_t> bytes(x.size() * sizeof(float));
  std::memcpy(bytes.data(), x.data(), bytes.size());
  return bytes;
}

// NaN payloads differ between x86 and the GPU (which returns the canonical NaN); every other value
// must match bit for bit. Rewrites NaNs of `got` to the expected pattern where both are NaN.
void canonicalize_nans(std::vector<uint8_t>& got, size_t offset, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    float g = 0.0f;
    std::memcpy(&g, &got[offset + i * sizeof(float)], sizeof g);
    if (std::isnan(g) && std::isnan(want[i]))
      std::memcpy(&got[offset + i * sizeof(float)], &want[i], sizeof g);
  }
}

// ---- the checks --------------------------------------------------------------------------------

// Quantizes `n` random rows of `c` channels on the GPU from fp32 and from BF16 input, compares with
// the host, then dequantizes the records on the GPU and compares with the host dequantization.
// `in_misalign` / `out_misalign` shift the device pointers off their natural 256-byte alignment.
void check_round_trip(const Kind& kind, int64_t n, int c, size_t in_misalign, size_t out_misalign,
                      fc::KvKernelVariant variant = fc::KvKernelVariant::kAuto) {
  const uint64_t seed = fresh_seed();
  INFO(kind.name << " n=" << n << " C=" << c << " input offset " << in_misalign << " output offset "
                 << out_misalign << " variant " << static_cast<int>(variant) << " seed " << seed);
  RowMaker maker(kind, seed);
  const std::vector<float> x = maker.rows(n, c);
  const std::vector<uint16_t> x_bf16 = to_bf16(x);
  const std::vector<uint8_t> want = host_records(kind, x, n, c);
  const std::vector<uint8_t> want_bf16 = host_records(kind, from_bf16(x_bf16), n, c);

  DeviceBytes in_f32(in_misalign + x.size() * sizeof(float));
  upload(in_f32, in_misalign, x.data(), x.size() * sizeof(float));
  const auto* rows_f32 = reinterpret_cast<const float*>(in_f32.data() + in_misalign);
  check_launch_writes([&](uint8_t* out) { kind.gpu_quantize(rows_f32, n, c, out, nullptr, variant); }, want,
                      out_misalign, "quantize from fp32");

  const size_t bf16_misalign = in_misalign / 2;  // BF16 rows only need 2-byte alignment
  DeviceBytes in_bf16(bf16_misalign + x_bf16.size() * sizeof(uint16_t));
  upload(in_bf16, bf16_misalign, x_bf16.data(), x_bf16.size() * sizeof(uint16_t));
  const auto* rows_bf16 = reinterpret_cast<const uint16_t*>(in_bf16.data() + bf16_misalign);
  check_launch_writes([&](uint8_t* out) { kind.gpu_quantize_bf16(rows_bf16, n, c, out, nullptr, variant); },
                      want_bf16, out_misalign, "quantize from bf16");

  // Dequantize the host records (and, separately, arbitrary record bytes: every code, NaN codes too).
  std::vector<uint8_t> arbitrary(want.size());
  std::mt19937_64 rng(seed + 1);
  for (uint8_t& byte : arbitrary) byte = static_cast<uint8_t>(rng());
  const std::vector<uint8_t>* const record_sets[] = {&want, &arbitrary};
  for (const std::vector<uint8_t>* records : record_sets) {
    std::vector<float> expect(x.size());
    const size_t rb = kind.record_bytes(c);
    for (int64_t r = 0; r < n; ++r) {
      kind.host_dequantize(&(*records)[static_cast<size_t>(r) * rb], c, &expect[static_cast<size_t>(r) * c]);
    }
    DeviceBytes rec(in_misalign + records->size());
    upload(rec, in_misalign, records->data(), records->size());
    const size_t out_bytes = expect.size() * sizeof(float);
    const size_t float_offset = out_misalign / 4 * 4;  // fp32 rows stay 4-byte aligned
    DeviceBytes out(float_offset + out_bytes);
    for (uint8_t poison : kPoisons) {
      FKV_CUDA_CHECK(cudaMemset(out.data(), poison, out.bytes() + kGuardBytes));
      kind.gpu_dequantize(rec.data() + in_misalign, n, c, reinterpret_cast<float*>(out.data() + float_offset),
                          nullptr, variant);
      FKV_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint8_t> got = download_all(out);
      canonicalize_nans(got, float_offset, expect);
      const size_t bad = first_wrong_byte(got, float_offset, as_bytes(expect), poison);
      INFO("dequantize " << (records == &want ? "host records" : "arbitrary bytes") << ", poison "
                         << int{poison} << ", first wrong byte " << bad << " (output at " << float_offset
                         << ")");
      REQUIRE(bad == kAllBytesRight);
    }
  }
}

int64_t large_rows() {
  return small_scale() ? 3001 : 100003;
}

}  // namespace

TEST_CASE("GPU KV records equal the host records, small shapes", "[gpu][kv_quant]") {
  const std::string name = GENERATE("fp8_row", "nvfp4_entry", "mxfp4_key");
  const Kind& kind = *kind_named(name);
  // C: one block, a few blocks, a width whose chunk count does not divide the CTA, the official width.
  const int c = GENERATE(1, 2, 3, 5, 16) * 32;
  const int64_t n = GENERATE(as<int64_t>{}, 0, 1, 2, 3, 7, 31, 33, 255, 257, 1001);
  check_round_trip(kind, n, c, 0, 0);
}

TEST_CASE("GPU KV records: NVFP4 at a single 16-channel block", "[gpu][kv_quant]") {
  const int64_t n = GENERATE(as<int64_t>{}, 1, 5, 300);
  check_round_trip(kNvfp4, n, 16, 0, 0);
  check_round_trip(kNvfp4, n, 48, 0, 0);
}

TEST_CASE("GPU KV records: large n at the official widths", "[gpu][kv_quant]") {
  const std::string name = GENERATE("fp8_row", "nvfp4_entry", "mxfp4_key");
  const Kind& kind = *kind_named(name);
  check_round_trip(kind, large_rows(), kind.official_channels, 0, 0);
}

TEST_CASE("GPU KV records: rows wider than one CTA's default", "[gpu][kv_quant]") {
  const std::string name = GENERATE("fp8_row", "nvfp4_entry", "mxfp4_key");
  const Kind& kind = *kind_named(name);
  const int c = GENERATE(2048 + 32, 4096, fc::kMaxKvChannels);
  check_round_trip(kind, 5, c, 0, 0);
}

TEST_CASE("GPU KV records: every kernel variant", "[gpu][kv_quant]") {
  const std::string name = GENERATE("fp8_row", "nvfp4_entry", "mxfp4_key");
  const Kind& kind = *kind_named(name);
  const auto variant = GENERATE(fc::KvKernelVariant::kRegisterTiles, fc::KvKernelVariant::kStreamingStores,
                                fc::KvKernelVariant::kBulkSmall, fc::KvKernelVariant::kBulkMedium,
                                fc::KvKernelVariant::kBulkLarge);
  // Tails shorter than a stage, chunk counts that do not divide the CTA, a row wider than one tile (the
  // register fallback), and at C = 128 enough rows for every CTA to wrap around its ring several times.
  const int c = GENERATE(1, 3, 4, 16, 80) * 32;
  const int64_t n = GENERATE(as<int64_t>{}, 1, 7, 33, 1001, 5003, 100003);
  if (n > 5003 && c != 128) return;
  // Under compute-sanitizer (FLASHKV_TEST_SCALE=small) every launch is ~100x slower: keep one wide, one
  // narrow and one multi-tile width, and row counts up to a few CTAs, so racecheck ends within its budget.
  if (small_scale() && (n > 1001 || c == 3 * 32 || c == 16 * 32)) return;
  check_round_trip(kind, n, c, 0, 0, variant);
}

TEST_CASE("GPU KV records: misaligned pointers take the safe path", "[gpu][kv_quant]") {
  const std::string name = GENERATE("fp8_row", "nvfp4_entry", "mxfp4_key");
  const Kind& kind = *kind_named(name);
  const size_t in_offset = GENERATE(as<size_t>{}, 0, 4, 8);
  const size_t out_offset = GENERATE(as<size_t>{}, 1, 2, 4, 8, 12);
  check_round_trip(kind, 67, kind.official_channels, in_offset, out_offset);
}

// ---- argument validation -----------------------------------------------------------------------

namespace {

void require_invalid_argument(const std::function<void()>& call, const std::string& needle) {
  bool threw = false;
  try {
    call();
  } catch (const flashkv::Error& e) {
    threw = true;
    INFO("message: " << e.what());
    CHECK(e.code() == flashkv::ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
  INFO("expected flashkv::Error mentioning '" << needle << "'");
  REQUIRE(threw);
}

}  // namespace

TEST_CASE("GPU KV launchers reject bad arguments with flashkv::Error", "[gpu][kv_quant]") {
  const std::string name = GENERATE("fp8_row", "nvfp4_entry", "mxfp4_key");
  const Kind& kind = *kind_named(name);
  const int c = kind.official_channels;
  DeviceBytes rows(16 * static_cast<size_t>(c) * sizeof(float));
  DeviceBytes records(16 * kind.record_bytes(c));
  auto* f32 = reinterpret_cast<float*>(rows.data());
  auto* bf16 = reinterpret_cast<uint16_t*>(rows.data());
  uint8_t* rec = records.data();

  SECTION("C not a multiple of the block") {
    const int bad_c = c + kind.block / 2;
    require_invalid_argument([&] { kind.gpu_quantize(f32, 4, bad_c, rec, nullptr, kAuto); },
                             "C = " + std::to_string(bad_c));
    require_invalid_argument([&] { kind.gpu_quantize_bf16(bf16, 4, bad_c, rec, nullptr, kAuto); },
                             "not a positive multiple");
    require_invalid_argument([&] { kind.gpu_dequantize(rec, 4, bad_c, f32, nullptr, kAuto); },
                             "not a positive multiple");
    require_invalid_argument([&] { kind.gpu_quantize(f32, 4, 0, rec, nullptr, kAuto); }, "C = 0");
    require_invalid_argument([&] { kind.gpu_quantize(f32, 4, -kind.block, rec, nullptr, kAuto); }, "C = -");
  }
  SECTION("C above the supported maximum") {
    require_invalid_argument([&] { kind.gpu_quantize(f32, 1, fc::kMaxKvChannels + 32, rec, nullptr, kAuto); },
                             "maximum");
  }
  SECTION("negative n") {
    require_invalid_argument([&] { kind.gpu_quantize(f32, -1, c, rec, nullptr, kAuto); }, "n = -1");
    require_invalid_argument([&] { kind.gpu_dequantize(rec, -5, c, f32, nullptr, kAuto); }, "n = -5");
  }
  SECTION("null pointers with rows to do") {
    require_invalid_argument([&] { kind.gpu_quantize(nullptr, 2, c, rec, nullptr, kAuto); },
                             "input pointer is null");
    require_invalid_argument([&] { kind.gpu_quantize_bf16(bf16, 2, c, nullptr, nullptr, kAuto); },
                             "output pointer is null");
    require_invalid_argument([&] { kind.gpu_dequantize(nullptr, 2, c, f32, nullptr, kAuto); },
                             "input pointer is null");
  }
  SECTION("rows not aligned to their element type") {
    const auto* odd_f32 = reinterpret_cast<const float*>(rows.data() + 2);
    const auto* odd_bf16 = reinterpret_cast<const uint16_t*>(rows.data() + 1);
    require_invalid_argument([&] { kind.gpu_quantize(odd_f32, 2, c, rec, nullptr, kAuto); }, "not aligned");
    require_invalid_argument([&] { kind.gpu_quantize_bf16(odd_bf16, 2, c, rec, nullptr, kAuto); },
                             "not aligned");
    require_invalid_argument(
        [&] { kind.gpu_dequantize(rec, 2, c, reinterpret_cast<float*>(rows.data() + 1), nullptr, kAuto); },
        "not aligned");
  }
  SECTION("overlapping input and output") {
    require_invalid_argument([&] { kind.gpu_quantize(f32, 4, c, rows.data() + 8, nullptr, kAuto); },
                             "overlap");
    require_invalid_argument([&] { kind.gpu_dequantize(rows.data(), 4, c, f32 + 1, nullptr, kAuto); },
                             "overlap");
  }
  SECTION("n = 0 accepts null pointers and launches nothing") {
    kind.gpu_quantize(nullptr, 0, c, nullptr, nullptr, kAuto);
    kind.gpu_quantize_bf16(nullptr, 0, c, nullptr, nullptr, kAuto);
    kind.gpu_dequantize(nullptr, 0, c, nullptr, nullptr, kAuto);
    FKV_CUDA_CHECK(cudaDeviceSynchronize());
  }
  SECTION("every function names itself in the message") {
    require_invalid_argument([&] { kind.gpu_quantize_bf16(bf16, -1, c, rec, nullptr, kAuto); }, "_bf16");
    require_invalid_argument([&] { kind.gpu_dequantize(rec, -1, c, f32, nullptr, kAuto); }, "dequantize_");
  }
}
