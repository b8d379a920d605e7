/* x86 versions of the engine's named CPU kernels (engine-ops.h, lw__cpu_kernels), chosen at run time.
 *
 * They reproduce the scalar references bit for bit: the references already add in AVX-512's lane order
 * (16 lanes, _mm512_reduce_add_ps's halving tree, explicit FMAs), so these are the same arithmetic done 16
 * lanes at a time. tests/test-engine-ops.c compares every kernel here with its reference on random data.
 *
 * Built with per-function target attributes, so the rest of the library keeps the baseline ISA and this
 * file compiles to nothing on other architectures (wasm, arm64). */
#include "cpu/engine-ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define AVX512 __attribute__((target("avx512f,fma,f16c")))

/* _mm512_reduce_add_ps's order: lanes i + i+8, then i + i+4, then (0 + 2) + (1 + 3). */
AVX512 static inline float hsum16(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 b = _mm256_add_ps(lo, hi);
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c)); /* d0 = c0 + c2, d1 = c1 + c3 */
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

AVX512 static inline __m512 load_h16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

AVX512 static float dot_f32(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), s3);
    }
    float sum = hsum16(_mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
    /* the tail as the reference: blocks of 16, then 8, of separately rounded products; FMAs for the rest */
    int64_t i = np;
    if (n - np >= 16)
        for (; n - i >= 16; i += 16) {
            float p[16];
            _mm512_storeu_ps(p, _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
            for (int l = 0; l < 16; l++) sum += p[l];
        }
    if (n - i >= 8) {
        float p[8];
        _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        for (int l = 0; l < 8; l++) sum += p[l];
        i += 8;
    }
    for (; i < n; i++) sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x[i]), _mm_set_ss(y[i]), _mm_set_ss(sum)));
    return sum;
}

AVX512 static float dot_f32_gemm(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s);
    return hsum16(s);
}

AVX512 static float dot_f16(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        s0 = _mm512_fmadd_ps(load_h16(x + i), load_h16(y + i), s0);
        s1 = _mm512_fmadd_ps(load_h16(x + i + 16), load_h16(y + i + 16), s1);
        s2 = _mm512_fmadd_ps(load_h16(x + i + 32), load_h16(y + i + 32), s2);
        s3 = _mm512_fmadd_ps(load_h16(x + i + 48), load_h16(y + i + 48), s3);
    }
    double sum = hsum16(_mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
    for (int64_t i = np; i < n; i++) sum += (double)(_cvtsh_ss(x[i]) * _cvtsh_ss(y[i]));
    return (float)sum;
}

AVX512 static float dot_f16_gemm(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) s = _mm512_fmadd_ps(load_h16(x + i), load_h16(y + i), s);
    return hsum16(s);
}

AVX512 static void f32_to_f16(const float *x, void *yv, int64_t n) {
    uint16_t *y = yv;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

AVX512 static void f16_to_f32(const void *xv, float *y, int64_t n) {
    const uint16_t *x = xv;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load_h16(x + i));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

AVX512 static void scale_f16(uint16_t *y, float v, int64_t n) {
    int64_t i = 0;
    const __m512 vv = _mm512_set1_ps(v);
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_mul_ps(load_h16(y + i), vv), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(_cvtsh_ss(y[i]) * v, _MM_FROUND_TO_NEAREST_INT);
}

AVX512 static void mad_f16(uint16_t *y, const uint16_t *x, float v, int64_t n) {
    int64_t i = 0;
    const __m512 vv = _mm512_set1_ps(v);
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_fmadd_ps(load_h16(x + i), vv, load_h16(y + i)), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = _cvtss_sh(_mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(_cvtsh_ss(x[i])), _mm_set_ss(v), _mm_set_ss(_cvtsh_ss(y[i])))),
                         _MM_FROUND_TO_NEAREST_INT);
}

/* Loads 16 elements of a row as f32 (f16 rows are widened). */
AVX512 static inline __m512 load16(const uint8_t *row, int64_t i, int f16) {
    return f16 ? load_h16((const uint16_t *)row + i) : _mm512_loadu_ps((const float *)row + i);
}

/* The blocked product in tiles of 4 weight rows x 4 tokens: 16 accumulators, each output's own 16-lane FMA
 * chain over k exactly as dot_*_gemm (so tiling changes speed, not bits). Edges use the single dot. */
AVX512 static inline __attribute__((always_inline)) void gemm_body(int f16, int64_t k, const uint8_t *w, size_t ws,
                                                                   int64_t m, const uint8_t *a, size_t as, int64_t nt,
                                                                   float *c, size_t cs) {
    float (*dot1)(int64_t, const void *, const void *) = f16 ? dot_f16_gemm : dot_f32_gemm;
    int64_t r = 0;
    for (; r + 4 <= m; r += 4) {
        int64_t t = 0;
        const uint8_t *w0 = w + (size_t)r * ws, *w1 = w0 + ws, *w2 = w1 + ws, *w3 = w2 + ws;
        for (; t + 4 <= nt; t += 4) {
            const uint8_t *a0 = a + (size_t)t * as, *a1 = a0 + as, *a2 = a1 + as, *a3 = a2 + as;
            /* written out: compilers keep 16 named accumulators in registers, not an array */
            __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00,
                   c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
            for (int64_t i = 0; i < k; i += 16) {
                const __m512 x0 = load16(w0, i, f16), x1 = load16(w1, i, f16), x2 = load16(w2, i, f16),
                             x3 = load16(w3, i, f16);
                const __m512 y0 = load16(a0, i, f16), y1 = load16(a1, i, f16), y2 = load16(a2, i, f16),
                             y3 = load16(a3, i, f16);
                c00 = _mm512_fmadd_ps(x0, y0, c00), c01 = _mm512_fmadd_ps(x0, y1, c01);
                c02 = _mm512_fmadd_ps(x0, y2, c02), c03 = _mm512_fmadd_ps(x0, y3, c03);
                c10 = _mm512_fmadd_ps(x1, y0, c10), c11 = _mm512_fmadd_ps(x1, y1, c11);
                c12 = _mm512_fmadd_ps(x1, y2, c12), c13 = _mm512_fmadd_ps(x1, y3, c13);
                c20 = _mm512_fmadd_ps(x2, y0, c20), c21 = _mm512_fmadd_ps(x2, y1, c21);
                c22 = _mm512_fmadd_ps(x2, y2, c22), c23 = _mm512_fmadd_ps(x2, y3, c23);
                c30 = _mm512_fmadd_ps(x3, y0, c30), c31 = _mm512_fmadd_ps(x3, y1, c31);
                c32 = _mm512_fmadd_ps(x3, y2, c32), c33 = _mm512_fmadd_ps(x3, y3, c33);
            }
            float *o0 = c + (size_t)t * cs + (size_t)r, *o1 = o0 + cs, *o2 = o1 + cs, *o3 = o2 + cs;
            o0[0] = hsum16(c00), o1[0] = hsum16(c01), o2[0] = hsum16(c02), o3[0] = hsum16(c03);
            o0[1] = hsum16(c10), o1[1] = hsum16(c11), o2[1] = hsum16(c12), o3[1] = hsum16(c13);
            o0[2] = hsum16(c20), o1[2] = hsum16(c21), o2[2] = hsum16(c22), o3[2] = hsum16(c23);
            o0[3] = hsum16(c30), o1[3] = hsum16(c31), o2[3] = hsum16(c32), o3[3] = hsum16(c33);
        }
        for (; t < nt; t++)
            for (int x = 0; x < 4; x++) c[(size_t)t * cs + (size_t)(r + x)] = dot1(k, w + (size_t)(r + x) * ws, a + (size_t)t * as);
    }
    for (; r < m; r++)
        for (int64_t t = 0; t < nt; t++) c[(size_t)t * cs + (size_t)r] = dot1(k, w + (size_t)r * ws, a + (size_t)t * as);
}

AVX512 static void gemm_f32(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,
                            float *c, size_t cs) {
    gemm_body(0, k, w, ws, m, a, as, nt, c, cs);
}

AVX512 static void gemm_f16(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,
                            float *c, size_t cs) {
    gemm_body(1, k, w, ws, m, a, as, nt, c, cs);
}

/* Tiled flash attention (see fa_* in engine-ops.c): scores for 64 cells in 4 vectors, one FMA per head
 * element; the softmax with ggml's vector exp; the V accumulation 16 head elements at a time. */
AVX512 static void fa_kq(int64_t D, const float *Kt, const float *q, float *kq) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = 0; d < D; d++) {
        const __m512 qd = _mm512_set1_ps(q[d]);
        const float *k = Kt + d * 64;
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k), qd, a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16), qd, a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 32), qd, a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 48), qd, a3);
    }
    _mm512_storeu_ps(kq, a0);
    _mm512_storeu_ps(kq + 16, a1);
    _mm512_storeu_ps(kq + 32, a2);
    _mm512_storeu_ps(kq + 48, a3);
}

/* ggml_v_expf on 16 lanes (the same operations as the scalar v_expf in engine-ops.c) */
AVX512 static inline __m512 v_expf16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!big) return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

AVX512 static double fa_softmax(float *kq, float M) {
    double sum = 0.0;
    const __m512 m = _mm512_set1_ps(M);
    for (int b = 0; b < 64; b += 16) {
        const __m512 v = v_expf16(_mm512_sub_ps(_mm512_loadu_ps(kq + b), m));
        _mm512_storeu_ps(kq + b, v);
        sum += (double)hsum16(v);
    }
    return sum;
}

AVX512 static void fa_vacc(int64_t D, int64_t m, const float *V, const float *kq, float *vkq) {
    for (int64_t d = 0; d < D; d += 16) {
        __m512 acc = _mm512_loadu_ps(vkq + d);
        for (int64_t j = 0; j < m; j++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(V + j * D + d), _mm512_set1_ps(kq[j]), acc);
        _mm512_storeu_ps(vkq + d, acc);
    }
}

AVX512 static void swiglu16(float *z, const float *x, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 e = v_expf16(_mm512_sub_ps(_mm512_setzero_ps(), v));
        _mm512_storeu_ps(z + i, _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e)),
                                              _mm512_loadu_ps(g + i)));
    }
}

static const lw__cpu_kernels avx512_kernels = {
    "avx512", dot_f32, dot_f32_gemm, dot_f16, dot_f16_gemm, f32_to_f16, f16_to_f32, scale_f16, mad_f16,
    gemm_f32, gemm_f16, fa_kq, fa_softmax, fa_vacc, swiglu16,
};

/* ---------------------------------------------------------------------------------------------------------
 * AVX2 + FMA + F16C: the same 16-lane arithmetic with each 16-lane register as two 8-lane halves, so the
 * results are again the references' bits (machines without AVX-512, e.g. many CI runners).
 * ------------------------------------------------------------------------------------------------------- */

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* A 16-lane f32 vector as two halves: lanes 0-7 and 8-15. */
typedef struct v16 {
    __m256 lo, hi;
} v16;

AVX2 static inline v16 v16_zero(void) {
    v16 r = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    return r;
}
AVX2 static inline v16 v16_load(const float *p) {
    v16 r = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
    return r;
}
AVX2 static inline v16 v16_load_h(const uint16_t *p) {
    v16 r = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)))};
    return r;
}
AVX2 static inline v16 v16_fma(v16 a, v16 b, v16 c) {
    v16 r = {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
    return r;
}
AVX2 static inline v16 v16_add(v16 a, v16 b) {
    v16 r = {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
    return r;
}
/* the halving tree of hsum16: lanes i + i+8 is lo + hi */
AVX2 static inline float v16_hsum(v16 v) {
    __m256 b = _mm256_add_ps(v.lo, v.hi);
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

AVX2 static float dot_f32_avx2(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    v16 s0 = v16_zero(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        s0 = v16_fma(v16_load(x + i), v16_load(y + i), s0);
        s1 = v16_fma(v16_load(x + i + 16), v16_load(y + i + 16), s1);
        s2 = v16_fma(v16_load(x + i + 32), v16_load(y + i + 32), s2);
        s3 = v16_fma(v16_load(x + i + 48), v16_load(y + i + 48), s3);
    }
    float sum = v16_hsum(v16_add(v16_add(s0, s2), v16_add(s1, s3)));
    int64_t i = np;
    if (n - np >= 16)
        for (; n - i >= 16; i += 16) {
            float p[16];
            _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
            _mm256_storeu_ps(p + 8, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8)));
            for (int l = 0; l < 16; l++) sum += p[l];
        }
    if (n - i >= 8) {
        float p[8];
        _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        for (int l = 0; l < 8; l++) sum += p[l];
        i += 8;
    }
    for (; i < n; i++) sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x[i]), _mm_set_ss(y[i]), _mm_set_ss(sum)));
    return sum;
}

AVX2 static float dot_f32_gemm_avx2(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    v16 s = v16_zero();
    for (int64_t i = 0; i < n; i += 16) s = v16_fma(v16_load(x + i), v16_load(y + i), s);
    return v16_hsum(s);
}

AVX2 static float dot_f16_avx2(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    v16 s0 = v16_zero(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        s0 = v16_fma(v16_load_h(x + i), v16_load_h(y + i), s0);
        s1 = v16_fma(v16_load_h(x + i + 16), v16_load_h(y + i + 16), s1);
        s2 = v16_fma(v16_load_h(x + i + 32), v16_load_h(y + i + 32), s2);
        s3 = v16_fma(v16_load_h(x + i + 48), v16_load_h(y + i + 48), s3);
    }
    double sum = v16_hsum(v16_add(v16_add(s0, s2), v16_add(s1, s3)));
    for (int64_t i = np; i < n; i++) sum += (double)(_cvtsh_ss(x[i]) * _cvtsh_ss(y[i]));
    return (float)sum;
}

AVX2 static float dot_f16_gemm_avx2(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    v16 s = v16_zero();
    for (int64_t i = 0; i < n; i += 16) s = v16_fma(v16_load_h(x + i), v16_load_h(y + i), s);
    return v16_hsum(s);
}

AVX2 static void f32_to_f16_avx2(const float *x, void *yv, int64_t n) {
    uint16_t *y = yv;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

AVX2 static void f16_to_f32_avx2(const void *xv, float *y, int64_t n) {
    const uint16_t *x = xv;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

AVX2 static void scale_f16_avx2(uint16_t *y, float v, int64_t n) {
    int64_t i = 0;
    const __m256 vv = _mm256_set1_ps(v);
    for (; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i))), vv);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = _cvtss_sh(_cvtsh_ss(y[i]) * v, _MM_FROUND_TO_NEAREST_INT);
}

AVX2 static void mad_f16_avx2(uint16_t *y, const uint16_t *x, float v, int64_t n) {
    int64_t i = 0;
    const __m256 vv = _mm256_set1_ps(v);
    for (; i + 8 <= n; i += 8) {
        __m256 t = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))), vv,
                                   _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i))));
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        y[i] = _cvtss_sh(_mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(_cvtsh_ss(x[i])), _mm_set_ss(v), _mm_set_ss(_cvtsh_ss(y[i])))),
                         _MM_FROUND_TO_NEAREST_INT);
}

AVX2 static void fa_kq_avx2(int64_t D, const float *Kt, const float *q, float *kq) {
    __m256 a[8];
    for (int b = 0; b < 8; b++) a[b] = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
        const __m256 qd = _mm256_set1_ps(q[d]);
        const float *k = Kt + d * 64;
        a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(k), qd, a[0]);
        a[1] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 8), qd, a[1]);
        a[2] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 16), qd, a[2]);
        a[3] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 24), qd, a[3]);
        a[4] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 32), qd, a[4]);
        a[5] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 40), qd, a[5]);
        a[6] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 48), qd, a[6]);
        a[7] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 56), qd, a[7]);
    }
    for (int b = 0; b < 8; b++) _mm256_storeu_ps(kq + 8 * b, a[b]);
}

AVX2 static void fa_vacc_avx2(int64_t D, int64_t m, const float *V, const float *kq, float *vkq) {
    for (int64_t d = 0; d < D; d += 8) {
        __m256 acc = _mm256_loadu_ps(vkq + d);
        for (int64_t j = 0; j < m; j++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(V + j * D + d), _mm256_set1_ps(kq[j]), acc);
        _mm256_storeu_ps(vkq + d, acc);
    }
}

/* ggml_v_expf on 8 lanes, the scalar v_expf's operations (engine-ops.c) with its ldexpf as two exact
 * power-of-two factors: j * 2^(n/2) stays normal for |n| <= 192 (j is within [0.7, 1.5]), so the one
 * rounding is the second product's, as ldexpf's (and AVX-512's scalef) for subnormal results. Why: the
 * scalar version calls libm's fmaf seven times a lane; SwiGLU's exponentials took ~6 % of a 1B's decode and
 * prefill on one AVX2 core (perf, llama-3.2-1b Q4_0). */
AVX2 static inline __m256 v_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvttps_epi32(n); /* n is integral; lanes out of range are replaced below */
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 res = _mm256_mul_ps(
        _mm256_mul_ps(j, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23))),
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                        _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
    /* NaN in, NaN out: the scalar version returns n itself */
    return _mm256_blendv_ps(_mm256_blendv_ps(res, alt, big), n, _mm256_cmp_ps(n, n, _CMP_UNORD_Q));
}

AVX2 static double fa_softmax_avx2(float *kq, float M) {
    double sum = 0.0;
    const __m256 m = _mm256_set1_ps(M);
    for (int b = 0; b < 64; b += 16) {
        const __m256 v0 = v_expf8(_mm256_sub_ps(_mm256_loadu_ps(kq + b), m));
        const __m256 v1 = v_expf8(_mm256_sub_ps(_mm256_loadu_ps(kq + b + 8), m));
        _mm256_storeu_ps(kq + b, v0);
        _mm256_storeu_ps(kq + b + 8, v1);
        /* the references' reduce16: lanes i + i+8, then i + i+4, then (0 + 2) + (1 + 3) */
        const __m256 s8 = _mm256_add_ps(v0, v1);
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        sum += (double)_mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
    }
    return sum;
}

AVX2 static void swiglu16_avx2(float *z, const float *x, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 e = v_expf8(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(z + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)),
                                              _mm256_loadu_ps(g + i)));
    }
}

static const lw__cpu_kernels avx2_kernels = {
    "avx2", dot_f32_avx2, dot_f32_gemm_avx2, dot_f16_avx2, dot_f16_gemm_avx2, f32_to_f16_avx2, f16_to_f32_avx2,
    scale_f16_avx2, mad_f16_avx2, NULL, NULL, fa_kq_avx2, fa_softmax_avx2, fa_vacc_avx2, swiglu16_avx2,
};

/* F16C: CPUID leaf 1, ECX bit 29 (asked directly: not every compiler knows "f16c" as a feature name). */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}

const lw__cpu_kernels *lw__cpu_kernels_x86_avx2(void) {
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())) return NULL;
    return &avx2_kernels;
}

const lw__cpu_kernels *lw__cpu_kernels_x86(void) {
    __builtin_cpu_init();
    /* every CPU with AVX-512F also has F16C */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return &avx512_kernels;
    return lw__cpu_kernels_x86_avx2();
}

#else

const lw__cpu_kernels *lw__cpu_kernels_x86(void) {
    return NULL;
}
const lw__cpu_kernels *lw__cpu_kernels_x86_avx2(void) {
    return NULL;
}

#endif
