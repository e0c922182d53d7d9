// ChatStreamParser — generated V4.1 text back into reasoning, answer and DSML tool calls, chunk by chunk.
// Rules (docs/chat.md; compared with deepseek-recipe's stream processor by test_chat_parsing.py):
// - thinking mode starts in the reasoning; "</think>" ends it; newlines that open the reasoning or the
//   answer are dropped, and so are newlines just before "</think>" (but not at the end of a cut-off stream);
// - a "</think>" inside the answer is removed;
// - with tool parsing on, "<｜DSML｜" in the answer (or in the reasoning: a call without "</think>") starts
//   the tool-call block: newlines just before it are dropped; every complete `invoke` is one ChatToolCall
//   whose arguments are a JSON object built from the parameters (string="true": the text as a JSON string;
//   string="false": the text verbatim, it is JSON); text after the closing "</｜DSML｜ calls>" and malformed
//   markup are dropped.
// Text that could still be the start of a marker is held back until the next chunk decides it.
#include <algorithm>
#include <array>

#include <flashkv/chat.hpp>

#include "tokenizer/chat_json_text.hpp"

namespace flashkv {
namespace {

constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kDsmlOpen = "<｜DSML｜";
constexpr std::string_view kCallsOpen = "<｜DSML｜ calls>";
constexpr std::string_view kCallsClose = "</｜DSML｜ calls>";
constexpr std::string_view kInvokeOpen = "<｜DSML｜ invoke name=\"";
constexpr std::string_view kInvokeClose = "</｜DSML｜ invoke>";
constexpr std::string_view kParameterOpen = "<｜DSML｜ parameter name=\"";
constexpr std::string_view kParameterClose = "</｜DSML｜ parameter>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// `text` is a (possibly empty) beginning of `marker`.
bool could_become(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

enum class Parse { kComplete, kIncomplete, kMalformed };

// One `invoke` element at the start of `text`: on kComplete, `call` holds it and `used` its length.
Parse parse_invoke(std::string_view text, ChatToolCall& call, size_t& used) {
  size_t at = kInvokeOpen.size();
  const size_t name_end = text.find("\">", at);
  if (name_end == std::string_view::npos) return Parse::kIncomplete;
  call.name = std::string(text.substr(at, name_end - at));
  at = name_end + 2;
  std::string arguments = "{";
  for (bool first = true;; first = false) {
    while (at < text.size() && is_space(text[at])) ++at;
    const std::string_view rest = text.substr(at);
    if (rest.starts_with(kInvokeClose)) {
      call.arguments = arguments + "}";
      used = at + kInvokeClose.size();
      return Parse::kComplete;
    }
    if (!rest.starts_with(kParameterOpen)) {
      const bool maybe = could_become(rest, kInvokeClose) || could_become(rest, kParameterOpen);
      return maybe ? Parse::kIncomplete : Parse::kMalformed;
    }
    const size_t key_begin = at + kParameterOpen.size();
    const size_t key_end = text.find("\" string=\"", key_begin);
    if (key_end == std::string_view::npos) return Parse::kIncomplete;
    const std::string_view flag = text.substr(key_end + 10);
    const bool is_string = flag.starts_with("true\">");
    if (!is_string && !flag.starts_with("false\">")) {
      return could_become(flag, "true\">") || could_become(flag, "false\">") ? Parse::kIncomplete
                                                                             : Parse::kMalformed;
    }
    const size_t value_begin = key_end + 10 + (is_string ? 6 : 7);
    const size_t value_end = text.find(kParameterClose, value_begin);
    if (value_end == std::string_view::npos) return Parse::kIncomplete;
    const std::string_view value = text.substr(value_begin, value_end - value_begin);
    if (!first) arguments += ", ";
    arguments += chat::python_json_string(text.substr(key_begin, key_end - key_begin)) + ": ";
    arguments += is_string ? chat::python_json_string(value) : std::string(value);
    at = value_end + kParameterClose.size();
  }
}

}  // namespace

ChatStreamParser::ChatStreamParser(const ChatParseOptions& options)
    : options_(options), stage_(options.thinking ? Stage::kReasoning : Stage::kContent) {
  if (options.starts_in_tool_calls && options.parse_tool_calls) {
    stage_ = Stage::kToolCalls;
    in_calls_ = true;
  }
}

std::vector<ChatEvent> ChatStreamParser::feed(std::string_view chunk) {
  std::vector<ChatEvent> events;
  if (stage_ == Stage::kDone) return events;
  pending_ += chunk;
  step(events, /*at_end=*/false);
  return events;
}

std::vector<ChatEvent> ChatStreamParser::finish() {
  std::vector<ChatEvent> events;
  step(events, /*at_end=*/true);
  if (!held_newlines_.empty() && stage_ != Stage::kToolCalls) {
    emit_text(events, stage_ == Stage::kReasoning ? ChatEvent::Kind::kReasoning : ChatEvent::Kind::kContent,
              std::move(held_newlines_));
  }
  held_newlines_.clear();
  stage_ = Stage::kDone;
  return events;
}

ParsedChat ChatStreamParser::parse(std::string_view text, const ChatParseOptions& options) {
  ChatStreamParser parser(options);
  parser.feed(text);
  parser.finish();
  return parser.result();
}

void ChatStreamParser::step(std::vector<ChatEvent>& events, bool at_end) {
  for (bool progressed = true; progressed;) {
    switch (stage_) {
      case Stage::kReasoning:
      case Stage::kContent:
        progressed = step_text(events, at_end);
        break;
      case Stage::kToolCalls:
        progressed = step_tool_calls(events, at_end);
        break;
      case Stage::kDone:
        pending_.clear();
        return;
    }
  }
}

void ChatStreamParser::emit_text(std::vector<ChatEvent>& events, ChatEvent::Kind kind, std::string text) {
  if (text.empty()) return;
  (kind == ChatEvent::Kind::kReasoning ? result_.reasoning : result_.content) += text;
  if (!events.empty() && events.back().kind == kind) {
    events.back().text += text;
  } else {
    events.push_back(ChatEvent{kind, std::move(text), {}});
  }
}

// Reasoning / answer text up to the next marker. Returns whether the stage changed (run again).
bool ChatStreamParser::step_text(std::vector<ChatEvent>& events, bool at_end) {
  const bool reasoning = stage_ == Stage::kReasoning;
  const ChatEvent::Kind kind = reasoning ? ChatEvent::Kind::kReasoning : ChatEvent::Kind::kContent;
  if (at_start_) {
    const size_t text_begin = pending_.find_first_not_of('\n');
    pending_.erase(0, text_begin == std::string::npos ? pending_.size() : text_begin);
    if (pending_.empty()) return false;
    at_start_ = false;
  }
  const bool tools = options_.parse_tool_calls;  // a call may follow the reasoning without </think>
  const size_t think_end = pending_.find(kThinkEnd);
  const size_t dsml = tools ? pending_.find(kDsmlOpen) : std::string::npos;
  const size_t marker = std::min(think_end, dsml);

  std::string text;
  if (marker == std::string::npos) {
    size_t keep = at_end ? 0 : partial_marker_suffix(pending_, kThinkEnd);
    if (tools && !at_end) keep = std::max(keep, partial_marker_suffix(pending_, kDsmlOpen));
    text = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
  } else {
    text = pending_.substr(0, marker);
    pending_.erase(0, marker);
  }
  // Newlines at the end of the text so far are held: they vanish before </think> (reasoning) or a DSML
  // block, and are emitted as soon as more text follows them.
  text.insert(0, held_newlines_);
  const size_t kept = text.find_last_not_of('\n') + 1;  // npos + 1 == 0: all newlines
  held_newlines_ = text.substr(kept);
  text.resize(kept);
  emit_text(events, kind, std::move(text));
  if (marker == std::string::npos) return false;

  if (marker == dsml) {
    held_newlines_.clear();
    stage_ = Stage::kToolCalls;
  } else {
    pending_.erase(0, kThinkEnd.size());
    if (reasoning) {
      held_newlines_.clear();
      stage_ = Stage::kContent;
      at_start_ = true;
    } else {
      emit_text(events, kind, std::move(held_newlines_));  // a removed </think> keeps the newlines before it
      held_newlines_.clear();
    }
  }
  return true;
}

// The DSML block: emits each complete invoke. Returns whether it made progress.
bool ChatStreamParser::step_tool_calls(std::vector<ChatEvent>& events, bool at_end) {
  const size_t text_begin = std::min(pending_.find_first_not_of(" \n\r\t"), pending_.size());
  pending_.erase(0, text_begin);
  const std::string_view rest = pending_;
  Parse state = Parse::kIncomplete;
  size_t used = 0;
  ChatToolCall call;
  if (!in_calls_) {
    if (rest.starts_with(kCallsOpen)) {
      in_calls_ = true;
      pending_.erase(0, kCallsOpen.size());
      return true;
    }
    state = could_become(rest, kCallsOpen) ? Parse::kIncomplete : Parse::kMalformed;
  } else if (rest.starts_with(kCallsClose)) {
    stage_ = Stage::kDone;
    return true;
  } else if (rest.starts_with(kInvokeOpen)) {
    state = parse_invoke(rest, call, used);
  } else {
    const bool maybe = could_become(rest, kCallsClose) || could_become(rest, kInvokeOpen);
    state = maybe ? Parse::kIncomplete : Parse::kMalformed;
  }
  if (state == Parse::kComplete) {
    call.id = "call_" + std::to_string(result_.tool_calls.size());
    result_.tool_calls.push_back(call);
    events.push_back(ChatEvent{ChatEvent::Kind::kToolCall, {}, std::move(call)});
    pending_.erase(0, used);
    return true;
  }
  if (state == Parse::kMalformed || at_end) {
    result_.truncated = state == Parse::kIncomplete;
    stage_ = Stage::kDone;
    return true;
  }
  return false;
}

}  // namespace flashkv
