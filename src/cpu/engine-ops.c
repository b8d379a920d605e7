/* CPU reference kernels of the engine's ops and the graph driver (see engine-ops.h).
 *
 * Numerics reproduce ggml-cpu v0.4.0 as llama.cpp runs it on x86-64 with AVX-512 (its zen4 build), to the
 * bit for f32/f16 weights (tests/test-oracle-llama.c):
 *  - f16 weights multiply f16-rounded activations (ggml's vec_dot_type of F16 is F16);
 *  - dot products add in ggml's orders: vec_dot's 4 x 16 lanes for single-token steps, llamafile tinyBLAS's
 *    16 lanes for batches (k % 16 == 0), with the tails as ggml's compiler emitted them;
 *  - attention is ggml's flash attention, which llama.cpp uses on CPU by default (flash_attn_type AUTO
 *    resolves to enabled there): the "one chunk" kernel (Q rounded to f16 for K.Q with an f16 cache,
 *    online softmax, V accumulated in f16) and, for steps of 64+ tokens, the tiled kernel; or, with
 *    flash_attn off, llama.cpp's KQ / softmax / KQV path;
 *  - steps split as llama.cpp's ubatches do only when n_batch equals its n_ubatch (512 by default);
 *  - SwiGLU uses ggml's polynomial exp (ggml_v_expf) on blocks of 16, RMSNorm sums squares in double, RoPE
 *    builds its sin/cos table as ggml_rope_cache_init and fuses like ggml's compiled code.
 * Quantized weights use quant-dot's emulations of ggml's x86 kernels (incl. llama.cpp's repacked ones).
 *
 * Most of the time is spent in mul_mat (every weight row is read once per step). */
#include "cpu/engine-ops.h"

#include "cpu/engine-moe.h"
#include "cpu/quant-dot.h"
#include "cpu/quant-dot-simd.h"
#include "quant/quant.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The kernels reproduce ggml's roundings, so the compiler must not fuse a*b+c on its own (GCC in ISO C
 * mode does not; clang would without this). Every FMA here is an explicit fmaf. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off") /* also under -std=gnu11, where GCC would contract */
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Dot products and conversions
 * ------------------------------------------------------------------------------------------------------- */

/* The reference dot products add in the same order as ggml-cpu built for AVX-512 (the build llama.cpp
 * picks on the machines we compare on), so f32 results agree to the bit and f16 roundings downstream (KV
 * cache, attention accumulator) flip the same way. Two orders exist, as in ggml:
 *  - vec_dot (one token per step, or k not a multiple of 16): 4 accumulators of 16 lanes over steps of 64
 *    with FMA, combined pairwise, then the lanes summed as _mm512_reduce_add_ps does, then the tail;
 *  - llamafile's tinyBLAS (two or more tokens and k a multiple of 16): one 16-lane FMA accumulator over
 *    steps of 16, then the same lane sum.
 * The orders are SIMD-shaped, so vector versions can reproduce them exactly. */

/* Sum of 16 lanes in _mm512_reduce_add_ps's order: halves added pairwise down to one. */
static float reduce16(const float *a) {
    float b[8], c[4];
    for (int i = 0; i < 8; i++) b[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++) c[i] = b[i] + b[i + 4];
    return (c[0] + c[2]) + (c[1] + c[3]);
}

/* ggml's GGML_F32x16_REDUCE of the 4 accumulators, ending in the lane sum. */
static float reduce4x16(float s[4][16]) {
    for (int l = 0; l < 16; l++) {
        s[0][l] += s[2][l];
        s[1][l] += s[3][l];
    }
    for (int l = 0; l < 16; l++) s[0][l] += s[1][l];
    return reduce16(s[0]);
}

float lw__cpu_dot_f32(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    float s[4][16] = {{0}};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) s[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], s[j][l]);
    float sum = reduce4x16(s);
    /* ggml's tail is `sumf += x[i]*y[i]` in f32, which GCC compiled (in the shipped zen4 library) into
     * blocks of 16 then 8 products rounded separately and added in order, and FMAs for the last < 8 */
    int64_t i = np;
    for (; n - i >= 16 && (n - np) >= 16; i += 16)
        for (int l = 0; l < 16; l++) sum += x[i + l] * y[i + l];
    if (n - i >= 8) {
        for (int l = 0; l < 8; l++) sum += x[i + l] * y[i + l];
        i += 8;
    }
    for (; i < n; i++) sum = fmaf(x[i], y[i], sum);
    return sum;
}

float lw__cpu_dot_f32_gemm(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    float s[16] = {0};
    for (int64_t i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++) s[l] = fmaf(x[i + l], y[i + l], s[l]);
    return reduce16(s);
}

float lw__cpu_dot_f16(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    float s[4][16] = {{0}};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) {
                const int64_t k = i + 16 * j + l;
                s[j][l] = fmaf(lw__fp16_to_fp32(x[k]), lw__fp16_to_fp32(y[k]), s[j][l]);
            }
    double sum = reduce4x16(s); /* ggml keeps this sum in double; a product of halves is exact in f32 */
    for (int64_t i = np; i < n; i++) sum += (double)(lw__fp16_to_fp32(x[i]) * lw__fp16_to_fp32(y[i]));
    return (float)sum;
}

float lw__cpu_dot_f16_gemm(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    float s[16] = {0};
    for (int64_t i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++)
            s[l] = fmaf(lw__fp16_to_fp32(x[i + l]), lw__fp16_to_fp32(y[i + l]), s[l]);
    return reduce16(s);
}

/* One AVX512-BF16 dot-product step (vdpbf16ps) into 16 lanes: lane j adds the products of elements 2j + 1
 * and then 2j of the 32 at x, y (a product of two bf16 is exact in f32; each add rounds). */
static void dpbf16(float c[16], const uint16_t *x, const uint16_t *y) {
    for (int j = 0; j < 16; j++) {
        c[j] += lw__bf16_to_fp32(x[2 * j + 1]) * lw__bf16_to_fp32(y[2 * j + 1]);
        c[j] += lw__bf16_to_fp32(x[2 * j]) * lw__bf16_to_fp32(y[2 * j]);
    }
}

/* ggml_vec_dot_bf16 as its AVX512-BF16 builds (zen4, cooperlake, sapphirerapids) run it: two 16-lane
 * accumulators over 64 elements a step, each reduced to a float and summed in double with the tail. */
static float dot_bf16(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    float c[2][16] = {{0}};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        dpbf16(c[0], x + i, y + i);
        dpbf16(c[1], x + i + 32, y + i + 32);
    }
    double sum = (double)reduce16(c[0]);
    sum += (double)reduce16(c[1]);
    for (int64_t i = np; i < n; i++) sum += (double)(lw__bf16_to_fp32(x[i]) * lw__bf16_to_fp32(y[i]));
    return (float)sum;
}

/* llamafile's tinyBLAS for BF16 (steps of 2+ tokens; k a multiple of 32, else ggml takes vec_dot): one
 * 16-lane accumulator, 32 elements a step, reduced at the end. */
static float dot_bf16_gemm(int64_t n, const void *w, const void *a) {
    if (n % 32) return dot_bf16(n, w, a);
    const uint16_t *x = w, *y = a;
    float s[16] = {0};
    for (int64_t i = 0; i < n; i += 32) dpbf16(s, x + i, y + i);
    return reduce16(s);
}

/* ggml_cpu_fp32_to_bf16 (the activations of a BF16 product): vcvtne2ps2bf16 on 32 elements at a time, which
 * rounds to nearest even and takes denormal inputs as zero; the scalar conversion for the tail. */
static void f32_to_bf16_row(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof(u));
        const int daz = i < (n & ~(int64_t)31) && (u & 0x7f800000u) == 0;
        h[i] = daz ? (uint16_t)((u >> 16) & 0x8000u) : lw__fp32_to_bf16(x[i]);
    }
}

static void f32_to_f16_row(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = lw__fp32_to_fp16(x[i]);
}

static void f16_to_f32_row(const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = lw__fp16_to_fp32(h[i]);
}

/* ggml_vec_scale_f16 */
static void scale_f16(uint16_t *y, float v, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = lw__fp32_to_fp16(lw__fp16_to_fp32(y[i]) * v);
}

/* ggml_vec_mad_f16 (its SIMD body and its compiled tail both fuse the multiply-add) */
static void mad_f16(uint16_t *y, const uint16_t *x, float v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = lw__fp32_to_fp16(fmaf(lw__fp16_to_fp32(x[i]), v, lw__fp16_to_fp32(y[i])));
}

static void fa_kq(int64_t D, const float *Kt, const float *q, float *kq);
static double fa_softmax(float *kq, float M);
static void fa_vacc(int64_t D, int64_t m, const float *V, const float *kq, float *vkq);
static void swiglu16(float *z, const float *x, const float *g, int64_t n);

static const lw__cpu_kernels ref_kernels = {
    "scalar",
    lw__cpu_dot_f32,
    lw__cpu_dot_f32_gemm,
    lw__cpu_dot_f16,
    lw__cpu_dot_f16_gemm,
    f32_to_f16_row,
    f16_to_f32_row,
    scale_f16,
    mad_f16,
    NULL,
    NULL,
    fa_kq,
    fa_softmax,
    fa_vacc,
    swiglu16,
};

const lw__cpu_kernels *lw__cpu_kernels_ref(void) {
    return &ref_kernels;
}

/* Chosen once; the matmul table follows the choice. Quantized formats get entries as their dot kernels
 * land. */
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;
static const lw__cpu_kernels *best_kernels = &ref_kernels;
static lw__cpu_mm mm_table[LW_TYPE_COUNT];

static void choose_kernels(void) {
    const char *force = getenv("LW_CPU_KERNELS"); /* "scalar" or "avx2": for tests and comparisons */
    const lw__cpu_kernels *x86 = lw__cpu_kernels_x86();
    if (force && !strcmp(force, "avx2")) x86 = lw__cpu_kernels_x86_avx2();
    if (!x86) x86 = lw__cpu_kernels_wasm(); /* wasm simd128 build (engine-wasm.c) */
    if (x86 && !(force && !strcmp(force, "scalar"))) best_kernels = x86;
    const lw__cpu_kernels *k = best_kernels;
    mm_table[LW_TYPE_F32] = (lw__cpu_mm){
        LW_TYPE_F32, NULL, k->dot_f32, k->dot_f32_gemm, k->gemm_f32, NULL, NULL, NULL, NULL, NULL, NULL};
    mm_table[LW_TYPE_F16] =
        (lw__cpu_mm){LW_TYPE_F16, k->f32_to_f16, k->dot_f16, k->dot_f16_gemm, k->gemm_f16, NULL, NULL, NULL,
                     NULL,        NULL,          NULL};
    /* BF16: the scalar orders on every target (no SIMD twins yet) */
    mm_table[LW_TYPE_BF16] = (lw__cpu_mm){
        LW_TYPE_BF16, f32_to_bf16_row, dot_bf16, dot_bf16_gemm, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    /* quantized weights: ggml's pairing with a quantized activation row (quant-dot.h). On x86 llama.cpp
     * quantizes Q8_0/Q8_1 activations with its SIMD rounding, so we do too there. Its SIMD dot products add
     * block results in other orders than these references: close to llama.cpp, not bit-identical yet. */
    for (uint32_t t = 0; t < LW_TYPE_COUNT; t++) {
        const lw__quant_dot_t *qd = lw__quant_dot(t);
        if (!qd) continue;
        lw__from_float_fn act = qd->act_from_float;
        if (qd->vec_dot_type == LW_TYPE_Q8_0) act = lw__quant_act_fast(lw__quantize_row_q8_0_x86);
        if (qd->vec_dot_type == LW_TYPE_Q8_1) act = lw__quantize_row_q8_1_x86;
        mm_table[t] =
            (lw__cpu_mm){qd->vec_dot_type, act, qd->dot, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    }
    /* ggml's x86 dot orders (quant-dot.h), as its AVX-512 build runs them, on every target so results are
     * the same everywhere; llama.cpp's repacked types get their gemv/gemm orders too */
    static const struct {
        uint32_t type;                                     /* weight type                 */
        float (*dot)(int64_t, const void *, const void *); /* plain weights (NULL: keep)  */
        float (*rp)(int64_t, const void *, const void *);  /* repacked: gemv              */
        float (*rpg)(int64_t, const void *, const void *); /* repacked: gemm (or NULL)    */
    } xq[] = {
        {LW_TYPE_Q8_0, lw__vec_dot_q8_0_q8_0_x86, NULL, NULL},
        {LW_TYPE_Q4_1, lw__vec_dot_q4_1_q8_1_x86, NULL, NULL},
        {LW_TYPE_Q5_0, lw__vec_dot_q5_0_q8_0_x86, NULL, NULL},
        {LW_TYPE_Q5_1, lw__vec_dot_q5_1_q8_1_x86, NULL, NULL},
        {LW_TYPE_Q3_K, lw__vec_dot_q3_K_q8_K_x86, NULL, NULL},
        {LW_TYPE_Q5_K, lw__vec_dot_q5_K_q8_K_x86, NULL, NULL},
        {LW_TYPE_Q6_K, lw__vec_dot_q6_K_q8_K_x86, NULL, NULL},
        {LW_TYPE_Q2_K, lw__vec_dot_q2_K_q8_K_x86, lw__vec_dot_q2_K_q8_K_x86_repack,
         lw__vec_dot_q2_K_q8_K_x86_repack_gemm},
        {LW_TYPE_Q4_K, lw__vec_dot_q4_K_q8_K_x86, lw__vec_dot_q4_K_q8_K_x86_repack,
         lw__vec_dot_q4_K_q8_K_x86_repack_gemm},
        {LW_TYPE_Q4_0, NULL, lw__vec_dot_q4_0_q8_0_x86_repack, NULL},
        {LW_TYPE_IQ4_NL, NULL, lw__vec_dot_iq4_nl_q8_0_x86_repack, NULL},
        {LW_TYPE_MXFP4, NULL, lw__vec_dot_mxfp4_q8_0_x86_repack, NULL},
    };
    for (size_t i = 0; i < sizeof(xq) / sizeof(xq[0]); i++) {
        lw__cpu_mm *e = &mm_table[xq[i].type];
        if (!e->dot) continue;
        if (xq[i].dot) e->dot = xq[i].dot;
        e->dot_repack = xq[i].rp;
        e->dot_repack_gemm = xq[i].rpg;
        e->qgemm = lw__quant_gemm_fast(e->dot);
        e->qgemm_repack = xq[i].rp ? lw__quant_gemm_fast(xq[i].rpg ? xq[i].rpg : xq[i].rp) : NULL;
        e->qgemm_repack_gemv = xq[i].rp ? lw__quant_gemm_fast(xq[i].rp) : NULL;
        e->dot =
            lw__quant_dot_fast(e->dot); /* SIMD twins where this CPU has them: same bits, quant-dot-simd.h */
        e->dot_repack = lw__quant_dot_fast(e->dot_repack);
        e->dot_repack_gemm = lw__quant_dot_fast(e->dot_repack_gemm);
    }
    /* the rest (generic orders, e.g. IQ4_XS): SIMD twins too; decode kernels in their own order where this
     * CPU has them (cpu/quant-gemv.h; off with LW_CPU_KERNELS=exact) */
    for (uint32_t t = 0; t < LW_TYPE_COUNT; t++) {
        if (lw__quant_dot(t) && mm_table[t].dot == lw__quant_dot(t)->dot)
            mm_table[t].dot = lw__quant_dot_fast(mm_table[t].dot);
        if (mm_table[t].dot) mm_table[t].gemv = lw__quant_gemv_own(t);
    }
}

const lw__cpu_kernels *lw__cpu_kernels_best(void) {
    pthread_once(&kernels_once, choose_kernels);
    return best_kernels;
}

const lw__cpu_mm *lw__cpu_mm_get(uint32_t type) {
    pthread_once(&kernels_once, choose_kernels);
    if (type >= LW_TYPE_COUNT || !mm_table[type].dot) return NULL;
    return &mm_table[type];
}

int lw__cpu_get_rows_supported(uint32_t type) {
    if (type == LW_TYPE_F32 || type == LW_TYPE_F16) return 1;
    const lw__quant_traits_t *qt = lw__quant_traits(type);
    return qt && qt->to_float;
}

size_t lw__cpu_row_size(uint32_t type, int64_t n) {
    const lw_type_info *ti = lw_type_get(type);
    return (size_t)(n / ti->block_size) * ti->type_size;
}

/* ---------------------------------------------------------------------------------------------------------
 * Helpers shared by the ops
 * ------------------------------------------------------------------------------------------------------- */

static float *row_f32(const lw__tensor *t, int64_t r) {
    return (float *)lw__cpu_row(t, r);
}

/* ---------------------------------------------------------------------------------------------------------
 * Ops. Each runs on every thread (ith of nth) and takes its share of the work.
 * ------------------------------------------------------------------------------------------------------- */

static void op_get_rows(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *w = &ex->g->t[nd->src[0]];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t id = ex->tokens[r];
        const uint8_t *src = w->data == ex->rows_table[0] ? ex->rows_stage[0] + (size_t)r * w->row_bytes
                             : w->data == ex->rows_table[1]
                                 ? ex->rows_stage[1] + (size_t)r * w->row_bytes
                                 : (const uint8_t *)w->data + (size_t)id * w->row_bytes;
        float *y = row_f32(dst, r);
        if (w->type == LW_TYPE_F32) {
            memcpy(y, src, (size_t)w->ne0 * sizeof(float));
        } else if (w->type == LW_TYPE_F16) {
            ex->kern->f16_to_f32(src, y, w->ne0);
        } else {
            lw__quant_traits(w->type)->to_float(src, y, w->ne0);
        }
    }
}

static void op_rms_norm(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    const lw__tensor *w = nd->src[1] >= 0 ? &ex->g->t[nd->src[1]] : NULL;
    const int64_t ne0 = x->ne0, gs = nd->ip[0] > 0 ? nd->ip[0] : ne0;
    const float eps = nd->fp[0];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst) * (ne0 / gs), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t row = r / (ne0 / gs), g0 = (r % (ne0 / gs)) * gs;
        const float *xr = row_f32(x, row) + g0;
        float *y = row_f32(dst, row) + g0;
        double sum = 0.0;
        for (int64_t i = 0; i < gs; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)gs);
        const float scale = 1.0f / sqrtf(mean + eps);
        /* ggml: rms_norm then mul (two f32 roundings) */
        const float *wr = w ? (const float *)w->data + (w->ne0 == gs ? 0 : g0) : NULL;
        for (int64_t i = 0; i < gs; i++) y[i] = wr ? (xr[i] * scale) * wr[i] : xr[i] * scale;
    }
}

/* Thread ith's contiguous share [*r0, *r1) of m rows, in whole units of `unit` rows (the last may be short).
 */
static void split_units(int64_t m, int64_t unit, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t u0, u1;
    lw__cpu_split((m + unit - 1) / unit, ith, nth, &u0, &u1);
    *r0 = u0 * unit < m ? u0 * unit : m;
    *r1 = u1 * unit < m ? u1 * unit : m;
}

static void op_mul_mat(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *w = &ex->g->t[nd->src[0]], *x = &ex->g->t[nd->src[1]];
    const lw__cpu_mm *mm = lw__cpu_mm_get(w->type);
    const int64_t nt = lw__cpu_rows(ex, x), k = w->ne0, m = w->ne1;
    int64_t r0, r1;

    /* 1. activations into the weight's vec_dot_type (rows split over threads) */
    const uint8_t *act = (const uint8_t *)x->data;
    size_t act_stride = x->row_bytes;
    if (mm->from_float && nt == 1 && nth > 1 && mm->gemv &&
        lw__cpu_row_size(mm->vec_dot_type, k) <= ex->thread_floats * sizeof(float)) {
        /* decode: every thread quantizes the one row into its own scratch (~1 us for 2048 floats on AVX2)
         * instead of one thread doing it while the others wait at a barrier; ~110 barriers fewer per
         * token of a 1B at 2 threads, whose waits (sched_yield) had taken ~8 % of the step (perf) */
        uint8_t *own = (uint8_t *)(ex->thread_scratch + (size_t)ith * ex->thread_floats);
        mm->from_float(row_f32(x, 0), own, k);
        act = own;
        act_stride = lw__cpu_row_size(mm->vec_dot_type, k);
    } else if (mm->from_float) {
        act_stride = lw__cpu_row_size(mm->vec_dot_type, k);
        lw__cpu_split(nt, ith, nth, &r0, &r1);
        for (int64_t t = r0; t < r1; t++)
            mm->from_float(row_f32(x, t), ex->scratch + (size_t)t * act_stride, k);
        lw__pool_barrier(ex->pool);
        act = ex->scratch;
    }

    /* 2. decode in the fast kernels' own order: each thread streams one contiguous range of rows */
    if (nt == 1 && nth > 1 && mm->gemv) {
        /* one token: threads take chunks of 1/16 of the rows as they finish the last (tickets of this node)
         * instead of one fixed share each, so a thread that streams slower, or loses its core for a while,
         * takes fewer; chunks of whole quads (LW_QUANT_GEMV_ROWS), so each row's kernel is the same as with
         * fixed shares (the same bits) */
        const int64_t unit = LW_QUANT_GEMV_ROWS, per = (m + 16 * unit - 1) / (16 * unit) * unit;
        const int64_t chunk = per > 4 * unit ? per : 4 * unit;
        const int which = (int)((nd - ex->g->nodes) & 1);
        for (;;) {
            const int64_t c0 = (int64_t)lw__pool_ticket_take(ex->pool, which) * chunk;
            if (c0 >= m) break;
            const int64_t c1 = m - c0 < chunk ? m : c0 + chunk;
            mm->gemv(k, (const uint8_t *)w->data + (size_t)c0 * w->row_bytes, w->row_bytes, c1 - c0, act,
                     row_f32(dst, 0) + c0);
        }
        return;
    }
    if (nt < LW_QGEMM_MIN_TOKENS && mm->gemv) {
        split_units(m, LW_QUANT_GEMV_ROWS, ith, nth, &r0, &r1);
        if (r1 > r0)
            for (int64_t t = 0; t < nt; t++)
                mm->gemv(k, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0,
                         act + (size_t)t * act_stride, row_f32(dst, t) + r0);
        return;
    }

    /* 2a. many tokens and a tiled kernel in the engine's own float order (quant-gemm.h), unless exact */
    const lw__quant_gemm_fn own = nt >= LW_QGEMM_MIN_TOKENS ? lw__quant_gemm_own(w->type) : NULL;
    if (own) {
        split_units(m, LW_QUANT_GEMM_ROWS, ith, nth, &r0, &r1);
        if (r1 > r0)
            own(k, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0, act,
                act_stride, nt, row_f32(dst, 0) + r0, (size_t)dst->ne0,
                ex->thread_scratch + (size_t)ith * ex->thread_floats);
        return;
    }

    /* 2b. many tokens and a tiled kernel (quant-gemm.h): panels of weight rows split over threads; each
     *     thread's panels meet every token in registers. Tokens past the last group of 4 take the gemv
     *     order where llama.cpp's repacked gemm and gemv orders differ. */
    const int repacked = lw__cpu_mm_repacked(mm, m) && !w->plain;
    lw__quant_gemm_fn qg = repacked ? mm->qgemm_repack : mm->qgemm;
    if (nt < LW_QGEMM_MIN_TOKENS) qg = NULL; /* decode: the per-row dots (gemv order) below */
    if (qg) {
        const int64_t n_tiled =
            repacked && mm->dot_repack_gemm && nt >= LW_QGEMM_MIN_TOKENS ? nt / 4 * 4 : nt;
        split_units(m, LW_QUANT_GEMM_ROWS, ith, nth, &r0, &r1);
        if (r1 > r0)
            qg(k, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0, act,
               act_stride, n_tiled, row_f32(dst, 0) + r0, (size_t)dst->ne0,
               ex->thread_scratch + (size_t)ith * ex->thread_floats);
        for (int64_t r = r0; r < r1; r++) { /* the last nt % 4 tokens: llama.cpp's gemv order */
            const void *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
            for (int64_t t = n_tiled; t < nt; t++)
                row_f32(dst, t)[r] = mm->dot_repack(k, wr, act + (size_t)t * act_stride);
        }
        return;
    }

    /* 2c. output columns (weight rows) split over threads; tokens in blocks so a block of activations stays
     *     in cache while the weight rows stream by */
    lw__cpu_split(m, ith, nth, &r0, &r1);
    /* ggml hands steps of 2+ tokens with k a multiple of 16 to tinyBLAS, whose summation order differs */
    const int gemm = nt >= 2 && k % 16 == 0 && mm->dot_gemm;
    float (*dot)(int64_t, const void *, const void *) = gemm ? mm->dot_gemm : mm->dot;
    const int64_t TB = 32;
    for (int64_t t0 = 0; t0 < nt; t0 += TB) {
        int64_t t1 = t0 + TB < nt ? t0 + TB : nt;
        if (gemm && mm->gemm) {
            if (r1 > r0)
                mm->gemm(k, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0,
                         act + (size_t)t0 * act_stride, act_stride, t1 - t0, row_f32(dst, t0) + r0,
                         (size_t)dst->ne0);
            continue;
        }
        if (lw__cpu_mm_repacked(mm, m) && !w->plain) {
            /* llama.cpp's repacked kernels: tokens in groups of 4 through gemm, the rest through gemv */
            const int64_t n_gemm = nt / 4 * 4;
            for (int64_t r = r0; r < r1; r++) {
                const void *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
                for (int64_t t = t0; t < t1; t++) {
                    float (*d)(int64_t, const void *, const void *) =
                        t < n_gemm && mm->dot_repack_gemm ? mm->dot_repack_gemm : mm->dot_repack;
                    row_f32(dst, t)[r] = d(k, wr, act + (size_t)t * act_stride);
                }
            }
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            const void *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
            for (int64_t t = t0; t < t1; t++) row_f32(dst, t)[r] = dot(k, wr, act + (size_t)t * act_stride);
        }
    }
}

static void op_add(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *a = &ex->g->t[nd->src[0]], *b = &ex->g->t[nd->src[1]];
    const int64_t rows_b = lw__cpu_rows(ex, b);
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(a, r), *y = row_f32(b, rows_b == 1 ? 0 : r);
        float *z = row_f32(dst, r);
        for (int64_t i = 0; i < dst->ne0; i++) z[i] = x[i] + y[i];
    }
}

/* exp as ggml's AVX-512 ggml_v_expf (a polynomial within 1.5 ulp of expf), one lane at a time */
static float v_expf(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j =
        fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
             fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (isnan(n)) return n; /* NaN in (a hostile file's weights), NaN out: (int)NaN is undefined */
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n); /* _mm512_scalef_ps(j, n): n is integral here */
}

double lw__cpu_softmax_exp(float *y, const float *x, int64_t n, float max) {
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int l = 0; l < 16; l++) y[i + l] = v_expf(x[i + l] - max);
        sum += (double)reduce16(y + i);
    }
    for (; i < n; i++) sum += (double)(y[i] = expf(x[i] - max));
    return sum;
}

/* ggml_soft_max without mask or scale: max, exponentials and their double sum (lw__cpu_softmax_exp), then
 * every value times the f32 reciprocal of the sum (ggml_vec_scale_f32 of (float)(1.0 / sum)). */
static void op_softmax(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    const int64_t n = dst->ne0;
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *a = row_f32(x, r);
        float *y = row_f32(dst, r), mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) mx = a[i] > mx ? a[i] : mx;
        const float inv = (float)(1.0 / lw__cpu_softmax_exp(y, a, n, mx));
        for (int64_t i = 0; i < n; i++) y[i] *= inv;
    }
}

/* The blocks of 16 of ggml_vec_swiglu_f32 (lw__cpu_kernels.swiglu16; scalar, libm's fmaf per step: ~6 % of
 * a 1B's decode on one AVX2 core when the dispatch table had no vector version). */
static void swiglu16(float *z, const float *x, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] / (1.0f + v_expf(0.0f - x[i])) * g[i];
}

/* silu(x) * g as ggml_vec_swiglu_f32 built for AVX-512, per row of ip[0] elements (whole rows when 0): blocks
 * of 16 use v_expf, the row's tail uses expf. */
static void op_swiglu(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *a = &ex->g->t[nd->src[0]], *b = &ex->g->t[nd->src[1]];
    const int64_t n = nd->ip[0] > 0 ? nd->ip[0] : dst->ne0, n16 = n & ~(int64_t)15, per = dst->ne0 / n;
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst) * per, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t off = (r % per) * n;
        const float *x = row_f32(a, r / per) + off, *g = row_f32(b, r / per) + off;
        float *z = row_f32(dst, r / per) + off;
        ex->kern->swiglu16(z, x, g, n16);
        for (int64_t i = n16; i < n; i++) z[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
    }
}

void lw__rope_cache(const lw__node *nd, const float *ff, int64_t pos, int64_t n_pairs, float *cache) {
    const int64_t n_rot = nd->ip[2];
    const float freq_base = nd->fp[0], freq_scale = nd->fp[1], ext_factor = nd->fp[2],
                attn_factor = nd->fp[3];
    const float corr0 = nd->fp[4], corr1 = nd->fp[5];
    /* YaRN's magnitude correction (rope_yarn: mscale *= 1 + 0.1 log(1/freq_scale), fused by ggml's compiler)
     */
    const float mscale =
        ext_factor != 0.0f ? attn_factor * fmaf(0.1f, logf(1.0f / freq_scale), 1.0f) : attn_factor;
    const float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int64_t i = 0; i < n_pairs; i++) {
        /* pairs past n_rot are copied, not rotated: their entries are unused (and have no factor) */
        const float extrap = ff && 2 * i < n_rot ? theta / ff[i] : theta;
        float th = freq_scale * extrap;
        if (ext_factor != 0.0f) { /* YaRN: blend interpolation and extrapolation over the ramp */
            const float y = ((float)i - corr0) / fmaxf(0.001f, corr1 - corr0);
            const float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext_factor;
            th = fmaf(th, 1.0f - ramp, extrap * ramp); /* ggml's compiler fuses the first product */
        }
        cache[2 * i] = cosf(th) * mscale;
        cache[2 * i + 1] = sinf(th) * mscale;
        theta *= theta_scale;
    }
}

static void op_rope(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    const int64_t n_head = nd->ip[0], hd = nd->ip[1], n_rot = nd->ip[2];
    const int mode = nd->ip[3];
    /* frequency factors (llama 3): ggml divides the extrapolated angle by them before scaling */
    const float *ff = nd->src[1] >= 0 ? (const float *)ex->g->t[nd->src[1]].data : NULL;
    float *cache = ex->thread_scratch + (size_t)ith * ex->thread_floats; /* hd floats: cos, sin pairs */
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        lw__rope_cache(nd, ff, ex->pos0 + r, hd / 2, cache); /* this position's table */
        for (int64_t h = 0; h < n_head; h++) {
            const float *s = row_f32(x, r) + h * hd;
            float *d = row_f32(dst, r) + h * hd;
            for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
                const int64_t a = mode == LW_ROPE_NEOX ? i0 / 2 : i0,
                              b = mode == LW_ROPE_NEOX ? a + n_rot / 2 : a + 1;
                const float x0 = s[a], x1 = s[b], c = cache[i0], sn = cache[i0 + 1];
                /* ggml's `x0*cos - x1*sin` as its compiler contracted it: the first product fused */
                d[a] = fmaf(x0, c, -(x1 * sn));
                d[b] = fmaf(x0, sn, x1 * c);
            }
            for (int64_t i = n_rot; i < hd; i++) d[i] = s[i];
        }
    }
}

static void op_kv_store(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *x = &ex->g->t[nd->src[0]];
    uint8_t *base = (uint8_t *)(nd->ip[1] ? ex->v : ex->k)[nd->ip[0]];
    const int64_t row = lw__cpu_kv_row(ex, nd->ip[0]);
    const size_t rb = lw__cpu_row_size(ex->kv_type, row);
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, x), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *cell = base + (size_t)(ex->pos0 + r) * rb;
        if (ex->kv_type == LW_TYPE_F16)
            ex->kern->f32_to_f16(row_f32(x, r), cell, row);
        else if (ex->kv_type == LW_TYPE_Q8_0) /* as llama.cpp's set_rows into a q8_0 / q4_0 cache */
            lw__quantize_row_q8_0_ref(row_f32(x, r), cell, row);
        else if (ex->kv_type == LW_TYPE_Q4_0)
            lw__quantize_row_q4_0_ref(row_f32(x, r), cell, row);
        else
            memcpy(cell, row_f32(x, r), (size_t)row * sizeof(float));
    }
}

/* Head hk (D elements) of a cache row as f32: widened from f16, copied, or dequantized from the 32-element
 * blocks of a Q8_0 / Q4_0 cache (D a multiple of 32: lw_context_create checks). */
static void kv_widen(const lw__exec *ex, const uint8_t *row, int64_t hk, int64_t D, float *dst) {
    switch (ex->kv_type) {
    case LW_TYPE_F16:
        ex->kern->f16_to_f32((const uint16_t *)row + hk * D, dst, D);
        break;
    case LW_TYPE_Q8_0:
        lw__dequantize_row_q8_0(row + (size_t)(hk * D / 32) * sizeof(lw__block_q8_0), dst, D);
        break;
    case LW_TYPE_Q4_0:
        lw__dequantize_row_q4_0(row + (size_t)(hk * D / 32) * sizeof(lw__block_q4_0), dst, D);
        break;
    default:
        memcpy(dst, (const float *)row + hk * D, sizeof(float) * (size_t)D);
    }
}

/* ggml's tiled flash attention (ggml_compute_forward_flash_attn_ext_tiled), used by ggml for steps of 64+
 * tokens when the head size is a multiple of its SIMD width (16 on AVX-512). Per query row: Q stays f32, K
 * and V are widened to f32, each score is an FMA chain over the head dimension and each output an FMA
 * chain over the cells of a tile (simd_gemm), and the softmax runs per tile of 64 cells with ggml_v_expf.
 * Fully masked cells and tiles contribute exact zeros there, so rows are independent; we walk one head and
 * up to 64 query rows per work item so each K/V tile is widened once for all of them. */
#define FA_TILE 64

/* score of 64 cells: kq[j] = FMA chain over d of Kt[d][j] * q[d] (Kt is D x 64, cells contiguous) */
static void fa_kq(int64_t D, const float *Kt, const float *q, float *kq) {
    for (int j = 0; j < FA_TILE; j++) {
        float acc = 0.0f;
        for (int64_t d = 0; d < D; d++) acc = fmaf(Kt[d * FA_TILE + j], q[d], acc);
        kq[j] = acc;
    }
}

/* kq[i] = v_expf(kq[i] - M) for the 64 scores; returns their sum as ggml_vec_soft_max_f32 (blocks of 16
 * summed in lane order, accumulated in double) */
static double fa_softmax(float *kq, float M) {
    double sum = 0.0;
    for (int b = 0; b < FA_TILE; b += 16) {
        for (int l = 0; l < 16; l++) kq[b + l] = v_expf(kq[b + l] - M);
        sum += (double)reduce16(kq + b);
    }
    return sum;
}

/* vkq[d] = FMA chain over the m cells of V[j][d] * kq[j], continuing from vkq[d] */
static void fa_vacc(int64_t D, int64_t m, const float *V, const float *kq, float *vkq) {
    for (int64_t d = 0; d < D; d++) {
        float acc = vkq[d];
        for (int64_t j = 0; j < m; j++) acc = fmaf(V[j * D + d], kq[j], acc);
        vkq[d] = acc;
    }
}

/* Floats of per-thread scratch for one work item of head size D. */
static size_t fa_tiled_floats(int64_t D) {
    return (size_t)(3 * FA_TILE * D + 3 * FA_TILE + D);
}

static void op_attn_tiled(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *q = &ex->g->t[nd->src[0]];
    const int64_t n_head = nd->ip[1], n_head_kv = nd->ip[2], D = nd->ip[3], nt = lw__cpu_rows(ex, q);
    const float softcap = nd->fp[1],
                scale = softcap != 0.0f ? nd->fp[0] / softcap : nd->fp[0]; /* as one-chunk */
    const size_t rb = lw__cpu_row_size(ex->kv_type, lw__cpu_kv_row(ex, nd->ip[0]));
    const uint8_t *kc = ex->k[nd->ip[0]], *vc = ex->v[nd->ip[0]];
    const lw__cpu_kernels *K = ex->kern;
    float *ts = ex->thread_scratch + (size_t)ith * ex->thread_floats;
    float *Kt = ts, *V32 = Kt + FA_TILE * D, *vkq = V32 + FA_TILE * D, *kq = vkq + FA_TILE * D;
    float *M = kq + FA_TILE, *S = M + FA_TILE, *krow = S + FA_TILE; /* krow: one K row widened */
    const int64_t n_qt = (nt + FA_TILE - 1) / FA_TILE;
    int64_t i0, i1;
    lw__cpu_split(n_head * n_qt, ith, nth, &i0, &i1);
    for (int64_t item = i0; item < i1; item++) {
        const int64_t h = item / n_qt, t0 = (item % n_qt) * FA_TILE, hk = h / (n_head / n_head_kv);
        const int64_t t1 = t0 + FA_TILE < nt ? t0 + FA_TILE : nt;
        for (int64_t r = 0; r < t1 - t0; r++) M[r] = -INFINITY, S[r] = 0.0f;
        memset(vkq, 0, sizeof(float) * (size_t)(FA_TILE * D));
        memset(Kt, 0, sizeof(float) * (size_t)(FA_TILE * D)); /* cells past the end stay finite */
        const int64_t n_kv_max = ex->pos0 + t1;               /* cells the last row sees */
        for (int64_t c0 = 0; c0 < n_kv_max; c0 += FA_TILE) {
            const int64_t n = n_kv_max - c0 < FA_TILE ? n_kv_max - c0 : FA_TILE;
            for (int64_t j = 0; j < n; j++) { /* widen the tile once for every row */
                const uint8_t *kr = kc + (size_t)(c0 + j) * rb, *vr = vc + (size_t)(c0 + j) * rb;
                kv_widen(ex, vr, hk, D, V32 + j * D);
                kv_widen(ex, kr, hk, D, krow);
                for (int64_t d = 0; d < D; d++) Kt[d * FA_TILE + j] = krow[d];
            }
            for (int64_t r = 0; r < t1 - t0; r++) {
                const int64_t nv = ex->pos0 + t0 + r + 1; /* cells row r sees: [lo, nv) */
                const int64_t lo = nd->swa > 0 && nv > nd->swa ? nv - nd->swa : 0;
                if (c0 >= nv || c0 + n <= lo) continue; /* fully masked tile: no change */
                const int64_t m = nv - c0 < n ? nv - c0 : n;
                K->fa_kq(D, Kt, row_f32(q, t0 + r) + h * D, kq);
                float tile_max = -INFINITY;
                for (int64_t j = 0; j < FA_TILE; j++) {
                    /* ggml: scale, tanh and the soft-cap over the tile, then the mask (0 or -inf) */
                    kq[j] = j < m && c0 + j >= lo
                                ? (softcap != 0.0f ? tanhf(kq[j] * scale) * softcap : kq[j] * scale)
                                : -INFINITY;
                    tile_max = kq[j] > tile_max ? kq[j] : tile_max;
                }
                float *acc = vkq + r * D;
                const float Mnew = fmaxf(M[r], tile_max);
                if (Mnew > M[r]) {
                    const float ms = expf(M[r] - Mnew);
                    for (int64_t d = 0; d < D; d++) acc[d] *= ms;
                    S[r] *= ms;
                }
                M[r] = Mnew;
                S[r] = (float)((double)S[r] + K->fa_softmax(kq, Mnew));
                K->fa_vacc(D, m, V32, kq, acc);
            }
        }
        for (int64_t r = 0; r < t1 - t0; r++) {
            const float s_inv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
            float *y = row_f32(dst, t0 + r) + h * D;
            for (int64_t d = 0; d < D; d++) y[d] = vkq[r * D + d] * s_inv;
        }
    }
}

/* The cells llama.cpp's KV view spans when `used` cells are filled in a cache of n_ctx cells: padded to 256
 * (llama_kv_cache::get_n_kv), never more than the cache. Our classic path pads rows to it with masked
 * cells, which only adds exact zeros but keeps ggml's grouping of the real cells in its dot products. */
static int64_t classic_pad(int64_t used, int64_t n_ctx) {
    int64_t cells = (n_ctx + 255) / 256 * 256, p = (used + 255) / 256 * 256;
    if (p < 256) p = 256;
    return p < cells ? p : cells;
}

/* Attention as llama.cpp computes it with flash attention off: KQ = K.Q with Q rounded to f16 (f16
 * cache), ggml_soft_max_ext over the padded row (scale, mask, ggml_v_expf blocks, 1/sum in double), the
 * probabilities rounded to f16, then V^T.KQ. Batches of 2+ tokens use tinyBLAS's order in both products,
 * as ggml does. Reference speed: it gathers V's columns. */
static void op_attn_classic(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *q = &ex->g->t[nd->src[0]];
    const int64_t n_head = nd->ip[1], n_head_kv = nd->ip[2], D = nd->ip[3];
    const float scale = nd->fp[0], softcap = nd->fp[1], inv_cap = softcap != 0.0f ? 1.0f / softcap : 0.0f;
    const int f16 = ex->kv_type == LW_TYPE_F16;
    const size_t rb = lw__cpu_row_size(ex->kv_type, lw__cpu_kv_row(ex, nd->ip[0]));
    const uint8_t *kc = ex->k[nd->ip[0]], *vc = ex->v[nd->ip[0]];
    const lw__cpu_kernels *K = ex->kern;
    const int batch = ex->n_tokens >= 2;
    const int64_t npad = classic_pad(ex->pos0 + ex->n_tokens, ex->n_ctx);
    float *kq = ex->thread_scratch + (size_t)ith * ex->thread_floats; /* npad floats            */
    uint16_t *kq16 = (uint16_t *)(kq + npad);                         /* npad halves            */
    uint16_t *col = kq16 + npad;                                      /* npad halves (V column) */
    uint16_t *q16 = col + npad;                                       /* D halves               */
    float *colf = (float *)kq16; /* f32 cache: the column reuses kq16 + col as npad floats */
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, q) * n_head, ith, nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        const int64_t t = ir / n_head, h = ir % n_head, hk = h / (n_head / n_head_kv);
        const float *qr = row_f32(q, t) + h * D;
        const int64_t nv = ex->pos0 + t + 1;
        const int64_t lo = nd->swa > 0 && nv > nd->swa ? nv - nd->swa : 0;
        if (f16) K->f32_to_f16(qr, q16, D);
        float (*dk)(int64_t, const void *, const void *) =
            f16 ? (batch && D % 16 == 0 ? K->dot_f16_gemm : K->dot_f16)
                : (batch && D % 16 == 0 ? K->dot_f32_gemm : K->dot_f32);
        float mx = -INFINITY;
        for (int64_t c = 0; c < npad; c++) {
            if (c >= nv || c < lo) {
                kq[c] = -INFINITY;
                continue;
            }
            const uint8_t *kr = kc + (size_t)c * rb;
            float s = dk(D,
                         f16 ? (const void *)((const uint16_t *)kr + hk * D)
                             : (const void *)((const float *)kr + hk * D),
                         f16 ? (const void *)q16 : (const void *)qr);
            /* llama.cpp soft-caps KQ (scale 1/c, tanh, scale c) before ggml_soft_max_ext scales it */
            if (softcap != 0.0f) s = tanhf(s * inv_cap) * softcap;
            kq[c] = s * scale + 0.0f;
            mx = kq[c] > mx ? kq[c] : mx;
        }
        /* ggml_vec_soft_max_f32 (16-lane blocks, then scalar expf), then 1/sum in double */
        const float inv = (float)(1.0 / lw__cpu_softmax_exp(kq, kq, npad, mx));
        int64_t c;
        for (c = 0; c < npad; c++) kq[c] *= inv;
        float *y = row_f32(dst, t) + h * D;
        if (f16) {
            K->f32_to_f16(kq, kq16, npad);
            float (*dv)(int64_t, const void *, const void *) =
                batch && npad % 16 == 0 ? K->dot_f16_gemm : K->dot_f16;
            for (int64_t d = 0; d < D; d++) {
                for (c = 0; c < npad; c++)
                    col[c] = c < nv ? ((const uint16_t *)(vc + (size_t)c * rb))[hk * D + d] : 0;
                y[d] = dv(npad, col, kq16);
            }
        } else { /* an f32 cache: the same with f32 probabilities (llama.cpp would use f16 here) */
            float (*dv)(int64_t, const void *, const void *) =
                batch && npad % 16 == 0 ? K->dot_f32_gemm : K->dot_f32;
            for (int64_t d = 0; d < D; d++) {
                for (c = 0; c < npad; c++)
                    colf[c] = c < nv ? ((const float *)(vc + (size_t)c * rb))[hk * D + d] : 0.0f;
                y[d] = dv(npad, colf, kq);
            }
        }
    }
}

/* Causal attention of each (token, head) over cache cells 0 .. pos0 + token. Steps of 64+ tokens with a
 * head size that is a multiple of 16 follow ggml's tiled kernel (above); the rest follow
 * flash_attn_ext_f16_one_chunk with an all-zero mask on visible cells (masked cells are skipped): Q rounded
 * to f16 for K.Q with an f16 cache, online softmax in f32, the V accumulator in f16 when V is f16. */
static void op_attn(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *q = &ex->g->t[nd->src[0]];
    const int64_t n_head = nd->ip[1], n_head_kv = nd->ip[2], D = nd->ip[3];
    const float softcap = nd->fp[1];
    /* ggml_flash_attn_ext folds the soft-cap into the scale: s = c * tanh(s * (scale / c)) */
    const float scale = softcap != 0.0f ? nd->fp[0] / softcap : nd->fp[0];
    const int f16 = ex->kv_type == LW_TYPE_F16;
    const lw__cpu_kernels *K = ex->kern;
    if (!ex->flash_attn) {
        op_attn_classic(ex, nd, ith, nth);
        return;
    }
    if (ex->n_tokens >= FA_TILE && D % 16 == 0) {
        op_attn_tiled(ex, nd, ith, nth);
        return;
    }
    const size_t rb = lw__cpu_row_size(ex->kv_type, lw__cpu_kv_row(ex, nd->ip[0]));
    const uint8_t *kc = ex->k[nd->ip[0]], *vc = ex->v[nd->ip[0]];
    const int quant = ex->kv_type == LW_TYPE_Q8_0 || ex->kv_type == LW_TYPE_Q4_0;
    float *ts = ex->thread_scratch + (size_t)ith * ex->thread_floats;
    float *vkq32 = ts;                      /* D floats   */
    uint16_t *vkq16 = (uint16_t *)(ts + D); /* D halves   */
    uint16_t *q16 = vkq16 + D;              /* D halves   */
    float *kw = ts + 2 * D, *vw = kw + D;   /* a quantized cache's K and V rows, widened */
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, q) * n_head, ith, nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        const int64_t t = ir / n_head, h = ir % n_head, hk = h / (n_head / n_head_kv);
        const float *qr = row_f32(q, t) + h * D;
        const int64_t n_kv = ex->pos0 + t + 1;
        const int64_t lo =
            nd->swa > 0 && n_kv > nd->swa ? n_kv - nd->swa : 0; /* sliding window: first cell seen */
        float *y = row_f32(dst, t) + h * D;
        float S = 0.0f, M = -INFINITY;
        if (f16) {
            K->f32_to_f16(qr, q16, D);
            memset(vkq16, 0, (size_t)D * sizeof(uint16_t));
        } else {
            memset(vkq32, 0, (size_t)D * sizeof(float));
        }
        for (int64_t ic = lo; ic < n_kv; ic++) {
            const uint8_t *kr = kc + (size_t)ic * rb, *vr = vc + (size_t)ic * rb;
            if (quant) { /* K.Q and the V sum in f32 over the dequantized rows */
                kv_widen(ex, kr, hk, D, kw);
                kv_widen(ex, vr, hk, D, vw);
            }
            float s = f16 ? K->dot_f16(D, (const uint16_t *)kr + hk * D, q16)
                          : K->dot_f32(D, quant ? kw : (const float *)kr + hk * D, qr);
            s = s * scale;
            if (softcap != 0.0f) s = softcap * tanhf(s);
            const float Mold = M;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                M = s;
                ms = expf(Mold - M);
                if (f16)
                    K->scale_f16(vkq16, ms, D);
                else
                    for (int64_t d = 0; d < D; d++) vkq32[d] *= ms;
            } else {
                vs = expf(s - M);
            }
            if (f16) {
                K->mad_f16(vkq16, (const uint16_t *)vr + hk * D, vs, D);
            } else {
                const float *v = quant ? vw : (const float *)vr + hk * D;
                for (int64_t d = 0; d < D; d++) vkq32[d] = fmaf(v[d], vs, vkq32[d]);
            }
            S = S * ms + vs; /* not fused in ggml's build */
        }
        if (f16) K->f16_to_f32(vkq16, vkq32, D);
        const float s_inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (int64_t d = 0; d < D; d++) y[d] = vkq32[d] * s_inv;
    }
}

static void op_out_rows(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    int64_t r0, r1;
    lw__cpu_split(ex->n_outputs, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) memcpy(row_f32(dst, r), row_f32(x, ex->out_rows[r]), x->row_bytes);
}

/* ggml_scale with no bias: a plain product per element */
static void op_scale(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    const float v = nd->fp[0];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *a = row_f32(x, r);
        float *y = row_f32(dst, r);
        for (int64_t i = 0; i < dst->ne0; i++) y[i] = a[i] * v;
    }
}

/* Soft-capping as llama.cpp builds it: ggml_scale by 1/c, ggml_tanh (libm tanhf per element), ggml_scale
 * by c; each step rounds to f32, as here. */
static void op_softcap(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    const float inv = nd->fp[0], c = nd->fp[1];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *a = row_f32(x, r);
        float *y = row_f32(dst, r);
        for (int64_t i = 0; i < dst->ne0; i++) y[i] = tanhf(a[i] * inv) * c;
    }
}

/* GELU as ggml's table (ggml_table_gelu_f16): the tanh approximation of the f16-rounded input, rounded
 * to f16; the multiply-add inside is fused as ggml's compiled table set-up fuses it. */
float lw__cpu_gelu_f16(uint16_t h) {
    const float x = lw__fp16_to_fp32(h);
    const float inner = 0.79788456080286535587989211986876f * x * fmaf(0.044715f * x, x, 1.0f);
    return lw__fp16_to_fp32(lw__fp32_to_fp16(0.5f * x * (1.0f + tanhf(inner))));
}

/* ggml_vec_geglu_f32 on each sub-row of ip[0] elements (0: whole rows); with ip[1] = 1 src0 holds each
 * sub-row's gate and up halves side by side (a fused gate|up expert product, ggml_geglu_split of its two
 * views) and src1 is unused */
static void op_geglu(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *a = &ex->g->t[nd->src[0]];
    const int fused = nd->ip[1] != 0;
    const lw__tensor *b = fused ? a : &ex->g->t[nd->src[1]];
    const int64_t n = nd->ip[0] > 0 ? nd->ip[0] : dst->ne0, per = dst->ne0 / n;
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t j = 0; j < per; j++) {
            const float *x = row_f32(a, r) + (fused ? 2 * j * n : j * n);
            const float *g = fused ? x + n : row_f32(b, r) + j * n;
            float *z = row_f32(dst, r) + j * n;
            for (int64_t i = 0; i < n; i++)
                z[i] = x[i] <= -10.0f  ? 0.0f
                       : x[i] >= 10.0f ? x[i] * g[i]
                                       : lw__cpu_gelu_f16(lw__fp32_to_fp16(x[i])) * g[i];
        }
}

/* ggml_vec_gelu_f32 (GGML_GELU_FP16): the table of the f16-rounded input, outside [-10, 10] 0 or x */
static void op_gelu(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *a = &ex->g->t[nd->src[0]];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(a, r);
        float *z = row_f32(dst, r);
        for (int64_t i = 0; i < dst->ne0; i++)
            z[i] = x[i] <= -10.0f ? 0.0f : x[i] >= 10.0f ? x[i] : lw__cpu_gelu_f16(lw__fp32_to_fp16(x[i]));
    }
}

/* ggml_mul: one product per element (src1 a row of the same step, a single row, a column range of a wider
 * row, or one broadcast value); with ip[1] = k > 0, each of the k sub-rows of a row times its own value of
 * src1's row (a per-expert scale gathered per slot) */
static void op_mul(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *a = &ex->g->t[nd->src[0]], *b = &ex->g->t[nd->src[1]];
    const int64_t rows_b = lw__cpu_rows(ex, b), off = nd->ip[0], k = nd->ip[1];
    const int scalar = b->ne0 == 1 && rows_b == 1;
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(a, r), *y = row_f32(b, rows_b == 1 ? 0 : r) + (scalar ? 0 : off);
        float *z = row_f32(dst, r);
        if (k > 0)
            for (int64_t i = 0, sub = dst->ne0 / k; i < dst->ne0; i++) z[i] = x[i] * y[i / sub];
        else if (scalar)
            for (int64_t i = 0; i < dst->ne0; i++) z[i] = x[i] * y[0];
        else
            for (int64_t i = 0; i < dst->ne0; i++) z[i] = x[i] * y[i];
    }
}

typedef void (*op_fn)(const lw__exec *ex, const lw__node *nd, int ith, int nth);

/* every op has its kernel (a missing entry would be a NULL call) */
_Static_assert(LW_OP_MUL == LW_OP_COUNT - 1, "a new op needs its entry in op_table");

static const op_fn op_table[LW_OP_COUNT] = {
    [LW_OP_GET_ROWS] = op_get_rows,
    [LW_OP_RMS_NORM] = op_rms_norm,
    [LW_OP_MUL_MAT] = op_mul_mat,
    [LW_OP_ADD] = op_add,
    [LW_OP_ROPE] = op_rope,
    [LW_OP_KV_STORE] = op_kv_store,
    [LW_OP_ATTN] = op_attn,
    [LW_OP_SWIGLU] = op_swiglu,
    [LW_OP_OUT_ROWS] = op_out_rows,
    [LW_OP_SCALE] = op_scale,
    [LW_OP_GEGLU] = op_geglu,
    [LW_OP_SOFTCAP] = op_softcap,
    [LW_OP_SOFTMAX] = op_softmax,
    [LW_OP_TOPK] = lw__cpu_op_topk,
    [LW_OP_MOE_WEIGHTS] = lw__cpu_op_moe_weights,
    [LW_OP_MUL_MAT_ID] = lw__cpu_op_mul_mat_id,
    [LW_OP_MOE_SUM] = lw__cpu_op_moe_sum,
    [LW_OP_GELU] = op_gelu,
    [LW_OP_MUL] = op_mul,
};

/* ---------------------------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__cpu_scratch_needs(const lw__graph *g, int64_t max_tokens, int64_t n_ctx, size_t *shared_bytes,
                                size_t *thread_floats) {
    uint64_t shared = 0, per_thread = 0;
    for (int32_t n = 0; n < g->n_nodes; n++) {
        const lw__node *nd = &g->nodes[n];
        if (nd->op == LW_OP_MUL_MAT) {
            const lw__tensor *w = &g->t[nd->src[0]];
            const lw__cpu_mm *mm = lw__cpu_mm_get(w->type);
            if (!mm) return LW_ERR_UNSUPPORTED;
            if (mm->from_float) {
                uint64_t b;
                if (!lw__mul_u64((uint64_t)max_tokens, lw__cpu_row_size(mm->vec_dot_type, w->ne0), &b))
                    return LW_ERR_OVERFLOW;
                if (b > shared) shared = b;
                /* decode's per-thread copy of the quantized activation row (op_mul_mat) */
                const uint64_t f =
                    (lw__cpu_row_size(mm->vec_dot_type, w->ne0) + sizeof(float) - 1) / sizeof(float);
                if (mm->gemv && f > per_thread) per_thread = f;
            }
            if ((mm->qgemm || mm->qgemm_repack || lw__quant_gemm_own(w->type)) &&
                max_tokens >= LW_QGEMM_MIN_TOKENS) {
                /* the tiled kernels' panel and per-block activation data (quant-gemm.h) */
                if (w->ne0 > INT32_MAX || max_tokens > INT32_MAX) return LW_ERR_OVERFLOW;
                const uint64_t f =
                    (lw__quant_gemm_scratch(w->ne0, max_tokens) + sizeof(float) - 1) / sizeof(float);
                if (f > per_thread) per_thread = f;
            }
        } else if (nd->op == LW_OP_MUL_MAT_ID) {
            uint64_t b, f;
            lw_status st = lw__cpu_moe_scratch(g, nd, max_tokens, &b, &f);
            if (st != LW_OK) return st;
            if (b > shared) shared = b;
            if (f > per_thread) per_thread = f;
        } else if (nd->op == LW_OP_ATTN) {
            uint64_t f = 4 * (uint64_t)nd->ip[3]; /* one-chunk: D floats + 2 D halves, 2 D widened */
            if (max_tokens >= FA_TILE && nd->ip[3] % 16 == 0 && fa_tiled_floats(nd->ip[3]) > f)
                f = fa_tiled_floats(nd->ip[3]);
            const uint64_t classic = 2 * (uint64_t)classic_pad(n_ctx, n_ctx) + (uint64_t)nd->ip[3];
            if (classic > f) f = classic;
            if (f > per_thread) per_thread = f;
        } else if (nd->op == LW_OP_ROPE) {
            if ((uint64_t)nd->ip[1] > per_thread) per_thread = (uint64_t)nd->ip[1];
        } else if (nd->op == LW_OP_GET_ROWS && !lw__cpu_get_rows_supported(g->t[nd->src[0]].type)) {
            return LW_ERR_UNSUPPORTED;
        }
    }
    if (shared > SIZE_MAX || per_thread > SIZE_MAX / 2) return LW_ERR_OVERFLOW;
    *shared_bytes = (size_t)shared;
    *thread_floats = ((size_t)per_thread + 15) & ~(size_t)15; /* keep threads on separate cache lines */
    return LW_OK;
}

static void exec_thread(void *arg, int ith, int nth) {
    lw__exec *ex = arg;
    for (int32_t n = 0; n < ex->g->n_nodes; n++) {
        const lw__node *nd = &ex->g->nodes[n];
        if (ith == 0 && nth > 1) lw__pool_ticket_reset(ex->pool, (n + 1) & 1); /* node n + 1's shares */
        op_table[nd->op](ex, nd, ith, nth);
        lw__pool_barrier(ex->pool);
        /* the observer reads f32 rows (not the expert ids) before the arena is reused */
        if (ex->on_node && nd->dst >= 0 && ex->g->t[nd->dst].type == LW_TYPE_F32) {
            const lw__tensor *t = &ex->g->t[nd->dst];
            if (ith == 0)
                ex->on_node(ex->on_node_user, t->name, t->layer, t->data, t->ne0, lw__cpu_rows(ex, t));
            lw__pool_barrier(ex->pool);
        }
    }
}

void lw__cpu_exec(lw__exec *ex) {
    lw__pool_run(ex->pool, exec_thread, ex);
}
