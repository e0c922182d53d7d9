// fkv_kv: fork, free and the queries of a KV snapshot.
#include "boundary.hpp"
#include "handles.hpp"
#include "struct_io.hpp"

using flashkv::capi::guarded;
using flashkv::capi::require;

extern "C" fkv_status fkv_kv_fork(const fkv_kv* kv, fkv_kv** out_kv) {
  return guarded("fkv_kv_fork", [&] {
    const fkv_kv& k = require(kv, "kv");
    fkv_kv*& out = require(out_kv, "out_kv");
    out = new fkv_kv{k.handle.fork()};
  });
}

extern "C" void fkv_kv_free(fkv_kv* kv) {
  delete kv;
}

extern "C" fkv_status fkv_kv_tokens(const fkv_kv* kv, int32_t* tokens, uint64_t* count) {
  return guarded("fkv_kv_tokens", [&] {
    const fkv_kv& k = require(kv, "kv");
    flashkv::capi::copy_array(k.handle.tokens(), tokens, &require(count, "count"), "tokens");
  });
}

extern "C" fkv_status fkv_kv_bytes(const fkv_kv* kv, int64_t* out_bytes) {
  return guarded("fkv_kv_bytes", [&] {
    const fkv_kv& k = require(kv, "kv");
    require(out_bytes, "out_bytes") = k.handle.bytes();
  });
}
