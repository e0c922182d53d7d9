#include "callbacks.hpp"

#include <cstdint>

namespace flashkv::python {

void CallbackErrors::keep_current() {
  if (error_) {
    PyErr_Clear();  // the first error wins; a later one is a consequence of the same cancellation
  } else {
    error_.emplace();  // takes over the error indicator
  }
}

void CallbackErrors::keep(py::error_already_set&& error) {
  if (!error_) error_.emplace(std::move(error));
}

void CallbackErrors::rethrow_if_any() {
  if (!error_) return;
  py::error_already_set error = std::move(*error_);
  error_.reset();
  throw error;
}

namespace {

// Calls `callable(args...)` with the GIL; true to continue. Polls signals first (Ctrl-C raises here).
template <typename... Args>
bool call_python(const py::object& callable, CallbackErrors& errors, Args... args) {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    errors.keep_current();
    return false;
  }
  if (callable.is_none()) return true;
  try {
    const py::object answer = callable(args...);
    if (answer.is_none()) return true;
    const int truth = PyObject_IsTrue(answer.ptr());
    if (truth < 0) {
      errors.keep_current();
      return false;
    }
    return truth != 0;
  } catch (py::error_already_set& error) {
    errors.keep(std::move(error));
    return false;
  }
}

}  // namespace

ProgressCallback progress_callback(const py::object& callable, CallbackErrors& errors) {
  return [&callable, &errors](int64_t done, int64_t total) {
    return call_python(callable, errors, done, total);
  };
}

TokenCallback token_callback(const py::object& callable, CallbackErrors& errors) {
  return [&callable, &errors](int32_t token) { return call_python(callable, errors, token); };
}

}  // namespace flashkv::python
