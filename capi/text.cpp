// The text functions of ABI 1.1: fkv_tokenize, fkv_detokenize and fkv_chat_encode over the model's
// tokenizer (Model::tokenizer, loaded from the checkpoint's tokenizer.json) and the V4.1 chat encoder.
// Outputs follow the (buffer, in/out count) convention: a too-small buffer gets the size needed.
#include <string_view>

#include <flashkv/chat.hpp>
#include <flashkv/tokenizer.hpp>

#include "boundary.hpp"
#include "handles.hpp"
#include "struct_io.hpp"

using flashkv::capi::guarded;
using flashkv::capi::require;

namespace {

std::string_view input_text(const char* text, uint64_t length, const char* name) {
  const std::span<const char> bytes = flashkv::capi::input_array(text, length, name);
  return {bytes.data(), bytes.size()};
}

}  // namespace

extern "C" fkv_status fkv_tokenize(const fkv_model* model, const char* text, uint64_t text_len,
                                   int32_t allow_special, int32_t* ids, uint64_t* count) {
  return guarded("fkv_tokenize", [&] {
    const fkv_model& m = require(model, "model");
    uint64_t& n = require(count, "count");
    const std::vector<int32_t> result =
        m.model.tokenizer().encode(input_text(text, text_len, "text"), allow_special != 0);
    flashkv::capi::copy_array(std::span<const int32_t>(result), ids, &n, "ids");
  });
}

extern "C" fkv_status fkv_detokenize(const fkv_model* model, const int32_t* ids, uint64_t n_ids,
                                     int32_t skip_special, char* text, uint64_t* count) {
  return guarded("fkv_detokenize", [&] {
    const fkv_model& m = require(model, "model");
    uint64_t& n = require(count, "count");
    const std::string result =
        m.model.tokenizer().decode(flashkv::capi::input_array(ids, n_ids, "ids"), skip_special != 0);
    flashkv::capi::copy_array(std::span<const char>(result), text, &n, "text");
  });
}

extern "C" fkv_status fkv_chat_encode(const fkv_model* model, const char* chat_json, uint64_t json_len,
                                      int32_t* ids, uint64_t* count) {
  return guarded("fkv_chat_encode", [&] {
    const fkv_model& m = require(model, "model");
    uint64_t& n = require(count, "count");
    const flashkv::ChatRequest request =
        flashkv::chat_from_json(input_text(chat_json, json_len, "chat_json"));
    const std::vector<int32_t> result = m.model.encode_chat(request.messages, request.options);
    flashkv::capi::copy_array(std::span<const int32_t>(result), ids, &n, "ids");
  });
}
