// flashkv._flashkv: the compiled half of the `flashkv` Python package. Users import `flashkv`, whose
// __init__.py re-exports these classes and registers the flashkv.Error hierarchy with bind_errors'
// translator.
#include "bindings.hpp"

PYBIND11_MODULE(_flashkv, m) {
  m.doc() = "flashkv C++ API bindings (import the `flashkv` package, not this module)";
  m.attr("__version__") = FLASHKV_VERSION_STRING;
  flashkv::python::bind_errors(m);
  flashkv::python::bind_config(m);
  flashkv::python::bind_model(m);
  flashkv::python::bind_kv_handle(m);
  flashkv::python::bind_generate(m);
  flashkv::python::bind_session(m);
  flashkv::python::bind_decode(m);
  flashkv::python::bind_text(m);
}
