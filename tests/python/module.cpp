// flashkv_testing: test-only Python bindings of flashkv internals. Each bind_*.cpp file in this folder
// defines one bind_<mechanism>(module) function; add it to the list below.
#include <pybind11/pybind11.h>

namespace flashkv::testing {
void bind_formats(pybind11::module_& m);
void bind_loader(pybind11::module_& m);
void bind_sampling(pybind11::module_& m);
void bind_engine(pybind11::module_& m);
void bind_tokenizer(pybind11::module_& m);
void bind_chat(pybind11::module_& m);
void bind_v4_record(pybind11::module_& m);
}  // namespace flashkv::testing

PYBIND11_MODULE(flashkv_testing, m) {
  m.doc() = "flashkv internals exposed for oracle tests (not a public API)";
  flashkv::testing::bind_formats(m);
  flashkv::testing::bind_loader(m);
  flashkv::testing::bind_sampling(m);
  flashkv::testing::bind_engine(m);
  flashkv::testing::bind_tokenizer(m);
  flashkv::testing::bind_chat(m);
  flashkv::testing::bind_v4_record(m);
}
