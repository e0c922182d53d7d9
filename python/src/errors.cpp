// flashkv::Error -> the flashkv.Error hierarchy. The classes are plain Python (flashkv/errors.py, so they
// carry docstrings and ordinary Python bases such as ValueError); the package hands them to _register_errors
// at import, keyed by the stable lower-case code name, and this translator raises the one registered for an
// Error's code.
#include <string>
#include <vector>

#include <flashkv/error.hpp>

#include <pybind11/stl.h>

#include "bindings.hpp"

namespace flashkv::python {

namespace {

// Lives as long as the interpreter: a translator may run at any time, including interpreter shutdown, so the
// registry is a strong reference that is never released (a static py::object would be destroyed after
// Python).
PyObject* error_classes = nullptr;

PyObject* class_for(ErrorCode code) {
  if (error_classes != nullptr) {
    const std::string name(error_code_name(code));
    PyObject* found = PyDict_GetItemString(error_classes, name.c_str());  // borrowed
    if (found != nullptr) return found;
  }
  return PyExc_RuntimeError;  // only before registration: the package registers at import
}

void translate(std::exception_ptr thrown) {
  try {
    if (thrown) std::rethrow_exception(thrown);
  } catch (const Error& error) {
    PyErr_SetString(class_for(error.code()), error.what());
  }
}

void register_error_classes(const py::dict& classes) {
  Py_XDECREF(error_classes);
  error_classes = classes.ptr();
  Py_INCREF(error_classes);
}

// Every (value, name) of ErrorCode but kOk, so the package's tests can hold the Python classes complete.
std::vector<std::pair<int, std::string>> error_codes() {
  std::vector<std::pair<int, std::string>> codes;
  for (int value = 1;; ++value) {
    const std::string_view name = error_code_name(static_cast<ErrorCode>(value));
    if (name == "unknown") break;
    codes.emplace_back(value, std::string(name));
  }
  return codes;
}

}  // namespace

void bind_errors(py::module_& m) {
  // Local: a global translator would also turn the errors of other pybind11 modules in the process (an
  // application's own, or the test module) into flashkv exception classes.
  py::register_local_exception_translator(translate);
  m.def("_register_errors", &register_error_classes, py::arg("classes"),
        "Maps error code names ('invalid_argument', ...) to the exception classes raised for them.");
  m.def("_error_codes", &error_codes, "(value, name) of every flashkv error code but ok.");
  // Some codes (device, out_of_memory, internal) cannot be provoked on demand; the package's tests raise
  // every code through this to hold the translation complete.
  m.def(
      "_raise",
      [](int code, const std::string& message) { throw Error(static_cast<ErrorCode>(code), message); },
      py::arg("code"), py::arg("message"), "Raises flashkv::Error(code, message) from C++ (for tests).");
}

}  // namespace flashkv::python
