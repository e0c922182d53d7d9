/* flashkv from C (README): flashkv_readme_c CHECKPOINT_DIR -- greedy tokens of a prompt, streamed. */
#include <flashkv.h>
#include <stdio.h>

static int32_t print_token(void* user_data, int32_t token) {
  (void)user_data;
  printf("%d ", token);
  return 0; /* non-zero cancels */
}

int main(int argc, char** argv) {
  const int32_t prompt[] = {5, 17, 300, 42, 7};
  fkv_model* model = NULL;
  fkv_session* session = NULL;
  fkv_sampling_params greedy;
  fkv_generate_options options;
  fkv_sampling_params_init(&greedy);
  fkv_generate_options_init(&options);
  greedy.temperature = 0.0f;
  options.sampling = &greedy;
  options.max_tokens = 8;
  options.on_token = print_token;
  fkv_status s = fkv_model_load(FKV_ABI_VERSION, argc > 1 ? argv[1] : NULL, NULL, &model);
  if (s == FKV_OK) s = fkv_session_create(model, NULL, &session);
  if (s == FKV_OK) s = fkv_session_generate(session, prompt, 5, &options, NULL, 0, NULL, NULL);
  if (s != FKV_OK) fprintf(stderr, "%s: %s\n", fkv_status_string(s), fkv_last_error());
  fkv_session_free(session);
  fkv_model_free(model);
  return s == FKV_OK ? 0 : 1;
}
