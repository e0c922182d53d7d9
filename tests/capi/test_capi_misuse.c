/* Every misuse of flashkv.h a host could make, in plain C: NULL handles and out-pointers, bad struct sizes,
   a wrong ABI version, bad paths and broken checkpoints, bad options, token ids out of range, buffers too
   small, cancelled work. Each must come back as a status and a message naming the thing at fault, leave
   out-pointers and sessions unchanged, and never crash (CI runs this under ASan and UBSan).

     test_capi_misuse CHECKPOINT_DIR      (a tiny-v41 checkpoint; FKV_TEST_SEED replays a run) */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "capi_check.h"

enum { kVocab = 512, kMaxPositions = 4096 };

#define SENTINEL ((void*)(uintptr_t)0x5eed)

static int64_t length_of(const fkv_session* session) {
  int64_t length = -1;
  REQUIRE_OK(fkv_session_length(session, &length));
  return length;
}

static void write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  REQUIRE(f != NULL);
  REQUIRE(fwrite(data, 1, size, f) == size);
  REQUIRE(fclose(f) == 0);
}

/* Copies `from` to `to`, keeping only its first `keep` bytes (all of it when keep is SIZE_MAX). */
static void copy_file(const char* from, const char* to, size_t keep) {
  FILE* in = fopen(from, "rb");
  REQUIRE(in != NULL);
  FILE* out = fopen(to, "wb");
  REQUIRE(out != NULL);
  char buffer[1 << 16];
  size_t copied = 0, n;
  while (copied < keep && (n = fread(buffer, 1, sizeof buffer, in)) > 0) {
    if (n > keep - copied) n = keep - copied;
    REQUIRE(fwrite(buffer, 1, n, out) == n);
    copied += n;
  }
  REQUIRE(fclose(in) == 0 && fclose(out) == 0);
}

static void join(char* out, size_t size, const char* dir, const char* name) {
  REQUIRE((size_t)snprintf(out, size, "%s/%s", dir, name) < size);
}

static void remove_checkpoint_copy(const char* dir, const char** names, int n) {
  char path[4096];
  for (int i = 0; i < n; ++i) {
    join(path, sizeof path, dir, names[i]);
    remove(path);
  }
  rmdir(dir);
}

static void check_status_names_and_versions(void) {
  const char* names[] = {"ok",      "invalid_argument", "invalid_config", "invalid_checkpoint", "not_found",
                         "io",      "unsupported",      "device",         "out_of_memory",      "cancelled",
                         "internal"};
  for (int32_t s = 0; s <= FKV_ERR_INTERNAL; ++s) CHECK(strcmp(fkv_status_string(s), names[s]) == 0);
  CHECK(strcmp(fkv_status_string(-1), "unknown") == 0);
  CHECK(strcmp(fkv_status_string(FKV_ERR_INTERNAL + 1), "unknown") == 0);
  CHECK(strcmp(fkv_status_string(INT32_MIN), "unknown") == 0);
  CHECK(FKV_ERR_INVALID_ARGUMENT == 1 && FKV_ERR_CANCELLED == 9 && FKV_ERR_INTERNAL == 10);
}

static void check_abi_version_at_load(const char* dir) {
  fkv_model* model = (fkv_model*)SENTINEL;
  /* The expected texts follow the header's version, so a minor bump of the ABI keeps this test valid. */
  char next_major[64];
  char next_minor[64];
  snprintf(next_major, sizeof next_major, "abi_version %u.%u", FKV_ABI_VERSION_MAJOR + 1u, FKV_ABI_VERSION_MINOR);
  snprintf(next_minor, sizeof next_minor, "abi_version %u.%u", FKV_ABI_VERSION_MAJOR, FKV_ABI_VERSION_MINOR + 1u);
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION + 0x10000u, dir, NULL, &model), FKV_ERR_UNSUPPORTED,
                "fkv_model_load", next_major);
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION + 1u, dir, NULL, &model), FKV_ERR_UNSUPPORTED,
                "fkv_model_load", next_minor);
  EXPECT_STATUS(fkv_model_load(0, dir, NULL, &model), FKV_ERR_UNSUPPORTED, "fkv_model_load",
                "abi_version 0.0");
  CHECK(model == (fkv_model*)SENTINEL);
}

static void check_bad_paths(const char* dir) {
  fkv_model* model = (fkv_model*)SENTINEL;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, NULL, NULL, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "checkpoint_dir is NULL");
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, NULL, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_model_load",
                "out_model is NULL");
  char missing[256];
  snprintf(missing, sizeof missing, "/nonexistent/flashkv-capi-%" PRIu64, check_seed);
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, missing, NULL, &model), FKV_ERR_NOT_FOUND, "fkv_model_load",
                missing);
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, "", NULL, &model), FKV_ERR_INVALID_ARGUMENT, "fkv_model_load",
                "checkpoint_dir is empty");
  CHECK(model == (fkv_model*)SENTINEL);

  char broken[] = "/tmp/flashkv-capi-XXXXXX";
  REQUIRE(mkdtemp(broken) != NULL);
  char config[4096], shard_from[4096], shard_to[4096], index_from[4096], index_to[4096];
  join(config, sizeof config, broken, "config.json");
  write_file(config, "{\"model_type\": \"deepseek_v41\", ", 31);
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, broken, NULL, &model), FKV_ERR_INVALID_CONFIG,
                "fkv_model_load", "config.json");

  /* The real config with no shards, then with a shard cut in the middle of its tensor data. */
  char real_config[4096];
  join(real_config, sizeof real_config, dir, "config.json");
  copy_file(real_config, config, SIZE_MAX);
  const fkv_status no_shards = fkv_model_load(FKV_ABI_VERSION, broken, NULL, &model);
  CHECK(no_shards == FKV_ERR_NOT_FOUND || no_shards == FKV_ERR_INVALID_CHECKPOINT);
  CHECK(strstr(fkv_last_error(), "safetensors") != NULL);

  const char* names[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                         "model-00002-of-00002.safetensors"};
  join(index_from, sizeof index_from, dir, names[1]);
  join(index_to, sizeof index_to, broken, names[1]);
  copy_file(index_from, index_to, SIZE_MAX);
  join(shard_from, sizeof shard_from, dir, names[2]);
  join(shard_to, sizeof shard_to, broken, names[2]);
  copy_file(shard_from, shard_to, SIZE_MAX);
  join(shard_from, sizeof shard_from, dir, names[3]);
  join(shard_to, sizeof shard_to, broken, names[3]);
  struct stat info;
  REQUIRE(stat(shard_from, &info) == 0);
  copy_file(shard_from, shard_to, (size_t)info.st_size / 2);
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, broken, NULL, &model), FKV_ERR_INVALID_CHECKPOINT,
                "fkv_model_load", names[3]);
  CHECK(model == (fkv_model*)SENTINEL);
  remove_checkpoint_copy(broken, names, 4);
}

static int32_t cancel_log(void* user_data, int32_t level, const char* message) {
  (void)level;
  (void)message;
  ++*(int*)user_data;
  return 1;
}

static void check_load_options(const char* dir) {
  fkv_model* model = (fkv_model*)SENTINEL;
  fkv_load_options options;
  EXPECT_STATUS(fkv_load_options_init(NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_load_options_init", "options");
  REQUIRE_OK(fkv_load_options_init(&options));
  CHECK(options.struct_size == sizeof options && options.device == FKV_DEVICE_CPU && options.threads == 0);
  CHECK(options.numerics == FKV_NUMERICS_FAITHFUL && options.prefill == FKV_PREFILL_EXACT);
  CHECK(options.prefill_chunk == 512 && options.log == NULL && options.reserved0 == 0);

  fkv_load_options bad = options;
  bad.struct_size = 0;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "fkv_load_options.struct_size is 0");
  bad.struct_size = sizeof bad - 1;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "struct_size");
  /* A caller built against a newer header: its bigger struct is refused, not half-read. */
  struct {
    fkv_load_options options;
    uint64_t newer_field;
  } newer;
  newer.options = options;
  newer.options.struct_size = sizeof newer;
  newer.newer_field = 7;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &newer.options, &model), FKV_ERR_UNSUPPORTED,
                "fkv_model_load", "newer");
  bad = options;
  bad.device = 7;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "fkv_load_options.device: 7");
  bad.device = FKV_DEVICE_CUDA;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_UNSUPPORTED, "fkv_model_load",
                "cuda");
  bad = options;
  bad.numerics = -3;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "fkv_load_options.numerics: -3");
  bad = options;
  bad.prefill = 2;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "fkv_load_options.prefill: 2");
  bad = options;
  bad.threads = -1;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "threads");
  bad = options;
  bad.prefill_chunk = 0;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "prefill_chunk");
  bad = options;
  bad.reserved0 = 1;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_load", "reserved0");
  int calls = 0;
  bad = options;
  bad.log = cancel_log;
  bad.log_user_data = &calls;
  EXPECT_STATUS(fkv_model_load(FKV_ABI_VERSION, dir, &bad, &model), FKV_ERR_CANCELLED, "fkv_model_load",
                "log callback");
  CHECK(calls == 1);
  CHECK(model == (fkv_model*)SENTINEL);
}

static void check_model_queries(const fkv_model* model) {
  fkv_config config;
  config.struct_size = sizeof config;
  EXPECT_STATUS(fkv_model_config(NULL, &config), FKV_ERR_INVALID_ARGUMENT, "fkv_model_config",
                "model is NULL");
  EXPECT_STATUS(fkv_model_config(model, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_model_config",
                "config is NULL");
  config.struct_size = 4;
  config.vocab_size = -5;
  EXPECT_STATUS(fkv_model_config(model, &config), FKV_ERR_INVALID_ARGUMENT, "fkv_model_config",
                "fkv_config.struct_size is 4");
  CHECK(config.vocab_size == -5);
  /* A newer caller's bigger output struct: the known prefix is filled and its length reported. */
  struct {
    fkv_config config;
    int64_t newer_field;
  } newer;
  newer.config.struct_size = sizeof newer;
  newer.newer_field = 99;
  REQUIRE_OK(fkv_model_config(model, &newer.config));
  CHECK(newer.config.struct_size == sizeof(fkv_config) && newer.newer_field == 99 &&
        newer.config.vocab_size == kVocab);

  fkv_memory memory;
  memory.struct_size = sizeof memory;
  EXPECT_STATUS(fkv_model_memory(NULL, &memory), FKV_ERR_INVALID_ARGUMENT, "fkv_model_memory",
                "model is NULL");
  EXPECT_STATUS(fkv_model_memory(model, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_model_memory",
                "memory is NULL");
  memory.struct_size = 0;
  EXPECT_STATUS(fkv_model_memory(model, &memory), FKV_ERR_INVALID_ARGUMENT, "fkv_model_memory",
                "struct_size");
  uint64_t bytes = 0;
  EXPECT_STATUS(fkv_model_global_kv_bytes(NULL, 3, &bytes), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_global_kv_bytes", "model");
  EXPECT_STATUS(fkv_model_global_kv_bytes(model, 3, NULL), FKV_ERR_INVALID_ARGUMENT,
                "fkv_model_global_kv_bytes", "out_bytes");
  fkv_load_options options;
  EXPECT_STATUS(fkv_model_load_options(NULL, &options), FKV_ERR_INVALID_ARGUMENT, "fkv_model_load_options",
                "model");
  EXPECT_STATUS(fkv_model_load_options(model, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_model_load_options",
                "options");
}

static void check_session_creation(const fkv_model* model) {
  fkv_session* session = (fkv_session*)SENTINEL;
  EXPECT_STATUS(fkv_session_options_init(NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_options_init",
                "options");
  EXPECT_STATUS(fkv_session_create(NULL, NULL, &session), FKV_ERR_INVALID_ARGUMENT, "fkv_session_create",
                "model is NULL");
  EXPECT_STATUS(fkv_session_create(model, NULL, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_create",
                "out_session is NULL");
  fkv_session_options options;
  REQUIRE_OK(fkv_session_options_init(&options));
  CHECK(options.prefill == FKV_PREFILL_MODEL && options.prefill_chunk == 0);
  options.prefill = 5;
  EXPECT_STATUS(fkv_session_create(model, &options, &session), FKV_ERR_INVALID_ARGUMENT, "fkv_session_create",
                "fkv_session_options.prefill: 5");
  options.prefill = FKV_PREFILL_CED;
  options.prefill_chunk = -1;
  EXPECT_STATUS(fkv_session_create(model, &options, &session), FKV_ERR_INVALID_ARGUMENT, "fkv_session_create",
                "prefill_chunk");
  options.prefill_chunk = 0;
  options.struct_size = 3;
  EXPECT_STATUS(fkv_session_create(model, &options, &session), FKV_ERR_INVALID_ARGUMENT, "fkv_session_create",
                "fkv_session_options.struct_size is 3");
  CHECK(session == (fkv_session*)SENTINEL);
}

static void check_tokens_and_buffers(fkv_session* session) {
  int32_t token = 3;
  EXPECT_STATUS(fkv_session_append(NULL, &token, 1, NULL, NULL), FKV_ERR_INVALID_ARGUMENT,
                "fkv_session_append", "session is NULL");
  EXPECT_STATUS(fkv_session_append(session, NULL, 2, NULL, NULL), FKV_ERR_INVALID_ARGUMENT,
                "fkv_session_append", "tokens is NULL");
  EXPECT_STATUS(fkv_session_append(session, &token, 0, NULL, NULL), FKV_ERR_INVALID_ARGUMENT,
                "fkv_session_append", "empty");

  /* An id out of range anywhere in the run: the message names the id and its position, nothing is appended.
   */
  int32_t run[8];
  check_random_tokens(run, 8, kVocab);
  const size_t bad_at = (size_t)check_random_between(0, 7);
  run[bad_at] = (check_random() & 1) ? kVocab + (int32_t)check_random_between(0, 1000)
                                     : -1 - (int32_t)check_random_between(0, 1000);
  char fragment[96];
  snprintf(fragment, sizeof fragment, "token id %d at position %zu", run[bad_at], bad_at);
  EXPECT_STATUS(fkv_session_append(session, run, 8, NULL, NULL), FKV_ERR_INVALID_ARGUMENT,
                "fkv_session_append", fragment);
  CHECK(length_of(session) == 0);

  /* Past the context limit (checked before any compute). */
  static int32_t too_many[kMaxPositions + 1];
  EXPECT_STATUS(fkv_session_append(session, too_many, kMaxPositions + 1, NULL, NULL),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_append", "max_position_embeddings");
  CHECK(length_of(session) == 0);

  float logits[kVocab];
  uint64_t count = kVocab;
  EXPECT_STATUS(fkv_session_logits(session, logits, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_session_logits",
                "empty");
  int32_t sampled = -7;
  EXPECT_STATUS(fkv_session_sample(session, NULL, &sampled), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "empty");
  CHECK(sampled == -7);

  run[bad_at] = token;
  REQUIRE_OK(fkv_session_append(session, run, 8, NULL, NULL));
  const int64_t held = length_of(session);
  CHECK(held == 8);

  EXPECT_STATUS(fkv_session_logits(NULL, logits, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_session_logits",
                "session is NULL");
  EXPECT_STATUS(fkv_session_logits(session, logits, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_logits",
                "count is NULL");
  count = 5;
  EXPECT_STATUS(fkv_session_logits(session, NULL, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_session_logits",
                "logits is NULL");
  count = kVocab - 1;
  EXPECT_STATUS(fkv_session_logits(session, logits, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_session_logits",
                "511 elements but 512");
  CHECK(count == kVocab); /* the size needed */

  int32_t tokens[2];
  count = 0;
  EXPECT_STATUS(fkv_session_tokens(session, tokens, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_session_tokens",
                "tokens holds 0 elements but 8");
  CHECK(count == (uint64_t)held);
  EXPECT_STATUS(fkv_session_tokens(session, tokens, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_tokens",
                "count");
  EXPECT_STATUS(fkv_session_tokens(NULL, tokens, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_session_tokens",
                "session");
  EXPECT_STATUS(fkv_session_length(session, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_length",
                "out_length");
  EXPECT_STATUS(fkv_session_length(NULL, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_length", "session");
  EXPECT_STATUS(fkv_session_kv_bytes(session, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_kv_bytes",
                "out_bytes");
  EXPECT_STATUS(fkv_session_kv_bytes(NULL, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_kv_bytes",
                "session");
}

static void check_sampling_params(fkv_session* session) {
  fkv_sampling_params params;
  EXPECT_STATUS(fkv_sampling_params_init(NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_sampling_params_init",
                "params");
  REQUIRE_OK(fkv_sampling_params_init(&params));
  CHECK(params.temperature == 1.0f && params.top_k == 0 && params.top_p == 1.0f && params.min_p == 0.0f);
  CHECK(params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f && params.seed == 0);
  int32_t token = -7;
  EXPECT_STATUS(fkv_session_sample(session, &params, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "out_token");
  EXPECT_STATUS(fkv_session_sample(NULL, &params, &token), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "session");
  fkv_sampling_params bad = params;
  bad.top_p = 0.0f;
  EXPECT_STATUS(fkv_session_sample(session, &bad, &token), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "top_p");
  bad = params;
  bad.temperature = -1.0f;
  EXPECT_STATUS(fkv_session_sample(session, &bad, &token), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "temperature");
  bad = params;
  bad.repetition_penalty = NAN;
  EXPECT_STATUS(fkv_session_sample(session, &bad, &token), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "repetition_penalty");
  bad = params;
  bad.top_k = -2;
  EXPECT_STATUS(fkv_session_sample(session, &bad, &token), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "top_k");
  bad = params;
  bad.struct_size = 8;
  EXPECT_STATUS(fkv_session_sample(session, &bad, &token), FKV_ERR_INVALID_ARGUMENT, "fkv_session_sample",
                "fkv_sampling_params.struct_size is 8");
  CHECK(token == -7);
}

typedef struct {
  int64_t seen;
  int64_t cancel_at;
} counter;

static int32_t cancel_token(void* user_data, int32_t token) {
  counter* c = (counter*)user_data;
  (void)token;
  if (c->seen == c->cancel_at) return 1;
  ++c->seen;
  return 0;
}

static int32_t cancel_progress(void* user_data, int64_t done, int64_t total) {
  counter* c = (counter*)user_data;
  (void)done;
  (void)total;
  ++c->seen;
  return c->seen > c->cancel_at;
}

static void check_generate(const fkv_model* model) {
  fkv_session* session = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &session));
  fkv_generate_options options;
  EXPECT_STATUS(fkv_generate_options_init(NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_generate_options_init",
                "options");
  REQUIRE_OK(fkv_generate_options_init(&options));
  options.max_tokens = 4;
  options.stop_at_eos = 0;
  int32_t prompt[12], out[8];
  check_random_tokens(prompt, 12, kVocab);
  uint64_t n = 77;
  int32_t reason = 77;

  EXPECT_STATUS(fkv_session_generate(NULL, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "session is NULL");
  EXPECT_STATUS(fkv_session_generate(session, NULL, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "prompt is NULL");
  EXPECT_STATUS(fkv_session_generate(session, NULL, 0, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "empty prompt on an empty session");
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 3, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "tokens_capacity 3");
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, NULL, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "tokens_out is NULL");
  options.max_tokens = -1;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "max_tokens");
  options.max_tokens = 4;
  const int32_t stops[2] = {3, kVocab + 1};
  options.stop_tokens = stops;
  options.n_stop_tokens = 2;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "stop_tokens: id 513");
  options.stop_tokens = NULL;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "stop_tokens is NULL");
  options.n_stop_tokens = 0;
  fkv_sampling_params bad_sampling;
  REQUIRE_OK(fkv_sampling_params_init(&bad_sampling));
  bad_sampling.min_p = 2.0f;
  options.sampling = &bad_sampling;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "min_p");
  options.sampling = NULL;
  options.struct_size = 12;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "fkv_generate_options.struct_size is 12");
  options.struct_size = sizeof options;
  prompt[5] = kVocab;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_INVALID_ARGUMENT, "fkv_session_generate", "token id 512 at position 5");
  prompt[5] = 5;
  CHECK(n == 77 && reason == 77 && length_of(session) == 0);

  /* Cancelled by the progress callback during the prompt: the chunks done stay, nothing is generated. */
  fkv_session_options chunked;
  REQUIRE_OK(fkv_session_options_init(&chunked));
  chunked.prefill_chunk = 4;
  fkv_session* prefilling = NULL;
  REQUIRE_OK(fkv_session_create(model, &chunked, &prefilling));
  counter progress = {0, 1};
  options.on_progress = cancel_progress;
  options.on_progress_user_data = &progress;
  EXPECT_STATUS(fkv_session_generate(prefilling, prompt, 12, &options, out, 8, &n, &reason),
                FKV_ERR_CANCELLED, "fkv_session_generate", "progress callback");
  CHECK(n == 0 && reason == 77 && length_of(prefilling) == 8);
  options.on_progress = NULL;
  fkv_session_free(prefilling);

  /* Cancelled by the token callback: the refused token is not appended, the others are reported. */
  counter tokens = {0, (int64_t)check_random_between(0, 3)};
  options.on_token = cancel_token;
  options.on_token_user_data = &tokens;
  EXPECT_STATUS(fkv_session_generate(session, prompt, 12, &options, out, 8, &n, &reason), FKV_ERR_CANCELLED,
                "fkv_session_generate", "token callback");
  CHECK(n == (uint64_t)tokens.cancel_at && reason == 77);
  CHECK(length_of(session) == 12 + tokens.cancel_at);
  int32_t held[16];
  uint64_t count = 16;
  REQUIRE_OK(fkv_session_tokens(session, held, &count));
  CHECK(count == 12 + (uint64_t)n && memcmp(held + 12, out, (size_t)n * sizeof(int32_t)) == 0);

  /* The session stays usable. */
  options.on_token = NULL;
  REQUIRE_OK(fkv_session_generate(session, NULL, 0, &options, out, 8, &n, &reason));
  CHECK(n == 4 && reason == FKV_STOP_MAX_TOKENS);
  fkv_session_free(session);
}

static void check_rewind_restore_kv(const fkv_model* model, const char* dir, fkv_session* session) {
  const int64_t held = length_of(session);
  EXPECT_STATUS(fkv_session_rewind(NULL, 1), FKV_ERR_INVALID_ARGUMENT, "fkv_session_rewind",
                "session is NULL");
  EXPECT_STATUS(fkv_session_rewind(session, -1), FKV_ERR_INVALID_ARGUMENT, "fkv_session_rewind", "-1");
  EXPECT_STATUS(fkv_session_rewind(session, held + 1), FKV_ERR_INVALID_ARGUMENT, "fkv_session_rewind",
                "session of");
  CHECK(length_of(session) == held);

  fkv_kv* kv = (fkv_kv*)SENTINEL;
  EXPECT_STATUS(fkv_session_kv(NULL, &kv), FKV_ERR_INVALID_ARGUMENT, "fkv_session_kv", "session is NULL");
  EXPECT_STATUS(fkv_session_kv(session, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_kv", "out_kv is NULL");
  CHECK(kv == (fkv_kv*)SENTINEL);
  REQUIRE_OK(fkv_session_kv(session, &kv));
  fkv_kv* fork = (fkv_kv*)SENTINEL;
  EXPECT_STATUS(fkv_kv_fork(NULL, &fork), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_fork", "kv is NULL");
  EXPECT_STATUS(fkv_kv_fork(kv, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_fork", "out_kv is NULL");
  CHECK(fork == (fkv_kv*)SENTINEL);
  int64_t bytes = -1;
  EXPECT_STATUS(fkv_kv_bytes(NULL, &bytes), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_bytes", "kv is NULL");
  EXPECT_STATUS(fkv_kv_bytes(kv, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_bytes", "out_bytes");
  uint64_t count = 0;
  int32_t one = -1;
  EXPECT_STATUS(fkv_kv_tokens(NULL, &one, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_tokens", "kv is NULL");
  EXPECT_STATUS(fkv_kv_tokens(kv, &one, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_tokens", "count is NULL");
  EXPECT_STATUS(fkv_kv_tokens(kv, &one, &count), FKV_ERR_INVALID_ARGUMENT, "fkv_kv_tokens", "holds 0");
  CHECK(count == (uint64_t)held);

  EXPECT_STATUS(fkv_session_restore(NULL, kv), FKV_ERR_INVALID_ARGUMENT, "fkv_session_restore",
                "session is NULL");
  EXPECT_STATUS(fkv_session_restore(session, NULL), FKV_ERR_INVALID_ARGUMENT, "fkv_session_restore",
                "kv is NULL");

  /* A snapshot of another load of the same files is another model. */
  fkv_model* other = NULL;
  REQUIRE_OK(fkv_model_load(FKV_ABI_VERSION, dir, NULL, &other));
  fkv_session* stranger = NULL;
  REQUIRE_OK(fkv_session_create(other, NULL, &stranger));
  EXPECT_STATUS(fkv_session_restore(stranger, kv), FKV_ERR_INVALID_ARGUMENT, "fkv_session_restore",
                "another Model");
  CHECK(length_of(stranger) == 0);

  /* Batched decode: every bad batch is refused before any session changes. */
  fkv_session *a = NULL, *b = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &a));
  REQUIRE_OK(fkv_session_create(model, NULL, &b));
  REQUIRE_OK(fkv_session_restore(a, kv));
  REQUIRE_OK(fkv_session_restore(b, kv));
  int32_t next[3] = {1, 2, 3};
  fkv_session* with_null[3] = {a, NULL, b};
  fkv_session* twice[3] = {a, b, a};
  fkv_session* mixed[3] = {a, b, stranger};
  fkv_session* fine[3] = {a, b, session};
  EXPECT_STATUS(fkv_decode(NULL, next, 3), FKV_ERR_INVALID_ARGUMENT, "fkv_decode", "sessions is NULL");
  EXPECT_STATUS(fkv_decode(fine, NULL, 3), FKV_ERR_INVALID_ARGUMENT, "fkv_decode", "tokens is NULL");
  EXPECT_STATUS(fkv_decode(with_null, next, 3), FKV_ERR_INVALID_ARGUMENT, "fkv_decode", "session 1 is null");
  EXPECT_STATUS(fkv_decode(twice, next, 3), FKV_ERR_INVALID_ARGUMENT, "fkv_decode",
                "session 2 appears twice");
  EXPECT_STATUS(fkv_decode(mixed, next, 3), FKV_ERR_INVALID_ARGUMENT, "fkv_decode",
                "session 2 belongs to another");
  next[1] = kVocab + 3;
  EXPECT_STATUS(fkv_decode(fine, next, 3), FKV_ERR_INVALID_ARGUMENT, "fkv_decode", "session 1");
  CHECK(length_of(a) == held && length_of(b) == held && length_of(session) == held);

  fkv_session_free(a);
  fkv_session_free(b);
  fkv_session_free(stranger);
  fkv_model_free(other);
  fkv_kv_free(kv);
}

/* fkv_last_error is per thread: another thread sees its own (empty, then its own) message. */
static void* other_thread(void* arg) {
  char* seen = (char*)arg;
  snprintf(seen, 256, "%s", fkv_last_error());
  fkv_session_rewind(NULL, 1);
  snprintf(seen + 256, 256, "%s", fkv_last_error());
  return NULL;
}

static void check_thread_local_error(void) {
  fkv_session_length(NULL, NULL);
  char before[256];
  snprintf(before, sizeof before, "%s", fkv_last_error());
  static char seen[512];
  pthread_t thread;
  REQUIRE(pthread_create(&thread, NULL, other_thread, seen) == 0);
  REQUIRE(pthread_join(thread, NULL) == 0);
  CHECK(strcmp(seen, "") == 0);
  CHECK(strncmp(seen + 256, "fkv_session_rewind", 18) == 0);
  CHECK(strcmp(fkv_last_error(), before) == 0);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  check_seed_from_environment("test_capi_misuse");
  check_print_checkpoint_seed(argv[1]);
  fkv_model_free(NULL); /* NULL frees are no-ops */
  fkv_session_free(NULL);
  fkv_kv_free(NULL);

  check_status_names_and_versions();
  check_abi_version_at_load(dir);
  check_bad_paths(dir);
  check_load_options(dir);

  fkv_model* model = NULL;
  REQUIRE_OK(fkv_model_load(FKV_ABI_VERSION, dir, NULL, &model));
  check_model_queries(model);
  check_session_creation(model);
  fkv_session* session = NULL;
  REQUIRE_OK(fkv_session_create(model, NULL, &session));
  check_tokens_and_buffers(session);
  check_sampling_params(session);
  check_generate(model);
  check_rewind_restore_kv(model, dir, session);
  check_thread_local_error();
  fkv_session_free(session);
  fkv_model_free(model);
  return check_finish("test_capi_misuse");
}
