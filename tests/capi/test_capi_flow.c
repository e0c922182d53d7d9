/* The whole flow of flashkv.h on a tiny-v41 checkpoint (tests/data/configs/tiny-v41), in plain C:
   load, config and memory queries against facts hand-computed from the config and spec/MODEL.md §2.2,
   session create / append / logits / sample / generate / rewind, snapshot fork and restore, batched decode,
   and the lifetime rule that sessions outlive the model handle.

     test_capi_flow CHECKPOINT_DIR        (prompts are drawn from a per-run seed; FKV_TEST_SEED replays) */
#include <math.h>

#include "capi_check.h"

/* tiny-v41 facts, read off tests/data/configs/tiny-v41/config.json. */
enum { kVocab = 512, kLayers = 8, kHeadDim = 64, kIndexHeadDim = 32, kWindow = 16, kEos = 1 };

typedef struct {
  int32_t tokens[64];
  uint64_t count;
  int64_t cancel_at; /* cancel when this many tokens were seen (-1: never) */
} token_log;

static int32_t record_token(void* user_data, int32_t token) {
  token_log* log = (token_log*)user_data;
  if (log->cancel_at >= 0 && (int64_t)log->count == log->cancel_at) return 1;
  if (log->count < 64) log->tokens[log->count] = token;
  ++log->count;
  return 0;
}

typedef struct {
  int64_t calls, last_done, total;
  int monotone;
} progress_log;

static int32_t record_progress(void* user_data, int64_t done, int64_t total) {
  progress_log* log = (progress_log*)user_data;
  if (done <= log->last_done) log->monotone = 0;
  log->last_done = done;
  log->total = total;
  ++log->calls;
  return 0;
}

typedef struct {
  int lines, errors;
  int named_dir;
  const char* dir;
} load_log;

static int32_t record_log(void* user_data, int32_t level, const char* message) {
  load_log* log = (load_log*)user_data;
  ++log->lines;
  if (level == FKV_LOG_ERROR) ++log->errors;
  if (strstr(message, log->dir) != NULL) log->named_dir = 1;
  return 0;
}

static void read_logits(const fkv_session* session, float* logits) {
  uint64_t count = kVocab;
  REQUIRE_OK(fkv_session_logits(session, logits, &count));
  REQUIRE(count == kVocab);
}

static int64_t length_of(const fkv_session* session) {
  int64_t length = -1;
  REQUIRE_OK(fkv_session_length(session, &length));
  return length;
}

/* Greedy by hand: the largest logit, the lowest id among equal maxima (sampling.hpp). */
static int32_t argmax(const float* logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < kVocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

static int same_floats(const float* a, const float* b, size_t n) {
  return memcmp(a, b, n * sizeof(float)) == 0;
}

static fkv_model* load(const char* dir, int32_t numerics, load_log* log) {
  fkv_load_options options;
  REQUIRE_OK(fkv_load_options_init(&options));
  options.numerics = numerics;
  options.threads = 2;
  if (log != NULL) {
    options.log = record_log;
    options.log_user_data = log;
  }
  fkv_model* model = NULL;
  REQUIRE_OK(fkv_model_load(FKV_ABI_VERSION, dir, &options, &model));
  REQUIRE(model != NULL);
  return model;
}

static void check_version(void) {
  CHECK(fkv_abi_version() == FKV_ABI_VERSION);
  CHECK(FKV_ABI_VERSION == 0x00010001u);
  CHECK(strlen(fkv_version_string()) >= 5);
  CHECK(strcmp(fkv_status_string(FKV_OK), "ok") == 0);
  CHECK(strcmp(fkv_last_error(), "") == 0); /* nothing failed yet on this thread */
}

static void check_config_and_memory(const fkv_model* model) {
  fkv_config config;
  memset(&config, 0xab, sizeof config);
  config.struct_size = sizeof config;
  REQUIRE_OK(fkv_model_config(model, &config));
  CHECK(config.struct_size == sizeof config);
  CHECK(config.vocab_size == kVocab);
  CHECK(config.hidden_size == 256);
  CHECK(config.num_hidden_layers == kLayers);
  CHECK(config.num_attention_heads == 4);
  CHECK(config.head_dim == kHeadDim);
  CHECK(config.qk_rope_head_dim == 16);
  CHECK(config.sliding_window == kWindow);
  CHECK(config.max_position_embeddings == 4096);
  CHECK(config.n_routed_experts == 8);
  CHECK(config.n_shared_experts == 1);
  CHECK(config.num_experts_per_tok == 2);
  CHECK(config.moe_intermediate_size == 64);
  CHECK(config.index_topk == 16);
  CHECK(config.bos_token_id == 0);
  CHECK(config.eos_token_id == kEos);
  CHECK(config.num_nextn_predict_layers == 0);
  CHECK(config.num_engram_layers == 2);

  /* MODEL.md §2.2: NVFP4 entry = d/2 + d/16 bytes, MXFP4 key = d/2 + d/32, FP8 row = d + d/32. KV sources
     are layers 2 (ratio 2) and 4 (ratio 1), so a token costs (36 + 17) / 2 + (36 + 17) bytes. */
  const uint64_t entry = kHeadDim / 2 + kHeadDim / 16, key = kIndexHeadDim / 2 + kIndexHeadDim / 32;
  fkv_memory memory;
  memset(&memory, 0xab, sizeof memory);
  memory.struct_size = sizeof memory;
  REQUIRE_OK(fkv_model_memory(model, &memory));
  CHECK(memory.struct_size == sizeof memory);
  CHECK(memory.kv_entry_bytes == entry);
  CHECK(memory.index_key_bytes == key);
  CHECK(memory.window_row_bytes == kHeadDim + kHeadDim / 32);
  CHECK(memory.global_kv_bytes_per_token == (double)(entry + key) / 2 + (double)(entry + key));
  CHECK(memory.window_bytes_per_session == (uint64_t)kLayers * kWindow * (kHeadDim + kHeadDim / 32));
  CHECK(memory.resident_weight_bytes == memory.parameters_total * 4); /* fp32 on the CPU backend */
  CHECK(memory.parameters_active_per_token > 0 &&
        memory.parameters_active_per_token < memory.parameters_total);
  CHECK(memory.weight_storage != NULL && strstr(memory.weight_storage, "fp32") != NULL);

  const uint64_t tokens = (uint64_t)check_random_between(1, 1000);
  uint64_t bytes = 0;
  REQUIRE_OK(fkv_model_global_kv_bytes(model, tokens, &bytes));
  CHECK(bytes == (tokens / 2) * (entry + key) + tokens * (entry + key)); /* complete ratio-2 groups only */
}

static void check_append_and_sample(const fkv_model* model, const int32_t* prompt, uint64_t n_prompt) {
  fkv_session_options options;
  REQUIRE_OK(fkv_session_options_init(&options));
  options.prefill_chunk = 4;
  fkv_session* session = NULL;
  REQUIRE_OK(fkv_session_create(model, &options, &session));
  CHECK(length_of(session) == 0);

  progress_log progress = {0, 0, 0, 1};
  REQUIRE_OK(fkv_session_append(session, prompt, n_prompt, record_progress, &progress));
  CHECK(progress.calls == (int64_t)(n_prompt + 3) / 4);
  CHECK(progress.last_done == (int64_t)n_prompt && progress.total == (int64_t)n_prompt && progress.monotone);
  CHECK(length_of(session) == (int64_t)n_prompt);

  int32_t held[64];
  uint64_t count = 0;
  REQUIRE_OK(fkv_session_tokens(session, NULL, &count)); /* size query */
  CHECK(count == n_prompt);
  count = 64;
  REQUIRE_OK(fkv_session_tokens(session, held, &count));
  CHECK(count == n_prompt && memcmp(held, prompt, n_prompt * sizeof(int32_t)) == 0);

  float logits[kVocab];
  count = 0;
  REQUIRE_OK(fkv_session_logits(session, NULL, &count));
  CHECK(count == kVocab);
  read_logits(session, logits);
  int finite = 1;
  for (int i = 0; i < kVocab; ++i) finite &= isfinite(logits[i]) != 0;
  CHECK(finite);

  fkv_sampling_params greedy;
  REQUIRE_OK(fkv_sampling_params_init(&greedy));
  greedy.temperature = 0.0f;
  int32_t token = -1;
  REQUIRE_OK(fkv_session_sample(session, &greedy, &token));
  CHECK(token == argmax(logits));
  CHECK(length_of(session) == (int64_t)n_prompt); /* sample does not append */

  /* Seeded sampling is a function of (params, session): the same call gives the same token. */
  fkv_sampling_params warm;
  REQUIRE_OK(fkv_sampling_params_init(&warm));
  warm.temperature = 1.5f;
  warm.seed = check_random();
  int32_t first = -1, again = -2;
  REQUIRE_OK(fkv_session_sample(session, &warm, &first));
  REQUIRE_OK(fkv_session_sample(session, &warm, &again));
  CHECK(first == again && first >= 0 && first < kVocab);
  fkv_session_free(session);
}

/* generate == the same steps by hand (sample, append), and the three views of its output agree. */
static void check_generate(const fkv_model* model, const int32_t* prompt, uint64_t n_prompt) {
  fkv_session *generated = NULL, *by_hand = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &generated));
  REQUIRE_OK(fkv_session_create(model, NULL, &by_hand));

  fkv_sampling_params sampling;
  REQUIRE_OK(fkv_sampling_params_init(&sampling));
  sampling.temperature = 0.9f;
  sampling.top_k = 50;
  sampling.seed = check_random();
  fkv_generate_options options;
  REQUIRE_OK(fkv_generate_options_init(&options));
  CHECK(options.max_tokens == 256 && options.stop_at_eos == 1 && options.sampling == NULL);
  token_log log = {{0}, 0, -1};
  options.max_tokens = 6;
  options.stop_at_eos = 0;
  options.sampling = &sampling;
  options.on_token = record_token;
  options.on_token_user_data = &log;
  int32_t out[6];
  uint64_t n_out = 0;
  int32_t reason = -1;
  REQUIRE_OK(fkv_session_generate(generated, prompt, n_prompt, &options, out, 6, &n_out, &reason));
  CHECK(n_out == 6 && reason == FKV_STOP_MAX_TOKENS);
  CHECK(log.count == 6 && memcmp(log.tokens, out, sizeof out) == 0);
  int32_t held[64];
  uint64_t count = 64;
  REQUIRE_OK(fkv_session_tokens(generated, held, &count));
  CHECK(count == n_prompt + 6 && memcmp(held + n_prompt, out, sizeof out) == 0);

  REQUIRE_OK(fkv_session_append(by_hand, prompt, n_prompt, NULL, NULL));
  for (int i = 0; i < 6; ++i) {
    int32_t token = -1;
    REQUIRE_OK(fkv_session_sample(by_hand, &sampling, &token));
    CHECK(token == out[i]);
    REQUIRE_OK(fkv_session_append(by_hand, &token, 1, NULL, NULL));
  }
  float a[kVocab], b[kVocab];
  read_logits(generated, a);
  read_logits(by_hand, b);
  CHECK(same_floats(a, b, kVocab));

  /* A stop token ends generation and is kept; the tokens go only to the callback when no buffer is given. */
  fkv_session* stopped = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &stopped));
  const int32_t stop = out[2];
  options.stop_tokens = &stop;
  options.n_stop_tokens = 1;
  log.count = 0;
  REQUIRE_OK(fkv_session_generate(stopped, prompt, n_prompt, &options, NULL, 0, &n_out, &reason));
  uint64_t first_stop = 0;
  while (out[first_stop] != stop) ++first_stop;
  CHECK(reason == FKV_STOP_TOKEN && n_out == first_stop + 1 && log.count == n_out);
  CHECK(memcmp(log.tokens, out, (size_t)n_out * sizeof(int32_t)) == 0);
  fkv_session_free(stopped);
  fkv_session_free(by_hand);
  fkv_session_free(generated);
}

/* A snapshot restored elsewhere continues exactly; the session it came from and a rewound session too. */
static void check_fork_restore_rewind(const fkv_model* model, const int32_t* prompt, uint64_t n_prompt) {
  fkv_session* original = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &original));
  REQUIRE_OK(fkv_session_append(original, prompt, n_prompt, NULL, NULL));
  float at_snapshot[kVocab];
  read_logits(original, at_snapshot);

  fkv_kv *snapshot = NULL, *forked = NULL;
  REQUIRE_OK(fkv_session_kv(original, &snapshot));
  REQUIRE_OK(fkv_kv_fork(snapshot, &forked));
  int32_t held[64];
  uint64_t count = 64;
  REQUIRE_OK(fkv_kv_tokens(forked, held, &count));
  CHECK(count == n_prompt && memcmp(held, prompt, n_prompt * sizeof(int32_t)) == 0);
  int64_t snapshot_bytes = -1, session_bytes = -2;
  REQUIRE_OK(fkv_kv_bytes(snapshot, &snapshot_bytes));
  REQUIRE_OK(fkv_session_kv_bytes(original, &session_bytes));
  CHECK(snapshot_bytes == session_bytes && snapshot_bytes > 0);

  fkv_sampling_params sampling;
  REQUIRE_OK(fkv_sampling_params_init(&sampling));
  sampling.temperature = 0.8f;
  sampling.top_p = 0.9f;
  sampling.seed = check_random();
  fkv_generate_options options;
  REQUIRE_OK(fkv_generate_options_init(&options));
  options.max_tokens = 5;
  options.stop_at_eos = 0;
  options.sampling = &sampling;
  int32_t expected[5], continued[5];
  uint64_t n_expected = 0, n_continued = 0;
  REQUIRE_OK(fkv_session_generate(original, NULL, 0, &options, expected, 5, &n_expected, NULL));
  CHECK(n_expected == 5);
  float expected_logits[kVocab], logits[kVocab];
  read_logits(original, expected_logits);

  fkv_kv_free(snapshot); /* the fork keeps the snapshot alive */
  fkv_session* restored = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &restored));
  REQUIRE_OK(fkv_session_restore(restored, forked));
  CHECK(length_of(restored) == (int64_t)n_prompt);
  read_logits(restored, logits);
  CHECK(same_floats(logits, at_snapshot, kVocab));
  REQUIRE_OK(fkv_session_generate(restored, NULL, 0, &options, continued, 5, &n_continued, NULL));
  CHECK(n_continued == 5 && memcmp(continued, expected, sizeof expected) == 0);
  read_logits(restored, logits);
  CHECK(same_floats(logits, expected_logits, kVocab));

  /* Rewinding 3 of the 5 generated tokens gives back the timeline after 2, which continues the same way
     (a rewind recomputes the new last row as the decode step that first made it). */
  REQUIRE_OK(fkv_session_rewind(original, 3));
  CHECK(length_of(original) == (int64_t)n_prompt + 2);
  count = 64;
  REQUIRE_OK(fkv_session_tokens(original, held, &count));
  CHECK(count == n_prompt + 2 && memcmp(held, prompt, n_prompt * sizeof(int32_t)) == 0);
  CHECK(memcmp(held + n_prompt, expected, 2 * sizeof(int32_t)) == 0);
  options.max_tokens = 3;
  REQUIRE_OK(fkv_session_generate(original, NULL, 0, &options, continued, 3, &n_continued, NULL));
  CHECK(n_continued == 3 && memcmp(continued, expected + 2, 3 * sizeof(int32_t)) == 0);
  read_logits(original, logits);
  CHECK(same_floats(logits, expected_logits, kVocab));
  /* Back to the snapshot's length: the same tokens as the snapshot. */
  REQUIRE_OK(fkv_session_rewind(original, 5));
  count = 64;
  REQUIRE_OK(fkv_session_tokens(original, held, &count));
  CHECK(count == n_prompt && memcmp(held, prompt, n_prompt * sizeof(int32_t)) == 0);

  fkv_session_free(restored);
  fkv_kv_free(forked);
  fkv_session_free(original);
}

/* One batched step over sessions at different lengths == one append per session. */
static void check_batched_decode(const fkv_model* model, const int32_t* prompt, uint64_t n_prompt) {
  enum { kBatch = 3 };
  fkv_session *batched[kBatch], *single[kBatch];
  int32_t next[kBatch];
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t n = n_prompt - (uint64_t)i; /* different lengths in one batch */
    REQUIRE_OK(fkv_session_create(model, NULL, &batched[i]));
    REQUIRE_OK(fkv_session_create(model, NULL, &single[i]));
    REQUIRE_OK(fkv_session_append(batched[i], prompt, n, NULL, NULL));
    REQUIRE_OK(fkv_session_append(single[i], prompt, n, NULL, NULL));
    next[i] = (int32_t)check_random_between(0, kVocab - 1);
  }
  REQUIRE_OK(fkv_decode(batched, next, kBatch));
  for (int i = 0; i < kBatch; ++i) {
    REQUIRE_OK(fkv_session_append(single[i], &next[i], 1, NULL, NULL));
    CHECK(length_of(batched[i]) == length_of(single[i]));
    float a[kVocab], b[kVocab];
    read_logits(batched[i], a);
    read_logits(single[i], b);
    CHECK(same_floats(a, b, kVocab));
    fkv_session_free(batched[i]);
    fkv_session_free(single[i]);
  }
  REQUIRE_OK(fkv_decode(NULL, NULL, 0)); /* an empty batch is a no-op */
}

/* Loaded options come back as given; clean numerics compute differently from faithful. */
static void check_load_options_and_numerics(const char* dir, const fkv_model* faithful, const int32_t* prompt,
                                            uint64_t n_prompt) {
  load_log log = {0, 0, 0, dir};
  fkv_model* clean = load(dir, FKV_NUMERICS_CLEAN, &log);
  CHECK(log.lines >= 2 && log.errors == 0 && log.named_dir);
  fkv_load_options got;
  memset(&got, 0xab, sizeof got);
  got.struct_size = sizeof got;
  REQUIRE_OK(fkv_model_load_options(clean, &got));
  CHECK(got.numerics == FKV_NUMERICS_CLEAN && got.threads == 2 && got.device == FKV_DEVICE_CPU);
  CHECK(got.prefill == FKV_PREFILL_EXACT && got.prefill_chunk == 512 && got.log == NULL);
  REQUIRE_OK(fkv_model_load_options(faithful, &got));
  CHECK(got.numerics == FKV_NUMERICS_FAITHFUL);

  fkv_session *a = NULL, *b = NULL;
  REQUIRE_OK(fkv_session_create(clean, NULL, &a));
  REQUIRE_OK(fkv_session_create(faithful, NULL, &b));
  fkv_model_free(clean); /* the session keeps the weights alive */
  REQUIRE_OK(fkv_session_append(a, prompt, n_prompt, NULL, NULL));
  REQUIRE_OK(fkv_session_append(b, prompt, n_prompt, NULL, NULL));
  float la[kVocab], lb[kVocab];
  read_logits(a, la);
  read_logits(b, lb);
  CHECK(!same_floats(la, lb, kVocab));
  fkv_session_free(a);
  fkv_session_free(b);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", argv[0]);
    return 2;
  }
  check_seed_from_environment("test_capi_flow");
  check_print_checkpoint_seed(argv[1]);
  check_version();
  /* Longer than the sliding window (16) so that snapshots and rewinds cover compressed KV and window rings.
   */
  int32_t prompt[40];
  const uint64_t n_prompt = (uint64_t)check_random_between(20, 40);
  check_random_tokens(prompt, (size_t)n_prompt, kVocab);

  fkv_model* model = load(argv[1], FKV_NUMERICS_FAITHFUL, NULL);
  check_config_and_memory(model);
  check_append_and_sample(model, prompt, n_prompt);
  check_generate(model, prompt, n_prompt);
  check_fork_restore_rewind(model, prompt, n_prompt);
  check_batched_decode(model, prompt, n_prompt);
  check_load_options_and_numerics(argv[1], model, prompt, n_prompt);
  fkv_model_free(model);
  return check_finish("test_capi_flow");
}
