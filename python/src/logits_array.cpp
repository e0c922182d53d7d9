#include "logits_array.hpp"

#include <cstring>

namespace flashkv::python {

namespace py = pybind11;

namespace {

// The base object of a view: keeps the Session alive and counts the view until numpy frees the last array
// that shares the memory.
struct ViewOwner {
  py::object session_object;
  PySession* session;
};

py::capsule view_owner(PySession& session, const py::object& session_object) {
  session.add_view();
  auto* owner = new ViewOwner{session_object, &session};
  return py::capsule(owner, [](void* pointer) {  // runs with the GIL held, when the last array goes
    auto* dying = static_cast<ViewOwner*>(pointer);
    dying->session->drop_view();
    delete dying;
  });
}

}  // namespace

py::array_t<float> logits_copy(PySession& session) {
  const SessionLock lock(session, Access::kRead, "Session.logits");
  const std::span<const float> row = session.session().logits();
  py::array_t<float> out(static_cast<py::ssize_t>(row.size()));
  std::memcpy(out.mutable_data(), row.data(), row.size_bytes());
  return out;
}

py::array_t<float> logits_view(PySession& session, const py::object& session_object) {
  const SessionLock lock(session, Access::kView, "Session.logits(copy=False)");
  const std::span<const float> row = session.session().logits();
  py::array_t<float> view({static_cast<py::ssize_t>(row.size())}, {static_cast<py::ssize_t>(sizeof(float))},
                          row.data(), view_owner(session, session_object));
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

}  // namespace flashkv::python
