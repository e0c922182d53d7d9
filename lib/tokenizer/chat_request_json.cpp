// chat_from_json — OpenAI-style chat JSON (a messages array, or a request object with messages, tools,
// tool_choice, thinking, reasoning_effort, response_format) into ChatMessage / ChatOptions. Every failure
// names the field, e.g. "messages[2].tool_calls[0].function.name: expected a string". Like deepseek-recipe's
// request conversion, it drops empty system messages and reads a tool without "parameters" as taking {}.
#include <string>
#include <utility>

#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>

#include "tokenizer/chat_json_text.hpp"

namespace flashkv {
namespace {

using chat::Json;

[[noreturn]] void bad(const std::string& field, std::string_view expected) {
  fail(ErrorCode::kInvalidArgument, "chat JSON: {}: expected {}", field, expected);
}

const Json* member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string string_member(const Json& object, const char* key, const std::string& field) {
  const Json* value = member(object, key);
  if (value == nullptr) return {};
  if (!value->is_string()) bad(field + "." + key, "a string");
  return value->get<std::string>();
}

// A content value: a string, or a list of text parts joined by a blank line.
std::string content_text(const Json* content, const std::string& field) {
  if (content == nullptr) return {};
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) bad(field, "a string, null or a list of text parts");
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_field = fmt::format("{}[{}]", field, i);
    if (!part.is_object() || part.value("type", "") != "text") bad(part_field, "a {\"type\": \"text\"} part");
    if (i > 0) text += "\n\n";
    text += string_member(part, "text", part_field);
  }
  return text;
}

ChatRole role_of(const Json& message, const std::string& field) {
  const std::string role = string_member(message, "role", field);
  if (role == "system") return ChatRole::kSystem;
  if (role == "user") return ChatRole::kUser;
  if (role == "assistant") return ChatRole::kAssistant;
  if (role == "tool") return ChatRole::kTool;
  if (role == "latest_reminder") return ChatRole::kLatestReminder;
  bad(field + ".role", "system, user, assistant, tool or latest_reminder");
}

ChatToolCall tool_call_of(const Json& call, const std::string& field) {
  if (!call.is_object()) bad(field, "an object");
  const Json* function = member(call, "function");
  if (function == nullptr || !function->is_object()) bad(field + ".function", "an object");
  ChatToolCall out;
  out.id = string_member(call, "id", field);
  out.name = string_member(*function, "name", field + ".function");
  const Json* arguments = member(*function, "arguments");
  if (arguments == nullptr) {
    out.arguments = "{}";
  } else {
    out.arguments = arguments->is_string() ? arguments->get<std::string>() : arguments->dump();
  }
  return out;
}

ChatMessage message_of(const Json& message, const std::string& field) {
  if (!message.is_object()) bad(field, "a message object");
  ChatMessage out;
  out.role = role_of(message, field);
  out.content = content_text(member(message, "content"), field + ".content");
  if (out.role == ChatRole::kAssistant) {
    if (const Json* reasoning = member(message, "reasoning_content")) {
      if (!reasoning->is_string()) bad(field + ".reasoning_content", "a string");
      out.reasoning = reasoning->get<std::string>();
    }
    if (const Json* calls = member(message, "tool_calls")) {
      if (!calls->is_array()) bad(field + ".tool_calls", "a list");
      for (size_t i = 0; i < calls->size(); ++i) {
        out.tool_calls.push_back(tool_call_of((*calls)[i], fmt::format("{}.tool_calls[{}]", field, i)));
      }
    }
    if (const Json* prefix = member(message, "prefix")) {
      if (!prefix->is_boolean()) bad(field + ".prefix", "true or false");
      out.prefix = prefix->get<bool>();
    }
  }
  if (out.role == ChatRole::kTool) out.tool_call_id = string_member(message, "tool_call_id", field);
  return out;
}

ChatTool tool_of(const Json& tool, const std::string& field) {
  if (!tool.is_object()) bad(field, "a tool object");
  const Json* function = member(tool, "function");
  const Json& definition = function != nullptr ? *function : tool;  // {"type": "function", "function": {...}}
  const std::string definition_field = function != nullptr ? field + ".function" : field;
  ChatTool out;
  out.name = string_member(definition, "name", definition_field);
  if (out.name.empty()) bad(definition_field + ".name", "a non-empty string");
  out.description = string_member(definition, "description", definition_field);
  // An absent schema is an empty object, as deepseek-recipe's request conversion reads it.
  const Json* parameters = member(definition, "parameters");
  out.parameters = parameters != nullptr ? parameters->dump() : "{}";
  const Json* defer = member(tool, "defer_loading");
  if (defer == nullptr) defer = member(definition, "defer_loading");
  out.defer_loading = defer != nullptr && defer->is_boolean() && defer->get<bool>();
  return out;
}

void read_thinking(const Json& request, ChatOptions& options) {
  const Json* thinking = member(request, "thinking");
  if (thinking == nullptr) return;
  if (thinking->is_boolean()) {
    options.thinking = thinking->get<bool>();
  } else if (thinking->is_object()) {
    const std::string type = string_member(*thinking, "type", "thinking");
    if (type != "enabled" && type != "disabled") bad("thinking.type", "\"enabled\" or \"disabled\"");
    options.thinking = type == "enabled";
  } else {
    bad("thinking", "a bool or {\"type\": \"enabled\"|\"disabled\"}");
  }
}

void read_effort(const Json& request, ChatOptions& options) {
  const Json* effort = member(request, "reasoning_effort");
  if (effort == nullptr) return;
  if (effort->is_number_integer()) {
    options.effort = std::to_string(effort->get<int64_t>());
  } else if (effort->is_string()) {
    options.effort = effort->get<std::string>();
  } else {
    bad("reasoning_effort", "a level name or an integer 1-100");
  }
  if (options.effort == "none") {
    options.thinking = false;
    options.effort.clear();
  }
  ChatEncoder::effort_value(options.effort, options.effort_table);  // reject a bad value here, with its field
}

void read_tool_choice(const Json& request, ChatOptions& options) {
  const Json* choice = member(request, "tool_choice");
  if (choice == nullptr) return;
  const std::string value = choice->is_string() ? choice->get<std::string>() : "";
  if (value == "auto") {
    options.tool_choice = ChatToolChoice::kAuto;
  } else if (value == "none") {
    options.tool_choice = ChatToolChoice::kNone;
  } else if (value == "required") {
    options.tool_choice = ChatToolChoice::kRequired;
  } else {
    bad("tool_choice", "\"auto\", \"none\" or \"required\"");
  }
}

void read_response_format(const Json& request, ChatOptions& options) {
  const Json* format = member(request, "response_format");
  if (format == nullptr) return;
  if (!format->is_object()) bad("response_format", "an object");
  const std::string type = string_member(*format, "type", "response_format");
  if (type == "text") return;
  if (type == "json_object") {
    options.response_format = R"({"type": "json_object"})";
    return;
  }
  const Json* schema = type == "json_schema" ? member(*format, "json_schema") : nullptr;
  const Json* body = schema != nullptr && schema->is_object() ? member(*schema, "schema") : nullptr;
  if (body == nullptr)
    bad("response_format", "type text, json_object, or json_schema with json_schema.schema");
  options.response_format = body->dump();
}

}  // namespace

ChatRequest chat_from_json(std::string_view json) {
  const auto parsed = chat::parse_json(json);
  if (!parsed) fail(ErrorCode::kInvalidArgument, "chat JSON: not valid JSON");
  const Json& root = *parsed;
  const Json* messages = root.is_array() ? &root : (root.is_object() ? member(root, "messages") : nullptr);
  if (messages == nullptr || !messages->is_array()) bad("messages", "a list of messages");
  ChatRequest request;
  for (size_t i = 0; i < messages->size(); ++i) {
    ChatMessage message = message_of((*messages)[i], fmt::format("messages[{}]", i));
    // An empty system message says nothing; deepseek-recipe's request conversion drops it too.
    if (message.role == ChatRole::kSystem && message.content.empty()) continue;
    request.messages.push_back(std::move(message));
  }
  if (!root.is_object()) return request;
  if (const Json* tools = member(root, "tools")) {
    if (!tools->is_array()) bad("tools", "a list");
    for (size_t i = 0; i < tools->size(); ++i) {
      request.options.tools.push_back(tool_of((*tools)[i], fmt::format("tools[{}]", i)));
    }
  }
  read_thinking(root, request.options);
  read_effort(root, request.options);
  read_tool_choice(root, request.options);
  read_response_format(root, request.options);
  return request;
}

}  // namespace flashkv
