// C shims between the Go package and flashkv.h: they place the exported Go trampolines and their cgo.Handle
// user_data (an integer, never a Go pointer) into the options structs on the C side, so that Go never builds a
// struct holding pointers for C.
#ifndef FLASHKV_GO_BRIDGE_H
#define FLASHKV_GO_BRIDGE_H

#include <stdint.h>

#include <flashkv.h>

// log_handle 0: no log callback.
fkv_status flashkv_go_load(const char *path, fkv_load_options options, uintptr_t log_handle, fkv_model **out);

// progress_handle 0: no progress callback.
fkv_status flashkv_go_append(fkv_session *session, const int32_t *tokens, uint64_t n_tokens,
                             uintptr_t progress_handle);

// Always streams tokens through the Go token trampoline (token_handle != 0); progress_handle 0: none.
fkv_status flashkv_go_generate(fkv_session *session, const int32_t *prompt, uint64_t n_prompt,
                               fkv_generate_options options, const fkv_sampling_params *sampling,
                               const int32_t *stop_tokens, uint64_t n_stop_tokens, uintptr_t token_handle,
                               uintptr_t progress_handle, int32_t *stop_reason);

#endif
