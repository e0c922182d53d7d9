// libFuzzer target: the safetensors header parser on arbitrary bytes.
//
// The parser must either accept the input with every invariant of safetensors_header.hpp holding, or
// refuse it with flashkv::Error (kInvalidCheckpoint or kUnsupported) naming the input. Anything else is
// a finding: another exception type escaping, a sanitizer report, or a broken invariant (trapped here).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <flashkv/error.hpp>

#include "loader/safetensors_header.hpp"

namespace {

constexpr std::string_view kLabel = "fuzz-input";

void require(bool condition) {
  if (!condition) __builtin_trap();
}

void check_record(const flashkv::loader::TensorRecord& record, std::uint64_t data_offset, std::size_t size) {
  require(!record.name.empty());
  require(record.file_begin >= data_offset && record.file_begin <= record.file_end &&
          record.file_end <= size);
  std::uint64_t count = 1;
  for (const std::int64_t dim : record.shape) {
    require(dim >= 0);
    require(!__builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count));
  }
  require(count == record.element_count);
  require(record.byte_size() == count * flashkv::loader::dtype_size(record.dtype));
}

void check_accepted(const flashkv::loader::SafetensorsHeader& header, std::size_t size) {
  require(header.data_offset >= 8 && header.data_offset <= size);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const auto& record = header.tensors[i];
    check_record(record, header.data_offset, size);
    if (i > 0) require(header.tensors[i - 1].name < record.name);  // sorted, hence unique
    if (record.byte_size() > 0) ranges.emplace_back(record.file_begin, record.file_end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) require(ranges[i - 1].second <= ranges[i].first);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    check_accepted(flashkv::loader::parse_safetensors_header(bytes, kLabel), size);
  } catch (const flashkv::Error& error) {
    require(error.code() == flashkv::ErrorCode::kInvalidCheckpoint ||
            error.code() == flashkv::ErrorCode::kUnsupported);
    require(std::string_view(error.what()).find(kLabel) != std::string_view::npos);
  }
  return 0;
}
