/* Minimal test helpers shared by every tests/test-*.c (one executable per file, run by ctest).
 * A failed CHECK prints file:line and the expression, counts the failure, and the test goes on so one run
 * shows every failure; main returns test_summary(). */
#ifndef LW_TEST_H
#define LW_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures = 0; /* CHECKs that failed in this executable */
static int test_checks = 0;   /* CHECKs evaluated                      */

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        test_checks++;                                                                                       \
        if (!(cond)) {                                                                                       \
            test_failures++;                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                         \
        }                                                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                 \
    do {                                                                                                     \
        test_checks++;                                                                                       \
        if (!(cond)) {                                                                                       \
            test_failures++;                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                         \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

#define TEST_SKIP_CODE 77

/* Exits with the skip code after a visible message (used when ../shared data or a package is absent). */
static inline void test_skip(const char *why) {
    printf("SKIP: %s\n", why);
    exit(TEST_SKIP_CODE);
}

/* Path of the shared data folder (../shared), from $LW_SHARED or the default relative path. */
static inline const char *test_shared_dir(void) {
    const char *s = getenv("LW_SHARED");
    return s && *s ? s : "../shared";
}

/* Scratch directory for files a test writes ($LW_TMP, created by the test if needed). */
static inline const char *test_tmp_dir(void) {
    const char *s = getenv("LW_TMP");
    return s && *s ? s : "/tmp";
}

static inline int test_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

#endif
