// The safetensors header parser, file reader and checkpoint on files built here byte by byte (the oracle is
// the builder: it places random bytes at known offsets), plus the refusals that need no Python.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "loader/checkpoint.hpp"
#include "loader/dtype_convert.hpp"
#include "loader/message_text.hpp"
#include "loader/safetensors_file.hpp"
#include "loader/safetensors_header.hpp"

namespace {

namespace fs = std::filesystem;
using flashkv::Error;
using flashkv::ErrorCode;
using namespace flashkv::loader;

struct Built {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};

std::uint64_t random_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

// A safetensors file holding `tensors` back to back, header padded to 8 bytes like the reference writer.
std::string build_file(const std::vector<Built>& tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const Built& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i)
    file[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  return file + text + data;
}

std::vector<Built> random_tensors(std::mt19937_64& rng, int count, const std::string& prefix) {
  const std::vector<std::pair<std::string, int>> dtypes = {
      {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"U8", 1}, {"I8", 1}, {"I64", 8}};
  std::vector<Built> tensors;
  for (int i = 0; i < count; ++i) {
    const auto& [dtype, size] = dtypes[static_cast<size_t>(i) % dtypes.size()];
    Built t{prefix + std::to_string(i), dtype, {}, {}};
    std::int64_t elements = 1;
    for (std::uint64_t rank = rng() % 4; rank > 0; --rank) {
      t.shape.push_back(static_cast<std::int64_t>(1 + rng() % 7));
      elements *= t.shape.back();
    }
    for (std::int64_t b = 0; b < elements * size; ++b) t.bytes.push_back(static_cast<char>(rng() & 0xFF));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::span<const std::byte> as_span(const std::string& file) {
  return std::as_bytes(std::span(file.data(), file.size()));
}

std::string error_of(const std::string& file) {
  try {
    parse_safetensors_header(as_span(file), "test.safetensors");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidCheckpoint);
    return error.what();
  }
  FAIL("parse_safetensors_header accepted a malformed file");
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fresh directory under the system temp folder, removed at scope exit.
class TempDir {
 public:
  explicit TempDir(std::uint64_t seed)
      : path_(fs::temp_directory_path() / ("flashkv-loader-" + std::to_string(seed))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::binary) << content;
    return path_ / name;
  }

 private:
  fs::path path_;
};

}  // namespace

TEST_CASE("the header parser finds every tensor where the builder put it") {
  const std::uint64_t seed = random_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const auto tensors = random_tensors(rng, 24, "t.");
  const std::string file = build_file(tensors);

  const SafetensorsHeader header = parse_safetensors_header(as_span(file), "mem");
  CHECK(header.metadata.at("format") == "pt");
  REQUIRE(header.tensors.size() == tensors.size());
  for (const Built& t : tensors) {
    const auto it = std::find_if(header.tensors.begin(), header.tensors.end(),
                                 [&](const TensorRecord& r) { return r.name == t.name; });
    REQUIRE(it != header.tensors.end());
    CHECK(dtype_name(it->dtype) == t.dtype);
    CHECK(it->shape == t.shape);
    CHECK(file.substr(it->file_begin, it->byte_size()) == t.bytes);
  }
}

TEST_CASE("the header parser refuses malformed files, naming the file and the tensor") {
  const std::string valid = build_file({{"a", "F32", {2}, std::string(8, 'x')}});
  CHECK(contains(error_of(""), "too short"));
  CHECK(contains(error_of(valid.substr(0, valid.size() - 1)),
                 "'a': data_offsets [0, 8] run past the data region"));
  CHECK(contains(error_of(build_file({{"a", "F32", {3}, std::string(8, 'x')}})),
                 "'a': data_offsets [0, 8] hold 8 bytes but F32 x shape [3] needs 12"));
  CHECK(contains(error_of(build_file({{"a", "Q7", {2}, std::string(8, 'x')}})), "'a': unknown dtype 'Q7'"));
  CHECK(contains(error_of(build_file({{"a", "F32", {-2}, std::string(8, 'x')}})),
                 "'a': shape entry -2 is not a non-negative integer"));
  CHECK(contains(error_of(build_file({{"a", "U8", {1LL << 40, 1LL << 40}, ""}})),
                 "'a': element count of shape"));
  std::string long_header = valid;
  long_header[6] = 1;  // header length 2^48
  CHECK(contains(error_of(long_header), "exceeds the limit"));
  const std::string message = error_of(build_file({{"a", "F32", {-2}, ""}}));
  CHECK(contains(message, "safetensors file 'test.safetensors'"));
}

TEST_CASE("a sub-byte dtype is refused as unsupported") {
  const std::string file = build_file({{"w", "F4", {2}, "x"}});
  REQUIRE_THROWS_WITH(parse_safetensors_header(as_span(file), "f.safetensors"),
                      "safetensors file 'f.safetensors': tensor 'w': sub-byte dtype 'F4' is not supported");
}

TEST_CASE("SafetensorsFile maps a file and hands out views into it") {
  const std::uint64_t seed = random_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const TempDir dir(seed);
  const auto tensors = random_tensors(rng, 10, "w.");
  const fs::path path = dir.write("model.safetensors", build_file(tensors));

  SafetensorsFile opened = SafetensorsFile::open(path);
  const SafetensorsFile file = std::move(opened);  // views must survive a move
  for (const Built& t : tensors) {
    const TensorView view = file.tensor(t.name);
    CHECK(view.name == t.name);
    CHECK(std::string(reinterpret_cast<const char*>(view.bytes.data()), view.bytes.size()) == t.bytes);
    CHECK(view.file == path.string());
  }
  REQUIRE_THROWS_WITH(file.tensor("nope"), "tensor 'nope' not found in '" + path.string() + "'");
}

TEST_CASE("OS failures are kIo errors naming the file") {
  const std::uint64_t seed = random_seed();
  const TempDir dir(seed);
  const fs::path missing = dir.path() / "missing.safetensors";
  try {
    SafetensorsFile::open(missing);
    FAIL("opened a missing file");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kIo);
    CHECK(contains(error.what(), missing.string()));
  }
  REQUIRE_THROWS_AS(SafetensorsFile::open(dir.path()), Error);
}

TEST_CASE("Checkpoint refuses a tensor stored in two files, naming both") {
  const std::uint64_t seed = random_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const TempDir dir(seed);
  dir.write("a.safetensors", build_file(random_tensors(rng, 3, "x.")));
  dir.write("b.safetensors", build_file(random_tensors(rng, 2, "x.")));
  try {
    Checkpoint::open(dir.path());
    FAIL("opened a checkpoint with a duplicate tensor");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidCheckpoint);
    CHECK(contains(error.what(), "tensor 'x.0' is present in two files"));
    CHECK(contains(error.what(), "a.safetensors"));
    CHECK(contains(error.what(), "b.safetensors"));
  }
}

TEST_CASE("Checkpoint refuses index entries that leave the directory") {
  const std::uint64_t seed = random_seed();
  const TempDir dir(seed);
  dir.write("model.safetensors.index.json", R"({"weight_map": {"w": "../model.safetensors"}})");
  REQUIRE_THROWS_WITH(
      Checkpoint::open(dir.path()),
      "index '" + (dir.path() / "model.safetensors.index.json").string() +
          "': tensor 'w' maps to shard '../model.safetensors' outside the checkpoint directory");
}

TEST_CASE("f16_to_float decodes hand-checked IEEE half codes exactly") {
  CHECK(f16_to_float(0x3C00) == 1.0f);
  CHECK(f16_to_float(0xC000) == -2.0f);
  CHECK(f16_to_float(0x7BFF) == 65504.0f);
  CHECK(f16_to_float(0x0400) == 0x1p-14f);  // smallest normal
  CHECK(f16_to_float(0x0001) == 0x1p-24f);  // smallest subnormal
  CHECK(f16_to_float(0x03FF) == 1023 * 0x1p-24f);
  CHECK(f16_to_float(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f16_to_float(0x7E00)));
  CHECK(std::signbit(f16_to_float(0x8000)));
}

TEST_CASE("untrusted names are escaped and cut in messages") {
  CHECK(quote_untrusted("layers.0.w") == "'layers.0.w'");
  CHECK(quote_untrusted(std::string("a\nb\x01", 4)) == "'a\\x0ab\\x01'");
  CHECK(quote_untrusted(std::string(500, 'n')).size() == 160 + 5);
}
