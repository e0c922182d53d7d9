#include "loader/tensor_inventory.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

#include <fmt/ranges.h>
#include <flashkv/error.hpp>

#include "loader/message_text.hpp"

namespace flashkv::loader {
namespace {

using Shape = std::vector<std::int64_t>;

constexpr std::array<std::string_view, 4> kUncheckedPrefixes = {"mtp.", "vision.", "aligner.", "image_"};
constexpr std::size_t kProblemsInError = 8;

bool is_float_dtype(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

bool is_scale_dtype(DType dtype) {
  return dtype == DType::kF8E8M0 || dtype == DType::kU8 || dtype == DType::kF32;
}

bool is_unchecked(std::string_view name) {
  return std::any_of(kUncheckedPrefixes.begin(), kUncheckedPrefixes.end(),
                     [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; });
}

Shape shape_of(const TensorView& view) {
  return {view.shape.begin(), view.shape.end()};
}

// Checks one expected tensor (and its scale) and appends what is wrong.
class TensorChecker {
 public:
  TensorChecker(const Checkpoint& checkpoint, std::vector<CheckpointProblem>& problems)
      : checkpoint_(checkpoint), problems_(problems) {}

  void check(const ExpectedTensor& expected) {
    const auto weight = checkpoint_.find(expected.name);
    if (!weight) {
      if (expected.required) report(expected.name, "missing");
      return;
    }
    if (expected.storage == StorageKind::kIntegerTable) {
      check_integer_table(expected, *weight);
    } else if (expected.storage == StorageKind::kUnquantized || is_float_dtype(weight->dtype)) {
      check_unquantized(expected, *weight);
    } else {
      check_quantized(expected, *weight);
    }
  }

 private:
  void report(const std::string& tensor, std::string what) { problems_.push_back({tensor, std::move(what)}); }

  void check_shape(const std::string& name, const TensorView& view, const Shape& expected) {
    const Shape actual = shape_of(view);
    if (actual != expected) report(name, fmt::format("shape {}, expected {}", actual, expected));
  }

  void check_integer_table(const ExpectedTensor& expected, const TensorView& weight) {
    if (weight.dtype != DType::kI32 && weight.dtype != DType::kI64) {
      report(expected.name, fmt::format("dtype {}, expected I32 or I64", dtype_name(weight.dtype)));
    }
    check_shape(expected.name, weight, expected.shape);
  }

  void check_unquantized(const ExpectedTensor& expected, const TensorView& weight) {
    if (!is_float_dtype(weight.dtype)) {
      report(expected.name, fmt::format("dtype {}, expected BF16, F16 or F32", dtype_name(weight.dtype)));
    }
    check_shape(expected.name, weight, expected.shape);
    if (has_scale(expected.storage) && checkpoint_.find(scale_name(expected.name))) {
      report(scale_name(expected.name), fmt::format("present, but {} is stored unquantized as {}",
                                                    expected.name, dtype_name(weight.dtype)));
    }
  }

  void check_quantized(const ExpectedTensor& expected, const TensorView& weight) {
    const bool packed = expected.storage == StorageKind::kMxfp4;
    const bool dtype_ok =
        packed ? (weight.dtype == DType::kI8 || weight.dtype == DType::kU8) : weight.dtype == DType::kF8E4M3;
    if (!dtype_ok) {
      report(expected.name,
             fmt::format("dtype {}, expected {} (or BF16, F16 or F32 unquantized)", dtype_name(weight.dtype),
                         packed ? "I8 or U8 packed E2M1" : "F8_E4M3"));
    }
    check_shape(expected.name, weight, stored_weight_shape(expected));
    const std::string scale = scale_name(expected.name);
    const auto scale_view = checkpoint_.find(scale);
    if (!scale_view) {
      report(scale, fmt::format("missing (the E8M0 scales of {}, stored as {})", expected.name,
                                dtype_name(weight.dtype)));
      return;
    }
    if (!is_scale_dtype(scale_view->dtype)) {
      report(scale, fmt::format("dtype {}, expected F8_E8M0, U8 or F32", dtype_name(scale_view->dtype)));
    }
    check_shape(scale, *scale_view, scale_shape(expected));
  }

  const Checkpoint& checkpoint_;
  std::vector<CheckpointProblem>& problems_;
};

}  // namespace

std::vector<CheckpointProblem> check_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config,
                                                const LayerPlan& plan) {
  std::vector<CheckpointProblem> problems;
  std::set<std::string, std::less<>> accounted;
  TensorChecker checker(checkpoint, problems);
  for (const ExpectedTensor& expected : expected_tensors(config, plan)) {
    checker.check(expected);
    accounted.insert(expected.name);
    if (has_scale(expected.storage)) accounted.insert(scale_name(expected.name));
  }
  for (const TensorView& view : checkpoint.tensors()) {
    if (!is_unchecked(view.name) && accounted.find(view.name) == accounted.end()) {
      problems.push_back({std::string(view.name), "unexpected tensor (not part of this config)"});
    }
  }
  std::stable_sort(
      problems.begin(), problems.end(),
      [](const CheckpointProblem& a, const CheckpointProblem& b) { return a.tensor < b.tensor; });
  return problems;
}

void require_valid_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config,
                              const LayerPlan& plan) {
  const auto problems = check_checkpoint(checkpoint, config, plan);
  if (problems.empty()) return;
  std::string listed;
  for (std::size_t i = 0; i < problems.size() && i < kProblemsInError; ++i) {
    listed += fmt::format("\n  {}: {}", quote_untrusted(problems[i].tensor), problems[i].what);
  }
  if (problems.size() > kProblemsInError)
    listed += fmt::format("\n  ... and {} more", problems.size() - kProblemsInError);
  fail(ErrorCode::kInvalidCheckpoint, "checkpoint '{}' does not match its config ({} problem{}):{}",
       checkpoint.root(), problems.size(), problems.size() == 1 ? "" : "s", listed);
}

std::vector<TensorRow> describe_checkpoint(const Checkpoint& checkpoint) {
  std::vector<TensorRow> rows;
  rows.reserve(checkpoint.tensor_count());
  for (const TensorView& view : checkpoint.tensors()) {
    rows.push_back(TensorRow{std::string(view.name), std::string(dtype_name(view.dtype)), shape_of(view),
                             view.bytes.size(), std::string(view.file)});
  }
  return rows;
}

}  // namespace flashkv::loader
