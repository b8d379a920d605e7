/* Tiled quantized products for prompts on AVX2 (no AVX-512 VNNI), in the engine's own float order
 * (quant-gemm.h: lw__quant_gemm_own): where the VNNI kernels have no counterpart, prompts on AVX2-only CPUs
 * otherwise run one row-by-token dot at a time, reloading every weight block once per token.
 *
 * Layout: a panel of 8 weight rows rebuilt per call in thread scratch, per 32-element block the 8 rows'
 * float scales, then for each group g of 4 elements (4g..4g + 3) the 8 rows' 4 quant bytes side by side (32
 * bytes = one ymm), so one vpmaddubsw against one token's 4 activation bytes broadcast forms 2 products into
 * each of 16 int16 lanes (two per row) and one vpmaddwd the row's int32 sum: 8 rows' exact block sums for
 * one token with no horizontal adds. Tiles of 4 tokens reuse the panel's block from L1.
 *   Q4_0: quants 0..15 as the unsigned side; the 8 groups' int16 pair sums add up in int16 (|sum| <= 8 * 2 *
 *         15 * 128 = 30720) before one vpmaddwd per block; -8 * sum y is the lane's start (as the VNNI tile).
 *   Q8_0: |w| as the unsigned side and y with w's sign (vpsignb; pair sums <= 2 * 128 * 127), one vpmaddwd
 *         per group. Exact for activations in -127..127 (the engine's Q8_0 quantizers never write -128).
 * Per block and (row, token): acc = fma(float(sum), dw * da, acc), the own order's chain.
 *
 * Built with per-function target attributes; the selector lives in quant-gemm-x86.c. */
#include "cpu/quant-gemm-internal.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>

/* every float step below is an explicit intrinsic */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define AVX2   __attribute__((target("avx2,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

#include "cpu/quant-avx2-common.h"

#define P8       8               /* weight rows per panel (one ymm of int32 / float lanes) */
#define P8_Q     (P8 * 4)        /* bytes of scales before a block's quants                */
#define P8_BLOCK (P8_Q + 8 * 32) /* 288 bytes per 32-element block                         */

/* Row pointers of a panel: rows past nr repeat the last one. */
static void rows8(const uint8_t *w, size_t ws, int nr, const uint8_t *rp[P8]) {
    for (int r = 0; r < P8; r++) rp[r] = w + (size_t)(r < nr ? r : nr - 1) * ws;
}

/* Dword j (bytes 4j..4j + 3) at byte offset off of the 8 rows, side by side. */
AVX2 static INLINE __m256i dwords8(const uint8_t *const rp[P8], size_t off, int j) {
    uint32_t t[P8];
    for (int r = 0; r < P8; r++) memcpy(&t[r], rp[r] + off + 4 * (size_t)j, 4);
    return _mm256_loadu_si256((const __m256i *)t);
}

/* Panel of rows [0, nr) of Q4_0 (q4 != 0) or Q8_0 weights into p. */
AVX2 static INLINE void panel8(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p, int q4) {
    const uint8_t *rp[P8];
    rows8(w, ws, nr, rp);
    const size_t bs = q4 ? sizeof(lw__block_q4_0) : sizeof(lw__block_q8_0);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const size_t bo = (size_t)b * bs;
        uint8_t *pb = p + (size_t)b * P8_BLOCK;
        for (int r = 0; r < P8; r++) {
            uint16_t h;
            memcpy(&h, rp[r] + bo, 2);
            ((float *)pb)[r] = h2f(h);
        }
        if (q4) {
            for (int j = 0; j < 4; j++) { /* dword j: low nibbles = elements 4j.., high = 16 + 4j.. */
                const __m256i v = dwords8(rp, bo + 2, j);
                _mm256_store_si256((__m256i *)(pb + P8_Q + 32 * j), _mm256_and_si256(v, m4));
                _mm256_store_si256((__m256i *)(pb + P8_Q + 32 * (j + 4)),
                                   _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
        } else {
            for (int j = 0; j < 8; j++)
                _mm256_store_si256((__m256i *)(pb + P8_Q + 32 * j), dwords8(rp, bo + 2, j));
        }
    }
}

/* T tokens (rows of a) against one panel: c[u * cs + r] for r < nr. */
AVX2 static INLINE void tile8(int T, int64_t nb, const uint8_t *p, const uint8_t *a, size_t as,
                              const lw__act_aux *aux, float *c, size_t cs, int nr, int q4) {
    __m256 acc[4];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int u = 0; u < T; u++) acc[u] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb = p + (size_t)b * P8_BLOCK;
        const __m256 dw = _mm256_load_ps((const float *)pb);
        for (int u = 0; u < T; u++) {
            const lw__block_q8_0 *y = (const lw__block_q8_0 *)(a + (size_t)u * as) + b;
            const lw__act_aux *x = aux + (size_t)u * nb + b;
            __m256i s = _mm256_set1_epi32(x->corr);
            if (q4) {
                __m256i s16 = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++) {
                    int32_t y4;
                    memcpy(&y4, y->qs + 4 * j, 4);
                    s16 = _mm256_add_epi16(
                        s16, _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(pb + P8_Q + 32 * j)),
                                                  _mm256_set1_epi32(y4)));
                }
                s = _mm256_add_epi32(s, _mm256_madd_epi16(s16, ones));
            } else {
                for (int j = 0; j < 8; j++) {
                    int32_t y4;
                    memcpy(&y4, y->qs + 4 * j, 4);
                    const __m256i wv = _mm256_load_si256((const __m256i *)(pb + P8_Q + 32 * j));
                    const __m256i pr = _mm256_maddubs_epi16(_mm256_abs_epi8(wv),
                                                            _mm256_sign_epi8(_mm256_set1_epi32(y4), wv));
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(pr, ones));
                }
            }
            acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(x->d)), acc[u]);
        }
    }
    for (int u = 0; u < T; u++) {
        if (nr == P8) {
            _mm256_storeu_ps(c + (size_t)u * cs, acc[u]);
        } else {
            float v[P8];
            _mm256_storeu_ps(v, acc[u]);
            memcpy(c + (size_t)u * cs, v, (size_t)nr * sizeof(float));
        }
    }
}

AVX2 static INLINE void gemm8(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as,
                              int64_t nt, float *c, size_t cs, void *scratch, int q4) {
    const int64_t nb = k / 32;
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    lw__act_aux *aux = (lw__act_aux *)(panel + (size_t)nb * P8_BLOCK);
    const uint8_t *act = a;
    lw__qgemm_q8_0_aux(nb, act, as, nt, aux, q4 ? -8 : 0);
    for (int64_t r0 = 0; r0 < m; r0 += P8) {
        const int nr = m - r0 < P8 ? (int)(m - r0) : P8;
        panel8(nb, (const uint8_t *)w + (size_t)r0 * ws, ws, nr, panel, q4);
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            tile8(4, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0, cs,
                  nr, q4);
        for (; t < nt; t++)
            tile8(1, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0, cs,
                  nr, q4);
    }
}

AVX2 static void gemm_q4_0_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as,
                                int64_t nt, float *c, size_t cs, void *scratch) {
    gemm8(k, w, ws, m, a, as, nt, c, cs, scratch, 1);
}

AVX2 static void gemm_q8_0_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as,
                                int64_t nt, float *c, size_t cs, void *scratch) {
    gemm8(k, w, ws, m, a, as, nt, c, cs, scratch, 0);
}

lw__quant_gemm_fn lw__quant_gemm_own_avx2(uint32_t type) {
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
        !__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx >> 29 & 1)) /* F16C */
        return NULL;
    if (type == LW_TYPE_Q4_0) return gemm_q4_0_avx2;
    if (type == LW_TYPE_Q8_0) return gemm_q8_0_avx2;
    return NULL;
}

#else

lw__quant_gemm_fn lw__quant_gemm_own_avx2(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
