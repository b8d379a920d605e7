/* Fast decode products (quant-gemv.h) in WebAssembly simd128, for the wasm build (compiled with -msimd128;
 * an empty translation unit everywhere else).
 *
 * The exact wasm dots (quant-dot-wasm.c) must reproduce x86's fused multiply-adds, which wasm lacks: every
 * block's FMA is emulated in f64x2 (fma-wasm.h). Here the float steps are this file's own (a multiply and an
 * add per block in f32x4 lanes, lanes summed once per row), so each block costs its integer products plus
 * three float operations. Integer products: i8 x i8 -> i16 (extmul) -> pairs added into i32 (extadd), exact.
 * One row at a time, front to back, as the x86 versions (quant-gemv.c). */
#include "cpu/quant-gemv.h"
#include "cpu/quant-gemm.h"

#include "core/core.h"
#include "cpu/f16-wasm.h"

#if defined(__wasm_simd128__)

#include <wasm_simd128.h>

#define H2F lw__fp16_to_fp32

/* Activation rows up to this many 32-blocks get their scales widened once per call (on the stack). */
#define ACT_CACHE 512

/* Sum of the products of 16 signed bytes x and y, in 4 int32 lanes (exact: |x * y| <= 128 * 128). */
static inline v128_t dot16(v128_t x, v128_t y) {
    return wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_low_i8x16(x, y)),
                          wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_high_i8x16(x, y)));
}

static inline float hsum4(v128_t v) {
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 2)) +
           (wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 3));
}

/* acc += float(lanes) * d */
static inline v128_t madd(v128_t acc, v128_t lanes, float d) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(lanes), wasm_f32x4_splat(d)));
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0 and Q8_0 (activations Q8_0)
 * ------------------------------------------------------------------------------------------------------- */

/* A block's 32 products as 4 int32 lanes, y's quants given as two vectors (shared by the rows of a panel). */
static inline v128_t q4_0_lanes(const lw__block_q4_0 *x, v128_t y0, v128_t y1) {
    const v128_t q = wasm_v128_load(x->qs), eight = wasm_i8x16_splat(8);
    const v128_t lo = wasm_i8x16_sub(wasm_v128_and(q, wasm_i8x16_splat(0x0f)), eight);
    const v128_t hi = wasm_i8x16_sub(wasm_u8x16_shr(q, 4), eight);
    return wasm_i32x4_add(dot16(lo, y0), dot16(hi, y1));
}

static inline v128_t q8_0_lanes(const lw__block_q8_0 *x, v128_t y0, v128_t y1) {
    return wasm_i32x4_add(dot16(wasm_v128_load(x->qs), y0), dot16(wasm_v128_load(x->qs + 16), y1));
}

/* acc + float(lanes) * (lane i of s), the float steps of madd with d = s[i] */
#define MADD_LANE(acc, lanes, s, i)                                                                          \
    wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(lanes), wasm_i32x4_shuffle(s, s, i, i, i, i)))

/* Four weight rows (x0 .. x3, nb blocks each) times one activation row y whose block scales are dy (f32):
 * c[0 .. 3]. Per row and block the float steps of the one-row loop below (madd with H2F(x.d) * dy[b]), so a
 * row's result has the same bits whichever loop computes it; the four rows share y's loads, and their four
 * scales are widened in one vector (f16-wasm.h) instead of four calls. Where the time goes: the integer
 * products (extmul / extadd), ~10 instructions per row and block, against ~5 for the shared loads and scales.
 */
#define PANEL4(NAME, BLOCK, LANES)                                                                           \
    static void NAME(const BLOCK *x0, const BLOCK *x1, const BLOCK *x2, const BLOCK *x3,                     \
                     const lw__block_q8_0 *y, const float *dy, int64_t nb, float *c) {                       \
        v128_t a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;                                       \
        for (int64_t b = 0; b < nb; b++) {                                                                   \
            const v128_t y0 = wasm_v128_load(y[b].qs), y1 = wasm_v128_load(y[b].qs + 16);                    \
            const v128_t s =                                                                                 \
                wasm_f32x4_mul(lw__wasm_h2f4(wasm_i32x4_make(x0[b].d, x1[b].d, x2[b].d, x3[b].d)),           \
                               wasm_f32x4_splat(dy[b]));                                                     \
            a0 = MADD_LANE(a0, LANES(&x0[b], y0, y1), s, 0);                                                 \
            a1 = MADD_LANE(a1, LANES(&x1[b], y0, y1), s, 1);                                                 \
            a2 = MADD_LANE(a2, LANES(&x2[b], y0, y1), s, 2);                                                 \
            a3 = MADD_LANE(a3, LANES(&x3[b], y0, y1), s, 3);                                                 \
        }                                                                                                    \
        c[0] = hsum4(a0), c[1] = hsum4(a1), c[2] = hsum4(a2), c[3] = hsum4(a3);                              \
    }

PANEL4(panel_q4_0, lw__block_q4_0, q4_0_lanes)
PANEL4(panel_q8_0, lw__block_q8_0, q8_0_lanes)

/* One row (the rows past the last panel of 4): the same float steps as a panel's rows. */
#define ROW1(NAME, BLOCK, LANES)                                                                             \
    static float NAME(const BLOCK *x, const lw__block_q8_0 *y, const float *dy, int64_t nb) {                \
        v128_t acc = wasm_f32x4_splat(0.0f);                                                                 \
        for (int64_t b = 0; b < nb; b++)                                                                     \
            acc = madd(acc, LANES(&x[b], wasm_v128_load(y[b].qs), wasm_v128_load(y[b].qs + 16)),             \
                       H2F(x[b].d) * dy[b]);                                                                 \
        return hsum4(acc);                                                                                   \
    }

ROW1(row_q4_0, lw__block_q4_0, q4_0_lanes)
ROW1(row_q8_0, lw__block_q8_0, q8_0_lanes)

/* y's block scales as f32 into dy (nb of them), four at a time where they can be gathered */
static void act_scales(const lw__block_q8_0 *y, int64_t nb, float *dy) {
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4)
        wasm_v128_store(dy + b, lw__wasm_h2f4(wasm_i32x4_make(y[b].d, y[b + 1].d, y[b + 2].d, y[b + 3].d)));
    for (; b < nb; b++) dy[b] = H2F(y[b].d);
}

/* Rows [0, m) of w (ws bytes apart) times the activation rows a + t as (t < nt): c[t cs + r]. Rows in panels
 * of 4, each panel meeting every token while its bytes are in cache (prompts: the weights stream from memory
 * once per call, not once per token); dy holds nb scales per token. */
#define ROWS_32(NAME, BLOCK, PANEL, ROW)                                                                     \
    static void NAME(int64_t nb, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,  \
                     float *c, size_t cs, const float *dy) {                                                 \
        int64_t r = 0;                                                                                       \
        for (; r + 4 <= m; r += 4) {                                                                         \
            const BLOCK *x0 = (const BLOCK *)((const uint8_t *)w + (size_t)r * ws);                          \
            const BLOCK *x1 = (const BLOCK *)((const uint8_t *)x0 + ws);                                     \
            const BLOCK *x2 = (const BLOCK *)((const uint8_t *)x1 + ws);                                     \
            const BLOCK *x3 = (const BLOCK *)((const uint8_t *)x2 + ws);                                     \
            for (int64_t t = 0; t < nt; t++)                                                                 \
                PANEL(x0, x1, x2, x3, (const lw__block_q8_0 *)((const uint8_t *)a + (size_t)t * as),         \
                      dy + (size_t)t * (size_t)nb, nb, c + (size_t)t * cs + r);                              \
        }                                                                                                    \
        for (; r < m; r++)                                                                                   \
            for (int64_t t = 0; t < nt; t++)                                                                 \
                c[(size_t)t * cs + r] = ROW((const BLOCK *)((const uint8_t *)w + (size_t)r * ws),            \
                                            (const lw__block_q8_0 *)((const uint8_t *)a + (size_t)t * as),   \
                                            dy + (size_t)t * (size_t)nb, nb);                                \
    }

ROWS_32(rows_q4_0, lw__block_q4_0, panel_q4_0, row_q4_0)
ROWS_32(rows_q8_0, lw__block_q8_0, panel_q8_0, row_q8_0)

/* Decode: one token, one row at a time (the panels of 4 measured slower for decode in headless Chromium,
 * 1B Q8_0 7.8 -> 4.8 t/s in one noisy run: kept for prompts only), its scales widened once per call on the
 * stack up to ACT_CACHE blocks. */
#define GEMV_32(NAME, BLOCK, LANES, ROW)                                                                     \
    static void NAME(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {              \
        const int64_t nb = k / 32;                                                                           \
        float dy[ACT_CACHE];                                                                                 \
        if (nb <= ACT_CACHE) {                                                                               \
            act_scales(a, nb, dy);                                                                           \
            for (int64_t r = 0; r < m; r++)                                                                  \
                c[r] = ROW((const BLOCK *)((const uint8_t *)w + (size_t)r * ws), a, dy, nb);                 \
            return;                                                                                          \
        }                                                                                                    \
        /* rows longer than ACT_CACHE blocks: no panels, scales converted per block as they are used */      \
        const lw__block_q8_0 *y = a;                                                                         \
        for (int64_t r = 0; r < m; r++) {                                                                    \
            const BLOCK *x = (const BLOCK *)((const uint8_t *)w + (size_t)r * ws);                           \
            v128_t acc = wasm_f32x4_splat(0.0f);                                                             \
            for (int64_t b = 0; b < nb; b++)                                                                 \
                acc = madd(acc, LANES(&x[b], wasm_v128_load(y[b].qs), wasm_v128_load(y[b].qs + 16)),         \
                           H2F(x[b].d) * H2F(y[b].d));                                                       \
            c[r] = hsum4(acc);                                                                               \
        }                                                                                                    \
    }

GEMV_32(gemv_q4_0, lw__block_q4_0, q4_0_lanes, row_q4_0)
GEMV_32(gemv_q8_0, lw__block_q8_0, q8_0_lanes, row_q8_0)

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K and Q6_K (activations Q8_K)
 * ------------------------------------------------------------------------------------------------------- */

static void gemv_q4_K(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q4_K *x = (const lw__block_q4_K *)((const uint8_t *)w + (size_t)r * ws);
        v128_t acc = wasm_f32x4_splat(0.0f);
        float accm = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            v128_t sum = wasm_i32x4_splat(0);
            int32_t mins = 0;
            for (int j = 0; j < 4; j++) {
                int sc0, m0, sc1, m1;
                lw__k4_scale_min(2 * j, x[b].scales, &sc0, &m0);
                lw__k4_scale_min(2 * j + 1, x[b].scales, &sc1, &m1);
                const uint8_t *qs = x[b].qs + 32 * j;
                const int8_t *yq = y[b].qs + 64 * j;
                const v128_t q0 = wasm_v128_load(qs), q1 = wasm_v128_load(qs + 16),
                             m4 = wasm_i8x16_splat(0x0f);
                const v128_t s0 = wasm_i32x4_add(dot16(wasm_v128_and(q0, m4), wasm_v128_load(yq)),
                                                 dot16(wasm_v128_and(q1, m4), wasm_v128_load(yq + 16)));
                const v128_t s1 = wasm_i32x4_add(dot16(wasm_u8x16_shr(q0, 4), wasm_v128_load(yq + 32)),
                                                 dot16(wasm_u8x16_shr(q1, 4), wasm_v128_load(yq + 48)));
                sum = wasm_i32x4_add(sum, wasm_i32x4_add(wasm_i32x4_mul(s0, wasm_i32x4_splat(sc0)),
                                                         wasm_i32x4_mul(s1, wasm_i32x4_splat(sc1))));
                mins += m0 * (y[b].bsums[4 * j] + y[b].bsums[4 * j + 1]) +
                        m1 * (y[b].bsums[4 * j + 2] + y[b].bsums[4 * j + 3]);
            }
            acc = madd(acc, sum, H2F(x[b].d) * y[b].d);
            accm += (float)mins * (H2F(x[b].dmin) * y[b].d);
        }
        c[r] = hsum4(acc) - accm;
    }
}

static void gemv_q6_K(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    const v128_t m4 = wasm_i8x16_splat(0x0f), m3 = wasm_i8x16_splat(0x03), off = wasm_i8x16_splat(32);
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q6_K *x = (const lw__block_q6_K *)((const uint8_t *)w + (size_t)r * ws);
        v128_t acc = wasm_f32x4_splat(0.0f);
        for (int64_t b = 0; b < nb; b++) {
            const int8_t *sc = x[b].scales;
            v128_t sum = wasm_i32x4_splat(0);
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
                const int8_t *yq = y[b].qs + 128 * h;
                for (int l = 0; l < 32; l += 16) { /* elements l..l+15 of each of the 4 quarters */
                    const v128_t a0 = wasm_v128_load(ql + l), a1 = wasm_v128_load(ql + 32 + l);
                    const v128_t hb = wasm_v128_load(qh + l);
                    const v128_t v0 =
                        wasm_v128_or(wasm_v128_and(a0, m4), wasm_i8x16_shl(wasm_v128_and(hb, m3), 4));
                    const v128_t v1 = wasm_v128_or(
                        wasm_v128_and(a1, m4), wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hb, 2), m3), 4));
                    const v128_t v2 = wasm_v128_or(
                        wasm_u8x16_shr(a0, 4), wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hb, 4), m3), 4));
                    const v128_t v3 =
                        wasm_v128_or(wasm_u8x16_shr(a1, 4), wasm_i8x16_shl(wasm_u8x16_shr(hb, 6), 4));
                    const int is = 8 * h + l / 16;
                    const v128_t p0 = dot16(wasm_i8x16_sub(v0, off), wasm_v128_load(yq + l));
                    const v128_t p1 = dot16(wasm_i8x16_sub(v1, off), wasm_v128_load(yq + 32 + l));
                    const v128_t p2 = dot16(wasm_i8x16_sub(v2, off), wasm_v128_load(yq + 64 + l));
                    const v128_t p3 = dot16(wasm_i8x16_sub(v3, off), wasm_v128_load(yq + 96 + l));
                    sum = wasm_i32x4_add(sum, wasm_i32x4_mul(p0, wasm_i32x4_splat(sc[is])));
                    sum = wasm_i32x4_add(sum, wasm_i32x4_mul(p1, wasm_i32x4_splat(sc[is + 2])));
                    sum = wasm_i32x4_add(sum, wasm_i32x4_mul(p2, wasm_i32x4_splat(sc[is + 4])));
                    sum = wasm_i32x4_add(sum, wasm_i32x4_mul(p3, wasm_i32x4_splat(sc[is + 6])));
                }
            }
            acc = madd(acc, sum, H2F(x[b].d) * y[b].d);
        }
        c[r] = hsum4(acc);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Prompts (quant-gemm.h lw__quant_gemm_own): each result has the bits of the decode kernel above for that
 * token (the same float steps per row and block), so a prompt and the same tokens decoded one at a time
 * agree exactly; the weights are read once per call. Before, wasm prompts took the exact-order dots, whose
 * fused multiply-adds are emulated in f64 (fma-wasm.h): slower per token than decoding.
 * ------------------------------------------------------------------------------------------------------- */

#define GEMM_32(NAME, ROWS)                                                                                  \
    static void NAME(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,   \
                     float *c, size_t cs, void *scratch) {                                                   \
        const int64_t nb = k / 32;                                                                           \
        float *dy = scratch; /* nt x nb scales: lw__quant_gemm_scratch leaves 8 bytes per token and block */ \
        for (int64_t t = 0; t < nt; t++)                                                                     \
            act_scales((const lw__block_q8_0 *)((const uint8_t *)a + (size_t)t * as), nb,                    \
                       dy + (size_t)t * (size_t)nb);                                                         \
        ROWS(nb, w, ws, m, a, as, nt, c, cs, dy);                                                            \
    }

GEMM_32(gemm_q4_0, rows_q4_0)
GEMM_32(gemm_q8_0, rows_q8_0)

/* The super-block formats: panels of 4 rows through the decode kernel, every token while the panel is in
 * cache. */
#define GEMM_PANELS(NAME, GEMV)                                                                              \
    static void NAME(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,   \
                     float *c, size_t cs, void *scratch) {                                                   \
        (void)scratch;                                                                                       \
        for (int64_t r = 0; r < m; r += 4)                                                                   \
            for (int64_t t = 0; t < nt; t++)                                                                 \
                GEMV(k, (const uint8_t *)w + (size_t)r * ws, ws, m - r < 4 ? m - r : 4,                      \
                     (const uint8_t *)a + (size_t)t * as, c + (size_t)t * cs + r);                           \
    }

GEMM_PANELS(gemm_q4_K, gemv_q4_K)
GEMM_PANELS(gemm_q6_K, gemv_q6_K)

lw__quant_gemm_fn lw__quant_gemm_own_wasm(uint32_t type);

lw__quant_gemm_fn lw__quant_gemm_own_wasm(uint32_t type) {
    switch (type) {
    case LW_TYPE_Q4_0:
        return gemm_q4_0;
    case LW_TYPE_Q8_0:
        return gemm_q8_0;
    case LW_TYPE_Q4_K:
        return gemm_q4_K;
    case LW_TYPE_Q6_K:
        return gemm_q6_K;
    default:
        return NULL;
    }
}

lw__quant_gemv_fn lw__quant_gemv_wasm(uint32_t type);

lw__quant_gemv_fn lw__quant_gemv_wasm(uint32_t type) {
    switch (type) {
    case LW_TYPE_Q4_0:
        return gemv_q4_0;
    case LW_TYPE_Q8_0:
        return gemv_q8_0;
    case LW_TYPE_Q4_K:
        return gemv_q4_K;
    case LW_TYPE_Q6_K:
        return gemv_q6_K;
    default:
        return NULL;
    }
}

#endif
