/* WebAssembly SIMD (simd128) versions of the quantized dots the CPU engine runs (quant-dot.h), for the wasm
 * build (compiled with -msimd128; an empty translation unit everywhere else).
 *
 * Each kernel returns exactly the float bits of the scalar reference it replaces: integer block sums are
 * exact in any order, so only the float steps have to be kept, in the reference's order. The engine uses
 * ggml's x86 orders on every target (engine-ops.c: results equal across machines), so most twins here are
 * of the lw__vec_dot_*_x86* references, which fused-multiply-add 8 lanes per block (Q8_0, Q4_1, Q5_0, Q5_1,
 * Q2_K-Q6_K, IQ4_XS, and the repacked gemv/gemm orders of Q4_0, IQ4_NL, MXFP4, Q4_K, Q2_K); the rest are of
 * the generic references the engine keeps where it has no x86 order (plain Q4_0/IQ4_NL/MXFP4 tables, IQ4_XS,
 * IQ2/IQ3/IQ1 grids, TQ1_0, TQ2_0, Q1_0, Q2_0, NVFP4): exact integer sums per block, float steps as written.
 * Not here: generic versions of the formats the engine runs in x86 order (it never calls those).
 *
 * wasm has no fused multiply-add (simd128 nor scalar): the references' fmaf is Emscripten's libc (musl)
 * fmaf, which computes x*y exactly in double, adds z in double and rounds to float, and only takes a slow
 * path when the double sum lies exactly halfway between two floats and was inexact. fma-wasm.h does the same
 * two lanes at a time in f64x2 and calls that same fmaf for 4 lanes whenever one of them needs the slow
 * path, so the bits are the reference's by construction.
 *
 * Integer products: i8 x i8 products fit in i16 (|p| <= 16384), pairs are summed by i32x4.dot_i16x8_s
 * (optionally times a per-16 scale), and the pairs of one 16-byte half are folded into ggml's lanes (lane k
 * of a 32-element chunk holds elements 4k..4k+3) at the end of the block. */
#include "cpu/quant-dot-simd.h"

#include "core/core.h"
#include "quant/iq-grids.h"

#include <math.h>
#include <string.h>

#if defined(__wasm_simd128__)

#include <wasm_simd128.h>

#include "cpu/fma-wasm.h"

/* every float step is written out; nothing may be contracted or reordered */
#pragma STDC FP_CONTRACT OFF

#define H2F lw__fp16_to_fp32

/* ---------------------------------------------------------------------------------------------------------
 * Float helpers: Emscripten's fmaf, vectorised (fma-wasm.h), and the references' horizontal sum
 * ------------------------------------------------------------------------------------------------------- */

/* acc[k] = fmaf(d, l[k], acc[k]) for 4 lanes (l already float): fma-wasm.h. */
static inline v128_t fma4(float d, v128_t l, v128_t acc) { return lw__wasm_fmaf4s(d, l, acc); }

/* 8 float accumulators as ggml's __m256: lanes 0-3 and 4-7. */
typedef struct {
    v128_t lo, hi;
} acc8;

/* acc[k] = fmaf(d, (float)lanes[k], acc[k]) for the 8 int32 lanes (lo: 0-3, hi: 4-7). */
static inline void fma8(acc8 *acc, float d, v128_t lanes_lo, v128_t lanes_hi) {
    acc->lo = fma4(d, wasm_f32x4_convert_i32x4(lanes_lo), acc->lo);
    acc->hi = fma4(d, wasm_f32x4_convert_i32x4(lanes_hi), acc->hi);
}

/* The references' hsum8_x86: upper half + lower half, then (r0 + r2) + (r1 + r3). */
static inline float hsum8(acc8 acc) {
    const v128_t r = wasm_f32x4_add(acc.hi, acc.lo);
    return (wasm_f32x4_extract_lane(r, 0) + wasm_f32x4_extract_lane(r, 2)) +
           (wasm_f32x4_extract_lane(r, 1) + wasm_f32x4_extract_lane(r, 3));
}

/* ---------------------------------------------------------------------------------------------------------
 * Integer helpers
 * ------------------------------------------------------------------------------------------------------- */

/* Pair sums of one 16-element half: a = pairs of elements 0..7, b = pairs of 8..15; fold(a, b) gives the 4
 * lanes of 4 consecutive elements. */
typedef struct {
    v128_t a, b;
} pairs16;

static inline pairs16 pairs_zero(void) {
    return (pairs16){wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
}

/* p += pair sums of x[e] * y[e] * s (x, y signed bytes, s an int16 splat). */
static inline void pairs_add(pairs16 *p, v128_t x, v128_t y, v128_t s) {
    p->a = wasm_i32x4_add(p->a, wasm_i32x4_dot_i16x8(wasm_i16x8_extmul_low_i8x16(x, y), s));
    p->b = wasm_i32x4_add(p->b, wasm_i32x4_dot_i16x8(wasm_i16x8_extmul_high_i8x16(x, y), s));
}

/* p += pair sums of x[e] * y[e] (no scale). */
static inline void pairs_add1(pairs16 *p, v128_t x, v128_t y) {
    p->a = wasm_i32x4_add(p->a, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(x), wasm_i16x8_extend_low_i8x16(y)));
    p->b = wasm_i32x4_add(p->b, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(x), wasm_i16x8_extend_high_i8x16(y)));
}

/* The 4 lanes of 4 consecutive elements each. */
static inline v128_t pairs_fold(pairs16 p) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(p.a, p.b, 0, 2, 4, 6), wasm_i32x4_shuffle(p.a, p.b, 1, 3, 5, 7));
}

static inline int32_t hsum_i32x4(v128_t v) {
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_i32x4_extract_lane(v, 0);
}

/* Sum of the 32 products x[e] * y[e] of two 16-byte halves (exact). */
static inline int32_t dot32(v128_t x0, v128_t y0, v128_t x1, v128_t y1) {
    pairs16 p = pairs_zero();
    pairs_add1(&p, x0, y0);
    pairs_add1(&p, x1, y1);
    return hsum_i32x4(wasm_i32x4_add(p.a, p.b));
}

static inline v128_t lo_nib(v128_t q) { return wasm_v128_and(q, wasm_i8x16_splat(0x0f)); }
static inline v128_t hi_nib(v128_t q) { return wasm_u8x16_shr(q, 4); }

/* Bit e of the 32-bit word qh for elements e = 16*half + 0..15, as 0x10 or 0. */
static inline v128_t qh_bits16(uint32_t qh, int half) {
    const v128_t sel = half ? wasm_i8x16_const(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)
                            : wasm_i8x16_const(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const v128_t bytes = wasm_i8x16_swizzle(wasm_i32x4_splat((int32_t)qh), sel);
    const v128_t bit = wasm_u8x16_const(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(bytes, bit), bit), wasm_i8x16_splat(0x10));
}

/* ---------------------------------------------------------------------------------------------------------
 * Q8_0 (x86 order): |x| times y with x's sign (_mm256_sign_epi8, where -(-128) stays -128)
 * ------------------------------------------------------------------------------------------------------- */

static float dot_q8_0_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q8_0 *x = w;
    const lw__block_q8_0 *y = a;
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        const float d = H2F(x[ib].d) * H2F(y[ib].d);
        v128_t lanes[2];
        const v128_t y0 = wasm_v128_load(y[ib].qs), y1 = wasm_v128_load(y[ib].qs + 16), m128 = wasm_i8x16_splat(-128);
        if (!wasm_v128_any_true(wasm_v128_or(wasm_i8x16_eq(y0, m128), wasm_i8x16_eq(y1, m128)))) {
            /* no activation of -128 (ggml's x86 quantizer never makes one): then |x| * sign(y, x) = x * y */
            pairs16 p0 = pairs_zero(), p1 = pairs_zero();
            pairs_add1(&p0, wasm_v128_load(x[ib].qs), y0);
            pairs_add1(&p1, wasm_v128_load(x[ib].qs + 16), y1);
            fma8(&acc, d, pairs_fold(p0), pairs_fold(p1));
            continue;
        }
        for (int h = 0; h < 2; h++) {
            const v128_t x8 = wasm_v128_load(x[ib].qs + 16 * h), y8 = h ? y1 : y0;
            const v128_t neg = wasm_i8x16_lt(x8, wasm_i8x16_splat(0)), zero = wasm_i8x16_eq(x8, wasm_i8x16_splat(0));
            const v128_t sy = wasm_v128_andnot(wasm_v128_bitselect(wasm_i8x16_neg(y8), y8, neg), zero);
            pairs16 p;
            p.a = wasm_i32x4_dot_i16x8(wasm_i16x8_abs(wasm_i16x8_extend_low_i8x16(x8)), wasm_i16x8_extend_low_i8x16(sy));
            p.b = wasm_i32x4_dot_i16x8(wasm_i16x8_abs(wasm_i16x8_extend_high_i8x16(x8)), wasm_i16x8_extend_high_i8x16(sy));
            lanes[h] = pairs_fold(p);
        }
        fma8(&acc, d, lanes[0], lanes[1]);
    }
    return hsum8(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_1 / Q5_0 / Q5_1 (x86 order): 8 lanes per block, the min term m * s in a scalar fmaf chain
 * ------------------------------------------------------------------------------------------------------- */

/* kind 0: Q4_1, 1: Q5_0, 2: Q5_1 (as the reference's q32_x86). */
static inline float q32_x86(int64_t n, const uint8_t *w, size_t bsize, int kind, const uint8_t *a, size_t asize) {
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    float summs = 0.0f;
    const int has_min = kind != 1;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const uint8_t *xb = w + (size_t)ib * bsize, *yb = a + (size_t)ib * asize;
        const uint8_t *qs = xb + (has_min ? 4 : 2) + (kind == 0 ? 0 : 4);
        const uint32_t qh = kind == 0 ? 0 : lw__rd_u32(xb + (has_min ? 4 : 2));
        const int8_t *qy = (const int8_t *)(yb + (has_min ? 4 : 2));
        const float dx = H2F(lw__rd_u16(xb)), dy = H2F(lw__rd_u16(yb));
        if (has_min) summs = lw__wasm_fmaf1(H2F(lw__rd_u16(xb + 2)), H2F(lw__rd_u16(yb + 2)), summs);
        const v128_t q = wasm_v128_load(qs);
        v128_t v0 = lo_nib(q), v1 = hi_nib(q);
        if (kind != 0) {
            v0 = wasm_v128_or(v0, qh_bits16(qh, 0));
            v1 = wasm_v128_or(v1, qh_bits16(qh, 1));
        }
        if (kind == 1) {
            v0 = wasm_i8x16_sub(v0, wasm_i8x16_splat(16));
            v1 = wasm_i8x16_sub(v1, wasm_i8x16_splat(16));
        }
        pairs16 p0 = pairs_zero(), p1 = pairs_zero();
        pairs_add1(&p0, v0, wasm_v128_load(qy));
        pairs_add1(&p1, v1, wasm_v128_load(qy + 16));
        fma8(&acc, dx * dy, pairs_fold(p0), pairs_fold(p1));
    }
    return hsum8(acc) + summs;
}

static float dot_q4_1_x86(int64_t n, const void *w, const void *a) {
    return q32_x86(n, w, sizeof(lw__block_q4_1), 0, a, sizeof(lw__block_q8_1));
}
static float dot_q5_0_x86(int64_t n, const void *w, const void *a) {
    return q32_x86(n, w, sizeof(lw__block_q5_0), 1, a, sizeof(lw__block_q8_0));
}
static float dot_q5_1_x86(int64_t n, const void *w, const void *a) {
    return q32_x86(n, w, sizeof(lw__block_q5_1), 2, a, sizeof(lw__block_q8_1));
}

/* ---------------------------------------------------------------------------------------------------------
 * 32-element formats with a 4-bit code table (Q4_0, IQ4_NL, MXFP4): generic order (one float sum per block)
 * and the x86 repacked gemv order (one fmaf per block)
 * ------------------------------------------------------------------------------------------------------- */

/* The 32 values of a block: codes looked up in the 16-entry table (Q4_0: q - 8). */
static inline void codes32(const uint8_t *qs, v128_t lut, v128_t *v0, v128_t *v1) {
    const v128_t q = wasm_v128_load(qs);
    *v0 = wasm_i8x16_swizzle(lut, lo_nib(q));
    *v1 = wasm_i8x16_swizzle(lut, hi_nib(q));
}

static const int8_t q4_0_lut[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

/* kind 0: Q4_0, 1: IQ4_NL, 2: MXFP4 (as repack32_x86). */
static inline float repack32(int64_t n, const uint8_t *w, size_t bsize, int kind, const lw__block_q8_0 *y) {
    const v128_t lut = wasm_v128_load(kind == 0 ? q4_0_lut : kind == 1 ? lw__iq4nl_values : lw__kvalues_fp4);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *blk = w + (size_t)b * bsize;
        v128_t v0, v1;
        codes32(kind == 2 ? blk + 1 : blk + 2, lut, &v0, &v1);
        const int32_t sumi = dot32(v0, wasm_v128_load(y[b].qs), v1, wasm_v128_load(y[b].qs + 16));
        const float col = kind == 2 ? lw__e8m0_to_fp32_half(blk[0]) : H2F(lw__rd_u16(blk));
        acc = lw__wasm_fmaf1((float)sumi, col * H2F(y[b].d), acc);
    }
    return acc;
}

static float dot_q4_0_repack(int64_t n, const void *w, const void *a) {
    return repack32(n, w, sizeof(lw__block_q4_0), 0, a);
}
static float dot_iq4_nl_repack(int64_t n, const void *w, const void *a) {
    return repack32(n, w, sizeof(lw__block_iq4_nl), 1, a);
}
static float dot_mxfp4_repack(int64_t n, const void *w, const void *a) {
    return repack32(n, w, sizeof(lw__block_mxfp4), 2, a);
}

/* Generic orders: Q4_0 `sumf += sumi * dx * dy`; IQ4_NL and MXFP4 `sumf += (dy * dx) * sumi`. */
static float dot_q4_0_generic(int64_t n, const void *w, const void *a) {
    const lw__block_q4_0 *x = w;
    const lw__block_q8_0 *y = a;
    const v128_t lut = wasm_v128_load(q4_0_lut);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        v128_t v0, v1;
        codes32(x[ib].qs, lut, &v0, &v1);
        const int sumi = dot32(v0, wasm_v128_load(y[ib].qs), v1, wasm_v128_load(y[ib].qs + 16));
        sumf += sumi * H2F(x[ib].d) * H2F(y[ib].d);
    }
    return sumf;
}

static float dot_iq4_nl_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_nl *x = w;
    const lw__block_q8_0 *y = a;
    const v128_t lut = wasm_v128_load(lw__iq4nl_values);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK4_NL; ++ib) {
        const float d = H2F(y[ib].d) * H2F(x[ib].d);
        v128_t v0, v1;
        codes32(x[ib].qs, lut, &v0, &v1);
        sumf += d * dot32(v0, wasm_v128_load(y[ib].qs), v1, wasm_v128_load(y[ib].qs + 16));
    }
    return sumf;
}

static float dot_mxfp4_generic(int64_t n, const void *w, const void *a) {
    const lw__block_mxfp4 *x = w;
    const lw__block_q8_0 *y = a;
    const v128_t lut = wasm_v128_load(lw__kvalues_fp4);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK_MXFP4; ++ib) {
        const float d = H2F(y[ib].d) * lw__e8m0_to_fp32_half(x[ib].e);
        v128_t v0, v1;
        codes32(x[ib].qs, lut, &v0, &v1);
        sumf += d * dot32(v0, wasm_v128_load(y[ib].qs), v1, wasm_v128_load(y[ib].qs + 16));
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * K-quants (x86 order): a super-block's values v[256] and per-16 scales go to 8 int32 lanes, one fma8
 * ------------------------------------------------------------------------------------------------------- */

/* lanes (lo: 0-3, hi: 4-7) of sum sc16[e / 16] * v[e] * q8[e], lane of e = (e mod 32) / 4. */
static inline void lanes_k(const int8_t *v, const int8_t *q8, const int16_t *sc16, v128_t *lo, v128_t *hi) {
    pairs16 p0 = pairs_zero(), p1 = pairs_zero();
    for (int c = 0; c < 8; c++) {
        pairs_add(&p0, wasm_v128_load(v + 32 * c), wasm_v128_load(q8 + 32 * c), wasm_i16x8_splat(sc16[2 * c]));
        pairs_add(&p1, wasm_v128_load(v + 32 * c + 16), wasm_v128_load(q8 + 32 * c + 16), wasm_i16x8_splat(sc16[2 * c + 1]));
    }
    *lo = pairs_fold(p0);
    *hi = pairs_fold(p1);
}

/* Per chunk of 32 (k = 0..7): bsums[2k] * m[2k] + bsums[2k+1] * m[2k+1] (m: 16 int16), as lo (k 0-3), hi. */
static inline void chunk_terms(const int16_t *bsums, const int16_t *m, v128_t *lo, v128_t *hi) {
    *lo = wasm_i32x4_dot_i16x8(wasm_v128_load(bsums), wasm_v128_load(m));
    *hi = wasm_i32x4_dot_i16x8(wasm_v128_load(bsums + 8), wasm_v128_load(m + 8));
}

static float dot_q2_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q2_K *x = w;
    const lw__block_q8_K *y = a;
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * H2F(x[i].d);
        const float dmin = -y[i].d * H2F(x[i].dmin);
        int16_t sc[16], mn[16];
        for (int j = 0; j < 16; j++) {
            sc[j] = x[i].scales[j] & 0xf;
            mn[j] = x[i].scales[j] >> 4;
        }
        v128_t pm_lo, pm_hi;
        chunk_terms(y[i].bsums, mn, &pm_lo, &pm_hi);
        fma8(&acc, dmin, pm_lo, pm_hi); /* the min term first, per block */
        int8_t v[LW_QK_K];
        for (int j = 0; j < 2; j++)
            for (int s = 0; s < 4; s++)
                for (int h = 0; h < 2; h++) {
                    const v128_t q = wasm_v128_load(x[i].qs + 32 * j + 16 * h);
                    wasm_v128_store(v + 128 * j + 32 * s + 16 * h, wasm_v128_and(wasm_u8x16_shr(q, 2 * s), wasm_i8x16_splat(3)));
                }
        v128_t lo, hi;
        lanes_k(v, y[i].qs, sc, &lo, &hi);
        fma8(&acc, d, lo, hi);
    }
    return hsum8(acc);
}

static float dot_q3_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q3_K *x = w;
    const lw__block_q8_K *y = a;
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * H2F(x[i].d);
        int8_t v[LW_QK_K];
        const v128_t hm0 = wasm_v128_load(x[i].hmask), hm1 = wasm_v128_load(x[i].hmask + 16);
        for (int j = 0; j < 2; j++)
            for (int s = 0; s < 4; s++) {
                const v128_t m = wasm_i8x16_splat((int8_t)(1 << (4 * j + s)));
                for (int h = 0; h < 2; h++) {
                    const v128_t q = wasm_v128_and(wasm_u8x16_shr(wasm_v128_load(x[i].qs + 32 * j + 16 * h), 2 * s), wasm_i8x16_splat(3));
                    /* minus 4 where the hmask bit is clear */
                    const v128_t set = wasm_i8x16_eq(wasm_v128_and(h ? hm1 : hm0, m), m);
                    wasm_v128_store(v + 128 * j + 32 * s + 16 * h, wasm_i8x16_sub(q, wasm_v128_andnot(wasm_i8x16_splat(4), set)));
                }
            }
        int16_t sc[16];
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? x[i].scales[j] & 0xf : x[i].scales[j - 8] >> 4;
            const int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            sc[j] = (int16_t)((lo | (hi << 4)) - 32);
        }
        v128_t lo, hi;
        lanes_k(v, y[i].qs, sc, &lo, &hi);
        fma8(&acc, d, lo, hi);
    }
    return hsum8(acc);
}

/* Q4_K / Q5_K: values 0..31, 6-bit scales per 32; the min term in 4 float lanes (Q4_K) or one sum (Q5_K). */
static inline float k4_x86(int64_t n, const void *w, const lw__block_q8_K *y, int five) {
    const lw__block_q4_K *x4 = w;
    const lw__block_q5_K *x5 = w;
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    float acc_m[4] = {0}, summs = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const uint8_t *scales = five ? x5[i].scales : x4[i].scales;
        const uint16_t dh = five ? x5[i].d : x4[i].d, dminh = five ? x5[i].dmin : x4[i].dmin;
        const float d = y[i].d * H2F(dh);
        const float dmin = -y[i].d * H2F(dminh);
        int sc[8], mn[8];
        int16_t sc16[16];
        for (int j = 0; j < 8; ++j) {
            lw__k4_scale_min(j, scales, &sc[j], &mn[j]);
            sc16[2 * j] = sc16[2 * j + 1] = (int16_t)sc[j];
        }
        int32_t q8s[8];
        for (int m = 0; m < 8; ++m) q8s[m] = y[i].bsums[2 * m] + y[i].bsums[2 * m + 1];
        if (five) {
            int32_t total = 0;
            for (int m = 0; m < 8; ++m) total += mn[m] * q8s[m];
            summs = lw__wasm_fmaf1(dmin, (float)total, summs);
        } else {
            for (int p = 0; p < 4; ++p)
                acc_m[p] = lw__wasm_fmaf1(dmin, (float)(mn[2 * p] * q8s[2 * p] + mn[2 * p + 1] * q8s[2 * p + 1]), acc_m[p]);
        }
        int8_t v[LW_QK_K];
        const uint8_t *q = five ? x5[i].qs : x4[i].qs;
        for (int j = 0; j < 4; ++j)
            for (int h = 0; h < 2; h++) {
                const v128_t qq = wasm_v128_load(q + 32 * j + 16 * h);
                v128_t lo = lo_nib(qq), hi = hi_nib(qq);
                if (five) {
                    const v128_t qh = wasm_v128_load(x5[i].qh + 16 * h);
                    const v128_t b0 = wasm_i8x16_splat((int8_t)(1 << (2 * j))), b1 = wasm_i8x16_splat((int8_t)(1 << (2 * j + 1)));
                    lo = wasm_v128_or(lo, wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(qh, b0), b0), wasm_i8x16_splat(0x10)));
                    hi = wasm_v128_or(hi, wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(qh, b1), b1), wasm_i8x16_splat(0x10)));
                }
                wasm_v128_store(v + 64 * j + 16 * h, lo);
                wasm_v128_store(v + 64 * j + 32 + 16 * h, hi);
            }
        v128_t lo, hi;
        lanes_k(v, y[i].qs, sc16, &lo, &hi);
        fma8(&acc, d, lo, hi);
    }
    if (five) return hsum8(acc) + summs;
    return hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

static float dot_q4_K_x86(int64_t n, const void *w, const void *a) { return k4_x86(n, w, a, 0); }
static float dot_q5_K_x86(int64_t n, const void *w, const void *a) { return k4_x86(n, w, a, 1); }

static float dot_q6_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q6_K *x = w;
    const lw__block_q8_K *y = a;
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * H2F(x[i].d);
        /* unsigned 6-bit values; the -32 offset comes through the activation sums per lane */
        int8_t u[LW_QK_K];
        const v128_t m4 = wasm_i8x16_splat(0x0f), m3 = wasm_i8x16_splat(0x30);
        for (int j = 0; j < 2; j++)
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = x[i].ql + 64 * j + 16 * h, *qh = x[i].qh + 32 * j + 16 * h;
                const v128_t l0 = wasm_v128_load(ql), l1 = wasm_v128_load(ql + 32), hb = wasm_v128_load(qh);
                int8_t *o = u + 128 * j + 16 * h;
                wasm_v128_store(o + 0, wasm_v128_or(wasm_v128_and(l0, m4), wasm_v128_and(wasm_i8x16_shl(hb, 4), m3)));
                wasm_v128_store(o + 32, wasm_v128_or(wasm_v128_and(l1, m4), wasm_v128_and(wasm_i8x16_shl(hb, 2), m3)));
                wasm_v128_store(o + 64, wasm_v128_or(wasm_u8x16_shr(l0, 4), wasm_v128_and(hb, m3)));
                wasm_v128_store(o + 96, wasm_v128_or(wasm_u8x16_shr(l1, 4), wasm_v128_and(wasm_u8x16_shr(hb, 2), m3)));
            }
        int16_t sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = x[i].scales[j];
        v128_t lo, hi, c_lo, c_hi;
        lanes_k(u, y[i].qs, sc, &lo, &hi);
        chunk_terms(y[i].bsums, sc, &c_lo, &c_hi);
        lo = wasm_i32x4_sub(lo, wasm_i32x4_shl(c_lo, 5));
        hi = wasm_i32x4_sub(hi, wasm_i32x4_shl(c_hi, 5));
        fma8(&acc, d, lo, hi);
    }
    return hsum8(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ4_XS: x86 order (8 lanes, scales per 32) and generic order (one float sum per 32)
 * ------------------------------------------------------------------------------------------------------- */

static inline int iq4_xs_scale(const lw__block_iq4_xs *x, int ib) {
    return (((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((x->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

static float dot_iq4_xs_x86(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_xs *x = w;
    const lw__block_q8_K *y = a;
    const v128_t lut = wasm_v128_load(lw__iq4nl_values);
    acc8 acc = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        pairs16 p0 = pairs_zero(), p1 = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const v128_t s = wasm_i16x8_splat((int16_t)iq4_xs_scale(&x[i], ib));
            v128_t v0, v1;
            codes32(x[i].qs + 16 * ib, lut, &v0, &v1);
            pairs_add(&p0, v0, wasm_v128_load(y[i].qs + 32 * ib), s);
            pairs_add(&p1, v1, wasm_v128_load(y[i].qs + 32 * ib + 16), s);
        }
        fma8(&acc, H2F(x[i].d) * y[i].d, pairs_fold(p0), pairs_fold(p1));
    }
    return hsum8(acc);
}

static float dot_iq4_xs_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_xs *x = w;
    const lw__block_q8_K *y = a;
    const v128_t lut = wasm_v128_load(lw__iq4nl_values);
    float sumf = 0;
    for (int64_t ibl = 0; ibl < n / LW_QK_K; ++ibl) {
        const float d4d8 = H2F(x[ibl].d) * y[ibl].d;
        for (int ib = 0; ib < 8; ++ib) {
            const float dl = d4d8 * iq4_xs_scale(&x[ibl], ib);
            v128_t v0, v1;
            codes32(x[ibl].qs + 16 * ib, lut, &v0, &v1);
            const int8_t *q8 = y[ibl].qs + 32 * ib;
            sumf += dl * dot32(v0, wasm_v128_load(q8), v1, wasm_v128_load(q8 + 16));
        }
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * Repacked K-quant orders (Q4_K gemv/gemm; Q2_K gemv/gemm): scalar fmaf chains over integer sub-block sums
 * ------------------------------------------------------------------------------------------------------- */

static inline float q4_K_repack(int64_t n, const lw__block_q4_K *x, const lw__block_q8_K *y, int per) {
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) lw__k4_scale_min(j, x[i].scales, &sc[j], &mn[j]);
        const float dw = H2F(x[i].d) * y[i].d, dm = H2F(x[i].dmin) * y[i].d;
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; ++j) {
            const v128_t q0 = wasm_v128_load(x[i].qs + 32 * (j / 2)), q1 = wasm_v128_load(x[i].qs + 32 * (j / 2) + 16);
            const v128_t v0 = (j % 2) ? hi_nib(q0) : lo_nib(q0), v1 = (j % 2) ? hi_nib(q1) : lo_nib(q1);
            const int32_t s = dot32(v0, wasm_v128_load(y[i].qs + 32 * j), v1, wasm_v128_load(y[i].qs + 32 * j + 16));
            isum += sc[j] * s;
            imin += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            if ((j + 1) % per == 0) {
                acc = lw__wasm_fmaf1((float)isum, dw, acc);
                acc_min = lw__wasm_fmaf1((float)imin, dm, acc_min);
                isum = imin = 0;
            }
        }
    }
    return acc - acc_min;
}

static float dot_q4_K_repack(int64_t n, const void *w, const void *a) { return q4_K_repack(n, w, a, 8); }
static float dot_q4_K_repack_gemm(int64_t n, const void *w, const void *a) { return q4_K_repack(n, w, a, 2); }

static inline float q2_K_repack(int64_t n, const lw__block_q2_K *x, const lw__block_q8_K *y, int per) {
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float dw = H2F(x[i].d) * y[i].d, dm = H2F(x[i].dmin) * y[i].d;
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 16; ++j) { /* sub-block j: elements 16j..16j+15 */
            const int half = j / 8, shift = 2 * ((j % 8) / 2), off = 16 * (j % 2);
            const v128_t v = wasm_v128_and(wasm_u8x16_shr(wasm_v128_load(x[i].qs + 32 * half + off), shift), wasm_i8x16_splat(3));
            pairs16 p = pairs_zero();
            pairs_add1(&p, v, wasm_v128_load(y[i].qs + 16 * j));
            isum += (x[i].scales[j] & 0xf) * hsum_i32x4(wasm_i32x4_add(p.a, p.b));
            imin += (x[i].scales[j] >> 4) * y[i].bsums[j];
            if ((j + 1) % per == 0) {
                acc = lw__wasm_fmaf1((float)isum, dw, acc);
                acc_min = lw__wasm_fmaf1((float)imin, dm, acc_min);
                isum = imin = 0;
            }
        }
    }
    return acc - acc_min;
}

static float dot_q2_K_repack(int64_t n, const void *w, const void *a) { return q2_K_repack(n, w, a, 16); }
static float dot_q2_K_repack_gemm(int64_t n, const void *w, const void *a) { return q2_K_repack(n, w, a, 8); }

/* ---------------------------------------------------------------------------------------------------------
 * IQ2 / IQ3 grid formats, generic order: an exact integer sum per super-block (scales per 16 or 32), then
 * `sumf += d * bsum` and a constant factor, as the references
 * ------------------------------------------------------------------------------------------------------- */

/* 16 signed values: grid magnitudes g0 (bytes 0-7), g1 (8-15), negated where sign bits s0 / s1 are set. */
static inline v128_t signed16(uint64_t g0, uint64_t g1, uint8_t s0, uint8_t s1) {
    const v128_t sb = wasm_i8x16_swizzle(wasm_i16x8_splat((int16_t)(s0 | (s1 << 8))),
                                         wasm_i8x16_const(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const v128_t bit = wasm_u8x16_const(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    const v128_t neg = wasm_i8x16_eq(wasm_v128_and(sb, bit), bit);
    const v128_t g = wasm_i64x2_make((int64_t)g0, (int64_t)g1);
    return wasm_i8x16_sub(wasm_v128_xor(g, neg), neg);
}

static inline uint64_t grid3_pair(uint32_t a, uint32_t b) { return (uint64_t)a | ((uint64_t)b << 32); }

/* p += v (32 values as two halves) times the 32 activations at q8, scaled by s0 (first 16) and s1. */
static inline void iq_add32(pairs16 *p, v128_t v0, v128_t v1, const int8_t *q8, int s0, int s1) {
    pairs_add(p, v0, wasm_v128_load(q8), wasm_i16x8_splat((int16_t)s0));
    pairs_add(p, v1, wasm_v128_load(q8 + 16), wasm_i16x8_splat((int16_t)s1));
}

static inline int32_t pairs_total(pairs16 p) { return hsum_i32x4(wasm_i32x4_add(p.a, p.b)); }

static float dot_iq2_xxs_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq2_xxs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        pairs16 p = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const uint32_t idx = (uint32_t)x[i].qs[4 * ib] | ((uint32_t)x[i].qs[4 * ib + 1] << 16);
            const uint32_t aux = (uint32_t)x[i].qs[4 * ib + 2] | ((uint32_t)x[i].qs[4 * ib + 3] << 16);
            const int ls = (int)(2 * (aux >> 28) + 1);
            v128_t v[2];
            for (int h = 0; h < 2; h++)
                v[h] = signed16(lw__iq2xxs_grid[(idx >> (16 * h)) & 0xff], lw__iq2xxs_grid[(idx >> (16 * h + 8)) & 0xff],
                                lw__iq_ksigns[(aux >> (14 * h)) & 127], lw__iq_ksigns[(aux >> (14 * h + 7)) & 127]);
            iq_add32(&p, v[0], v[1], y[i].qs + 32 * ib, ls, ls);
        }
        sumf += d * pairs_total(p);
    }
    return 0.125f * sumf;
}

static float dot_iq2_xs_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq2_xs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        pairs16 p = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const uint16_t *q = x[i].qs + 4 * ib;
            v128_t v[2];
            for (int h = 0; h < 2; h++)
                v[h] = signed16(lw__iq2xs_grid[q[2 * h] & 511], lw__iq2xs_grid[q[2 * h + 1] & 511], lw__iq_ksigns[q[2 * h] >> 9],
                                lw__iq_ksigns[q[2 * h + 1] >> 9]);
            iq_add32(&p, v[0], v[1], y[i].qs + 32 * ib, 2 * (x[i].scales[ib] & 0xf) + 1, 2 * (x[i].scales[ib] >> 4) + 1);
        }
        sumf += d * pairs_total(p);
    }
    return 0.125f * sumf;
}

static float dot_iq2_s_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq2_s *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; i++) {
        const float d = H2F(x[i].d) * y[i].d;
        const uint8_t *signs = x[i].qs + LW_QK_K / 8;
        pairs16 p = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *qs = x[i].qs + 4 * ib, qh = x[i].qh[ib];
            v128_t v[2];
            for (int h = 0; h < 2; h++) {
                const int l0 = 2 * h, l1 = 2 * h + 1;
                v[h] = signed16(lw__iq2s_grid[qs[l0] | ((qh << (8 - 2 * l0)) & 0x300)],
                                lw__iq2s_grid[qs[l1] | ((qh << (8 - 2 * l1)) & 0x300)], signs[4 * ib + l0], signs[4 * ib + l1]);
            }
            iq_add32(&p, v[0], v[1], y[i].qs + 32 * ib, 1 + 2 * (x[i].scales[ib] & 0xf), 1 + 2 * (x[i].scales[ib] >> 4));
        }
        sumf += d * pairs_total(p);
    }
    return 0.125f * sumf;
}

static float dot_iq3_xxs_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq3_xxs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        const uint8_t *gas = x[i].qs + LW_QK_K / 4;
        pairs16 p = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *q3 = x[i].qs + 8 * ib;
            const uint32_t aux = lw__rd_u32(gas + 4 * ib);
            const int ls = (int)(2 * (aux >> 28) + 1);
            v128_t v[2];
            for (int h = 0; h < 2; h++) {
                const int l0 = 2 * h, l1 = 2 * h + 1;
                v[h] = signed16(grid3_pair(lw__iq3xxs_grid[q3[2 * l0]], lw__iq3xxs_grid[q3[2 * l0 + 1]]),
                                grid3_pair(lw__iq3xxs_grid[q3[2 * l1]], lw__iq3xxs_grid[q3[2 * l1 + 1]]),
                                lw__iq_ksigns[(aux >> (7 * l0)) & 127], lw__iq_ksigns[(aux >> (7 * l1)) & 127]);
            }
            iq_add32(&p, v[0], v[1], y[i].qs + 32 * ib, ls, ls);
        }
        sumf += d * pairs_total(p);
    }
    return 0.25f * sumf;
}

static float dot_iq3_s_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq3_s *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        pairs16 p = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *qs = x[i].qs + 8 * ib, *signs = x[i].signs + 4 * ib, qh = x[i].qh[ib];
            const int ls = (int)(2 * ((x[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1);
            uint64_t g[4];
            for (int l = 0; l < 4; l++)
                g[l] = grid3_pair(lw__iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)],
                                  lw__iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)]);
            iq_add32(&p, signed16(g[0], g[1], signs[0], signs[1]), signed16(g[2], g[3], signs[2], signs[3]),
                     y[i].qs + 32 * ib, ls, ls);
        }
        sumf += d * pairs_total(p);
    }
    return sumf;
}

/* IQ1_S / IQ1_M: grid values -1..1 with scales, plus a +-delta term from the activation sums. */
static float dot_iq1_s_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq1_s *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; i++) {
        pairs16 p = pairs_zero();
        int sumi1 = 0;
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *qs = x[i].qs + 4 * ib;
            const uint16_t qh = x[i].qh[ib];
            const int ls = 2 * ((qh >> 12) & 7) + 1;
            const int delta = qh & 0x8000 ? -1 : 1;
            uint64_t g[4];
            for (int l = 0; l < 4; l++) g[l] = lw__iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
            iq_add32(&p, wasm_i64x2_make((int64_t)g[0], (int64_t)g[1]), wasm_i64x2_make((int64_t)g[2], (int64_t)g[3]),
                     y[i].qs + 32 * ib, ls, ls);
            sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        const int sumi = pairs_total(p);
        sumf += H2F(x[i].d) * y[i].d * (sumi + LW_IQ1S_DELTA * sumi1);
    }
    return sumf;
}

static float dot_iq1_m_generic(int64_t n, const void *w, const void *a) {
    const lw__block_iq1_m *x = w;
    const lw__block_q8_K *y = a;
    const uint64_t ones = 0x0101010101010101ull;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; i++) {
        uint16_t sc[4];
        for (int k = 0; k < 4; k++) sc[k] = lw__rd_u16(x[i].scales + 2 * k);
        const uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        pairs16 p1 = pairs_zero(), p2 = pairs_zero();
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *qs = x[i].qs + 4 * ib, *qh = x[i].qh + 2 * ib;
            const int ls1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            const int ls2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            uint64_t g[4];
            uint8_t neg[4];
            for (int l = 0; l < 4; l++) {
                g[l] = lw__iq1s_grid[qs[l] | (((uint16_t)qh[l / 2] << (8 - 4 * (l % 2))) & 0x700)];
                neg[l] = qh[l / 2] & (l % 2 ? 0x80 : 0x08) ? 0xff : 0; /* delta -1 for all 8 values */
            }
            iq_add32(&p1, wasm_i64x2_make((int64_t)g[0], (int64_t)g[1]), wasm_i64x2_make((int64_t)g[2], (int64_t)g[3]),
                     y[i].qs + 32 * ib, ls1, ls2);
            iq_add32(&p2, signed16(ones, ones, neg[0], neg[1]), signed16(ones, ones, neg[2], neg[3]), y[i].qs + 32 * ib, ls1,
                     ls2);
        }
        const int sumi1 = pairs_total(p1), sumi2 = pairs_total(p2);
        sumf += H2F(dh) * y[i].d * (sumi1 + LW_IQ1M_DELTA * sumi2);
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * TQ2_0, Q2_0, Q1_0, NVFP4 (generic order): exact integer sums, the references' float steps
 * ------------------------------------------------------------------------------------------------------- */

/* Sum of the 16 products x[e] * y[e] (exact). */
static inline int32_t dot16(v128_t x, v128_t y) {
    pairs16 p = pairs_zero();
    pairs_add1(&p, x, y);
    return pairs_total(p);
}

/* The 2-bit codes (b >> 2(e % 4)) & 3 of 16 elements e from 4 bytes (4 per byte, low bits first). */
static inline v128_t codes2(const uint8_t *q4) {
    const v128_t b = wasm_i8x16_swizzle(wasm_v128_load32_zero(q4), wasm_i8x16_const(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    const v128_t m0 = wasm_u8x16_const(1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64);
    const v128_t m1 = wasm_u8x16_const(2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128);
    const v128_t b0 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(b, m0), m0), wasm_i8x16_splat(1));
    const v128_t b1 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(b, m1), m1), wasm_i8x16_splat(2));
    return wasm_v128_or(b0, b1);
}

static float dot_tq2_0_generic(int64_t n, const void *w, const void *a) {
    const lw__block_tq2_0 *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        pairs16 p = pairs_zero();
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int h = 0; h < 2; h++) {
                    const v128_t q = wasm_v128_load(x[i].qs + j + 16 * h);
                    const v128_t v = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(q, 2 * l), wasm_i8x16_splat(3)), wasm_i8x16_splat(1));
                    pairs_add1(&p, v, wasm_v128_load(y[i].qs + j * 4 + l * 32 + 16 * h));
                }
        const int32_t sumi = pairs_total(p);
        const float d = y[i].d * H2F(x[i].d);
        sumf += (float)sumi * d;
    }
    return sumf;
}

static float dot_q2_0_generic(int64_t n, const void *w, const void *a) {
    const lw__block_q2_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK2_0; i++) {
        const float d0 = H2F(x[i].d);
        float sumi = 0.0f;
        for (int k = 0; k < 2; k++) {
            const lw__block_q8_0 *yb = &y[i * 2 + k];
            const v128_t v0 = wasm_i8x16_sub(codes2(x[i].qs + k * 8), wasm_i8x16_splat(1));
            const v128_t v1 = wasm_i8x16_sub(codes2(x[i].qs + k * 8 + 4), wasm_i8x16_splat(1));
            const int sumi_block = dot32(v0, wasm_v128_load(yb->qs), v1, wasm_v128_load(yb->qs + 16));
            sumi += H2F(yb->d) * sumi_block;
        }
        sumf += d0 * sumi;
    }
    return sumf;
}

/* TQ1_0 trits: (((uint8_t)(q * p3) * 3) >> 8) - 1 for 16 bytes q and per-byte powers of 3 p3 (u8 products
 * in u16, low byte kept). */
static inline v128_t trits16(v128_t q, v128_t p3) {
    const v128_t m = wasm_i16x8_splat(0xff), three = wasm_i16x8_splat(3);
    const v128_t lo = wasm_u16x8_shr(wasm_i16x8_mul(wasm_v128_and(wasm_u16x8_extmul_low_u8x16(q, p3), m), three), 8);
    const v128_t hi = wasm_u16x8_shr(wasm_i16x8_mul(wasm_v128_and(wasm_u16x8_extmul_high_u8x16(q, p3), m), three), 8);
    return wasm_i8x16_sub(wasm_u8x16_narrow_i16x8(lo, hi), wasm_i8x16_splat(1));
}

static float dot_tq1_0_generic(int64_t n, const void *w, const void *a) {
    const lw__block_tq1_0 *x = w;
    const lw__block_q8_K *y = a;
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        /* dequantize order: 5 x 32 (qs[0..31] times 3^t), 5 x 16 (qs[32..47]), 4 x 4 (qh[0..3]) */
        const int8_t *q8 = y[i].qs;
        pairs16 p = pairs_zero();
        const v128_t q0 = wasm_v128_load(x[i].qs), q1 = wasm_v128_load(x[i].qs + 16), q2 = wasm_v128_load(x[i].qs + 32);
        for (int t = 0; t < 5; ++t, q8 += 32) {
            const v128_t p3 = wasm_i8x16_splat((int8_t)pow3[t]);
            pairs_add1(&p, trits16(q0, p3), wasm_v128_load(q8));
            pairs_add1(&p, trits16(q1, p3), wasm_v128_load(q8 + 16));
        }
        for (int t = 0; t < 5; ++t, q8 += 16) pairs_add1(&p, trits16(q2, wasm_i8x16_splat((int8_t)pow3[t])), wasm_v128_load(q8));
        const v128_t qh = wasm_i8x16_swizzle(wasm_v128_load32_zero(x[i].qh), wasm_i8x16_const(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3));
        pairs_add1(&p, trits16(qh, wasm_u8x16_const(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27)), wasm_v128_load(q8));
        const int sum = pairs_total(p);
        sumf += (float)sum * (H2F(x[i].d) * y[i].d);
    }
    return sumf;
}

/* +1 / -1 for the 16 bits of 2 bytes (bit e % 8 of byte e / 8). */
static inline v128_t signs16(const uint8_t *b2) {
    const v128_t b = wasm_i8x16_swizzle(wasm_v128_load16_splat(b2), wasm_i8x16_const(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const v128_t bit = wasm_u8x16_const(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    const v128_t set = wasm_i8x16_eq(wasm_v128_and(b, bit), bit);
    return wasm_v128_bitselect(wasm_i8x16_splat(1), wasm_i8x16_splat(-1), set);
}

static float dot_q1_0_generic(int64_t n, const void *w, const void *a) {
    const lw__block_q1_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK1_0; i++) {
        const float d0 = H2F(x[i].d);
        float sumi = 0.0f;
        for (int k = 0; k < 4; k++) {
            const lw__block_q8_0 *yb = &y[i * 4 + k];
            const int sumi_block = dot32(signs16(x[i].qs + k * 4), wasm_v128_load(yb->qs), signs16(x[i].qs + k * 4 + 2),
                                         wasm_v128_load(yb->qs + 16));
            sumi += H2F(yb->d) * sumi_block;
        }
        sumf += d0 * sumi;
    }
    return sumf;
}

static float dot_nvfp4_generic(int64_t n, const void *w, const void *a) {
    const lw__block_nvfp4 *x = w;
    const lw__block_q8_0 *y = a;
    const v128_t lut = wasm_v128_load(lw__kvalues_fp4);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK_NVFP4; ++ib) {
        for (int s = 0; s < 4; ++s) {
            const float d = lw__ue4m3_to_fp32(x[ib].d[s]);
            const lw__block_q8_0 *yb = &y[2 * ib + s / 2];
            const float dy = H2F(yb->d);
            /* 8 bytes: low nibbles are elements 0..7 of the sub-block, high nibbles 8..15 */
            const v128_t q = wasm_v128_load64_zero(x[ib].qs + 8 * s);
            const v128_t codes = wasm_i8x16_shuffle(lo_nib(q), hi_nib(q), 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            const int sum = dot16(wasm_i8x16_swizzle(lut, codes), wasm_v128_load(yb->qs + (s % 2) * 16));
            sumf += dy * d * sum;
        }
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * Selection
 * ------------------------------------------------------------------------------------------------------- */

lw__vec_dot_fn lw__quant_dot_wasm(lw__vec_dot_fn ref) {
    static const struct {
        lw__vec_dot_fn ref;  /* scalar reference   */
        lw__vec_dot_fn simd; /* its simd128 twin   */
    } table[] = {
        {lw__vec_dot_q8_0_q8_0_x86, dot_q8_0_x86},
        {lw__vec_dot_q4_1_q8_1_x86, dot_q4_1_x86},
        {lw__vec_dot_q5_0_q8_0_x86, dot_q5_0_x86},
        {lw__vec_dot_q5_1_q8_1_x86, dot_q5_1_x86},
        {lw__vec_dot_q4_0_q8_0_x86_repack, dot_q4_0_repack},
        {lw__vec_dot_iq4_nl_q8_0_x86_repack, dot_iq4_nl_repack},
        {lw__vec_dot_mxfp4_q8_0_x86_repack, dot_mxfp4_repack},
        {lw__vec_dot_q4_0_q8_0_ref, dot_q4_0_generic},
        {lw__vec_dot_iq4_nl_q8_0_ref, dot_iq4_nl_generic},
        {lw__vec_dot_mxfp4_q8_0_ref, dot_mxfp4_generic},
        {lw__vec_dot_q2_K_q8_K_x86, dot_q2_K_x86},
        {lw__vec_dot_q3_K_q8_K_x86, dot_q3_K_x86},
        {lw__vec_dot_q4_K_q8_K_x86, dot_q4_K_x86},
        {lw__vec_dot_q5_K_q8_K_x86, dot_q5_K_x86},
        {lw__vec_dot_q6_K_q8_K_x86, dot_q6_K_x86},
        {lw__vec_dot_iq4_xs_q8_K_x86, dot_iq4_xs_x86},
        {lw__vec_dot_iq4_xs_q8_K_ref, dot_iq4_xs_generic},
        {lw__vec_dot_q4_K_q8_K_x86_repack, dot_q4_K_repack},
        {lw__vec_dot_q4_K_q8_K_x86_repack_gemm, dot_q4_K_repack_gemm},
        {lw__vec_dot_q2_K_q8_K_x86_repack, dot_q2_K_repack},
        {lw__vec_dot_q2_K_q8_K_x86_repack_gemm, dot_q2_K_repack_gemm},
        {lw__vec_dot_iq2_xxs_q8_K_ref, dot_iq2_xxs_generic},
        {lw__vec_dot_iq2_xs_q8_K_ref, dot_iq2_xs_generic},
        {lw__vec_dot_iq2_s_q8_K_ref, dot_iq2_s_generic},
        {lw__vec_dot_iq3_xxs_q8_K_ref, dot_iq3_xxs_generic},
        {lw__vec_dot_iq3_s_q8_K_ref, dot_iq3_s_generic},
        {lw__vec_dot_iq1_s_q8_K_ref, dot_iq1_s_generic},
        {lw__vec_dot_iq1_m_q8_K_ref, dot_iq1_m_generic},
        {lw__vec_dot_tq1_0_q8_K_ref, dot_tq1_0_generic},
        {lw__vec_dot_tq2_0_q8_K_ref, dot_tq2_0_generic},
        {lw__vec_dot_q2_0_q8_0_ref, dot_q2_0_generic},
        {lw__vec_dot_q1_0_q8_0_ref, dot_q1_0_generic},
        {lw__vec_dot_nvfp4_q8_0_ref, dot_nvfp4_generic},
    };
    if (!ref) return NULL;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].ref == ref) return table[i].simd;
    return NULL;
}

#else

lw__vec_dot_fn lw__quant_dot_wasm(lw__vec_dot_fn ref) {
    (void)ref;
    return NULL;
}

#endif
