// flashkv.Detokenizer and flashkv.ChatParser: streaming text out of generated tokens, and the V4.1 output
// parser (reasoning, content, tool calls) over it; Session.chat (python/flashkv/chat.py) combines them.
// The classes are module-local: pybind11 registers C++ types process-wide, and the test module
// flashkv_testing binds flashkv::Detokenizer too (both are loaded in one pytest run).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <flashkv/chat.hpp>
#include <flashkv/model.hpp>
#include <flashkv/tokenizer.hpp>

#include "bindings.hpp"

namespace flashkv::python {

namespace {

const char* chat_event_kind(ChatEvent::Kind kind) {
  switch (kind) {
    case ChatEvent::Kind::kReasoning:
      return "reasoning";
    case ChatEvent::Kind::kToolCall:
      return "tool_call";
    case ChatEvent::Kind::kContent:
      break;
  }
  return "content";
}

py::dict tool_call_dict(const ChatToolCall& call) {
  py::dict d;
  d["id"] = call.id;
  d["name"] = call.name;
  d["arguments"] = call.arguments;
  return d;
}

py::list chat_events(const std::vector<ChatEvent>& events) {
  py::list out;
  for (const ChatEvent& e : events) out.append(py::cast(e));
  return out;
}

}  // namespace

void bind_text(py::module_& m) {
  py::class_<Detokenizer>(m, "Detokenizer", py::module_local(),
                          "Streaming text of generated token ids: push(id) returns only whole characters.")
      .def(py::init([](const Model& model, bool skip_special) {
             return Detokenizer(model.tokenizer(), skip_special);
           }),
           py::arg("model"), py::kw_only(), py::arg("skip_special") = true)
      .def("push", py::overload_cast<int32_t>(&Detokenizer::push), py::arg("id"),
           "The text completed by `id` (often empty).")
      .def("flush", &Detokenizer::flush, "The held bytes (as U+FFFD) at the end of a stream.");

  py::class_<ChatEvent>(m, "ChatEvent", py::module_local(),
                        "A piece of parsed output: kind 'reasoning', 'content' or 'tool_call'.")
      .def_property_readonly("kind", [](const ChatEvent& e) { return chat_event_kind(e.kind); })
      .def_readonly("text", &ChatEvent::text, "The text piece ('' for a tool call).")
      .def_property_readonly(
          "tool_call",
          [](const ChatEvent& e) -> py::object {
            if (e.kind != ChatEvent::Kind::kToolCall) return py::none();
            return tool_call_dict(e.tool_call);
          },
          "{'id', 'name', 'arguments' (JSON text)} for a tool call, else None.")
      .def("__repr__", [](const ChatEvent& e) {
        if (e.kind == ChatEvent::Kind::kToolCall) {
          return fmt::format("ChatEvent('tool_call', {}, {})", e.tool_call.name, e.tool_call.arguments);
        }
        return fmt::format("ChatEvent('{}', {})", chat_event_kind(e.kind),
                           py::repr(py::str(e.text)).cast<std::string>());
      });

  py::class_<ChatStreamParser>(
      m, "ChatParser", py::module_local(),
      "Parses generated V4.1 text, fed in chunks, into reasoning, content and tool calls.")
      .def(py::init([](bool thinking, bool parse_tool_calls, bool starts_in_tool_calls) {
             return ChatStreamParser(ChatParseOptions{thinking, parse_tool_calls, starts_in_tool_calls});
           }),
           py::kw_only(), py::arg("thinking") = true, py::arg("parse_tool_calls") = true,
           py::arg("starts_in_tool_calls") = false)
      .def(
          "feed", [](ChatStreamParser& p, const std::string& text) { return chat_events(p.feed(text)); },
          py::arg("text"), "The events the chunk completes (list of ChatEvent).")
      .def(
          "finish", [](ChatStreamParser& p) { return chat_events(p.finish()); }, "Ends the stream.")
      .def_property_readonly("reasoning", [](const ChatStreamParser& p) { return p.result().reasoning; })
      .def_property_readonly("content", [](const ChatStreamParser& p) { return p.result().content; })
      .def_property_readonly("tool_calls",
                             [](const ChatStreamParser& p) {
                               py::list calls;
                               for (const ChatToolCall& c : p.result().tool_calls)
                                 calls.append(tool_call_dict(c));
                               return calls;
                             })
      .def_property_readonly("truncated", [](const ChatStreamParser& p) { return p.result().truncated; });
}

}  // namespace flashkv::python
