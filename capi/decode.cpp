// fkv_decode: the batched decode step over C session handles.
#include <vector>

#include "boundary.hpp"
#include "handles.hpp"
#include "struct_io.hpp"

extern "C" fkv_status fkv_decode(fkv_session* const* sessions, const int32_t* tokens, uint64_t n) {
  using namespace flashkv;
  return capi::guarded("fkv_decode", [&] {
    const std::span<fkv_session* const> handles = capi::input_array(sessions, n, "sessions");
    const std::span<const int32_t> ids = capi::input_array(tokens, n, "tokens");
    std::vector<Session*> batch;
    batch.reserve(handles.size());
    // A NULL handle becomes a null Session*, which decode() refuses naming its index.
    for (fkv_session* handle : handles) batch.push_back(handle == nullptr ? nullptr : &handle->session);
    decode(batch, ids);
  });
}
