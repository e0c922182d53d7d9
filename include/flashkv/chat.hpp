// flashkv chat layer — the DeepSeek-V4.1 conversation format: encode a conversation into the prompt the model
// was trained on, and parse generated text back into reasoning, answer and tool calls. docs/chat.md has the
// rules (and the oracle they are tested against: the `deepseek-recipe` package, DeepSeek's own encoder).
//
// Contract:
// - ChatEncoder::render turns messages + options into the prompt text and the byte ranges of that text that
//   are control tokens (<｜User｜>, <think>, ｜DSML｜, ...). Everything outside those ranges is plain text:
//   ChatEncoder::encode tokenizes it with special tokens NOT recognised, so a user who types "<｜User｜>"
//   gets the characters, never the control token.
// - ChatStreamParser consumes generated text in arbitrary chunks (even splitting a UTF-8 character or a
//   marker) and returns events as soon as they are certain; concatenating the events of any chunking gives
//   the same ParsedChat as parsing the whole text at once.
// Ownership: every type here is a plain value; ChatEncoder holds no reference to the messages it renders.
// Threading: ChatEncoder and the free functions are stateless and safe to call from any thread;
// a ChatStreamParser is one stream's state, used by one thread at a time.
// Errors: flashkv::Error with kInvalidArgument (an effort outside 1-100 or an unknown level name, a message
// role that cannot appear where it is, malformed conversation JSON — the message names the field).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashkv {

class Tokenizer;

enum class ChatRole { kSystem, kUser, kAssistant, kTool, kLatestReminder };

// A tool call of an assistant message. `arguments` is JSON text, normally an object; anything that is not a
// JSON object is passed as one string parameter named "arguments" (as the reference encoder does).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments = "{}";
};

// A function the model may call. `parameters` is the JSON Schema as JSON text ("" means null).
// A tool with defer_loading is not listed in the prompt.
struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters;
  bool defer_loading = false;
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  std::optional<std::string> reasoning;  // assistant only: the text between <think> and </think>
  std::vector<ChatToolCall> tool_calls;  // assistant only
  std::string tool_call_id;              // tool only: which call this result answers (orders the results)
  bool prefix = false;                   // assistant only, last message: continue it instead of a new turn
  std::vector<ChatTool> tools;           // system only: listed as "### Updated Tool Schemas"
};

enum class ChatToolChoice { kAuto, kNone, kRequired };

// Which named effort levels map to which number. The level numbers changed between releases of the
// encoder; see docs/chat.md for both tables.
enum class ChatEffortTable {
  kV41Flash,      // deepseek-recipe 0.2.0 (DeepSeek-V4.1-Flash release): low 50, high 75, xhigh 75, max 100;
                  // default 75
  kV41Reference,  // vLLM's deepseek_v41_encoding.py: low 25, high 50, xhigh 75, max 100; default 50
};

struct ChatOptions {
  bool thinking = true;  // thinking mode: "Reasoning Effort" line, <think> generation prompt
  // Reasoning effort in thinking mode: "" (the table's default), a level name (minimal, low, medium, high,
  // xhigh, max) or a decimal integer 1-100.
  std::string effort;
  ChatEffortTable effort_table = ChatEffortTable::kV41Flash;
  std::vector<ChatTool> tools;  // the request's tools: the "## Tools" section of the system prompt
  ChatToolChoice tool_choice = ChatToolChoice::kAuto;
  // JSON text of the answer schema for "## Response Format" ("" for none); {"type": "json_object"} asks for
  // any JSON object.
  std::string response_format;
  bool add_bos = true;
};

// A rendered prompt: the text and the [begin, end) byte ranges in it that are control tokens, ascending.
struct RenderedChat {
  std::string text;
  std::vector<std::pair<size_t, size_t>> special_ranges;
};

// A conversation read from OpenAI-style JSON (see chat_from_json).
struct ChatRequest {
  std::vector<ChatMessage> messages;
  ChatOptions options;
};

class ChatEncoder {
 public:
  // The effort number a level or integer text stands for under `table` (throws kInvalidArgument).
  static int effort_value(std::string_view effort, ChatEffortTable table);

  // The V4.1 prompt of `messages`, ending with the generation prompt (<｜Assistant｜> + <think> or
  // </think>) unless the last message is an assistant `prefix` message.
  static RenderedChat render(const std::vector<ChatMessage>& messages, const ChatOptions& options);

  // render() tokenized: control ranges become their token ids, the text between them is encoded with special
  // tokens off. Throws kInvalidArgument when `tokenizer` lacks a control token the prompt uses.
  static std::vector<int32_t> encode(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                                     const ChatOptions& options);
};

// Parses OpenAI-style chat JSON: either an array of messages or an object with "messages" and optional
// "tools", "tool_choice", "thinking" ({"type": "enabled"|"disabled"} or a bool), "reasoning_effort"
// (string or integer; "none" turns thinking off) and "response_format". Message content is a string, null,
// or a list of {"type": "text", "text": ...} parts (joined with a blank line). As in deepseek-recipe's
// request conversion, empty system messages are dropped and a tool without "parameters" takes {}. Throws
// kInvalidArgument naming the field at fault.
ChatRequest chat_from_json(std::string_view json);

// ---- parsing generated text ----

struct ChatParseOptions {
  bool thinking = true;               // the prompt ended with <think>: output starts in the reasoning
  bool parse_tool_calls = true;       // recognise DSML tool-call blocks (set when the request had tools)
  bool starts_in_tool_calls = false;  // the prompt ended inside a tool-call block (tool_choice required)
};

struct ChatEvent {
  enum class Kind { kReasoning, kContent, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;        // kReasoning / kContent: the next piece of text
  ChatToolCall tool_call;  // kToolCall: a complete call; arguments are a JSON object text
};

struct ParsedChat {
  std::string reasoning;
  std::string content;
  std::vector<ChatToolCall> tool_calls;
  bool truncated = false;  // the text ended inside a tool-call block (the unfinished call is dropped)
};

class ChatStreamParser {
 public:
  explicit ChatStreamParser(const ChatParseOptions& options = {});

  // Consumes the next chunk and returns the events it completes.
  std::vector<ChatEvent> feed(std::string_view chunk);
  // Ends the stream: returns the events of any held-back text.
  std::vector<ChatEvent> finish();

  // Everything parsed so far (the concatenation of the events).
  const ParsedChat& result() const { return result_; }

  // Parses a whole text at once.
  static ParsedChat parse(std::string_view text, const ChatParseOptions& options = {});

 private:
  enum class Stage { kReasoning, kContent, kToolCalls, kDone };
  void step(std::vector<ChatEvent>& events, bool at_end);
  bool step_text(std::vector<ChatEvent>& events, bool at_end);
  bool step_tool_calls(std::vector<ChatEvent>& events, bool at_end);
  void emit_text(std::vector<ChatEvent>& events, ChatEvent::Kind kind, std::string text);

  ChatParseOptions options_;
  Stage stage_;
  bool at_start_ = true;       // strip the newlines that open the reasoning or the content
  std::string pending_;        // text not yet classified
  std::string held_newlines_;  // content newlines that vanish if a tool-call block follows
  std::string tool_block_;     // the tool-call markup of the current call
  bool in_calls_ = false;      // inside <｜DSML｜ calls>
  ParsedChat result_;
};

}  // namespace flashkv
