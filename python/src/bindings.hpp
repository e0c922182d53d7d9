// The pieces of the flashkv._flashkv module, one binding function per public object (module.cpp calls them in
// dependency order: a class must be registered before a signature that returns it is called).
#pragma once

#include <pybind11/pybind11.h>

#include "py_session.hpp"

namespace flashkv::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_config(py::module_& m);
void bind_model(py::module_& m);
void bind_kv_handle(py::module_& m);
void bind_generate(py::module_& m);  // TokenStream, GenerateResult
void bind_session(py::module_& m);
void def_session_generate(py::class_<PySession>& session_class);  // Session.generate, called by bind_session
void bind_decode(py::module_& m);
void bind_text(py::module_& m);  // Detokenizer, ChatEvent, ChatParser

}  // namespace flashkv::python
