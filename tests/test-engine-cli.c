/* The `llamaweb run` and `llamaweb bench` commands end to end on stories260K (skipped without the shared
 * model): greedy generation from BOS + "Once upon a time" must print llama.cpp's continuation (known from
 * llama.cpp: ids 432 383 ... = ", there was a little girl named Lily. She loved to play outside"), from
 * token ids and from the text prompt through the tokenizer, and so must examples/generate.c (public API only);
 * bench must print its table. */
#include "test.h"

#include <stdio.h>
#include <string.h>

/* Runs a shell command and returns its stdout (NUL-terminated, truncated to cap). */
static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

int main(void) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) test_skip("LW_CLI is not set (run through ctest)");
    char model[1024], cmd[4096];
    static char out[65536];
    snprintf(model, sizeof(model), "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(model, "rb");
    if (!f) test_skip("stories260K.gguf not found in the shared models folder");
    fclose(f);

    const char *want = ", there was a little girl named Lily. She loved to play outside";
    snprintf(cmd, sizeof(cmd), "%s run -m %s --tokens 1,403,407,261,378 -n 24 --temp 0 -t 1 2>/dev/null", cli, model);
    CHECK(run(cmd, out, sizeof(out)) == 0);
    CHECK_MSG(strstr(out, want) != NULL, "output: %s", out);
    CHECK_MSG(strstr(out, "ids: 1 403 407 261 378 | 432 383") != NULL, "output: %s", out);

    snprintf(cmd, sizeof(cmd), "%s run -m %s -p 'Once upon a time' -n 24 --temp 0 -t 2 2>/dev/null", cli, model);
    CHECK(run(cmd, out, sizeof(out)) == 0);
    CHECK_MSG(strstr(out, want) != NULL, "output: %s", out);
    CHECK_MSG(strstr(out, "ids: 1 403 407 261 378 | 432") != NULL, "output: %s", out);

    /* stdout and stderr in one pipe: the figures come after the streamed text and the ids, on a line of their own */
    snprintf(cmd, sizeof(cmd), "%s run -m %s --tokens 1,403,407,261,378 -n 8 --temp 0 -t 1 2>&1", cli, model);
    CHECK(run(cmd, out, sizeof(out)) == 0);
    const char *ids_line = strstr(out, "\nids: 1 403"), *figures = strstr(out, "\nllamaweb run: prompt 5 tokens");
    CHECK_MSG(ids_line && figures && figures > ids_line, "output: %s", out);

    /* sampling with a seed is reproducible */
    static char out2[65536];
    snprintf(cmd, sizeof(cmd), "%s run -m %s --tokens 1 -n 24 --temp 0.9 --seed 7 2>/dev/null", cli, model);
    CHECK(run(cmd, out, sizeof(out)) == 0);
    CHECK(run(cmd, out2, sizeof(out2)) == 0);
    CHECK(!strcmp(out, out2));

    snprintf(cmd, sizeof(cmd), "%s bench -m %s -p 32 -n 8 -t 1 -r 1 2>/dev/null", cli, model);
    CHECK(run(cmd, out, sizeof(out)) == 0);
    CHECK_MSG(strstr(out, "| threads |") && strstr(out, "|       1 |"), "bench output: %s", out);

    /* examples/generate.c (built next to the CLI), which sees only include/llamaweb.h */
    char example[1024];
    snprintf(example, sizeof(example), "%s", cli);
    char *slash = strrchr(example, '/');
    snprintf(slash ? slash + 1 : example, sizeof(example) - (size_t)(slash ? slash + 1 - example : 0), "example-generate");
    snprintf(cmd, sizeof(cmd), "'%s' %s 'Once upon a time' 24 2>/dev/null", example, model);
    CHECK(run(cmd, out, sizeof(out)) == 0);
    CHECK_MSG(!strncmp(out, "Once upon a time", 16) && strstr(out, want) != NULL, "example output: %s", out);

    /* misuse: exit status 2 with usage, or 1 with a message */
    snprintf(cmd, sizeof(cmd), "%s run -m %s 2>/dev/null", cli, model);
    CHECK(run(cmd, out, sizeof(out)) != 0);
    snprintf(cmd, sizeof(cmd), "%s run -m /nonexistent.gguf --tokens 1 2>&1", cli);
    CHECK(run(cmd, out, sizeof(out)) != 0);
    CHECK_MSG(strstr(out, "nonexistent") != NULL, "output: %s", out);
    return test_summary("test-engine-cli");
}
