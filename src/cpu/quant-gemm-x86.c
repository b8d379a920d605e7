/* x86 tiled quantized matrix products (quant-gemm.h), chosen at run time. AVX-512 VNNI (Zen 4/5, Ice Lake
 * and later); other CPUs keep the row-by-row dots.
 *
 * Many tokens (prompts): Q4_0 and Q4_K (llama.cpp's repacked orders) rebuild each panel of 16 weight rows
 * per call in thread scratch: per block the 16 rows' scales, then for each group of 4 elements the 16
 * rows' 4 quant bytes side by side (64 bytes = one zmm), so one vpdpbusd against one token's 4 activation
 * bytes broadcast adds 4 products into each of the 16 rows' int32 lanes: a block's exact integer sums for
 * 16 rows and one token come from 8 instructions with no horizontal adds. Q8_0 and Q6_K (ggml's x86 dot
 * order, 8 float lanes per row) put two rows' 8 lanes in a zmm instead. The float steps stay per (row,
 * token) lane, in the reference's order.
 * One token (decode): Q4_0 and Q4_K read each weight once, 4 rows per zmm, and add block sums with a 4x4
 * transpose so 16 rows' fma chains run side by side.
 *
 * Built with per-function target attributes (as quant-dot-avx2.c); stubs on other architectures. */
#include "cpu/quant-gemm.h"
#include "cpu/quant-gemm-internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define PANEL 16 /* weight rows per panel (one zmm of int32 / float lanes) */

/* Panel bytes per 32-element block: 16 float scales + 8 groups x 16 rows x 4 bytes. */
#define PANEL_BLOCK (PANEL * 4 + 8 * PANEL * 4)

size_t lw__quant_gemm_scratch(int64_t k, int64_t nt) {
    const size_t nb = (size_t)(k / 32);
    /* the largest panel (Q4_K: 4992 bytes per 256 elements) and per-block data (8 bytes per 32) */
    return nb * 640 + (size_t)nt * nb * sizeof(lw__act_aux) + 64;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>

/* every float step below is an explicit intrinsic */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define VNNI512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE  inline __attribute__((always_inline))

VNNI512 static INLINE float h2f(uint16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0 (llama.cpp's repacked order, gemv = gemm): acc = fma(float(sumi), dw * da, acc) per block, where
 * sumi = sum (q - 8) * y = sum q * y - 8 * sum y. Quants go in as unsigned 0..15 (vpdpbusd's unsigned
 * side), activations signed; the -8 * sum y part is the lane's starting value.
 * ------------------------------------------------------------------------------------------------------- */

/* Panels keep rows in the order a 4x4 transpose inside 128-bit lanes leaves them: lane 4l + k holds row
 * 4k + l (its own inverse: out = permutexvar(LANE_ROW, acc) puts row r back in lane r). */
#define LANE_ROW _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)

/* 4 zmm of 4 rows x 4 dwords (row 4k + l in register k's 128-bit lane l) -> r[j] = dword j of the 16 rows
 * in panel order. */
VNNI512 static INLINE void transpose4x4x4(const __m512i t[4], __m512i r[4]) {
    const __m512i a = _mm512_unpacklo_epi32(t[0], t[1]), b = _mm512_unpackhi_epi32(t[0], t[1]);
    const __m512i c = _mm512_unpacklo_epi32(t[2], t[3]), d = _mm512_unpackhi_epi32(t[2], t[3]);
    r[0] = _mm512_unpacklo_epi64(a, c);
    r[1] = _mm512_unpackhi_epi64(a, c);
    r[2] = _mm512_unpacklo_epi64(b, d);
    r[3] = _mm512_unpackhi_epi64(b, d);
}

/* 16 bytes at offset off of rows 4q..4q+3 (row pointers rp) as one zmm per q. */
VNNI512 static INLINE void load4x4(const uint8_t *const rp[16], size_t off, __m512i t[4]) {
    for (int q = 0; q < 4; q++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(rp[4 * q] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rp[4 * q + 1] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rp[4 * q + 2] + off)), 2);
        t[q] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rp[4 * q + 3] + off)), 3);
    }
}

/* Row pointers of a panel (rows past nr repeat the last one) and each lane's byte offset from rp[0]. */
static void panel_rows(const uint8_t *w, size_t ws, int nr, const uint8_t *rp[16], int32_t off[16]) {
    for (int r = 0; r < 16; r++) rp[r] = w + (size_t)(r < nr ? r : nr - 1) * ws;
    for (int l = 0; l < 16; l++) off[l] = (int32_t)(rp[4 * (l % 4) + l / 4] - rp[0]);
}

/* The fp16 at byte offset o of each lane's row, as floats in panel order. */
VNNI512 static INLINE __m512 gather_h(__m512i voff, const uint8_t *base) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(voff, base, 1)));
}

/* Panel of rows [0, nr) (nr <= 16) of Q4_0 weights into p. */
VNNI512 static void q4_0_panel(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const uint8_t *rp[16];
    int32_t off[16];
    panel_rows(w, ws, nr, rp, off);
    const __m512i voff = _mm512_loadu_si512(off);
    for (int64_t b = 0; b < nb; b++) {
        const size_t bo = (size_t)b * sizeof(lw__block_q4_0);
        uint8_t *pb = p + (size_t)b * PANEL_BLOCK;
        _mm512_store_ps((float *)pb, gather_h(voff, rp[0] + bo));
        __m512i t[4], r[4];
        load4x4(rp, bo + 2, t);
        transpose4x4x4(t, r);
        for (int j = 0; j < 4; j++) { /* dword j: low nibbles = elements 4j.., high = 16 + 4j.. */
            _mm512_store_si512(pb + PANEL * 4 + 64 * j, _mm512_and_si512(r[j], m4));
            _mm512_store_si512(pb + PANEL * 4 + 64 * (j + 4),
                               _mm512_and_si512(_mm512_srli_epi16(r[j], 4), m4));
        }
    }
}

/* Per token and block: scale and mul * sum of the quants (quant-gemm-internal.h). */
__attribute__((target("avx2,f16c"))) void lw__qgemm_q8_0_aux(int64_t nb, const uint8_t *a, size_t as,
                                                             int64_t nt, lw__act_aux *aux, int32_t mul) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (int64_t t = 0; t < nt; t++) {
        const lw__block_q8_0 *y = (const lw__block_q8_0 *)(a + (size_t)t * as);
        for (int64_t b = 0; b < nb; b++) {
            const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y[b].qs), bias);
            const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256()); /* sums of (q + 128), 4 x 8 bytes */
            const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const int32_t sum = (int32_t)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
            aux[t * nb + b].d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(y[b].d)));
            aux[t * nb + b].corr = mul * sum;
        }
    }
}

/* T tokens (rows of a) against one panel: c[u * cs + r] for r < nr. */
VNNI512 static INLINE void q4_0_tile(int T, int64_t nb, const uint8_t *p, const uint8_t *a, size_t as,
                                     const lw__act_aux *aux, float *c, size_t cs, int nr) {
    __m512 acc[8];
    for (int u = 0; u < T; u++) acc[u] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb = p + (size_t)b * PANEL_BLOCK;
        const __m512 dw = _mm512_load_ps((const float *)pb);
        __m512i wq[8];
        for (int j = 0; j < 8; j++) wq[j] = _mm512_load_si512(pb + PANEL * 4 + 64 * j);
        for (int u = 0; u < T; u++) {
            const lw__block_q8_0 *y = (const lw__block_q8_0 *)(a + (size_t)u * as) + b;
            const lw__act_aux *x = aux + (size_t)u * nb + b;
            __m512i s = _mm512_set1_epi32(x->corr);
            for (int j = 0; j < 8; j++) {
                int32_t y4;
                memcpy(&y4, y->qs + 4 * j, 4);
                s = _mm512_dpbusd_epi32(s, wq[j], _mm512_set1_epi32(y4));
            }
            acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(x->d)), acc[u]);
        }
    }
    const __mmask16 mask = (__mmask16)((1u << nr) - 1);
    for (int u = 0; u < T; u++)
        _mm512_mask_storeu_ps(c + (size_t)u * cs, mask, _mm512_permutexvar_ps(LANE_ROW, acc[u]));
}

/* Panel of rows [0, nr) of Q8_0 weights into p, in the Q4_0 panel's layout: per block the 16 rows' scales,
 * then group g (elements 4g..4g + 3) of the 16 rows as q + 128 (vpdpbusd's unsigned side; the 128 * sum y
 * it adds is the lane's starting value, as Q4_0's 8 * sum y). */
VNNI512 static void q8_0_panel(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    const uint8_t *rp[16];
    int32_t off[16];
    panel_rows(w, ws, nr, rp, off);
    const __m512i voff = _mm512_loadu_si512(off);
    for (int64_t b = 0; b < nb; b++) {
        const size_t bo = (size_t)b * sizeof(lw__block_q8_0);
        uint8_t *pb = p + (size_t)b * PANEL_BLOCK;
        _mm512_store_ps((float *)pb, gather_h(voff, rp[0] + bo));
        for (int h = 0; h < 2; h++) { /* quants 16h..16h + 15: groups 4h..4h + 3 */
            __m512i t[4], r[4];
            load4x4(rp, bo + 2 + 16 * (size_t)h, t);
            transpose4x4x4(t, r);
            for (int j = 0; j < 4; j++)
                _mm512_store_si512(pb + PANEL * 4 + 64 * (4 * h + j), _mm512_xor_si512(r[j], bias));
        }
    }
}

/* Panels of 16 rows (built by panel()) against tiles of 8 tokens: Q4_0 (mul -8) and Q8_0 (mul -128). */
VNNI512 static INLINE void gemm_32_vnni512(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                           size_t as, int64_t nt, float *c, size_t cs, void *scratch,
                                           void (*panel_fn)(int64_t, const uint8_t *, size_t, int, uint8_t *),
                                           int32_t mul) {
    const int64_t nb = k / 32;
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    lw__act_aux *aux = (lw__act_aux *)(panel + (size_t)nb * PANEL_BLOCK);
    const uint8_t *act = a;
    lw__qgemm_q8_0_aux(nb, act, as, nt, aux, mul);
    for (int64_t r0 = 0; r0 < m; r0 += PANEL) {
        const int nr = m - r0 < PANEL ? (int)(m - r0) : PANEL;
        panel_fn(nb, (const uint8_t *)w + (size_t)r0 * ws, ws, nr, panel);
        int64_t t = 0;
        for (; t + 8 <= nt; t += 8)
            q4_0_tile(8, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0,
                      cs, nr);
        for (; t < nt; t++)
            q4_0_tile(1, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0,
                      cs, nr);
    }
}

VNNI512 static void gemm_q4_0_vnni512(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                      size_t as, int64_t nt, float *c, size_t cs, void *scratch) {
    gemm_32_vnni512(k, w, ws, m, a, as, nt, c, cs, scratch, q4_0_panel, -8);
}

/* Q8_0 in the engine's own order (quant-gemm.h: lw__quant_gemm_own): one fma per block and (row, token),
 * 16 rows per zmm, where ggml's x86 order keeps 8 float lanes per (row, token) and needs 8 fmas per block
 * (gemm_q8_0_vnni512 below: ~3x the float work of this one). */
VNNI512 static void gemm_q8_0_own_vnni512(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                          size_t as, int64_t nt, float *c, size_t cs, void *scratch) {
    gemm_32_vnni512(k, w, ws, m, a, as, nt, c, cs, scratch, q8_0_panel, -128);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q8_0 (plain weights; ggml's x86 order): per (row, token) 8 float lanes, lane k fused-multiply-adding each
 * block's exact sum of the 4 products of elements 4k..4k+3 (|x| times y with x's sign, the reference's
 * int8 quirks included) times dw * da; the 8 lanes meet at the end in hsum8's tree. A zmm holds two rows'
 * 8 lanes, so weight blocks are used as they are (no panel): two rows' 32 quants side by side against one
 * token's 32 quants broadcast to both halves.
 * ------------------------------------------------------------------------------------------------------- */

/* The references' hsum8_x86: upper half + lower half, then (r0 + r2) + (r1 + r3). */
static float hsum8(const float *acc) {
    float r[4];
    for (int k = 0; k < 4; k++) r[k] = acc[4 + k] + acc[k];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* Rows r0, r0 + 1 of weights times tokens [0, T): c[u * cs + 0..1]. */
VNNI512 static INLINE void q8_0_tile(int T, int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a,
                                     size_t as, const float *da, float *c, size_t cs, int two) {
    __m512 acc[2][4];
    for (int i = 0; i < 2; i++)
        for (int u = 0; u < T; u++) acc[i][u] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t b = 0; b < nb; b++) {
        __m512i ax[2];
        __mmask64 neg[2];
        __m512 dw[2];
        for (int i = 0; i < 2; i++) {
            const lw__block_q8_0 *x0 = (const lw__block_q8_0 *)(w + (size_t)(2 * i) * ws) + b;
            const lw__block_q8_0 *x1 = (const lw__block_q8_0 *)(w + (size_t)(2 * i + two) * ws) + b;
            const __m512i xv =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x0->qs)),
                                   _mm256_loadu_si256((const __m256i *)x1->qs), 1);
            ax[i] = _mm512_abs_epi8(xv); /* -128 stays 0x80: unsigned 128 for vpdpbusd */
            neg[i] = _mm512_movepi8_mask(xv);
            dw[i] = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(h2f(x0->d))),
                                                        _mm256_castps_pd(_mm256_set1_ps(h2f(x1->d))), 1));
        }
        for (int u = 0; u < T; u++) {
            const lw__block_q8_0 *y = (const lw__block_q8_0 *)(a + (size_t)u * as) + b;
            const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y->qs));
            const __m512 d = _mm512_set1_ps(da[(size_t)u * nb + b]);
            for (int i = 0; i < 2; i++) {
                const __m512i sy = _mm512_mask_sub_epi8(yv, neg[i], zero, yv); /* -y where x < 0, wrapping */
                const __m512i l = _mm512_dpbusd_epi32(zero, ax[i], sy);
                acc[i][u] = _mm512_fmadd_ps(_mm512_mul_ps(dw[i], d), _mm512_cvtepi32_ps(l), acc[i][u]);
            }
        }
    }
    for (int u = 0; u < T; u++) {
        for (int i = 0; i < 2; i++) {
            float v[16];
            _mm512_storeu_ps(v, acc[i][u]);
            c[(size_t)u * cs + 2 * i] = hsum8(v);
            if (two) c[(size_t)u * cs + 2 * i + 1] = hsum8(v + 8);
        }
    }
}

VNNI512 static void gemm_q8_0_vnni512(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                      size_t as, int64_t nt, float *c, size_t cs, void *scratch) {
    const int64_t nb = k / 32;
    float *da = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (int64_t t = 0; t < nt; t++) {
        const lw__block_q8_0 *y = (const lw__block_q8_0 *)((const uint8_t *)a + (size_t)t * as);
        for (int64_t b = 0; b < nb; b++) da[t * nb + b] = h2f(y[b].d);
    }
    const uint8_t *wb = w, *ab = a;
    int64_t r = 0;
    for (; r + 4 <= m; r += 4) {
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            q8_0_tile(4, nb, wb + (size_t)r * ws, ws, ab + (size_t)t * as, as, da + t * nb,
                      c + (size_t)t * cs + r, cs, 1);
        for (; t < nt; t++)
            q8_0_tile(1, nb, wb + (size_t)r * ws, ws, ab + (size_t)t * as, as, da + t * nb,
                      c + (size_t)t * cs + r, cs, 1);
    }
    for (; r < m; r++) /* the last 1..3 rows one at a time (the second row of each pair repeats the first) */
        for (int64_t t = 0; t < nt; t++) {
            float tmp[4];
            q8_0_tile(1, nb, wb + (size_t)r * ws, 0, ab + (size_t)t * as, as, da + t * nb, tmp, 4, 0);
            c[(size_t)t * cs + r] = tmp[0];
        }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K (llama.cpp's repacked 4-row gemm order): per super-block and pair of 32-element sub-blocks,
 * acc = fma(float(sc[2p] s[2p] + sc[2p+1] s[2p+1]), dw * da, acc) and acc_min = fma(float(mn[2p] B[2p] +
 * mn[2p+1] B[2p+1]), dmin * da, acc_min), result acc - acc_min (s: a sub-block's integer dot, B: the
 * sum of its activation quants). The panel keeps per super-block the 16 rows' d, dmin, 8 scales, the mins
 * as int16 pairs (one vpdpwssd against the token's B pair forms a pair's min term), and the quants
 * interleaved as for Q4_0.
 * ------------------------------------------------------------------------------------------------------- */

#define Q4K_D     0                    /* float d[16]                           */
#define Q4K_DMIN  64                   /* float dmin[16]                        */
#define Q4K_SC    128                  /* int32 sc[8][16]                       */
#define Q4K_MN    640                  /* int32 (mn[2p] | mn[2p+1] << 16)[4][16] */
#define Q4K_Q     896                  /* u8 q[8 sub-blocks][8 groups][16][4]   */
#define Q4K_BLOCK (Q4K_Q + 8 * 8 * 64) /* 4992 bytes per super-block            */

/* Per token and super-block: scale and the 4 pairs of sub-block sums (int16 pairs). */
typedef struct q8_K_aux {
    float d;        /* activation scale                                  */
    int32_t bp[4];  /* (B[2p] & 0xffff) | B[2p+1] << 16, B[j] = sum of sub-block j's quants */
    int32_t pad[3]; /* 32 bytes                                          */
} q8_K_aux;

VNNI512 static void q4_K_panel(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const uint8_t *rp[16];
    int32_t off[16];
    panel_rows(w, ws, nr, rp, off);
    const __m512i voff = _mm512_loadu_si512(off);
    for (int64_t i = 0; i < nb; i++) {
        const size_t bo = (size_t)i * sizeof(lw__block_q4_K);
        uint8_t *pb = p + (size_t)i * Q4K_BLOCK;
        const __m512i dd = _mm512_i32gather_epi32(voff, rp[0] + bo, 1); /* d | dmin << 16 */
        _mm512_store_ps((float *)(pb + Q4K_D), _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
        _mm512_store_ps((float *)(pb + Q4K_DMIN),
                        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
        int32_t *sc = (int32_t *)(pb + Q4K_SC), *mn = (int32_t *)(pb + Q4K_MN);
        for (int l = 0; l < 16; l++) { /* lane l holds row 4 (l % 4) + l / 4 */
            const lw__block_q4_K *x = (const lw__block_q4_K *)(rp[4 * (l % 4) + l / 4] + bo);
            int sv[8], mv[8];
            for (int j = 0; j < 8; j++) lw__k4_scale_min(j, x->scales, &sv[j], &mv[j]);
            for (int j = 0; j < 8; j++) sc[16 * j + l] = sv[j];
            for (int q = 0; q < 4; q++)
                mn[16 * q + l] = (int32_t)((uint32_t)mv[2 * q] | ((uint32_t)mv[2 * q + 1] << 16));
        }
        for (int q = 0; q < 4; q++) { /* 32 quant bytes: sub-blocks 2q (low nibbles) and 2q + 1 (high) */
            for (int h = 0; h < 2; h++) {
                __m512i t[4], r[4];
                load4x4(rp, bo + offsetof(lw__block_q4_K, qs) + 32 * q + 16 * h, t);
                transpose4x4x4(t, r);
                for (int j = 0; j < 4; j++) {
                    const int g = 4 * h + j;
                    _mm512_store_si512(pb + Q4K_Q + 512 * (2 * q) + 64 * g, _mm512_and_si512(r[j], m4));
                    _mm512_store_si512(pb + Q4K_Q + 512 * (2 * q + 1) + 64 * g,
                                       _mm512_and_si512(_mm512_srli_epi16(r[j], 4), m4));
                }
            }
        }
    }
}

VNNI512 static void q8_K_aux_fill(int64_t nb, const uint8_t *a, size_t as, int64_t nt, q8_K_aux *aux) {
    for (int64_t t = 0; t < nt; t++) {
        const lw__block_q8_K *y = (const lw__block_q8_K *)(a + (size_t)t * as);
        for (int64_t i = 0; i < nb; i++) {
            q8_K_aux *x = &aux[t * nb + i];
            x->d = y[i].d;
            for (int q = 0; q < 4; q++) {
                const int b0 = y[i].bsums[4 * q] + y[i].bsums[4 * q + 1],
                          b1 = y[i].bsums[4 * q + 2] + y[i].bsums[4 * q + 3];
                x->bp[q] = (int32_t)(((uint32_t)b0 & 0xffff) | ((uint32_t)b1 << 16));
            }
            x->pad[0] = x->pad[1] = x->pad[2] = 0;
        }
    }
}

VNNI512 static INLINE void q4_K_tile(int T, int64_t nb, const uint8_t *p, const uint8_t *a, size_t as,
                                     const q8_K_aux *aux, float *c, size_t cs, int nr) {
    __m512 acc[4], accm[4];
    for (int u = 0; u < T; u++) acc[u] = accm[u] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *pb = p + (size_t)i * Q4K_BLOCK;
        const __m512 dwv = _mm512_load_ps((const float *)(pb + Q4K_D)),
                     dmv = _mm512_load_ps((const float *)(pb + Q4K_DMIN));
        for (int q = 0; q < 4; q++) {
            __m512i isum[4];
            for (int u = 0; u < T; u++) isum[u] = zero;
            for (int j = 2 * q; j < 2 * q + 2; j++) {
                __m512i wq[8];
                for (int g = 0; g < 8; g++) wq[g] = _mm512_load_si512(pb + Q4K_Q + 512 * j + 64 * g);
                const __m512i scj = _mm512_load_si512(pb + Q4K_SC + 64 * j);
                for (int u = 0; u < T; u++) {
                    const int8_t *yq = ((const lw__block_q8_K *)(a + (size_t)u * as))[i].qs + 32 * j;
                    __m512i s = zero;
                    for (int g = 0; g < 8; g++) {
                        int32_t y4;
                        memcpy(&y4, yq + 4 * g, 4);
                        s = _mm512_dpbusd_epi32(s, wq[g], _mm512_set1_epi32(y4));
                    }
                    isum[u] = _mm512_add_epi32(isum[u], _mm512_mullo_epi32(s, scj));
                }
            }
            const __m512i mnp = _mm512_load_si512(pb + Q4K_MN + 64 * q);
            for (int u = 0; u < T; u++) {
                const q8_K_aux *x = aux + (size_t)u * nb + i;
                const __m512 da = _mm512_set1_ps(x->d);
                acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[u]), _mm512_mul_ps(dwv, da), acc[u]);
                const __m512i imin = _mm512_dpwssd_epi32(zero, mnp, _mm512_set1_epi32(x->bp[q]));
                accm[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmv, da), accm[u]);
            }
        }
    }
    const __mmask16 mask = (__mmask16)((1u << nr) - 1);
    for (int u = 0; u < T; u++)
        _mm512_mask_storeu_ps(c + (size_t)u * cs, mask,
                              _mm512_permutexvar_ps(LANE_ROW, _mm512_sub_ps(acc[u], accm[u])));
}

VNNI512 static void gemm_q4_K_vnni512(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                      size_t as, int64_t nt, float *c, size_t cs, void *scratch) {
    const int64_t nb = k / LW_QK_K;
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    q8_K_aux *aux = (q8_K_aux *)(panel + (size_t)nb * Q4K_BLOCK);
    const uint8_t *act = a;
    q8_K_aux_fill(nb, act, as, nt, aux);
    for (int64_t r0 = 0; r0 < m; r0 += PANEL) {
        const int nr = m - r0 < PANEL ? (int)(m - r0) : PANEL;
        q4_K_panel(nb, (const uint8_t *)w + (size_t)r0 * ws, ws, nr, panel);
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            q4_K_tile(4, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0,
                      cs, nr);
        for (; t < nt; t++)
            q4_K_tile(1, nb, panel, act + (size_t)t * as, as, aux + (size_t)t * nb, c + (size_t)t * cs + r0,
                      cs, nr);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q6_K (plain; ggml's x86 order): per (row, token) 8 int32 lanes per super-block, lane k summing
 * scale(e) * u[e] * y[e] over the elements e with (e mod 32) / 4 == k (u the unsigned 6-bit values), minus
 * 32 * (bsums[2k] sc[2k] + bsums[2k+1] sc[2k+1]); each super-block's lanes fused-multiply-added with
 * y.d * x.d into 8 float lanes, hsum8 at the end. As for Q8_0 a zmm holds two rows' 8 lanes; a panel of 4
 * rows holds per super-block and row pair the unpacked values per 32-element chunk (as bytes), the chunk's
 * scales as int16 (vpmaddubsw then vpdpwssd apply them), the 16 scales for the correction and x.d.
 * ------------------------------------------------------------------------------------------------------- */

#define Q6K_PAIR 1152 /* bytes per super-block and row pair: u[8][64], sc[8][64], scp[64], dx[64] */
#define Q6K_BLOCK                                                                                            \
    (2 * Q6K_PAIR) /* per super-block of a 4-row panel                                         */

VNNI512 static void q6_K_panel(int64_t nb, const uint8_t *w, size_t ws, int nr, uint8_t *p) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < nb; i++) {
        for (int r = 0; r < 4; r++) {
            uint8_t *pp = p + (size_t)i * Q6K_BLOCK + (size_t)(r / 2) * Q6K_PAIR + 32 * (r % 2);
            const lw__block_q6_K *x = (const lw__block_q6_K *)(w + (size_t)(r < nr ? r : nr - 1) * ws) + i;
            for (int c = 0; c < 8; c++) {
                const int half = c / 4, part = c % 4;
                const __m256i ql = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * half + 32 * (part & 1)));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * half));
                const __m256i lo =
                    part < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                __m256i hb;
                switch (part) { /* shifts need immediates */
                case 0:
                    hb = qh;
                    break;
                case 1:
                    hb = _mm256_srli_epi16(qh, 2);
                    break;
                case 2:
                    hb = _mm256_srli_epi16(qh, 4);
                    break;
                default:
                    hb = _mm256_srli_epi16(qh, 6);
                    break;
                }
                hb = _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4);
                _mm256_store_si256((__m256i *)(pp + 64 * c), _mm256_or_si256(lo, hb));
                const __m128i s0 = _mm_set1_epi16(x->scales[2 * c]),
                              s1 = _mm_set1_epi16(x->scales[2 * c + 1]);
                _mm256_store_si256((__m256i *)(pp + 512 + 64 * c), _mm256_set_m128i(s1, s0));
            }
            _mm256_store_si256((__m256i *)(pp + 1024),
                               _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales)));
            _mm256_store_ps((float *)(pp + 1088), _mm256_set1_ps(h2f(x->d)));
        }
    }
}

VNNI512 static INLINE void q6_K_tile(int T, int64_t nb, const uint8_t *p, const uint8_t *a, size_t as,
                                     float *c, size_t cs, int nr) {
    __m512 acc[2][4];
    for (int h = 0; h < 2; h++)
        for (int u = 0; u < T; u++) acc[h][u] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *pb = p + (size_t)i * Q6K_BLOCK;
        for (int u = 0; u < T; u++) {
            const lw__block_q8_K *y = (const lw__block_q8_K *)(a + (size_t)u * as) + i;
            __m512i l0 = zero, l1 = zero;
            for (int ch = 0; ch < 8; ch++) {
                const __m512i yv =
                    _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(y->qs + 32 * ch)));
                l0 = _mm512_dpwssd_epi32(l0, _mm512_maddubs_epi16(_mm512_load_si512(pb + 64 * ch), yv),
                                         _mm512_load_si512(pb + 512 + 64 * ch));
                l1 = _mm512_dpwssd_epi32(l1,
                                         _mm512_maddubs_epi16(_mm512_load_si512(pb + Q6K_PAIR + 64 * ch), yv),
                                         _mm512_load_si512(pb + Q6K_PAIR + 512 + 64 * ch));
            }
            const __m512i bs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y->bsums));
            l0 = _mm512_sub_epi32(
                l0, _mm512_slli_epi32(_mm512_dpwssd_epi32(zero, _mm512_load_si512(pb + 1024), bs), 5));
            l1 = _mm512_sub_epi32(
                l1,
                _mm512_slli_epi32(_mm512_dpwssd_epi32(zero, _mm512_load_si512(pb + Q6K_PAIR + 1024), bs), 5));
            const __m512 dy = _mm512_set1_ps(y->d);
            acc[0][u] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps((const float *)(pb + 1088)), dy),
                                        _mm512_cvtepi32_ps(l0), acc[0][u]);
            acc[1][u] =
                _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps((const float *)(pb + Q6K_PAIR + 1088)), dy),
                                _mm512_cvtepi32_ps(l1), acc[1][u]);
        }
    }
    for (int u = 0; u < T; u++)
        for (int h = 0; h < 2; h++) {
            float v[16];
            _mm512_storeu_ps(v, acc[h][u]);
            if (2 * h < nr) c[(size_t)u * cs + 2 * h] = hsum8(v);
            if (2 * h + 1 < nr) c[(size_t)u * cs + 2 * h + 1] = hsum8(v + 8);
        }
}

VNNI512 static void gemm_q6_K_vnni512(int64_t k, const void *w, size_t ws, int64_t m, const void *a,
                                      size_t as, int64_t nt, float *c, size_t cs, void *scratch) {
    const int64_t nb = k / LW_QK_K;
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const uint8_t *act = a;
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
        const int nr = m - r0 < 4 ? (int)(m - r0) : 4;
        q6_K_panel(nb, (const uint8_t *)w + (size_t)r0 * ws, ws, nr, panel);
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            q6_K_tile(4, nb, panel, act + (size_t)t * as, as, c + (size_t)t * cs + r0, cs, nr);
        for (; t < nt; t++)
            q6_K_tile(1, nb, panel, act + (size_t)t * as, as, c + (size_t)t * cs + r0, cs, nr);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Selection
 * ------------------------------------------------------------------------------------------------------- */

static int has_vnni512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & bit_FMA) || !(c & bit_F16C) || !(c & bit_OSXSAVE)) return 0;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6) return 0; /* XMM, YMM, opmask, ZMM state enabled by the OS */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & bit_AVX2) && (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) &&
           (c & bit_AVX512VNNI);
}

lw__quant_gemm_fn lw__quant_gemm_x86(lw__vec_dot_fn ref) {
    if (!has_vnni512()) return NULL;
    if (ref == lw__vec_dot_q4_0_q8_0_x86_repack) return gemm_q4_0_vnni512;
    if (ref == lw__vec_dot_q8_0_q8_0_x86) return gemm_q8_0_vnni512;
    if (ref == lw__vec_dot_q4_K_q8_K_x86_repack_gemm) return gemm_q4_K_vnni512;
    if (ref == lw__vec_dot_q6_K_q8_K_x86) return gemm_q6_K_vnni512;
    return NULL;
}

static lw__quant_gemm_fn own_vnni512(uint32_t type) {
    if (!has_vnni512()) return NULL;
    if (type == LW_TYPE_Q4_0) return gemm_q4_0_vnni512; /* the own order is llama.cpp's repacked one */
    if (type == LW_TYPE_Q8_0) return gemm_q8_0_own_vnni512;
    return NULL;
}

#else

lw__quant_gemm_fn lw__quant_gemm_x86(lw__vec_dot_fn ref) {
    (void)ref;
    return NULL;
}

static lw__quant_gemm_fn own_vnni512(uint32_t type) {
    (void)type;
    return NULL;
}

static int has_vnni512(void) {
    return 0;
}

#endif

lw__quant_gemm_fn lw__quant_gemm_fast(lw__vec_dot_fn ref) {
    const char *force = getenv("LW_CPU_KERNELS");
    if (force && !strcmp(force, "scalar")) return NULL;
    return lw__quant_gemm_x86(ref);
}

#if defined(__wasm_simd128__)
lw__quant_gemm_fn lw__quant_gemm_own_wasm(uint32_t type); /* quant-gemv-wasm.c */
#endif

lw__quant_gemm_fn lw__quant_gemm_own_isa(uint32_t type, lw__qgemm_isa isa) {
#if defined(__wasm_simd128__)
    if (isa == LW_QGEMM_BEST || isa == LW_QGEMM_SIMD128) return lw__quant_gemm_own_wasm(type);
#endif
    if (isa == LW_QGEMM_BEST) /* VNNI CPUs keep their exact tiles where no own-order VNNI kernel exists */
        return has_vnni512() ? own_vnni512(type) : lw__quant_gemm_own_avx2(type);
    return isa == LW_QGEMM_VNNI512 ? own_vnni512(type)
           : isa == LW_QGEMM_AVX2  ? lw__quant_gemm_own_avx2(type)
                                   : NULL;
}

lw__quant_gemm_fn lw__quant_gemm_own(uint32_t type) {
    const char *force = getenv("LW_CPU_KERNELS");
    if (force && (!strcmp(force, "exact") || !strcmp(force, "scalar"))) return NULL;
    return lw__quant_gemm_own_isa(type, force && !strcmp(force, "avx2") ? LW_QGEMM_AVX2 : LW_QGEMM_BEST);
}
