// The V4.1 format has no tool role: tool results are <tool_result> blocks of a user turn. This groups a
// conversation into turns: each run of consecutive user and tool messages becomes one user turn whose blocks
// are joined by a blank line, with the tool results put in the order of the calls of the latest assistant
// message that made calls (results for unknown ids sort as if they answered the first call;
// results without an id stay where they are). Of a run of
// consecutive latest_reminder messages only the first is kept.
#pragma once

#include <string>
#include <vector>

#include <flashkv/chat.hpp>

namespace flashkv::chat {

struct Turn {
  ChatRole role = ChatRole::kUser;  // kSystem, kUser (user + tool messages), kAssistant or kLatestReminder
  const ChatMessage* message = nullptr;  // the message of a non-user turn
  std::string user_text;                 // kUser: the merged text
};

std::vector<Turn> group_turns(const std::vector<ChatMessage>& messages);

}  // namespace flashkv::chat
