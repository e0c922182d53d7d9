#include "token_ids.hpp"

#include <limits>
#include <string>

#include <pybind11/numpy.h>

#include <flashkv/error.hpp>

namespace flashkv::python {

namespace py = pybind11;

namespace {

std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>();
}

py::array as_array(py::handle ids, std::string_view what) {
  try {
    return py::module_::import("numpy").attr("asarray")(ids);
  } catch (py::error_already_set&) {
    fail(ErrorCode::kInvalidArgument, "{}: expected a sequence of token ids (ints), got {}", what,
         type_name(ids));
  }
}

}  // namespace

std::vector<int32_t> to_token_ids(py::handle ids, std::string_view what) {
  if (py::isinstance<py::str>(ids) || py::isinstance<py::bytes>(ids)) {
    fail(ErrorCode::kInvalidArgument, "{}: expected a sequence of token ids (ints), got {}", what,
         type_name(ids));
  }
  const py::array array = as_array(ids, what);
  if (array.ndim() != 1) {
    fail(ErrorCode::kInvalidArgument, "{}: expected a 1-D sequence of token ids, got {} dimensions", what,
         array.ndim());
  }
  if (array.size() == 0) return {};
  const char kind = array.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    fail(ErrorCode::kInvalidArgument, "{}: token ids must be integers, got values of dtype {}", what,
         py::str(array.dtype()).cast<std::string>());
  }
  if (kind == 'u' && array.itemsize() == 8) {
    const auto unsigned_array = py::array_t<uint64_t>::ensure(array);
    const auto unsigned_ids = unsigned_array.unchecked<1>();
    for (py::ssize_t i = 0; i < unsigned_ids.shape(0); ++i) {
      if (unsigned_ids(i) > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        fail(ErrorCode::kInvalidArgument, "{}: token id {} at position {} does not fit in int32", what,
             unsigned_ids(i), i);
      }
    }
  }
  // int64 holds every value of every integer dtype but the uint64 ones refused above.
  const auto wide_array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  const auto wide = wide_array.unchecked<1>();  // points into wide_array, which must outlive it
  std::vector<int32_t> out(static_cast<size_t>(wide.shape(0)));
  for (py::ssize_t i = 0; i < wide.shape(0); ++i) {
    const int64_t id = wide(i);
    if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max()) {
      fail(ErrorCode::kInvalidArgument, "{}: token id {} at position {} does not fit in int32", what, id, i);
    }
    out[static_cast<size_t>(i)] = static_cast<int32_t>(id);
  }
  return out;
}

}  // namespace flashkv::python
