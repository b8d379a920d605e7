/* Long generations through a full context, with counters that must not grow. 10,000 tokens (LW_TEST_SLOW=1;
 * the CI form: 2,000, 600 under the sanitizers) are sampled from stories260K (../shared; else a synthetic
 * llama with the built-in byte vocabulary) in a 256-cell context: each lw_generate runs until it stops with
 * LW_STOP_CONTEXT (the clear stop), then the context-full policy of llama.cpp's examples shifts the context:
 * keep the first n_keep tokens, drop half of the rest, and continue with the kept second half (decoded again
 * at its new cells, which gives the cache llama.cpp's RoPE shift gives, up to rounding). Counters before and
 * after the first shift and at the end: allocator calls and live blocks (none during the loop: generation and
 * shifting allocate nothing), the context's bytes, open file descriptors and the process's resident set
 * (within 1 MiB). */
#include "alloc-counter.h"
#include "llamaweb.h"
#include "test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1) break;
    fclose(f);
    return v;
}

/* The ids in the context (the cache's cells, in order), kept by the test to shift them. */
#define N_CTX  256
#define N_KEEP 16

typedef struct history {
    int32_t ids[N_CTX]; /* what each cell holds          */
    uint32_t n;         /* cells in use                  */
    long generated;     /* tokens sampled in all         */
} history;

static int record(void *user, int32_t token, const char *text, size_t len) {
    (void)text, (void)len;
    history *h = user;
    if (token >= 0) h->generated++;
    return 0;
}

typedef struct snapshot {
    long calls, live, fds, rss;
    uint64_t ctx_bytes;
} snapshot;

static snapshot take(const alloc_counter *c, const lw_context *ctx) {
    snapshot s = {c->calls, c->live, open_fds(), rss_kib(), lw_context_bytes(ctx)};
    return s;
}

int main(void) {
    const char *slow = getenv("LW_TEST_SLOW"), *san = getenv("LW_TEST_SANITIZED");
    const long target = slow && *slow && strcmp(slow, "0") ? 10000
                        : san && *san && strcmp(san, "0")  ? 600
                                                           : 2000;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
    } else {
        snprintf(path, sizeof path, "tests/fuzz/seeds/model/tiny-q8_0.gguf");
        printf("long-run: no stories260K under %s/models: the synthetic llama seed instead\n",
               test_shared_dir());
    }
    alloc_counter cnt = {0};
    lw_allocator a = alloc_counter_hooks(&cnt);
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    lw_model *m = NULL;
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s: %s", path, lw_model_error(m));
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 1;
    CHECK(m && lw_context_create(m, &cp, &c) == LW_OK);
    lw_sampler_params sp = lw_sampler_default_params();
    sp.seed = 1234;
    sp.temp = 1.0f; /* sampled: the text wanders over the vocabulary, EOS ignored */
    CHECK(m && lw_sampler_create(lw_model_n_vocab(m), &sp, &a, &s) == LW_OK);
    if (!m || !c || !s) return test_summary("test-long-run");

    static history h;
    int32_t gen_ids[N_CTX];
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = -1; /* until the context is full */
    gp.ignore_eog = 1;
    gp.on_token = record;
    gp.user = &h;
    gp.tokens = gen_ids;
    gp.tokens_cap = N_CTX;

    int32_t prompt[8];
    size_t n_prompt = 0;
    CHECK(lw_model_tokenize(m, "Once upon a time", 16, 1, 0, prompt, 8, &n_prompt) == LW_OK);
    memcpy(h.ids, prompt, n_prompt * sizeof *prompt);
    h.n = (uint32_t)n_prompt;
    const int32_t *next = prompt;
    size_t n_next = n_prompt;
    const snapshot s0 = take(&cnt, c);
    snapshot s1 = s0;
    long shifts = 0;
    const clock_t t0 = clock();
    while (h.generated < target) {
        lw_generate_result r;
        const lw_status st = lw_generate(c, s, next, n_next, &gp, &r);
        CHECK_MSG(st == LW_OK, "%s", lw_context_error(c));
        if (st != LW_OK) break;
        CHECK_MSG(r.stop == LW_STOP_CONTEXT, "stopped by %d, not by the full context", (int)r.stop);
        CHECK_MSG(lw_context_n_past(c) == N_CTX, "%u cells after a full-context stop", lw_context_n_past(c));
        /* the cells now: what they held before, then the generated ids but the last (pending) */
        for (int32_t i = 0; i + 1 < r.n_generated && h.n < N_CTX; i++) h.ids[h.n++] = gen_ids[i];
        CHECK(h.n == N_CTX);
        /* shift: keep N_KEEP, drop half of the rest, the kept half moves down; then the pending token */
        const uint32_t n_discard = (h.n - N_KEEP) / 2;
        memmove(h.ids + N_KEEP, h.ids + N_KEEP + n_discard, (h.n - N_KEEP - n_discard) * sizeof *h.ids);
        h.n -= n_discard;
        CHECK(lw_context_set_n_past(c, N_KEEP) == LW_OK);
        h.ids[h.n] = r.last;
        next = h.ids + N_KEEP;
        n_next = h.n + 1 - N_KEEP; /* decoded again at their new cells, the pending token last */
        h.n++;
        if (++shifts == 1) s1 = take(&cnt, c);
    }
    const double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    const snapshot s2 = take(&cnt, c);
    printf("long-run: %s: %ld tokens sampled in %.2f s (%ld context shifts of %u cells, n_keep %d)\n", path,
           h.generated, secs, shifts, N_CTX, N_KEEP);
    printf("long-run: counters   start / after shift 1 / end\n"
           "  allocator calls  %ld / %ld / %ld\n  live blocks      %ld / %ld / %ld\n"
           "  context bytes    %llu / %llu / %llu\n  open fds         %ld / %ld / %ld\n"
           "  RSS KiB          %ld / %ld / %ld\n",
           s0.calls, s1.calls, s2.calls, s0.live, s1.live, s2.live, (unsigned long long)s0.ctx_bytes,
           (unsigned long long)s1.ctx_bytes, (unsigned long long)s2.ctx_bytes, s0.fds, s1.fds, s2.fds, s0.rss,
           s1.rss, s2.rss);
    CHECK(h.generated >= target && shifts >= 3);
    CHECK_MSG(s2.calls == s0.calls, "%ld allocator calls during the run", s2.calls - s0.calls);
    CHECK(s2.live == s0.live && s2.ctx_bytes == s0.ctx_bytes && s2.fds == s0.fds);
    CHECK_MSG(s2.rss <= s1.rss + 1024, "RSS grew by %ld KiB after the first shift", s2.rss - s1.rss);
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
    CHECK_MSG(cnt.live == 0, "%ld blocks leaked", cnt.live);
    return test_summary("test-long-run");
}
