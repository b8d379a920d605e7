/* lw_generate / lw_generate_text and text through the model (public API only):
 *  - the tokens equal a hand-written loop of lw_decode + lw_sample (greedy and seeded sampling);
 *  - continuing with the pending token (res.last) equals one longer generation;
 *  - every stop reason: length, callback, full context, end of generation (and ignore_eog going past it);
 *  - errors come back as statuses with a message on the context or the model;
 *  - a model whose tokenizer this build does not read still loads and generates ids;
 *  - stories260K (when the shared folder has it): "Once upon a time" continues as llama.cpp does
 *    (", there was a little girl named Lily. She loved to play outside", first id 432), tokenize/detokenize. */
#include "llamaweb.h"
#include "test.h"
#include "engine-synth.h"

/* What the callback saw. */
typedef struct seen {
    int n;          /* calls with a token (>= 0)            */
    int stop_at;    /* return 1 on this call (1-based); 0: never */
    int32_t ids[4096]; /* tokens in order                   */
    char text[65536]; /* text, NUL-terminated               */
    size_t len;       /* bytes of text                      */
} seen;

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    seen *s = user;
    if (token >= 0 && s->n < 4096) s->ids[s->n++] = token;
    if (s->len + len < sizeof s->text) memcpy(s->text + s->len, text, len), s->len += len, s->text[s->len] = 0;
    return s->stop_at && s->n == s->stop_at;
}

static lw_context *new_context(lw_model *m, uint32_t n_ctx) {
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    lw_context *c = NULL;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", lw_context_error(c));
    return c;
}

static lw_sampler *new_sampler(lw_model *m, float temp, uint64_t seed) {
    lw_sampler_params sp = lw_sampler_default_params();
    sp.temp = temp;
    sp.seed = seed;
    if (temp > 10) sp.top_k = 0, sp.top_p = 1, sp.min_p = 0; /* nearly uniform */
    lw_sampler *s = NULL;
    CHECK(lw_sampler_create(lw_model_n_vocab(m), &sp, NULL, &s) == LW_OK);
    return s;
}

/* n tokens after prompt by hand: decode, sample, decode, ... (the reference for lw_generate's loop). */
static void manual(lw_model *m, const int32_t *prompt, int n_prompt, int n, float temp, uint64_t seed, int32_t *out) {
    lw_context *c = new_context(m, 256);
    lw_sampler *s = new_sampler(m, temp, seed);
    for (int i = 0; i < n_prompt; i++) lw_sampler_accept(s, prompt[i]);
    CHECK(lw_decode(c, prompt, n_prompt, 0) == LW_OK);
    for (int i = 0; i < n; i++) {
        out[i] = lw_sample(c, s, -1);
        if (i + 1 < n) CHECK(lw_decode(c, &out[i], 1, 0) == LW_OK);
    }
    lw_sampler_free(s);
    lw_context_free(c);
}

static void check_synth(const char *path) {
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    if (!m) return;
    CHECK(lw_model_vocab(m) != NULL);
    int32_t prompt[24], want[40];
    for (int i = 0; i < 24; i++) prompt[i] = (i * 37 + 11) % lw_model_n_vocab(m);
    lw_generate_params gp = lw_generate_default_params();
    gp.on_token = on_token;
    gp.ignore_eog = 1;
    lw_generate_result r;
    static seen sn;

    /* greedy and seeded sampling: the same tokens as the hand-written loop */
    for (int k = 0; k < 2; k++) {
        float temp = k ? 0.9f : 0.f;
        manual(m, prompt, 24, 40, temp, 77, want);
        lw_context *c = new_context(m, 256);
        lw_sampler *s = new_sampler(m, temp, 77);
        memset(&sn, 0, sizeof sn);
        gp.user = &sn;
        gp.n_predict = 40;
        CHECK(lw_generate(c, s, prompt, 24, &gp, &r) == LW_OK);
        CHECK(r.n_prompt == 24 && r.n_generated == 40 && r.stop == LW_STOP_LENGTH && r.last == want[39]);
        CHECK_MSG(sn.n == 40 && !memcmp(sn.ids, want, sizeof want), "temp %.1f: tokens differ from the loop", temp);
        CHECK(lw_context_n_past(c) == 24 + 39); /* the last token is pending, not decoded */
        lw_sampler_free(s);
        lw_context_free(c);
    }

    /* continuing with the pending token: 15 + 25 tokens == 40 (greedy) */
    manual(m, prompt, 24, 40, 0.f, 1, want);
    lw_context *c = new_context(m, 256);
    lw_sampler *s = new_sampler(m, 0.f, 1);
    memset(&sn, 0, sizeof sn);
    gp.n_predict = 15;
    CHECK(lw_generate(c, s, prompt, 24, &gp, &r) == LW_OK);
    gp.n_predict = 25;
    CHECK(lw_generate(c, s, &r.last, 1, &gp, &r) == LW_OK);
    CHECK(r.n_prompt == 1 && r.n_generated == 25);
    CHECK_MSG(sn.n == 40 && !memcmp(sn.ids, want, sizeof want), "continued generation differs");

    /* no prompt: continue from the logits of the caller's own decode (same tokens as with the prompt) */
    manual(m, prompt, 24, 10, 0.f, 1, want);
    CHECK(lw_context_set_n_past(c, 0) == LW_OK);
    CHECK(lw_decode(c, prompt, 24, 0) == LW_OK);
    memset(&sn, 0, sizeof sn);
    gp.n_predict = 10;
    CHECK(lw_generate(c, s, NULL, 0, &gp, &r) == LW_OK);
    CHECK(r.n_prompt == 0 && r.n_generated == 10 && sn.n == 10 && !memcmp(sn.ids, want, 10 * sizeof(int32_t)));

    /* n_predict 0: the prompt only */
    CHECK(lw_context_set_n_past(c, 0) == LW_OK);
    gp.n_predict = 0;
    CHECK(lw_generate(c, s, prompt, 24, &gp, &r) == LW_OK);
    CHECK(r.n_generated == 0 && r.stop == LW_STOP_LENGTH && r.last == -1 && lw_context_n_past(c) == 24);

    /* the callback stops it at its 5th token */
    CHECK(lw_context_set_n_past(c, 0) == LW_OK);
    memset(&sn, 0, sizeof sn);
    sn.stop_at = 5;
    gp.n_predict = 40;
    CHECK(lw_generate(c, s, prompt, 24, &gp, &r) == LW_OK);
    CHECK(r.n_generated == 5 && r.stop == LW_STOP_CALLBACK && r.last == sn.ids[4] && lw_context_n_past(c) == 24 + 4);
    lw_sampler_free(s);
    lw_context_free(c);

    /* a full context: 30 prompt cells + 10 decoded tokens fill 40 cells; the 11th is sampled and pending */
    c = new_context(m, 40);
    s = new_sampler(m, 0.f, 1);
    int32_t long_prompt[50];
    for (int i = 0; i < 50; i++) long_prompt[i] = (i * 13 + 7) % lw_model_n_vocab(m);
    gp.n_predict = -1;
    sn.stop_at = 0;
    CHECK(lw_generate(c, s, long_prompt, 30, &gp, &r) == LW_OK);
    CHECK_MSG(r.stop == LW_STOP_CONTEXT && r.n_generated == 11 && lw_context_n_past(c) == 40, "stop %d, %d tokens",
              (int)r.stop, r.n_generated);

    /* errors: the message is on the context */
    CHECK(lw_context_set_n_past(c, 0) == LW_OK);
    CHECK(lw_generate(c, s, long_prompt, 50, &gp, &r) == LW_ERR_TOO_LARGE);
    CHECK(strlen(lw_context_error(c)) > 0 && r.n_generated == 0);
    printf("50 tokens in 40 cells: %s\n", lw_context_error(c));
    int32_t bad = lw_model_n_vocab(m);
    CHECK(lw_generate(c, s, &bad, 1, &gp, &r) == LW_ERR_INVALID_ARG);
    CHECK(lw_generate(c, NULL, prompt, 1, &gp, &r) == LW_ERR_INVALID_ARG);
    CHECK(lw_generate(c, s, NULL, 3, &gp, &r) == LW_ERR_INVALID_ARG);
    lw_context_free(c);
    c = new_context(m, 40);
    CHECK(lw_generate(c, s, NULL, 0, &gp, &r) == LW_ERR_INVALID_ARG); /* nothing decoded yet: no logits */
    CHECK(strstr(lw_context_error(c), "no logits") != NULL);
    lw_sampler_free(s);
    lw_context_free(c);

    /* end of generation: nearly uniform sampling over 320 tokens meets </s> (id 2) early; with ignore_eog the
     * same draws go on past it */
    c = new_context(m, 2048);
    s = new_sampler(m, 100.f, 5);
    memset(&sn, 0, sizeof sn);
    gp.ignore_eog = 0;
    gp.n_predict = 2000;
    CHECK(lw_generate(c, s, prompt, 1, &gp, &r) == LW_OK);
    printf("nearly uniform sampling: end of generation after %d tokens\n", r.n_generated);
    CHECK(r.stop == LW_STOP_EOG && r.last == 2 && sn.ids[sn.n - 1] == 2 && lw_vocab_is_eog(lw_model_vocab(m), 2));
    const int n_eog = r.n_generated;
    CHECK(lw_context_set_n_past(c, 0) == LW_OK);
    lw_sampler_reset(s, 5);
    gp.ignore_eog = 1;
    gp.n_predict = n_eog + 5;
    CHECK(lw_generate(c, s, prompt, 1, &gp, &r) == LW_OK);
    CHECK(r.stop == LW_STOP_LENGTH && r.n_generated == n_eog + 5);
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
}

/* A tokenizer this build does not read: the model loads without a vocabulary and still generates ids. */
static void unknown_tokenizer(lw_gguf_writer *w, const char *arch) {
    (void)arch;
    lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "no-such-tokenizer"); /* the later "llama" is refused */
}

static void check_no_vocab(void) {
    char path[1024];
    synth_spec sp = {320, 64, 1, 4, 2, 96, LW_TYPE_F32, 0, 9, NULL, 0, 0, 0};
    synth_path(path, sizeof path, "generate-novocab.gguf");
    synth_extra_keys = unknown_tokenizer;
    CHECK(synth_write(path, &sp) == 0);
    synth_extra_keys = NULL;
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    if (!m) return;
    CHECK(lw_model_vocab(m) == NULL);
    size_t n = 0;
    int32_t ids[8];
    CHECK(lw_model_tokenize(m, "abc", 3, 1, 0, ids, 8, &n) == LW_ERR_UNSUPPORTED);
    printf("no tokenizer: %s\n", lw_model_error(m));
    CHECK(strstr(lw_model_error(m), "no-such-tokenizer") != NULL);
    lw_context *c = new_context(m, 64);
    lw_sampler *s = new_sampler(m, 0.f, 1);
    static seen sn;
    memset(&sn, 0, sizeof sn);
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = 6;
    gp.on_token = on_token;
    gp.user = &sn;
    lw_generate_result r;
    int32_t prompt[3] = {1, 100, 200};
    CHECK(lw_generate(c, s, prompt, 3, &gp, &r) == LW_OK);
    CHECK(r.n_generated == 6 && sn.n == 6 && sn.len == 0);
    CHECK(lw_generate_text(c, s, "abc", 3, 1, 0, &gp, &r) == LW_ERR_UNSUPPORTED);
    CHECK(strstr(lw_context_error(c), "no-such-tokenizer") != NULL);
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
}

/* Counting allocator (for the long-piece case: lw_generate's one setup allocation). */
static long n_alloc_calls;
static void *count_malloc(void *u, size_t n) {
    (void)u;
    n_alloc_calls++;
    return malloc(n);
}
static void *count_realloc(void *u, void *p, size_t n) {
    (void)u;
    n_alloc_calls++;
    return realloc(p, n);
}
static void count_free(void *u, void *p) {
    (void)u;
    if (p) n_alloc_calls++;
    free(p);
}

/* A vocabulary with a 600-byte token: streamed pieces no longer fit lw_generate's stack buffer, so it
 * allocates one buffer at setup (2 allocator calls, whatever the length) and the text is still exact: the
 * concatenation of every generated token's piece (all tokens are whole ASCII words here). */
static void check_long_pieces(void) {
    enum { N_WORDS = 120 };
    char vocab_path[1024], model_path[1024];
    synth_path(vocab_path, sizeof vocab_path, "generate-long-vocab.gguf");
    synth_path(model_path, sizeof model_path, "generate-long.gguf");
    static char text[N_WORDS + 4][640];
    lw_gguf_str toks[N_WORDS + 4];
    float scores[N_WORDS + 4];
    int32_t types[N_WORDS + 4];
    const int n = N_WORDS + 4, long_id = N_WORDS + 3;
    for (int i = 0; i < n; i++) {
        if (i < 3) snprintf(text[i], sizeof text[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < long_id) snprintf(text[i], sizeof text[i], "\xe2\x96\x81w%d", i);
        else {
            memcpy(text[i], "\xe2\x96\x81", 3);
            memset(text[i] + 3, 'L', 600);
            text[i][603] = 0;
        }
        toks[i].s = text[i], toks[i].len = strlen(text[i]);
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    lw_gguf_writer *w = NULL;
    CHECK(lw_gguf_writer_new(NULL, &w) == LW_OK);
    CHECK(lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") == LW_OK);
    CHECK(lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, (uint64_t)n, toks) == LW_OK);
    CHECK(lw_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LW_GGUF_FLOAT32, (uint64_t)n, scores) == LW_OK);
    CHECK(lw_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LW_GGUF_INT32, (uint64_t)n, types) == LW_OK);
    CHECK(lw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) == LW_OK);
    CHECK(lw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) == LW_OK);
    CHECK(lw_gguf_writer_write_file(w, vocab_path, 0) == LW_OK);
    lw_gguf_writer_free(w);
    char cmd[4096], out[1024];
    const char *cli = getenv("LW_CLI");
    if (!cli || !*cli) {
        printf("note: LW_CLI not set: long-piece part not run\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --type f32 --vocab '%s' -o '%s' 2>&1", cli, vocab_path,
             model_path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    CHECK_MSG(pclose(p) == 0, "%s", out);

    lw_allocator a = {count_malloc, count_realloc, count_free, NULL};
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(model_path, &mp, &m) == LW_OK, "%s", lw_model_error(m));
    if (!m) return;
    CHECK(lw_vocab_max_piece_len(lw_model_vocab(m)) == 601);
    lw_context *c = new_context(m, 1024);
    lw_sampler *s = new_sampler(m, 100.f, 3); /* nearly uniform: the long token comes up */
    static seen sn;
    memset(&sn, 0, sizeof sn);
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = 1000;
    gp.ignore_eog = 1;
    gp.on_token = on_token;
    gp.user = &sn;
    lw_generate_result r;
    int32_t prompt = 1;
    n_alloc_calls = 0;
    CHECK(lw_generate(c, s, &prompt, 1, &gp, &r) == LW_OK);
    CHECK_MSG(n_alloc_calls == 2, "%ld allocator calls", n_alloc_calls);
    CHECK(r.n_generated == 1000);
    static char want[1000 * 610];
    size_t len = 0, k, n_long = 0;
    for (int i = 0; i < sn.n; i++) {
        CHECK(lw_model_token_to_piece(m, sn.ids[i], 0, want + len, sizeof want - len, &k) == LW_OK);
        len += k;
        n_long += sn.ids[i] == long_id;
    }
    printf("long pieces: %zu of 1000 tokens are the 601-byte one, %zu bytes streamed\n", n_long, sn.len);
    CHECK(n_long > 0);
    CHECK(sn.len == len && !memcmp(sn.text, want, len));
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
}

static void check_stories(const char *path) {
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    if (!m) return;
    /* without the tokenizer when asked (lw_model_params.no_vocab) */
    lw_model_params mp = lw_model_default_params();
    mp.no_vocab = 1;
    lw_model *bare = NULL;
    CHECK(lw_model_load_file(path, &mp, &bare) == LW_OK);
    CHECK(bare && lw_model_vocab(bare) == NULL);
    size_t nb = 0;
    CHECK(lw_model_tokenize(bare, "Once", 4, 1, 0, NULL, 0, &nb) == LW_ERR_UNSUPPORTED);
    CHECK(strstr(lw_model_error(bare), "no_vocab") != NULL);
    lw_model_free(bare);

    /* tokenize / detokenize through the model */
    int32_t ids[16];
    size_t n = 0;
    CHECK(lw_model_tokenize(m, "Once upon a time", 16, 1, 0, ids, 16, &n) == LW_OK);
    const int32_t want_ids[5] = {1, 403, 407, 261, 378}; /* llama.cpp's */
    CHECK(n == 5 && !memcmp(ids, want_ids, sizeof want_ids));
    CHECK(lw_model_tokenize(m, "Once upon a time", 16, 1, 0, ids, 3, &n) == LW_ERR_TOO_LARGE && n == 5);
    CHECK(strlen(lw_model_error(m)) > 0);
    char text[64];
    /* as llama_detokenize: SPM's prefix space goes, unless a BOS was removed before it */
    CHECK(lw_model_detokenize(m, want_ids + 1, 4, 0, 0, text, sizeof text, &n) == LW_OK);
    CHECK_MSG(n == 16 && !memcmp(text, "Once upon a time", 16), "%.*s", (int)n, text);
    CHECK(lw_model_detokenize(m, want_ids, 5, 1, 0, text, sizeof text, &n) == LW_OK);
    CHECK_MSG(n == 17 && !memcmp(text, " Once upon a time", 17), "%.*s", (int)n, text);
    CHECK(lw_model_token_to_piece(m, 432, 0, text, sizeof text, &n) == LW_OK && n == 1 && text[0] == ',');
    CHECK(lw_model_token_to_piece(m, 100000, 0, text, sizeof text, &n) == LW_ERR_INVALID_ARG);

    /* greedy text generation as llama.cpp */
    lw_context *c = new_context(m, 128);
    lw_sampler *s = new_sampler(m, 0.f, 1);
    static seen sn;
    memset(&sn, 0, sizeof sn);
    lw_generate_params gp = lw_generate_default_params();
    gp.n_predict = 24;
    gp.on_token = on_token;
    gp.user = &sn;
    lw_generate_result r;
    CHECK_MSG(lw_generate_text(c, s, "Once upon a time", 16, 1, 0, &gp, &r) == LW_OK, "%s", lw_context_error(c));
    const char *want = ", there was a little girl named Lily. She loved to play outside";
    CHECK(r.n_prompt == 5 && sn.ids[0] == 432);
    CHECK_MSG(!strncmp(sn.text, want, strlen(want)), "got: %s", sn.text);
    printf("stories260K: Once upon a time%s\n", sn.text);
    /* stop strings: the text ends before the first that comes (one split across tokens, one never seen), as
     * the greedy text cut there; generation stops at the token that completes it */
    static const char *const stops[] = {"zzz", "e loved", "named Lily"};
    for (int k = 1; k < 3; k++) {
        CHECK(lw_context_set_n_past(c, 0) == LW_OK);
        lw_sampler_reset(s, 1);
        static seen st;
        memset(&st, 0, sizeof st);
        gp.user = &st;
        gp.stop = stops + (k == 1 ? 1 : 0); /* {"e loved", "named Lily"} or {"zzz", "e loved"} */
        gp.n_stop = 2;
        CHECK(lw_generate_text(c, s, "Once upon a time", 16, 1, 0, &gp, &r) == LW_OK);
        const char *a = strstr(want, "e loved"), *b = strstr(want, "named Lily");
        const size_t cut = (size_t)((k == 1 && b < a ? b : a) - want);
        CHECK_MSG(r.stop == LW_STOP_STRING && st.len == cut && !strncmp(st.text, want, cut),
                  "stop %d, got: %s", (int)r.stop, st.text);
        CHECK(r.n_generated < 24 && r.n_generated == st.n);
        printf("stop strings: %d tokens, \"%s\"\n", r.n_generated, st.text);
    }
    gp.stop = NULL, gp.n_stop = 0;
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
}

int main(void) {
    char path[1024];
    synth_spec sp = {320, 64, 2, 4, 2, 96, LW_TYPE_F32, 0, 21, NULL, 0, 0, 0};
    synth_path(path, sizeof path, "generate-synth.gguf");
    CHECK(synth_write(path, &sp) == 0);
    check_synth(path);
    check_no_vocab();
    check_long_pieces();
    char shared[1024];
    snprintf(shared, sizeof shared, "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(shared, "rb");
    if (f) {
        fclose(f);
        check_stories(shared);
    } else {
        printf("note: %s absent: stories260K part not run\n", shared);
    }
    return test_summary("test-generate");
}
