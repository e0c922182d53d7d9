// Grouping of user and tool messages into user turns (see chat_turns.hpp).
#include "tokenizer/chat_turns.hpp"

#include <algorithm>
#include <map>
#include <string_view>

namespace flashkv::chat {
namespace {

struct Block {
  bool is_tool = false;
  const ChatMessage* message = nullptr;
  // Tool results with a call id are put in call order; text and results without an id keep their place.
  bool sortable() const { return is_tool && !message->tool_call_id.empty(); }
};

using CallOrder = std::map<std::string, size_t, std::less<>>;

// Tool-result blocks sorted by call order (stable), written back into the slots tool blocks occupy.
void sort_tool_results(std::vector<Block>& blocks, const CallOrder& order) {
  std::vector<Block> tools;
  for (const Block& block : blocks) {
    if (block.sortable()) tools.push_back(block);
  }
  if (tools.size() < 2 || order.empty()) return;
  const auto rank = [&](const Block& block) {
    const auto it = order.find(block.message->tool_call_id);
    return it == order.end() ? size_t{0} : it->second;
  };
  std::stable_sort(tools.begin(), tools.end(),
                   [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
  size_t next = 0;
  for (Block& block : blocks) {
    if (block.sortable()) block = tools[next++];
  }
}

std::string join_blocks(const std::vector<Block>& blocks) {
  std::string text;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) text += "\n\n";
    if (blocks[i].is_tool) {
      text += "<tool_result>" + blocks[i].message->content + "</tool_result>";
    } else {
      text += blocks[i].message->content;
    }
  }
  return text;
}

}  // namespace

std::vector<Turn> group_turns(const std::vector<ChatMessage>& messages) {
  std::vector<Turn> turns;
  CallOrder order;  // call id -> position, from the latest assistant message with calls
  std::vector<Block> blocks;
  const auto close_user_turn = [&] {
    if (blocks.empty()) return;
    sort_tool_results(blocks, order);
    turns.push_back(Turn{ChatRole::kUser, nullptr, join_blocks(blocks)});
    blocks.clear();
  };
  for (const ChatMessage& message : messages) {
    if (message.role == ChatRole::kUser || message.role == ChatRole::kTool) {
      blocks.push_back(Block{message.role == ChatRole::kTool, &message});
      continue;
    }
    close_user_turn();
    // Of consecutive reminders only the first is shown (deepseek-recipe's rule).
    const bool repeated_reminder = message.role == ChatRole::kLatestReminder && !turns.empty() &&
                                   turns.back().role == ChatRole::kLatestReminder;
    if (repeated_reminder) continue;
    if (message.role == ChatRole::kAssistant && !message.tool_calls.empty()) {
      order.clear();
      for (size_t i = 0; i < message.tool_calls.size(); ++i) {
        if (!message.tool_calls[i].id.empty())
          order[message.tool_calls[i].id] = i;  // a repeated id: the later call
      }
    }
    turns.push_back(Turn{message.role, &message, {}});
  }
  close_user_turn();
  return turns;
}

}  // namespace flashkv::chat
