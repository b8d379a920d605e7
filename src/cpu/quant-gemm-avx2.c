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

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K: per super-block and (row, token) two chains, acc = fma(float(sum_j sc_j s_j), d * dy, acc) and
 * accm = fma(float(sum_j mn_j B_j), dmin * dy, accm), result acc - accm (s_j: sub-block j's integer dot,
 * B_j: the sum of its activation quants, from the Q8_K bsums). The panel keeps per super-block the 8 rows'
 * d and dmin, per sub-block the rows' scales as int16 pairs (one vpmaddwd applies them to the int16 pair
 * sums: 8 groups of 2 x 15 x 128 stay within int16), the mins as int16 pairs per pair of sub-blocks, and the
 * quants of each sub-block as for Q4_0 (0..15, 4 per row side by side).
 * ------------------------------------------------------------------------------------------------------- */

#define K8_D     0                /* float d[8]                                         */
#define K8_DMIN  32               /* float dmin[8]                                      */
#define K8_SC    64               /* int16 (sc_j, sc_j)[8 sub-blocks][8 rows]           */
#define K8_MN    (K8_SC + 8 * 32) /* int16 (mn_2p, mn_2p+1)[4][8 rows]                  */
#define K8_Q     (K8_MN + 4 * 32) /* u8 q[8 sub-blocks][8 groups][8 rows][4]            */
#define K8_BLOCK (K8_Q + 8 * 256) /* 2496 bytes per super-block (scratch: 8 x 640 = 5120) */

/* Per token and super-block: scale and the 4 pairs of sub-block sums as int16 pairs. */
typedef struct k8_aux {
    float d;       /* activation scale                                                    */
    int32_t bp[4]; /* (B[2p] & 0xffff) | B[2p+1] << 16, B[j] = bsums[2j] + bsums[2j + 1] */
} k8_aux;

AVX2 static void q4_K_panel8(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p) {
    const uint8_t *rp[P8];
    rows8(w, ws, nr, rp);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < nb; i++) {
        const size_t bo = (size_t)i * sizeof(lw__block_q4_K);
        uint8_t *pb = p + (size_t)i * K8_BLOCK;
        for (int r = 0; r < P8; r++) {
            const lw__block_q4_K *x = (const lw__block_q4_K *)(rp[r] + bo);
            ((float *)(pb + K8_D))[r] = h2f(x->d);
            ((float *)(pb + K8_DMIN))[r] = h2f(x->dmin);
            int sc[8], mn[8];
            for (int j = 0; j < 8; j++) lw__k4_scale_min(j, x->scales, &sc[j], &mn[j]);
            for (int j = 0; j < 8; j++) {
                int16_t *v = (int16_t *)(pb + K8_SC + 32 * j) + 2 * r;
                v[0] = v[1] = (int16_t)sc[j];
            }
            for (int q = 0; q < 4; q++) {
                int16_t *v = (int16_t *)(pb + K8_MN + 32 * q) + 2 * r;
                v[0] = (int16_t)mn[2 * q], v[1] = (int16_t)mn[2 * q + 1];
            }
        }
        for (int q = 0; q < 4; q++) /* bytes 32q..: low nibbles = sub-block 2q, high = 2q + 1 */
            for (int g = 0; g < 8; g++) {
                const __m256i v = dwords8(rp, bo + offsetof(lw__block_q4_K, qs) + 32 * (size_t)q, g);
                _mm256_store_si256((__m256i *)(pb + K8_Q + 256 * (2 * q) + 32 * g), _mm256_and_si256(v, m4));
                _mm256_store_si256((__m256i *)(pb + K8_Q + 256 * (2 * q + 1) + 32 * g),
                                   _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
    }
}

AVX2 static INLINE void q4_K_tile8(int T, int64_t nb, const uint8_t *p, const uint8_t *a, size_t as,
                                   const k8_aux *aux, float *c, size_t cs, int nr) {
    __m256 acc[4], accm[4];
    for (int u = 0; u < T; u++) acc[u] = accm[u] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *pb = p + (size_t)i * K8_BLOCK;
        const __m256 dv = _mm256_load_ps((const float *)(pb + K8_D));
        const __m256 dmv = _mm256_load_ps((const float *)(pb + K8_DMIN));
        for (int u = 0; u < T; u++) {
            const int8_t *yq = ((const lw__block_q8_K *)(a + (size_t)u * as))[i].qs;
            const k8_aux *x = aux + (size_t)u * nb + i;
            __m256i isum = _mm256_setzero_si256(), imin = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i s16 = _mm256_setzero_si256();
                for (int g = 0; g < 8; g++) {
                    int32_t y4;
                    memcpy(&y4, yq + 32 * j + 4 * g, 4);
                    s16 = _mm256_add_epi16(
                        s16, _mm256_maddubs_epi16(
                                 _mm256_load_si256((const __m256i *)(pb + K8_Q + 256 * j + 32 * g)),
                                 _mm256_set1_epi32(y4)));
                }
                isum = _mm256_add_epi32(
                    isum, _mm256_madd_epi16(s16, _mm256_load_si256((const __m256i *)(pb + K8_SC + 32 * j))));
            }
            for (int q = 0; q < 4; q++)
                imin = _mm256_add_epi32(
                    imin, _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(pb + K8_MN + 32 * q)),
                                            _mm256_set1_epi32(x->bp[q])));
            const __m256 dy = _mm256_set1_ps(x->d);
            acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dv, dy), acc[u]);
            accm[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dmv, dy), accm[u]);
        }
    }
    for (int u = 0; u < T; u++) {
        float v[P8];
        _mm256_storeu_ps(v, _mm256_sub_ps(acc[u], accm[u]));
        memcpy(c + (size_t)u * cs, v, (size_t)nr * sizeof(float));
    }
}

AVX2 static void gemm_q4_K_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as,
                                int64_t nt, float *c, size_t cs, void *scratch) {
    const int64_t nb = k / LW_QK_K;
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    k8_aux *aux = (k8_aux *)(panel + (size_t)nb * K8_BLOCK);
    const uint8_t *act = a;
    for (int64_t t = 0; t < nt; t++) {
        const lw__block_q8_K *y = (const lw__block_q8_K *)(act + (size_t)t * as);
        for (int64_t i = 0; i < nb; i++) {
            k8_aux *x = &aux[t * nb + i];
            x->d = y[i].d;
            for (int q = 0; q < 4; q++) {
                const int b0 = y[i].bsums[4 * q] + y[i].bsums[4 * q + 1];
                const int b1 = y[i].bsums[4 * q + 2] + y[i].bsums[4 * q + 3];
                x->bp[q] = (int32_t)(((uint32_t)b0 & 0xffff) | ((uint32_t)b1 << 16));
            }
        }
    }
    for (int64_t r0 = 0; r0 < m; r0 += P8) {
        const int nr = m - r0 < P8 ? (int)(m - r0) : P8;
        q4_K_panel8(nb, (const uint8_t *)w + (size_t)r0 * ws, ws, nr, panel);
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            q4_K_tile8(4, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0,
                       cs, nr);
        for (; t < nt; t++)
            q4_K_tile8(1, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0,
                       cs, nr);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q6_K: per super-block and (row, token) acc = fma(float(sum_s sc_s (u_s . y_s) - 32 sum_s sc_s B_s), d dy,
 * acc) over the 16 sub-blocks s of 16 (u: the unsigned 6-bit values, B_s: the token's bsums). The panel keeps
 * the 8 rows' d, the values in element order (4 per row side by side per group; two groups' pair sums,
 * 4 x 63 x 128, fit int16), each sub-block's scales as int16 pairs and the scale pairs for the correction.
 * ------------------------------------------------------------------------------------------------------- */

#define K6_D     0                 /* float d[8]                                  */
#define K6_SC    32                /* int16 (sc_s, sc_s)[16][8 rows]              */
#define K6_SP    (K6_SC + 16 * 32) /* int16 (sc_2p, sc_2p+1)[8][8 rows]           */
#define K6_Q     (K6_SP + 8 * 32)  /* u8 u[64 groups][8 rows][4]                  */
#define K6_BLOCK (K6_Q + 64 * 32)  /* 2848 bytes per super-block (scratch: 5120)   */

AVX2 static void q6_K_panel8(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p) {
    const uint8_t *rp[P8];
    rows8(w, ws, nr, rp);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *pb = p + (size_t)i * K6_BLOCK;
        for (int r = 0; r < P8; r++) {
            const lw__block_q6_K *x = (const lw__block_q6_K *)rp[r] + i;
            ((float *)(pb + K6_D))[r] = h2f(x->d);
            for (int sb = 0; sb < 16; sb++) {
                int16_t *v = (int16_t *)(pb + K6_SC + 32 * sb) + 2 * r;
                v[0] = v[1] = x->scales[sb];
            }
            for (int q = 0; q < 8; q++) {
                int16_t *v = (int16_t *)(pb + K6_SP + 32 * q) + 2 * r;
                v[0] = x->scales[2 * q], v[1] = x->scales[2 * q + 1];
            }
            uint8_t u[256]; /* element order, as ggml's dequantize_row_q6_K */
            for (int h = 0; h < 2; h++)
                for (int l = 0; l < 32; l++) {
                    const uint8_t *ql = x->ql + 64 * h, qh = x->qh[32 * h + l];
                    u[128 * h + l] = (uint8_t)((ql[l] & 15) | (qh & 3) << 4);
                    u[128 * h + l + 32] = (uint8_t)((ql[l + 32] & 15) | ((qh >> 2) & 3) << 4);
                    u[128 * h + l + 64] = (uint8_t)((ql[l] >> 4) | ((qh >> 4) & 3) << 4);
                    u[128 * h + l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh >> 6) & 3) << 4);
                }
            for (int g = 0; g < 64; g++) memcpy(pb + K6_Q + 32 * g + 4 * r, u + 4 * g, 4);
        }
    }
}

AVX2 static INLINE void q6_K_tile8(int T, int64_t nb, const uint8_t *p, const uint8_t *a, size_t as, float *c,
                                   size_t cs, int nr) {
    __m256 acc[4];
    for (int u = 0; u < T; u++) acc[u] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *pb = p + (size_t)i * K6_BLOCK;
        const __m256 dv = _mm256_load_ps((const float *)(pb + K6_D));
        for (int u = 0; u < T; u++) {
            const lw__block_q8_K *y = (const lw__block_q8_K *)(a + (size_t)u * as) + i;
            __m256i isum = _mm256_setzero_si256(), corr = _mm256_setzero_si256();
            for (int sb = 0; sb < 16; sb++) { /* two groups' pair sums (<= 2 x 2 x 63 x 128) per int16 lane */
                const __m256i sc = _mm256_load_si256((const __m256i *)(pb + K6_SC + 32 * sb));
                const uint8_t *q = pb + K6_Q + 128 * sb;
                int32_t y4[4];
                memcpy(y4, y->qs + 16 * sb, 16);
                const __m256i s0 = _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)q), _mm256_set1_epi32(y4[0])),
                    _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(q + 32)),
                                         _mm256_set1_epi32(y4[1])));
                const __m256i s1 =
                    _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(q + 64)),
                                                          _mm256_set1_epi32(y4[2])),
                                     _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(q + 96)),
                                                          _mm256_set1_epi32(y4[3])));
                isum = _mm256_add_epi32(
                    isum, _mm256_add_epi32(_mm256_madd_epi16(s0, sc), _mm256_madd_epi16(s1, sc)));
            }
            for (int q = 0; q < 8; q++) {
                const int32_t bp = (int32_t)(((uint32_t)(uint16_t)y->bsums[2 * q]) |
                                             ((uint32_t)(uint16_t)y->bsums[2 * q + 1] << 16));
                corr = _mm256_add_epi32(
                    corr, _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(pb + K6_SP + 32 * q)),
                                            _mm256_set1_epi32(bp)));
            }
            isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5));
            acc[u] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dv, _mm256_set1_ps(y->d)), acc[u]);
        }
    }
    for (int u = 0; u < T; u++) {
        float v[P8];
        _mm256_storeu_ps(v, acc[u]);
        memcpy(c + (size_t)u * cs, v, (size_t)nr * sizeof(float));
    }
}

AVX2 static void gemm_q6_K_avx2(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as,
                                int64_t nt, float *c, size_t cs, void *scratch) {
    const int64_t nb = k / LW_QK_K;
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const uint8_t *act = a;
    for (int64_t r0 = 0; r0 < m; r0 += P8) {
        const int nr = m - r0 < P8 ? (int)(m - r0) : P8;
        q6_K_panel8(nb, (const uint8_t *)w + (size_t)r0 * ws, ws, nr, panel);
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            q6_K_tile8(4, nb, panel, act + (size_t)t * as, as, c + (size_t)t * cs + r0, cs, nr);
        for (; t < nt; t++)
            q6_K_tile8(1, nb, panel, act + (size_t)t * as, as, c + (size_t)t * cs + r0, cs, nr);
    }
}

lw__quant_gemm_fn lw__quant_gemm_own_avx2(uint32_t type) {
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
        !__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx >> 29 & 1)) /* F16C */
        return NULL;
    if (type == LW_TYPE_Q4_0) return gemm_q4_0_avx2;
    if (type == LW_TYPE_Q8_0) return gemm_q8_0_avx2;
    if (type == LW_TYPE_Q4_K) return gemm_q4_K_avx2;
    if (type == LW_TYPE_Q6_K) return gemm_q6_K_avx2;
    return NULL;
}

#else

lw__quant_gemm_fn lw__quant_gemm_own_avx2(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
