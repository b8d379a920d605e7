/* Wasm entry points that check the simd128 quantized dots (src/cpu/quant-dot-wasm.c) against the scalar
 * references they replace, inside the wasm module where both are compiled (the native test suite does not
 * run under wasm): random blocks (any byte pattern, finite fp16 scales from subnormals to 65504) and rows
 * quantized from random floats, many lengths and seeds; every result must have the reference's float bits.
 * Also times both on 4096-long rows (information only) and checks the selector. Used by
 * tests/web/simd128.test.mjs; needs no GPU. */
#include "cpu/engine-ops.h"
#include "cpu/quant-dot-simd.h"
#include "cpu/quant-gemm.h"
#include "cpu/quant-gemv.h"

#include "core/core.h"

#include <emscripten.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Random data (splitmix64)
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t rng_state = 1;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_f(void) { return (float)((double)(rng_u64() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

/* A finite fp16: mostly ordinary magnitudes, sometimes zero/subnormal or near 65504. */
static uint16_t rng_h(void) {
    const uint64_t r = rng_u64();
    switch (r % 16) {
    case 0: return (uint16_t)((r >> 8) & 0x83ff);            /* zero or subnormal, either sign */
    case 1: return (uint16_t)(0x7800 | ((r >> 8) & 0x83ff)); /* 32768 .. 65504, either sign    */
    default: return lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)((r >> 8) % 14) - 10));
    }
}

static void rng_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_u64();
}

static void put_h(uint8_t *p, uint16_t h) { memcpy(p, &h, 2); }

/* ---------------------------------------------------------------------------------------------------------
 * Cases: each reference with a simd128 twin, and where its weight blocks keep fp16 scales
 * ------------------------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;   /* for messages                                      */
    uint32_t type;      /* weight type                                       */
    uint32_t act;       /* activation type (Q8_0, Q8_1 or Q8_K)              */
    lw__vec_dot_fn ref; /* scalar reference (x86 order or generic)           */
    int h0, h1;         /* byte offsets of fp16 scales in a block (-1: none) */
} scase;

static const scase cases[] = {
    {"q8_0", LW_TYPE_Q8_0, LW_TYPE_Q8_0, lw__vec_dot_q8_0_q8_0_x86, 0, -1},
    {"q4_1", LW_TYPE_Q4_1, LW_TYPE_Q8_1, lw__vec_dot_q4_1_q8_1_x86, 0, 2},
    {"q5_0", LW_TYPE_Q5_0, LW_TYPE_Q8_0, lw__vec_dot_q5_0_q8_0_x86, 0, -1},
    {"q5_1", LW_TYPE_Q5_1, LW_TYPE_Q8_1, lw__vec_dot_q5_1_q8_1_x86, 0, 2},
    {"q4_0 repack", LW_TYPE_Q4_0, LW_TYPE_Q8_0, lw__vec_dot_q4_0_q8_0_x86_repack, 0, -1},
    {"q4_0 generic", LW_TYPE_Q4_0, LW_TYPE_Q8_0, lw__vec_dot_q4_0_q8_0_ref, 0, -1},
    {"iq4_nl repack", LW_TYPE_IQ4_NL, LW_TYPE_Q8_0, lw__vec_dot_iq4_nl_q8_0_x86_repack, 0, -1},
    {"iq4_nl generic", LW_TYPE_IQ4_NL, LW_TYPE_Q8_0, lw__vec_dot_iq4_nl_q8_0_ref, 0, -1},
    {"mxfp4 repack", LW_TYPE_MXFP4, LW_TYPE_Q8_0, lw__vec_dot_mxfp4_q8_0_x86_repack, -1, -1},
    {"mxfp4 generic", LW_TYPE_MXFP4, LW_TYPE_Q8_0, lw__vec_dot_mxfp4_q8_0_ref, -1, -1},
    {"q2_K", LW_TYPE_Q2_K, LW_TYPE_Q8_K, lw__vec_dot_q2_K_q8_K_x86, 80, 82},
    {"q2_K repack", LW_TYPE_Q2_K, LW_TYPE_Q8_K, lw__vec_dot_q2_K_q8_K_x86_repack, 80, 82},
    {"q2_K repack gemm", LW_TYPE_Q2_K, LW_TYPE_Q8_K, lw__vec_dot_q2_K_q8_K_x86_repack_gemm, 80, 82},
    {"q3_K", LW_TYPE_Q3_K, LW_TYPE_Q8_K, lw__vec_dot_q3_K_q8_K_x86, 108, -1},
    {"q4_K", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86, 0, 2},
    {"q4_K repack", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86_repack, 0, 2},
    {"q4_K repack gemm", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86_repack_gemm, 0, 2},
    {"q5_K", LW_TYPE_Q5_K, LW_TYPE_Q8_K, lw__vec_dot_q5_K_q8_K_x86, 0, 2},
    {"q6_K", LW_TYPE_Q6_K, LW_TYPE_Q8_K, lw__vec_dot_q6_K_q8_K_x86, 208, -1},
    {"iq4_xs", LW_TYPE_IQ4_XS, LW_TYPE_Q8_K, lw__vec_dot_iq4_xs_q8_K_x86, 0, -1},
    {"iq4_xs generic", LW_TYPE_IQ4_XS, LW_TYPE_Q8_K, lw__vec_dot_iq4_xs_q8_K_ref, 0, -1},
    {"iq2_xxs generic", LW_TYPE_IQ2_XXS, LW_TYPE_Q8_K, lw__vec_dot_iq2_xxs_q8_K_ref, 0, -1},
    {"iq2_xs generic", LW_TYPE_IQ2_XS, LW_TYPE_Q8_K, lw__vec_dot_iq2_xs_q8_K_ref, 0, -1},
    {"iq2_s generic", LW_TYPE_IQ2_S, LW_TYPE_Q8_K, lw__vec_dot_iq2_s_q8_K_ref, 0, -1},
    {"iq3_xxs generic", LW_TYPE_IQ3_XXS, LW_TYPE_Q8_K, lw__vec_dot_iq3_xxs_q8_K_ref, 0, -1},
    {"iq3_s generic", LW_TYPE_IQ3_S, LW_TYPE_Q8_K, lw__vec_dot_iq3_s_q8_K_ref, 0, -1},
    {"iq1_s generic", LW_TYPE_IQ1_S, LW_TYPE_Q8_K, lw__vec_dot_iq1_s_q8_K_ref, 0, -1},
    {"iq1_m generic", LW_TYPE_IQ1_M, LW_TYPE_Q8_K, lw__vec_dot_iq1_m_q8_K_ref, -1, -1}, /* d: top nibbles of scales */
    {"tq1_0 generic", LW_TYPE_TQ1_0, LW_TYPE_Q8_K, lw__vec_dot_tq1_0_q8_K_ref, 52, -1},
    {"tq2_0 generic", LW_TYPE_TQ2_0, LW_TYPE_Q8_K, lw__vec_dot_tq2_0_q8_K_ref, 64, -1},
    {"q2_0 generic", LW_TYPE_Q2_0, LW_TYPE_Q8_0, lw__vec_dot_q2_0_q8_0_ref, 0, -1},
    {"q1_0 generic", LW_TYPE_Q1_0, LW_TYPE_Q8_0, lw__vec_dot_q1_0_q8_0_ref, 0, -1},
    {"nvfp4 generic", LW_TYPE_NVFP4, LW_TYPE_Q8_0, lw__vec_dot_nvfp4_q8_0_ref, -1, -1}, /* UE4M3 scales: all finite */
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static size_t block_bytes(uint32_t type) { return lw_type_get(type)->type_size; }
static int64_t block_elems(uint32_t type) { return lw_type_get(type)->block_size; }

/* Random weight blocks: any bytes, then finite fp16 scales. */
static void random_weights(const scase *c, uint8_t *w, int64_t nb) {
    const size_t bs = block_bytes(c->type);
    rng_bytes(w, (size_t)nb * bs);
    for (int64_t b = 0; b < nb; b++) {
        if (c->h0 >= 0) put_h(w + (size_t)b * bs + c->h0, rng_h());
        if (c->h1 >= 0) put_h(w + (size_t)b * bs + c->h1, rng_h());
        /* IQ1_M keeps d in the top nibbles of its scales: clear the top exponent bit (bit 14 = bit 6 of the
         * last scales byte), so d is finite */
        if (c->type == LW_TYPE_IQ1_M) w[(size_t)b * bs + offsetof(lw__block_iq1_m, scales) + 7] &= 0xbf;
    }
}

/* Random activation blocks (Q8_0/Q8_1: any quants, fp16 scales; Q8_K: quants -128..127, a float scale
 * anywhere from tiny to large, bsums consistent with the quants). */
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
        const uint64_t r = rng_u64();
        y[b].d = rng_f() * ldexpf(1.0f, (int)(r % 40) - 30);
        rng_bytes((uint8_t *)y[b].qs, LW_QK_K);
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

/* ---------------------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------------------- */

EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_count(void) { return N_CASES; }

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_simd_name(int i) { return i >= 0 && i < N_CASES ? cases[i].name : ""; }

/* Whether the library was built with simd128 (1: it has the kernels) or not (0). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_built(void) { return lw__quant_dot_wasm(lw__vec_dot_q8_0_q8_0_x86) != NULL; }

/* The rare case of the emulated fmaf (quant-dot-wasm.c): x*y + z rounded to double lands exactly halfway
 * between two floats while the exact sum is above it, so rounding the double to float again (ties to even)
 * would be 1 ulp low. Two Q8_0 blocks with only lane 0 non-zero: block 0 sets acc = 2^22 (ulp 0.5), block 1
 * adds d * L = 2^-2 * (1 + t), 0 < t < 2^-29, found by search over fp16 significands s1, s2 and the lane sum
 * L (s1 * s2 * L = 2^m + delta, 0 < delta < 2^(m - 29)). The exact fma is 2^22 + 0.5; the double sum is
 * 2^22 + 0.25. out[0] = reference, out[1] = simd128, out[2] = the double sum rounded to float. Returns 0
 * when such blocks were built, -1 otherwise. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_halfway(float *out) {
    for (int m = 30; m <= 37; m++)
        for (uint32_t s1 = 1024; s1 < 2048; s1++)
            for (uint32_t s2 = s1; s2 < 2048; s2++) {
                const uint64_t p = (uint64_t)s1 * s2, big = (uint64_t)1 << m;
                const uint64_t L = (big + p - 1) / p, delta = p * L - big;
                if (delta == 0 || delta >= ((uint64_t)1 << (m - 29)) || L > 48000) continue;
                /* d = s1 * 2^(E1 - 10) * s2 * 2^(E2 - 10) and d * L = 2^-2 * (1 + t): E1 + E2 = 18 - m */
                const int e1 = -7, e2 = 18 - m - e1;
                lw__block_q8_0 x[2], y[2];
                memset(x, 0, sizeof x);
                memset(y, 0, sizeof y);
                x[0].d = y[0].d = lw__fp32_to_fp16(2048.0f);
                x[0].qs[0] = y[0].qs[0] = 1;
                x[1].d = lw__fp32_to_fp16(ldexpf((float)s1, e1 - 10));
                y[1].d = lw__fp32_to_fp16(ldexpf((float)s2, e2 - 10));
                /* lane 0 = elements 0..3: 127 * q + r, q <= 378 */
                const int q = (int)(L / 127), r = (int)(L % 127);
                const int y0 = q < 127 ? q : 127, y1 = q - y0 < 127 ? q - y0 : 127, y2 = q - y0 - y1;
                const int8_t xs[4] = {127, 127, 127, 1}, ys[4] = {(int8_t)y0, (int8_t)y1, (int8_t)y2, (int8_t)r};
                memcpy(x[1].qs, xs, 4);
                memcpy(y[1].qs, ys, 4);
                const float d = lw__fp16_to_fp32(x[1].d) * lw__fp16_to_fp32(y[1].d);
                out[0] = lw__vec_dot_q8_0_q8_0_x86(64, x, y);
                const lw__vec_dot_fn simd = lw__quant_dot_wasm(lw__vec_dot_q8_0_q8_0_x86);
                out[1] = simd ? simd(64, x, y) : NAN;
                out[2] = (float)((double)d * (double)L + 4194304.0);
                return 0;
            }
    return -1;
}

/* Runs case i on `seeds` rows (lengths 1..40 blocks, plus 4096- and 11008-wide rows; every third row
 * quantized from random floats where the format quantizes without an importance matrix). Returns the number
 * of rows whose simd128 result differs in any bit from the reference (the first few are printed), -1 when the
 * case has no simd128 twin, -2 when memory ran out. *rows_out gets the number of rows compared. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_check(int i, int seeds, int *rows_out) {
    if (i < 0 || i >= N_CASES) return -1;
    const scase *c = &cases[i];
    const lw__vec_dot_fn simd = lw__quant_dot_wasm(c->ref);
    if (!simd || simd == c->ref) return -1;
    const int64_t be = block_elems(c->type);
    int bad = 0, rows = 0;
    for (int seed = 0; seed < seeds; seed++) {
        rng_state = 7919u * (uint64_t)i + (uint64_t)seed;
        const int64_t nblk = seed % 10 == 9 ? (seed % 20 == 9 ? 4096 : 11008) / be : 1 + (int64_t)(rng_u64() % 40);
        const int64_t n = nblk * be;
        uint8_t *w = malloc((size_t)nblk * block_bytes(c->type));
        uint8_t *a = malloc(act_bytes(c->act, n));
        float *xf = malloc((size_t)n * sizeof(float));
        if (!w || !a || !xf) {
            free(w);
            free(a);
            free(xf);
            return -2;
        }
        const lw__quant_traits_t *tr = lw__quant_traits(c->type);
        /* the IQ2/IQ3 grid searches are slow: those formats get random blocks only (every grid index and sign
         * pattern is valid) */
        const int grid = c->type == LW_TYPE_IQ2_XXS || c->type == LW_TYPE_IQ2_XS || c->type == LW_TYPE_IQ2_S ||
                         c->type == LW_TYPE_IQ3_XXS || c->type == LW_TYPE_IQ3_S || c->type == LW_TYPE_IQ1_S ||
                         c->type == LW_TYPE_IQ1_M;
        if (seed % 3 == 2 && !grid && tr->quantize && !tr->requires_imatrix) { /* realistic rows: both sides quantized */
            for (int64_t j = 0; j < n; j++) xf[j] = rng_f() * (1.0f + 4.0f * (float)(j % 7 == 0));
            if (lw__quantize(c->type, xf, w, 1, n, NULL) != LW_OK) random_weights(c, w, nblk);
            for (int64_t j = 0; j < n; j++) xf[j] = rng_f() * 3.0f;
            lw__quant_act_x86(c->act)(xf, a, n);
        } else {
            random_weights(c, w, nblk);
            random_act(c->act, a, n);
        }
        const float r = c->ref(n, w, a), s = simd(n, w, a);
        if (memcmp(&r, &s, sizeof r) != 0) {
            if (bad < 3) printf("simd128 %s: seed %d n %lld: simd %.9g != reference %.9g\n", c->name, seed, (long long)n, s, r);
            bad++;
        }
        rows++;
        free(w);
        free(a);
        free(xf);
    }
    if (rows_out) *rows_out = rows;
    return bad;
}

/* ns per dot of a 4096-long row for case i, simd128 (simd = 1) or the reference (0): best of 3 runs of
 * `reps` passes over 16 rows. Negative on failure. */
EMSCRIPTEN_KEEPALIVE double lw_wasm_simd_bench(int i, int simd, int reps) {
    if (i < 0 || i >= N_CASES || reps < 1) return -1;
    const scase *c = &cases[i];
    const lw__vec_dot_fn f = simd ? lw__quant_dot_wasm(c->ref) : c->ref;
    if (!f) return -1;
    const int64_t be = block_elems(c->type);
    const size_t wrow = (size_t)(4096 / be) * block_bytes(c->type);
    uint8_t *w = malloc(16 * wrow), *a = malloc(act_bytes(c->act, 4096));
    if (!w || !a) {
        free(w);
        free(a);
        return -2;
    }
    rng_state = 99u + (uint64_t)i;
    random_weights(c, w, 16 * (4096 / be));
    random_act(c->act, a, 4096);
    volatile float sink = 0.0f;
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        const double t0 = emscripten_get_now();
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < 16; k++) sink = sink + f(4096, w + (size_t)k * wrow, a);
        const double dt = (emscripten_get_now() - t0) * 1e6 / (16.0 * reps);
        best = dt < best ? dt : best;
    }
    (void)sink;
    free(w);
    free(a);
    return best;
}

/* The selector: every case's reference maps to its simd128 twin through lw__quant_dot_fast, except with
 * LW_CPU_KERNELS=scalar (the reference itself); NULL stays NULL; a reference without a twin stays itself.
 * Returns the number of failed checks. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_selector(void) {
    int fails = 0;
    const char *old = getenv("LW_CPU_KERNELS");
    unsetenv("LW_CPU_KERNELS");
    fails += lw__quant_dot_fast(NULL) != NULL;
    fails += lw__quant_dot_fast(lw__vec_dot_iq2_xxs_q8_K_x86) != lw__vec_dot_iq2_xxs_q8_K_x86; /* no twin (not used here) */
    for (int i = 0; i < N_CASES; i++) {
        const lw__vec_dot_fn s = lw__quant_dot_wasm(cases[i].ref);
        fails += s == NULL || lw__quant_dot_fast(cases[i].ref) != s;
    }
    setenv("LW_CPU_KERNELS", "scalar", 1);
    for (int i = 0; i < N_CASES; i++) fails += lw__quant_dot_fast(cases[i].ref) != cases[i].ref;
    if (old) setenv("LW_CPU_KERNELS", old, 1);
    else unsetenv("LW_CPU_KERNELS");
    return fails;
}

/* ---------------------------------------------------------------------------------------------------------
 * f32 / f16 dots of the engine (engine-wasm.c) against engine-ops.c's references
 * ------------------------------------------------------------------------------------------------------- */

/* kind 0: dot_f32, 1: dot_f32_gemm, 2: dot_f16, 3: dot_f16_gemm. */
static void f_pair(int kind, lw__vec_dot_fn *ref, lw__vec_dot_fn *simd) {
    const lw__cpu_kernels *k = lw__cpu_kernels_wasm();
    static const lw__vec_dot_fn refs[4] = {lw__cpu_dot_f32, lw__cpu_dot_f32_gemm, lw__cpu_dot_f16, lw__cpu_dot_f16_gemm};
    *ref = refs[kind & 3];
    *simd = !k ? NULL : kind == 0 ? k->dot_f32 : kind == 1 ? k->dot_f32_gemm : kind == 2 ? k->dot_f16 : k->dot_f16_gemm;
}

/* Random rows: f32 values of mixed magnitudes (incl. zeros and subnormals), f16 any finite bit pattern;
 * lengths 1..600 (multiples of 16 for the gemm orders) and 4096. Returns rows that differ, -1 without a
 * simd128 version; *rows_out = rows compared. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_check_f(int kind, int seeds, int *rows_out) {
    lw__vec_dot_fn ref, simd;
    f_pair(kind, &ref, &simd);
    if (!simd || simd == ref) return -1;
    const int f16 = kind >= 2, gemm = kind % 2;
    int bad = 0, rows = 0;
    for (int seed = 0; seed < seeds; seed++) {
        rng_state = 31337u * (uint64_t)(kind + 1) + (uint64_t)seed;
        int64_t n = seed % 10 == 9 ? 4096 : 1 + (int64_t)(rng_u64() % 600);
        if (gemm) n = (n + 15) / 16 * 16;
        void *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        if (!x || !y) {
            free(x);
            free(y);
            return -2;
        }
        for (int64_t i = 0; i < n; i++) {
            if (f16) {
                uint16_t hx = (uint16_t)rng_u64(), hy = (uint16_t)rng_u64();
                if ((hx & 0x7c00) == 0x7c00) hx &= 0xbfff; /* finite */
                if ((hy & 0x7c00) == 0x7c00) hy &= 0xbfff;
                ((uint16_t *)x)[i] = hx;
                ((uint16_t *)y)[i] = hy;
            } else {
                const uint64_t r = rng_u64();
                ((float *)x)[i] = r % 17 == 0 ? 0.0f : rng_f() * ldexpf(1.0f, (int)(r % 64) - 40);
                ((float *)y)[i] = r % 23 == 0 ? ldexpf(rng_f(), -130) : rng_f() * ldexpf(1.0f, (int)((r >> 8) % 32) - 16);
            }
        }
        const float r = ref(n, x, y), s = simd(n, x, y);
        if (memcmp(&r, &s, sizeof r) != 0) {
            if (bad < 3) printf("simd128 f%s%s: seed %d n %lld: simd %.9g != reference %.9g\n", f16 ? "16" : "32",
                                gemm ? " gemm" : "", seed, (long long)n, s, r);
            bad++;
        }
        rows++;
        free(x);
        free(y);
    }
    if (rows_out) *rows_out = rows;
    return bad;
}

/* ns per 4096-long dot, simd128 (1) or reference (0). */
EMSCRIPTEN_KEEPALIVE double lw_wasm_simd_bench_f(int kind, int simd, int reps) {
    lw__vec_dot_fn ref, sf;
    f_pair(kind, &ref, &sf);
    const lw__vec_dot_fn f = simd ? sf : ref;
    if (!f || reps < 1) return -1;
    float *x = malloc(4096 * 4 * 16), *y = malloc(4096 * 4);
    if (!x || !y) {
        free(x);
        free(y);
        return -2;
    }
    rng_state = 5;
    for (int i = 0; i < 4096 * 16; i++) x[i] = rng_f();
    for (int i = 0; i < 4096; i++) y[i] = rng_f();
    if (kind >= 2) { /* f16 rows in the same buffers */
        for (int i = 0; i < 4096 * 16; i++) ((uint16_t *)x)[i] = lw__fp32_to_fp16(x[i]);
        for (int i = 0; i < 4096; i++) ((uint16_t *)y)[i] = lw__fp32_to_fp16(y[i]);
    }
    const size_t row = kind >= 2 ? 4096 * 2 : 4096 * 4;
    volatile float sink = 0.0f;
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        const double t0 = emscripten_get_now();
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < 16; k++) sink = sink + f(4096, (const uint8_t *)x + (size_t)k * row, y);
        const double dt = (emscripten_get_now() - t0) * 1e6 / (16.0 * reps);
        best = dt < best ? dt : best;
    }
    (void)sink;
    free(x);
    free(y);
    return best;
}

/* For speed comparisons: makes this module instance choose the scalar references (LW_CPU_KERNELS=scalar);
 * must run before anything picks the kernels. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_simd_force_scalar(void) { setenv("LW_CPU_KERNELS", "scalar", 1); }

/* Name of the f32/f16 kernel set the engine runs in this instance ("wasm-simd128" or "scalar"). */
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_simd_engine_kernels(void) { return lw__cpu_kernels_best()->name; }

/* ---------------------------------------------------------------------------------------------------------
 * The fast decode kernels (quant-gemv-wasm.c) and the prompt kernels made from them (quant-gemm.h own order)
 * ------------------------------------------------------------------------------------------------------- */

/* Weight types with both: Q4_0, Q8_0, Q4_K, Q6_K; the case of cases[] giving each its exact reference. */
static const char *const fast_cases[] = {"q4_0 repack", "q8_0", "q4_K repack", "q6_K"};

static const scase *case_named(const char *name) {
    for (int i = 0; i < N_CASES; i++)
        if (!strcmp(cases[i].name, name)) return &cases[i];
    return NULL;
}

/* Scales of ordinary magnitude and Q8 quants off -128 (as the quantizers write them; the exact references'
 * sign tricks assume it), for the fast kernels' bound below: subnormal and huge scales are the exact
 * kernels' tests' business. a: n32 Q8_0 blocks (Q8_K activations are left as random_act makes them). */
static void ordinary(const scase *c, uint8_t *w, int64_t nb, uint8_t *a, int64_t n32) {
    const size_t bs = block_bytes(c->type);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + (size_t)b * bs;
        if (c->h0 >= 0) put_h(p + c->h0, lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)(rng_u64() % 8) - 6)));
        if (c->h1 >= 0) put_h(p + c->h1, lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)(rng_u64() % 8) - 6)));
        if (c->type == LW_TYPE_Q8_0)
            for (int i = 0; i < 32; i++)
                if (((lw__block_q8_0 *)p)->qs[i] == -128) ((lw__block_q8_0 *)p)->qs[i] = -127;
    }
    if (c->act != LW_TYPE_Q8_0) return;
    lw__block_q8_0 *y = (lw__block_q8_0 *)a;
    for (int64_t b = 0; b < n32; b++) {
        y[b].d = lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)(rng_u64() % 8) - 6));
        for (int i = 0; i < 32; i++)
            if (y[b].qs[i] == -128) y[b].qs[i] = -127;
    }
}

/* Kernel set `kind` (index into fast_cases) on random rows: every decode result within 1e-5 (super-blocks:
 * 1e-4, below) of the sum of the reference's |block products| from the exact reference (float rounding of its own order is ~1e-7 of
 * that; one wrong integer in a block moves it far more), and every prompt result (2-7 tokens) with the bits
 * of the decode kernel for that token. Returns the failures; out[0] the results compared, out[1] the prompt
 * results that differed from the decode ones, -1 where a kernel is missing. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_simd_check_fast(int kind, int seeds, int *out) {
    if (kind < 0 || kind >= (int)(sizeof fast_cases / sizeof fast_cases[0])) return -1;
    const scase *c = case_named(fast_cases[kind]);
    const lw__quant_gemv_fn gemv = c ? lw__quant_gemv_isa(c->type, LW_GEMV_SIMD128) : NULL;
    const lw__quant_gemm_fn gemm = c ? lw__quant_gemm_own_isa(c->type, LW_QGEMM_SIMD128) : NULL;
    if (!gemv || !gemm) return -1;
    const int64_t be = block_elems(c->type);
    const size_t bs = block_bytes(c->type);
    /* the super-block kernels turn each lane's integer sum of a whole super-block into f32 before scaling
     * it: random bytes make those lanes far larger than the block's result (they cancel), and their f32
     * rounding (~2^-24 of the lane) reached 1.7e-5 of the sum of |block products| (q6_K) */
    const double tol = be == 32 ? 1e-5 : 1e-4;
    int bad = 0, compared = 0, differ = 0;
    for (int seed = 0; seed < seeds; seed++) {
        rng_state = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
        const int64_t m = 1 + seed % 11, nt = 2 + seed % 6;
        const int64_t nb = seed % 5 == 4 ? 4096 / be : 1 + seed % 40; /* every 5th: a 4096-wide row */
        const int64_t k = nb * be;
        const size_t as = act_bytes(c->act, k);
        uint8_t *w = malloc((size_t)m * (size_t)nb * bs), *a = malloc((size_t)nt * as);
        float *cg = malloc(sizeof(float) * (size_t)(m * nt)), *cv = malloc(sizeof(float) * (size_t)m);
        void *scratch = aligned_alloc(64, (lw__quant_gemm_scratch(k, nt) + 63) / 64 * 64);
        if (!w || !a || !cg || !cv || !scratch) {
            free(w), free(a), free(cg), free(cv), free(scratch);
            return -2;
        }
        random_weights(c, w, m * nb);
        for (int64_t t = 0; t < nt; t++) random_act(c->act, a + (size_t)t * as, k);
        ordinary(c, w, m * nb, a, nt * (k / 32));
        gemm(k, w, (size_t)nb * bs, m, a, as, nt, cg, (size_t)m, scratch);
        for (int64_t t = 0; t < nt; t++) {
            const uint8_t *at = a + (size_t)t * as;
            gemv(k, w, (size_t)nb * bs, m, at, cv);
            for (int64_t r = 0; r < m; r++) {
                const uint8_t *wr = w + (size_t)r * (size_t)nb * bs;
                const float ref = c->ref(k, wr, at);
                double mag = 0.0;
                for (int64_t b = 0; b < nb; b++)
                    mag += fabs((double)c->ref(be, wr + (size_t)b * bs, at + act_bytes(c->act, b * be)));
                compared++;
                if (!(fabs((double)cv[r] - (double)ref) <= tol * mag)) bad++;
                if (memcmp(&cv[r], &cg[t * m + r], sizeof(float))) differ++, bad++;
            }
        }
        free(w), free(a), free(cg), free(cv), free(scratch);
    }
    out[0] = compared;
    out[1] = differ;
    return bad;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_simd_fast_name(int kind) {
    return kind >= 0 && kind < (int)(sizeof fast_cases / sizeof fast_cases[0]) ? fast_cases[kind] : "";
}

/* ns per 4096 x 4096 product of kernel set `kind`: prompt (tokens > 1: per token of a prompt of that many)
 * or decode (tokens 1), best of 3 (information only). */
EMSCRIPTEN_KEEPALIVE double lw_wasm_simd_bench_fast(int kind, int tokens) {
    if (kind < 0 || kind >= (int)(sizeof fast_cases / sizeof fast_cases[0]) || tokens < 1) return -1;
    const scase *c = case_named(fast_cases[kind]);
    const lw__quant_gemv_fn gemv = lw__quant_gemv_isa(c->type, LW_GEMV_SIMD128);
    const lw__quant_gemm_fn gemm = lw__quant_gemm_own_isa(c->type, LW_QGEMM_SIMD128);
    const int64_t k = 4096, m = 4096, nb = k / block_elems(c->type);
    const size_t bs = block_bytes(c->type), as = act_bytes(c->act, k);
    uint8_t *w = malloc((size_t)m * (size_t)nb * bs), *a = malloc((size_t)tokens * as);
    float *y = malloc(sizeof(float) * (size_t)(m * tokens));
    void *scratch = aligned_alloc(64, (lw__quant_gemm_scratch(k, tokens) + 63) / 64 * 64);
    double best = -1;
    if (w && a && y && scratch && gemv && gemm) {
        rng_state = 7;
        random_weights(c, w, m * nb);
        for (int t = 0; t < tokens; t++) random_act(c->act, a + (size_t)t * as, k);
        best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            const double t0 = emscripten_get_now();
            if (tokens == 1) gemv(k, w, (size_t)nb * bs, m, a, y);
            else gemm(k, w, (size_t)nb * bs, m, a, as, tokens, y, (size_t)m, scratch);
            const double dt = (emscripten_get_now() - t0) * 1e6 / tokens;
            best = dt < best ? dt : best;
        }
    }
    free(w), free(a), free(y), free(scratch);
    return best;
}
