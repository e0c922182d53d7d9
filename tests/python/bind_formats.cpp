#include <pybind11/pybind11.h>

namespace flashkv::testing {
void bind_formats(pybind11::module_& /*m*/) {}
}  // namespace flashkv::testing
