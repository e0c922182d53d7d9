// The SAX handler forwards every event to nlohmann's own DOM builder, except between the start and the end of
// model.vocab / model.merges, whose events it consumes itself (the DOM gets a null for that value).
#include "tokenizer/tokenizer_json_reader.hpp"

#include <flashkv/error.hpp>

namespace flashkv::tokenizer {
namespace {

using json = nlohmann::json;
using DomParser = nlohmann::detail::json_sax_dom_parser<json>;

class Reader {
 public:
  explicit Reader(TokenizerJsonDocument& doc) : doc_(doc), dom_(doc.rest, false) {}

  bool null() { return capture_ == Capture::kNone ? dom_.null() : bad("null"); }
  bool boolean(bool v) { return capture_ == Capture::kNone ? dom_.boolean(v) : bad("a boolean"); }
  bool number_integer(json::number_integer_t v) {
    return capture_ == Capture::kNone ? dom_.number_integer(v) : id(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return capture_ == Capture::kNone ? dom_.number_unsigned(v) : id(static_cast<int64_t>(v));
  }
  bool number_float(json::number_float_t v, const std::string& s) {
    return capture_ == Capture::kNone ? dom_.number_float(v, s) : bad("a float");
  }
  bool binary(json::binary_t& v) { return capture_ == Capture::kNone ? dom_.binary(v) : bad("binary"); }

  bool string(std::string& v) {
    if (capture_ == Capture::kNone) return dom_.string(v);
    if (capture_ != Capture::kMerges) return bad("a string value");
    if (depth_ == capture_depth_ + 2) {  // inside a ["a", "b"] pair
      pair_.push_back(std::move(v));
      return pair_.size() <= 2 || bad("a merge pair of more than two strings");
    }
    const std::size_t space = v.find(' ');
    if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos)
      return bad("merge line " + v);
    doc_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
    return true;
  }

  bool key(std::string& k) {
    if (capture_ == Capture::kVocab) {
      key_ = std::move(k);
      return true;
    }
    if (capture_ != Capture::kNone) return bad("an object in merges");
    if (keys_.size() < depth_) keys_.resize(depth_);
    keys_[depth_ - 1] = k;
    return dom_.key(k);
  }

  bool start_object(std::size_t n) {
    if (capture_ != Capture::kNone) return bad("an object");
    if (at_model_member("vocab")) return begin(Capture::kVocab, doc_.has_vocab);
    ++depth_;
    return dom_.start_object(n);
  }
  bool end_object() {
    if (capture_ == Capture::kVocab && depth_ == capture_depth_ + 1) return end();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (capture_ == Capture::kMerges && depth_ == capture_depth_ + 1) {
      ++depth_;
      pair_.clear();
      return true;
    }
    if (capture_ != Capture::kNone) return bad("a nested array");
    if (at_model_member("merges")) return begin(Capture::kMerges, doc_.has_merges);
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    if (capture_ == Capture::kMerges && depth_ == capture_depth_ + 2) {
      --depth_;
      if (pair_.size() != 2) return bad("a merge pair of fewer than two strings");
      doc_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    if (capture_ == Capture::kMerges && depth_ == capture_depth_ + 1) return end();
    --depth_;
    return dom_.end_array();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  enum class Capture { kNone, kVocab, kMerges };

  // The value about to start is the `name` member of the top-level "model" object.
  bool at_model_member(const char* name) const {
    return depth_ == 2 && keys_.size() >= 2 && keys_[0] == "model" && keys_[1] == name;
  }
  bool begin(Capture capture, bool& seen) {
    seen = true;
    capture_ = capture;
    capture_depth_ = depth_;
    ++depth_;
    return true;
  }
  bool end() {
    capture_ = Capture::kNone;
    --depth_;
    return dom_.null();
  }
  bool id(int64_t v) {
    if (capture_ != Capture::kVocab) return bad("a number in merges");
    doc_.vocab.emplace_back(std::move(key_), v);
    return true;
  }
  bool bad(const std::string& what) {
    error_ = (capture_ == Capture::kVocab ? "model.vocab holds " : "model.merges holds ") + what;
    return false;
  }

  TokenizerJsonDocument& doc_;
  DomParser dom_;
  Capture capture_ = Capture::kNone;
  std::size_t depth_ = 0;  // open objects and arrays around the next event
  std::size_t capture_depth_ = 0;
  std::vector<std::string> keys_;  // the last key at each object depth
  std::string key_;
  std::vector<std::string> pair_;
  std::string error_;
};

}  // namespace

TokenizerJsonDocument read_tokenizer_json(std::string_view text, std::string_view origin) {
  TokenizerJsonDocument doc;
  Reader reader(doc);
  if (!json::sax_parse(text, &reader) || !doc.rest.is_object()) {
    fail(ErrorCode::kInvalidCheckpoint, "{}: invalid tokenizer.json: {}", origin,
         reader.error().empty() ? "not a JSON object" : reader.error());
  }
  return doc;
}

}  // namespace flashkv::tokenizer
