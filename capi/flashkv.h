// flashkv.h — the C ABI of flashkv: load a DeepSeek-V4.1 checkpoint, run sessions, snapshot KV state.
//
// For C and for any runtime with a C FFI (Rust, Go, Python ctypes). Link libflashkv.so (CMake:
// find_package(flashkv) and target flashkv::flashkv; pkg-config: flashkv). docs/c-abi.md is the guide; this
// header is the contract.
//
// Conventions (the same for every function):
// - Every fallible function returns fkv_status: FKV_OK (0) or an error code. On error the calling thread's
//   fkv_last_error() holds a message naming the argument, field, file, tensor or token at fault, and every
//   out-parameter is left untouched unless the function says otherwise.
// - No C++ exception and no signal crosses this boundary: each entry point catches everything.
// - Handles (fkv_model, fkv_session, fkv_kv) are opaque and heap-allocated by the library; each has one
//   *_free. Freeing NULL is a no-op; freeing a handle twice or using it after free is undefined behaviour.
//   A NULL handle passed to any other function is refused with FKV_ERR_INVALID_ARGUMENT.
// - Options structs start with `uint32_t struct_size`. Fill them with their *_init(ptr) function (which sets
//   struct_size and every default), then change the fields you need. A NULL options pointer means "all
//   defaults". A struct_size smaller than the first published layout is refused (FKV_ERR_INVALID_ARGUMENT);
//   one larger than this library knows (a caller built against a newer header) is refused
//   (FKV_ERR_UNSUPPORTED) rather than silently ignoring fields.
// - Output structs (fkv_config, fkv_memory) also start with struct_size: set it to sizeof(the struct) before
//   the call; the library fills the fields that fit and writes back the number of bytes it filled.
// - Buffers are (pointer, count) pairs with fixed-width counts. Functions that copy a variable-length array
//   out take `uint64_t *count` in/out: on entry the capacity of the buffer (in elements), on return the
//   number of elements the result has. A NULL buffer with *count == 0 only asks for the count (FKV_OK); a
//   buffer that is too small gets FKV_ERR_INVALID_ARGUMENT, nothing copied and *count set to the size needed.
// - Callbacks take `void *user_data` (passed back untouched) first, run on the calling thread before the
//   call returns, and cancel the operation by returning non-zero (FKV_ERR_CANCELLED). They must not throw,
//   longjmp out, or call back into the same session.
// - Integer types are fixed-width; enums are passed as int32_t, with the values listed below.
//
// Threading: fkv_model functions may be called from any number of threads at once. An fkv_session is used by
// one thread at a time (different sessions, of one or several models, may run concurrently). An fkv_kv may
// be read (fork, tokens, bytes, restore from it) from any number of threads at once. fkv_last_error() is per
// thread.
//
// Versioning: FKV_ABI_VERSION = (major << 16) | minor. Additions (new functions, new fields appended to an
// options struct, new enum values) raise the minor; anything else raises the major. An exported signature or
// layout is never changed: a changed function is added as *_v2. fkv_model_load checks the caller's
// FKV_ABI_VERSION against the library's.
#ifndef FLASHKV_H
#define FLASHKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define FKV_API __attribute__((visibility("default")))
#else
#define FKV_API
#endif

#define FKV_ABI_VERSION_MAJOR 1u
#define FKV_ABI_VERSION_MINOR 1u  // 1.1: fkv_tokenize, fkv_detokenize, fkv_chat_encode
#define FKV_ABI_VERSION ((FKV_ABI_VERSION_MAJOR << 16) | FKV_ABI_VERSION_MINOR)  // 0x00010001

// ---------------------------------------------------------------------------------------------------------
// Status codes. Values are stable and equal to flashkv::ErrorCode of the C++ API.

typedef int32_t fkv_status;
enum {
  FKV_OK = 0,
  FKV_ERR_INVALID_ARGUMENT = 1,    // an argument is NULL, out of range or inconsistent
  FKV_ERR_INVALID_CONFIG = 2,      // config.json is malformed or breaks a rule of the model
  FKV_ERR_INVALID_CHECKPOINT = 3,  // a checkpoint file is malformed, truncated or disagrees with the config
  FKV_ERR_NOT_FOUND = 4,           // a file, tensor or key that must exist does not
  FKV_ERR_IO = 5,                  // the OS refused a read, open or map
  FKV_ERR_UNSUPPORTED = 6,         // valid input this build cannot handle (device, ABI version, struct_size)
  FKV_ERR_DEVICE = 7,              // a CUDA call failed
  FKV_ERR_OUT_OF_MEMORY = 8,
  FKV_ERR_CANCELLED = 9,  // a callback returned non-zero
  FKV_ERR_INTERNAL = 10   // a broken invariant inside flashkv: a bug, please report it
};

// Stable lower-case name of a status ("ok", "invalid_argument", ...; "unknown" for other values). Static
// storage; never NULL. Thread-safe.
FKV_API const char* fkv_status_string(fkv_status status);

// Message of the most recent call on this thread that returned an error ("" if none has). The string is owned
// by the library and stays valid until the next fkv_* call on this thread. Never NULL. Thread-local.
FKV_API const char* fkv_last_error(void);

// FKV_ABI_VERSION of the library that is loaded (compare with the header's to detect a mismatch).
// Thread-safe.
FKV_API uint32_t fkv_abi_version(void);

// The library's release version, e.g. "0.1.0". Static storage. Thread-safe.
FKV_API const char* fkv_version_string(void);

// ---------------------------------------------------------------------------------------------------------
// Enumerations (int32_t fields).

enum { FKV_DEVICE_CPU = 0, FKV_DEVICE_CUDA = 1 };

// clean: fp32 with the KV quantizers off (compares with the numpy reference). faithful: the checkpoint's
// storage formats and cast points; the default.
enum { FKV_NUMERICS_CLEAN = 0, FKV_NUMERICS_FAITHFUL = 1 };

// exact: every prompt row through every layer. ced: causal encoder-decoder prefill for a session's first
// append. FKV_PREFILL_MODEL (session options only): the model's load-time choice.
enum { FKV_PREFILL_MODEL = -1, FKV_PREFILL_EXACT = 0, FKV_PREFILL_CED = 1 };

// Why fkv_session_generate stopped (when it returned FKV_OK).
enum { FKV_STOP_MAX_TOKENS = 0, FKV_STOP_TOKEN = 1, FKV_STOP_CONTEXT_FULL = 2 };

enum { FKV_LOG_DEBUG = 0, FKV_LOG_INFO = 1, FKV_LOG_WARNING = 2, FKV_LOG_ERROR = 3 };

// ---------------------------------------------------------------------------------------------------------
// Callbacks. Each returns 0 to continue, non-zero to cancel.

// One generated token, called before it is appended to the session. A cancelled token is not appended.
typedef int32_t (*fkv_token_fn)(void* user_data, int32_t token);
// Prefill progress: called after each prompt chunk with the rows done so far and the total.
typedef int32_t (*fkv_progress_fn)(void* user_data, int64_t done, int64_t total);
// A log line (FKV_LOG_* level; the message is valid during the call only).
typedef int32_t (*fkv_log_fn)(void* user_data, int32_t level, const char* message);

// ---------------------------------------------------------------------------------------------------------
// Opaque handles.

typedef struct fkv_model fkv_model;      // a loaded checkpoint; immutable; thread-safe
typedef struct fkv_session fkv_session;  // one token timeline over one KV state; one thread at a time
typedef struct fkv_kv fkv_kv;            // an immutable snapshot of a session's KV state; thread-safe

// ---------------------------------------------------------------------------------------------------------
// Options structs.

typedef struct fkv_load_options {
  uint32_t struct_size;
  int32_t device;         // FKV_DEVICE_CPU (default); FKV_DEVICE_CUDA is refused until the CUDA engine lands
  int32_t threads;        // backend worker threads; 0 (default): the hardware's concurrency; >= 0
  int32_t numerics;       // FKV_NUMERICS_FAITHFUL (default) or FKV_NUMERICS_CLEAN
  int32_t prefill;        // FKV_PREFILL_EXACT (default) or FKV_PREFILL_CED: sessions' default
  uint32_t reserved0;     // 0
  int64_t prefill_chunk;  // rows per prefill forward; default 512; > 0
  fkv_log_fn log;         // optional (NULL): lines about the load; non-zero return cancels the load
  void* log_user_data;
} fkv_load_options;

typedef struct fkv_session_options {
  uint32_t struct_size;
  int32_t prefill;        // FKV_PREFILL_MODEL (default), FKV_PREFILL_EXACT or FKV_PREFILL_CED
  int64_t prefill_chunk;  // rows per prefill forward; 0 (default): the model's; >= 0
} fkv_session_options;

// Filters apply in this order: penalties, temperature, top-k, top-p, min-p (docs/sampling.md).
typedef struct fkv_sampling_params {
  uint32_t struct_size;
  float temperature;         // default 1; 0 = greedy (argmax, lowest id among ties); finite, >= 0
  int32_t top_k;             // default 0 = off; >= 0
  float top_p;               // default 1 = off; in (0, 1]
  float min_p;               // default 0 = off; in [0, 1]
  float repetition_penalty;  // default 1 = off; finite, > 0
  float presence_penalty;    // default 0 = off; finite
  float frequency_penalty;   // default 0 = off; finite
  uint64_t seed;             // default 0; same seed, same session, same draws
} fkv_sampling_params;

typedef struct fkv_generate_options {
  uint32_t struct_size;
  int32_t stop_at_eos;                  // default 1: also stop at the config's eos_token_id
  int64_t max_tokens;                   // default 256; >= 0 (0: prefill only)
  const fkv_sampling_params* sampling;  // NULL (default): fkv_sampling_params_init's defaults
  const int32_t* stop_tokens;           // ids in [0, vocab) that end generation; may be NULL when n is 0
  uint64_t n_stop_tokens;
  fkv_token_fn on_token;  // optional: each token before it is appended
  void* on_token_user_data;
  fkv_progress_fn on_progress;  // optional: the prompt's prefill progress
  void* on_progress_user_data;
} fkv_generate_options;

// Fill *options with struct_size and the defaults above. They fill the layout of the header version that
// introduced them (ABI 1.0) and never more, so a caller built against an older header is safe.
// NULL -> FKV_ERR_INVALID_ARGUMENT. Thread-safe.
FKV_API fkv_status fkv_load_options_init(fkv_load_options* options);
FKV_API fkv_status fkv_session_options_init(fkv_session_options* options);
FKV_API fkv_status fkv_sampling_params_init(fkv_sampling_params* params);
FKV_API fkv_status fkv_generate_options_init(fkv_generate_options* options);

// ---------------------------------------------------------------------------------------------------------
// Model.

// Loads the checkpoint directory `checkpoint_dir` (config.json + safetensors shards, UTF-8 path) and returns
// a new model in *out_model. Pass FKV_ABI_VERSION as `abi_version`: a different major, or a minor newer than
// the library's, is refused with FKV_ERR_UNSUPPORTED. options may be NULL (defaults).
// Ownership: the caller owns *out_model and frees it with fkv_model_free. The library keeps no reference to
// the path or the options after the call.
// Errors: FKV_ERR_NOT_FOUND / FKV_ERR_IO (file), FKV_ERR_INVALID_CONFIG (field named),
// FKV_ERR_INVALID_CHECKPOINT (tensor named), FKV_ERR_UNSUPPORTED (device, ABI version),
// FKV_ERR_INVALID_ARGUMENT (NULL argument, bad option named), FKV_ERR_CANCELLED (log callback).
// Threading: any thread; loads may run concurrently.
FKV_API fkv_status fkv_model_load(uint32_t abi_version, const char* checkpoint_dir,
                                  const fkv_load_options* options, fkv_model** out_model);

// Releases the caller's reference. Sessions and snapshots made from the model keep its weights alive, so the
// model may be freed before them. NULL is a no-op. Must not race with other calls on the same handle.
FKV_API void fkv_model_free(fkv_model* model);

// The options the model was loaded with (log and log_user_data are NULL). options->struct_size must be set
// (fkv_load_options_init does). Thread-safe.
FKV_API fkv_status fkv_model_load_options(const fkv_model* model, fkv_load_options* options);

// Shape and token facts of the model's config.json.
typedef struct fkv_config {
  uint32_t struct_size;  // in: sizeof(fkv_config); out: bytes filled
  int32_t num_hidden_layers;
  int64_t vocab_size;  // token ids are [0, vocab_size)
  int64_t hidden_size;
  int64_t num_attention_heads;
  int64_t head_dim;
  int64_t qk_rope_head_dim;
  int64_t sliding_window;
  int64_t max_position_embeddings;  // the longest sequence a session may hold
  int64_t n_routed_experts;
  int64_t n_shared_experts;
  int64_t num_experts_per_tok;
  int64_t moe_intermediate_size;
  int64_t index_topk;
  int64_t bos_token_id;
  int64_t eos_token_id;
  int32_t num_nextn_predict_layers;  // DSpark draft stages
  int32_t num_engram_layers;
} fkv_config;

// Fills *config. Thread-safe.
FKV_API fkv_status fkv_model_config(const fkv_model* model, fkv_config* config);

// Cache and weight footprint: the config's figures plus what this load holds.
typedef struct fkv_memory {
  uint32_t struct_size;  // in: sizeof(fkv_memory); out: bytes filled
  uint32_t reserved0;
  double global_kv_bytes_per_token;  // sum of (entry + index key) / ratio over KV sources; 890 official
  uint64_t kv_entry_bytes;           // NVFP4 compressed entry (288 for head_dim 512)
  uint64_t index_key_bytes;          // MXFP4 index key (68 for index_head_dim 128)
  uint64_t window_row_bytes;         // FP8 window row (528 for head_dim 512)
  uint64_t window_bytes_per_session;
  uint64_t compressor_state_bytes_per_session;
  uint64_t weight_bytes_estimate;  // in the checkpoint's storage formats
  uint64_t resident_weight_bytes;  // held by the backend after this load
  uint64_t parameters_total;
  uint64_t parameters_active_per_token;
  const char* weight_storage;  // e.g. "fp32, dequantized at load"; owned by the fkv_model handle: valid until
                               // fkv_model_free (sessions keeping the weights do not keep this text)
} fkv_memory;

// Fills *memory. Thread-safe.
FKV_API fkv_status fkv_model_memory(const fkv_model* model, fkv_memory* memory);

// Exact global KV bytes of a sequence of `tokens` tokens (only complete groups publish entries). Thread-safe.
FKV_API fkv_status fkv_model_global_kv_bytes(const fkv_model* model, uint64_t tokens, uint64_t* out_bytes);

// ---------------------------------------------------------------------------------------------------------
// Session.

// A new empty session of `model`. options may be NULL (defaults).
// Ownership: the caller owns *out_session (free with fkv_session_free); it keeps the model's weights alive.
// Threading: any thread; the new session is then used by one thread at a time.
FKV_API fkv_status fkv_session_create(const fkv_model* model, const fkv_session_options* options,
                                      fkv_session** out_session);

// NULL is a no-op. Snapshots taken from the session stay valid.
FKV_API void fkv_session_free(fkv_session* session);

// Runs tokens[0..n_tokens) through the model (prefill in chunks). progress may be NULL; it is called after
// each chunk and cancels with a non-zero return (FKV_ERR_CANCELLED; the session keeps the chunks done and
// stays usable). Errors: FKV_ERR_INVALID_ARGUMENT for n_tokens == 0, an id outside [0, vocab) (the message
// names the position and the id) or a sequence that would pass max_position_embeddings; the session is then
// unchanged.
FKV_API fkv_status fkv_session_append(fkv_session* session, const int32_t* tokens, uint64_t n_tokens,
                                      fkv_progress_fn progress, void* progress_user_data);

// Copies the fp32 logits predicting the next token (vocab_size entries) into logits[0..*count) (see the
// count convention above). FKV_ERR_INVALID_ARGUMENT on an empty session.
FKV_API fkv_status fkv_session_logits(const fkv_session* session, float* logits, uint64_t* count);

// Draws the next token from the logits under params (NULL: defaults) into *out_token, without appending it.
// Deterministic in (params, the session's tokens). FKV_ERR_INVALID_ARGUMENT on an empty session or a bad
// field (named).
FKV_API fkv_status fkv_session_sample(const fkv_session* session, const fkv_sampling_params* params,
                                      int32_t* out_token);

// Appends prompt[0..n_prompt) (may be empty to continue a non-empty session), then samples and appends up to
// options->max_tokens tokens, stopping early at a stop token (which is kept), at eos (stop_at_eos), when the
// session is full, or when a callback cancels. options may be NULL (defaults).
// Output: the generated tokens are copied to tokens_out[0..) — tokens_capacity must be >= max_tokens, or 0
// with tokens_out NULL to receive them only through on_token. *n_generated (may be NULL) gets the count and
// *stop_reason (may be NULL) an FKV_STOP_* value. On FKV_ERR_CANCELLED these outputs still describe the
// tokens appended before the cancellation (stop_reason is then not written); the session keeps them and stays
// usable.
FKV_API fkv_status fkv_session_generate(fkv_session* session, const int32_t* prompt, uint64_t n_prompt,
                                        const fkv_generate_options* options, int32_t* tokens_out,
                                        uint64_t tokens_capacity, uint64_t* n_generated,
                                        int32_t* stop_reason);

// Drops the last n tokens, exactly (within the retained window history). FKV_ERR_INVALID_ARGUMENT beyond
// the session's length or history; the session is then unchanged.
FKV_API fkv_status fkv_session_rewind(fkv_session* session, int64_t n);

// Number of tokens the session holds.
FKV_API fkv_status fkv_session_length(const fkv_session* session, int64_t* out_length);

// Copies the session's token ids, oldest first (count convention above).
FKV_API fkv_status fkv_session_tokens(const fkv_session* session, int32_t* tokens, uint64_t* count);

// Bytes of KV state held now (global records, window rows, pending state).
FKV_API fkv_status fkv_session_kv_bytes(const fkv_session* session, int64_t* out_bytes);

// Snapshots the session's KV state into a new handle. The caller owns *out_kv (fkv_kv_free).
FKV_API fkv_status fkv_session_kv(const fkv_session* session, fkv_kv** out_kv);

// Replaces the session's state with the snapshot's (exact continuation). FKV_ERR_INVALID_ARGUMENT for a
// snapshot of another model (a separate load). The snapshot is not consumed.
FKV_API fkv_status fkv_session_restore(fkv_session* session, const fkv_kv* kv);

// Appends tokens[i] to sessions[i] for every i < n in one batched forward; equal to appending them one by
// one. All sessions must be distinct, non-NULL and of one model. Everything is validated first: on an error
// (the message names the session index) no session changes. Threading: the caller must own every session
// in the batch for the duration of the call.
FKV_API fkv_status fkv_decode(fkv_session* const* sessions, const int32_t* tokens, uint64_t n);

// ---------------------------------------------------------------------------------------------------------
// KV snapshots.

// Another handle to the same immutable snapshot (no copy). The caller owns *out_kv.
FKV_API fkv_status fkv_kv_fork(const fkv_kv* kv, fkv_kv** out_kv);

// Releases this handle; the snapshot is freed with its last handle. NULL is a no-op.
FKV_API void fkv_kv_free(fkv_kv* kv);

// Copies the snapshot's token ids, oldest first (count convention above).
FKV_API fkv_status fkv_kv_tokens(const fkv_kv* kv, int32_t* tokens, uint64_t* count);

// Bytes of KV state the snapshot holds.
FKV_API fkv_status fkv_kv_bytes(const fkv_kv* kv, int64_t* out_bytes);

// ---------------------------------------------------------------------------------------------------------
// Text (ABI 1.1). The model's tokenizer is the checkpoint directory's tokenizer.json, loaded with the model;
// without one these return FKV_ERR_NOT_FOUND. Outputs use the count convention above (a NULL buffer with
// *count == 0 asks for the size). Threading: like every fkv_model function, any thread, concurrently.

// Token ids of text[0..text_len) (UTF-8; invalid bytes are read as U+FFFD) into ids[0..*count). With
// allow_special == 0 the text is plain: control tokens such as <｜User｜> written in it are not recognised.
// No BOS is added.
FKV_API fkv_status fkv_tokenize(const fkv_model* model, const char* text, uint64_t text_len,
                                int32_t allow_special, int32_t* ids, uint64_t* count);

// UTF-8 text of ids[0..n_ids) into text[0..*count) bytes, not NUL-terminated (an id cut inside a character
// gives U+FFFD). skip_special != 0 drops the tokens the tokenizer marks special (BOS, EOS, pad).
// FKV_ERR_INVALID_ARGUMENT for an id outside the vocabulary.
FKV_API fkv_status fkv_detokenize(const fkv_model* model, const int32_t* ids, uint64_t n_ids,
                                  int32_t skip_special, char* text, uint64_t* count);

// Token ids of the DeepSeek-V4.1 chat prompt of chat_json[0..json_len): OpenAI-style JSON, a list of
// messages or {"messages": [...], "tools", "tool_choice", "thinking", "reasoning_effort", "response_format"}
// (docs/chat.md), ending with the generation prompt. FKV_ERR_INVALID_ARGUMENT names the JSON field at fault.
FKV_API fkv_status fkv_chat_encode(const fkv_model* model, const char* chat_json, uint64_t json_len,
                                   int32_t* ids, uint64_t* count);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // FLASHKV_H
