// DSML markup in the prompt (see chat_dsml.hpp). The control token is "｜DSML｜" alone: the "<", "</" and
// tag names around it are plain text, so they are appended as text.
#include "tokenizer/chat_dsml.hpp"

#include <flashkv/error.hpp>

#include "tokenizer/chat_json_text.hpp"
#include "tokenizer/chat_tokens.hpp"

namespace flashkv::chat {
namespace {

// "<｜DSML｜" + tail, or "</｜DSML｜" + tail when closing.
void tag(PromptBuilder& out, bool closing, std::string_view tail) {
  out.text(closing ? "</" : "<").special(kDsml).text(tail);
}

Json tool_parameters(const ChatTool& tool) {
  if (tool.parameters.empty()) return nullptr;
  auto parsed = parse_json(tool.parameters);
  if (!parsed) fail(ErrorCode::kInvalidArgument, "tool '{}': parameters are not valid JSON", tool.name);
  return *parsed;
}

void append_parameter(PromptBuilder& out, const std::string& key, const Json& value) {
  const bool is_string = value.is_string();
  tag(out, false, " parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">");
  out.text(is_string ? value.get_ref<const std::string&>() : python_json(value));
  tag(out, true, " parameter>");
}

// Arguments that are a JSON object become one parameter per key; anything else is passed whole as a string
// parameter named "arguments".
void append_arguments(PromptBuilder& out, const std::string& arguments) {
  const auto parsed = parse_json(arguments);
  if (!parsed || !parsed->is_object()) {
    append_parameter(out, "arguments", Json(arguments));
    return;
  }
  bool first = true;
  for (const auto& [key, value] : parsed->items()) {
    if (!first) out.text("\n");
    first = false;
    append_parameter(out, key, value);
  }
}

}  // namespace

std::string tool_schema_lines(const std::vector<ChatTool>& tools, bool skip_deferred) {
  std::string lines;
  bool first = true;
  for (const ChatTool& tool : tools) {
    if (skip_deferred && tool.defer_loading) continue;
    Json schema = Json::object();
    schema["name"] = tool.name;
    schema["description"] = tool.description;
    schema["parameters"] = tool_parameters(tool);
    if (!first) lines += "\n";
    first = false;
    append_python_json(schema, lines);
  }
  return lines;
}

void append_tools_section(PromptBuilder& out, const std::vector<ChatTool>& tools) {
  out.text(
      "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke "
      "tools "
      "by writing a \"");
  tag(out, false, " calls>\" block like the following:\n\n");
  tag(out, false, " calls>\n");
  tag(out, false, " invoke name=\"$TOOL_NAME\">\n");
  tag(out, false, " parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE");
  tag(out, true, " parameter>\n...\n");
  tag(out, true, " invoke>\n");
  tag(out, false, " invoke name=\"$TOOL_NAME2\">\n...\n");
  tag(out, true, " invoke>\n");
  tag(out, true, " calls>\n\n");
  out.text(
      "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
      "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
      "If thinking_mode is enabled (triggered by ");
  out.special(kThinkStart).text("), you MUST output your complete reasoning inside ").special(kThinkStart);
  out.text("...").special(kThinkEnd).text(
      " BEFORE any tool calls or final response.\n\nOtherwise, output directly after ");
  out.special(kThinkEnd).text(" with tool calls or final response.\n\n### Available Tool Schemas\n\n");
  out.text(tool_schema_lines(tools, /*skip_deferred=*/true));
  out.text(
      "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
      "calls.\n");
}

void append_tool_calls(PromptBuilder& out, const std::vector<ChatToolCall>& calls) {
  out.text("\n\n");
  tag(out, false, " calls>\n");
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) out.text("\n");
    tag(out, false, " invoke name=\"" + calls[i].name + "\">\n");
    append_arguments(out, calls[i].arguments);
    out.text("\n");
    tag(out, true, " invoke>");
  }
  out.text("\n");
  tag(out, true, " calls>");
}

void append_tool_calls_opening(PromptBuilder& out) {
  out.text("\n\n");
  tag(out, false, " calls>\n");
}

}  // namespace flashkv::chat
