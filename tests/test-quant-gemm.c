/* Tiled quantized matrix products (cpu/quant-gemm.h: the many-token kernels) against
 * the scalar x86-order dots they replace (quant-dot-x86.c): every output c[t][r] must carry exactly the
 * bits of ref(w row r, a row t), on random
 * blocks (any quant bytes, finite fp16 scales from subnormals to 65504) and on rows quantized from random
 * floats, for row counts that leave partial panels, token counts that leave partial tiles, and outputs
 * outside the product must stay untouched. Skips when this CPU has no such kernel. */
#include "cpu/quant-gemm.h"
#include "test.h"

#include "core/core.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* A finite fp16: mostly ordinary magnitudes, sometimes subnormal, zero or near the fp16 maximum. */
static uint16_t rng_h(void) {
    const uint64_t r = rng_u64();
    switch (r % 16) {
    case 0:
        return (uint16_t)((r >> 8) & 0x83ff);
    case 1:
        return (uint16_t)(0x7800 | ((r >> 8) & 0x83ff));
    default:
        return lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)((r >> 8) % 14) - 10));
    }
}

static void rng_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_u64();
}

typedef struct {
    const char *name;   /* for messages                        */
    uint32_t type;      /* weight type                         */
    uint32_t act;       /* activation type                     */
    lw__vec_dot_fn ref; /* scalar x86-order reference           */
    int h0, h1;         /* byte offsets of fp16 scales (-1: no) */
} gcase;

static const gcase cases[] = {
    {"q4_0 repack", LW_TYPE_Q4_0, LW_TYPE_Q8_0, lw__vec_dot_q4_0_q8_0_x86_repack, 0, -1},
    {"q8_0", LW_TYPE_Q8_0, LW_TYPE_Q8_0, lw__vec_dot_q8_0_q8_0_x86, 0, -1},
    {"q4_K repack gemm", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86_repack_gemm, 0, 2},
    {"q6_K", LW_TYPE_Q6_K, LW_TYPE_Q8_K, lw__vec_dot_q6_K_q8_K_x86, 208, -1},
};

static size_t row_bytes(uint32_t type, int64_t k) {
    return (size_t)(k / lw_type_get(type)->block_size) * lw_type_get(type)->type_size;
}

/* Random rows: any bytes with finite fp16 scales, or (quantized != 0) quantized from random floats. */
static void random_rows(const gcase *gc, uint8_t *w, int64_t rows, int64_t k, int quantized) {
    const size_t rb = row_bytes(gc->type, k), bs = lw_type_get(gc->type)->type_size;
    float *x = malloc((size_t)k * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + (size_t)r * rb;
        if (quantized) {
            for (int64_t i = 0; i < k; i++) x[i] = rng_f() * (1.0f + 4.0f * (float)(i % 7 == 0));
            CHECK(lw__quantize(gc->type, x, row, 1, k, NULL) == LW_OK);
        } else {
            rng_bytes(row, rb);
            for (int64_t b = 0; b < k / lw_type_get(gc->type)->block_size; b++) {
                const uint16_t h = rng_h(), h1 = rng_h();
                memcpy(row + (size_t)b * bs + gc->h0, &h, 2);
                if (gc->h1 >= 0) memcpy(row + (size_t)b * bs + gc->h1, &h1, 2);
            }
        }
    }
    free(x);
}

static void random_acts(const gcase *gc, uint8_t *a, int64_t nt, int64_t k, int quantized) {
    const size_t rb = row_bytes(gc->act, k);
    float *x = malloc((size_t)k * sizeof(float));
    for (int64_t t = 0; t < nt; t++) {
        uint8_t *row = a + (size_t)t * rb;
        if (quantized || gc->act != LW_TYPE_Q8_0) {
            for (int64_t i = 0; i < k; i++) x[i] = rng_f() * 3.0f;
            lw__quant_act_x86(gc->act)(x, row, k);
        } else {
            lw__block_q8_0 *y = (lw__block_q8_0 *)row;
            for (int64_t b = 0; b < k / 32; b++) {
                y[b].d = rng_h();
                rng_bytes((uint8_t *)y[b].qs, 32);
            }
        }
    }
    free(x);
}

/* ---------------------------------------------------------------------------------------------------------
 * Own-order kernels (lw__quant_gemm_own_isa, each ISA this CPU has): their bits are those of this scalar
 * chain per (row, token): exact integer block sums, acc = fma(float(sum_b), dw_b * da_b, acc) over the blocks
 * in order from 0.
 * ------------------------------------------------------------------------------------------------------- */

/* One block's exact integer sum, its scale product and sum |products|, for weight type `type`. */
static int32_t own_block(uint32_t type, const uint8_t *w, const uint8_t *a, int64_t b, float *d,
                         int64_t *abs_sum) {
    int32_t s = 0;
    *abs_sum = 0;
    if (type == LW_TYPE_Q4_0) {
        const lw__block_q4_0 *x = (const lw__block_q4_0 *)w + b;
        const lw__block_q8_0 *y = (const lw__block_q8_0 *)a + b;
        for (int i = 0; i < 32; i++) {
            const int32_t q = (i < 16 ? x->qs[i] & 15 : x->qs[i - 16] >> 4) - 8, p = q * (int32_t)y->qs[i];
            s += p;
            *abs_sum += p < 0 ? -p : p;
        }
        *d = lw__fp16_to_fp32(x->d) * lw__fp16_to_fp32(y->d);
    } else if (type == LW_TYPE_Q8_0) {
        const lw__block_q8_0 *x = (const lw__block_q8_0 *)w + b, *y = (const lw__block_q8_0 *)a + b;
        for (int i = 0; i < 32; i++) {
            const int32_t p = (int32_t)x->qs[i] * (int32_t)y->qs[i];
            s += p;
            *abs_sum += p < 0 ? -p : p;
        }
        *d = lw__fp16_to_fp32(x->d) * lw__fp16_to_fp32(y->d);
    }
    return s;
}

/* Q4_K's own-order chains (quant-gemm-avx2.c): per super-block acc = fma(float(sum_j sc_j s_j), d dy, acc),
 * accm = fma(float(sum_j mn_j B_j), dmin dy, accm); acc - accm. *mag: sum |w a| over the dequantized terms.
 */
static float own_ref_q4_K(int64_t k, const uint8_t *w, const uint8_t *a, double *mag) {
    const lw__block_q4_K *x = (const lw__block_q4_K *)w;
    const lw__block_q8_K *y = (const lw__block_q8_K *)a;
    float acc = 0.0f, accm = 0.0f;
    *mag = 0.0;
    for (int64_t i = 0; i < k / 256; i++) {
        int32_t isum = 0, imin = 0;
        const float d = lw__fp16_to_fp32(x[i].d), dmin = lw__fp16_to_fp32(x[i].dmin);
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            lw__k4_scale_min(j, x[i].scales, &sc, &mn);
            int32_t s = 0;
            for (int e = 0; e < 32; e++) {
                const uint8_t byte = x[i].qs[32 * (j / 2) + e];
                const int q = j % 2 ? byte >> 4 : byte & 15, yv = y[i].qs[32 * j + e];
                s += q * yv;
                *mag += fabs((double)y[i].d * ((double)d * sc * q - (double)dmin * mn) * yv);
            }
            isum += sc * s;
            imin += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        acc = fmaf((float)isum, d * y[i].d, acc);
        accm = fmaf((float)imin, dmin * y[i].d, accm);
    }
    return acc - accm;
}

/* Q6_K's own-order chain (quant-gemm-avx2.c): per super-block acc = fma(float(sum_s sc_s (u_s . y_s) - 32
 * sum_s sc_s B_s), d dy, acc), u the unsigned 6-bit values, B_s the bsums. */
static float own_ref_q6_K(int64_t k, const uint8_t *w, const uint8_t *a, double *mag) {
    const lw__block_q6_K *x = (const lw__block_q6_K *)w;
    const lw__block_q8_K *y = (const lw__block_q8_K *)a;
    float acc = 0.0f;
    *mag = 0.0;
    for (int64_t i = 0; i < k / 256; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        int32_t isum = 0;
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, l = e % 32, part = (e % 128) / 32;
            const uint8_t qh = x[i].qh[32 * h + l], ql = x[i].ql[64 * h + l + 32 * (part & 1)];
            const int u = (part < 2 ? ql & 15 : ql >> 4) | ((qh >> (2 * part)) & 3) << 4,
                      sc = x[i].scales[e / 16];
            isum += sc * u * y[i].qs[e];
            *mag += fabs((double)y[i].d * d * sc * (u - 32) * y[i].qs[e]);
        }
        for (int sb = 0; sb < 16; sb++) isum -= 32 * x[i].scales[sb] * y[i].bsums[sb];
        acc = fmaf((float)isum, d * y[i].d, acc);
    }
    return acc;
}

/* The own-order chain, and in *mag the sum over elements of |w a| (the scale of any order's rounding). */
static float own_ref(uint32_t type, int64_t k, const uint8_t *w, const uint8_t *a, double *mag) {
    if (type == LW_TYPE_Q4_K) return own_ref_q4_K(k, w, a, mag);
    if (type == LW_TYPE_Q6_K) return own_ref_q6_K(k, w, a, mag);
    float acc = 0.0f;
    *mag = 0.0;
    for (int64_t b = 0; b < k / 32; b++) {
        float d = 0.0f;
        int64_t abs_sum;
        const int32_t s = own_block(type, w, a, b, &d, &abs_sum);
        acc = fmaf((float)s, d, acc);
        *mag += (double)abs_sum * fabs((double)d);
    }
    return acc;
}

static void test_own(void) {
    static const gcase own_cases[] = {
        {"q4_0", LW_TYPE_Q4_0, LW_TYPE_Q8_0, lw__vec_dot_q4_0_q8_0_x86_repack, 0, -1},
        {"q8_0", LW_TYPE_Q8_0, LW_TYPE_Q8_0, lw__vec_dot_q8_0_q8_0_x86, 0, -1},
        {"q4_K", LW_TYPE_Q4_K, LW_TYPE_Q8_K, lw__vec_dot_q4_K_q8_K_x86, 0, 2},
        {"q6_K", LW_TYPE_Q6_K, LW_TYPE_Q8_K, lw__vec_dot_q6_K_q8_K_x86, 208, -1},
    };
    static const struct {
        lw__qgemm_isa isa; /* forced instruction set */
        const char *name;  /* for messages           */
    } isas[] = {{LW_QGEMM_AVX2, "avx2"}, {LW_QGEMM_VNNI512, "vnni512"}};
    static const int64_t ms[] = {16, 37, 64, 8, 3};
    static const int64_t kblocks[] = {1, 5, 8, 128};
    static const int64_t nts[] = {2, 3, 8, 13, 21};
    int ran = 0;
    for (size_t c = 0; c < sizeof own_cases / sizeof own_cases[0] * 2; c++) {
        const gcase *gc = &own_cases[c / 2];
        const lw__quant_gemm_fn own = lw__quant_gemm_own_isa(gc->type, isas[c % 2].isa);
        char name[64];
        snprintf(name, sizeof name, "%s own %s", gc->name, isas[c % 2].name);
        if (!own) {
            printf("%-20s no such kernel (type, CPU), skipped\n", name);
            continue;
        }
        ran++;
        int outs = 0, same = 0;
        double worst = 0; /* |own - ggml's x86 order| / sum |w a|, over the quantized rows */
        for (int seed = 0; seed < 40; seed++) {
            rng_state = 9100u * c + (uint64_t)seed;
            const int64_t m = ms[seed % 5], nt = nts[seed % 5];
            const int64_t k = kblocks[(seed / 4) % 4] * lw_type_get(gc->type)->block_size;
            const int quantized = seed % 3 == 2;
            const size_t wrb = row_bytes(gc->type, k), arb = row_bytes(gc->act, k), cs = (size_t)m + 3;
            uint8_t *w = malloc((size_t)m * wrb), *a = malloc((size_t)nt * arb);
            float *out = malloc((size_t)nt * cs * sizeof(float));
            void *scratch = aligned_alloc(64, (lw__quant_gemm_scratch(k, nt) + 63) / 64 * 64);
            random_rows(gc, w, m, k, quantized);
            random_acts(gc, a, nt, k, quantized);
            /* Q8_0 activations hold -127..127, as the engine's quantizers write them */
            for (int64_t t = 0; t < nt && gc->act == LW_TYPE_Q8_0; t++)
                for (int64_t b = 0; b < k / 32; b++) {
                    lw__block_q8_0 *y = (lw__block_q8_0 *)(a + (size_t)t * arb) + b;
                    for (int i = 0; i < 32; i++) y->qs[i] = y->qs[i] == -128 ? -127 : y->qs[i];
                }
            for (size_t i = 0; i < (size_t)nt * cs; i++) out[i] = -12345.0f;
            own(k, w, wrb, m, a, arb, nt, out, cs, scratch);
            for (int64_t t = 0; t < nt; t++) {
                for (int64_t r = 0; r < m; r++) {
                    double mag;
                    const uint8_t *wr = w + (size_t)r * wrb, *ar = a + (size_t)t * arb;
                    const float ref = own_ref(gc->type, k, wr, ar, &mag), got = out[t * cs + r];
                    const int eq = memcmp(&ref, &got, sizeof ref) == 0;
                    CHECK_MSG(
                        eq,
                        "%s: seed %d m %lld k %lld nt %lld: c[%lld][%lld] %.9g != own-order reference %.9g",
                        name, seed, (long long)m, (long long)k, (long long)nt, (long long)t, (long long)r,
                        got, ref);
                    same += eq;
                    outs++;
                    if (quantized && mag > 0) {
                        const double e = fabs((double)got - (double)gc->ref(k, wr, ar)) / mag;
                        worst = e > worst ? e : worst;
                    }
                }
                for (size_t r = (size_t)m; r < cs; r++)
                    CHECK_MSG(out[t * cs + r] == -12345.0f, "%s: seed %d wrote past row %lld", name, seed,
                              (long long)m);
            }
            free(w);
            free(a);
            free(out);
            free(scratch);
        }
        /* float rounding only: a wrong block sum or scale moves a product by orders of magnitude more */
        CHECK_MSG(worst < 1e-5, "%s: %.3g of sum |w a| from ggml's x86 order", name, worst);
        printf("%-16s %d/%d outputs bit-identical to the own-order chain; vs ggml's x86 order <= %.2g of sum "
               "|w a|\n",
               name, same, outs, worst);
    }
    printf("own-order kernels: %d ISA x type pairs ran\n", ran);
    /* the engine's selector: off with LW_CPU_KERNELS=exact or scalar */
    const char *old = getenv("LW_CPU_KERNELS");
    setenv("LW_CPU_KERNELS", "exact", 1);
    CHECK(lw__quant_gemm_own(LW_TYPE_Q8_0) == NULL);
    setenv("LW_CPU_KERNELS", "scalar", 1);
    CHECK(lw__quant_gemm_own(LW_TYPE_Q8_0) == NULL);
    setenv("LW_CPU_KERNELS", "avx2", 1);
    CHECK(lw__quant_gemm_own(LW_TYPE_Q8_0) == lw__quant_gemm_own_isa(LW_TYPE_Q8_0, LW_QGEMM_AVX2));
    unsetenv("LW_CPU_KERNELS");
    CHECK(lw__quant_gemm_own(LW_TYPE_Q8_0) == lw__quant_gemm_own_isa(LW_TYPE_Q8_0, LW_QGEMM_BEST));
    CHECK(lw__quant_gemm_own(LW_TYPE_F32) == NULL);
    if (old) setenv("LW_CPU_KERNELS", old, 1);
}

int main(void) {
    test_own();
    if (!lw__quant_gemm_x86(cases[0].ref))
        test_skip("no tiled quantized kernel for this CPU (needs AVX-512 VNNI)");

    static const int64_t ms[] = {16, 37, 64, 8, 3};
    static const int64_t kblocks[] = {1, 5, 8, 128}; /* row lengths in blocks */
    static const int64_t nts[] = {1, 3, 8, 13, 21};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const gcase *gc = &cases[c];
        const lw__quant_gemm_fn gemm = lw__quant_gemm_x86(gc->ref);
        CHECK_MSG(gemm != NULL, "%s: no kernel", gc->name);
        if (!gemm) continue;
        int outs = 0, same = 0;
        for (int seed = 0; seed < 40; seed++) {
            rng_state = 7000u * c + (uint64_t)seed;
            const int64_t m = ms[seed % 5], k = kblocks[(seed / 4) % 4] * lw_type_get(gc->type)->block_size,
                          nt = nts[seed % 5];
            const int quantized = seed % 3 == 2;
            const size_t wrb = row_bytes(gc->type, k), arb = row_bytes(gc->act, k), cs = (size_t)m + 3;
            uint8_t *w = malloc((size_t)m * wrb), *a = malloc((size_t)nt * arb);
            float *out = malloc((size_t)nt * cs * sizeof(float));
            const size_t sb = (lw__quant_gemm_scratch(k, nt) + 63) / 64 * 64;
            void *scratch = aligned_alloc(64, sb);
            random_rows(gc, w, m, k, quantized);
            random_acts(gc, a, nt, k, quantized);
            for (size_t i = 0; i < (size_t)nt * cs; i++) out[i] = -12345.0f;
            gemm(k, w, wrb, m, a, arb, nt, out, cs, scratch);
            for (int64_t t = 0; t < nt; t++) {
                for (int64_t r = 0; r < m; r++) {
                    const float ref = gc->ref(k, w + (size_t)r * wrb, a + (size_t)t * arb),
                                got = out[t * cs + r];
                    const int eq = memcmp(&ref, &got, sizeof ref) == 0;
                    CHECK_MSG(eq, "%s: seed %d m %lld k %lld nt %lld: c[%lld][%lld] %.9g != reference %.9g",
                              gc->name, seed, (long long)m, (long long)k, (long long)nt, (long long)t,
                              (long long)r, got, ref);
                    same += eq;
                    outs++;
                }
                for (size_t r = (size_t)m; r < cs; r++)
                    CHECK_MSG(out[t * cs + r] == -12345.0f, "%s: seed %d wrote past row %lld", gc->name, seed,
                              (long long)m);
            }
            free(w);
            free(a);
            free(out);
            free(scratch);
        }
        printf("%-16s %d/%d outputs bit-identical\n", gc->name, same, outs);
    }
    return test_summary("quant-gemm");
}
