// Test bindings of the chat layer (include/flashkv/chat.hpp): rendering from Python dicts or chat JSON, and
// the stream parser fed chunk by chunk, so pytest can compare both with the deepseek-recipe package.
// flashkv::Error surfaces as flashkv_testing.ChatError("<code>: <message>").
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>
#include <flashkv/tokenizer.hpp>

#include "error_translation.hpp"

namespace py = pybind11;

namespace flashkv::testing {
namespace {

py::handle chat_error_type;

template <typename Body>
auto translated(Body&& body) {
  return testing::translated(chat_error_type, std::forward<Body>(body));
}

using ToolTuple =
    std::tuple<std::string, std::string, std::string, bool>;  // name, description, parameters, defer

std::vector<ChatTool> tools_of(const std::vector<ToolTuple>& tuples) {
  std::vector<ChatTool> tools;
  for (const auto& [name, description, parameters, defer] : tuples) {
    tools.push_back(ChatTool{name, description, parameters, defer});
  }
  return tools;
}

ChatRole role_of(const std::string& role) {
  if (role == "system") return ChatRole::kSystem;
  if (role == "user") return ChatRole::kUser;
  if (role == "assistant") return ChatRole::kAssistant;
  if (role == "tool") return ChatRole::kTool;
  if (role == "latest_reminder") return ChatRole::kLatestReminder;
  throw py::value_error("unknown role " + role);
}

// A message dict: role, content, and optionally reasoning, tool_calls [(id, name, arguments)], tool_call_id,
// prefix, tools [(name, description, parameters, defer_loading)].
ChatMessage message_of(const py::dict& d) {
  ChatMessage m;
  m.role = role_of(d["role"].cast<std::string>());
  m.content = d.contains("content") ? d["content"].cast<std::string>() : "";
  if (d.contains("reasoning") && !d["reasoning"].is_none()) m.reasoning = d["reasoning"].cast<std::string>();
  if (d.contains("tool_calls")) {
    for (const auto& [id, name, arguments] :
         d["tool_calls"].cast<std::vector<std::tuple<std::string, std::string, std::string>>>()) {
      m.tool_calls.push_back(ChatToolCall{id, name, arguments});
    }
  }
  if (d.contains("tool_call_id")) m.tool_call_id = d["tool_call_id"].cast<std::string>();
  if (d.contains("prefix")) m.prefix = d["prefix"].cast<bool>();
  if (d.contains("tools")) m.tools = tools_of(d["tools"].cast<std::vector<ToolTuple>>());
  return m;
}

ChatOptions options_of(bool thinking, const std::string& effort, const std::string& effort_table,
                       const std::vector<ToolTuple>& tools, const std::string& tool_choice,
                       const std::string& response_format, bool add_bos) {
  ChatOptions o;
  o.thinking = thinking;
  o.effort = effort;
  o.effort_table = effort_table == "reference" ? ChatEffortTable::kV41Reference : ChatEffortTable::kV41Flash;
  o.tools = tools_of(tools);
  o.tool_choice = tool_choice == "none"       ? ChatToolChoice::kNone
                  : tool_choice == "required" ? ChatToolChoice::kRequired
                                              : ChatToolChoice::kAuto;
  o.response_format = response_format;
  o.add_bos = add_bos;
  return o;
}

std::vector<ChatMessage> messages_of(const py::list& messages) {
  std::vector<ChatMessage> list;
  for (const auto& item : messages) list.push_back(message_of(item.cast<py::dict>()));
  return list;
}

// Tokenizers by path: the DeepSeek tokenizer.json takes a while to load, and the tests reuse one.
const Tokenizer& cached_tokenizer(const std::string& path) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, Tokenizer::load(path)).first;
  return it->second;
}

py::tuple rendered_tuple(const RenderedChat& r) {
  return py::make_tuple(py::bytes(r.text), r.special_ranges);
}

py::dict parsed_dict(const ParsedChat& p, const std::vector<ChatEvent>& events) {
  py::list calls;
  for (const ChatToolCall& c : p.tool_calls) calls.append(py::make_tuple(c.name, c.arguments));
  py::list event_list;
  for (const ChatEvent& e : events) {
    if (e.kind == ChatEvent::Kind::kToolCall) {
      event_list.append(py::make_tuple("tool_call", e.tool_call.name, e.tool_call.arguments));
    } else {
      event_list.append(
          py::make_tuple(e.kind == ChatEvent::Kind::kReasoning ? "reasoning" : "content", e.text));
    }
  }
  py::dict d;
  d["reasoning"] = p.reasoning;
  d["content"] = p.content;
  d["tool_calls"] = calls;
  d["truncated"] = p.truncated;
  d["events"] = event_list;
  return d;
}

}  // namespace

void bind_chat(py::module_& m) {
  static py::exception<std::runtime_error> error(m, "ChatError");
  chat_error_type = error;

  const auto render_args = [](auto&&... extra) {
    return std::make_tuple(extra..., py::arg("messages"), py::arg("thinking") = true, py::arg("effort") = "",
                           py::arg("effort_table") = "flash", py::arg("tools") = std::vector<ToolTuple>{},
                           py::arg("tool_choice") = "auto", py::arg("response_format") = "",
                           py::arg("add_bos") = true);
  };
  std::apply(
      [&](auto&&... args) {
        m.def(
            "chat_render",
            [](const py::list& messages, bool thinking, const std::string& effort, const std::string& table,
               const std::vector<ToolTuple>& tools, const std::string& choice, const std::string& format,
               bool add_bos) {
              const ChatOptions o = options_of(thinking, effort, table, tools, choice, format, add_bos);
              return translated(
                  [&] { return rendered_tuple(ChatEncoder::render(messages_of(messages), o)); });
            },
            args..., "(prompt bytes, special byte ranges) of a conversation");
      },
      render_args());
  std::apply(
      [&](auto&&... args) {
        m.def(
            "chat_encode",
            [](const std::string& tokenizer, const py::list& messages, bool thinking,
               const std::string& effort, const std::string& table, const std::vector<ToolTuple>& tools,
               const std::string& choice, const std::string& format, bool add_bos) {
              const ChatOptions o = options_of(thinking, effort, table, tools, choice, format, add_bos);
              return translated(
                  [&] { return ChatEncoder::encode(cached_tokenizer(tokenizer), messages_of(messages), o); });
            },
            args..., "token ids of a conversation under the tokenizer.json at `tokenizer`");
      },
      render_args(py::arg("tokenizer")));

  m.def(
      "chat_render_json",
      [](const std::string& json) {
        return translated([&] {
          const ChatRequest request = chat_from_json(json);
          return rendered_tuple(ChatEncoder::render(request.messages, request.options));
        });
      },
      "(prompt bytes, special byte ranges) of OpenAI-style chat JSON");

  m.def(
      "chat_parse",
      [](const std::vector<std::string>& chunks, bool thinking, bool parse_tool_calls,
         bool starts_in_tool_calls) {
        ChatStreamParser parser(ChatParseOptions{thinking, parse_tool_calls, starts_in_tool_calls});
        std::vector<ChatEvent> events;
        for (const std::string& chunk : chunks) {
          for (ChatEvent& e : parser.feed(chunk)) events.push_back(std::move(e));
        }
        for (ChatEvent& e : parser.finish()) events.push_back(std::move(e));
        return parsed_dict(parser.result(), events);
      },
      py::arg("chunks"), py::arg("thinking") = true, py::arg("parse_tool_calls") = true,
      py::arg("starts_in_tool_calls") = false, "parse generated text fed as `chunks`");
}

}  // namespace flashkv::testing
