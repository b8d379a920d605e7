/* Allocation discipline of the engine, through the lw_allocator hook:
 *  - decoding (prompt, then single tokens) and sampling make no allocator call at all; nor does lw_generate
 *    (sampling, streaming the text, decoding), and lw_generate_text allocates only to tokenize its prompt;
 *  - every allocation made at load / context creation is freed;
 *  - failing the N-th allocation of load + context creation, for every N, returns LW_ERR_NOMEM (or another
 *    error) cleanly, without crashing or leaking (ASAN builds check the leaks). */
#include "llamaweb.h"
#include "synth/synth.h"
#include "test.h"
#include "engine-synth.h"

#include <stdlib.h>

/* Counting allocator that can fail the N-th call. */
typedef struct counter {
    long mallocs, reallocs, frees; /* calls so far           */
    long live;                     /* blocks not yet freed   */
    long fail_at;                  /* 1-based call to fail; 0 = never */
} counter;

static void *c_malloc(void *u, size_t n) {
    counter *c = u;
    if (c->fail_at && c->mallocs + c->reallocs + 1 == c->fail_at) {
        c->mallocs++;
        return NULL;
    }
    c->mallocs++;
    void *p = malloc(n);
    if (p) c->live++;
    return p;
}
static void *c_realloc(void *u, void *p, size_t n) {
    counter *c = u;
    if (c->fail_at && c->mallocs + c->reallocs + 1 == c->fail_at) {
        c->reallocs++;
        return NULL;
    }
    c->reallocs++;
    void *q = realloc(p, n);
    if (q && !p) c->live++;
    return q;
}
static void c_free(void *u, void *p) {
    counter *c = u;
    c->frees++;
    if (p) c->live--;
    free(p);
}

static long calls(const counter *c) {
    return c->mallocs + c->reallocs + c->frees;
}

static void check_no_alloc_during_decode(const char *path, int n_threads, uint32_t kv) {
    counter cnt = {0};
    lw_allocator a = {c_malloc, c_realloc, c_free, &cnt};
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    lw_model *m = NULL;
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s", lw_model_error(m));
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 64;
    cp.n_threads = n_threads;
    cp.type_k = cp.type_v = kv;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", lw_context_error(c));
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_repeat = 1.1f;
    CHECK(lw_sampler_create(lw_model_n_vocab(m), &sp, &a, &s) == LW_OK);
    if (!m || !c || !s) goto done;

    long before = calls(&cnt);
    int32_t prompt[100];
    for (int i = 0; i < 100; i++) prompt[i] = (i * 7 + 1) % lw_model_n_vocab(m);
    CHECK(lw_decode(c, prompt, 100, 0) == LW_OK); /* 100 > n_batch: split into steps of 64 and 36 */
    for (int i = 0; i < 100; i++) lw_sampler_accept(s, prompt[i]);
    for (int i = 0; i < 40; i++) {
        int32_t id = lw_sampler_sample(s, lw_get_logits(c, -1));
        lw_sampler_accept(s, id);
        CHECK(lw_decode(c, &id, 1, 0) == LW_OK);
    }
    CHECK(lw_context_set_n_past(c, 10) == LW_OK);
    CHECK(lw_decode(c, prompt, 50, 1) == LW_OK); /* all logits */
    long during = calls(&cnt) - before;
    printf("%s, %d thread(s), kv %s: %ld allocator calls during 3 decodes of prompts and 40 sampled steps\n", path,
           n_threads, kv == LW_TYPE_F16 ? "f16" : "f32", during);
    CHECK_MSG(during == 0, "%ld allocator calls while decoding", during);
done:
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
    CHECK_MSG(cnt.live == 0, "%ld blocks leaked", cnt.live);
}

/* Counts the tokens lw_generate streams (the callback itself must not allocate either). */
static int count_token(void *user, int32_t token, const char *text, size_t len) {
    (void)token, (void)text, (void)len;
    ++*(int *)user;
    return 0;
}

/* lw_generate allocates nothing: not for a token prompt, not when continuing; lw_generate_text allocates
 * only to tokenize its prompt (id buffer, tokenizer working memory): as much for 5 tokens as for 60. */
static void check_no_alloc_during_generate(const char *path) {
    counter cnt = {0};
    lw_allocator a = {c_malloc, c_realloc, c_free, &cnt};
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    lw_model *m = NULL;
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s", lw_model_error(m));
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", lw_context_error(c));
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_repeat = 1.1f;
    CHECK(lw_sampler_create(lw_model_n_vocab(m), &sp, &a, &s) == LW_OK);
    CHECK(lw_model_vocab(m) != NULL); /* the synth vocabulary: text is streamed through the detokenizer */
    if (!m || !c || !s) goto done;

    int n_tokens = 0;
    int32_t out[64];
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = 40;
    gp.ignore_eog = 1;
    gp.on_token = count_token;
    gp.user = &n_tokens;
    gp.tokens = out;
    gp.tokens_cap = 64;
    lw_generate_result r;
    int32_t prompt[30];
    for (int i = 0; i < 30; i++) prompt[i] = (i * 11 + 5) % lw_model_n_vocab(m);
    long before = calls(&cnt);
    CHECK(lw_generate(c, s, prompt, 30, &gp, &r) == LW_OK);
    CHECK(r.n_generated == 40 && r.stop == LW_STOP_LENGTH && r.last == out[39] && n_tokens == 40);
    gp.n_predict = 20; /* continue: the pending token first */
    CHECK(lw_generate(c, s, &r.last, 1, &gp, &r) == LW_OK);
    long during = calls(&cnt) - before;
    printf("%s: %ld allocator calls while generating 40 + 20 tokens (streamed text)\n", path, during);
    CHECK_MSG(during == 0, "%ld allocator calls in lw_generate", during);

    long per_text[2];
    const char *text = "Once upon a time there was a tokenizer";
    for (int k = 0; k < 2; k++) {
        CHECK(lw_context_set_n_past(c, 0) == LW_OK);
        gp.n_predict = k ? 60 : 5;
        before = calls(&cnt);
        CHECK_MSG(lw_generate_text(c, s, text, strlen(text), 1, 0, &gp, &r) == LW_OK, "%s", lw_context_error(c));
        per_text[k] = calls(&cnt) - before;
        CHECK(r.n_generated == gp.n_predict);
    }
    printf("%s: lw_generate_text: %ld allocator calls for 5 tokens, %ld for 60 (tokenizing the prompt)\n", path,
           per_text[0], per_text[1]);
    CHECK(per_text[0] == per_text[1]);
done:
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
    CHECK_MSG(cnt.live == 0, "%ld blocks leaked", cnt.live);
}

static void check_failing_allocations(const char *path) {
    int failures_seen = 0, n;
    for (n = 1; n < 400; n++) {
        counter cnt = {0};
        cnt.fail_at = n;
        lw_allocator a = {c_malloc, c_realloc, c_free, &cnt};
        lw_model_params mp = lw_model_default_params();
        mp.alloc = &a;
        lw_model *m = NULL;
        lw_context *c = NULL;
        lw_status st = lw_model_load_file(path, &mp, &m);
        if (st == LW_OK) {
            lw_context_params cp = lw_context_default_params();
            cp.n_ctx = 64;
            cp.n_threads = 2;
            st = lw_context_create(m, &cp, &c);
            if (st == LW_OK) {
                int32_t t = 1;
                CHECK(lw_decode(c, &t, 1, 0) == LW_OK);
            }
        }
        lw_context_free(c);
        lw_model_free(m);
        CHECK_MSG(cnt.live == 0, "failing call %d: %ld blocks leaked", n, cnt.live);
        if (st == LW_OK) break; /* n is past the last allocation: everything succeeded */
        failures_seen++;
        CHECK_MSG(st == LW_ERR_NOMEM || st == LW_ERR_IO, "failing call %d gave %s", n, lw_status_str(st));
    }
    printf("failing allocator: %d distinct allocation failures handled cleanly (%d calls in a full load)\n",
           failures_seen, n - 1);
    CHECK(failures_seen > 5);
}

int main(void) {
    char path[1024];
    synth_spec sp = {320, 64, 2, 4, 2, 96, LW_TYPE_F16, 0, 3, NULL, 0, 0, 0};
    synth_path(path, sizeof(path), "alloc-synth-f16.gguf");
    if (synth_write(path, &sp) != 0) {
        printf("cannot write %s\n", path);
        return 1;
    }
    check_no_alloc_during_decode(path, 1, LW_TYPE_F16);
    check_no_alloc_during_decode(path, 2, LW_TYPE_F16);
    check_no_alloc_during_decode(path, 3, LW_TYPE_F32);
    check_no_alloc_during_generate(path);
    check_failing_allocations(path);

    /* a mixture of experts (src/synth's tiny-qwen3moe): routing, grouped expert products, the weighted sum */
    lw__synth_params mp = {
        .preset = "tiny-qwen3moe", .type = "q4_0", .vocab_path = "builtin", .seed = 3, .n_vocab = 320};
    char err[LW_ERRMSG_SIZE];
    synth_path(path, sizeof(path), "alloc-synth-qwen3moe.gguf");
    CHECK_MSG(lw__synth_write(&mp, path, NULL, NULL, err) == LW_OK, "%s", err);
    check_no_alloc_during_decode(path, 2, LW_TYPE_F16);

    /* gemma4 (tiny-gemma4): per-layer input, blocks of two geometries, shared KV caches */
    mp.preset = "tiny-gemma4";
    synth_path(path, sizeof(path), "alloc-synth-gemma4.gguf");
    CHECK_MSG(lw__synth_write(&mp, path, NULL, NULL, err) == LW_OK, "%s", err);
    check_no_alloc_during_decode(path, 2, LW_TYPE_F16);
    check_no_alloc_during_decode(path, 1, LW_TYPE_F32);
    /* and its mixture of experts (tiny-gemma4-moe): fused gate|up experts, per-expert scales */
    mp.preset = "tiny-gemma4-moe";
    synth_path(path, sizeof(path), "alloc-synth-gemma4-moe.gguf");
    CHECK_MSG(lw__synth_write(&mp, path, NULL, NULL, err) == LW_OK, "%s", err);
    check_no_alloc_during_decode(path, 2, LW_TYPE_F16);

    char shared[1024];
    snprintf(shared, sizeof(shared), "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(shared, "rb");
    if (f) {
        fclose(f);
        check_no_alloc_during_decode(shared, 2, LW_TYPE_F16);
        check_no_alloc_during_generate(shared);
    }
    return test_summary("test-engine-alloc");
}
