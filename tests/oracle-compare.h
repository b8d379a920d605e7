/* The whole-model comparison shared by the llama.cpp oracle tests (test-oracle-*.c): our engine against
 * libllama v0.4.0 (tests/llama-oracle.h) on one GGUF file and one prompt.
 *
 * compare_model decodes the prompt in one batch (two when it is longer than 64 tokens, so a 64+ token step
 * starts after cached cells) with logits at every position in both engines and compares them (max |diff| /
 * logit range of the reference, per position); then it generates n_gen greedy tokens with our engine,
 * feeding the same tokens to llama.cpp one at a time, and counts how often both pick the same top-1 token
 * (ties within the tolerance of the range are counted separately).
 *
 * llama.cpp runs with its defaults where they matter for numerics: F16 KV cache, flash attention AUTO
 * (enabled on CPU; `flash_attn = 0` turns it off in both engines), 1 thread. Our engine uses its defaults. */
#ifndef LW_ORACLE_COMPARE_H
#define LW_ORACLE_COMPARE_H

#include "llama-oracle.h"

#include "engine-synth.h" /* synth_path */
#include "model/engine.h"
#include "synth/synth.h"
#include "test.h"

#include <math.h>
#include <string.h>

/* What the oracle runs on: the per-CPU build of ggml-cpu in use, its GELU table, and whether it is one whose
 * numerics we reproduce to the bit. */
static const char *cpu_variant;
static const uint16_t *gelu_table;
static int exact;

static inline void load_llama(void) {
    const char *why = llama_oracle_open();
    if (why) test_skip(why);
    const char *forced = getenv("LW_ORACLE_CPU_VARIANT");
    if (forced && *forced) printf("llama.cpp CPU backend forced: %s\n", forced);
    cpu_variant = llama_oracle_cpu_variant(&gelu_table);
    /* our numerics are those of ggml's AVX-512 builds without AVX512-FP16 (zen4 and Intel's before
     * Sapphire Rapids); against other builds float models stay within 1e-3 but are not bit-exact, and
     * quantized ones (other dot orders, other repacking) are only close */
    static const char *const exact_builds[] = {"zen4",        "skylakex",   "icelake",
                                               "cascadelake", "cooperlake", "cannonlake"};
    for (size_t i = 0; i < sizeof(exact_builds) / sizeof(exact_builds[0]); i++)
        if (cpu_variant && !strcmp(cpu_variant, exact_builds[i])) exact = 1;
    printf("llama.cpp CPU build in use: %s (%s)\n", cpu_variant ? cpu_variant : "?",
           exact ? "expect identical logits" : "expect close logits");
}

/* Whether the engine decodes quantized weights with its fast kernels (cpu/quant-gemv.h: exact integer block
 * sums, its own float order), i.e. LW_CPU_KERNELS is not "exact" / "scalar". Their single-token logits
 * differ from llama.cpp's by float rounding (~1e-7 of the range), and now and then by ~3e-3 where that
 * rounding flips one activation quant or f16 cache value downstream; quantized comparisons allow 1e-2
 * then, and keep 1e-3 (and bits on exact builds) for the exact orders. */
static inline int fast_decode(void) {
    const char *k = getenv("LW_CPU_KERNELS");
    return !(k && (!strcmp(k, "exact") || !strcmp(k, "scalar")));
}

/* Decodes tokens at positions pos0.. in llama.cpp, asking logits for every token when all != 0. */
static inline int ll_decode(void *ctx, const int32_t *tokens, int32_t n, int32_t pos0, int all) {
    int32_t tok[256], pos[256], nseq[256], seq0 = 0, *seqp[256];
    int8_t lg[256];
    if (n > 256) return -1;
    for (int32_t i = 0; i < n; i++) {
        tok[i] = tokens[i];
        pos[i] = pos0 + i;
        nseq[i] = 1;
        seqp[i] = &seq0;
        lg[i] = (int8_t)(all || i == n - 1);
    }
    ll_batch b = {n, tok, NULL, pos, nseq, seqp, lg};
    return ll.decode(ctx, b);
}

static inline int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static inline double logit_range(const float *b, int n) {
    float lo = b[0], hi = b[0];
    for (int i = 0; i < n; i++) lo = b[i] < lo ? b[i] : lo, hi = b[i] > hi ? b[i] : hi;
    return (double)hi - (double)lo;
}

/* max |a - b| / (max(b) - min(b)) */
static inline double rel_diff(const float *a, const float *b, int n) {
    float lo = b[0], hi = b[0];
    double d = 0;
    for (int i = 0; i < n; i++) {
        if (b[i] < lo) lo = b[i];
        if (b[i] > hi) hi = b[i];
        double e = fabs((double)a[i] - (double)b[i]);
        if (e > d || isnan(e)) d = isnan(e) ? INFINITY : e;
    }
    return d / ((double)hi - (double)lo);
}

/* Attention mode of the next compare_model calls: 1 = llama.cpp's default (flash attention AUTO, which
 * is on for CPU), 0 = flash attention off in both engines. */
static int flash_attn = 1;

/* Share of prompt positions and of greedy steps that must be within tol and agree on the top-1 token (1:
 * all, the default). Mixtures of experts compared with ggml builds whose dot orders we do not reproduce take
 * less: a last-bit difference that turns a near tie between two experts' router probabilities the other way
 * moves that token's logits by up to ~10% of the range (and those of the tokens attending to it). */
static double oracle_share = 1.0;

static inline void compare_model(const char *path, const char *file, const int32_t *prompt, int n_prompt,
                                 int n_gen, int expect_first, double tol) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("%s: model not found at %s, skipped\n", file, path);
        return;
    }
    fclose(f);

    const int failures_before = test_failures;
    /* near ties: within tol / 10 of the logit range for the exact paths; within tol for the approximate
     * (quantized) ones, whose random synthetic logits are flat enough to tie at that level */
    const double tie = tol > 1e-3 ? tol : tol / 10;
    lw_model *m = NULL;
    lw_context *c = NULL;
    CHECK_MSG(lw_model_load_file(path, NULL, &m) == LW_OK, "%s", lw_model_error(m));
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    cp.flash_attn = flash_attn;
    CHECK_MSG(lw_context_create(m, &cp, &c) == LW_OK, "%s", lw_context_error(c));

    ll_model_params mp = ll.model_default_params();
    void *lm = ll.model_load_from_file(path, mp);
    CHECK(lm != NULL);
    ll_context_params lp = ll.context_default_params();
    lp.n_ctx = 512;
    lp.n_batch = lp.n_ubatch = 512;
    lp.n_outputs_max_per_seq = 0; /* default 1 would refuse logits for every token of one sequence */
    lp.n_threads = lp.n_threads_batch = 1;
    lp.flash_attn_type = flash_attn ? -1 : 0; /* AUTO (resolves to enabled on CPU) or DISABLED */
    void *lc = lm ? ll.init_from_model(lm, lp) : NULL;
    CHECK(lc != NULL);
    if (!m || !c || !lm || !lc || test_failures != failures_before) goto done;

    const int nv = lw_model_n_vocab(m);
    int32_t toks[512];
    memcpy(toks, prompt, sizeof(int32_t) * (size_t)n_prompt);
    /* the prompt goes in one step, or in two when it is long (so a 64+ token step starts after cached
     * cells: the tiled attention with a non-zero start) */
    const int first = n_prompt > 64 ? n_prompt - 64 : n_prompt;
    double worst = 0;
    int n_off = 0, n_top1 = 0; /* positions beyond tol; top-1 differences that are no near tie */
    for (int p0 = 0; p0 < n_prompt;) {
        const int n = p0 == 0 ? first : n_prompt - p0;
        CHECK_MSG(lw_decode(c, toks + p0, n, 1) == LW_OK, "%s", lw_context_error(c));
        CHECK(ll_decode(lc, toks + p0, n, p0, 1) == 0);
        for (int i = 0; i < n; i++) {
            const float *a = lw_get_logits(c, i), *b = ll.get_logits_ith(lc, i);
            double d = rel_diff(a, b, nv);
            const int pos = p0 + i;
            if (n_prompt <= 8 || pos % 16 == 15 || pos == n_prompt - 1 || getenv("LW_ORACLE_VERBOSE"))
                printf("%s: prompt position %d: max|diff|/range = %.3g, top-1 %d vs %d\n", file, pos, d,
                       argmax(a, nv), argmax(b, nv));
            /* a different top-1 is accepted only as a near tie in llama.cpp's own logits */
            int ta = argmax(a, nv), tb = argmax(b, nv);
            if (ta != tb && !(fabsf(b[ta] - b[tb]) < (float)(tie * logit_range(b, nv)))) {
                printf("%s: position %d top-1 differs: %d vs %d\n", file, pos, ta, tb);
                n_top1++;
            }
            n_off += !(d < tol);
            if (d > worst) worst = d;
        }
        p0 += n;
    }
    const int allowed = (int)((1.0 - oracle_share) * n_prompt + 0.5);
    CHECK_MSG(n_top1 <= allowed, "%s: top-1 differs at %d prompt positions", file, n_top1);
    if (oracle_share >= 1.0)
        CHECK_MSG(worst < tol, "%s: prompt logits differ by %.3g of the range", file, worst);
    else
        CHECK_MSG(n_off <= allowed, "%s: %d of %d prompt positions differ by more than %.3g of the range",
                  file, n_off, n_prompt, tol);
    if (expect_first >= 0) CHECK_MSG(argmax(lw_get_logits(c, -1), nv) == expect_first, "first greedy token");

    printf("%s: prompt of %d tokens: worst max|diff|/range = %.3g\n", file, n_prompt, worst);
    /* greedy steps: ours picks, both decode the same token */
    int agree = 0, near_tie = 0, n = n_prompt, n_off_gen = 0;
    double worst_gen = 0;
    for (int s = 0; s < n_gen; s++) {
        const float *a = lw_get_logits(c, -1), *b = ll.get_logits_ith(lc, -1);
        int ta = argmax(a, nv), tb = argmax(b, nv);
        double d = rel_diff(a, b, nv);
        if (d > worst_gen) worst_gen = d;
        n_off_gen += !(d < tol);
        if (getenv("LW_ORACLE_VERBOSE")) printf("%s: step %d diff %.3g\n", file, s, d);
        if (ta == tb) {
            agree++;
        } else {
            float lo = b[0], hi = b[0];
            for (int i = 0; i < nv; i++) lo = b[i] < lo ? b[i] : lo, hi = b[i] > hi ? b[i] : hi;
            if (fabsf(b[ta] - b[tb]) < (float)tie * (hi - lo)) near_tie++;
            printf("%s: step %d: top-1 %d (ours) vs %d (llama.cpp), their logits %.6f vs %.6f\n", file, s, ta,
                   tb, b[ta], b[tb]);
        }
        toks[n++] = ta;
        if (lw_decode(c, &toks[n - 1], 1, 0) != LW_OK || ll_decode(lc, &toks[n - 1], 1, n - 1, 0) != 0) {
            CHECK_MSG(0, "decode failed at step %d: %s", s, lw_context_error(c));
            break;
        }
    }
    printf("%s: greedy %d: top-1 agreement %d/%d (%d near ties), max|diff|/range over generation = %.3g\n",
           file, n_gen, agree, n_gen, near_tie, worst_gen);
    printf("%s: greedy ids:", file);
    for (int i = n_prompt; i < n_prompt + 20 && i < n; i++) printf(" %d", toks[i]);
    printf(" ...\n");
    const int allowed_gen = (int)((1.0 - oracle_share) * n_gen + 0.5);
    CHECK_MSG(n_gen - agree - near_tie <= allowed_gen, "%s: %d disagreements that are not ties", file,
              n_gen - agree - near_tie);
    if (oracle_share >= 1.0)
        CHECK_MSG(worst_gen < tol, "%s: generation logits differ by %.3g of the range", file, worst_gen);
    else
        CHECK_MSG(n_off_gen <= allowed_gen, "%s: %d of %d greedy steps differ by more than %.3g of the range",
                  file, n_off_gen, n_gen, tol);

done:
    if (lc) ll.free(lc);
    if (lm) ll.model_free(lm);
    lw_context_free(c);
    lw_model_free(m);
}

/* The prompts the oracle tests decode: BOS + "Once upon a time" in the llama-spm ids (any id below 512 is a
 * token of the synthetic files), and a 100-token one (two steps in compare_model: 36 then 64 tokens). */
static const int32_t oracle_once[5] = {1, 403, 407, 261, 378};
static inline void oracle_long_prompt(int32_t p[100]) {
    p[0] = 1;
    for (int i = 1; i < 100; i++) p[i] = 3 + (i * 37) % 500;
}

/* The start of an oracle test of synth preset `name`: llama.cpp loaded (else the test is skipped), the
 * preset (NULL, a failed check, when src/synth lacks it). */
static inline const lw__synth_preset *oracle_begin(const char *name) {
    load_llama();
    if (!llama_oracle_layout_ok()) test_skip("libllama's default params do not match the v0.4.0 layouts");
    const lw__synth_preset *p = lw__synth_preset_find(name);
    CHECK_MSG(p != NULL, "src/synth has no %s preset", name);
    return p;
}

/* Writes preset p with file type `type` (pure: that type for every matrix) and the built-in 512-token vocab
 * to LW_TMP/file; 1 when written. */
static inline int oracle_synth(const lw__synth_preset *p, const char *type, int pure, uint64_t seed,
                               const char *file, char *path, size_t cap) {
    lw__synth_params sp = {
        .custom = p, .type = type, .vocab_path = "builtin", .seed = seed, .n_vocab = 512, .pure = pure};
    char err[LW_ERRMSG_SIZE];
    synth_path(path, cap, file);
    lw_status rc = lw__synth_write(&sp, path, NULL, NULL, err);
    CHECK_MSG(rc == LW_OK, "writing %s: %s", path, err);
    return rc == LW_OK;
}

#endif
