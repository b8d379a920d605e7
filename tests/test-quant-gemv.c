/* Fast decode kernels (cpu/quant-gemv.h) against the scalar references (ggml's generic dots, quant-dot.c),
 * on every instruction set this CPU runs (AVX2, 256-bit VNNI and 512-bit AVX-512 on x86-64, simd128 in the
 * wasm build): c[r] for 1..11 rows of 1..40 blocks and 4096 / 11008
 * wide, random bytes and rows quantized from random floats. The kernels add in their own float order, so each
 * result must be within 1e-5 of the sum of |block product| (float rounding of that order: ~1e-7; a wrong
 * integer in any block moves it by orders of magnitude more). Also: LW_CPU_KERNELS=exact turns them off,
 * and the timing of a 4096 x 64 product, kernel vs the exact-order dots it replaces (information only). */
#include "cpu/quant-gemv.h"
#include "cpu/quant-dot-simd.h"
#include "test.h"

#include "core/core.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

/* A finite fp16 of ordinary magnitude (subnormal and huge scales are the exact kernels' tests' business). */
static uint16_t rng_h(void) {
    return lw__fp32_to_fp16(rng_f() * ldexpf(1.0f, (int)(rng_u64() % 8) - 6));
}

typedef struct {
    const char *name;     /* for messages                                                      */
    uint32_t type;        /* weight type                                                       */
    int h0, h1;           /* byte offsets of fp16 scales in a block (-1: no)                   */
    lw__vec_dot_fn exact; /* the exact-order dot the engine decodes with otherwise (timing only) */
} gcase;

static const gcase cases[] = {
    {"q4_0", LW_TYPE_Q4_0, 0, -1, lw__vec_dot_q4_0_q8_0_x86_repack},
    {"q8_0", LW_TYPE_Q8_0, 0, -1, lw__vec_dot_q8_0_q8_0_x86},
    {"q4_K", LW_TYPE_Q4_K, 0, 2, lw__vec_dot_q4_K_q8_K_x86_repack},
    {"q6_K", LW_TYPE_Q6_K, 208, -1, lw__vec_dot_q6_K_q8_K_x86},
};

static const struct {
    lw__gemv_isa isa; /* instruction set */
    const char *name; /* for messages    */
} isas[] = {{LW_GEMV_AVX2, "avx2"},
            {LW_GEMV_VNNI, "avx512vnni"},
            {LW_GEMV_SIMD128, "simd128"},
            {LW_GEMV_AVX512, "avx512"}};

/* Weight rows: random bytes with ordinary fp16 scales (Q8_0 quants kept off -128, which ggml's quantizer
 * never writes), or quantized from random floats. */
static void make_weights(const gcase *c, uint8_t *w, int64_t rows, int64_t n, int quantized, float *tmp) {
    const lw_type_info *ti = lw_type_get(c->type);
    const size_t bs = ti->type_size, nb = (size_t)(rows * n / ti->block_size);
    if (quantized) {
        for (int64_t i = 0; i < rows * n; i++) tmp[i] = rng_f() * (1.0f + 4.0f * (float)(i % 7 == 0));
        CHECK(lw__quantize(c->type, tmp, w, rows, n, NULL) == LW_OK);
        return;
    }
    for (size_t i = 0; i < nb * bs; i++) w[i] = (uint8_t)rng_u64();
    for (size_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * bs;
        uint16_t h = rng_h();
        if (c->h0 >= 0) memcpy(p + c->h0, &h, 2);
        h = rng_h();
        if (c->h1 >= 0) memcpy(p + c->h1, &h, 2);
        if (c->type == LW_TYPE_Q8_0)
            for (int j = 0; j < 32; j++)
                if (p[2 + j] == 0x80) p[2 + j] = 0x81;
    }
}

/* Sum over elements of |w * a| of the dequantized rows: the scale of the rounding the kernels may add. */
static double abs_dot(uint32_t type, uint32_t act, const uint8_t *w, const uint8_t *a, int64_t n, float *fw,
                      float *fa) {
    lw__quant_traits(type)->to_float(w, fw, n);
    if (act == LW_TYPE_Q8_K) { /* an activation format: no dequantizer in the traits table */
        const lw__block_q8_K *y = (const lw__block_q8_K *)a;
        for (int64_t i = 0; i < n; i++) fa[i] = y[i / LW_QK_K].d * (float)y[i / LW_QK_K].qs[i % LW_QK_K];
    } else {
        lw__quant_traits(act)->to_float(a, fa, n);
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)fw[i] * (double)fa[i]);
    return s;
}

static size_t row_bytes(uint32_t type, int64_t n) {
    const lw_type_info *ti = lw_type_get(type);
    return (size_t)(n / ti->block_size) * ti->type_size;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(void) {
    int ran = 0;
    for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++)
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const gcase *gc = &cases[ci];
            const lw__quant_gemv_fn f = lw__quant_gemv_isa(gc->type, isas[ii].isa);
            if (!f) continue;
            ran++;
            const lw__quant_dot_t *qd = lw__quant_dot(gc->type);
            const lw_type_info *ti = lw_type_get(gc->type);
            const int64_t be = ti->block_size;
            double worst = 0;
            int rows_checked = 0;
            for (int seed = 0; seed < 60; seed++) {
                rng_state = 7000u * (ci + 1) + 100u * ii + (uint64_t)seed;
                const int64_t nblk =
                    seed < 50 ? 1 + (int64_t)(rng_u64() % 40) : (seed % 2 ? 4096 : 11008) / be;
                const int64_t n = nblk * be, m = 1 + (int64_t)(rng_u64() % 11);
                const size_t ws = (size_t)nblk * ti->type_size;
                uint8_t *w = malloc(ws * (size_t)m), *a = malloc(row_bytes(qd->vec_dot_type, n));
                float *tmp = malloc(sizeof(float) * (size_t)(n * m)), *fa = malloc(sizeof(float) * (size_t)n);
                float *c = malloc(sizeof(float) * (size_t)(m + 1));
                make_weights(gc, w, m, n, seed % 3 == 2, tmp);
                for (int64_t i = 0; i < n; i++) fa[i] = rng_f() * 3.0f;
                lw__quant_act_x86(qd->vec_dot_type)(fa, a, n);
                c[m] = 12345.0f; /* must stay: the kernel writes m outputs */
                f(n, w, ws, m, a, c);
                CHECK_MSG(c[m] == 12345.0f, "%s/%s: wrote past row %lld", gc->name, isas[ii].name,
                          (long long)m);
                for (int64_t r = 0; r < m; r++) {
                    const float ref = qd->dot(n, w + (size_t)r * ws, a);
                    const double scale =
                        abs_dot(gc->type, qd->vec_dot_type, w + (size_t)r * ws, a, n, tmp, fa);
                    const double err = fabs((double)c[r] - (double)ref), rel = scale > 0 ? err / scale : err;
                    CHECK_MSG(rel <= 1e-5 && !isnan(c[r]),
                              "%s/%s seed %d n %lld m %lld row %lld: %.9g vs reference %.9g", gc->name,
                              isas[ii].name, seed, (long long)n, (long long)m, (long long)r, c[r], ref);
                    if (rel > worst) worst = rel;
                    rows_checked++;
                }
                free(w), free(a), free(tmp), free(fa), free(c);
            }
            /* speed: 64 rows of 4096, kernel vs the exact-order dots (their SIMD twins; information only) */
            const lw__vec_dot_fn ex = lw__quant_dot_fast(gc->exact);
            const int64_t n = 4096, m = 64;
            const size_t ws = (size_t)(n / be) * ti->type_size;
            uint8_t *w = malloc(ws * (size_t)m), *a = malloc(row_bytes(qd->vec_dot_type, n));
            float *tmp = malloc(sizeof(float) * (size_t)(n * m)), c[64];
            make_weights(gc, w, m, n, 1, tmp);
            for (int64_t i = 0; i < n; i++) tmp[i] = rng_f();
            lw__quant_act_x86(qd->vec_dot_type)(tmp, a, n);
            double tk = 1e30, tr = 1e30;
            for (int rep = 0; rep < 5; rep++) {
                double t0 = now_ns();
                for (int it = 0; it < 20; it++) f(n, w, ws, m, a, c);
                const double t1 = now_ns();
                for (int it = 0; it < 4; it++)
                    for (int64_t r = 0; r < m; r++) c[r] = ex(n, w + (size_t)r * ws, a);
                const double t2 = now_ns();
                tk = (t1 - t0) / 20 < tk ? (t1 - t0) / 20 : tk;
                tr = (t2 - t1) / 4 < tr ? (t2 - t1) / 4 : tr;
            }
            printf("%-5s %-10s %d rows within %.2g of |w||a| (limit 1e-5); 4096x64: %.1f us (%.1f GB/s), "
                   "exact-order dots %.1f us\n",
                   gc->name, isas[ii].name, rows_checked, worst, tk / 1e3, (double)ws * m / tk, tr / 1e3);
            free(w), free(a), free(tmp);
        }
    if (!ran) test_skip("no fast decode kernel for this CPU / build: nothing to compare");
    /* the engine's selector: off with LW_CPU_KERNELS=exact or scalar, else the best kernel */
    const char *old = getenv("LW_CPU_KERNELS");
    setenv("LW_CPU_KERNELS", "exact", 1);
    CHECK(lw__quant_gemv_own(LW_TYPE_Q4_0) == NULL);
    setenv("LW_CPU_KERNELS", "scalar", 1);
    CHECK(lw__quant_gemv_own(LW_TYPE_Q4_0) == NULL);
    unsetenv("LW_CPU_KERNELS");
    CHECK(lw__quant_gemv_own(LW_TYPE_Q4_0) == lw__quant_gemv_isa(LW_TYPE_Q4_0, LW_GEMV_BEST));
    CHECK(lw__quant_gemv_own(LW_TYPE_Q4_0) != NULL);
    CHECK(lw__quant_gemv_own(LW_TYPE_F32) == NULL);
    if (old) setenv("LW_CPU_KERNELS", old, 1);
    return test_summary("test-quant-gemv");
}
