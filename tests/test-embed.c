/* Embeddings (lw_embed, embeddings contexts, llamaweb embed) against llama.cpp's (libllama v0.4.0 through
 * tests/llama-oracle.h: llama_context_params.embeddings with each pooling type, llama_get_embeddings_ith
 * for none and llama_get_embeddings_seq for mean/cls/last), on stories260K and llama-2-tiny-random
 * (../shared, skipped visibly when absent) and on synthetic llama, qwen3, gemma3 and quantized models:
 * cosine >= 0.9999 per vector for F32/F16 weights, >= 0.999 for quantized ones (the documented bound; the
 * builds whose dot orders we reproduce give identical vectors). The minimum cosine and the largest
 * difference per model are printed.
 *
 * Without llama.cpp the rest still runs: the hidden state of an embeddings context equals the "result_norm"
 * rows a logits context computes (eval callback), pooling equals its definition over the per-token
 * vectors, inputs longer than n_batch, batches of inputs, normalisation, the file's pooling key, errors,
 * and the CLI's JSON against the C API. */
#include "engine-synth.h"
#include "synth/synth.h"
#include "llama-oracle.h"
#include "test.h"

#include <math.h>
#include <string.h>

/* llama.h entry points beyond the harness's (resolved here, optional). */
static float *(*ll_embd_ith)(void *ctx, int32_t i);
static float *(*ll_embd_seq)(void *ctx, int32_t seq);
static int32_t (*ll_ctx_pooling)(const void *ctx);
static int have_oracle;

static void open_oracle(void) {
    const char *why = llama_oracle_open();
    if (why) {
        printf("SKIP (llama.cpp comparisons): %s\n", why);
        return;
    }
    if (!llama_oracle_layout_ok()) {
        printf("SKIP (llama.cpp comparisons): libllama's default params do not match the v0.4.0 layouts\n");
        return;
    }
    void *h = dlopen(LLAMA_ORACLE_DIR "/libllama.v0.4.0.so", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        *(void **)&ll_embd_ith = dlsym(h, "llama_get_embeddings_ith");
        *(void **)&ll_embd_seq = dlsym(h, "llama_get_embeddings_seq");
        *(void **)&ll_ctx_pooling = dlsym(h, "llama_pooling_type");
    }
    have_oracle = ll_embd_ith && ll_embd_seq && ll_ctx_pooling;
    if (!have_oracle) printf("SKIP (llama.cpp comparisons): libllama lacks the embeddings entry points\n");
}

static double cosine(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++)
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (e > d || isnan(e)) d = isnan(e) ? INFINITY : e;
    }
    return d;
}

/* llama.cpp's embedding of one sequence with pooling (-1: the model's): n_embd floats, or one vector per
 * token when the pooling resolves to none. Returns the pooling used, -1 on failure. */
static int ll_embed(void *lm, const int32_t *toks, int n, int pooling, float *out, int E) {
    ll_context_params lp = ll.context_default_params();
    lp.n_ctx = 512;
    lp.n_batch = lp.n_ubatch = 512;
    lp.n_outputs_max_per_seq = 0; /* every token's output of the one sequence */
    lp.n_threads = lp.n_threads_batch = 1;
    lp.embeddings = true;
    lp.pooling_type = pooling;
    void *lc = ll.init_from_model(lm, lp);
    if (!lc || n > 256) return -1;
    int32_t tok[256], pos[256], nseq[256], seq0 = 0, *seqp[256];
    int8_t lg[256];
    for (int i = 0; i < n; i++) tok[i] = toks[i], pos[i] = i, nseq[i] = 1, seqp[i] = &seq0, lg[i] = 1;
    ll_batch b = {n, tok, NULL, pos, nseq, seqp, lg};
    int used = ll.decode(lc, b) == 0 ? ll_ctx_pooling(lc) : -1;
    if (used == LW_POOLING_NONE) {
        for (int i = 0; i < n && used >= 0; i++) {
            const float *e = ll_embd_ith(lc, i);
            if (!e)
                used = -1;
            else
                memcpy(out + (size_t)i * E, e, sizeof(float) * (size_t)E);
        }
    } else if (used > 0) {
        const float *e = ll_embd_seq(lc, 0);
        if (!e)
            used = -1;
        else
            memcpy(out, e, sizeof(float) * (size_t)E);
    }
    ll.free(lc);
    return used;
}

static lw_context *embd_context(lw_model *m, uint32_t n_batch) {
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    cp.embeddings = 1;
    lw_context *c = NULL;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", lw_context_error(c));
    return c;
}

static const char *pool_name(int p) {
    static const char *const names[] = {"none", "mean", "cls", "last"};
    return p >= 0 && p < 4 ? names[p] : p < 0 ? "model's" : "?";
}

/* One model: every pooling type on three prompts against llama.cpp. */
static void compare_model(const char *path, const char *name, double min_cos) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("%s: not found at %s, skipped\n", name, path);
        return;
    }
    fclose(f);
    if (!have_oracle) return;
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    void *lm = ll.model_load_from_file(path, ll.model_default_params());
    CHECK_MSG(lm != NULL, "llama.cpp does not load %s: %s", path, llama_oracle_log);
    lw_context *c = m ? embd_context(m, 512) : NULL;
    if (!m || !lm || !c) goto done;
    const int E = lw_model_n_embd(m);
    int32_t longp[100];
    longp[0] = 1;
    for (int i = 1; i < 100; i++) longp[i] = 3 + (i * 37) % 250;
    static const int32_t once[5] = {1, 403, 407, 261, 378}, one[1] = {1};
    const struct {
        const int32_t *t;
        int n;
    } prompts[] = {{once, 5}, {longp, 100}, {one, 1}};
    float *ours = malloc(sizeof(float) * 100 * (size_t)E), *ref = malloc(sizeof(float) * 100 * (size_t)E);
    double worst_cos = 1.0, worst_diff = 0;
    for (int pool = -1; pool <= LW_POOLING_LAST; pool++)
        for (size_t k = 0; k < sizeof prompts / sizeof prompts[0]; k++) {
            lw_embed_params ep = lw_embed_default_params();
            ep.pooling = (lw_pooling)pool;
            size_t n_out = 0;
            const int n = prompts[k].n;
            CHECK_MSG(lw_embed(c, prompts[k].t, n, &ep, ours, 100 * (size_t)E, &n_out) == LW_OK, "%s",
                      lw_context_error(c));
            int used = ll_embed(lm, prompts[k].t, n, pool, ref, E);
            CHECK_MSG(used >= 0, "%s: llama.cpp's embedding (%s pooling) failed: %s", name, pool_name(pool),
                      llama_oracle_log);
            if (used < 0) continue;
            const size_t rows = used == LW_POOLING_NONE ? (size_t)n : 1;
            CHECK_MSG(n_out == rows * (size_t)E, "%s: %zu floats for %zu vectors", name, n_out, rows);
            double wc = 1.0, wd = 0, scale = 0;
            for (size_t r = 0; r < rows && n_out == rows * (size_t)E; r++) {
                double cs = cosine(ours + r * E, ref + r * E, (size_t)E);
                double d = max_abs_diff(ours + r * E, ref + r * E, (size_t)E);
                for (int j = 0; j < E; j++)
                    scale = fabs(ref[r * E + j]) > scale ? fabs(ref[r * E + j]) : scale;
                if (cs < wc || isnan(cs)) wc = isnan(cs) ? -1 : cs;
                if (d > wd) wd = d;
            }
            CHECK_MSG(wc >= min_cos, "%s: %s pooling, %d tokens: cosine %.9f < %.6f", name, pool_name(pool),
                      n, wc, min_cos);
            if (wc < worst_cos) worst_cos = wc;
            if (scale > 0 && wd / scale > worst_diff) worst_diff = wd / scale;
        }
    printf("%s: 5 pooling settings x 3 prompts vs llama.cpp: min cosine %.9f, max |diff| / max |x| = %.3g\n",
           name, worst_cos, worst_diff);
    free(ours);
    free(ref);
done:
    lw_context_free(c);
    if (lm) ll.model_free(lm);
    lw_model_free(m);
}

/* The eval callback's "result_norm" rows of a logits context (the state llama.cpp calls t_embd). */
typedef struct norm_rows {
    float *rows; /* copied rows          */
    int64_t n;   /* how many were copied */
    int64_t cap; /* room, in rows         */
    int64_t ne0; /* row length            */
} norm_rows;

static void on_node(void *user, const char *name, int32_t layer, const float *data, int64_t ne0,
                    int64_t rows) {
    norm_rows *nr = user;
    (void)layer;
    if (strcmp(name, "result_norm") != 0 || ne0 != nr->ne0 || rows > nr->cap) return;
    memcpy(nr->rows, data, sizeof(float) * (size_t)(ne0 * rows));
    nr->n = rows;
}

/* Checks that need no llama.cpp, on one model. */
static void self_checks(const char *path, const char *name) {
    lw_model *m = NULL;
    if (lw_model_load_file(path, NULL, &m) != LW_OK) {
        printf("%s: %s, self-checks skipped\n", name, lw_model_error(m));
        lw_model_free(m);
        return;
    }
    const int E = lw_model_n_embd(m);
    enum { N = 100 };
    int32_t toks[N];
    toks[0] = 1;
    for (int i = 1; i < N; i++) toks[i] = 3 + (i * 53) % 250;
    float *all = malloc(sizeof(float) * N * (size_t)E), *v = malloc(sizeof(float) * N * (size_t)E);
    float *mean = calloc((size_t)E, sizeof(float));
    lw_context *c = embd_context(m, 512), *small = embd_context(m, 16);
    lw_context *lc = NULL;
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    CHECK(lw_context_create(m, &cp, &lc) == LW_OK);
    if (!c || !small || !lc) goto done;
    lw_embed_params ep = lw_embed_default_params();
    size_t n_out = 0;

    /* per-token vectors = the result_norm rows of a logits context, to the bit */
    ep.pooling = LW_POOLING_NONE;
    CHECK(lw_embed(c, toks, N, &ep, all, N * (size_t)E, &n_out) == LW_OK && n_out == N * (size_t)E);
    norm_rows nr = {v, 0, N, E};
    lw_context_set_eval_callback(lc, on_node, &nr);
    CHECK(lw_decode(lc, toks, N, 1) == LW_OK);
    CHECK_MSG(nr.n == N && !memcmp(v, all, sizeof(float) * N * (size_t)E),
              "%s: the embeddings context's hidden states differ from the logits context's result_norm",
              name);
    CHECK(lw_get_logits(lc, 0) != NULL && lw_get_embeddings(lc, 0) == NULL);
    CHECK(lw_get_logits(c, 0) == NULL && lw_get_embeddings(c, 0) != NULL && lw_get_embeddings(c, N) == NULL);
    CHECK(lw_get_embeddings(c, -1) == lw_get_embeddings(c, N - 1));

    /* pooling as defined over those vectors */
    for (int t = 0; t < N; t++)
        for (int j = 0; j < E; j++) mean[j] += all[(size_t)t * E + j] * (1.0f / N);
    ep.pooling = LW_POOLING_MEAN;
    CHECK(lw_embed(c, toks, N, &ep, v, (size_t)E, &n_out) == LW_OK && n_out == (size_t)E);
    CHECK_MSG(cosine(v, mean, (size_t)E) > 0.9999999, "%s: mean pooling", name);
    ep.pooling = LW_POOLING_CLS;
    CHECK(lw_embed(c, toks, N, &ep, v, (size_t)E, &n_out) == LW_OK &&
          !memcmp(v, all, sizeof(float) * (size_t)E));
    ep.pooling = LW_POOLING_LAST;
    CHECK(lw_embed(c, toks, N, &ep, v, (size_t)E, &n_out) == LW_OK &&
          !memcmp(v, all + (size_t)(N - 1) * E, sizeof(float) * (size_t)E));

    /* longer than n_batch (16): seven steps, the same vectors up to rounding: a 100-token step takes ggml's
     * tiled flash attention, 16-token steps its one-chunk kernel (Q rounded to f16 against an f16 cache, V
     * accumulated in f16), and the products other dot orders (seen on gemma4's random weights: cosine
     * 0.99990 with an f16 cache, 0.9999995 with an f32 one) */
    ep.pooling = LW_POOLING_NONE;
    CHECK(lw_embed(small, toks, N, &ep, v, N * (size_t)E, &n_out) == LW_OK);
    double wc = 1;
    for (int t = 0; t < N; t++) {
        double cs = cosine(v + (size_t)t * E, all + (size_t)t * E, (size_t)E);
        wc = cs < wc ? cs : wc;
    }
    CHECK_MSG(wc > 0.9998, "%s: steps of 16 tokens: cosine %.9f", name, wc);
    ep.pooling = LW_POOLING_MEAN;
    CHECK(lw_embed(small, toks, N, &ep, v, (size_t)E, &n_out) == LW_OK);
    CHECK_MSG(cosine(v, mean, (size_t)E) > 0.9998, "%s: mean over steps of 16 tokens", name);

    /* a batch of inputs = each on its own (the cache is cleared between them) */
    {
        const int32_t *in[3] = {toks, toks + 10, toks};
        const int32_t lens[3] = {7, 30, 1};
        float *b = malloc(sizeof(float) * 3 * (size_t)E), *one = malloc(sizeof(float) * (size_t)E);
        ep.pooling = LW_POOLING_MEAN;
        ep.normalize = 2;
        CHECK(lw_embed_batch(c, in, lens, 3, &ep, b, 3 * (size_t)E, &n_out) == LW_OK &&
              n_out == 3 * (size_t)E);
        for (int i = 0; i < 3; i++) {
            CHECK(lw_embed(c, in[i], lens[i], &ep, one, (size_t)E, NULL) == LW_OK);
            CHECK_MSG(!memcmp(one, b + (size_t)i * E, sizeof(float) * (size_t)E), "%s: batch input %d", name,
                      i);
        }
        CHECK(lw_embed_batch(c, in, lens, 3, &ep, b, 3 * (size_t)E - 1, &n_out) == LW_ERR_INVALID_ARG &&
              n_out == 2 * (size_t)E);
        ep.normalize = -1;
        free(b);
        free(one);
    }

    /* normalisation: the chosen norm becomes 1 (32760 for the int16 range), the direction stays */
    ep.pooling = LW_POOLING_MEAN;
    for (int norm = 0; norm <= 3; norm++) {
        ep.normalize = norm;
        CHECK(lw_embed(c, toks, N, &ep, v, (size_t)E, &n_out) == LW_OK);
        double s = 0;
        for (int j = 0; j < E; j++)
            s = norm == 0 ? (fabs(v[j]) > s ? fabs(v[j]) : s) : s + pow(fabs(v[j]), norm);
        if (norm > 0) s = pow(s, 1.0 / norm);
        CHECK_MSG(fabs(s - (norm == 0 ? 32760.0 : 1.0)) < (norm == 0 ? 1e-2 : 1e-5),
                  "%s: normalize %d: norm %.9f", name, norm, s);
        CHECK_MSG(cosine(v, mean, (size_t)E) > 0.9999999, "%s: normalize %d changed the direction", name,
                  norm);
    }
    ep.normalize = -1;

    /* errors, with a message */
    ep.pooling = LW_POOLING_MEAN;
    CHECK(lw_embed(lc, toks, 5, &ep, v, (size_t)E, &n_out) == LW_ERR_INVALID_ARG &&
          strlen(lw_context_error(lc)));
    CHECK(lw_embed(c, toks, 0, &ep, v, (size_t)E, &n_out) == LW_ERR_INVALID_ARG);
    CHECK(lw_embed(c, toks, 5, &ep, v, (size_t)E - 1, &n_out) == LW_ERR_INVALID_ARG && n_out == 0);
    CHECK(lw_embed(c, toks, 5, &ep, NULL, 0, &n_out) == LW_ERR_INVALID_ARG);
    {
        int32_t bad[2] = {1, lw_model_n_vocab(m)};
        CHECK(lw_embed(c, bad, 2, &ep, v, (size_t)E, &n_out) == LW_ERR_INVALID_ARG);
        static int32_t big[600];
        CHECK(lw_embed(c, big, 600, &ep, v, (size_t)E, &n_out) == LW_ERR_TOO_LARGE);
    }
    ep.pooling = LW_POOLING_RANK;
    CHECK(lw_embed(c, toks, 5, &ep, v, (size_t)E, &n_out) == LW_ERR_UNSUPPORTED);
    ep.pooling = (lw_pooling)9;
    CHECK(lw_embed(c, toks, 5, &ep, v, (size_t)E, &n_out) == LW_ERR_INVALID_ARG);
    /* after errors the context still embeds */
    ep.pooling = LW_POOLING_CLS;
    CHECK(lw_embed(c, toks, N, &ep, v, (size_t)E, &n_out) == LW_OK &&
          !memcmp(v, all, sizeof(float) * (size_t)E));
    printf("%s: self-checks done (n_embd %d; embeddings context %llu bytes, logits context %llu)\n", name, E,
           (unsigned long long)lw_context_bytes(c), (unsigned long long)lw_context_bytes(lc));
done:
    free(all);
    free(v);
    free(mean);
    lw_context_free(c);
    lw_context_free(small);
    lw_context_free(lc);
    lw_model_free(m);
}

/* Extra keys for the next synth_write: the file's pooling type, or non-causal attention. */
static int64_t key_pooling = -1;
static int key_non_causal;
static void pooling_keys(lw_gguf_writer *w, const char *arch) {
    char k[128];
    if (key_pooling >= 0) {
        snprintf(k, sizeof k, "%s.pooling_type", arch);
        lw_gguf_writer_set_u32(w, k, (uint32_t)key_pooling);
    }
    if (key_non_causal) {
        snprintf(k, sizeof k, "%s.attention.causal", arch);
        lw_gguf_writer_set_bool(w, k, 0);
    }
}

/* The file's <arch>.pooling_type decides when the caller leaves it unspecified (in both engines). */
static void pooling_key_checks(void) {
    char path[1024];
    synth_spec sp = {512, 64, 1, 4, 2, 128, LW_TYPE_F32, 0, 91, NULL, 0, 0, 0};
    static const int32_t once[5] = {1, 403, 407, 261, 378};
    synth_extra_keys = pooling_keys;
    for (int want = 0; want <= 4; want++) {
        key_pooling = want == 4 ? 7 : want; /* 7: not a pooling type */
        synth_path(path, sizeof path, "embed-pooling-key.gguf");
        CHECK(synth_write(path, &sp) == 0);
        lw_model *m = NULL;
        CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", lw_model_error(m));
        lw_context *c = m ? embd_context(m, 512) : NULL;
        if (!c) {
            lw_model_free(m);
            continue;
        }
        const int E = lw_model_n_embd(m);
        float a[5 * 64], b[5 * 64];
        lw_embed_params ep = lw_embed_default_params();
        size_t na = 0, nb = 0;
        if (want == 4) {
            CHECK(lw_model_pooling(m) == LW_POOLING_UNSPECIFIED);
            CHECK(lw_embed(c, once, 5, &ep, a, sizeof a / sizeof a[0], &na) == LW_ERR_UNSUPPORTED);
        } else {
            CHECK(lw_model_pooling(m) == (lw_pooling)want);
            CHECK(lw_embed(c, once, 5, &ep, a, sizeof a / sizeof a[0], &na) == LW_OK);
            ep.pooling = (lw_pooling)want;
            CHECK(lw_embed(c, once, 5, &ep, b, sizeof b / sizeof b[0], &nb) == LW_OK);
            CHECK_MSG(na == nb && na == (want == 0 ? 5u : 1u) * (size_t)E &&
                          !memcmp(a, b, na * sizeof(float)),
                      "the file's pooling type %d is not the default", want);
            if (have_oracle) {
                void *lm = ll.model_load_from_file(path, ll.model_default_params());
                float r[5 * 64];
                CHECK(lm && ll_embed(lm, once, 5, -1, r, E) == want);
                CHECK_MSG(cosine(a, r, na) > 0.9999, "llama.cpp with the file's pooling type %d", want);
                if (lm) ll.model_free(lm);
            }
        }
        lw_context_free(c);
        lw_model_free(m);
    }
    /* no key: none (llama.cpp's rule); <arch>.attention.causal = false: refused (an encoder's attention) */
    key_pooling = -1;
    key_non_causal = 1;
    CHECK(synth_write(path, &sp) == 0);
    lw_model *m = NULL;
    CHECK(lw_model_load_file(path, NULL, &m) == LW_OK);
    lw_context *c = m ? embd_context(m, 512) : NULL;
    if (c) {
        float a[5 * 64];
        CHECK(lw_model_pooling(m) == LW_POOLING_UNSPECIFIED);
        CHECK(lw_embed(c, once, 5, NULL, a, 5 * 64, NULL) == LW_ERR_UNSUPPORTED);
        CHECK(strstr(lw_context_error(c), "causal") != NULL);
    }
    lw_context_free(c);
    lw_model_free(m);
    key_non_causal = 0;
    synth_extra_keys = NULL;
}

/* Parses the first "embedding": [...] list of floats after *from in the CLI's JSON; returns the count. */
static int json_vector(const char **from, float *out, int cap) {
    const char *p = strstr(*from, "\"embedding\": [");
    if (!p) return -1;
    p += strlen("\"embedding\": [");
    int n = 0;
    while (*p == '[') p++; /* none pooling: the first token's vector */
    for (;;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || n >= cap) return -1;
        out[n++] = (float)x;
        p = end;
        if (*p == ',')
            p += 2;
        else
            break;
    }
    *from = p;
    return n;
}

/* llamaweb embed: its JSON holds lw_embed_text's vectors (9 digits: the same floats). */
static void cli_checks(const char *model) {
    const char *cli = getenv("LW_CLI");
    FILE *f = fopen(model, "rb");
    if (!cli || !*cli || !f) {
        printf("SKIP (CLI check): %s\n", !f ? "no stories260K" : "LW_CLI not set");
        if (f) fclose(f);
        return;
    }
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' embed -m '%s' -p 'Once upon a time' -p 'Lily' --pooling mean --normalize 2>/dev/null", cli,
             model);
    FILE *p = popen(cmd, "r");
    static char buf[1 << 16];
    size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    buf[n] = 0;
    CHECK_MSG(p && pclose(p) == 0, "%s failed", cmd);
    lw_model *m = NULL;
    CHECK(lw_model_load_file(model, NULL, &m) == LW_OK);
    lw_context *c = m ? embd_context(m, 512) : NULL;
    if (!c) goto done;
    const int E = lw_model_n_embd(m);
    float want[2][64], got[64];
    lw_embed_params ep = lw_embed_default_params();
    ep.pooling = LW_POOLING_MEAN;
    ep.normalize = 2;
    CHECK(E <= 64);
    CHECK(lw_embed_text(c, "Once upon a time", 16, 1, 1, &ep, want[0], 64, NULL, NULL) == LW_OK);
    CHECK(lw_embed_text(c, "Lily", 4, 1, 1, &ep, want[1], 64, NULL, NULL) == LW_OK);
    CHECK(strstr(buf, "\"pooling\": \"mean\", \"normalize\": 2") != NULL);
    const char *at = buf;
    for (int i = 0; i < 2; i++) {
        int k = json_vector(&at, got, 64);
        CHECK_MSG(k == E && !memcmp(got, want[i], sizeof(float) * (size_t)E),
                  "CLI input %d: %d floats, not lw_embed_text's", i, k);
    }
    /* none: one vector per token (5 for BOS + "Once upon a time") */
    snprintf(cmd, sizeof cmd, "'%s' embed -m '%s' -p 'Once upon a time' --pooling none 2>/dev/null", cli,
             model);
    p = popen(cmd, "r");
    n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    buf[n] = 0;
    CHECK(p && pclose(p) == 0);
    int vectors = 0;
    const char *q = strstr(buf, "\"embedding\": [");
    if (q)
        for (q += strlen("\"embedding\": ["); *q; q++) vectors += *q == '[';
    CHECK_MSG(strstr(buf, "\"n_tokens\": 5") && vectors == 5, "none pooling: %d vectors", vectors);
    /* a bad option fails with a message */
    snprintf(cmd, sizeof cmd, "'%s' embed -m '%s' -p x --pooling median >/dev/null 2>&1", cli, model);
    CHECK(system(cmd) != 0);
done:
    lw_context_free(c);
    lw_model_free(m);
}

int main(void) {
    open_oracle();
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    char stories[1024];
    snprintf(stories, sizeof stories, "%s", path);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        self_checks(path, "stories260K.gguf");
    } else {
        printf("SKIP (stories260K checks): %s not found\n", path);
    }
    compare_model(path, "stories260K.gguf (F32)", 0.9999);
    snprintf(path, sizeof path, "%s/models/llama-2-tiny-random.gguf", test_shared_dir());
    compare_model(path, "llama-2-tiny-random.gguf (F16)", 0.9999);

    /* synthetic files with real head sizes: llama F32 and F16 (tied), qwen3, gemma3 (sliding window) */
    static const struct {
        synth_spec sp;
        const char *name;
        double min_cos;
    } synths[] = {
        {{512, 256, 2, 4, 2, 512, LW_TYPE_F32, 0, 7, NULL, 0, 0, 0}, "embed-f32.gguf", 0.9999},
        {{512, 256, 2, 4, 2, 512, LW_TYPE_F16, 1, 8, NULL, 0, 0, 0}, "embed-f16-tied.gguf", 0.9999},
        {{512, 256, 2, 4, 2, 512, LW_TYPE_F16, 0, 32, "qwen3", 0, 1, 0}, "embed-qwen3-f16.gguf", 0.9999},
        {{512, 256, 7, 4, 1, 512, LW_TYPE_F16, 1, 51, "gemma3", 0, 1, 0}, "embed-gemma3-f16.gguf", 0.9999},
        {{512, 256, 2, 4, 2, 512, LW_TYPE_Q8_0, 0, 21, NULL, 0, 0, 0}, "embed-q8_0.gguf", 0.999},
        {{512, 256, 2, 4, 2, 512, LW_TYPE_Q4_0, 0, 22, NULL, 0, 0, 0}, "embed-q4_0.gguf", 0.999},
        {{512, 256, 2, 4, 2, 512, LW_TYPE_Q4_K, 0, 29, NULL, 0, 0, 0}, "embed-q4_k.gguf", 0.999},
    };
    /* under the sanitizers (scripts/test.sh sets LW_TEST_SANITIZED) qwen3 and the quantized files are left to
     * the release run */
    const int light = getenv("LW_TEST_SANITIZED") != NULL;
    if (light) printf("LW_TEST_SANITIZED: qwen3 and the quantized files are skipped in this run\n");
    for (size_t i = 0; i < sizeof synths / sizeof synths[0]; i++) {
        if (light && (i == 2 || i >= 4)) continue;
        synth_path(path, sizeof path, synths[i].name);
        CHECK_MSG(synth_write(path, &synths[i].sp) == 0, "writing %s", path);
        if (i == 0 || i == 3) self_checks(path, synths[i].name);
        compare_model(path, synths[i].name, synths[i].min_cos);
    }
    /* gemma4 (src/synth's tiny-gemma4: per-layer inputs, shared KV; its final norm sees every token and the
     * output rows are selected after it) */
    if (lw__synth_preset_find("tiny-gemma4")) {
        lw__synth_params sp = {
            .preset = "tiny-gemma4", .type = "f16", .vocab_path = "builtin", .seed = 5, .n_vocab = 512};
        char err[LW_ERRMSG_SIZE];
        synth_path(path, sizeof path, "embed-gemma4-f16.gguf");
        CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "writing %s: %s", path, err);
        self_checks(path, "embed-gemma4-f16.gguf");
        compare_model(path, "embed-gemma4-f16.gguf", 0.9999);
    } else {
        printf("SKIP (gemma4): src/synth has no tiny-gemma4 preset\n");
    }
    pooling_key_checks();
    cli_checks(stories);
    return test_summary("test-embed");
}
