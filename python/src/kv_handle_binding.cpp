// flashkv.KVHandle: an immutable snapshot of a session's KV state (Session.kv()), restorable into any session
// of the same Model. Handles are read-only, so they need no lock and may be shared between threads.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <flashkv/kv_handle.hpp>

#include "bindings.hpp"

namespace flashkv::python {

void bind_kv_handle(py::module_& m) {
  py::class_<KVHandle>(m, "KVHandle",
                       "An immutable snapshot of a session's KV state; made by Session.kv(), used by "
                       "Session.restore().")
      .def("fork", &KVHandle::fork, "Another handle to the same snapshot (no copy).")
      .def_property_readonly(
          "tokens",
          [](const KVHandle& handle) {
            const std::span<const int32_t> held = handle.tokens();
            return std::vector<int32_t>(held.begin(), held.end());
          },
          "The token ids of the snapshot, oldest first (a copy).")
      .def_property_readonly("bytes", &KVHandle::bytes, "Bytes of KV state the snapshot holds.")
      .def_property_readonly("model", &KVHandle::model, "The Model the snapshot belongs to.")
      .def("__repr__", [](const KVHandle& handle) {
        return fmt::format("<flashkv.KVHandle of {} tokens, {} bytes>", handle.tokens().size(),
                           handle.bytes());
      });
}

}  // namespace flashkv::python
