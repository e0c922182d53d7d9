// Python callables as C++ API callbacks, and running C++ compute with the GIL released.
//
// The C++ API calls its callbacks on the computing thread, which holds no GIL: each wrapper takes the GIL for
// the Python call only. A Python callback asks to stop by returning a false value other than None (None, the
// result of a function without `return`, continues). When it raises instead, the exception is kept, the C++
// call is cancelled through the callback's false return, and the original exception reaches the caller in
// place of flashkv.CancelledError. The wrappers also poll for signals, so Ctrl-C interrupts a long prefill or
// generation between chunks and steps (KeyboardInterrupt) even when no Python callback is given.
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

#include <pybind11/pybind11.h>

#include <flashkv/error.hpp>
#include <flashkv/generate.hpp>

namespace flashkv::python {

namespace py = pybind11;

// The first Python exception raised inside one C++ call's callbacks.
class CallbackErrors {
 public:
  // Keeps the Python error now set (the GIL is held), unless one is kept already.
  void keep_current();
  void keep(py::error_already_set&& error);
  // Raises the kept exception, if any. Needs the GIL.
  void rethrow_if_any();

 private:
  std::optional<py::error_already_set> error_;
};

// `callable(done, total)` or, when callable is None, nothing but the signal poll.
ProgressCallback progress_callback(const py::object& callable, CallbackErrors& errors);
// `callable(token)` or, when callable is None, nothing but the signal poll.
TokenCallback token_callback(const py::object& callable, CallbackErrors& errors);

// Runs compute() with the GIL released (the caller holds it), then raises a Python exception its callbacks
// kept, in preference to the flashkv::Error (kCancelled) that the cancellation caused.
template <typename Compute>
decltype(auto) without_gil(CallbackErrors& errors, Compute&& compute) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Compute>>) {
      {
        py::gil_scoped_release released;
        std::forward<Compute>(compute)();
      }
      errors.rethrow_if_any();
    } else {
      auto result = [&] {
        py::gil_scoped_release released;
        return std::forward<Compute>(compute)();
      }();
      errors.rethrow_if_any();
      return result;
    }
  } catch (const Error&) {
    errors.rethrow_if_any();
    throw;
  }
}

// For compute without Python callbacks.
template <typename Compute>
decltype(auto) without_gil(Compute&& compute) {
  py::gil_scoped_release released;
  return std::forward<Compute>(compute)();
}

}  // namespace flashkv::python
