/* AVX2 (+FMA, F16C) versions of the x86-order quantized dots (quant-dot-x86.c), chosen at run time.
 *
 * The references already add in ggml's AVX2 order: the integer products of a block go to 8 int32 lanes
 * (element e of a 32-element chunk to lane (e mod 32) / 4, as maddubs + madd pair them), each lane is
 * converted to float and fused-multiply-added into 8 float accumulators, and a fixed horizontal sum ends
 * it. Integer sums are exact in any order, so these kernels only have to keep the float steps: the same
 * conversions, the same FMAs in the same sequence, the same final tree. Repacked (gemv/gemm) orders keep
 * one scalar FMA chain per row, as the references do; only the integer block sums are vectorized.
 *
 * Built with per-function target attributes (as engine-x86.c), so the rest of the library keeps the
 * baseline ISA and this file compiles to stubs on other architectures (wasm, arm64). */
#include "cpu/quant-dot-simd.h"

#include "quant/iq-grids.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>

/* every float step below is an explicit intrinsic; no contraction may merge the few plain C products */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* h2f, hsum8, nibbles_32, k4_scales_mins */
#include "cpu/quant-avx2-common.h"

/* ---------------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------------- */

/* Sum of 4 int32 lanes (exact). */
AVX2 static inline int32_t hsum_i32_4(__m128i v) {
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(v);
}

/* Sum of 8 int32 lanes (exact). */
AVX2 static inline int32_t hsum_i32_8(__m256i v) {
    return hsum_i32_4(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

/* acc + a * b as one rounding (the references' fmaf): with FMA enabled for this function both gcc and clang
 * emit one vfmadd for it, and no lane blend (as _mm_fmadd_ss on _mm_set_ss would) lengthens the chain. */
AVX2 static inline float fma1(float a, float b, float acc) {
    return fmaf(a, b, acc);
}

/* Signed bytes x times signed bytes y, 4 neighbours per int32 lane: |x| * (y with x's sign), as ggml's
 * mul_sum_i8_pairs (sign_epi8 of -128 stays -128, read as unsigned 128 by maddubs; no pair saturates). */
AVX2 static inline __m256i dot_i8_lanes(__m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Exact products v[e] * y[e] for small weights v (|v| < 128, as Q4_0's -8..7, Q5_0's -16..15), 4 per lane:
 * |y| times v with y's sign, so y = -128 (read as unsigned 128) still gives v * y exactly; at most
 * 2 * 128 * 16 per pair, no saturation. (dot_i8_lanes would turn y = -128 with v < 0 into v * 128.) */
AVX2 static inline __m256i dot_small_i8_lanes(__m256i v, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(y, y), _mm256_sign_epi8(v, y));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* ---------------------------------------------------------------------------------------------------------
 * Q8_0 (not repacked): one FMA of 8 lanes per 32-block
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static float dot_q8_0_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q8_0 *x = w;
    const lw__block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        const __m256 d = _mm256_set1_ps(h2f(x[ib].d) * h2f(y[ib].d));
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8_lanes(qx, qy)), acc);
    }
    return hsum8(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q5_0 (not repacked): values (nibble | bit << 4) - 16, one FMA of 8 lanes per 32-block
 * ------------------------------------------------------------------------------------------------------- */

/* Bit e of the 32-bit word -> 0x10 in byte e, else 0. */
AVX2 static inline __m256i bits_to_0x10(uint32_t bits) {
    const __m256i b = _mm256_set1_epi32((int)bits);
    /* byte e takes byte e / 8 of the word, then keeps bit e % 8 */
    const __m256i sel = _mm256_shuffle_epi8(
        b, _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(sel, bit), bit);
    return _mm256_and_si256(on, _mm256_set1_epi8(0x10));
}

AVX2 static float dot_q5_0_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q5_0 *x = w;
    const lw__block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        const __m256i v = _mm256_sub_epi8(_mm256_or_si256(nibbles_32(x[ib].qs), bits_to_0x10(qh)), _mm256_set1_epi8(16));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256 d = _mm256_set1_ps(h2f(x[ib].d) * h2f(y[ib].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_small_i8_lanes(v, qy)), acc);
    }
    return hsum8(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K and Q5_K (not repacked): 8 lanes scaled per 32, mins kept apart (Q4_K: 4 float lanes, Q5_K: 1 sum)
 * ------------------------------------------------------------------------------------------------------- */

/* The 8 per-pair activation sums q8s[m] = bsums[2m] + bsums[2m + 1] as int16. */
AVX2 static inline __m128i q8_pair_sums(const int16_t *bsums) {
    return _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 8)));
}

/* Integer lanes of one Q4_K/Q5_K super-block: lane k = sum over elements e with (e mod 32) / 4 == k of
 * sc[e / 32] * v[e] * q8[e]; qh NULL for Q4_K. */
AVX2 static inline __m256i k4_lanes(const uint8_t *qs, const uint8_t *qh, const int8_t *q8, const uint8_t *sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i hb = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4));
        }
        const __m256i y0 = _mm256_loadu_si256((const __m256i *)(q8 + 64 * j));
        const __m256i y1 = _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j]));
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * j + 1]));
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(p0, p1));
    }
    return sum;
}

AVX2 static float k4_avx2(int64_t n, const void *w, const lw__block_q8_K *y, bool five) {
    const lw__block_q4_K *x4 = w;
    const lw__block_q5_K *x5 = w;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const uint8_t *scales = five ? x5[i].scales : x4[i].scales;
        const uint16_t dh = five ? x5[i].d : x4[i].d, dminh = five ? x5[i].dmin : x4[i].dmin;
        const float d = y[i].d * h2f(dh);
        const float dmin = -y[i].d * h2f(dminh);
        const __m128i sm = k4_scales_mins(scales);
        uint8_t sc[16];
        _mm_storeu_si128((__m128i *)sc, sm);
        /* min terms: mn[2p] * q8s[2p] + mn[2p + 1] * q8s[2p + 1] in int32 lane p */
        const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), q8_pair_sums(y[i].bsums));
        if (five)
            summs = fma1(dmin, (float)hsum_i32_4(mins), summs);
        else
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), acc_m);
        const __m256i lanes = k4_lanes(five ? x5[i].qs : x4[i].qs, five ? x5[i].qh : NULL, y[i].qs, sc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
    }
    if (five) return hsum8(acc) + summs;
    /* (m0 + m2) + (m1 + m3) */
    const __m128 h = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    return hsum8(acc) + _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

AVX2 static float dot_q4_K_avx2(int64_t n, const void *w, const void *a) { return k4_avx2(n, w, a, false); }
AVX2 static float dot_q5_K_avx2(int64_t n, const void *w, const void *a) { return k4_avx2(n, w, a, true); }

/* ---------------------------------------------------------------------------------------------------------
 * Q6_K (not repacked): unsigned 6-bit values scaled per 16, the -32 offset through the activation sums
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static float dot_q6_K_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q6_K *x = w;
    const lw__block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * h2f(x[i].d);
        const int8_t *sc = x[i].scales;
        __m256i sum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) { /* halves of 128 */
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            __m256i u[4];
            u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
            u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
            u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
            u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
            for (int c = 0; c < 4; ++c) { /* chunk of 32 = two scale groups of 16 */
                const int g = 8 * h + 2 * c;
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * c));
                const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], q8), s));
            }
        }
        /* lane k -= 32 * (bsums[2k] * sc[2k] + bsums[2k + 1] * sc[2k + 1]) */
        const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums),
                                               _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc)));
        sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(corr, 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum8(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * Repacked orders (llama.cpp's gemv/gemm for rows % 8 == 0): exact block integers, one scalar FMA chain
 * ------------------------------------------------------------------------------------------------------- */

/* Exact integer dot of one Q4_0 block (q - 8) with one Q8_0 block, in 8 lanes. */
AVX2 static inline __m256i q4_0_lanes(const lw__block_q4_0 *x, const lw__block_q8_0 *y) {
    const __m256i v = _mm256_sub_epi8(nibbles_32(x->qs), _mm256_set1_epi8(8));
    return dot_small_i8_lanes(v, _mm256_loadu_si256((const __m256i *)y->qs));
}

/* The lane totals of 4 blocks, as floats (the references' (float)sumi). */
AVX2 static inline void sums4(__m256i p0, __m256i p1, __m256i p2, __m256i p3, float sf[4]) {
    const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    _mm_storeu_ps(sf, _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1))));
}

/* The integer sums of 4 consecutive Q4_0 blocks. */
AVX2 static inline void q4_0_sums4(const lw__block_q4_0 *x, const lw__block_q8_0 *y, float sf[4]) {
    sums4(q4_0_lanes(x, y), q4_0_lanes(x + 1, y + 1), q4_0_lanes(x + 2, y + 2), q4_0_lanes(x + 3, y + 3), sf);
}

/* Q4_0: acc = fma(block integer, weight scale * activation scale, acc), block after block. */
AVX2 static float dot_q4_0_repack_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q4_0 *x = w;
    const lw__block_q8_0 *y = a;
    const int64_t nb = n / 32;
    float acc = 0.0f;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) { /* 4 blocks' integers at a time; the FMA chain stays serial */
        float sf[4];
        q4_0_sums4(x + b, y + b, sf);
        for (int k = 0; k < 4; ++k) acc = fma1(sf[k], h2f(x[b + k].d) * h2f(y[b + k].d), acc);
    }
    for (; b < nb; ++b) acc = fma1((float)hsum_i32_8(q4_0_lanes(x + b, y + b)), h2f(x[b].d) * h2f(y[b].d), acc);
    return acc;
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0 not repacked (rows % 8 != 0, a tied output table): the engine keeps ggml's generic order there
 * (lw__vec_dot_q4_0_q8_0_ref: sumf += sumi * dx * dy, two products and an add, unfused on x86-64's
 * baseline ISA with gcc and clang alike; contraction is off in this file)
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static float dot_q4_0_generic_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q4_0 *x = w;
    const lw__block_q8_0 *y = a;
    const int64_t nb = n / 32;
    float sumf = 0.0f;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        float sf[4];
        q4_0_sums4(x + b, y + b, sf);
        for (int k = 0; k < 4; ++k) sumf += sf[k] * h2f(x[b + k].d) * h2f(y[b + k].d);
    }
    for (; b < nb; ++b) sumf += (float)hsum_i32_8(q4_0_lanes(x + b, y + b)) * h2f(x[b].d) * h2f(y[b].d);
    return sumf;
}

/* Q4_K: per super-block 4 integer sums (one per pair of sub-blocks) and 4 min sums; the gemv kernel
 * (per_pair false) adds each super-block's totals with one FMA, the 4-row gemm kernel each pair's. */
AVX2 static float q4_K_repack_avx2(int64_t n, const lw__block_q4_K *x, const lw__block_q8_K *y, bool per_pair) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float dw = h2f(x[i].d) * y[i].d, dm = h2f(x[i].dmin) * y[i].d;
        const __m128i sm = k4_scales_mins(x[i].scales);
        uint8_t sc[16];
        _mm_storeu_si128((__m128i *)sc, sm);
        __m256i p[4];
        for (int j = 0; j < 4; ++j) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j + 32));
            p[j] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j])),
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * j + 1])));
        }
        const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), q8_pair_sums(y[i].bsums));
        if (per_pair) {
            float sf[4], mf[4];
            _mm_storeu_ps(sf, _mm_cvtepi32_ps(sums));
            _mm_storeu_ps(mf, _mm_cvtepi32_ps(mins));
            for (int j = 0; j < 4; ++j) {
                acc = fma1(sf[j], dw, acc);
                acc_min = fma1(mf[j], dm, acc_min);
            }
        } else {
            acc = fma1((float)hsum_i32_4(sums), dw, acc);
            acc_min = fma1((float)hsum_i32_4(mins), dm, acc_min);
        }
    }
    return acc - acc_min;
}

AVX2 static float dot_q4_K_repack_avx2(int64_t n, const void *w, const void *a) {
    return q4_K_repack_avx2(n, w, a, false);
}
AVX2 static float dot_q4_K_repack_gemm_avx2(int64_t n, const void *w, const void *a) {
    return q4_K_repack_avx2(n, w, a, true);
}

/* IQ4_NL and MXFP4 (repacked): 4-bit codes through a 16-entry table, then as Q4_0. */
AVX2 static inline __m256i lut4_lanes(const uint8_t *qs, const int8_t *y, __m256i lut) {
    return dot_small_i8_lanes(_mm256_shuffle_epi8(lut, nibbles_32(qs)), _mm256_loadu_si256((const __m256i *)y));
}

AVX2 static float dot_iq4_nl_repack_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_nl *x = w;
    const lw__block_q8_0 *y = a;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lw__iq4nl_values));
    const int64_t nb = n / 32;
    float acc = 0.0f;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) { /* 4 blocks' integers at a time; the FMA chain stays serial */
        float sf[4];
        sums4(lut4_lanes(x[b].qs, y[b].qs, lut), lut4_lanes(x[b + 1].qs, y[b + 1].qs, lut),
              lut4_lanes(x[b + 2].qs, y[b + 2].qs, lut), lut4_lanes(x[b + 3].qs, y[b + 3].qs, lut), sf);
        for (int k = 0; k < 4; ++k) acc = fma1(sf[k], h2f(x[b + k].d) * h2f(y[b + k].d), acc);
    }
    for (; b < nb; ++b)
        acc = fma1((float)hsum_i32_8(lut4_lanes(x[b].qs, y[b].qs, lut)), h2f(x[b].d) * h2f(y[b].d), acc);
    return acc;
}

AVX2 static float dot_mxfp4_repack_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_mxfp4 *x = w;
    const lw__block_q8_0 *y = a;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lw__kvalues_fp4));
    const int64_t nb = n / 32;
    float acc = 0.0f;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        float sf[4];
        sums4(lut4_lanes(x[b].qs, y[b].qs, lut), lut4_lanes(x[b + 1].qs, y[b + 1].qs, lut),
              lut4_lanes(x[b + 2].qs, y[b + 2].qs, lut), lut4_lanes(x[b + 3].qs, y[b + 3].qs, lut), sf);
        for (int k = 0; k < 4; ++k) acc = fma1(sf[k], lw__e8m0_to_fp32_half(x[b + k].e) * h2f(y[b + k].d), acc);
    }
    for (; b < nb; ++b)
        acc = fma1((float)hsum_i32_8(lut4_lanes(x[b].qs, y[b].qs, lut)), lw__e8m0_to_fp32_half(x[b].e) * h2f(y[b].d), acc);
    return acc;
}

/* IQ4_NL not repacked: ggml's generic order (lw__vec_dot_iq4_nl_q8_0_ref: sumf += d * sumi, unfused). */
AVX2 static float dot_iq4_nl_generic_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_nl *x = w;
    const lw__block_q8_0 *y = a;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lw__iq4nl_values));
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = h2f(y[b].d) * h2f(x[b].d);
        sumf += d * (float)hsum_i32_8(lut4_lanes(x[b].qs, y[b].qs, lut));
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_1 / Q5_1 (not repacked): unsigned values, one FMA of 8 lanes per block; the min term (m * s) in a
 * scalar FMA chain, added after the horizontal sum
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static float q_1_avx2(int64_t n, const void *w, const void *a, bool five) {
    const lw__block_q4_1 *x4 = w;
    const lw__block_q5_1 *x5 = w;
    const lw__block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const uint16_t dh = five ? x5[ib].d : x4[ib].d, mh = five ? x5[ib].m : x4[ib].m;
        summs = fma1(h2f(mh), h2f(y[ib].s), summs);
        __m256i v = nibbles_32(five ? x5[ib].qs : x4[ib].qs);
        if (five) {
            uint32_t qh;
            memcpy(&qh, x5[ib].qh, 4);
            v = _mm256_or_si256(v, bits_to_0x10(qh));
        }
        const __m256i p16 = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)y[ib].qs));
        const __m256i lanes = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(dh) * h2f(y[ib].d)), _mm256_cvtepi32_ps(lanes), acc);
    }
    return hsum8(acc) + summs;
}

AVX2 static float dot_q4_1_avx2(int64_t n, const void *w, const void *a) { return q_1_avx2(n, w, a, false); }
AVX2 static float dot_q5_1_avx2(int64_t n, const void *w, const void *a) { return q_1_avx2(n, w, a, true); }

/* ---------------------------------------------------------------------------------------------------------
 * Q2_K and Q3_K (not repacked): 2-bit planes, scales per 16
 * ------------------------------------------------------------------------------------------------------- */

/* Lanes of 32 values u (unsigned, < 128) times q8 with scales s0 (first 16) and s1 (last 16). */
AVX2 static inline __m256i scaled16_lanes(__m256i u, const int8_t *q8, int s0, int s1) {
    const __m256i s = _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)q8)), s);
}

AVX2 static float dot_q2_K_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q2_K *x = w;
    const lw__block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * h2f(x[i].d);
        const float dmin = -y[i].d * h2f(x[i].dmin);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        /* min term first: lane k = (sc[2k] >> 4) * bsums[2k] + (sc[2k + 1] >> 4) * bsums[2k + 1] */
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
        const __m256i pm = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[i].bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(pm), acc);
        __m256i sum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int c = 0; c < 4; ++c) {
                const int g = 8 * h + 2 * c;
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * c), m3);
                sum = _mm256_add_epi32(sum, scaled16_lanes(u, y[i].qs + 128 * h + 32 * c, x[i].scales[g] & 0xf,
                                                           x[i].scales[g + 1] & 0xf));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum8(acc);
}

AVX2 static float dot_q3_K_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_q3_K *x = w;
    const lw__block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * h2f(x[i].d);
        int sc[16];
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? x[i].scales[j] & 0xf : x[i].scales[j - 8] >> 4;
            const int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            sc[j] = (lo | (hi << 4)) - 32;
        }
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i sum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int c = 0; c < 4; ++c) {
                const int g = 8 * h + 2 * c;
                const int8_t *q8 = y[i].qs + 128 * h + 32 * c;
                /* value = low 2 bits - 4 where the hmask bit is clear: (u * q8) - (4 * clear * q8) */
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * c), m3);
                const __m256i clear = _mm256_andnot_si256(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + c), one), one);
                const __m256i y8 = _mm256_loadu_si256((const __m256i *)q8);
                const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(u, y8),
                                                     _mm256_maddubs_epi16(_mm256_slli_epi16(clear, 2), y8));
                const __m256i s = _mm256_set_m128i(_mm_set1_epi16((short)sc[g + 1]), _mm_set1_epi16((short)sc[g]));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum8(acc);
}

/* Q2_K repacked (AVX-512 builds only): the gemv kernel adds each super-block's integer totals with one FMA,
 * the 4-row gemm kernel each half's (128 elements); scale and min sums in separate chains. */
AVX2 static float q2_K_repack_avx2(int64_t n, const lw__block_q2_K *x, const lw__block_q8_K *y, bool per_half) {
    const __m256i m3 = _mm256_set1_epi8(3);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float dw = h2f(x[i].d) * y[i].d, dm = h2f(x[i].dmin) * y[i].d;
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
        /* lanes 0..3: sub-blocks 0..7 (first half), lanes 4..7: the second half */
        const __m256i pm = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[i].bsums));
        int32_t isum[2], imin[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            __m256i sum = _mm256_setzero_si256();
            for (int c = 0; c < 4; ++c) {
                const int g = 8 * h + 2 * c;
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * c), m3);
                sum = _mm256_add_epi32(sum, scaled16_lanes(u, y[i].qs + 128 * h + 32 * c, x[i].scales[g] & 0xf,
                                                           x[i].scales[g + 1] & 0xf));
            }
            isum[h] = hsum_i32_8(sum);
        }
        imin[0] = hsum_i32_4(_mm256_castsi256_si128(pm));
        imin[1] = hsum_i32_4(_mm256_extracti128_si256(pm, 1));
        if (per_half) {
            for (int h = 0; h < 2; ++h) {
                acc = fma1((float)isum[h], dw, acc);
                acc_min = fma1((float)imin[h], dm, acc_min);
            }
        } else {
            acc = fma1((float)(isum[0] + isum[1]), dw, acc);
            acc_min = fma1((float)(imin[0] + imin[1]), dm, acc_min);
        }
    }
    return acc - acc_min;
}

AVX2 static float dot_q2_K_repack_avx2(int64_t n, const void *w, const void *a) {
    return q2_K_repack_avx2(n, w, a, false);
}
AVX2 static float dot_q2_K_repack_gemm_avx2(int64_t n, const void *w, const void *a) {
    return q2_K_repack_avx2(n, w, a, true);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ4_XS (not repacked on x86): IQ4_NL levels, 6-bit scales per 32
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static float dot_iq4_xs_avx2(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_xs *x = w;
    const lw__block_q8_K *y = a;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lw__iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ++ib) {
            const int sc = (((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((x[i].scales_h >> (2 * ib)) & 3) << 4)) - 32;
            const __m256i v = _mm256_shuffle_epi8(lut, nibbles_32(x[i].qs + 16 * ib));
            const __m256i y8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(y8, y8), _mm256_sign_epi8(v, y8));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)sc)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum8(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * Selection
 * ------------------------------------------------------------------------------------------------------- */

/* F16C: CPUID leaf 1, ECX bit 29 (asked directly: not every compiler knows "f16c" as a feature name). */
/* ---------------------------------------------------------------------------------------------------------
 * Activation quantizer: lw__quantize_row_q8_0_x86's bytes, 8 lanes at a time. Why: the scalar one (libm
 * rintf, software fp16) took ~4 % of a 1B's Q8_0 prefill and ~2 % of its Q4_0 decode on one Zen 3 core
 * (perf). Same steps: amax with NaN lanes ignored (vmaxps returns its second operand, the running max, when
 * the first is NaN), d = amax / 127 to fp16, 127 / amax (0 for amax 0), products rounded to nearest even,
 * NaN -> INT32_MIN -> -128 through the saturating packs (|x * id| <= 127 otherwise).
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static void quantize_row_q8_0_avx2(const float *x, void *vy, int64_t k) {
    lw__block_q8_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < k / 32; i++) {
        const float *p = x + 32 * i;
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(p + 8 * j);
            mx = _mm256_max_ps(_mm256_andnot_ps(sign, v[j]), mx);
        }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(mx, 1), _mm256_castps256_ps128(mx));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        const float d = amax / 127.f;
        y[i].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i q[4];
        for (int j = 0; j < 4; j++)
            q[j] = _mm256_cvtps_epi32(
                _mm256_round_ps(_mm256_mul_ps(v[j], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs work per 128-bit half: [0 1 4 5 | 2 3 6 7] (groups of 4), put back in order */
        const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)y[i].qs,
                            _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}

static int has_f16c(void) {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1);
}

lw__from_float_fn lw__quant_act_avx2(lw__from_float_fn ref) {
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())) return NULL;
    return ref == lw__quantize_row_q8_0_x86 ? quantize_row_q8_0_avx2 : NULL;
}

lw__vec_dot_fn lw__quant_dot_avx2(lw__vec_dot_fn ref) {
    static const struct {
        lw__vec_dot_fn ref;  /* scalar x86-order reference */
        lw__vec_dot_fn avx2; /* its AVX2 twin              */
    } table[] = {
        {lw__vec_dot_q8_0_q8_0_x86, dot_q8_0_avx2},
        {lw__vec_dot_q5_0_q8_0_x86, dot_q5_0_avx2},
        {lw__vec_dot_q4_K_q8_K_x86, dot_q4_K_avx2},
        {lw__vec_dot_q5_K_q8_K_x86, dot_q5_K_avx2},
        {lw__vec_dot_q6_K_q8_K_x86, dot_q6_K_avx2},
        {lw__vec_dot_q4_0_q8_0_x86_repack, dot_q4_0_repack_avx2},
        {lw__vec_dot_q4_0_q8_0_ref, dot_q4_0_generic_avx2},
        {lw__vec_dot_iq4_nl_q8_0_x86_repack, dot_iq4_nl_repack_avx2},
        {lw__vec_dot_mxfp4_q8_0_x86_repack, dot_mxfp4_repack_avx2},
        {lw__vec_dot_iq4_nl_q8_0_ref, dot_iq4_nl_generic_avx2},
        {lw__vec_dot_q4_1_q8_1_x86, dot_q4_1_avx2},
        {lw__vec_dot_q5_1_q8_1_x86, dot_q5_1_avx2},
        {lw__vec_dot_q2_K_q8_K_x86, dot_q2_K_avx2},
        {lw__vec_dot_q2_K_q8_K_x86_repack, dot_q2_K_repack_avx2},
        {lw__vec_dot_q2_K_q8_K_x86_repack_gemm, dot_q2_K_repack_gemm_avx2},
        {lw__vec_dot_q3_K_q8_K_x86, dot_q3_K_avx2},
        {lw__vec_dot_iq4_xs_q8_K_x86, dot_iq4_xs_avx2},
        {lw__vec_dot_q4_K_q8_K_x86_repack, dot_q4_K_repack_avx2},
        {lw__vec_dot_q4_K_q8_K_x86_repack_gemm, dot_q4_K_repack_gemm_avx2},
    };
    if (!ref) return NULL;
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())) return NULL;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].ref == ref) return table[i].avx2;
    return NULL;
}

#else

lw__vec_dot_fn lw__quant_dot_avx2(lw__vec_dot_fn ref) {
    (void)ref;
    return NULL;
}

lw__from_float_fn lw__quant_act_avx2(lw__from_float_fn ref) {
    (void)ref;
    return NULL;
}

#endif

lw__vec_dot_fn lw__quant_dot_fast(lw__vec_dot_fn ref) {
    const char *force = getenv("LW_CPU_KERNELS"); /* "scalar": keep the references (tests, comparisons) */
    if (!ref || (force && !strcmp(force, "scalar"))) return ref;
    lw__vec_dot_fn f = lw__quant_dot_avx2(ref);
    if (!f) f = lw__quant_dot_wasm(ref); /* wasm simd128 build */
    return f ? f : ref;
}

lw__from_float_fn lw__quant_act_fast(lw__from_float_fn ref) {
    const char *force = getenv("LW_CPU_KERNELS");
    if (!ref || (force && !strcmp(force, "scalar"))) return ref;
    lw__from_float_fn f = lw__quant_act_avx2(ref);
    return f ? f : ref;
}
