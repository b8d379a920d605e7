/* Fast decode products (quant-gemv.h): x86 AVX2 / AVX-512 VNNI versions, chosen at run time; the wasm
 * simd128 versions live in quant-gemv-wasm.c.
 *
 * Shape of every kernel: one weight row at a time, front to back, so a thread's share (one contiguous range
 * of rows, laid out one after another in the file) is one sequential stream for the hardware prefetchers
 * (software prefetches 512 bytes ahead measured no better, sometimes worse). (Interleaving 4 rows block by
 * block, so that the activation block is loaded once for all four, measured 2x slower on a whole-memory
 * stream here: the four streams 1 KiB apart defeat the prefetchers. That layout pays only when the rows are
 * repacked so that it is sequential again, which this file does not do.) Per block: the exact integer block
 * sum in 8 int32 lanes, turned into float and fused-multiply-added with the block's scale into 8 float lanes;
 * the lanes are summed once per row. The activation's per-block share (its scale, Q4_0's -8 * sum lanes) is
 * formed once per call.
 *
 * Built with per-function target attributes, so the library keeps the baseline ISA. */
#include "cpu/quant-gemv.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>

#define AVX2   __attribute__((target("avx2,fma,f16c")))
#define VNNI   __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define INLINE inline __attribute__((always_inline))

/* Activation blocks whose per-block share is prepared once per call (on the stack); longer rows form it per
 * row and block. 512 blocks of 32 = rows up to 16384 wide. */
#define ACT_CACHE 512

AVX2 static INLINE float h2f(uint16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

AVX2 static INLINE float hsum8(__m256 v) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* 16 packed nibbles -> 32 bytes 0..15: low nibbles (elements 0..15), then high nibbles (16..31). */
AVX2 static INLINE __m256i nibbles_32(const uint8_t *q) {
    const __m128i t = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
}

/* fp16 h widened and broadcast to 8 lanes. */
AVX2 static INLINE __m256 h2f8(uint16_t h) {
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* Unsigned bytes u times signed bytes s, 4 per int32 lane, added to acc: one vpdpbusd with VNNI, maddubs +
 * madd + add without (callers keep each pair's sum within int16: u <= 128, and u < 128 where s = -128). */
VNNI static INLINE __m256i dot_us_vnni(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}
AVX2 static INLINE __m256i dot_us_avx2(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* -8 * the sums of each 4 quants of activation block y (Q4_0's offset), per int32 lane. */
#define NEG8(DOT, y)                                                                                         \
    _mm256_sub_epi32(_mm256_setzero_si256(), DOT(_mm256_setzero_si256(), _mm256_set1_epi8(8),                \
                                                 _mm256_loadu_si256((const __m256i *)(y).qs)))

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0: sum (q - 8) * y = sum q * y - 8 * sum y; the -8 * sum y lanes are the start value of the product.
 * Q8_0: |w| times y with w's sign.
 * ------------------------------------------------------------------------------------------------------- */

#define Q4_0_STEP(DOT, xb, yb, neg, dy, acc)                                                                 \
    acc = _mm256_fmadd_ps(                                                                                   \
        _mm256_cvtepi32_ps(DOT(neg, nibbles_32((xb).qs), _mm256_loadu_si256((const __m256i *)(yb).qs))),     \
        _mm256_mul_ps(h2f8((xb).d), _mm256_set1_ps(dy)), acc)

#define Q8_0_STEP(DOT, xb, yb, neg, dy, acc)                                                                 \
    {                                                                                                        \
        const __m256i q_ = _mm256_loadu_si256((const __m256i *)(xb).qs);                                     \
        const __m256i y_ = _mm256_loadu_si256((const __m256i *)(yb).qs);                                     \
        (void)(neg);                                                                                         \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT(_mm256_setzero_si256(), _mm256_sign_epi8(q_, q_),       \
                                                     _mm256_sign_epi8(y_, q_))),                             \
                              _mm256_mul_ps(h2f8((xb).d), _mm256_set1_ps(dy)), acc);                         \
    }

/* Row after row, each read front to back (two accumulators for two FMA chains); the activation's per-block
 * share (scale, Q4_0's offset lanes) formed once per call when the row fits ACT_CACHE, else per block. */
#define ROWS_32(BLOCK, STEP, DOT, OFFSET)                                                                    \
    const int64_t nb = k / 32;                                                                               \
    const lw__block_q8_0 *y = a;                                                                             \
    const int cached = nb <= ACT_CACHE;                                                                      \
    __m256i neg[ACT_CACHE];                                                                                  \
    float dy[ACT_CACHE];                                                                                     \
    if (cached)                                                                                              \
        for (int64_t b = 0; b < nb; b++)                                                                     \
            neg[b] = OFFSET ? NEG8(DOT, y[b]) : _mm256_setzero_si256(), dy[b] = h2f(y[b].d);                 \
    for (int64_t r = 0; r < m; r++) {                                                                        \
        const BLOCK *x = (const BLOCK *)((const uint8_t *)w + (size_t)r * ws);                               \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;                                                      \
        int64_t b = 0;                                                                                       \
        if (cached) {                                                                                        \
            for (; b + 2 <= nb; b += 2) {                                                                    \
                STEP(DOT, x[b], y[b], neg[b], dy[b], acc0);                                                  \
                STEP(DOT, x[b + 1], y[b + 1], neg[b + 1], dy[b + 1], acc1);                                  \
            }                                                                                                \
            for (; b < nb; b++) STEP(DOT, x[b], y[b], neg[b], dy[b], acc0);                                  \
        } else {                                                                                             \
            for (; b < nb; b++) {                                                                            \
                STEP(DOT, x[b], y[b], OFFSET ? NEG8(DOT, y[b]) : _mm256_setzero_si256(), h2f(y[b].d), acc0); \
            }                                                                                                \
        }                                                                                                    \
        c[r] = hsum8(_mm256_add_ps(acc0, acc1));                                                             \
    }

AVX2 static void gemv_q4_0_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                float *c){ROWS_32(lw__block_q4_0, Q4_0_STEP, dot_us_avx2, 1)} VNNI
    static void gemv_q4_0_vnni(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                               float *c){ROWS_32(lw__block_q4_0, Q4_0_STEP, dot_us_vnni, 1)} AVX2
    static void gemv_q8_0_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                               float *c){ROWS_32(lw__block_q8_0, Q8_0_STEP, dot_us_avx2, 0)} VNNI
    static void gemv_q8_0_vnni(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    ROWS_32(lw__block_q8_0, Q8_0_STEP, dot_us_vnni, 0)
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0 / Q8_0 on 512-bit registers (AVX-512 VNNI): two blocks per step. The activation is prepared once per
 * call in pair order: a zmm of [y_b 0..15, y_b+1 0..15, y_b 16..31, y_b+1 16..31] (Q4_0: where the nibbles
 * of the two blocks land) or [y_b, y_b+1] (Q8_0), the offset lanes (Q4_0: -8 * sums; Q8_0: -128 * sums, for
 * the weights made unsigned by flipping their sign bit: sum (x + 128) * y - 128 * sum y = sum x * y), and
 * the activation scales spread over the lanes of their block.
 * ------------------------------------------------------------------------------------------------------- */

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Block pairs prepared per call on the stack (192 bytes each, 24 KiB): rows up to 8192 wide; wider ones take
 * the 256-bit kernel. */
#define PAIR_CACHE 128

typedef struct act_pair {
    __m512i q;   /* the two blocks' quants in the kernel's order       */
    __m512i off; /* offset lanes (start value of the integer products) */
    __m512 d;    /* activation scale of each lane's block              */
} act_pair;

/* [h_b x4, h_b+1 x4, h_b x4, h_b+1 x4] (Q4_0's lanes) or [h_b x8, h_b+1 x8] (Q8_0's), widened. */
AVX512 static INLINE __m512 pair_scales(uint16_t h0, uint16_t h1, __m512i idx) {
    const __m128 f = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(h0), h1, 1));
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}

#define IDX_Q4_0 _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1)
#define IDX_Q8_0 _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)

AVX512 static void prepare_pairs(const lw__block_q8_0 *y, int64_t np, int q4, act_pair *p) {
    const __m512i idx = q4 ? IDX_Q4_0 : IDX_Q8_0;
    for (int64_t i = 0; i < np; i++) {
        const lw__block_q8_0 *y0 = &y[2 * i], *y1 = &y[2 * i + 1];
        __m512i q;
        if (q4) {
            const __m256i lo = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)y1->qs),
                                                _mm_loadu_si128((const __m128i *)y0->qs));
            const __m256i hi = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(y1->qs + 16)),
                                                _mm_loadu_si128((const __m128i *)(y0->qs + 16)));
            q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        } else {
            q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0->qs)),
                                   _mm256_loadu_si256((const __m256i *)y1->qs), 1);
        }
        p[i].q = q;
        const __m512i sums =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(q4 ? 8 : (char)0x80), q);
        /* Q8_0: 0x80 read as unsigned 128 */
        p[i].off = _mm512_sub_epi32(_mm512_setzero_si512(), sums);
        p[i].d = pair_scales(y0->d, y1->d, idx);
    }
}

AVX512 static void gemv_q4_0_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 32, np = nb / 2;
    if (np > PAIR_CACHE || nb % 2) {
        gemv_q4_0_vnni(k, w, ws, m, a, c);
        return;
    }
    act_pair pr[PAIR_CACHE];
    prepare_pairs(a, np, 1, pr);
    const __m512i m4 = _mm512_set1_epi8(0x0f), idx = IDX_Q4_0;
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q4_0 *x = (const lw__block_q4_0 *)((const uint8_t *)w + (size_t)r * ws);
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
        int64_t i = 0;
#define Q4_0_PAIR(acc)                                                                                       \
    {                                                                                                        \
        const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)x[2 * i + 1].qs),                \
                                           _mm_loadu_si128((const __m128i *)x[2 * i].qs));                   \
        const __m512i q =                                                                                    \
            _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1), m4); \
        const __m512i s = _mm512_dpbusd_epi32(pr[i].off, q, pr[i].q);                                        \
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),                                                         \
                              _mm512_mul_ps(pair_scales(x[2 * i].d, x[2 * i + 1].d, idx), pr[i].d), acc);    \
        i++;                                                                                                 \
    }
        for (; i + 2 <= np;) {
            Q4_0_PAIR(acc0)
            Q4_0_PAIR(acc1)
        }
        if (i < np) Q4_0_PAIR(acc0)
#undef Q4_0_PAIR
        c[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
}

AVX512 static void gemv_q8_0_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 32, np = nb / 2;
    if (np > PAIR_CACHE || nb % 2) {
        gemv_q8_0_vnni(k, w, ws, m, a, c);
        return;
    }
    act_pair pr[PAIR_CACHE];
    prepare_pairs(a, np, 0, pr);
    const __m512i sign = _mm512_set1_epi8((char)0x80), idx = IDX_Q8_0;
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q8_0 *x = (const lw__block_q8_0 *)((const uint8_t *)w + (size_t)r * ws);
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
        int64_t i = 0;
#define Q8_0_PAIR(acc)                                                                                       \
    {                                                                                                        \
        const __m512i q = _mm512_xor_si512(                                                                  \
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[2 * i].qs)),     \
                               _mm256_loadu_si256((const __m256i *)x[2 * i + 1].qs), 1),                     \
            sign);                                                                                           \
        const __m512i s = _mm512_dpbusd_epi32(pr[i].off, q, pr[i].q);                                        \
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),                                                         \
                              _mm512_mul_ps(pair_scales(x[2 * i].d, x[2 * i + 1].d, idx), pr[i].d), acc);    \
        i++;                                                                                                 \
    }
        for (; i + 2 <= np;) {
            Q8_0_PAIR(acc0)
            Q8_0_PAIR(acc1)
        }
        if (i < np) Q8_0_PAIR(acc0)
#undef Q8_0_PAIR
        c[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K: per sub-block of 32, maddubs of the nibbles with y, times the sub-block's 6-bit scale (madd with
 * the scale broadcast: int32 lanes); the mins through the activation's sums of 16.
 * ------------------------------------------------------------------------------------------------------- */

/* Q4_K's 12 packed bytes -> 8 scales (bytes 0..7) and 8 mins (bytes 8..15), each 6 bits. */
AVX2 static INLINE __m128i k4_scales_mins(const uint8_t *scales) {
    uint32_t u[4];
    memcpy(u, scales, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
    const uint32_t mins_lo = u[1] & m6;
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
    u[2] = mins_lo;
    u[0] &= m6;
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

/* int16 lane j of v (8 lanes, both 128-bit halves equal) broadcast to all 16 lanes. */
#define BCAST16(v, j) _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(((2 * (j) + 1) << 8) | (2 * (j)))))

/* Integer lanes of one row's super-block: sum over sub-blocks of sc * (q . y), in 8 int32 lanes. */
AVX2 static INLINE __m256i q4_K_lanes(const uint8_t *qs, const int8_t *yq, __m256i sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i sum = _mm256_setzero_si256();
#define Q4K_STEP(j)                                                                                          \
    {                                                                                                        \
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j)));                              \
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, m4),                                     \
                                                _mm256_loadu_si256((const __m256i *)(yq + 64 * (j))));       \
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),               \
                                                _mm256_loadu_si256((const __m256i *)(yq + 64 * (j) + 32)));  \
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(p0, BCAST16(sc, 2 * (j))),            \
                                                     _mm256_madd_epi16(p1, BCAST16(sc, 2 * (j) + 1))));      \
    }
    Q4K_STEP(0)
    Q4K_STEP(1)
    Q4K_STEP(2)
    Q4K_STEP(3)
#undef Q4K_STEP
        return sum;
}

/* One row's super-block b into acc (scale lanes) and accm (min lanes). */
AVX2 static INLINE void q4_K_block(const lw__block_q4_K *x, const lw__block_q8_K *y, __m128i ypair,
                                   __m256 *acc, __m128 *accm) {
    const __m128i sm = k4_scales_mins(x->scales);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), ypair);
    const __m256i s = q4_K_lanes(x->qs, y->qs, sc);
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(h2f(x->d) * y->d), *acc);
    *accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(-h2f(x->dmin) * y->d), *accm);
}

AVX2 static INLINE float q4_K_total(__m256 acc, __m128 accm) {
    return hsum8(_mm256_add_ps(acc, _mm256_insertf128_ps(_mm256_setzero_ps(), accm, 0)));
}

AVX2 static void gemv_q4_K_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q4_K *x = (const lw__block_q4_K *)((const uint8_t *)w + (size_t)r * ws);
        __m256 acc = _mm256_setzero_ps();
        __m128 accm = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m128i ypair = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[b].bsums),
                                                 _mm_loadu_si128((const __m128i *)(y[b].bsums + 8)));
            q4_K_block(&x[b], &y[b], ypair, &acc, &accm);
        }
        c[r] = q4_K_total(acc, accm);
    }
}

/* Q4_K on 512-bit registers: 64 bytes of quants per step, the low nibbles holding sub-blocks 4j and 4j + 2
 * and the high ones 4j + 1 and 4j + 3 (j = 0, 1); the activation's quants are reordered to match once per
 * call, the sub-block scales spread over their 32 int16 lanes by one vpermw each, and vpdpwssd adds the
 * scaled pair sums into 16 int32 lanes. */

/* Super-blocks prepared per call on the stack (256 bytes each, 8 KiB): rows up to 8192 wide. */
#define K_CACHE 32

AVX512 static INLINE __m512i cat256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

AVX512 static void gemv_q4_K_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    if (nb > K_CACHE) {
        gemv_q4_K_avx2(k, w, ws, m, a, c);
        return;
    }
    __m512i yr[K_CACHE][4]; /* [2j]: elements of the low nibbles of step j, [2j + 1]: of the high ones */
    __m128i ypair[K_CACHE];
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *q = y[b].qs;
        for (int j = 0; j < 2; j++) {
            const int8_t *p = q + 128 * j;
            yr[b][2 * j] =
                cat256(_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)(p + 64)));
            yr[b][2 * j + 1] = cat256(_mm256_loadu_si256((const __m256i *)(p + 32)),
                                      _mm256_loadu_si256((const __m256i *)(p + 96)));
        }
        ypair[b] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[b].bsums),
                                  _mm_loadu_si128((const __m128i *)(y[b].bsums + 8)));
    }
    /* int16 lane i of the scale vector of (step j, nibble h) = scale of sub-block 4j + h + 2 * (i >= 16) */
    const __m512i i00 = _mm512_set_epi16(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i one = _mm512_set1_epi16(1);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q4_K *x = (const lw__block_q4_K *)((const uint8_t *)w + (size_t)r * ws);
        __m512 acc = _mm512_setzero_ps();
        __m128 accm = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m128i sm = k4_scales_mins(x[b].scales);
            const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm)); /* 8 scales as int16 */
            __m512i sum = _mm512_setzero_si512();
            for (int j = 0; j < 2; j++) {
                const __m512i qv = _mm512_loadu_si512((const void *)(x[b].qs + 64 * j));
                const __m512i lo = _mm512_and_si512(qv, m4),
                              hi = _mm512_and_si512(_mm512_srli_epi16(qv, 4), m4);
                const __m512i idx = _mm512_add_epi16(i00, _mm512_set1_epi16((short)(4 * j)));
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(lo, yr[b][2 * j]),
                                          _mm512_permutexvar_epi16(idx, sc));
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(hi, yr[b][2 * j + 1]),
                                          _mm512_permutexvar_epi16(_mm512_add_epi16(idx, one), sc));
            }
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(h2f(x[b].d) * y[b].d), acc);
            const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), ypair[b]);
            accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(-h2f(x[b].dmin) * y[b].d), accm);
        }
        c[r] = _mm512_reduce_add_ps(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q6_K: unsigned 6-bit values times y per 16 (int8 scales), the -32 offset through the activation's sums.
 * ------------------------------------------------------------------------------------------------------- */

AVX2 static INLINE __m256i q6_K_lanes(const lw__block_q6_K *x, const lw__block_q8_K *y) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales)); /* 16 x int16 */
    const __m256i lo8 = _mm256_permute4x64_epi64(sc16, 0x44), hi8 = _mm256_permute4x64_epi64(sc16, 0xee);
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
        __m256i u[4];
        u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
        u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                               _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x0c)), 2));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), _mm256_set1_epi8(0x30)));
        const __m256i s8 = h ? hi8 : lo8; /* scales 8h .. 8h + 7 in both halves */
        for (int cc = 0; cc < 4; ++cc) {
            /* chunk cc of 32: scale 8h + 2cc for its first 16, 8h + 2cc + 1 for the rest */
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * cc));
            const __m256i s = _mm256_blend_epi32(BCAST16(s8, 2 * cc), BCAST16(s8, 2 * cc + 1), 0xf0);
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[cc], q8), s));
        }
    }
    const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), sc16);
    return _mm256_sub_epi32(sum, _mm256_slli_epi32(corr, 5));
}

AVX2 static void gemv_q6_K_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q6_K *x = (const lw__block_q6_K *)((const uint8_t *)w + (size_t)r * ws);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q6_K_lanes(&x[b], &y[b])),
                                  _mm256_set1_ps(h2f(x[b].d) * y[b].d), acc);
        }
        c[r] = hsum8(acc);
    }
}

/* Q6_K on 512-bit registers: per half of 128, the 64 low-bit bytes as one zmm give elements 0..63 (low
 * nibbles) and 64..127 (high nibbles) in order, so the activation needs no reordering; the 2 high bits come
 * from the 32 qh bytes and the same bytes shifted by 2, side by side. Scales per 16 by vpermw, the -32 offset
 * through the activation's sums of 16. */
AVX512 static void gemv_q6_K_avx512(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c) {
    const int64_t nb = k / 256;
    const lw__block_q8_K *y = a;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
    /* int16 lane i of a 64-element step covers elements 2i, 2i + 1: sub-block i / 8 of its 4 */
    const __m512i i0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
                                        1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int64_t r = 0; r < m; r++) {
        const lw__block_q6_K *x = (const lw__block_q6_K *)((const uint8_t *)w + (size_t)r * ws);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
            const __m512i sc = _mm512_castsi256_si512(sc16);
            __m512i sum = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const __m512i l = _mm512_loadu_si512((const void *)(x[b].ql + 64 * h));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
                const __m512i hz = cat256(qh, _mm256_srli_epi16(qh, 2));
                const __m512i u0 =
                    _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(hz, m3), 4));
                const __m512i u1 =
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(hz, m30));
                const __m512i y0 = _mm512_loadu_si512((const void *)(y[b].qs + 128 * h));
                const __m512i y1 = _mm512_loadu_si512((const void *)(y[b].qs + 128 * h + 64));
                const __m512i idx = _mm512_add_epi16(i0, _mm512_set1_epi16((short)(8 * h)));
                sum =
                    _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u0, y0), _mm512_permutexvar_epi16(idx, sc));
                sum = _mm512_dpwssd_epi32(
                    sum, _mm512_maddubs_epi16(u1, y1),
                    _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16(4)), sc));
            }
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[b].bsums), sc16);
            sum = _mm512_sub_epi32(sum,
                                   _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_slli_epi32(corr, 5), 0));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(h2f(x[b].d) * y[b].d), acc);
        }
        c[r] = _mm512_reduce_add_ps(acc);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Selection
 * ------------------------------------------------------------------------------------------------------- */

static int has_avx2(void) {
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1); /* F16C */
}

static int has_vnni(void) {
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
}

lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa) {
    if (isa == LW_GEMV_BEST) {
        lw__quant_gemv_fn f = lw__quant_gemv_isa(type, LW_GEMV_AVX512);
        if (!f) f = lw__quant_gemv_isa(type, LW_GEMV_VNNI);
        return f ? f : lw__quant_gemv_isa(type, LW_GEMV_AVX2);
    }
    if (isa == LW_GEMV_AVX512 && has_vnni() && __builtin_cpu_supports("avx512f")) {
        if (type == LW_TYPE_Q4_0) return gemv_q4_0_avx512;
        if (type == LW_TYPE_Q8_0) return gemv_q8_0_avx512;
        if (type == LW_TYPE_Q4_K) return gemv_q4_K_avx512;
        if (type == LW_TYPE_Q6_K) return gemv_q6_K_avx512;
    }
    if (isa == LW_GEMV_VNNI && has_vnni()) { /* only where VNNI changes the code */
        if (type == LW_TYPE_Q4_0) return gemv_q4_0_vnni;
        if (type == LW_TYPE_Q8_0) return gemv_q8_0_vnni;
    }
    if (isa == LW_GEMV_AVX2 && has_avx2()) {
        if (type == LW_TYPE_Q4_0) return gemv_q4_0_avx2;
        if (type == LW_TYPE_Q8_0) return gemv_q8_0_avx2;
        if (type == LW_TYPE_Q4_K) return gemv_q4_K_avx2;
        if (type == LW_TYPE_Q6_K) return gemv_q6_K_avx2;
    }
    return NULL;
}

#elif defined(__wasm_simd128__)

lw__quant_gemv_fn lw__quant_gemv_wasm(uint32_t type); /* quant-gemv-wasm.c */

lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa) {
    return isa == LW_GEMV_BEST || isa == LW_GEMV_SIMD128 ? lw__quant_gemv_wasm(type) : NULL;
}

#else

lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa) {
    (void)type, (void)isa;
    return NULL;
}

#endif

lw__quant_gemv_fn lw__quant_gemv_own(uint32_t type) {
    const char *force = getenv("LW_CPU_KERNELS");
    if (force && (!strcmp(force, "exact") || !strcmp(force, "scalar"))) return NULL;
    return lw__quant_gemv_isa(type, LW_GEMV_BEST);
}
