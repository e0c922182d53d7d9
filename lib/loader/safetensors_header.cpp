#include "loader/safetensors_header.hpp"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include <fmt/ranges.h>
#include <flashkv/error.hpp>
#include <nlohmann/json.hpp>

#include "loader/message_text.hpp"

namespace flashkv::loader {
namespace {

using nlohmann::json;

// A valid header nests no deeper than root object -> tensor entry -> shape array; refusing deeper
// nesting early keeps a hostile header from building a deep DOM.
constexpr int kMaxContainerDepth = 2;
constexpr std::string_view kMetadataKey = "__metadata__";

[[noreturn]] void fail_file(std::string_view file, std::string_view what) {
  fail(ErrorCode::kInvalidCheckpoint, "safetensors file '{}': {}", file, what);
}

[[noreturn]] void fail_tensor(std::string_view file, std::string_view tensor, std::string_view what) {
  fail(ErrorCode::kInvalidCheckpoint, "safetensors file '{}': tensor {}: {}", file, quote_untrusted(tensor),
       what);
}

std::uint64_t read_header_length(std::span<const std::byte> file, std::string_view label) {
  if (file.size() < 8) {
    fail_file(label, fmt::format("file is {} bytes, too short for the 8-byte header length", file.size()));
  }
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<std::uint64_t>(file[i]);
  if (length > kMaxSafetensorsHeaderBytes) {
    fail_file(label, fmt::format("header length {} exceeds the limit of {} bytes", length,
                                 kMaxSafetensorsHeaderBytes));
  }
  if (length > file.size() - 8) {
    fail_file(label,
              fmt::format("header length {} runs past the end of the file ({} bytes)", length, file.size()));
  }
  return length;
}

// A first, DOM-free pass over the header: refuses invalid JSON, nesting deeper than a safetensors header
// has (which bounds what the DOM pass may build) and duplicate keys (which a DOM would silently merge).
// Why not a parser callback on the DOM pass: nlohmann's callback parser rescans the parent object after
// every nested value, which is quadratic in the tensor count (minutes for a 96k-tensor header).
class HeaderStructureCheck {
 public:
  using string_t = json::string_t;

  const std::string& problem() const { return problem_; }

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const string_t&) { return true; }
  bool string(string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    if (depth_ == 1) entry_keys_.clear();
    return open();
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool key(string_t& key) {
    auto& seen = depth_ == 1 ? root_keys_ : entry_keys_;
    if (seen.insert(key).second) return true;
    problem_ = depth_ == 1 ? fmt::format("tensor name {} appears twice", quote_untrusted(key))
                           : fmt::format("key {} appears twice in one entry", quote_untrusted(key));
    return false;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    problem_ = fmt::format("header is not valid JSON: {}", error.what());
    return false;
  }

 private:
  bool open() {
    if (++depth_ <= kMaxContainerDepth + 1) return true;
    problem_ = "header nests JSON deeper than a safetensors header can";
    return false;
  }
  bool close() {
    --depth_;
    return true;
  }

  int depth_ = 0;  // containers open; the root object is depth 1
  std::unordered_set<std::string> root_keys_;
  std::unordered_set<std::string> entry_keys_;
  std::string problem_;
};

json parse_header_json(std::string_view text, std::string_view label) {
  if (text.empty() || text.front() != '{') fail_file(label, "header is not a JSON object");
  HeaderStructureCheck check;
  if (!json::sax_parse(text.begin(), text.end(), &check)) fail_file(label, check.problem());
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& error) {  // not expected after the first pass; kept as a safety net
    fail_file(label, fmt::format("header is not valid JSON: {}", error.what()));
  }
}

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, bool& overflow) {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) overflow = true;
  return product;
}

DType parse_entry_dtype(const json& entry, std::string_view label, const std::string& name) {
  const auto it = entry.find("dtype");
  if (it == entry.end() || !it->is_string()) fail_tensor(label, name, "missing string field 'dtype'");
  const auto& text = it->get_ref<const std::string&>();
  if (const auto dtype = parse_dtype(text)) return *dtype;
  if (is_sub_byte_dtype_name(text)) {
    fail(ErrorCode::kUnsupported, "safetensors file '{}': tensor {}: sub-byte dtype {} is not supported",
         label, quote_untrusted(name), quote_untrusted(text));
  }
  fail_tensor(label, name, fmt::format("unknown dtype {}", quote_untrusted(text)));
}

void parse_entry_shape(const json& entry, std::string_view label, TensorRecord& record) {
  const auto it = entry.find("shape");
  if (it == entry.end() || !it->is_array()) fail_tensor(label, record.name, "missing array field 'shape'");
  std::uint64_t count = 1;
  bool overflow = false;
  for (const json& dim : *it) {
    if (!dim.is_number_unsigned()) {
      fail_tensor(label, record.name,
                  fmt::format("shape entry {} is not a non-negative integer", dim.dump()));
    }
    const auto value = dim.get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail_tensor(label, record.name, fmt::format("shape entry {} is too large", value));
    }
    record.shape.push_back(static_cast<std::int64_t>(value));
    count = checked_mul(count, value, overflow);
  }
  if (overflow)
    fail_tensor(label, record.name, fmt::format("element count of shape {} overflows", it->dump()));
  record.element_count = count;
}

void parse_entry_offsets(const json& entry, std::string_view label, std::uint64_t data_offset,
                         std::uint64_t data_size, TensorRecord& record) {
  const auto it = entry.find("data_offsets");
  if (it == entry.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number_unsigned() ||
      !(*it)[1].is_number_unsigned()) {
    fail_tensor(label, record.name, "field 'data_offsets' must be two non-negative integers [begin, end]");
  }
  const auto begin = (*it)[0].get<std::uint64_t>();
  const auto end = (*it)[1].get<std::uint64_t>();
  if (begin > end)
    fail_tensor(label, record.name, fmt::format("data_offsets [{}, {}] end before begin", begin, end));
  if (end > data_size) {
    fail_tensor(
        label, record.name,
        fmt::format("data_offsets [{}, {}] run past the data region of {} bytes", begin, end, data_size));
  }
  bool overflow = false;
  const std::uint64_t expected = checked_mul(record.element_count, dtype_size(record.dtype), overflow);
  if (overflow || expected != end - begin) {
    fail_tensor(label, record.name,
                fmt::format("data_offsets [{}, {}] hold {} bytes but {} x shape {} needs {}", begin, end,
                            end - begin, dtype_name(record.dtype), record.shape,
                            overflow ? std::string("more than 2^64") : std::to_string(expected)));
  }
  record.file_begin = data_offset + begin;
  record.file_end = data_offset + end;
}

TensorRecord parse_entry(const std::string& name, const json& entry, std::string_view label,
                         std::uint64_t data_offset, std::uint64_t data_size) {
  if (name.empty()) fail_file(label, "a tensor has an empty name");
  if (!entry.is_object()) fail_tensor(label, name, "entry is not a JSON object");
  TensorRecord record;
  record.name = name;
  record.dtype = parse_entry_dtype(entry, label, name);
  parse_entry_shape(entry, label, record);
  parse_entry_offsets(entry, label, data_offset, data_size, record);
  return record;
}

std::map<std::string, std::string> parse_metadata(const json& value, std::string_view label) {
  if (!value.is_object()) fail_file(label, "'__metadata__' is not a JSON object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string())
      fail_file(label, fmt::format("'__metadata__' value of {} is not a string", quote_untrusted(key)));
    metadata.emplace(key, text.get<std::string>());
  }
  return metadata;
}

// Two tensors sharing bytes would alias: writing one (or dequantizing in place) would corrupt the other.
void check_no_overlap(const std::vector<TensorRecord>& tensors, std::string_view label) {
  std::vector<const TensorRecord*> by_offset;
  for (const TensorRecord& record : tensors) {
    if (record.byte_size() > 0) by_offset.push_back(&record);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorRecord* a, const TensorRecord* b) {
    return a->file_begin != b->file_begin ? a->file_begin < b->file_begin : a->file_end < b->file_end;
  });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const TensorRecord& before = *by_offset[i - 1];
    const TensorRecord& after = *by_offset[i];
    if (after.file_begin < before.file_end) {
      fail_tensor(label, after.name, fmt::format("data overlaps tensor {}", quote_untrusted(before.name)));
    }
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file, std::string_view file_label) {
  const std::uint64_t length = read_header_length(file, file_label);
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, length);
  const json root = parse_header_json(text, file_label);
  if (!root.is_object()) fail_file(file_label, "header is not a JSON object");

  SafetensorsHeader header;
  header.data_offset = 8 + length;
  const std::uint64_t data_size = file.size() - header.data_offset;
  for (const auto& [name, entry] : root.items()) {
    if (name == kMetadataKey) {
      header.metadata = parse_metadata(entry, file_label);
    } else {
      header.tensors.push_back(parse_entry(name, entry, file_label, header.data_offset, data_size));
    }
  }
  check_no_overlap(header.tensors, file_label);
  return header;
}

}  // namespace flashkv::loader
