/* WebAssembly SIMD (simd128) versions of the engine's f32 and f16 dot products (engine-ops.c), for the wasm
 * build (-msimd128); elsewhere lw__cpu_kernels_wasm() is NULL.
 *
 * The references add in ggml's AVX-512 order (16-lane FMA accumulators, fixed reductions), which maps onto
 * f32x4 registers lane for lane. wasm has no FMA, so each fmaf is done as Emscripten's libc does it
 * (fma-wasm.h). Tails and reductions are the references' scalar code. */
#include "cpu/engine-ops.h"

#include "core/core.h"

#include <math.h>
#include <string.h>

#if defined(__wasm_simd128__)

#include <wasm_simd128.h>

#include "cpu/f16-wasm.h"
#include "cpu/fma-wasm.h"

#pragma STDC FP_CONTRACT OFF

/* fmaf(a[k], b[k], c[k]) for 4 lanes (fma-wasm.h). */
static inline v128_t fma4v(v128_t a, v128_t b, v128_t c) { return lw__wasm_fmaf4(a, b, c); }

/* 4 fp16 -> f32 (f16-wasm.h). */
static inline v128_t h2f4(const uint16_t *p) {
    return lw__wasm_h2f4(wasm_u32x4_load16x4(p));
}

/* _mm512_reduce_add_ps's order over 16 lanes held as 4 quads q[0..3] (lanes 4i..4i+3). */
static inline float reduce16v(const v128_t q[4]) {
    const v128_t c = wasm_f32x4_add(wasm_f32x4_add(q[0], q[2]), wasm_f32x4_add(q[1], q[3]));
    return (wasm_f32x4_extract_lane(c, 0) + wasm_f32x4_extract_lane(c, 2)) +
           (wasm_f32x4_extract_lane(c, 1) + wasm_f32x4_extract_lane(c, 3));
}

/* GGML_F32x16_REDUCE of 4 accumulators of 16 lanes (s[j][q]), ending in the lane sum. */
static inline float reduce4x16v(v128_t s[4][4]) {
    v128_t t[4];
    for (int q = 0; q < 4; q++) t[q] = wasm_f32x4_add(wasm_f32x4_add(s[0][q], s[2][q]), wasm_f32x4_add(s[1][q], s[3][q]));
    return reduce16v(t);
}

static float dot_f32(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    v128_t s[4][4];
    for (int j = 0; j < 4; j++)
        for (int q = 0; q < 4; q++) s[j][q] = wasm_f32x4_splat(0.0f);
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 4; q++) {
                const int64_t k = i + 16 * j + 4 * q;
                s[j][q] = fma4v(wasm_v128_load(x + k), wasm_v128_load(y + k), s[j][q]);
            }
    float sum = reduce4x16v(s);
    /* the reference's tail (ggml's, as GCC compiled it): blocks of 16 then 8 products, then FMAs */
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

static float dot_f32_gemm(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    v128_t s[4];
    for (int q = 0; q < 4; q++) s[q] = wasm_f32x4_splat(0.0f);
    for (int64_t i = 0; i < n; i += 16)
        for (int q = 0; q < 4; q++) s[q] = fma4v(wasm_v128_load(x + i + 4 * q), wasm_v128_load(y + i + 4 * q), s[q]);
    return reduce16v(s);
}

static float dot_f16(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    v128_t s[4][4];
    for (int j = 0; j < 4; j++)
        for (int q = 0; q < 4; q++) s[j][q] = wasm_f32x4_splat(0.0f);
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 4; q++) {
                const int64_t k = i + 16 * j + 4 * q;
                s[j][q] = fma4v(h2f4(x + k), h2f4(y + k), s[j][q]);
            }
    double sum = reduce4x16v(s); /* as the reference: the tail in double */
    for (int64_t i = np; i < n; i++) sum += (double)(lw__fp16_to_fp32(x[i]) * lw__fp16_to_fp32(y[i]));
    return (float)sum;
}

static float dot_f16_gemm(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    v128_t s[4];
    for (int q = 0; q < 4; q++) s[q] = wasm_f32x4_splat(0.0f);
    for (int64_t i = 0; i < n; i += 16)
        for (int q = 0; q < 4; q++) s[q] = fma4v(h2f4(x + i + 4 * q), h2f4(y + i + 4 * q), s[q]);
    return reduce16v(s);
}

const lw__cpu_kernels *lw__cpu_kernels_wasm(void) {
    /* the reference set with the dots replaced (filled on first use: lw__cpu_kernels_best calls this once) */
    static lw__cpu_kernels k;
    if (!k.name) {
        lw__cpu_kernels t = *lw__cpu_kernels_ref();
        t.dot_f32 = dot_f32;
        t.dot_f32_gemm = dot_f32_gemm;
        t.dot_f16 = dot_f16;
        t.dot_f16_gemm = dot_f16_gemm;
        t.name = "wasm-simd128";
        k = t;
    }
    return &k;
}

#else

const lw__cpu_kernels *lw__cpu_kernels_wasm(void) {
    return NULL;
}

#endif
