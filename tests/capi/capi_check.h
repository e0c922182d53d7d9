/* A small check harness for the plain-C tests of flashkv.h: checks that count failures instead of stopping,
   status checks that also look at fkv_last_error(), and a seeded generator whose seed is printed so that a
   failing run can be replayed (FKV_TEST_SEED=...). */
#ifndef FLASHKV_TESTS_CAPI_CHECK_H
#define FLASHKV_TESTS_CAPI_CHECK_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flashkv.h"

static int check_failures = 0;
static uint64_t check_seed = 0;
static uint64_t check_rng_state = 0;

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s (seed %" PRIu64 ")\n", __FILE__, __LINE__, #cond, \
              check_seed);                                                                       \
      ++check_failures;                                                                          \
    }                                                                                            \
  } while (0)

/* Stops the test: the following steps depend on this one. */
#define REQUIRE(cond)                                                                                       \
  do {                                                                                                      \
    if (!(cond)) {                                                                                          \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s (seed %" PRIu64 "); last error: %s\n", __FILE__, __LINE__, \
              #cond, check_seed, fkv_last_error());                                                         \
      exit(1);                                                                                              \
    }                                                                                                       \
  } while (0)

#define REQUIRE_OK(call) REQUIRE((call) == FKV_OK)

/* The call returns `want`; for an error, fkv_last_error() starts with `function` and contains `fragment`. */
#define EXPECT_STATUS(call, want, function, fragment) \
  expect_status_at(__FILE__, __LINE__, #call, (call), (want), (function), (fragment))

static inline void expect_status_at(const char* file, int line, const char* text, fkv_status got,
                                    fkv_status want, const char* function, const char* fragment) {
  const char* message = fkv_last_error();
  if (got != want) {
    fprintf(stderr, "%s:%d: %s returned %s, expected %s (seed %" PRIu64 "); last error: %s\n", file, line,
            text, fkv_status_string(got), fkv_status_string(want), check_seed, message);
    ++check_failures;
    return;
  }
  if (want == FKV_OK) return;
  if (strncmp(message, function, strlen(function)) != 0 || strstr(message, fragment) == NULL) {
    fprintf(stderr, "%s:%d: %s: message \"%s\" should start with \"%s\" and name \"%s\" (seed %" PRIu64 ")\n",
            file, line, text, message, function, fragment, check_seed);
    ++check_failures;
  }
}

/* splitmix64: a fresh seed per run (clock and pid) unless FKV_TEST_SEED is set. */
static inline void check_seed_from_environment(const char* test_name) {
  const char* fixed = getenv("FKV_TEST_SEED");
  check_seed = fixed != NULL ? strtoull(fixed, NULL, 10)
                             : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)clock();
  check_rng_state = check_seed;
  printf("%s: seed %" PRIu64 " (replay with FKV_TEST_SEED=%" PRIu64 ")\n", test_name, check_seed, check_seed);
}

/* The tiny checkpoint's own seed (CTest draws one per run), so that a failure names both seeds. */
static inline void check_print_checkpoint_seed(const char* dir) {
  char path[4096], line[256];
  snprintf(path, sizeof path, "%s/tiny_checkpoint.json", dir);
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, "\"seed\"") != NULL) printf("checkpoint %s:%s", dir, line);
  fclose(f);
}

static inline uint64_t check_random(void) {
  uint64_t z = (check_rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int64_t check_random_between(int64_t lo, int64_t hi) {
  return lo + (int64_t)(check_random() % (uint64_t)(hi - lo + 1));
}

static inline void check_random_tokens(int32_t* tokens, size_t n, int64_t vocab) {
  for (size_t i = 0; i < n; ++i) tokens[i] = (int32_t)check_random_between(0, vocab - 1);
}

static inline int check_finish(const char* test_name) {
  if (check_failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed (seed %" PRIu64 ")\n", test_name, check_failures, check_seed);
    return 1;
  }
  printf("%s: all checks passed\n", test_name);
  return 0;
}

#endif
