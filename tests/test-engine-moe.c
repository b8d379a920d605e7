/* The CPU engine's mixture-of-experts ops (src/cpu/engine-moe.c, LW_OP_SOFTMAX in engine-ops.c) on graphs
 * built here, against references computed here:
 *  - MUL_MAT_ID for every weight type the CPU engine multiplies, with expert rows that llama.cpp repacks
 *    (a multiple of 8) and rows it does not, activations shared by the slots (gate/up) or one per slot
 *    (down), one-token steps and prompts (rows grouped by expert, tiled products), 1 to 3 threads: every
 *    output has the bits of the row-by-row product llama.cpp's MUL_MAT_ID takes (vec_dot, or the repacked
 *    gemv), and lies within a rounding bound of a double-precision product of the dequantized weight and
 *    activation rows (so the pairing of experts, rows and slots is checked independently of the kernels);
 *  - SOFTMAX against a double-precision softmax; TOPK's order (largest first, ties to the lower index);
 *    MOE_WEIGHTS' normalisation, clamp and scale and MOE_SUM's rounding, to the bit;
 *  - the WebGPU runner, which has no MoE kernels yet, refuses a qwen3moe model with an error at planning
 *    (a HAL that only reports limits: nothing is created). */
#include "cpu/engine-moe.h"
#include "quant/quant-iq.h"
#include "quant/quant.h"
#include "synth/synth.h"
#include "test.h"
#include "webgpu/gpu-model.h"

#include <math.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int same_bits(float a, float b) {
    return !memcmp(&a, &b, sizeof a);
}

/* ---------------------------------------------------------------------------------------------------------
 * Running a hand-built graph on the CPU engine
 * ------------------------------------------------------------------------------------------------------- */

typedef struct runner {
    lw__graph g;    /* the graph (built by the caller)           */
    void *arena;    /* its activations                           */
    void *scratch;  /* shared kernel scratch                     */
    float *ts;      /* per-thread scratch                        */
    lw__pool *pool; /* threads                                   */
    lw__exec ex;    /* step state                                */
    int ok;         /* planned and allocated                     */
} runner;

/* Plans r->g for steps of up to max_tokens and allocates what it needs. */
static void runner_start(runner *r, int64_t max_tokens, int n_threads) {
    size_t shared = 0, tf = 0;
    r->ok = 0;
    if (lw__graph_plan(&r->g, max_tokens, max_tokens, 64) != LW_OK ||
        lw__cpu_scratch_needs(&r->g, max_tokens, 256, &shared, &tf) != LW_OK ||
        lw__pool_create(NULL, n_threads, &r->pool) != LW_OK) {
        CHECK_MSG(0, "planning the test graph failed");
        return;
    }
    r->arena = calloc(1, (size_t)r->g.arena_size + 64);
    r->scratch = calloc(1, shared + 64);
    r->ts = calloc((size_t)n_threads * tf + 16, sizeof(float));
    if (!r->arena || !r->scratch || !r->ts) return;
    lw__graph_bind(&r->g, r->arena);
    memset(&r->ex, 0, sizeof r->ex);
    r->ex.g = &r->g;
    r->ex.kern = lw__cpu_kernels_best();
    r->ex.pool = r->pool;
    r->ex.scratch = r->scratch;
    r->ex.thread_scratch = r->ts;
    r->ex.thread_floats = tf;
    r->ok = 1;
}

/* One step of nt tokens (every row an output). */
static void runner_step(runner *r, const int32_t *tokens, int32_t nt) {
    static int32_t rows[256];
    for (int32_t i = 0; i < nt; i++) rows[i] = i;
    r->ex.n_tokens = r->ex.n_outputs = nt;
    r->ex.tokens = tokens;
    r->ex.out_rows = rows;
    lw__cpu_exec(&r->ex);
}

static void runner_end(runner *r) {
    lw__pool_free(r->pool);
    free(r->arena), free(r->scratch), free(r->ts);
    lw__graph_free(&r->g);
}

/* An f32 table of rows x n random values, as a weight the graph gathers rows of (the step's inputs). */
static int32_t table(lw__graph *g, const char *name, int64_t n, int64_t rows, float *data) {
    for (int64_t i = 0; i < n * rows; i++) data[i] = frand();
    return lw__graph_weight(g, name, LW_TYPE_F32, n, rows, data);
}

static int32_t gather(lw__graph *g, const char *name, int32_t tab, int64_t n) {
    int32_t d = lw__graph_act(g, name, n, LW_ROWS_TOKENS);
    lw__graph_node(g, LW_OP_GET_ROWS, d, tab, -1, -1);
    return d;
}

/* ---------------------------------------------------------------------------------------------------------
 * MUL_MAT_ID
 * ------------------------------------------------------------------------------------------------------- */

enum { V = 64, NE = 6, KS = 3, KD = 256, MAXT = 64 };

/* rows x k weight values in type, from random floats (random valid blocks for types without a quantizer);
 * NULL when the type cannot be made here. */
static void *weights(uint32_t type, int64_t rows, int64_t k) {
    const size_t rb = lw__cpu_row_size(type, k);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *f = malloc(sizeof(float) * (size_t)(rows * k));
    if (!w || !f) return free(w), free(f), NULL;
    for (int64_t i = 0; i < rows * k; i++) f[i] = frand() * 0.1f;
    const lw__quant_traits_t *tr = lw__quant_traits(type);
    int ok = 1;
    if (type == LW_TYPE_F32)
        memcpy(w, f, sizeof(float) * (size_t)(rows * k));
    else if (type == LW_TYPE_F16)
        for (int64_t i = 0; i < rows * k; i++) ((uint16_t *)w)[i] = lw__fp32_to_fp16(f[i]);
    else if (type == LW_TYPE_BF16)
        for (int64_t i = 0; i < rows * k; i++) ((uint16_t *)w)[i] = lw__fp32_to_bf16(f[i]);
    else if (tr && tr->quantize && !tr->requires_imatrix)
        ok = lw__quantize(type, f, w, rows, k, NULL) == LW_OK;
    else if (tr)
        lw__iq_random_blocks(type, w, rows * k / lw_type_get(type)->block_size, rng);
    else
        ok = 0;
    free(f);
    if (!ok) free(w);
    return ok ? w : NULL;
}

/* Row of n values of type as floats (dequantized; f32 copied). */
static void to_float(uint32_t type, const void *src, float *dst, int64_t n) {
    if (type == LW_TYPE_F32)
        memcpy(dst, src, sizeof(float) * (size_t)n);
    else if (type == LW_TYPE_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = lw__fp16_to_fp32(((const uint16_t *)src)[i]);
    else if (type == LW_TYPE_BF16)
        for (int64_t i = 0; i < n; i++) dst[i] = lw__bf16_to_fp32(((const uint16_t *)src)[i]);
    else if (type == LW_TYPE_Q8_K) /* activation formats: no dequantizer in the traits table */
        for (int64_t i = 0; i < n; i++) {
            const lw__block_q8_K *b = (const lw__block_q8_K *)src + i / LW_QK_K;
            dst[i] = b->d * (float)b->qs[i % LW_QK_K];
        }
    else if (type == LW_TYPE_Q8_1)
        for (int64_t i = 0; i < n; i++) {
            const lw__block_q8_1 *b = (const lw__block_q8_1 *)src + i / LW_QK8_1;
            dst[i] = lw__fp16_to_fp32(b->d) * (float)b->qs[i % LW_QK8_1];
        }
    else
        lw__quant_traits(type)->to_float(src, dst, n);
}

/* Experts' products of one weight type with m rows per expert, checked at steps of 1, 5 and 64 tokens. */
static void check_mul_mat_id(uint32_t type, int64_t m, int n_threads, int *bad_bits, double *worst) {
    const lw__cpu_mm *mm = lw__cpu_mm_get(type);
    void *w = weights(type, NE * m, KD);
    if (!mm || !w) {
        free(w);
        return;
    }
    static float xtab[V * KD], x2tab[V * KS * KD], ltab[V * NE];
    runner r;
    CHECK(lw__graph_init(&r.g, NULL, 32, 32) == LW_OK);
    lw__graph *g = &r.g;
    int32_t x = gather(g, "x", table(g, "xtab", KD, V, xtab), KD);
    int32_t x2 = gather(g, "x2", table(g, "x2tab", KS * KD, V, x2tab), KS * KD);
    int32_t lg = gather(g, "logits", table(g, "ltab", NE, V, ltab), NE);
    int32_t ids = lw__graph_act_typed(g, "ids", LW_TYPE_I32, KS, LW_ROWS_TOKENS);
    lw__node *n = lw__graph_node(g, LW_OP_TOPK, ids, lg, -1, -1);
    if (n) n->ip[0] = KS;
    int32_t W = lw__graph_weight(g, "experts", type, KD, NE * m, w), y[2];
    for (int k = 0; k < 2; k++) { /* k = 0: one row per token (gate, up); 1: one per slot (down) */
        y[k] = lw__graph_act(g, k ? "down" : "up", KS * m, LW_ROWS_TOKENS);
        if ((n = lw__graph_node(g, LW_OP_MUL_MAT_ID, y[k], W, k ? x2 : x, ids))) n->ip[0] = NE;
        g->t[y[k]].kind = LW_T_OUTPUT;
    }
    g->t[ids].kind = LW_T_OUTPUT;
    runner_start(&r, MAXT, n_threads);
    const int repacked = lw__cpu_mm_repacked(mm, m);
    float (*dot)(int64_t, const void *, const void *) = repacked ? mm->dot_repack : mm->dot;
    const size_t as = mm->from_float ? lw__cpu_row_size(mm->vec_dot_type, KD) : KD * sizeof(float);
    uint8_t *act = malloc(as);
    float wf[KD], af[KD];
    static const int32_t steps[3] = {1, 5, MAXT};
    for (int s = 0; s < 3 && r.ok && act; s++) {
        int32_t tok[MAXT];
        for (int t = 0; t < steps[s]; t++) tok[t] = (t * 7 + 3 * s + 1) % V;
        runner_step(&r, tok, steps[s]);
        for (int t = 0; t < steps[s]; t++) {
            const int32_t *id = lw__cpu_row(&g->t[ids], t);
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < KS; j++) {
                    const float *xr =
                        (k ? x2tab + (size_t)tok[t] * KS * KD + j * KD : xtab + (size_t)tok[t] * KD);
                    if (mm->from_float)
                        mm->from_float(xr, act, KD);
                    else
                        memcpy(act, xr, as);
                    to_float(mm->from_float ? mm->vec_dot_type : LW_TYPE_F32, act, af, KD);
                    const float *out = (const float *)lw__cpu_row(&g->t[y[k]], t) + j * m;
                    for (int64_t row = 0; row < m; row++) {
                        const uint8_t *wr =
                            (const uint8_t *)w + (size_t)(id[j] * m + row) * g->t[W].row_bytes;
                        *bad_bits += !same_bits(out[row], dot(KD, wr, act));
                        to_float(type, wr, wf, KD);
                        double e = 0, mag = 0;
                        for (int i = 0; i < KD; i++)
                            e += (double)wf[i] * af[i], mag += fabs((double)wf[i] * af[i]);
                        const double rel = fabs(out[row] - e) / (mag + 1e-30);
                        *worst = rel > *worst ? rel : *worst;
                    }
                }
        }
    }
    free(act);
    runner_end(&r);
    free(w);
}

static void test_mul_mat_id(void) {
    const int light = getenv("LW_TEST_SANITIZED") != NULL;
    int n_types = 0;
    for (uint32_t type = 0; type < LW_TYPE_COUNT; type++) {
        if (!lw__cpu_mm_get(type)) continue;
        int bad = 0;
        double worst = 0;
        /* 3 panels of 16 rows per expert: thread shares begin inside an expert's rows (2 threads only under
         * the sanitizers, 3-10x slower) */
        for (int rows = 0; rows < 2; rows++)
            for (int th = light ? 2 : 1; th <= (light ? 2 : 3); th++)
                check_mul_mat_id(type, rows ? 40 : 36, th, &bad, &worst);
        CHECK_MSG(bad == 0, "%s: %d expert outputs differ from llama.cpp's row-by-row product",
                  lw_type_get(type)->name, bad);
        /* the dots add exact integer block sums in float: within a few f32 roundings of the double sum; with
         * Q8_1 activations (Q4_1, Q5_1) the weight's offset meets the block sum d * sum(q) held in f16 */
        const double bound = lw__cpu_mm_get(type)->vec_dot_type == LW_TYPE_Q8_1 ? 1e-3 : 1e-5;
        CHECK_MSG(worst < bound,
                  "%s: expert outputs off the double-precision product by %.3g of the magnitude",
                  lw_type_get(type)->name, worst);
        n_types++;
    }
    printf("mul_mat_id: %d weight types, rows per expert 36 and 40 (repacked), 1/5/64-token steps, 1-3 "
           "threads\n",
           n_types);
    CHECK(n_types >= 28);
}

/* ---------------------------------------------------------------------------------------------------------
 * Routing and the weighted sum
 * ------------------------------------------------------------------------------------------------------- */

static void test_routing(void) {
    enum { N = 40, K = 5, E = 48 }; /* 40 experts: the tail past 32 takes expf, not the 16-wide blocks */
    static float ltab[V * N], etab[V * K * E], stab[V * K];
    runner r;
    CHECK(lw__graph_init(&r.g, NULL, 32, 32) == LW_OK);
    lw__graph *g = &r.g;
    int32_t lt = table(g, "ltab", N, V, ltab);
    for (int i = 0; i < N; i++) ltab[i] = 0.25f;                        /* row 0: all tied       */
    for (int i = 0; i < N; i++) ltab[N + i] = (float)(i % 3) * 0.5f;    /* row 1: ties in groups */
    for (int i = 0; i < V * K; i++) stab[i] = 1e-6f * (frand() + 1.5f); /* tiny: the sum is clamped */
    int32_t lg = gather(g, "logits", lt, N);
    int32_t probs = lw__graph_act(g, "probs", N, LW_ROWS_TOKENS);
    lw__graph_node(g, LW_OP_SOFTMAX, probs, lg, -1, -1);
    int32_t ids = lw__graph_act_typed(g, "ids", LW_TYPE_I32, K, LW_ROWS_TOKENS);
    lw__node *n = lw__graph_node(g, LW_OP_TOPK, ids, probs, -1, -1);
    if (n) n->ip[0] = K;
    int32_t wts = lw__graph_act(g, "weights", K, LW_ROWS_TOKENS);
    if ((n = lw__graph_node(g, LW_OP_MOE_WEIGHTS, wts, probs, ids, -1))) n->ip[0] = 1, n->fp[0] = 2.5f;
    int32_t small = gather(g, "small", lw__graph_weight(g, "stab", LW_TYPE_F32, K, V, stab), K);
    int32_t idk = lw__graph_act_typed(g, "ids_small", LW_TYPE_I32, K, LW_ROWS_TOKENS);
    if ((n = lw__graph_node(g, LW_OP_TOPK, idk, small, -1, -1))) n->ip[0] = K;
    int32_t clamped = lw__graph_act(g, "clamped", K, LW_ROWS_TOKENS);
    if ((n = lw__graph_node(g, LW_OP_MOE_WEIGHTS, clamped, small, idk, -1))) n->ip[0] = 1, n->fp[0] = 0.0f;
    int32_t ex = gather(g, "experts", table(g, "etab", K * E, V, etab), K * E);
    int32_t sum = lw__graph_act(g, "sum", E, LW_ROWS_TOKENS);
    if ((n = lw__graph_node(g, LW_OP_MOE_SUM, sum, ex, wts, -1))) n->ip[0] = K;
    int32_t keep[] = {probs, ids, wts, clamped, idk, sum};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) g->t[keep[i]].kind = LW_T_OUTPUT;
    runner_start(&r, 16, 2);
    int32_t tok[16];
    for (int t = 0; t < 16; t++) tok[t] = t < 2 ? t : (t * 5 + 2) % V;
    if (r.ok) runner_step(&r, tok, 16);
    int bad_order = 0, bad_w = 0, bad_sum = 0;
    double worst_p = 0;
    for (int t = 0; t < 16 && r.ok; t++) {
        const float *l = ltab + tok[t] * N, *p = lw__cpu_row(&g->t[probs], t);
        /* softmax against double precision */
        double mx = l[0], z = 0;
        for (int i = 0; i < N; i++) mx = l[i] > mx ? l[i] : mx;
        for (int i = 0; i < N; i++) z += exp((double)l[i] - mx);
        for (int i = 0; i < N; i++) {
            const double e = exp((double)l[i] - mx) / z, rel = fabs(p[i] - e) / e;
            worst_p = rel > worst_p ? rel : worst_p;
        }
        /* top-k: largest first, a tie goes to the lower index, no expert twice */
        const int32_t *id = lw__cpu_row(&g->t[ids], t);
        int used[N] = {0};
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int i = 0; i < N; i++)
                if (!used[i] && (best < 0 || p[i] > p[best])) best = i;
            used[best] = 1;
            bad_order += id[j] != best;
        }
        /* weights: gathered, double sum rounded once, true division, scaled */
        const float *w = lw__cpu_row(&g->t[wts], t);
        double s = 0;
        for (int j = 0; j < K; j++) s += p[id[j]];
        for (int j = 0; j < K; j++) bad_w += !same_bits(w[j], p[id[j]] / (float)s * 2.5f);
        const float *sm = stab + tok[t] * K, *c = lw__cpu_row(&g->t[clamped], t);
        const int32_t *ik = lw__cpu_row(&g->t[idk], t);
        for (int j = 0; j < K; j++) bad_w += !same_bits(c[j], sm[ik[j]] / 6.103515625e-5f);
        /* the weighted sum: each product rounded, slots added in order */
        const float *e = etab + (size_t)tok[t] * K * E, *y = lw__cpu_row(&g->t[sum], t);
        for (int i = 0; i < E; i++) {
            float acc = e[i] * w[0];
            for (int j = 1; j < K; j++) {
                const float prod = e[j * E + i] * w[j];
                acc = acc + prod;
            }
            bad_sum += !same_bits(y[i], acc);
        }
    }
    const int32_t *id0 = lw__cpu_row(&g->t[ids], 0), *id1 = lw__cpu_row(&g->t[ids], 1);
    CHECK(r.ok && id0[0] == 0 && id0[1] == 1 && id0[4] == 4); /* all tied: the lowest indices in order */
    CHECK(r.ok && id1[0] == 2 && id1[1] == 5 && id1[2] == 8); /* the value 1.0 at 2, 5, 8, ... */
    printf(
        "routing: softmax within %.3g of double precision; top-k order %d, weights %d, sums %d differences\n",
        worst_p, bad_order, bad_w, bad_sum);
    CHECK(worst_p < 1e-6);
    CHECK(bad_order == 0 && bad_w == 0 && bad_sum == 0);
    runner_end(&r);
}

/* Shapes that do not fit together are refused when the scratch is sized, not run. */
static void test_bad_shapes(void) {
    static float wd[4 * 8 * 32], xd[V * 32];
    lw__graph g;
    CHECK(lw__graph_init(&g, NULL, 16, 16) == LW_OK);
    int32_t x = gather(&g, "x", table(&g, "xtab", 32, V, xd), 32);
    int32_t ids = lw__graph_act_typed(&g, "ids", LW_TYPE_I32, 3, LW_ROWS_TOKENS);
    lw__node *n = lw__graph_node(&g, LW_OP_TOPK, ids, x, -1, -1);
    if (n) n->ip[0] = 3;
    int32_t w = lw__graph_weight(&g, "experts", LW_TYPE_F32, 32, 4 * 8, wd);
    int32_t y = lw__graph_act(&g, "y", 3 * 8, LW_ROWS_TOKENS);
    lw__node *mm = lw__graph_node(&g, LW_OP_MUL_MAT_ID, y, w, x, ids);
    size_t sh, tf;
    CHECK(mm && lw__graph_plan(&g, 4, 4, 64) == LW_OK);
    if (mm) {
        mm->ip[0] = 4;
        CHECK(lw__cpu_scratch_needs(&g, 4, 64, &sh, &tf) == LW_OK);
        mm->ip[0] = 3; /* 32 rows are not 3 experts */
        CHECK(lw__cpu_scratch_needs(&g, 4, 64, &sh, &tf) == LW_ERR_INVALID_ARG);
        mm->ip[0] = 2; /* 16 rows per expert: the output holds 3 x 8 */
        CHECK(lw__cpu_scratch_needs(&g, 4, 64, &sh, &tf) == LW_ERR_INVALID_ARG);
        mm->ip[0] = 4;
        mm->src[2] = x; /* ids must be I32 */
        CHECK(lw__cpu_scratch_needs(&g, 4, 64, &sh, &tf) == LW_ERR_INVALID_ARG);
    }
    lw__graph_free(&g);
}

/* ---------------------------------------------------------------------------------------------------------
 * The WebGPU runner refuses MoE models
 * ------------------------------------------------------------------------------------------------------- */

static lw_status info_only(void *ctx, lw_gpu_info *o) {
    (void)ctx;
    memset(o, 0, sizeof *o);
    o->max_buffer_size = 1ull << 30;
    o->max_storage_buffer_binding_size = 1u << 27;
    o->min_storage_buffer_offset_alignment = o->min_uniform_buffer_offset_alignment = 256;
    o->max_compute_workgroup_storage_size = 32768;
    o->max_compute_invocations_per_workgroup = o->max_compute_workgroup_size_x = 256;
    o->max_compute_workgroups_per_dimension = 65535;
    return LW_OK;
}
static void destroy_nothing(void *ctx) {
    (void)ctx;
}
static void buffer_destroy_nothing(void *ctx, lw_gpu_buffer b) {
    (void)ctx, (void)b;
}

static void test_gpu_refuses(void) {
    char path[1024], err[LW_ERRMSG_SIZE];
    snprintf(path, sizeof path, "%s/moe-gpu-tiny-qwen3moe.gguf", test_tmp_dir());
    lw__synth_params sp = {.preset = "tiny-qwen3moe", .type = "f16", .vocab_path = "builtin", .seed = 5};
    CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "%s", err);
    lw_model_params mp = lw_model_default_params();
    mp.no_weights = 1;
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s", lw_model_error(m));
    static const lw_gpu_ops ops = {
        .info = info_only, .buffer_destroy = buffer_destroy_nothing, .destroy = destroy_nothing};
    lw_gpu gpu = {&ops, NULL};
    lw__gpu_model_params gp = lw__gpu_model_default_params();
    lw__gpu_model *g = NULL;
    lw_status st = m ? lw__gpu_model_create(gpu, m, &gp, &g) : LW_ERR_INVALID_ARG;
    printf("webgpu: qwen3moe refused with %s: %s\n", lw_status_str(st), lw__gpu_model_error(g));
    CHECK(st == LW_ERR_UNSUPPORTED && g && strlen(lw__gpu_model_error(g)) > 0);
    lw__gpu_model_free(g);
    lw_model_free(m);
    remove(path);
}

int main(void) {
    test_mul_mat_id();
    test_routing();
    test_bad_shapes();
    test_gpu_refuses();
    return test_summary("test-engine-moe");
}
