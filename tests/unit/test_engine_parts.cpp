// Host-side parts of the CPU engine that need no checkpoint: the thread pool, numpy's generator (against the
// multipliers pinned in tests/reference/engram_multipliers.json, derived with numpy), Engram primes and
// hashing (spec §7, §12 tiny values), and the window ring's retention and truncation.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "backend/cpu/thread_pool.hpp"
#include "catch.hpp"
#include "runtime/engram_hash.hpp"
#include "runtime/numpy_random.hpp"
#include "runtime/window_ring.hpp"

namespace {

const std::filesystem::path kData(FLASHKV_TEST_DATA);

uint64_t fresh_seed() {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

}  // namespace

TEST_CASE("thread pool: every index once, concurrent callers, exceptions reach the caller", "[engine]") {
  flashkv::backend::cpu::ThreadPool pool(3);
  REQUIRE(pool.size() == 3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
  for (const auto& h : hits) REQUIRE(h.load() == 1);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) pool.parallel_for(50, [&](int64_t i) { total.fetch_add(i); });
    });
  }
  for (std::thread& t : callers) t.join();
  REQUIRE(total.load() == 4 * 20 * (49 * 50 / 2));
  REQUIRE_THROWS_WITH(pool.parallel_for(10,
                                        [](int64_t i) {
                                          if (i == 7) throw std::runtime_error("index 7 failed");
                                        }),
                      "index 7 failed");
  pool.parallel_for(3, [](int64_t) {});  // still serves after an exception
}

TEST_CASE("numpy generator: the pinned Engram multipliers (numpy-derived) come out of the C++ PCG64",
          "[engine]") {
  std::ifstream in(kData / ".." / "reference" / "engram_multipliers.json");
  REQUIRE(in.good());
  const nlohmann::json fixture = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& entry : fixture.at("entries")) {
    const auto vocab = entry.at("compressed_vocab_size").get<int64_t>();
    const auto size = entry.at("max_ngram_size").get<int64_t>();
    const int layer = entry.at("layer_id").get<int>();
    std::vector<int64_t> want;
    for (const auto& value : entry.at("multipliers")) want.push_back(std::stoll(value.get<std::string>()));
    CAPTURE(vocab, layer);
    REQUIRE(flashkv::runtime::engram_multipliers(vocab, layer, size) == want);
    ++checked;
  }
  REQUIRE(checked >= 4);
  REQUIRE_THROWS_AS(flashkv::runtime::numpy_default_rng_integers(1, 1000, 2), flashkv::Error);
}

TEST_CASE("engram hash: the §12 primes and offsets, XOR of products modulo each column's prime", "[engine]") {
  const flashkv::ModelConfig config = flashkv::load_model_config(kData / "configs" / "tiny-v41");
  std::vector<int64_t> map;
  for (int64_t id = 0; id < config.vocab_size; ++id) map.push_back(id % config.engram_compressed_vocab_size);
  const flashkv::runtime::EngramHasher hasher(config, map);
  REQUIRE(hasher.columns() == 6);
  const auto first = hasher.primes(0), second = hasher.primes(1);
  REQUIRE(std::vector<int64_t>(first.begin(), first.end()) ==
          std::vector<int64_t>{1009, 1013, 1019, 1021, 1031, 1033});
  REQUIRE(std::vector<int64_t>(second.begin(), second.end()) ==
          std::vector<int64_t>{1039, 1049, 1051, 1061, 1063, 1069});
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size - 1));
  const std::vector<int32_t> previous = {token(gen), token(gen)};
  const std::vector<int32_t> run = {token(gen), token(gen), token(gen)};
  const std::vector<int64_t> ngrams = hasher.ngram_ids(previous, run);
  const int64_t pad = 2 % config.engram_compressed_vocab_size;
  // the history holds only 2 of the 3 lookbacks: position 0's oldest comes from the pad
  const std::vector<int64_t> expected_first = {map[run[0]], map[previous[1]], map[previous[0]], pad};
  REQUIRE(std::vector<int64_t>(ngrams.begin(), ngrams.begin() + 4) == expected_first);
  const std::vector<int64_t> rows = hasher.table_rows(1, ngrams, 3);
  const auto m = hasher.multipliers(1);
  for (int64_t t = 0; t < 3; ++t) {
    const int64_t* c = ngrams.data() + t * 4;
    const int64_t h2 = (c[0] * m[0]) ^ (c[1] * m[1]);
    const int64_t h3 = h2 ^ (c[2] * m[2]);
    const int64_t h4 = h3 ^ (c[3] * m[3]);
    const int64_t hashes[] = {h2, h2, h3, h3, h4, h4};
    int64_t offset = 0;
    for (int64_t col = 0; col < 6; ++col) {
      REQUIRE(rows[static_cast<size_t>(t * 6 + col)] ==
              hashes[col] % second[static_cast<size_t>(col)] + offset);
      offset += second[static_cast<size_t>(col)];
    }
  }
}

TEST_CASE("window ring: keeps the last capacity rows, reads the window, forgets truncated rows", "[engine]") {
  using flashkv::backend::RecordFormat;
  auto ring = flashkv::runtime::make_window_ring(RecordFormat::kFp32, 2, 0, 5);
  std::vector<float> rows;
  for (int i = 0; i < 7; ++i) rows.insert(rows.end(), {static_cast<float>(i), static_cast<float>(-i)});
  flashkv::runtime::append_window_rows(ring, reinterpret_cast<const uint8_t*>(rows.data()), 0,
                                       7);  // positions 0..6
  std::vector<float> seen;
  std::vector<int64_t> positions;
  flashkv::runtime::window_history(ring, 7, 4, seen, positions);  // a query at 7 with W = 4 reads 4, 5, 6
  REQUIRE(positions == std::vector<int64_t>{4, 5, 6});
  REQUIRE(seen == std::vector<float>{4, -4, 5, -5, 6, -6});
  flashkv::runtime::window_history(ring, 7, 9, seen, positions);  // only 2..6 are still held
  REQUIRE(positions == std::vector<int64_t>{2, 3, 4, 5, 6});
  flashkv::runtime::truncate_window(ring, 5);
  flashkv::runtime::window_history(ring, 5, 4, seen, positions);
  REQUIRE(positions == std::vector<int64_t>{2, 3, 4});
}
