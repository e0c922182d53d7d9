// Test bindings of the safetensors loader (lib/loader): the reader, the checkpoint, the dtype
// conversions and the tensor inventory, so that pytest can check them against the `safetensors`
// package and numpy. flashkv::Error surfaces as flashkv_testing.LoaderError("<code>: <message>").
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <flashkv/config.hpp>
#include <flashkv/error.hpp>

#include "error_translation.hpp"
#include "loader/checkpoint.hpp"
#include "loader/dtype_convert.hpp"
#include "loader/safetensors_file.hpp"
#include "loader/safetensors_header.hpp"
#include "loader/tensor_inventory.hpp"
#include "loader/weight_reader.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

using loader::Checkpoint;
using loader::TensorView;

py::handle loader_error_type;

// Runs `body`, turning flashkv::Error into LoaderError so tests can match code and message.
template <typename Body>
auto translated(Body&& body) {
  return testing::translated(loader_error_type, std::forward<Body>(body));
}

py::dict record_dict(std::string_view name, loader::DType dtype, std::span<const int64_t> shape,
                     std::uint64_t bytes) {
  py::dict row;
  row["name"] = std::string(name);
  row["dtype"] = std::string(loader::dtype_name(dtype));
  row["shape"] = std::vector<int64_t>(shape.begin(), shape.end());
  row["bytes"] = bytes;
  return row;
}

py::list header_records(const loader::SafetensorsHeader& header) {
  py::list rows;
  for (const auto& record : header.tensors) {
    py::dict row = record_dict(record.name, record.dtype, record.shape, record.byte_size());
    row["begin"] = record.file_begin;
    row["end"] = record.file_end;
    rows.append(row);
  }
  return rows;
}

py::bytes view_bytes(const TensorView& view) {
  return py::bytes(reinterpret_cast<const char*>(view.bytes.data()), view.bytes.size());
}

// Checkpoint.<reader>(name): what a loader byte reader makes of the named tensor, as Python bytes.
template <auto reader>
py::bytes tensor_bytes(const Checkpoint& checkpoint, const std::string& name) {
  return translated([&] {
    const auto bytes = reader(checkpoint.tensor(name));
    return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  });
}

void bind_reader(py::module_& m) {
  m.def(
      "parse_safetensors_header",
      [](py::bytes data, const std::string& label) {
        const std::string buffer = data;
        return translated([&] {
          const auto bytes = std::as_bytes(std::span(buffer.data(), buffer.size()));
          return header_records(loader::parse_safetensors_header(bytes, label));
        });
      },
      "Parses a whole safetensors file held in memory; returns its tensor records sorted by name.");

  m.def(
      "safetensors_records",
      [](const std::string& path) {
        return translated([&] {
          const auto file = loader::SafetensorsFile::open(path);
          py::dict result;
          result["tensors"] = header_records(
              loader::SafetensorsHeader{0, {file.records().begin(), file.records().end()}, file.metadata()});
          result["metadata"] = file.metadata();
          return result;
        });
      },
      "Opens one file with the mmap reader; returns {'tensors': [...], 'metadata': {...}}.");
}

void bind_checkpoint(py::module_& m) {
  py::class_<Checkpoint>(m, "Checkpoint")
      .def(py::init([](const std::string& path) {
             return translated([&] { return std::make_unique<Checkpoint>(Checkpoint::open(path)); });
           }),
           py::arg("path"))
      .def("tensors",
           [](const Checkpoint& checkpoint) {
             py::list rows;
             for (const TensorView& view : checkpoint.tensors()) {
               py::dict row = record_dict(view.name, view.dtype, view.shape, view.bytes.size());
               row["file"] = std::string(view.file);
               rows.append(row);
             }
             return rows;
           })
      .def("tensor_bytes",
           [](const Checkpoint& checkpoint, const std::string& name) {
             return translated([&] { return view_bytes(checkpoint.tensor(name)); });
           })
      .def("read_float32",
           [](const Checkpoint& checkpoint, const std::string& name) {
             return translated([&] {
               const TensorView view = checkpoint.tensor(name);
               py::array_t<float> out(std::vector<py::ssize_t>(view.shape.begin(), view.shape.end()));
               loader::read_float32(view,
                                    std::span<float>(out.mutable_data(), static_cast<size_t>(out.size())));
               return out;
             });
           })
      .def("read_e8m0_codes", &tensor_bytes<loader::read_e8m0_codes>)
      .def("e8m0_code_bytes", &tensor_bytes<loader::e8m0_code_bytes>)
      .def("packed_e2m1_bytes", &tensor_bytes<loader::packed_e2m1_bytes>)
      .def("e4m3_codes", &tensor_bytes<loader::e4m3_codes>)
      .def("files", [](const Checkpoint& checkpoint) {
        std::vector<std::string> paths;
        for (const auto& file : checkpoint.files()) paths.push_back(file->path());
        return paths;
      });
}

std::string_view storage_name(loader::StorageKind kind) {
  switch (kind) {
    case loader::StorageKind::kUnquantized:
      return "unquantized";
    case loader::StorageKind::kFp8Block32:
      return "fp8_block32";
    case loader::StorageKind::kFp8Block128:
      return "fp8_block128";
    case loader::StorageKind::kIntegerTable:
      return "integer_table";
    case loader::StorageKind::kMxfp4:
      return "mxfp4";
    case loader::StorageKind::kFp8Rows32:
      return "fp8_rows32";
  }
  return "?";
}

void bind_inventory(py::module_& m) {
  m.def(
      "expected_tensors",
      [](const std::string& config_path) {
        return translated([&] {
          const ModelConfig config = load_model_config(config_path);
          py::list rows;
          for (const auto& expected : loader::expected_tensors(config, make_layer_plan(config))) {
            py::dict row;
            row["name"] = expected.name;
            row["shape"] = expected.shape;
            row["storage"] = std::string(storage_name(expected.storage));
            row["required"] = expected.required;
            row["stored_shape"] = loader::stored_weight_shape(expected);
            row["scale_shape"] = loader::scale_shape(expected);
            rows.append(row);
          }
          return rows;
        });
      },
      "The tensors a checkpoint of the config at `config_path` must hold.");

  m.def(
      "check_checkpoint",
      [](const std::string& checkpoint_path, const std::string& config_path) {
        return translated([&] {
          const ModelConfig config = load_model_config(config_path);
          std::vector<std::pair<std::string, std::string>> problems;
          for (auto& problem :
               loader::check_checkpoint(Checkpoint::open(checkpoint_path), config, make_layer_plan(config))) {
            problems.emplace_back(std::move(problem.tensor), std::move(problem.what));
          }
          return problems;
        });
      },
      "[(tensor, problem)] of the checkpoint against the config; empty when it fits.");

  m.def("require_valid_checkpoint", [](const std::string& checkpoint_path, const std::string& config_path) {
    translated([&] {
      const ModelConfig config = load_model_config(config_path);
      loader::require_valid_checkpoint(Checkpoint::open(checkpoint_path), config, make_layer_plan(config));
      return 0;
    });
  });

  m.def(
      "read_all_weights",
      [](const std::string& checkpoint_path, const std::string& config_path) {
        return translated([&] {
          const ModelConfig config = load_model_config(config_path);
          const Checkpoint checkpoint = Checkpoint::open(checkpoint_path);
          py::dict weights;
          for (const auto& expected : loader::expected_tensors(config, make_layer_plan(config))) {
            if (!checkpoint.find(expected.name)) continue;  // optional tensors
            // V4 ffn.gate.tid2eid: expert ids, not floats.
            if (expected.storage == loader::StorageKind::kIntegerTable) {
              const std::vector<int32_t> ids =
                  loader::read_index_table(checkpoint, expected, config.n_routed_experts);
              py::array_t<int32_t> table(
                  std::vector<py::ssize_t>(expected.shape.begin(), expected.shape.end()));
              std::copy(ids.begin(), ids.end(), table.mutable_data());
              weights[py::str(expected.name)] = table;
              continue;
            }
            py::array_t<float> out(std::vector<py::ssize_t>(expected.shape.begin(), expected.shape.end()));
            loader::read_weight_float32(
                checkpoint, expected, std::span<float>(out.mutable_data(), static_cast<size_t>(out.size())));
            weights[py::str(expected.name)] = out;
          }
          return weights;
        });
      },
      "{name: fp32 array} of every expected weight present, dequantized by read_weight_float32 (int32 for an "
      "integer table: read_index_table).");

  m.def("describe_checkpoint", [](const std::string& checkpoint_path) {
    return translated([&] {
      py::list rows;
      for (const auto& row : loader::describe_checkpoint(Checkpoint::open(checkpoint_path))) {
        py::dict entry = record_dict(row.name, *loader::parse_dtype(row.dtype), row.shape, row.bytes);
        entry["file"] = row.file;
        rows.append(entry);
      }
      return rows;
    });
  });
}

}  // namespace

void bind_loader(py::module_& m) {
  static py::exception<Error> loader_error(m, "LoaderError", PyExc_RuntimeError);
  loader_error_type = loader_error;
  bind_reader(m);
  bind_checkpoint(m);
  bind_inventory(m);
}

}  // namespace flashkv::testing
