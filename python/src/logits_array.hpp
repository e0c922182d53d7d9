// Session.logits() as a numpy float32 array of vocab_size entries.
//
// The C++ row lives in the session and is replaced (its memory freed) by every call that changes the session,
// so a zero-copy array could dangle. Two forms:
// - a copy (the default): an ordinary writable array, independent of the session, valid forever;
// - a zero-copy view (copy=False): read-only, keeps the Session object alive, and while it (or any array
//   derived from it) lives, every call that changes the session raises flashkv.InvalidArgumentError instead
//   of freeing the memory under it (py_session.hpp). Deleting the arrays lifts the block.
#pragma once

#include <pybind11/numpy.h>

#include "py_session.hpp"

namespace flashkv::python {

// Both need the GIL; `session_object` is the Python object of `session`.
pybind11::array_t<float> logits_copy(PySession& session);
pybind11::array_t<float> logits_view(PySession& session, const pybind11::object& session_object);

}  // namespace flashkv::python
