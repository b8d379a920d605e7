/* Fast decode products (quant-gemv.h) in WebAssembly simd128, for the wasm build (compiled with -msimd128;
 * an empty translation unit everywhere else).
 *
 * The exact wasm dots (quant-dot-wasm.c) must reproduce x86's fused multiply-adds, which wasm lacks: every
 * block's FMA is emulated in f64x2 (fma-wasm.h). Here the float steps are this file's own (a multiply and an
 * add per block in f32x4 lanes, lanes summed once per row), so each block costs its integer products plus
 * three float operations. Integer products: i8 x i8 -> i16 (extmul) -> pairs added into i32 (extadd), exact.
 * One row at a time, front to back, as the x86 versions (quant-gemv.c). */
#include "cpu/quant-gemv.h"

#include "core/core.h"

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

static inline v128_t q4_0_lanes(const lw__block_q4_0 *x, const lw__block_q8_0 *y) {
    const v128_t q = wasm_v128_load(x->qs), eight = wasm_i8x16_splat(8);
    const v128_t lo = wasm_i8x16_sub(wasm_v128_and(q, wasm_i8x16_splat(0x0f)), eight);
    const v128_t hi = wasm_i8x16_sub(wasm_u8x16_shr(q, 4), eight);
    return wasm_i32x4_add(dot16(lo, wasm_v128_load(y->qs)), dot16(hi, wasm_v128_load(y->qs + 16)));
}

static inline v128_t q8_0_lanes(const lw__block_q8_0 *x, const lw__block_q8_0 *y) {
    return wasm_i32x4_add(dot16(wasm_v128_load(x->qs), wasm_v128_load(y->qs)),
                          dot16(wasm_v128_load(x->qs + 16), wasm_v128_load(y->qs + 16)));
}

#define ROWS_32(BLOCK, LANES)                                                                                \
    const int64_t nb = k / 32;                                                                               \
    const lw__block_q8_0 *y = a;                                                                             \
    float dy[ACT_CACHE];                                                                                     \
    const int cached = nb <= ACT_CACHE;                                                                      \
    if (cached)                                                                                              \
        for (int64_t b = 0; b < nb; b++) dy[b] = H2F(y[b].d);                                                \
    for (int64_t r = 0; r < m; r++) {                                                                        \
        const BLOCK *x = (const BLOCK *)((const uint8_t *)w + (size_t)r * ws);                               \
        v128_t acc = wasm_f32x4_splat(0.0f);                                                                 \
        for (int64_t b = 0; b < nb; b++)                                                                     \
            acc = madd(acc, LANES(&x[b], &y[b]), H2F(x[b].d) * (cached ? dy[b] : H2F(y[b].d)));              \
        c[r] = hsum4(acc);                                                                                   \
    }

static void gemv_q4_0(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    ROWS_32(lw__block_q4_0, q4_0_lanes)
}

static void gemv_q8_0(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    ROWS_32(lw__block_q8_0, q8_0_lanes)
}

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
