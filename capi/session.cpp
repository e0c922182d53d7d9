// fkv_session: create, free, append, logits, sample, rewind, the length / tokens / bytes queries, and the
// snapshot / restore pair. Generation is in generate.cpp, the batched step in decode.cpp.
#include "boundary.hpp"
#include "callbacks.hpp"
#include "handles.hpp"
#include "options.hpp"
#include "struct_io.hpp"

using flashkv::capi::guarded;
using flashkv::capi::require;

extern "C" fkv_status fkv_session_create(const fkv_model* model, const fkv_session_options* options,
                                         fkv_session** out_session) {
  return guarded("fkv_session_create", [&] {
    const fkv_model& m = require(model, "model");
    fkv_session*& out = require(out_session, "out_session");
    out = new fkv_session{flashkv::Session(m.model, flashkv::capi::to_session_options(options))};
  });
}

extern "C" void fkv_session_free(fkv_session* session) {
  delete session;
}

extern "C" fkv_status fkv_session_append(fkv_session* session, const int32_t* tokens, uint64_t n_tokens,
                                         fkv_progress_fn progress, void* progress_user_data) {
  return guarded("fkv_session_append", [&] {
    fkv_session& s = require(session, "session");
    s.session.append(flashkv::capi::input_array(tokens, n_tokens, "tokens"),
                     flashkv::capi::wrap_progress(progress, progress_user_data));
  });
}

extern "C" fkv_status fkv_session_logits(const fkv_session* session, float* logits, uint64_t* count) {
  return guarded("fkv_session_logits", [&] {
    const fkv_session& s = require(session, "session");
    flashkv::capi::copy_array(s.session.logits(), logits, &require(count, "count"), "logits");
  });
}

extern "C" fkv_status fkv_session_sample(const fkv_session* session, const fkv_sampling_params* params,
                                         int32_t* out_token) {
  return guarded("fkv_session_sample", [&] {
    const fkv_session& s = require(session, "session");
    int32_t& out = require(out_token, "out_token");
    out = s.session.sample(flashkv::capi::to_sampling_params(params, "fkv_sampling_params"));
  });
}

extern "C" fkv_status fkv_session_rewind(fkv_session* session, int64_t n) {
  return guarded("fkv_session_rewind", [&] { require(session, "session").session.rewind(n); });
}

extern "C" fkv_status fkv_session_length(const fkv_session* session, int64_t* out_length) {
  return guarded("fkv_session_length", [&] {
    const fkv_session& s = require(session, "session");
    require(out_length, "out_length") = s.session.length();
  });
}

extern "C" fkv_status fkv_session_tokens(const fkv_session* session, int32_t* tokens, uint64_t* count) {
  return guarded("fkv_session_tokens", [&] {
    const fkv_session& s = require(session, "session");
    flashkv::capi::copy_array(s.session.tokens(), tokens, &require(count, "count"), "tokens");
  });
}

extern "C" fkv_status fkv_session_kv_bytes(const fkv_session* session, int64_t* out_bytes) {
  return guarded("fkv_session_kv_bytes", [&] {
    const fkv_session& s = require(session, "session");
    require(out_bytes, "out_bytes") = s.session.kv_bytes();
  });
}

extern "C" fkv_status fkv_session_kv(const fkv_session* session, fkv_kv** out_kv) {
  return guarded("fkv_session_kv", [&] {
    const fkv_session& s = require(session, "session");
    fkv_kv*& out = require(out_kv, "out_kv");
    out = new fkv_kv{s.session.kv()};
  });
}

extern "C" fkv_status fkv_session_restore(fkv_session* session, const fkv_kv* kv) {
  return guarded("fkv_session_restore", [&] {
    fkv_session& s = require(session, "session");
    s.session.restore(require(kv, "kv").handle);
  });
}
