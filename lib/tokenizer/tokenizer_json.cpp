// tokenizer.json -> TokenizerData. Accepts what the DeepSeek tokenizers use and rejects, by name, every
// option that would change the ids (rather than silently encoding differently from tokenizers).
#include <algorithm>
#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include <flashkv/error.hpp>

#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer_data.hpp"
#include "tokenizer/tokenizer_json_reader.hpp"

namespace flashkv::tokenizer {
namespace {

using nlohmann::json;

struct Context {
  std::string_view origin;

  [[noreturn]] void unsupported(std::string_view what, const json& value) const {
    fail(ErrorCode::kUnsupported, "{}: unsupported tokenizer.json {}: {}", origin, what,
         value.dump().substr(0, 300));
  }
  [[noreturn]] void invalid(std::string_view what) const {
    fail(ErrorCode::kInvalidCheckpoint, "{}: invalid tokenizer.json: {}", origin, what);
  }
};

bool is_null_or(const json& j, const char* key, const json& expected) {
  return !j.contains(key) || j[key].is_null() || j[key] == expected;
}

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") ? j["type"].get<std::string>() : "";
}

void check_normalizer(const json& normalizer, const Context& ctx) {
  if (normalizer.is_null()) return;
  if (type_of(normalizer) == "Sequence" && normalizer.value("normalizers", json::array()).empty()) return;
  ctx.unsupported("normalizer", normalizer);
}

// ByteLevel must come last (it is the BPE alphabet) and must not add a space or run its own regex.
void add_pre_tokenizer_step(const json& step, std::vector<SplitMatcher>& rules, bool& byte_level,
                            const Context& ctx) {
  const std::string type = type_of(step);
  if (byte_level) ctx.unsupported("pre_tokenizer step after ByteLevel", step);
  if (type == "ByteLevel") {
    if (step.value("add_prefix_space", false) || step.value("use_regex", true)) {
      ctx.unsupported("ByteLevel pre_tokenizer (add_prefix_space or use_regex)", step);
    }
    byte_level = true;
    return;
  }
  if (type != "Split" || step.value("behavior", "") != "Isolated" || step.value("invert", false) ||
      !step.contains("pattern") || !step["pattern"].contains("Regex")) {
    ctx.unsupported("pre_tokenizer step", step);
  }
  const auto matcher = find_split_pattern(step["pattern"]["Regex"].get<std::string>());
  if (!matcher) ctx.unsupported("Split regex", step["pattern"]["Regex"]);
  rules.push_back(*matcher);
}

PreTokenizer parse_pre_tokenizer(const json& pre, const Context& ctx) {
  std::vector<SplitMatcher> rules;
  bool byte_level = false;
  if (type_of(pre) == "Sequence") {
    for (const json& step : pre.at("pretokenizers")) add_pre_tokenizer_step(step, rules, byte_level, ctx);
  } else if (pre.is_object()) {
    add_pre_tokenizer_step(pre, rules, byte_level, ctx);
  }
  if (!byte_level) ctx.unsupported("pre_tokenizer without ByteLevel", pre);
  return PreTokenizer(std::move(rules));
}

void check_model_options(const json& model, const Context& ctx) {
  if (!is_null_or(model, "type", "BPE")) ctx.unsupported("model type", model["type"]);
  if (!is_null_or(model, "dropout", json()) || !is_null_or(model, "continuing_subword_prefix", "") ||
      !is_null_or(model, "end_of_word_suffix", "") || !is_null_or(model, "byte_fallback", false)) {
    ctx.unsupported("BPE option (dropout, continuing_subword_prefix, end_of_word_suffix, byte_fallback)",
                    json{{"dropout", model.value("dropout", json())}});
  }
}

void ensure_id(TokenizerData& d, int32_t id, const Context& ctx) {
  if (id < 0 || id > (1 << 30)) ctx.invalid("token id " + std::to_string(id));
  const auto size = static_cast<std::size_t>(id) + 1;
  if (d.tokens.size() < size) {
    d.tokens.resize(size);
    d.kinds.resize(size, TokenKind::kUnassigned);
  }
}

void parse_model(const TokenizerJsonDocument& doc, TokenizerData& d, const Context& ctx) {
  const json& model = doc.rest.at("model");
  check_model_options(model, ctx);
  if (!doc.has_vocab || !doc.has_merges) ctx.invalid("model has no vocab or no merges");
  d.ids.reserve(doc.vocab.size() + 2048);
  std::unordered_map<std::string, int32_t> by_bytes;
  by_bytes.reserve(doc.vocab.size());
  for (const auto& [token, id64] : doc.vocab) {
    // out-of-range ids stay out of range (ensure_id rejects them) without overflowing int32_t
    const auto id = static_cast<int32_t>(std::clamp<int64_t>(id64, -1, (int64_t{1} << 30) + 1));
    ensure_id(d, id, ctx);
    d.tokens[static_cast<std::size_t>(id)] = token;
    d.kinds[static_cast<std::size_t>(id)] = TokenKind::kModel;
    d.ids[token] = id;
    std::string bytes;
    if (byte_level_decode(token, bytes)) by_bytes.emplace(std::move(bytes), id);
  }
  std::array<int32_t, 256> byte_ids{};
  std::optional<int32_t> unk;
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = d.ids.find(model["unk_token"].get<std::string>());
    if (it == d.ids.end()) ctx.invalid("unk_token not in vocab");
    unk = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    byte_ids[static_cast<std::size_t>(b)] = it != by_bytes.end() ? it->second : unk.value_or(-1);
  }
  MergeTable table(doc.merges.size());
  int32_t rank = 0;
  std::string merged;
  for (const auto& [left, right] : doc.merges) {
    merged.assign(left).append(right);
    const auto l = d.ids.find(left), r = d.ids.find(right), m = d.ids.find(merged);
    if (l == d.ids.end() || r == d.ids.end() || m == d.ids.end()) {
      ctx.invalid(fmt::format("merge of unknown tokens \"{} {}\"", left, right));
    }
    table.insert(l->second, r->second, Merge{rank++, m->second});
  }
  d.bpe = BpeModel(byte_ids, std::move(table), model.value("ignore_merges", false), std::move(by_bytes));
}

void parse_added_tokens(const json& added, TokenizerData& d, const Context& ctx) {
  for (const json& token : added) {
    if (token.value("lstrip", false) || token.value("rstrip", false) || token.value("single_word", false)) {
      ctx.unsupported("added token option (lstrip, rstrip, single_word)", token);
    }
    const auto id = token.at("id").get<int32_t>();
    const auto content = token.at("content").get<std::string>();
    ensure_id(d, id, ctx);
    d.tokens[static_cast<std::size_t>(id)] = content;
    d.kinds[static_cast<std::size_t>(id)] =
        token.value("special", false) ? TokenKind::kSpecial : TokenKind::kAdded;
    d.ids[content] = id;
    (token.value("normalized", false) ? d.added_normalized : d.added_raw).add(content, id);
  }
}

// The bytes each id decodes to, as tokenizers' ByteLevel decoder does it: through the byte alphabet when
// every character is in it, else the string's own UTF-8 bytes (added tokens such as <｜User｜>).
void build_token_bytes(TokenizerData& d) {
  d.byte_offsets.assign(1, 0);
  for (const std::string& token : d.tokens) {
    if (!byte_level_decode(token, d.token_bytes)) d.token_bytes += token;
    d.byte_offsets.push_back(static_cast<uint32_t>(d.token_bytes.size()));
  }
}

std::optional<int32_t> config_token(const json& config, const char* key, const TokenizerData& d,
                                    const Context& ctx) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& value = config[key];
  const std::string content =
      value.is_object() ? value.at("content").get<std::string>() : value.get<std::string>();
  const auto it = d.ids.find(content);
  if (it == d.ids.end()) ctx.invalid(fmt::format("tokenizer_config.json {} {} is not a token", key, content));
  return it->second;
}

json parse_json(std::string_view text, std::string_view what, const Context& ctx) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) ctx.invalid(fmt::format("{} is not a JSON object", what));
  return j;
}

}  // namespace

TokenizerData load_tokenizer_data(std::string_view tokenizer_json, std::string_view config_json,
                                  std::string_view origin) {
  const Context ctx{origin};
  const TokenizerJsonDocument doc = read_tokenizer_json(tokenizer_json, origin);
  const json& j = doc.rest;
  TokenizerData d;
  try {
    check_normalizer(j.value("normalizer", json()), ctx);
    d.pre_tokenizer = parse_pre_tokenizer(j.value("pre_tokenizer", json()), ctx);
    if (type_of(j.value("decoder", json())) != "ByteLevel")
      ctx.unsupported("decoder", j.value("decoder", json()));
    parse_model(doc, d, ctx);
    parse_added_tokens(j.value("added_tokens", json::array()), d, ctx);
    if (!config_json.empty()) {
      const json config = parse_json(config_json, "tokenizer_config.json", ctx);
      d.bos = config_token(config, "bos_token", d, ctx);
      d.eos = config_token(config, "eos_token", d, ctx);
    }
  } catch (const json::exception& e) {
    ctx.invalid(e.what());
  }
  build_token_bytes(d);
  return d;
}

}  // namespace flashkv::tokenizer
