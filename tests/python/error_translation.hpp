// translated(error_type, body): runs `body`, turning a flashkv::Error into the Python exception `error_type`
// with the message "<code name>: <message>", so tests can match code and message. For the bind_*.cpp files.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include <flashkv/error.hpp>

namespace flashkv::testing {

template <typename Body>
auto translated(pybind11::handle error_type, Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    const std::string message = fmt::format("{}: {}", error_code_name(error.code()), error.what());
    PyErr_SetString(error_type.ptr(), message.c_str());
    throw pybind11::error_already_set();
  }
}

}  // namespace flashkv::testing
