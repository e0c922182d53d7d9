// `flashkv run`: loads a checkpoint, prefills the prompt (progress on stderr
// for long prompts), streams the generated token ids to stdout, then prints
// prefill / decode speed and the KV figures (or one JSON object).
#include "run_command.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <flashkv/flashkv.hpp>
#include <nlohmann/json.hpp>

#include "run_options.hpp"

namespace flashkv::cli {

const char* const kRunUsage =
    "  run -m DIR --prompt-ids 1,2,3 | --prompt TEXT | --chat FILE.json [-n N] [--temperature T] [--top-k K] "
    "[--top-p P] [--min-p P]\n"
    "      [--repetition-penalty R] [--presence-penalty P] [--seed S] "
    "[--stop-ids 1,2] [--ignore-eos]\n"
    "      [--device cpu|cuda] [--numerics clean|faithful] [--prefill "
    "exact|ced] [--prefill-chunk N]\n"
    "      [--threads N] [--json]\n"
    "                      generate N tokens (default 16; greedy unless "
    "--temperature > 0) after the prompt;\n"
    "                      prints the tokens as they come, then prefill/decode "
    "tok/s and KV bytes;\n"
    "                      --json prints one object (tokens, prefill_tok_s, "
    "decode_tok_s, kv_bytes_per_token,\n"
    "                      window_bytes, logits_last, ...; see docs/api.md)\n"
    "                      --prompt TEXT: BOS + TEXT under DIR/tokenizer.json (control tokens recognised);\n"
    "                      --chat FILE.json: OpenAI-style messages as the V4.1 chat prompt (docs/chat.md);\n"
    "                      both print text as it comes (--json adds text, and "
    "reasoning/content/tool_calls)\n";

namespace {

constexpr size_t kLogitsShown = 16;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double rate(int64_t tokens, double seconds) {
  return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
}

std::vector<float> head_of(std::span<const float> logits) {
  return {logits.begin(),
          logits.begin() + static_cast<std::ptrdiff_t>(std::min(kLogitsShown, logits.size()))};
}

struct RunReport {
  std::vector<int32_t> tokens;
  const char* stop_reason = "max_tokens";
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::vector<float> logits_last;          // the row the last generated token was drawn from
  std::vector<float> prefill_logits_last;  // the prompt's last row
  int64_t session_tokens = 0;
  uint64_t global_kv_bytes = 0;  // the global KV records of session_tokens tokens (MemoryReport)
  int64_t session_kv_bytes =
      0;             // everything the session's state holds (windows with their rewind margin too)
  std::string text;  // --prompt / --chat: the generated text
  std::optional<ParsedChat> chat;  // --chat: the text parsed into reasoning, content and tool calls
};

// The prompt's token ids: --prompt-ids as given, --prompt as BOS + its text, --chat as the V4.1 prompt.
// `parse` is set for --chat (how to read the answer).
std::vector<int32_t> prompt_ids(const Model& model, const RunOptions& o,
                                std::optional<ChatParseOptions>& parse) {
  if (o.prompt_text) {
    const Tokenizer& tokenizer = model.tokenizer();
    std::vector<int32_t> ids;
    if (tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
    tokenizer.encode_into(*o.prompt_text, ids, /*allow_special=*/true);
    return ids;
  }
  if (!o.chat_file.empty()) {
    std::ifstream file(o.chat_file, std::ios::binary);
    if (!file) fail(ErrorCode::kNotFound, "cannot read the chat file {}", o.chat_file);
    std::stringstream json;
    json << file.rdbuf();
    const ChatRequest request = chat_from_json(json.str());
    parse = ChatParseOptions{request.options.thinking, !request.options.tools.empty(),
                             request.options.tool_choice == ChatToolChoice::kRequired};
    return model.encode_chat(request.messages, request.options);
  }
  return o.prompt;
}

// Prefill progress on stderr, only when the prompt needs more than one chunk.
ProgressCallback progress_printer(int64_t prompt_tokens, int64_t chunk) {
  if (prompt_tokens <= chunk) return {};
  return [](int64_t done, int64_t total) {
    std::fprintf(stderr, "\rprefill: %lld/%lld tokens", static_cast<long long>(done),
                 static_cast<long long>(total));
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
    return true;
  };
}

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kContextFull:
      return "context_full";
    case StopReason::kMaxTokens:
      break;
  }
  return "max_tokens";
}

RunReport generate_with_stats(const Model& model, const RunOptions& o, const std::vector<int32_t>& prompt,
                              const std::optional<ChatParseOptions>& parse) {
  const bool text_mode = o.prompt_text.has_value() || parse.has_value();
  std::optional<Detokenizer> detokenizer;
  if (text_mode) detokenizer.emplace(model.tokenizer(), /*skip_special=*/true);
  std::optional<ChatStreamParser> parser;
  if (parse) parser.emplace(*parse);
  SessionOptions session_options;
  session_options.prefill_chunk = o.prefill_chunk;
  Session session(model, session_options);
  RunReport report;
  const int64_t chunk = o.prefill_chunk > 0 ? o.prefill_chunk : model.options().prefill_chunk;

  const Clock::time_point prefill_start = Clock::now();
  session.append(prompt, progress_printer(static_cast<int64_t>(prompt.size()), chunk));
  report.prefill_seconds = seconds_since(prefill_start);
  report.prefill_logits_last = head_of(session.logits());
  report.logits_last = report.prefill_logits_last;

  GenerateOptions options;
  options.sampling = o.sampling;
  options.max_tokens = o.max_tokens;
  options.stop_tokens = o.stop_tokens;
  options.stop_at_eos = !o.ignore_eos;
  const Clock::time_point decode_start = Clock::now();
  const GenerateResult result = session.generate({}, options, [&](int32_t token) {
    report.logits_last = head_of(session.logits());
    const std::string piece = detokenizer ? detokenizer->push(token) : std::string();
    report.text += piece;
    if (parser) parser->feed(piece);
    if (!o.json) {
      if (detokenizer) {
        std::fputs(piece.c_str(), stdout);
      } else {
        std::printf("%d ", token);
      }
      std::fflush(stdout);
    }
    return true;
  });
  if (detokenizer) {
    const std::string tail = detokenizer->flush();
    report.text += tail;
    if (!o.json) std::fputs(tail.c_str(), stdout);
    if (parser) {
      parser->feed(tail);
      parser->finish();
      report.chat = parser->result();
    }
  }
  report.decode_seconds = seconds_since(decode_start);
  report.tokens = result.tokens;
  report.stop_reason = stop_reason_name(result.reason);
  report.session_tokens = session.length();
  report.global_kv_bytes = model.memory().report.global_kv_bytes(static_cast<uint64_t>(session.length()));
  report.session_kv_bytes = session.kv_bytes();
  return report;
}

void print_text(const Model& model, const RunOptions& o, const std::vector<int32_t>& prompt,
                const RunReport& r) {
  const ModelMemory memory = model.memory();
  const auto generated = static_cast<int64_t>(r.tokens.size());
  std::printf("\n");
  std::printf("prefill: %zu tokens in %.3f s, %.1f tok/s (%s, %s)\n", prompt.size(), r.prefill_seconds,
              rate(static_cast<int64_t>(prompt.size()), r.prefill_seconds), prefill_mode_name(o.load.prefill),
              numerics_name(o.load.numerics));
  std::printf("decode: %lld tokens in %.3f s, %.1f tok/s (stop: %s)\n", static_cast<long long>(generated),
              r.decode_seconds, rate(generated, r.decode_seconds), r.stop_reason);
  std::printf(
      "kv: %.2f B/token global (%llu B for these %lld tokens), %llu B window per session; "
      "the session state holds %lld B\n",
      memory.report.global_kv_bytes_per_token, static_cast<unsigned long long>(r.global_kv_bytes),
      static_cast<long long>(r.session_tokens),
      static_cast<unsigned long long>(memory.report.window_bytes_per_session),
      static_cast<long long>(r.session_kv_bytes));
}

void add_text_fields(nlohmann::ordered_json& j, const RunOptions& o, const RunReport& r) {
  if (!o.prompt_text && !r.chat) return;
  j["text"] = r.text;
  if (!r.chat) return;
  j["reasoning"] = r.chat->reasoning;
  j["content"] = r.chat->content;
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const ChatToolCall& call : r.chat->tool_calls) {
    calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
  }
  j["tool_calls"] = calls;
}

void print_json(const Model& model, const RunOptions& o, const std::vector<int32_t>& prompt,
                const RunReport& r) {
  const ModelMemory memory = model.memory();
  nlohmann::ordered_json j;
  j["tokens"] = r.tokens;
  j["prompt_tokens"] = prompt.size();
  j["prefill_tok_s"] = rate(static_cast<int64_t>(prompt.size()), r.prefill_seconds);
  j["decode_tok_s"] = rate(static_cast<int64_t>(r.tokens.size()), r.decode_seconds);
  j["prefill_seconds"] = r.prefill_seconds;
  j["decode_seconds"] = r.decode_seconds;
  j["kv_bytes_per_token"] = memory.report.global_kv_bytes_per_token;
  j["window_bytes"] = memory.report.window_bytes_per_session;
  j["global_kv_bytes"] = r.global_kv_bytes;
  j["session_kv_bytes"] = r.session_kv_bytes;
  j["weight_bytes"] = memory.resident_weight_bytes;
  j["logits_last"] = r.logits_last;
  j["prefill_logits_last"] = r.prefill_logits_last;
  j["stop_reason"] = r.stop_reason;
  j["device"] = device_name(o.load.device);
  j["numerics"] = numerics_name(o.load.numerics);
  j["prefill"] = prefill_mode_name(o.load.prefill);
  add_text_fields(j, o, r);
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}

}  // namespace

int run_run(std::span<const std::string_view> args) {
  const std::optional<RunOptions> parsed = parse_run_options(args);
  if (!parsed) return 2;
  try {
    validate_sampling_params(parsed->sampling);
  } catch (const Error& e) {
    std::fprintf(stderr, "flashkv run: %s\n", e.what());
    return 2;
  }
  try {
    const Model model = Model::load(parsed->model_dir, parsed->load);
    std::optional<ChatParseOptions> parse;
    const std::vector<int32_t> prompt = prompt_ids(model, *parsed, parse);
    const RunReport report = generate_with_stats(model, *parsed, prompt, parse);
    if (parsed->json) {
      print_json(model, *parsed, prompt, report);
    } else {
      print_text(model, *parsed, prompt, report);
    }
    return 0;
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "flashkv run: %s\n", e.what());
    return 1;
  }
}

}  // namespace flashkv::cli
