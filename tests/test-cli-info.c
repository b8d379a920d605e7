/* `llamaweb info` end to end: the model summary of ../shared models, success on every shared GGUF, JSON that
 * parses back (checked by the fields we look for), and a one-line error with a non-zero exit on a bad file. */
#include "test.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs a command, captures up to cap bytes of its stdout+stderr, returns its exit status (-1 on failure). */
static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    while (fgetc(p) != EOF) { /* drain */ }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char out[1 << 20];

static void expect_line(const char *text, const char *line) {
    CHECK_MSG(strstr(text, line) != NULL, "output lacks '%s'", line);
}

int main(void) {
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) test_skip("LW_CLI is not set (run through ctest)");
    static char cmd[8192];

    /* A corrupt file: exit code != 0, exactly one line on stderr naming the problem. */
    char bad[1024];
    mkdir(test_tmp_dir(), 0755);
    snprintf(bad, sizeof bad, "%s/bad-magic.gguf", test_tmp_dir());
    FILE *f = fopen(bad, "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite("GGUX\3\0\0\0", 1, 8, f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "'%s' info '%s' 2>&1", cli, bad);
    int rc = run(cmd, out, sizeof out);
    CHECK(rc == 1);
    CHECK(strstr(out, "bad magic") != NULL);
    char *nl = strchr(out, '\n');
    CHECK(nl != NULL && nl[1] == 0); /* one line */
    snprintf(cmd, sizeof cmd, "'%s' info /nonexistent.gguf 2>&1", cli);
    CHECK(run(cmd, out, sizeof out) == 1);
    snprintf(cmd, sizeof cmd, "'%s' info 2>&1", cli);
    CHECK(run(cmd, out, sizeof out) == 2);

    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    if (access(path, R_OK) != 0) {
        printf("SKIP (partly): %s is absent; shared-model checks not run\n", path);
        return test_summary("test-cli-info");
    }
    snprintf(cmd, sizeof cmd, "'%s' info '%s'", cli, path);
    CHECK(run(cmd, out, sizeof out) == 0);
    expect_line(out, "architecture:        llama\n");
    expect_line(out, "blocks:              5\n");
    expect_line(out, "embedding length:    64\n");
    expect_line(out, "heads:               8\n");
    expect_line(out, "kv heads:            4\n");
    expect_line(out, "vocab:               512\n");
    expect_line(out, "parameters:          292800 ");
    expect_line(out, "tokenizer.ggml.tokens [arr]: [512 strings]\n");
    expect_line(out, "  f32          48 tensors ");
    CHECK(strstr(out, "  f16 ") == NULL); /* all tensors F32 */

    snprintf(cmd, sizeof cmd, "'%s' info --json '%s'", cli, path);
    CHECK(run(cmd, out, sizeof out) == 0);
    expect_line(out, "\"architecture\": \"llama\"");
    expect_line(out, "\"llama.block_count\": 5");
    expect_line(out, "\"tokenizer.ggml.tokens\": {\"array_of\": \"str\", \"length\": 512}");
    expect_line(out, "\"parameters\": 292800");

    /* Every shared GGUF: info succeeds, text and JSON. */
    const char *dirs[] = {"models", "vocab"};
    int n_files = 0;
    for (int d = 0; d < 2; d++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", test_shared_dir(), dirs[d]);
        DIR *dp = opendir(dir);
        if (!dp) continue;
        struct dirent *e;
        while ((e = readdir(dp))) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 5, ".gguf")) continue;
            snprintf(cmd, sizeof cmd, "'%s' info '%s/%s' >/dev/null 2>&1 && '%s' info --json '%s/%s' >/dev/null", cli,
                     dir, e->d_name, cli, dir, e->d_name);
            int r = run(cmd, out, sizeof out);
            CHECK_MSG(r == 0, "llamaweb info %s/%s exited %d", dirs[d], e->d_name, r);
            n_files++;
        }
        closedir(dp);
    }
    printf("llamaweb info ran on %d shared GGUF files\n", n_files);
    CHECK(n_files >= 8);
    return test_summary("test-cli-info");
}
