/* SIMD quantized dots (cpu/quant-dot-simd.h) against their scalar x86-order references (quant-dot-x86.c):
 * every result must have exactly the reference's float bits, on random blocks (any byte pattern, finite
 * fp16 scales from tiny subnormals to 65504) and on rows quantized from random floats, for many lengths and
 * seeds. Prints ns per 4096-long row, SIMD vs scalar (information only). Skips without AVX2/FMA/F16C. */
#include "cpu/quant-dot-simd.h"
#include "test.h"

#include "core/core.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------------------------
 * Random data
 * ------------------------------------------------------------------------------------------------------- */

#include "rng.h"

/* A finite fp16: mostly ordinary magnitudes, sometimes subnormal, zero or near the fp16 maximum. */
static uint16_t rng_h(void) {
    const uint64_t r = rng_u64();
    switch (r % 16) {
    case 0: return (uint16_t)((r >> 8) & 0x83ff); /* zero or subnormal, either sign */
    case 1: return (uint16_t)(0x7800 | ((r >> 8) & 0x83ff)); /* 32768 .. 65504 */
    default: return lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)((r >> 8) % 14) - 10));
    }
}

static void rng_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_u64();
}

static void put_h(uint8_t *p, uint16_t h) { memcpy(p, &h, 2); }

/* ---------------------------------------------------------------------------------------------------------
 * Cases: each SIMD kernel with its reference and where its weight blocks keep their fp16 scales
 * ------------------------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;   /* for messages                                    */
    uint32_t type;      /* weight type                                     */
    uint32_t act;       /* activation type (Q8_0 or Q8_K)                  */
    lw__vec_dot_fn ref; /* scalar x86-order reference                      */
    int h0, h1;         /* byte offsets of fp16 scales in a block (-1: no) */
} dcase;

static const dcase cases[] = {
    {"q8_0", LW_TYPE_Q8_0, LW_TYPE_Q8_0, lw__vec_dot_q8_0_q8_0_x86, 0, -1},
    {"q5_0", LW_TYPE_Q5_0, LW_TYPE_Q8_0, lw__vec_dot_q5_0_q8_0_x86, 0, -1},
    {"q4_0 repack", LW_TYPE_Q4_0, LW_TYPE_Q8_0, lw__vec_dot_q4_0_q8_0_x86_repack, 0, -1},
    {"q4_0 generic", LW_TYPE_Q4_0, LW_TYPE_Q8_0, lw__vec_dot_q4_0_q8_0_ref, 0, -1}, /* plain (tied) tables */
    {"q4_K", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86, 0, 2},
    {"q4_K repack", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86_repack, 0, 2},
    {"q4_K repack gemm", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86_repack_gemm, 0, 2},
    {"q5_K", LW_TYPE_Q5_K, LW_TYPE_Q8_K, lw__vec_dot_q5_K_q8_K_x86, 0, 2},
    {"q6_K", LW_TYPE_Q6_K, LW_TYPE_Q8_K, lw__vec_dot_q6_K_q8_K_x86, 208, -1},
    {"iq4_nl repack", LW_TYPE_IQ4_NL, LW_TYPE_Q8_0, lw__vec_dot_iq4_nl_q8_0_x86_repack, 0, -1},
    {"iq4_nl generic", LW_TYPE_IQ4_NL, LW_TYPE_Q8_0, lw__vec_dot_iq4_nl_q8_0_ref, 0, -1},
    {"mxfp4 repack", LW_TYPE_MXFP4, LW_TYPE_Q8_0, lw__vec_dot_mxfp4_q8_0_x86_repack, -1, -1},
    {"q4_1", LW_TYPE_Q4_1, LW_TYPE_Q8_1, lw__vec_dot_q4_1_q8_1_x86, 0, 2},
    {"q5_1", LW_TYPE_Q5_1, LW_TYPE_Q8_1, lw__vec_dot_q5_1_q8_1_x86, 0, 2},
    {"q2_K", LW_TYPE_Q2_K, LW_TYPE_Q8_K, lw__vec_dot_q2_K_q8_K_x86, 80, 82},
    {"q2_K repack", LW_TYPE_Q2_K, LW_TYPE_Q8_K, lw__vec_dot_q2_K_q8_K_x86_repack, 80, 82},
    {"q2_K repack gemm", LW_TYPE_Q2_K, LW_TYPE_Q8_K, lw__vec_dot_q2_K_q8_K_x86_repack_gemm, 80, 82},
    {"q3_K", LW_TYPE_Q3_K, LW_TYPE_Q8_K, lw__vec_dot_q3_K_q8_K_x86, 108, -1},
    {"iq4_xs", LW_TYPE_IQ4_XS, LW_TYPE_Q8_K, lw__vec_dot_iq4_xs_q8_K_x86, 0, -1},
};

static size_t block_bytes(uint32_t type) { return lw_type_get(type)->type_size; }
static int64_t block_elems(uint32_t type) { return lw_type_get(type)->block_size; }

/* Random weight blocks: any bytes, then finite fp16 scales. */
static void random_weights(const dcase *c, uint8_t *w, int64_t nb) {
    const size_t bs = block_bytes(c->type);
    rng_bytes(w, (size_t)nb * bs);
    for (int64_t b = 0; b < nb; b++) {
        if (c->h0 >= 0) put_h(w + (size_t)b * bs + c->h0, rng_h());
        if (c->h1 >= 0) put_h(w + (size_t)b * bs + c->h1, rng_h());
    }
}

/* Random activation blocks (Q8_0/Q8_1: any quants, fp16 scales; Q8_K: quants in -127..127 as ggml's quantizer
 * makes them, a float scale, bsums consistent with the quants). */
static void random_act(uint32_t act, uint8_t *a, int64_t n) {
    if (act == LW_TYPE_Q8_0) {
        lw__block_q8_0 *y = (lw__block_q8_0 *)a;
        for (int64_t b = 0; b < n / 32; b++) {
            y[b].d = rng_h();
            rng_bytes((uint8_t *)y[b].qs, 32);
        }
        return;
    }
    if (act == LW_TYPE_Q8_1) {
        lw__block_q8_1 *y = (lw__block_q8_1 *)a;
        for (int64_t b = 0; b < n / 32; b++) {
            y[b].d = rng_h();
            y[b].s = rng_h();
            rng_bytes((uint8_t *)y[b].qs, 32);
        }
        return;
    }
    lw__block_q8_K *y = (lw__block_q8_K *)a;
    for (int64_t b = 0; b < n / LW_QK_K; b++) {
        y[b].d = rng_f() * ldexpf(1.0f, -(int)(rng_u64() % 12));
        for (int j = 0; j < LW_QK_K; j++) y[b].qs[j] = (int8_t)((int)(rng_u64() % 255) - 127);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)s;
        }
    }
}

static size_t act_bytes(uint32_t act, int64_t n) {
    if (act == LW_TYPE_Q8_0) return (size_t)(n / 32) * sizeof(lw__block_q8_0);
    if (act == LW_TYPE_Q8_1) return (size_t)(n / 32) * sizeof(lw__block_q8_1);
    return (size_t)(n / LW_QK_K) * sizeof(lw__block_q8_K);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per call of f on a 4096-long row (best of a few timed runs over 16 different rows). */
static double time_dot(lw__vec_dot_fn f, const uint8_t *w, size_t wrow, const uint8_t *a, int reps) {
    volatile float sink = 0.0f;
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        const double t0 = now_ns();
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < 16; i++) sink = sink + f(4096, w + (size_t)i * wrow, a);
        const double dt = (now_ns() - t0) / (16.0 * reps);
        best = dt < best ? dt : best;
    }
    (void)sink;
    return best;
}

int main(void) {
    if (!lw__quant_dot_avx2(lw__vec_dot_q8_0_q8_0_x86)) test_skip("no AVX2/FMA/F16C on this CPU (or not x86-64): nothing to compare");

    /* the Q8_0 activation quantizer: the same bytes, specials (NaN, infinities, zeros, huge) included */
    {
        const lw__from_float_fn q = lw__quant_act_avx2(lw__quantize_row_q8_0_x86);
        CHECK_MSG(q != NULL, "no AVX2 Q8_0 activation quantizer");
        enum { NQ = 32 * 300 };
        static float xq[NQ];
        static uint8_t q1[NQ / 32 * 34], q2[NQ / 32 * 34];
        rng_state = 4242u;
        for (int i = 0; i < NQ; i++) {
            const uint64_t r = rng_u64();
            xq[i] = rng_f() * ldexpf(1.0f, (int)(r % 40) - 20);
            if (i / 32 % 7 == 3 && r % 5 == 0)
                xq[i] = (float[]){NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3e38f}[r / 5 % 6];
            if (i / 32 == 9) xq[i] = 0.0f;                                            /* amax 0 */
            if (i / 32 == 10) xq[i] = (i % 32 == 0) ? 127.0f : (float)(i % 9) + 0.5f; /* ties */
        }
        if (q) {
            q(xq, q1, NQ);
            lw__quantize_row_q8_0_x86(xq, q2, NQ);
            CHECK_MSG(memcmp(q1, q2, sizeof q1) == 0,
                      "AVX2 Q8_0 activation quantizer differs from the x86 one");
        }
    }

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const dcase *dc = &cases[c];
        const lw__vec_dot_fn simd = lw__quant_dot_avx2(dc->ref);
        CHECK_MSG(simd != NULL && simd != dc->ref, "%s: no AVX2 version", dc->name);
        if (!simd) continue;
        const int64_t be = block_elems(dc->type);
        int rows = 0, same = 0;
        /* lengths 1..40 blocks (and 4096 / 11008 wide rows); random bytes and quantized floats */
        for (int seed = 0; seed < 120; seed++) {
            rng_state = 1000u * c + (uint64_t)seed;
            int64_t nblk = seed < 100 ? 1 + (int64_t)(rng_u64() % 40) : (seed % 2 ? 4096 : 11008) / be;
            const int64_t n = nblk * be;
            uint8_t *w = malloc((size_t)nblk * block_bytes(dc->type));
            uint8_t *a = malloc(act_bytes(dc->act, n));
            float *xf = malloc((size_t)n * sizeof(float));
            const lw__quant_traits_t *tr = lw__quant_traits(dc->type);
            if (seed % 3 == 2 && tr->quantize && !tr->requires_imatrix) { /* realistic rows: both sides quantized from random floats */
                for (int64_t i = 0; i < n; i++) xf[i] = rng_f() * (1.0f + 4.0f * (float)(i % 7 == 0));
                CHECK(lw__quantize(dc->type, xf, w, 1, n, NULL) == LW_OK);
                for (int64_t i = 0; i < n; i++) xf[i] = rng_f() * 3.0f;
                lw__quant_act_x86(dc->act)(xf, a, n);
            } else {
                random_weights(dc, w, nblk);
                random_act(dc->act, a, n);
            }
            const float r = dc->ref(n, w, a), s = simd(n, w, a);
            const int eq = memcmp(&r, &s, sizeof r) == 0;
            CHECK_MSG(eq, "%s: seed %d n %lld: simd %.9g != reference %.9g", dc->name, seed, (long long)n, s, r);
            same += eq;
            rows++;
            free(w);
            free(a);
            free(xf);
        }
        /* speed, 4096-long rows: information only */
        rng_state = 99u + c;
        const size_t wrow = (size_t)(4096 / be) * block_bytes(dc->type);
        uint8_t *w = malloc(16 * wrow), *a = malloc(act_bytes(dc->act, 4096));
        random_weights(dc, w, 16 * (4096 / be));
        random_act(dc->act, a, 4096);
        const double ts = time_dot(dc->ref, w, wrow, a, 8), tv = time_dot(simd, w, wrow, a, 64);
        printf("%-18s %d/%d rows bit-identical; 4096-row dot: scalar %8.1f ns, avx2 %7.1f ns (x%.1f)\n", dc->name,
               same, rows, ts, tv, ts / tv);
        free(w);
        free(a);
    }

    /* the selector: LW_CPU_KERNELS=scalar keeps the reference; otherwise the SIMD twin; NULL stays NULL */
    CHECK(lw__quant_dot_fast(NULL) == NULL);
    CHECK(lw__quant_dot_avx2(lw__vec_dot_iq2_xxs_q8_K_x86) == NULL); /* no AVX2 version (yet) */
    CHECK(lw__quant_dot_fast(lw__vec_dot_iq2_xxs_q8_K_x86) == lw__vec_dot_iq2_xxs_q8_K_x86);
    const char *old = getenv("LW_CPU_KERNELS");
    unsetenv("LW_CPU_KERNELS");
    CHECK(lw__quant_dot_fast(lw__vec_dot_q6_K_q8_K_x86) == lw__quant_dot_avx2(lw__vec_dot_q6_K_q8_K_x86));
    setenv("LW_CPU_KERNELS", "scalar", 1);
    CHECK(lw__quant_dot_fast(lw__vec_dot_q6_K_q8_K_x86) == lw__vec_dot_q6_K_q8_K_x86);
    if (old) setenv("LW_CPU_KERNELS", old, 1);
    else unsetenv("LW_CPU_KERNELS");
    return test_summary("test-quant-dot-simd");
}
