/* fmaf for 4 float lanes in WebAssembly SIMD (simd128), giving exactly the bits of Emscripten's libc fmaf
 * (musl), which the scalar references call: wasm has no fused multiply-add. Used by quant-dot-wasm.c and
 * engine-wasm.c; include only under __wasm_simd128__.
 *
 * musl's fmaf: xy = (double)x * y (exact), r = xy + z in double, and (float)r, unless r lies exactly halfway
 * between two floats (low 29 bits of the double 0x10000000) while the double sum was inexact, where rounding
 * twice could be wrong and it corrects the last bit. Here two lanes at a time in f64x2: the common case
 * inline; halfway but exact (frequent with few-bit values such as fp16 products) inline too; only a lane
 * that is halfway and inexact sends the 4 lanes through fmaf itself, so the result is fmaf's by
 * construction. */
#ifndef LW_FMA_WASM_H
#define LW_FMA_WASM_H

#include <math.h>
#include <stdint.h>
#include <wasm_simd128.h>

/* Lanes of r (f64x2) that need fmaf's correction: halfway between floats and not the exact sum xy + z. */
static inline v128_t lw__wasm_fma_fixup(v128_t r, v128_t xy, v128_t z) {
    const v128_t half = wasm_i64x2_eq(wasm_v128_and(r, wasm_i64x2_splat(0x1fffffff)), wasm_i64x2_splat(0x10000000));
    if (__builtin_expect(!wasm_v128_any_true(half), 1)) return half;
    const v128_t exact = wasm_v128_and(wasm_f64x2_eq(wasm_f64x2_sub(r, xy), z), wasm_f64x2_eq(wasm_f64x2_sub(r, z), xy));
    return wasm_v128_andnot(half, exact);
}

/* fmaf(a[k], b[k], c[k]) for the 4 lanes. */
static inline v128_t lw__wasm_fmaf4(v128_t a, v128_t b, v128_t c) {
    const v128_t ah = wasm_i32x4_shuffle(a, a, 2, 3, 2, 3), bh = wasm_i32x4_shuffle(b, b, 2, 3, 2, 3),
                 ch = wasm_i32x4_shuffle(c, c, 2, 3, 2, 3);
    const v128_t xy0 = wasm_f64x2_mul(wasm_f64x2_promote_low_f32x4(a), wasm_f64x2_promote_low_f32x4(b));
    const v128_t xy1 = wasm_f64x2_mul(wasm_f64x2_promote_low_f32x4(ah), wasm_f64x2_promote_low_f32x4(bh));
    const v128_t z0 = wasm_f64x2_promote_low_f32x4(c), z1 = wasm_f64x2_promote_low_f32x4(ch);
    const v128_t r0 = wasm_f64x2_add(xy0, z0), r1 = wasm_f64x2_add(xy1, z1);
    if (__builtin_expect(wasm_v128_any_true(wasm_v128_or(lw__wasm_fma_fixup(r0, xy0, z0), lw__wasm_fma_fixup(r1, xy1, z1))), 0)) {
        float av[4], bv[4], cv[4];
        wasm_v128_store(av, a);
        wasm_v128_store(bv, b);
        wasm_v128_store(cv, c);
        for (int k = 0; k < 4; k++) cv[k] = fmaf(av[k], bv[k], cv[k]);
        return wasm_v128_load(cv);
    }
    return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(r0), wasm_f32x4_demote_f64x2_zero(r1), 0, 1, 4, 5);
}

/* fmaf(a, b[k], c[k]) for the 4 lanes, one scalar a (a block scale times 8 integer lanes). */
static inline v128_t lw__wasm_fmaf4s(float a, v128_t b, v128_t c) {
    const v128_t bh = wasm_i32x4_shuffle(b, b, 2, 3, 2, 3), ch = wasm_i32x4_shuffle(c, c, 2, 3, 2, 3);
    const v128_t aa = wasm_f64x2_splat((double)a);
    const v128_t xy0 = wasm_f64x2_mul(aa, wasm_f64x2_promote_low_f32x4(b)), xy1 = wasm_f64x2_mul(aa, wasm_f64x2_promote_low_f32x4(bh));
    const v128_t z0 = wasm_f64x2_promote_low_f32x4(c), z1 = wasm_f64x2_promote_low_f32x4(ch);
    const v128_t r0 = wasm_f64x2_add(xy0, z0), r1 = wasm_f64x2_add(xy1, z1);
    if (__builtin_expect(wasm_v128_any_true(wasm_v128_or(lw__wasm_fma_fixup(r0, xy0, z0), lw__wasm_fma_fixup(r1, xy1, z1))), 0)) {
        float bv[4], cv[4];
        wasm_v128_store(bv, b);
        wasm_v128_store(cv, c);
        for (int k = 0; k < 4; k++) cv[k] = fmaf(a, bv[k], cv[k]);
        return wasm_v128_load(cv);
    }
    return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(r0), wasm_f32x4_demote_f64x2_zero(r1), 0, 1, 4, 5);
}

/* fmaf(a, b, z) for one float, the same way. */
static inline float lw__wasm_fmaf1(float a, float b, float z) {
    const double xy = (double)a * (double)b, r = xy + (double)z;
    union {
        double f;
        uint64_t u;
    } v = {r};
    if ((v.u & 0x1fffffff) == 0x10000000 && !(r - xy == (double)z && r - (double)z == xy)) return fmaf(a, b, z);
    return (float)r;
}

#endif
