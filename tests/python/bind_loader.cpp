// Test bindings of the safetensors loader (lib/loader): the reader, the checkpoint, the dtype
// conversions and the tensor inventory, so that pytest can check them against the `safetensors`
// package and numpy. flashkv::Error surfaces as flashkv_testing.LoaderError("<code>: <message>").
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <flashkv/error.hpp>

#include "loader/checkpoint.hpp"
#include "loader/safetensors_file.hpp"
#include "loader/safetensors_header.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

using loader::Checkpoint;
using loader::TensorView;

py::handle loader_error_type;

// Runs `body`, turning flashkv::Error into LoaderError so tests can match code and message.
template <typename Body>
auto translated(Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    const std::string message = fmt::format("{}: {}", error_code_name(error.code()), error.what());
    PyErr_SetString(loader_error_type.ptr(), message.c_str());
    throw py::error_already_set();
  }
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
      .def("files", [](const Checkpoint& checkpoint) {
        std::vector<std::string> paths;
        for (const auto& file : checkpoint.files()) paths.push_back(file->path());
        return paths;
      });
}

}  // namespace

void bind_loader(py::module_& m) {
  static py::exception<Error> loader_error(m, "LoaderError", PyExc_RuntimeError);
  loader_error_type = loader_error;
  bind_reader(m);
  bind_checkpoint(m);
}

}  // namespace flashkv::testing
