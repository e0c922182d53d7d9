// The CUDA sparse attention (kernels/sparse_attention.cuh: every variant, and CudaBackend::sparse_attention
// on the same host problems) against CpuBackend::sparse_attention in faithful mode, on fresh random problems:
// decode batches of several sequences (each its own window and entry cache), a prefill chunk, window fills
// below 128, selections with -1 holes and repeated indices, empty selections, rows with no keys at all, top-k
// sizes that are not a multiple of the 64-key tile, layers without entries.
//
// Tolerance (per output element, derived, not fitted). Both sides see the same BF16 q and the same key values
// (FP8 and NVFP4 decode exactly into BF16). The CPU evaluates logits, softmax and P·V in double; the GPU in
// fp32 (tensor-core dot products, hardware exp2, a reciprocal). Their fp32 probabilities then differ by
// ~1e-6 relative, so p rounded to BF16 is identical except where fp32(p) lies within that distance of a
// BF16 rounding midpoint: there the two may be one BF16 ulp apart. The test recomputes the softmax in double
// and, for each key whose fp32(p) is within 2^-14 (relative) of a midpoint, allows ulp(p)·|v_c|. On top:
// 1e-4·Σ_t p_t·|v_tc| for fp32 accumulation over <= 640 keys, and one BF16 ulp of the output for its final
// rounding. A missing, duplicated or misplaced key moves an element by ~p_t·|v_tc| (~1e-3 here), well
// above that bound, and a NaN (the output is poisoned before each launch) always fails.
//
// The single-pass variant (kOnline: online softmax, each key tile decoded once) rounds P before normalising
// it: its weights are BF16(2^(u_t − m)) with m a running reference when key t's tile was processed (at least
// the sink's logit; raised to the row's max so far whenever a logit exceeds it by more than 8, so the weights
// stay below 2^8: BF16 and fp32 round them with the same relative error as below 1), later rescaled in fp32,
// and the output is O / l with l the fp32 sum of the unrounded weights plus the sink's. So,
// with π_t the exact probabilities, M_c = Σ_t π_t·|v_tc| and u = 2^-8 (BF16's unit roundoff):
//   GPU:  |y_gpu − Σ π_t v_tc| <= u·M_c (P's rounding) + ~3e-4·M_c (fp32 logits, ex2.approx, at most ten
//         fp32 rescales, l's fp32 sum, fp32 accumulation) + ½ ulp(y_gpu) (BF16 output);
//   CPU:  |y_cpu − Σ π_t v_tc| <= u·M_c (its BF16 p) + ½ ulp(y_cpu).
// Hence |y_gpu − y_cpu| <= (2^-7 + 2^-10)·M + ulp(max(|y_gpu|, |y_cpu|)), M = Σ_t BF16(π_t)·|v_tc| (the
// 2^-10 holds the fp32 terms and M's own rounding). Looser than the faithful bound, so the test also proves
// it can fail: on the first shape the CPU's outputs for a wrong sink (sink + 4) and for a dropped tile (the
// last 64 selection slots of every row removed) must exceed it.
//
// FLASHKV_TEST_SCALE=small shrinks the cases for compute-sanitizer runs. Host C++20 (calls the backends).
#include <cuda_runtime.h>

#include <flashkv/error.hpp>
#include <flashkv/numeric/kv_records.hpp>
#include <flashkv/numeric/scalar_codecs.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "catch.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "device_array.hpp"
#include "gpu_test_env.hpp"
#include "sparse_attention.cuh"

namespace {

namespace nm = flashkv::numeric;
namespace fc = flashkv::cuda;
namespace be = flashkv::backend;
using flashkv::test::DeviceArray;

constexpr int kHeads = fc::kSparseAttentionHeads;
constexpr int kDim = fc::kSparseAttentionDim;
constexpr int kRowWidth = kHeads * kDim;
const size_t kFp8Bytes = nm::fp8_row_bytes(kDim);
const size_t kNvfp4Bytes = nm::nvfp4_entry_bytes(kDim);

using flashkv::test::fresh_seed;
using flashkv::test::small_scale;

const be::Backend& cpu() {
  static const std::unique_ptr<be::Backend> backend = be::make_cpu_backend(0);
  return *backend;
}

const be::Backend& cuda() {
  static const std::unique_ptr<be::Backend> backend = fc::make_cuda_backend(0);
  return *backend;
}

float bf16_round(float x) {
  return nm::bf16_to_float(nm::bf16_from_float(x));
}

// The distance between x and the next BF16 value away from zero (x a BF16 value).
double bf16_ulp(double x) {
  if (x == 0.0) return std::ldexp(1.0, -133);
  int exponent = 0;
  std::frexp(std::fabs(x), &exponent);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, exponent - 1 - 7);
}

// True when fp32 p lies within 2^-14 (relative) of a BF16 rounding midpoint.
bool near_bf16_midpoint(float p) {
  uint32_t bits;
  std::memcpy(&bits, &p, sizeof bits);
  const uint32_t mid_bits = (bits & 0xFFFF0000u) | 0x8000u;
  float mid;
  std::memcpy(&mid, &mid_bits, sizeof mid);
  return std::fabs(static_cast<double>(p) - mid) <= std::ldexp(std::fabs(static_cast<double>(p)), -14);
}

// ---- one sequence: its window rows, compressed entries, queries and selections
// ------------------------------

struct Shape {
  const char* name;
  int sequences;
  int queries;      // per sequence (1 = decode)
  int history;      // window positions before the first query
  int missing_pct;  // window rows absent from the ring
  int entries;      // compressed entries of the sequence
  int topk;
  int hole_pct;    // -1 slots in the selection
  int repeat_pct;  // slots repeating an earlier slot's index
  int sliding_window;
  bool under_sanitizer = false;  // also run at FLASHKV_TEST_SCALE=small (few keys: racecheck is slow on
                                 // this shared-memory-heavy kernel)
  bool bound_power = false;      // also check that wrong answers exceed the kOnline bound
};

struct Sequence {
  int64_t n = 0;
  std::vector<int64_t> query_positions;
  std::vector<int64_t> window_positions;
  std::vector<float> window;  // dequantized FP8 rows
  std::vector<uint8_t> window_records;
  int64_t entry_count = 0;
  std::vector<uint8_t> entries;  // NVFP4 records
  std::vector<int32_t> selection;
  std::vector<float> q;  // BF16 values
};

// A latent row: normal channels times a per-row magnitude, so the records use a spread of scales.
std::vector<float> latent_row(std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float magnitude = std::exp(0.5f * normal(rng));
  std::vector<float> row(kDim);
  for (float& x : row) x = magnitude * normal(rng);
  return row;
}

Sequence make_sequence(const Shape& shape, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> percent(0, 99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Sequence s;
  s.n = shape.queries;
  for (int i = 0; i < shape.queries; ++i) s.query_positions.push_back(shape.history + i);
  const int64_t first = std::max<int64_t>(0, shape.history - (shape.sliding_window - 1));
  for (int64_t p = first; p < shape.history + shape.queries; ++p) {
    if (percent(rng) < shape.missing_pct) continue;
    const std::vector<float> row = latent_row(rng);
    std::vector<uint8_t> record(kFp8Bytes);
    std::vector<float> decoded(kDim);
    nm::quantize_fp8_row(row.data(), kDim, record.data());
    nm::dequantize_fp8_row(record.data(), kDim, decoded.data());
    s.window_positions.push_back(p);
    s.window.insert(s.window.end(), decoded.begin(), decoded.end());
    s.window_records.insert(s.window_records.end(), record.begin(), record.end());
  }
  s.entry_count = shape.entries;
  for (int j = 0; j < shape.entries; ++j) {
    const std::vector<float> row = latent_row(rng);
    std::vector<uint8_t> record(kNvfp4Bytes);
    nm::quantize_nvfp4_entry(row.data(), kDim, record.data());
    s.entries.insert(s.entries.end(), record.begin(), record.end());
  }
  std::uniform_int_distribution<int32_t> entry(0, std::max(0, shape.entries - 1));
  for (int i = 0; i < shape.queries; ++i) {
    for (int k = 0; k < shape.topk; ++k) {
      int32_t v = shape.entries > 0 && percent(rng) >= shape.hole_pct ? entry(rng) : -1;
      if (k > 0 && percent(rng) < shape.repeat_pct) v = s.selection[s.selection.size() - 1 - (rng() % k)];
      s.selection.push_back(v);
    }
  }
  // q: BF16 values, a per-head amplitude so some heads are peaked and some flat
  s.q.resize(static_cast<size_t>(shape.queries) * kRowWidth);
  std::uniform_real_distribution<float> amplitude(0.3f, 2.5f);
  for (int i = 0; i < shape.queries; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      const float a = amplitude(rng);
      float* head = s.q.data() + static_cast<size_t>(i) * kRowWidth + h * kDim;
      for (int c = 0; c < kDim; ++c) head[c] = bf16_round(a * normal(rng));
    }
  }
  return s;
}

// The keys (dequantized rows) query row i attends to, in the CPU backend's order.
std::vector<const float*> keys_of(const Sequence& s, int64_t i, int64_t sliding_window,
                                  std::vector<float>& entry_storage) {
  std::vector<const float*> keys;
  const int64_t position = s.query_positions[static_cast<size_t>(i)];
  for (size_t t = 0; t < s.window_positions.size(); ++t) {
    const int64_t p = s.window_positions[t];
    if (p <= position && p > position - sliding_window) keys.push_back(s.window.data() + t * kDim);
  }
  const size_t topk = s.selection.size() / static_cast<size_t>(s.n);
  entry_storage.assign(topk * kDim, 0.0f);
  for (size_t k = 0; k < topk; ++k) {
    const int32_t e = s.selection[static_cast<size_t>(i) * topk + k];
    if (e < 0) continue;
    nm::dequantize_nvfp4_entry(s.entries.data() + static_cast<size_t>(e) * kNvfp4Bytes, kDim,
                               entry_storage.data() + k * kDim);
    keys.push_back(entry_storage.data() + k * kDim);
  }
  return keys;
}

struct Comparison {
  int64_t checked = 0;
  int64_t equal = 0;
  int64_t bad = 0;
  double worst_ratio = 0;  // max |got - want| / tolerance
  std::string first_bad;
};

// Compares one query row (all heads) with the flip-aware bound of the header comment.
// Which bound an output is held to: the faithful one (P normalised, then rounded) or kOnline's.
enum class Bound { kFaithful, kOnline };

// One GPU output row under comparison and its running tally.
struct Candidate {
  const float* got;
  Comparison* result;
  Bound bound;
};

void compare_row(const Sequence& s, int64_t i, int64_t sliding_window, const std::vector<float>& sink,
                 const float* want, const std::vector<Candidate>& candidates, const std::string& where) {
  std::vector<float> entry_storage;
  const std::vector<const float*> keys = keys_of(s, i, sliding_window, entry_storage);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  std::vector<double> p(keys.size()), flip(keys.size());
  std::vector<double> mass(kDim), slack(kDim);
  for (int h = 0; h < kHeads; ++h) {
    const float* q = s.q.data() + static_cast<size_t>(i) * kRowWidth + h * kDim;
    double peak = sink[static_cast<size_t>(h)];
    for (size_t t = 0; t < keys.size(); ++t) {
      double dot = 0;
      for (int c = 0; c < kDim; ++c) dot += static_cast<double>(q[c]) * keys[t][c];
      p[t] = dot * scale;
      peak = std::max(peak, p[t]);
    }
    double z = std::exp(sink[static_cast<size_t>(h)] - peak);
    for (size_t t = 0; t < keys.size(); ++t) z += (p[t] = std::exp(p[t] - peak));
    for (size_t t = 0; t < keys.size(); ++t) {
      const float p32 = static_cast<float>(p[t] / z);
      p[t] = bf16_round(p32);
      flip[t] = near_bf16_midpoint(p32) ? bf16_ulp(p[t]) : 0.0;
    }
    std::fill(mass.begin(), mass.end(), 0.0);
    std::fill(slack.begin(), slack.end(), 0.0);
    for (size_t t = 0; t < keys.size(); ++t) {
      for (int c = 0; c < kDim; ++c) {
        const double v = std::fabs(static_cast<double>(keys[t][c]));
        mass[static_cast<size_t>(c)] += p[t] * v;
        slack[static_cast<size_t>(c)] += flip[t] * v;
      }
    }
    for (const Candidate& candidate : candidates) {
      Comparison& result = *candidate.result;
      for (int c = 0; c < kDim; ++c) {
        const size_t at = static_cast<size_t>(h) * kDim + c;
        const double w = want[at], g = candidate.got[at];
        const double output_ulp = bf16_ulp(std::max(std::fabs(w), std::fabs(g))) + 1e-30;
        const double tolerance =
            candidate.bound == Bound::kOnline
                ? (std::ldexp(1.0, -7) + std::ldexp(1.0, -10)) * mass[static_cast<size_t>(c)] + output_ulp
                : slack[static_cast<size_t>(c)] + 1e-4 * mass[static_cast<size_t>(c)] + output_ulp;
        const double error = std::fabs(g - w);
        ++result.checked;
        if (g == w) ++result.equal;
        const bool ok = error <= tolerance;  // false for NaN
        result.worst_ratio = std::max(result.worst_ratio, ok ? error / tolerance : HUGE_VAL);
        if (!ok) {
          if (result.bad == 0) {
            char text[320];
            std::snprintf(text, sizeof text,
                          "%s row %lld head %d channel %d: gpu %.9g cpu %.9g |diff| %.3g > tolerance %.3g "
                          "(keys %zu, sum p|v| %.4g)",
                          where.c_str(), static_cast<long long>(i), h, c, g, w, error, tolerance, keys.size(),
                          mass[static_cast<size_t>(c)]);
            result.first_bad = text;
          }
          ++result.bad;
        }
      }
    }
  }
}

void check_shape(Shape shape) {
  if (small_scale()) {
    if (!shape.under_sanitizer) return;
    shape.sequences = std::min(shape.sequences, 2);
    shape.queries = std::min(shape.queries, 2);
  }
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> sink(kHeads);
  for (float& x : sink) x = normal(rng);
  std::vector<Sequence> sequences;
  for (int i = 0; i < shape.sequences; ++i) sequences.push_back(make_sequence(shape, rng));

  // Device pools: every sequence's window records and entries back to back; per query row the visible
  // window rows (shuffled, with -1 holes) and the selection, both as pool indices.
  const int window_cap = shape.sliding_window;
  std::vector<uint8_t> window_pool, entry_pool;
  std::vector<int32_t> window_rows, selection;
  std::vector<uint16_t> q_bits;
  int64_t rows = 0;
  for (const Sequence& s : sequences) {
    const auto window_base = static_cast<int32_t>(window_pool.size() / kFp8Bytes);
    const auto entry_base = static_cast<int32_t>(entry_pool.size() / kNvfp4Bytes);
    window_pool.insert(window_pool.end(), s.window_records.begin(), s.window_records.end());
    entry_pool.insert(entry_pool.end(), s.entries.begin(), s.entries.end());
    for (int64_t i = 0; i < s.n; ++i) {
      const int64_t position = s.query_positions[static_cast<size_t>(i)];
      std::vector<int32_t> visible;
      for (size_t t = 0; t < s.window_positions.size(); ++t) {
        const int64_t p = s.window_positions[t];
        if (p <= position && p > position - shape.sliding_window)
          visible.push_back(window_base + static_cast<int32_t>(t));
      }
      REQUIRE(static_cast<int>(visible.size()) <= window_cap);
      visible.resize(static_cast<size_t>(window_cap), -1);
      std::shuffle(visible.begin(), visible.end(), rng);
      window_rows.insert(window_rows.end(), visible.begin(), visible.end());
      for (int k = 0; k < shape.topk; ++k) {
        const int32_t e = s.selection[static_cast<size_t>(i * shape.topk + k)];
        selection.push_back(e < 0 ? -1 : entry_base + e);
      }
    }
    for (float x : s.q) q_bits.push_back(nm::bf16_from_float(x));
    rows += s.n;
  }
  // one spare record at the end of each pool: pointers stay non-null when a pool is otherwise empty
  window_pool.resize(window_pool.size() + kFp8Bytes, 0);
  entry_pool.resize(entry_pool.size() + kNvfp4Bytes, 0);
  const DeviceArray<uint16_t> d_q(q_bits);
  const DeviceArray<uint8_t> d_window(window_pool), d_entries(entry_pool);
  const DeviceArray<int32_t> d_window_rows(window_rows), d_selection(selection);
  const DeviceArray<float> d_sink(sink);
  using V = fc::SparseAttentionVariant;
  const V variants[] = {V::kWgmma, V::kSplitKeys, V::kMmaSync, V::kOnline};
  // the launchers directly, then CudaBackend (host views: window visibility, FP8 re-encoding, BF16 q)
  const char* const variant_names[] = {"wgmma", "split-keys", "mma.sync", "online", "CudaBackend"};
  constexpr int kVariants = 5;
  const auto bound_of = [](V variant) { return variant == V::kOnline ? Bound::kOnline : Bound::kFaithful; };
  // wrong answers that the kOnline bound must reject (bound_power shapes): the CPU with sink + 4, and with
  // the last 64 selection slots of every row dropped
  const char* const wrong_names[] = {"sink + 4", "dropped tile"};
  constexpr int kWrong = 2;
  Comparison wrong_results[kWrong];
  std::vector<std::vector<uint16_t>> out_bits;
  for (const V variant : variants) {
    DeviceArray<uint16_t> d_out(static_cast<size_t>(rows) * kRowWidth);
    d_out.fill_bytes(0xFF);  // BF16 NaN: an element the kernel does not write fails the comparison
    fc::SparseAttentionArgs args;
    args.q = d_q.data();
    args.n = rows;
    args.window_records = d_window.data();
    args.window_rows = d_window_rows.data();
    args.window_cap = window_cap;
    args.entry_records = d_entries.data();
    args.selection = d_selection.data();
    args.topk = shape.topk;
    args.sink = d_sink.data();
    args.out = d_out.data();
    fc::sparse_attention(args, nullptr, variant);
    FKV_CUDA_CHECK(cudaDeviceSynchronize());
    out_bits.push_back(d_out.download());
  }

  Comparison results[kVariants];
  int64_t row0 = 0;
  for (size_t si = 0; si < sequences.size(); ++si) {
    const Sequence& s = sequences[si];
    be::SparseAttention problem;
    problem.q = be::ConstMatrix{s.q.data(), s.n, kRowWidth};
    problem.heads = kHeads;
    problem.window = be::ConstMatrix{s.window.data(), static_cast<int64_t>(s.window_positions.size()), kDim};
    problem.window_positions = s.window_positions;
    problem.query_positions = s.query_positions;
    problem.sliding_window = shape.sliding_window;
    problem.entries = be::RecordRows{be::RecordFormat::kNvfp4, s.entries.data(), s.entry_count, kDim};
    problem.selection = s.selection;
    problem.topk = shape.topk;
    problem.sink = sink;
    std::vector<float> want(static_cast<size_t>(s.n) * kRowWidth);
    cpu().sparse_attention(problem, be::Matrix{want.data(), s.n, kRowWidth}, be::Rounding::kFaithful);
    std::vector<std::vector<float>> got(kVariants, std::vector<float>(want.size()));
    for (int v = 0; v + 1 < kVariants; ++v) {
      for (size_t k = 0; k < want.size(); ++k)
        got[v][k] = nm::bf16_to_float(out_bits[v][static_cast<size_t>(row0) * kRowWidth + k]);
    }
    std::fill(got[kVariants - 1].begin(), got[kVariants - 1].end(), std::nanf(""));
    cuda().sparse_attention(problem, be::Matrix{got[kVariants - 1].data(), s.n, kRowWidth},
                            be::Rounding::kFaithful);
    std::vector<std::vector<float>> wrong;
    if (shape.bound_power) {
      be::SparseAttention wrong_sink = problem;
      std::vector<float> shifted_sink = sink;
      for (float& x : shifted_sink) x += 4.0f;
      wrong_sink.sink = shifted_sink;
      be::SparseAttention dropped = problem;
      std::vector<int32_t> dropped_selection = s.selection;
      for (int64_t i = 0; i < s.n; ++i) {
        for (int k = std::max(0, shape.topk - 64); k < shape.topk; ++k)
          dropped_selection[static_cast<size_t>(i * shape.topk + k)] = -1;
      }
      dropped.selection = dropped_selection;
      for (const be::SparseAttention* p : {&wrong_sink, &dropped}) {
        wrong.emplace_back(want.size());
        cpu().sparse_attention(*p, be::Matrix{wrong.back().data(), s.n, kRowWidth}, be::Rounding::kFaithful);
      }
    }
    // what kAuto (CudaBackend's call) runs for these rows decides the backend's bound
    const Bound backend_bound = bound_of(fc::sparse_attention_auto_variant(s.n));
    for (int64_t i = 0; i < s.n; ++i) {
      std::vector<Candidate> candidates;
      for (int v = 0; v < kVariants; ++v) {
        const Bound bound = v + 1 < kVariants ? bound_of(variants[v]) : backend_bound;
        candidates.push_back({got[v].data() + i * kRowWidth, &results[v], bound});
      }
      for (size_t w = 0; w < wrong.size(); ++w)
        candidates.push_back({wrong[w].data() + i * kRowWidth, &wrong_results[w], Bound::kOnline});
      compare_row(s, i, shape.sliding_window, sink, want.data() + i * kRowWidth, candidates,
                  std::string(shape.name) + " sequence " + std::to_string(si));
    }
    row0 += s.n;
  }
  for (int v = 0; v < kVariants; ++v) {
    const Comparison& result = results[v];
    std::printf(
        "sparse attention %-16s %-26s rows %3lld: %lld/%lld elements bit-equal to the CPU, worst error "
        "%.3f of its bound, %lld over (seed %llu)\n",
        variant_names[v], shape.name, static_cast<long long>(rows), static_cast<long long>(result.equal),
        static_cast<long long>(result.checked), result.worst_ratio, static_cast<long long>(result.bad),
        static_cast<unsigned long long>(seed));
  }
  for (int v = 0; v < kVariants; ++v) {
    const Comparison& result = results[v];
    INFO(variant_names[v] << ", seed " << seed << ": " << result.bad << " of " << result.checked
                          << " elements out of bounds; first: " << result.first_bad);
    CHECK(result.bad == 0);
  }
  if (!shape.bound_power) return;
  for (int w = 0; w < kWrong; ++w) {
    const Comparison& result = wrong_results[w];
    std::printf("sparse attention: a wrong answer (%s) exceeds the online bound at %lld of %lld elements\n",
                wrong_names[w], static_cast<long long>(result.bad), static_cast<long long>(result.checked));
    INFO(wrong_names[w] << ", seed " << seed << ": the online bound must reject it");
    CHECK(result.bad > result.checked / 100);
  }
}

}  // namespace

TEST_CASE("GPU sparse attention equals the CPU backend (faithful)", "[gpu][sparse_attention]") {
  // name, sequences, queries, history, missing%, entries, topk, hole%, repeat%, window, under sanitizer
  check_shape({"decode batch", 5, 1, 300, 0, 2000, 512, 5, 0, 128, false, true});
  check_shape({"decode window fill<128", 3, 1, 70, 10, 900, 512, 20, 5, 128});
  check_shape({"prefill chunk", 1, 12, 120, 0, 700, 300, 10, 10, 128});
  check_shape({"topk 77, repeats", 2, 3, 40, 30, 50, 77, 15, 30, 128, true});
  check_shape({"tiny: 3 window, 5 topk", 2, 2, 1, 0, 6, 5, 20, 0, 128, true});
  check_shape({"window only (no entries)", 2, 2, 200, 0, 0, 0, 0, 0, 128});
  check_shape({"empty selection", 2, 2, 30, 0, 100, 64, 100, 0, 128});
  check_shape({"no keys at all", 1, 2, 0, 100, 10, 40, 100, 0, 128, true});
}

TEST_CASE("GPU sparse attention split keys runs its row clusters here", "[gpu][sparse_attention]") {
  // kSplitKeys falls back to kWgmma where its clusters cannot be scheduled; on sm_90a they must fit (else the
  // conformance test above would be checking the fallback, not the cluster kernel)
  int device = 0, major = 0, minor = 0;
  FKV_CUDA_CHECK(cudaGetDevice(&device));
  FKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FKV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) return;  // (not sm_90a: kSplitKeys runs the mma.sync kernel)
  const int widest = fc::sparse_attention_split_clusters(128, 512);  // 10 CTAs per cluster
  std::printf("sparse attention split keys: %d clusters of 10 CTAs, %d of 2 at once\n", widest,
              fc::sparse_attention_split_clusters(64, 64));
  CHECK(widest > 0);
  CHECK(fc::sparse_attention_split_clusters(64, 64) >= widest);
  CHECK(fc::sparse_attention_split_clusters(128, 513) == 0);  // more keys than a row may have
}

TEST_CASE("GPU sparse attention rejects bad arguments", "[gpu][sparse_attention]") {
  fc::SparseAttentionArgs args;
  args.n = 1;
  args.window_cap = 128;
  args.topk = 513;
  bool threw = false;
  try {
    fc::sparse_attention(args, nullptr);
  } catch (const flashkv::Error& e) {
    threw = std::string(e.what()).find("at most") != std::string::npos;
  }
  CHECK(threw);
  args.topk = 512;
  threw = false;
  try {
    fc::sparse_attention(args, nullptr);  // q is null
  } catch (const flashkv::Error& e) {
    threw = std::string(e.what()).find("q is null") != std::string::npos;
  }
  CHECK(threw);
}
