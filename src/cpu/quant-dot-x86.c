/* Dots in the summation orders of llama.cpp's x86-64 CPU builds (ggml-cpu AVX2 / AVX-512, and its repacked
 * gemv/gemm kernels), and the x86 activation quantizers: scalar C that reproduces those builds bit for bit
 * on any target (see quant-dot.h for what runs where). The integer parts are exact; what matters is how
 * the integers are split into 8 lanes (element e of a 32-element chunk goes to lane (e mod 32) / 4, as
 * maddubs + madd pair them), where fused multiply-adds happen, and the final horizontal sum. */
#include "cpu/quant-dot.h"
#include "cpu/quant-dot-simd.h"

#include "core/core.h"
#include "quant/iq-grids.h"

#include <math.h>
#include <string.h>

#define H2F lw__fp16_to_fp32

/* ---------------------------------------------------------------------------------------------------------
 * Activation quantizers as ggml-cpu's x86 AVX/AVX2/AVX-512 builds run them
 * ------------------------------------------------------------------------------------------------------- */

/* One Q8_0/Q8_1 block the x86 way; returns the sum of the quants and the float scale in *dout. */
static int q8_block_x86(const float *x, int8_t *qs, uint16_t *dh, float *dout) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(x[j]);
        amax = ax > amax ? ax : amax;
    }
    const float d = amax / 127.f;
    *dh = lw__fp32_to_fp16(d);
    *dout = d;
    /* 127 / amax, not 1 / d: one rounding instead of two, so x * id can differ from the reference by 1 ulp */
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        float v = rintf(x[j] * id); /* _mm256_round_ps(_MM_ROUND_NEAREST): ties to even */
        /* cvtps_epi32 turns NaN into INT32_MIN; the int16/int8 packs then saturate */
        const int q = v != v ? -128 : v >= 127.0f ? 127 : v <= -128.0f ? -128 : (int)v;
        qs[j] = (int8_t)q;
        sum += q;
    }
    return sum;
}

void lw__quantize_row_q8_0_x86(const float *x, void *vy, int64_t k) {
    lw__block_q8_0 *y = vy;
    float d;
    for (int64_t i = 0; i < k / LW_QK8_0; i++) q8_block_x86(x + LW_QK8_0 * i, y[i].qs, &y[i].d, &d);
}

void lw__quantize_row_q8_1_x86(const float *x, void *vy, int64_t k) {
    lw__block_q8_1 *y = vy;
    for (int64_t i = 0; i < k / LW_QK8_1; i++) {
        float d;
        const int sum = q8_block_x86(x + LW_QK8_1 * i, y[i].qs, &y[i].d, &d);
        y[i].s = lw__fp32_to_fp16(d * sum); /* the unrounded scale times the integer sum */
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * ggml-cpu's x86 AVX2 / AVX-512 summation order (what llama.cpp runs for these types on x86-64, where they
 * are not repacked): the integer products of each super-block go to 8 int32 lanes (lane of element e is
 * (e mod 32) / 4, as maddubs + madd pair them), each lane is converted to float and fused-multiply-added into
 * 8 float accumulators, which _mm256 horizontal adds combine at the end.
 * ------------------------------------------------------------------------------------------------------- */

/* hsum_float_8: upper half + lower half, then (r0 + r2) + (r1 + r3). */
static float hsum8_x86(const float acc[8]) {
    float r[4];
    for (int k = 0; k < 4; k++) r[k] = acc[4 + k] + acc[k];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* lanes[k] = sum over the 256 elements e of lane k of scale(e) * v[e] * q8[e], scale(e) = sc[e / group]. */
static void lanes_x86(int32_t lanes[8], const int8_t *v, const int8_t *q8, const int *sc, int group) {
    for (int k = 0; k < 8; k++) lanes[k] = 0;
    for (int e = 0; e < LW_QK_K; e++) lanes[(e % 32) / 4] += sc[e / group] * (v[e] * q8[e]);
}

static void fma_lanes_x86(float acc[8], float d, const int32_t lanes[8]) {
    for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lanes[k], acc[k]);
}

float lw__vec_dot_q8_0_q8_0_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q8_0 *x = w;
    const lw__block_q8_0 *y = a;
    float acc[8] = {0};
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        const float d = H2F(x[ib].d) * H2F(y[ib].d);
        int32_t lanes[8] = {0};
        for (int e = 0; e < 32; e++) {
            /* |x| times y with x's sign (_mm256_sign_epi8): -(-128) stays -128 in int8 */
            const int xe = x[ib].qs[e], ye = y[ib].qs[e];
            const int ax = xe < 0 ? -xe : xe;
            const int sy = xe < 0 ? (int8_t)(uint8_t)(-ye) : xe == 0 ? 0 : ye;
            lanes[e / 4] += ax * sy;
        }
        fma_lanes_x86(acc, d, lanes);
    }
    return hsum8_x86(acc);
}

float lw__vec_dot_q2_K_q8_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q2_K *x = w;
    const lw__block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * H2F(x[i].d);
        const float dmin = -y[i].d * H2F(x[i].dmin);
        int sc[16];
        int32_t pm[8];
        for (int j = 0; j < 16; j++) sc[j] = x[i].scales[j] & 0xf;
        for (int k = 0; k < 8; k++)
            pm[k] = (x[i].scales[2 * k] >> 4) * y[i].bsums[2 * k] + (x[i].scales[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
        fma_lanes_x86(acc, dmin, pm); /* the min term first, per block */
        int8_t v[LW_QK_K];
        for (int j = 0; j < LW_QK_K; j += 128)
            for (int shift = 0; shift < 8; shift += 2)
                for (int l = 0; l < 32; ++l) v[j + 32 * (shift / 2) + l] = (int8_t)((x[i].qs[j / 4 + l] >> shift) & 3);
        int32_t lanes[8];
        lanes_x86(lanes, v, y[i].qs, sc, 16);
        fma_lanes_x86(acc, d, lanes);
    }
    return hsum8_x86(acc);
}

float lw__vec_dot_q3_K_q8_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q3_K *x = w;
    const lw__block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * H2F(x[i].d);
        int8_t v[LW_QK_K];
        const uint8_t *q3 = x[i].qs;
        uint8_t m = 1;
        int e = 0;
        for (int j = 0; j < LW_QK_K; j += 128, q3 += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int l = 0; l < 32; ++l, ++e) v[e] = (int8_t)(((q3[l] >> shift) & 3) - (x[i].hmask[l] & m ? 0 : 4));
        int sc[16];
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? x[i].scales[j] & 0xf : x[i].scales[j - 8] >> 4;
            const int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            sc[j] = (lo | (hi << 4)) - 32;
        }
        int32_t lanes[8];
        lanes_x86(lanes, v, y[i].qs, sc, 16);
        fma_lanes_x86(acc, d, lanes);
    }
    return hsum8_x86(acc);
}

float lw__vec_dot_iq4_xs_q8_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_xs *x = w;
    const lw__block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int8_t v[LW_QK_K];
        int sc[8];
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; ++j) {
                v[32 * ib + j] = lw__iq4nl_values[qs[j] & 0xf];
                v[32 * ib + 16 + j] = lw__iq4nl_values[qs[j] >> 4];
            }
            sc[ib] = (((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((x[i].scales_h >> (2 * ib)) & 3) << 4)) - 32;
        }
        int32_t lanes[8];
        lanes_x86(lanes, v, y[i].qs, sc, 32);
        fma_lanes_x86(acc, H2F(x[i].d) * y[i].d, lanes);
    }
    return hsum8_x86(acc);
}

/* IQ2/IQ3 grid formats: the AVX2 kernels sign the activations, multiply by grid magnitudes, scale per 16 or
 * 32 and keep the usual 8 lanes; one FMA per super-block and a constant factor at the end. Each decoder
 * writes the signed values v (grid * sign) and the scale of every group of `group` elements. */
typedef void (*iq_decode_fn)(const void *blk, int8_t v[LW_QK_K], int *sc);

static inline int8_t signed_u8(uint64_t g, int j, uint8_t signs, int sj) {
    return (int8_t)(lw__grid_u8(g, j) * (signs & lw__iq_kmask[sj] ? -1 : 1));
}

static void decode_iq2_xxs(const void *vb, int8_t *v, int *sc) {
    const lw__block_iq2_xxs *x = vb;
    for (int ib = 0; ib < 8; ++ib) {
        const uint32_t idx = (uint32_t)x->qs[4 * ib] | ((uint32_t)x->qs[4 * ib + 1] << 16);
        const uint32_t aux = (uint32_t)x->qs[4 * ib + 2] | ((uint32_t)x->qs[4 * ib + 3] << 16);
        sc[ib] = (int)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = lw__iq2xxs_grid[(idx >> (8 * l)) & 0xff];
            const uint8_t signs = lw__iq_ksigns[(aux >> (7 * l)) & 127];
            for (int j = 0; j < 8; ++j) v[32 * ib + 8 * l + j] = signed_u8(g, j, signs, j);
        }
    }
}

static void decode_iq2_xs(const void *vb, int8_t *v, int *sc) {
    const lw__block_iq2_xs *x = vb;
    for (int ib = 0; ib < 8; ++ib) {
        sc[2 * ib] = 2 * (x->scales[ib] & 0xf) + 1;
        sc[2 * ib + 1] = 2 * (x->scales[ib] >> 4) + 1;
        for (int l = 0; l < 4; ++l) {
            const uint16_t q = x->qs[4 * ib + l];
            const uint64_t g = lw__iq2xs_grid[q & 511];
            const uint8_t signs = lw__iq_ksigns[q >> 9];
            for (int j = 0; j < 8; ++j) v[32 * ib + 8 * l + j] = signed_u8(g, j, signs, j);
        }
    }
}

static void decode_iq2_s(const void *vb, int8_t *v, int *sc) {
    const lw__block_iq2_s *x = vb;
    const uint8_t *signs = x->qs + LW_QK_K / 8;
    for (int ib = 0; ib < 8; ++ib) {
        sc[2 * ib] = 2 * (x->scales[ib] & 0xf) + 1;
        sc[2 * ib + 1] = 2 * (x->scales[ib] >> 4) + 1;
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = lw__iq2s_grid[x->qs[4 * ib + l] | ((x->qh[ib] << (8 - 2 * l)) & 0x300)];
            for (int j = 0; j < 8; ++j) v[32 * ib + 8 * l + j] = signed_u8(g, j, signs[4 * ib + l], j);
        }
    }
}

static void decode_iq3_xxs(const void *vb, int8_t *v, int *sc) {
    const lw__block_iq3_xxs *x = vb;
    const uint8_t *gas = x->qs + LW_QK_K / 4;
    for (int ib = 0; ib < 8; ++ib) {
        const uint32_t aux = lw__rd_u32(gas + 4 * ib);
        sc[ib] = (int)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; ++l) {
            const uint8_t signs = lw__iq_ksigns[(aux >> (7 * l)) & 127];
            const uint32_t g1 = lw__iq3xxs_grid[x->qs[8 * ib + 2 * l]], g2 = lw__iq3xxs_grid[x->qs[8 * ib + 2 * l + 1]];
            for (int j = 0; j < 4; ++j) {
                v[32 * ib + 8 * l + j] = signed_u8(g1, j, signs, j);
                v[32 * ib + 8 * l + 4 + j] = signed_u8(g2, j, signs, j + 4);
            }
        }
    }
}

static void decode_iq3_s(const void *vb, int8_t *v, int *sc) {
    const lw__block_iq3_s *x = vb;
    for (int ib = 0; ib < 8; ++ib) {
        sc[ib] = 2 * ((x->scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
        const uint8_t *qs = x->qs + 8 * ib, *signs = x->signs + 4 * ib;
        for (int l = 0; l < 4; ++l) {
            const uint32_t g1 = lw__iq3s_grid[qs[2 * l] | ((x->qh[ib] << (8 - 2 * l)) & 256)];
            const uint32_t g2 = lw__iq3s_grid[qs[2 * l + 1] | ((x->qh[ib] << (7 - 2 * l)) & 256)];
            for (int j = 0; j < 4; ++j) {
                v[32 * ib + 8 * l + j] = signed_u8(g1, j, signs[l], j);
                v[32 * ib + 8 * l + 4 + j] = signed_u8(g2, j, signs[l], j + 4);
            }
        }
    }
}

static float iq_grid_x86(int64_t n, const uint8_t *w, size_t bsize, const lw__block_q8_K *y, iq_decode_fn decode,
                         int group, float factor) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const uint8_t *blk = w + (size_t)i * bsize;
        int8_t v[LW_QK_K];
        int sc[16];
        decode(blk, v, sc);
        int32_t lanes[8];
        lanes_x86(lanes, v, y[i].qs, sc, group);
        fma_lanes_x86(acc, H2F(lw__rd_u16(blk)) * y[i].d, lanes); /* d is the first field of these blocks */
    }
    return factor * hsum8_x86(acc);
}

float lw__vec_dot_iq2_xxs_q8_K_x86(int64_t n, const void *w, const void *a) {
    return iq_grid_x86(n, w, sizeof(lw__block_iq2_xxs), a, decode_iq2_xxs, 32, 0.125f);
}
float lw__vec_dot_iq2_xs_q8_K_x86(int64_t n, const void *w, const void *a) {
    return iq_grid_x86(n, w, sizeof(lw__block_iq2_xs), a, decode_iq2_xs, 16, 0.125f);
}
float lw__vec_dot_iq2_s_q8_K_x86(int64_t n, const void *w, const void *a) {
    return iq_grid_x86(n, w, sizeof(lw__block_iq2_s), a, decode_iq2_s, 16, 0.125f);
}
float lw__vec_dot_iq3_xxs_q8_K_x86(int64_t n, const void *w, const void *a) {
    return iq_grid_x86(n, w, sizeof(lw__block_iq3_xxs), a, decode_iq3_xxs, 32, 0.25f);
}
float lw__vec_dot_iq3_s_q8_K_x86(int64_t n, const void *w, const void *a) {
    return iq_grid_x86(n, w, sizeof(lw__block_iq3_s), a, decode_iq3_s, 32, 1.0f);
}

/* IQ1_S: grid values -1..1 scaled per 32 in the lanes; the +-delta term from the activation sums in a
 * scalar (contracted `accum1 += d * sumi1`), added at the end times 1/8 (exact). */
float lw__vec_dot_iq1_s_q8_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_iq1_s *x = w;
    const lw__block_q8_K *y = a;
    float acc[8] = {0}, accum1 = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int8_t v[LW_QK_K];
        int sc[8], sumi1 = 0;
        for (int ib = 0; ib < 8; ++ib) {
            const uint16_t qh = x[i].qh[ib];
            sc[ib] = 2 * ((qh >> 12) & 7) + 1;
            for (int l = 0; l < 4; ++l) {
                const uint64_t g = lw__iq1s_grid[x[i].qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; ++j) v[32 * ib + 8 * l + j] = (int8_t)lw__grid_i8(g, j);
            }
            sumi1 += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * (qh & 0x8000 ? -1 : 1) * sc[ib];
        }
        int32_t lanes[8];
        lanes_x86(lanes, v, y[i].qs, sc, 32);
        const float d = y[i].d * H2F(x[i].d);
        fma_lanes_x86(acc, d, lanes);
        accum1 = fmaf(d, (float)sumi1, accum1);
    }
    return hsum8_x86(acc) + LW_IQ1S_DELTA * accum1;
}

/* IQ1_M: grid values and the +-1 deltas both go through 8 lanes (scales per 16), two accumulators. */
float lw__vec_dot_iq1_m_q8_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_iq1_m *x = w;
    const lw__block_q8_K *y = a;
    float acc1[8] = {0}, acc2[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        uint16_t scw[4];
        for (int k = 0; k < 4; k++) scw[k] = lw__rd_u16(x[i].scales + 2 * k);
        const uint16_t dh =
            (uint16_t)((scw[0] >> 12) | ((scw[1] >> 8) & 0x00f0) | ((scw[2] >> 4) & 0x0f00) | (scw[3] & 0xf000));
        int8_t v[LW_QK_K], dl[LW_QK_K];
        int sc[16];
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *qs = x[i].qs + 4 * ib, *qh = x[i].qh + 2 * ib;
            sc[2 * ib] = 2 * ((scw[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            sc[2 * ib + 1] = 2 * ((scw[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            for (int l = 0; l < 4; ++l) {
                const uint64_t g = lw__iq1s_grid[qs[l] | (((uint16_t)qh[l / 2] << (8 - 4 * (l % 2))) & 0x700)];
                const int delta = qh[l / 2] & (l % 2 ? 0x80 : 0x08) ? -1 : 1;
                for (int j = 0; j < 8; ++j) {
                    v[32 * ib + 8 * l + j] = (int8_t)lw__grid_i8(g, j);
                    dl[32 * ib + 8 * l + j] = (int8_t)delta;
                }
            }
        }
        int32_t l1[8], l2[8];
        lanes_x86(l1, v, y[i].qs, sc, 16);
        lanes_x86(l2, dl, y[i].qs, sc, 16);
        const float d = y[i].d * H2F(dh);
        fma_lanes_x86(acc1, d, l1);
        fma_lanes_x86(acc2, d, l2);
    }
    return hsum8_x86(acc1) + LW_IQ1M_DELTA * hsum8_x86(acc2);
}

/* Q4_1 / Q5_0 / Q5_1 (32-element blocks): lanes of 4 consecutive products, one FMA per block; Q4_1 and Q5_1
 * keep the min term (m * s) in a scalar sum, which the compiler contracts to an FMA. */
static float q32_x86(int64_t n, const uint8_t *w, size_t bsize, int kind, const uint8_t *a, size_t asize) {
    float acc[8] = {0}, summs = 0.0f;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const uint8_t *x = w + (size_t)ib * bsize, *y = a + (size_t)ib * asize;
        const int has_min = kind != 1; /* 0: Q4_1, 1: Q5_0, 2: Q5_1 */
        const uint8_t *qs = x + (has_min ? 4 : 2) + (kind == 0 ? 0 : 4);
        const uint32_t qh = kind == 0 ? 0 : lw__rd_u32(x + (has_min ? 4 : 2));
        const int8_t *qy = (const int8_t *)(y + (has_min ? 4 : 2));
        const float dx = H2F(lw__rd_u16(x)), dy = H2F(lw__rd_u16(y));
        if (has_min) summs = fmaf(H2F(lw__rd_u16(x + 2)), H2F(lw__rd_u16(y + 2)), summs);
        int32_t lanes[8] = {0};
        for (int e = 0; e < 32; e++) {
            int v = e < 16 ? qs[e] & 0xf : qs[e - 16] >> 4;
            if (kind != 0) v |= (int)((qh >> e) & 1) << 4;
            if (kind == 1) v -= 16;
            lanes[e / 4] += v * qy[e];
        }
        fma_lanes_x86(acc, dx * dy, lanes);
    }
    return hsum8_x86(acc) + summs;
}

float lw__vec_dot_q4_1_q8_1_x86(int64_t n, const void *w, const void *a) {
    return q32_x86(n, w, sizeof(lw__block_q4_1), 0, a, sizeof(lw__block_q8_1));
}
float lw__vec_dot_q5_0_q8_0_x86(int64_t n, const void *w, const void *a) {
    return q32_x86(n, w, sizeof(lw__block_q5_0), 1, a, sizeof(lw__block_q8_0));
}
float lw__vec_dot_q5_1_q8_1_x86(int64_t n, const void *w, const void *a) {
    return q32_x86(n, w, sizeof(lw__block_q5_1), 2, a, sizeof(lw__block_q8_1));
}

/* Q4_K and Q5_K: values v (0..31) with 6-bit scales per 32; the min term is kept apart (Q4_K: 4 float lanes
 * with FMA; Q5_K: one float sum). */
static float k4_x86(int64_t n, const void *w, const lw__block_q8_K *y, bool five) {
    const lw__block_q4_K *x4 = w;
    const lw__block_q5_K *x5 = w;
    float acc[8] = {0}, acc_m[4] = {0}, summs = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const uint8_t *scales = five ? x5[i].scales : x4[i].scales;
        const uint16_t dh = five ? x5[i].d : x4[i].d, dminh = five ? x5[i].dmin : x4[i].dmin;
        const float d = y[i].d * H2F(dh);
        const float dmin = -y[i].d * H2F(dminh);
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) lw__k4_scale_min(j, scales, &sc[j], &mn[j]);
        int32_t q8s[8];
        for (int m = 0; m < 8; ++m) q8s[m] = y[i].bsums[2 * m] + y[i].bsums[2 * m + 1];
        if (five) {
            int32_t total = 0;
            for (int m = 0; m < 8; ++m) total += mn[m] * q8s[m];
            summs = fmaf(dmin, (float)total, summs); /* ggml's `summs += dmin * t`, contracted by the compiler */
        } else {
            for (int p = 0; p < 4; ++p)
                acc_m[p] = fmaf(dmin, (float)(mn[2 * p] * q8s[2 * p] + mn[2 * p + 1] * q8s[2 * p + 1]), acc_m[p]);
        }
        int8_t v[LW_QK_K];
        const uint8_t *q = five ? x5[i].qs : x4[i].qs;
        for (int j = 0; j < LW_QK_K / 64; ++j, q += 32) {
            for (int l = 0; l < 32; ++l) {
                int lo = q[l] & 0xf, hi = q[l] >> 4;
                if (five) {
                    lo |= ((x5[i].qh[l] >> (2 * j)) & 1) << 4;
                    hi |= ((x5[i].qh[l] >> (2 * j + 1)) & 1) << 4;
                }
                v[64 * j + l] = (int8_t)lo;
                v[64 * j + 32 + l] = (int8_t)hi;
            }
        }
        int32_t lanes[8];
        lanes_x86(lanes, v, y[i].qs, sc, 32);
        fma_lanes_x86(acc, d, lanes);
    }
    if (five) return hsum8_x86(acc) + summs;
    return hsum8_x86(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

float lw__vec_dot_q4_K_q8_K_x86(int64_t n, const void *w, const void *a) { return k4_x86(n, w, a, false); }
float lw__vec_dot_q5_K_q8_K_x86(int64_t n, const void *w, const void *a) { return k4_x86(n, w, a, true); }

float lw__vec_dot_q6_K_q8_K_x86(int64_t n, const void *w, const void *a) {
    const lw__block_q6_K *x = w;
    const lw__block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = y[i].d * H2F(x[i].d);
        /* unsigned 6-bit values; the -32 offset is applied through the activation sums */
        int8_t u[LW_QK_K];
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        for (int j = 0; j < LW_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                u[j + l + 0] = (int8_t)((ql[l + 0] & 0xf) | (((qh[l] >> 0) & 3) << 4));
                u[j + l + 32] = (int8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4));
                u[j + l + 64] = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4));
                u[j + l + 96] = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
        int sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = x[i].scales[j];
        int32_t lanes[8];
        lanes_x86(lanes, u, y[i].qs, sc, 16);
        for (int k = 0; k < 8; ++k)
            lanes[k] -= 32 * (y[i].bsums[2 * k] * sc[2 * k] + y[i].bsums[2 * k + 1] * sc[2 * k + 1]);
        fma_lanes_x86(acc, d, lanes);
    }
    return hsum8_x86(acc);
}

/* ---------------------------------------------------------------------------------------------------------
 * ggml-cpu's x86 "repack" order: with AVX2, llama.cpp re-lays Q4_0, IQ4_NL, MXFP4 and Q4_K weights (rows in
 * groups of 8) and multiplies one activation row with its gemv kernels. Per output row, each block's exact
 * integer dot is converted to float and fused-multiply-added with (weight scale * activation scale); Q4_K
 * keeps its min term in a second accumulator, subtracted at the end.
 * ------------------------------------------------------------------------------------------------------- */

/* 32-element blocks with a 4-bit code table: Q4_0 (q - 8), IQ4_NL, MXFP4. */
static float repack32_x86(int64_t n, const uint8_t *w, size_t bsize, int kind, const lw__block_q8_0 *y) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *blk = w + (size_t)b * bsize;
        const uint8_t *qs = kind == 2 ? blk + 1 : blk + 2;
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = qs[j] & 0xf, hi = qs[j] >> 4;
            const int v0 = kind == 0 ? lo - 8 : kind == 1 ? lw__iq4nl_values[lo] : lw__kvalues_fp4[lo];
            const int v1 = kind == 0 ? hi - 8 : kind == 1 ? lw__iq4nl_values[hi] : lw__kvalues_fp4[hi];
            sumi += v0 * y[b].qs[j] + v1 * y[b].qs[j + 16];
        }
        const float col = kind == 2 ? lw__e8m0_to_fp32_half(blk[0]) : H2F(lw__rd_u16(blk));
        acc = fmaf((float)sumi, col * H2F(y[b].d), acc);
    }
    return acc;
}

float lw__vec_dot_q4_0_q8_0_x86_repack(int64_t n, const void *w, const void *a) {
    return repack32_x86(n, w, sizeof(lw__block_q4_0), 0, a);
}
float lw__vec_dot_iq4_nl_q8_0_x86_repack(int64_t n, const void *w, const void *a) {
    return repack32_x86(n, w, sizeof(lw__block_iq4_nl), 1, a);
}
float lw__vec_dot_mxfp4_q8_0_x86_repack(int64_t n, const void *w, const void *a) {
    return repack32_x86(n, w, sizeof(lw__block_mxfp4), 2, a);
}

/* Q4_K: the gemv kernel accumulates once per super-block (per = 8 sub-blocks), the 4-row gemm kernel once
 * per pair of sub-blocks (per = 2). */
static float q4_K_repack_x86(int64_t n, const lw__block_q4_K *x, const lw__block_q8_K *y, int per) {
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) lw__k4_scale_min(j, x[i].scales, &sc[j], &mn[j]);
        const float dw = H2F(x[i].d) * y[i].d, dm = H2F(x[i].dmin) * y[i].d;
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; ++j) {
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            int32_t s = 0;
            for (int l = 0; l < 32; ++l) s += ((j % 2) ? q[l] >> 4 : q[l] & 0xf) * y[i].qs[32 * j + l];
            isum += sc[j] * s;
            imin += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            if ((j + 1) % per == 0) {
                acc = fmaf((float)isum, dw, acc);
                acc_min = fmaf((float)imin, dm, acc_min);
                isum = imin = 0;
            }
        }
    }
    return acc - acc_min;
}

/* Q2_K (repacked on AVX-512 builds): gemv accumulates per super-block, the 4-row gemm per half (128). */
static float q2_K_repack_x86(int64_t n, const lw__block_q2_K *x, const lw__block_q8_K *y, int per) {
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float dw = H2F(x[i].d) * y[i].d, dm = H2F(x[i].dmin) * y[i].d;
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 16; ++j) { /* sub-block j: elements 16j..16j+15 */
            const int half = j / 8, shift = 2 * ((j % 8) / 2), off = 16 * (j % 2);
            int32_t s = 0;
            for (int l = 0; l < 16; ++l) s += ((x[i].qs[32 * half + off + l] >> shift) & 3) * y[i].qs[16 * j + l];
            isum += (x[i].scales[j] & 0xf) * s;
            imin += (x[i].scales[j] >> 4) * y[i].bsums[j];
            if ((j + 1) % per == 0) {
                acc = fmaf((float)isum, dw, acc);
                acc_min = fmaf((float)imin, dm, acc_min);
                isum = imin = 0;
            }
        }
    }
    return acc - acc_min;
}

float lw__vec_dot_q2_K_q8_K_x86_repack(int64_t n, const void *w, const void *a) { return q2_K_repack_x86(n, w, a, 16); }
float lw__vec_dot_q2_K_q8_K_x86_repack_gemm(int64_t n, const void *w, const void *a) {
    return q2_K_repack_x86(n, w, a, 8);
}

float lw__vec_dot_q4_K_q8_K_x86_repack(int64_t n, const void *w, const void *a) { return q4_K_repack_x86(n, w, a, 8); }
float lw__vec_dot_q4_K_q8_K_x86_repack_gemm(int64_t n, const void *w, const void *a) {
    return q4_K_repack_x86(n, w, a, 2);
}

/* ---------------------------------------------------------------------------------------------------------
 * Which of the above reproduces llama.cpp's x86 CPU build
 * ------------------------------------------------------------------------------------------------------- */

static lw__vec_dot_fn quant_dot_x86_ref(uint32_t type, bool avx512, bool rows_mult8, bool gemm_row) {
    switch (type) {
    case LW_TYPE_Q4_0: return rows_mult8 ? lw__vec_dot_q4_0_q8_0_x86_repack : NULL;
    case LW_TYPE_IQ4_NL: return rows_mult8 ? lw__vec_dot_iq4_nl_q8_0_x86_repack : NULL;
    case LW_TYPE_MXFP4: return rows_mult8 ? lw__vec_dot_mxfp4_q8_0_x86_repack : NULL;
    case LW_TYPE_Q4_K:
        if (!rows_mult8) return lw__vec_dot_q4_K_q8_K_x86;
        return gemm_row ? lw__vec_dot_q4_K_q8_K_x86_repack_gemm : lw__vec_dot_q4_K_q8_K_x86_repack;
    case LW_TYPE_Q2_K:
        if (!avx512 || !rows_mult8) return lw__vec_dot_q2_K_q8_K_x86;
        return gemm_row ? lw__vec_dot_q2_K_q8_K_x86_repack_gemm : lw__vec_dot_q2_K_q8_K_x86_repack;
    case LW_TYPE_Q8_0: return lw__vec_dot_q8_0_q8_0_x86;
    case LW_TYPE_Q5_0: return lw__vec_dot_q5_0_q8_0_x86;
    case LW_TYPE_Q4_1: return lw__vec_dot_q4_1_q8_1_x86;
    case LW_TYPE_Q5_1: return lw__vec_dot_q5_1_q8_1_x86;
    case LW_TYPE_Q3_K: return lw__vec_dot_q3_K_q8_K_x86;
    case LW_TYPE_Q5_K: return lw__vec_dot_q5_K_q8_K_x86;
    case LW_TYPE_Q6_K: return lw__vec_dot_q6_K_q8_K_x86;
    case LW_TYPE_IQ4_XS: return lw__vec_dot_iq4_xs_q8_K_x86;
    case LW_TYPE_IQ2_XXS: return lw__vec_dot_iq2_xxs_q8_K_x86;
    case LW_TYPE_IQ2_XS: return lw__vec_dot_iq2_xs_q8_K_x86;
    case LW_TYPE_IQ2_S: return lw__vec_dot_iq2_s_q8_K_x86;
    case LW_TYPE_IQ3_XXS: return lw__vec_dot_iq3_xxs_q8_K_x86;
    case LW_TYPE_IQ3_S: return lw__vec_dot_iq3_s_q8_K_x86;
    case LW_TYPE_IQ1_S: return lw__vec_dot_iq1_s_q8_K_x86;
    case LW_TYPE_IQ1_M: return lw__vec_dot_iq1_m_q8_K_x86;
    default: return NULL;
    }
}

/* The same dot's SIMD twin where this CPU has one (same bits; quant-dot-simd.h), else the reference. */
lw__vec_dot_fn lw__quant_dot_x86(uint32_t type, bool avx512, bool rows_mult8, bool gemm_row) {
    return lw__quant_dot_fast(quant_dot_x86_ref(type, avx512, rows_mult8, gemm_row));
}

lw__from_float_fn lw__quant_act_x86(uint32_t vec_dot_type) {
    switch (vec_dot_type) {
    case LW_TYPE_Q8_0: return lw__quantize_row_q8_0_x86;
    case LW_TYPE_Q8_1: return lw__quantize_row_q8_1_x86;
    case LW_TYPE_Q8_K: return lw__quantize_row_q8_K_ref;
    default: return NULL;
    }
}
