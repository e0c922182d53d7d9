// ChatEncoder::render — the DeepSeek-V4.1 prompt of a conversation. The rules (docs/chat.md) follow the
// `deepseek-recipe` encoder, DeepSeek's own, which tests/python/test_chat_encoding.py compares against:
// - BOS; a system block first when the conversation opens with a system message, when thinking mode puts
//   the "Reasoning Effort" line there, or when the request has tools or a response format;
// - the system block: <｜System｜>, effort line, content, then "\n\n"-joined sections: ## Tools, ## Response
//   Format, ### Updated Tool Schemas (the first system message's own tools);
// - user and tool messages merged into <｜User｜> turns (chat_turns), <｜latest_reminder｜> turns, later
//   system messages as <｜System｜> turns;
// - each assistant message opens with <｜Assistant｜>; in thinking mode its reasoning is kept as
//   <think>R</think> only while tools are offered (an agent loop) or for a prefix continuation, otherwise
//   dropped to a bare </think>; the message ends with EOS unless it is a prefix continuation;
// - the generation prompt <｜Assistant｜> + <think> (thinking) or </think>, plus an opened DSML calls block
//   when a tool call is required.
#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>

#include <fmt/format.h>

#include "tokenizer/chat_dsml.hpp"
#include "tokenizer/chat_json_text.hpp"
#include "tokenizer/chat_prompt_builder.hpp"
#include "tokenizer/chat_tokens.hpp"
#include "tokenizer/chat_turns.hpp"

namespace flashkv {
namespace {

using chat::PromptBuilder;

struct RenderPlan {
  const ChatOptions& options;
  bool tools_offered = false;   // the ## Tools section is in the prompt
  bool keep_reasoning = false;  // historical reasoning stays in the prompt
};

std::string response_format_section(const std::string& response_format) {
  const auto schema = chat::parse_json(response_format);
  if (!schema) fail(ErrorCode::kInvalidArgument, "response_format is not valid JSON: {}", response_format);
  return "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" +
         chat::python_json(*schema);
}

void append_updated_tools(PromptBuilder& out, const std::vector<ChatTool>& tools) {
  out.text("### Updated Tool Schemas\n\n" + chat::tool_schema_lines(tools, /*skip_deferred=*/false));
}

// The opening system block; `first_system` is the conversation's first message when it is a system one.
// Returns whether it wrote a block of its own (one that is not the first message's).
bool append_opening_system(PromptBuilder& out, const RenderPlan& plan, const ChatMessage* first_system,
                           bool conversation_empty) {
  const ChatOptions& options = plan.options;
  const bool effort_line = options.thinking && !conversation_empty;
  const bool sections = plan.tools_offered || !options.response_format.empty() ||
                        (first_system != nullptr && !first_system->tools.empty());
  if (first_system == nullptr && !effort_line && !sections) return false;
  out.special(chat::kSystem);
  if (options.thinking && (effort_line || sections)) {
    out.text(fmt::format(
        "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
        ChatEncoder::effort_value(options.effort, options.effort_table)));
  }
  if (first_system != nullptr) out.text(first_system->content);
  if (plan.tools_offered) {
    out.text("\n\n");
    chat::append_tools_section(out, options.tools);
  }
  if (!options.response_format.empty()) out.text("\n\n" + response_format_section(options.response_format));
  if (first_system != nullptr && !first_system->tools.empty()) {
    out.text("\n\n");
    append_updated_tools(out, first_system->tools);
  }
  return first_system == nullptr && sections;
}

// `first`: nothing but the effort line precedes the message (a prefix continuation there keeps no
// reasoning: the oracle's rule, it counts a system block made for tools or a response format as a message).
void append_assistant(PromptBuilder& out, const RenderPlan& plan, const ChatMessage& message, bool first) {
  out.special(chat::kAssistant);
  if (!plan.options.thinking) {
    out.special(chat::kThinkEnd);
  } else if (plan.keep_reasoning || (message.prefix && !first)) {
    out.special(chat::kThinkStart).text(message.reasoning.value_or(""));
    // A prefix continuation with nothing after its reasoning continues the reasoning itself.
    const bool reasoning_open = message.prefix && message.content.empty() && message.tool_calls.empty();
    if (!reasoning_open) out.special(chat::kThinkEnd);
  } else {
    out.special(chat::kThinkEnd);  // reasoning of earlier turns is dropped
  }
  out.text(message.content);
  if (!message.tool_calls.empty()) chat::append_tool_calls(out, message.tool_calls);
  if (!message.prefix) out.special(chat::kEos);
}

void append_turn(PromptBuilder& out, const RenderPlan& plan, const chat::Turn& turn, bool first) {
  switch (turn.role) {
    case ChatRole::kUser:
      out.special(chat::kUser).text(turn.user_text);
      break;
    case ChatRole::kLatestReminder:
      out.special(chat::kLatestReminder).text(turn.message->content);
      break;
    case ChatRole::kAssistant:
      append_assistant(out, plan, *turn.message, first);
      break;
    case ChatRole::kSystem:
      out.special(chat::kSystem).text(turn.message->content);
      if (!turn.message->tools.empty()) {
        out.text("\n\n");
        append_updated_tools(out, turn.message->tools);
      }
      break;
    case ChatRole::kTool:
      break;  // merged into user turns by group_turns
  }
}

void check_prefixes(const std::vector<ChatMessage>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].prefix && messages[i].role != ChatRole::kAssistant) {
      fail(ErrorCode::kInvalidArgument, "messages[{}]: only an assistant message can be a prefix", i);
    }
  }
}

}  // namespace

RenderedChat ChatEncoder::render(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  check_prefixes(messages);
  RenderPlan plan{options};
  plan.tools_offered = !options.tools.empty() && options.tool_choice != ChatToolChoice::kNone;
  plan.keep_reasoning = options.thinking && plan.tools_offered;
  if (options.thinking) effort_value(options.effort, options.effort_table);  // validate even when unused

  PromptBuilder out;
  if (options.add_bos) out.special(chat::kBos);
  const bool opens_with_system = !messages.empty() && messages.front().role == ChatRole::kSystem;
  const bool own_block =
      append_opening_system(out, plan, opens_with_system ? &messages.front() : nullptr, messages.empty());

  const std::vector<chat::Turn> turns = chat::group_turns(messages);
  for (size_t i = opens_with_system ? 1 : 0; i < turns.size(); ++i) {
    append_turn(out, plan, turns[i], i == 0 && !own_block);
  }

  const bool continues_prefix = !messages.empty() && messages.back().prefix;
  if (!continues_prefix) {
    out.special(chat::kAssistant).special(options.thinking ? chat::kThinkStart : chat::kThinkEnd);
  }
  if (plan.tools_offered && options.tool_choice == ChatToolChoice::kRequired)
    chat::append_tool_calls_opening(out);
  return out.take();
}

}  // namespace flashkv
