/* flashkv from C: load a checkpoint, stream greedy tokens from a prompt, then snapshot the session and
   continue a restored copy with seeded sampling.

     flashkv_example_c CHECKPOINT_DIR [TOKEN_ID ...]

   Make a checkpoint with: tools/make-tiny-checkpoint --config tiny-v41 --seed 1 --out /tmp/tiny
   Build against an installed flashkv: find_package(flashkv) + flashkv::flashkv, or pkg-config flashkv. */
#include <stdio.h>
#include <stdlib.h>

#include <flashkv.h>

static int32_t print_token(void* user_data, int32_t token) {
  (void)user_data;
  printf(" %d", token);
  fflush(stdout);
  return 0; /* non-zero would cancel the generation */
}

/* Prints the failed call's status and message, and says whether it failed. */
static int failed(fkv_status status) {
  if (status == FKV_OK) return 0;
  fprintf(stderr, "error (%s): %s\n", fkv_status_string(status), fkv_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CHECKPOINT_DIR [TOKEN_ID ...]\n", argv[0]);
    return 2;
  }
  int32_t prompt[64] = {5, 17, 300, 42, 7};
  uint64_t n_prompt = 5;
  if (argc > 2) {
    for (n_prompt = 0; n_prompt < 64 && (int)n_prompt + 2 < argc; ++n_prompt)
      prompt[n_prompt] = (int32_t)atoi(argv[n_prompt + 2]);
  }

  fkv_model* model = NULL;
  fkv_session *session = NULL, *copy = NULL;
  fkv_kv* snapshot = NULL;
  int status = 1;
  fkv_config config;
  config.struct_size = sizeof config; /* output structs say how much of the layout the caller knows */
  if (failed(fkv_model_load(FKV_ABI_VERSION, argv[1], NULL, &model)) ||
      failed(fkv_model_config(model, &config)))
    goto done;
  printf("model: %d layers, vocab %lld\n", config.num_hidden_layers, (long long)config.vocab_size);

  /* Greedy generation, streamed through the callback. */
  fkv_sampling_params greedy;
  fkv_generate_options options;
  fkv_sampling_params_init(&greedy);
  greedy.temperature = 0.0f;
  fkv_generate_options_init(&options);
  options.sampling = &greedy;
  options.max_tokens = 8;
  options.on_token = print_token;
  uint64_t n_generated = 0;
  printf("greedy:");
  if (failed(fkv_session_create(model, NULL, &session)) ||
      failed(fkv_session_generate(session, prompt, n_prompt, &options, NULL, 0, &n_generated, NULL)))
    goto done;
  printf("  (%llu tokens)\n", (unsigned long long)n_generated);

  /* Snapshot, restore into a second session, and continue it with seeded sampling. */
  fkv_sampling_params warm;
  fkv_sampling_params_init(&warm);
  warm.temperature = 0.8f;
  warm.top_p = 0.95f;
  warm.seed = 42;
  options.sampling = &warm;
  options.max_tokens = 4;
  printf("restored copy:");
  if (failed(fkv_session_kv(session, &snapshot)) || failed(fkv_session_create(model, NULL, &copy)) ||
      failed(fkv_session_restore(copy, snapshot)) ||
      failed(fkv_session_generate(copy, NULL, 0, &options, NULL, 0, &n_generated, NULL)))
    goto done;
  int64_t length = 0;
  if (failed(fkv_session_length(copy, &length))) goto done;
  printf("  (the copy holds %lld tokens)\n", (long long)length);
  status = 0;

done:
  fkv_session_free(copy);
  fkv_kv_free(snapshot);
  fkv_session_free(session);
  fkv_model_free(model);
  return status;
}
