// DSML, the V4.1 tool-call markup, as the prompt writes it: the "## Tools" section of the system prompt that
// teaches it, the tool schema lines, and the <｜DSML｜ calls> block of an assistant message.
#pragma once

#include <string>
#include <vector>

#include <flashkv/chat.hpp>

#include "tokenizer/chat_prompt_builder.hpp"

namespace flashkv::chat {

// One JSON line per tool: {"name": ..., "description": ..., "parameters": ...}, joined by newlines.
// `skip_deferred` leaves out tools with defer_loading (the request's tool list does; a system message's
// "Updated Tool Schemas" list does not).
std::string tool_schema_lines(const std::vector<ChatTool>& tools, bool skip_deferred);

// The "## Tools" section (ends with a newline).
void append_tools_section(PromptBuilder& out, const std::vector<ChatTool>& tools);

// "\n\n<｜DSML｜ calls>\n" ... "\n</｜DSML｜ calls>" for the calls of an assistant message.
void append_tool_calls(PromptBuilder& out, const std::vector<ChatToolCall>& calls);

// "\n\n<｜DSML｜ calls>\n": what the generation prompt ends with when a tool call is required.
void append_tool_calls_opening(PromptBuilder& out);

}  // namespace flashkv::chat
