/* Scalar reference dot products of quantized weight rows with quantized activation rows (see quant-dot.h).
 *
 * Integer parts are exact, so only the float steps must follow ggml-cpu's generic kernels: per block the
 * integer sum is scaled as ggml writes it (e.g. `sumi*dx*dy` is ((float)sumi*dx)*dy, `(dx*dy)*sumi` is not
 * the same number) and added to one running float; the K-quants keep ggml's 8 per-lane float sums, added
 * together at the end. Most of the time of a quantized mat-vec is spent here (one call per weight row). */
#include "cpu/quant-dot.h"

#include "core/core.h"
#include "quant/iq-grids.h"

#include <math.h>
#include <string.h>

#define H2F lw__fp16_to_fp32

/* ---------------------------------------------------------------------------------------------------------
 * 32-element formats with Q8_0 / Q8_1 activations
 * ------------------------------------------------------------------------------------------------------- */

float lw__vec_dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q4_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < LW_QK8_0 / 2; ++j) {
            sumi0 += ((x[ib].qs[j] & 0x0f) - 8) * y[ib].qs[j];
            sumi1 += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + LW_QK8_0 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += sumi * H2F(x[ib].d) * H2F(y[ib].d);
    }
    return sumf;
}

float lw__vec_dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q4_1 *x = w;
    const lw__block_q8_1 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK8_1; ++ib) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < LW_QK8_1 / 2; ++j) {
            sumi0 += (x[ib].qs[j] & 0x0f) * y[ib].qs[j];
            sumi1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + LW_QK8_1 / 2];
        }
        const int sumi = sumi0 + sumi1;
        /* the min term uses s = d * sum(q) of the activation block */
        sumf += (H2F(x[ib].d) * H2F(y[ib].d)) * sumi + H2F(x[ib].m) * H2F(y[ib].s);
    }
    return sumf;
}

float lw__vec_dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q5_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        const uint32_t qh = lw__rd_u32(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < LW_QK8_0 / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            sumi0 += (((x[ib].qs[j] & 0x0f) | h0) - 16) * y[ib].qs[j];
            sumi1 += (((x[ib].qs[j] >> 4) | h1) - 16) * y[ib].qs[j + LW_QK8_0 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (H2F(x[ib].d) * H2F(y[ib].d)) * sumi;
    }
    return sumf;
}

float lw__vec_dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q5_1 *x = w;
    const lw__block_q8_1 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK8_1; ++ib) {
        const uint32_t qh = lw__rd_u32(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < LW_QK8_1 / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            sumi0 += ((x[ib].qs[j] & 0x0f) | h0) * y[ib].qs[j];
            sumi1 += ((x[ib].qs[j] >> 4) | h1) * y[ib].qs[j + LW_QK8_1 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (H2F(x[ib].d) * H2F(y[ib].d)) * sumi + H2F(x[ib].m) * H2F(y[ib].s);
    }
    return sumf;
}

float lw__vec_dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q8_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK8_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < LW_QK8_0; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (H2F(x[ib].d) * H2F(y[ib].d));
    }
    return sumf;
}

float lw__vec_dot_iq4_nl_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_nl *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK4_NL; ++ib) {
        const float d = H2F(y[ib].d) * H2F(x[ib].d);
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < LW_QK4_NL / 2; ++j) {
            sumi1 += y[ib].qs[j] * lw__iq4nl_values[x[ib].qs[j] & 0xf];
            sumi2 += y[ib].qs[j + LW_QK4_NL / 2] * lw__iq4nl_values[x[ib].qs[j] >> 4];
        }
        sumf += d * (sumi1 + sumi2);
    }
    return sumf;
}

float lw__vec_dot_mxfp4_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_mxfp4 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK_MXFP4; ++ib) {
        const float d = H2F(y[ib].d) * lw__e8m0_to_fp32_half(x[ib].e);
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < LW_QK_MXFP4 / 2; ++j) {
            sumi1 += y[ib].qs[j] * lw__kvalues_fp4[x[ib].qs[j] & 0xf];
            sumi2 += y[ib].qs[j + LW_QK_MXFP4 / 2] * lw__kvalues_fp4[x[ib].qs[j] >> 4];
        }
        sumf += d * (sumi1 + sumi2);
    }
    return sumf;
}

/* NVFP4 block = 64 elements = two Q8_0 blocks; each 16-element sub-block has its own scale. */
float lw__vec_dot_nvfp4_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_nvfp4 *x = w;
    const lw__block_q8_0 *y = a;
    const int sub = LW_QK_NVFP4_SUB;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / LW_QK_NVFP4; ++ib) {
        for (int s = 0; s < 4; ++s) {
            const float d = lw__ue4m3_to_fp32(x[ib].d[s]);
            const lw__block_q8_0 *yb = &y[2 * ib + s / 2];
            const int off = (s % 2) * sub;
            const float dy = H2F(yb->d);
            int lo = 0, hi = 0;
            for (int j = 0; j < sub / 2; ++j) {
                const uint8_t qv = x[ib].qs[s * (sub / 2) + j];
                lo += yb->qs[off + j] * lw__kvalues_fp4[qv & 0xf];
                hi += yb->qs[off + j + sub / 2] * lw__kvalues_fp4[qv >> 4];
            }
            sumf += dy * d * (lo + hi);
        }
    }
    return sumf;
}

/* Q1_0 block = 128 elements = four Q8_0 blocks: the per-Q8-block sums are scaled by the activation scale
 * first, then the weight scale multiplies their float sum. */
float lw__vec_dot_q1_0_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q1_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK1_0; i++) {
        const float d0 = H2F(x[i].d);
        float sumi = 0.0f;
        for (int k = 0; k < 4; k++) {
            const lw__block_q8_0 *yb = &y[i * 4 + k];
            int sumi_block = 0;
            for (int j = 0; j < 32; j++)
                sumi_block += ((x[i].qs[k * 4 + j / 8] >> (j % 8)) & 1) ? yb->qs[j] : -yb->qs[j];
            sumi += H2F(yb->d) * sumi_block;
        }
        sumf += d0 * sumi;
    }
    return sumf;
}

/* Q2_0 block = 64 elements = two Q8_0 blocks, codes 0..3 meaning -1..2. */
float lw__vec_dot_q2_0_q8_0_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q2_0 *x = w;
    const lw__block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK2_0; i++) {
        const float d0 = H2F(x[i].d);
        float sumi = 0.0f;
        for (int k = 0; k < 2; k++) {
            const lw__block_q8_0 *yb = &y[i * 2 + k];
            int sumi_block = 0;
            for (int j = 0; j < 32; j++)
                sumi_block += ((int)((x[i].qs[k * 8 + j / 4] >> (2 * (j % 4))) & 3) - 1) * yb->qs[j];
            sumi += H2F(yb->d) * sumi_block;
        }
        sumf += d0 * sumi;
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * 256-element formats with Q8_K activations
 * ------------------------------------------------------------------------------------------------------- */

float lw__vec_dot_tq1_0_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_tq1_0 *x = w;
    const lw__block_q8_K *y = a;
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        /* Decode the trits in dequantize order (5 x 32, 5 x 16, 4 x 4) and dot with the activations. */
        int sum = 0, e = 0;
        for (int t = 0; t < 5; ++t)
            for (int m = 0; m < 32; ++m, ++e) {
                const uint8_t q = (uint8_t)(x[i].qs[m] * pow3[t]);
                sum += ((((uint16_t)q * 3) >> 8) - 1) * y[i].qs[e];
            }
        for (int t = 0; t < 5; ++t)
            for (int m = 0; m < 16; ++m, ++e) {
                const uint8_t q = (uint8_t)(x[i].qs[32 + m] * pow3[t]);
                sum += ((((uint16_t)q * 3) >> 8) - 1) * y[i].qs[e];
            }
        for (int t = 0; t < 4; ++t)
            for (int j = 0; j < 4; ++j, ++e) {
                const uint8_t q = (uint8_t)(x[i].qh[j] * pow3[t]);
                sum += ((((uint16_t)q * 3) >> 8) - 1) * y[i].qs[e];
            }
        sumf += (float)sum * (H2F(x[i].d) * y[i].d);
    }
    return sumf;
}

float lw__vec_dot_tq2_0_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_tq2_0 *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int32_t sumi = 0;
        for (int j = 0; j < (int)sizeof x->qs; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int k = 0; k < 32; ++k) sumi += y[i].qs[j * 4 + l * 32 + k] * (((x[i].qs[j + k] >> (l * 2)) & 3) - 1);
        const float d = y[i].d * H2F(x[i].d);
        sumf += (float)sumi * d;
    }
    return sumf;
}

float lw__vec_dot_q2_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q2_K *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const uint8_t *q2 = x[i].qs, *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        /* The min term needs only the activation sums per 16 (bsums). */
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * H2F(x[i].d);
        const float dmin = y[i].d * H2F(x[i].dmin);
        int isum = 0, is = 0;
        for (int k = 0; k < LW_QK_K / 128; ++k, q2 += 32) {
            for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
                for (int half = 0; half < 2; half++) {
                    const int d = sc[is++] & 0xf;
                    int isuml = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                    isum += d * isuml;
                }
            }
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

/* The K-quant kernels keep 8 float lane sums (lane = element index mod 8) across blocks, as ggml's generic
 * code does to let compilers vectorize it; each block adds d * (its integer lane sums). */
static float lanes_total(float sumf, const float sums[8]) {
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

/* aux32[l] += scale(e) * v[e] * q8[e] over the 256 elements e of a super-block, lane l = e mod 8, with
 * scale(e) = sc[e / group]. Integer, so any order gives the same result; written 8 lanes wide so that
 * compilers vectorize it. */
static void lanes_add(int32_t aux32[8], const int8_t *v, const int8_t *q8, const int *sc, int group) {
    for (int e0 = 0; e0 < LW_QK_K; e0 += 8) {
        const int32_t scale = sc[e0 / group];
        for (int l = 0; l < 8; ++l) aux32[l] += scale * (int32_t)(q8[e0 + l] * v[e0 + l]);
    }
}

float lw__vec_dot_q3_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q3_K *x = w;
    const lw__block_q8_K *y = a;
    float sums[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        /* Values -4..3: low 2 bits from qs, minus 4 where the hmask bit is clear. */
        int8_t v[LW_QK_K];
        const uint8_t *q3 = x[i].qs;
        uint8_t m = 1;
        int e = 0;
        for (int j = 0; j < LW_QK_K; j += 128, q3 += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int l = 0; l < 32; ++l, ++e) v[e] = (int8_t)(((q3[l] >> shift) & 3) - (x[i].hmask[l] & m ? 0 : 4));
        int sc[16];
        for (int j = 0; j < LW_QK_K / 16; ++j) {
            const int lo = j < 8 ? x[i].scales[j] & 0xf : x[i].scales[j - 8] >> 4;
            const int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            sc[j] = (lo | (hi << 4)) - 32;
        }
        int32_t aux32[8] = {0};
        lanes_add(aux32, v, y[i].qs, sc, 16);
        const float d = H2F(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
    }
    return lanes_total(0, sums);
}

/* 6-bit scale j and min j of Q4_K/Q5_K (as get_scale_min_k4 in quant-k.c). */
static inline void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Adds one Q4_K/Q5_K block (values v, 0..31) to the lane sums and its min term to *sumf. */
static void k4_block(const int8_t *v, const uint8_t *scales12, uint16_t dh, uint16_t dminh, const lw__block_q8_K *yb,
                     float sums[8], float *sumf) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) scale_min_k4(j, scales12, &sc[j], &mn[j]);
    int sumi = 0;
    for (int j = 0; j < LW_QK_K / 16; ++j) sumi += yb->bsums[j] * mn[j / 2];
    int32_t aux32[8] = {0};
    lanes_add(aux32, v, yb->qs, sc, 32);
    const float d = H2F(dh) * yb->d;
    for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
    const float dmin = H2F(dminh) * yb->d;
    *sumf -= dmin * sumi;
}

float lw__vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q4_K *x = w;
    const lw__block_q8_K *y = a;
    float sums[8] = {0}, sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int8_t v[LW_QK_K];
        const uint8_t *q4 = x[i].qs;
        for (int j = 0; j < LW_QK_K / 64; ++j, q4 += 32) {
            for (int l = 0; l < 32; ++l) v[64 * j + l] = (int8_t)(q4[l] & 0xf);
            for (int l = 0; l < 32; ++l) v[64 * j + 32 + l] = (int8_t)(q4[l] >> 4);
        }
        k4_block(v, x[i].scales, x[i].d, x[i].dmin, &y[i], sums, &sumf);
    }
    return lanes_total(sumf, sums);
}

float lw__vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q5_K *x = w;
    const lw__block_q8_K *y = a;
    float sums[8] = {0}, sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int8_t v[LW_QK_K];
        const uint8_t *q4 = x[i].qs, *qh = x[i].qh;
        for (int j = 0; j < LW_QK_K / 64; ++j, q4 += 32) {
            for (int l = 0; l < 32; ++l) v[64 * j + l] = (int8_t)((q4[l] & 0xf) | (((qh[l] >> (2 * j)) & 1) << 4));
            for (int l = 0; l < 32; ++l) v[64 * j + 32 + l] = (int8_t)((q4[l] >> 4) | (((qh[l] >> (2 * j + 1)) & 1) << 4));
        }
        k4_block(v, x[i].scales, x[i].d, x[i].dmin, &y[i], sums, &sumf);
    }
    return lanes_total(sumf, sums);
}

float lw__vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_q6_K *x = w;
    const lw__block_q8_K *y = a;
    float sums[8] = {0};
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        int8_t v[LW_QK_K];
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        for (int j = 0; j < LW_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                v[j + l + 0] = (int8_t)(((ql[l + 0] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
                v[j + l + 32] = (int8_t)(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
                v[j + l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                v[j + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = x[i].scales[j];
        int32_t aux32[8] = {0};
        lanes_add(aux32, v, y[i].qs, sc, 16);
        const float d = H2F(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
    }
    return lanes_total(0, sums);
}

float lw__vec_dot_iq4_xs_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq4_xs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t ibl = 0; ibl < n / LW_QK_K; ++ibl) {
        const float d4d8 = H2F(x[ibl].d) * y[ibl].d;
        const uint8_t *qs = x[ibl].qs;
        const int8_t *q8 = y[ibl].qs;
        for (int ib = 0; ib < LW_QK_K / 32; ++ib, qs += 16, q8 += 32) {
            /* 6-bit scale: low nibble from scales_l, high 2 bits from scales_h */
            const int ls = ((x[ibl].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((x[ibl].scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d4d8 * (ls - 32);
            int sumi1 = 0, sumi2 = 0;
            for (int j = 0; j < 16; ++j) {
                sumi1 += q8[j] * lw__iq4nl_values[qs[j] & 0xf];
                sumi2 += q8[j + 16] * lw__iq4nl_values[qs[j] >> 4];
            }
            sumf += dl * (sumi1 + sumi2);
        }
    }
    return sumf;
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ grid formats (Q8_K activations). Grid entries are 8 (or 4) bytes packed little-endian in a u64 (u32);
 * sign bytes come from the 7-bit sign index with even parity (lw__iq_ksigns).
 * ------------------------------------------------------------------------------------------------------- */

static inline int grid_u8(uint64_t g, int j) { return (int)((g >> (8 * j)) & 0xff); }
static inline int grid_i8(uint64_t g, int j) { return (int)(int8_t)((g >> (8 * j)) & 0xff); }

/* Signed dot of 8 grid magnitudes with 8 activations. */
static inline int dot8_signed(uint64_t g, uint8_t signs, const int8_t *q8) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += grid_u8(g, j) * q8[j] * (signs & lw__iq_kmask[j] ? -1 : 1);
    return s;
}

float lw__vec_dot_iq2_xxs_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq2_xxs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < LW_QK_K / 32; ++ib32) {
            /* 4 grid indices in the first u32, 4 x 7 sign bits and a 4-bit scale in the second */
            const uint32_t idx = (uint32_t)x[i].qs[4 * ib32] | ((uint32_t)x[i].qs[4 * ib32 + 1] << 16);
            const uint32_t aux = (uint32_t)x[i].qs[4 * ib32 + 2] | ((uint32_t)x[i].qs[4 * ib32 + 3] << 16);
            const int32_t ls = (int32_t)(2 * (aux >> 28) + 1);
            int32_t sumi = 0;
            for (int l = 0; l < 4; ++l, q8 += 8)
                sumi += dot8_signed(lw__iq2xxs_grid[(idx >> (8 * l)) & 0xff], lw__iq_ksigns[(aux >> (7 * l)) & 127], q8);
            bsum += sumi * ls;
        }
        sumf += d * bsum;
    }
    return 0.125f * sumf;
}

float lw__vec_dot_iq2_xs_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq2_xs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        const uint16_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < LW_QK_K / 32; ++ib32, q2 += 4) {
            /* 9-bit grid index + 7-bit sign index per 8; one 4-bit scale per 16 */
            for (int half = 0; half < 2; ++half) {
                const int32_t ls = 2 * ((x[i].scales[ib32] >> (4 * half)) & 0xf) + 1;
                int32_t sumi = 0;
                for (int l = 2 * half; l < 2 * half + 2; ++l, q8 += 8)
                    sumi += dot8_signed(lw__iq2xs_grid[q2[l] & 511], lw__iq_ksigns[q2[l] >> 9], q8);
                bsum += sumi * ls;
            }
        }
        sumf += d * bsum;
    }
    return 0.125f * sumf;
}

float lw__vec_dot_iq2_s_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq2_s *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; i++) {
        const float d = H2F(x[i].d) * y[i].d;
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].qs + LW_QK_K / 8;
        int bsum = 0;
        for (int ib32 = 0; ib32 < LW_QK_K / 32; ++ib32, qs += 4, signs += 4) {
            const int ls1 = 1 + 2 * (x[i].scales[ib32] & 0xf), ls2 = 1 + 2 * (x[i].scales[ib32] >> 4);
            int sumi1 = 0, sumi2 = 0;
            for (int l = 0; l < 4; ++l, q8 += 8) {
                /* 10-bit grid index: 8 bits in qs, 2 bits in qh */
                const int s = dot8_signed(lw__iq2s_grid[qs[l] | ((qh[ib32] << (8 - 2 * l)) & 0x300)], signs[l], q8);
                if (l < 2) sumi1 += s;
                else sumi2 += s;
            }
            bsum += ls1 * sumi1 + ls2 * sumi2;
        }
        sumf += d * bsum;
    }
    return 0.125f * sumf;
}

/* Signed dot of two 4-magnitude grid entries (8 values) with 8 activations. */
static inline int dot4x2_signed(uint32_t g1, uint32_t g2, uint8_t signs, const int8_t *q8) {
    int s = 0;
    for (int j = 0; j < 4; ++j) {
        s += grid_u8(g1, j) * q8[j] * (signs & lw__iq_kmask[j] ? -1 : 1);
        s += grid_u8(g2, j) * q8[j + 4] * (signs & lw__iq_kmask[j + 4] ? -1 : 1);
    }
    return s;
}

float lw__vec_dot_iq3_xxs_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq3_xxs *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        const uint8_t *q3 = x[i].qs, *gas = x[i].qs + LW_QK_K / 4;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < LW_QK_K / 32; ++ib32, q3 += 8, gas += 4) {
            const uint32_t aux = lw__rd_u32(gas); /* 4 x 7 sign bits, 4-bit scale on top */
            const int32_t ls = (int32_t)(2 * (aux >> 28) + 1);
            int32_t sumi = 0;
            for (int l = 0; l < 4; ++l, q8 += 8)
                sumi += dot4x2_signed(lw__iq3xxs_grid[q3[2 * l]], lw__iq3xxs_grid[q3[2 * l + 1]],
                                      lw__iq_ksigns[(aux >> (7 * l)) & 127], q8);
            bsum += sumi * ls;
        }
        sumf += d * bsum;
    }
    return 0.25f * sumf;
}

float lw__vec_dot_iq3_s_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq3_s *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / LW_QK_K; ++i) {
        const float d = H2F(x[i].d) * y[i].d;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].signs;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < LW_QK_K / 32; ++ib32, qs += 8, signs += 4) {
            /* one 4-bit scale per 32 (two per byte); 9-bit grid indices with the top bit in qh */
            const int32_t ls = (int32_t)(2 * ((x[i].scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0xf) + 1);
            int32_t sumi = 0;
            for (int l = 0; l < 4; ++l, q8 += 8)
                sumi += dot4x2_signed(lw__iq3s_grid[qs[2 * l] | ((qh[ib32] << (8 - 2 * l)) & 256)],
                                      lw__iq3s_grid[qs[2 * l + 1] | ((qh[ib32] << (7 - 2 * l)) & 256)], signs[l], q8);
            bsum += sumi * ls;
        }
        sumf += d * bsum;
    }
    return sumf;
}

float lw__vec_dot_iq1_s_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq1_s *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs;
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < LW_QK_K / 32; ++ib, qs += 4) {
            const uint16_t qh = x[i].qh[ib];
            const int ls = 2 * ((qh >> 12) & 7) + 1;
            const int delta = qh & 0x8000 ? -1 : 1;
            int lsum = 0;
            for (int l = 0; l < 4; ++l, q8 += 8) {
                const uint64_t g = lw__iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; ++j) lsum += q8[j] * grid_i8(g, j);
            }
            sumi += ls * lsum;
            /* the +-delta offset times the activation sums of this 32 */
            sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        sumf += H2F(x[i].d) * y[i].d * (sumi + LW_IQ1S_DELTA * sumi1);
    }
    return sumf;
}

float lw__vec_dot_iq1_m_q8_K_ref(int64_t n, const void *w, const void *a) {
    const lw__block_iq1_m *x = w;
    const lw__block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / LW_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh;
        uint16_t sc[4];
        for (int k = 0; k < 4; k++) sc[k] = lw__rd_u16(x[i].scales + 2 * k);
        /* the fp16 super-block scale is the top nibbles of the four scale words */
        const uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        int sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < LW_QK_K / 32; ++ib, qs += 4, qh += 2) {
            const int delta[4] = {qh[0] & 0x08 ? -1 : 1, qh[0] & 0x80 ? -1 : 1, qh[1] & 0x08 ? -1 : 1,
                                  qh[1] & 0x80 ? -1 : 1};
            int sum1[2] = {0, 0}, sum2[2] = {0, 0};
            for (int l = 0; l < 4; ++l, q8 += 8) {
                const uint64_t g = lw__iq1s_grid[qs[l] | (((uint16_t)qh[l / 2] << (8 - 4 * (l % 2))) & 0x700)];
                int lsum1 = 0, lsum2 = 0;
                for (int j = 0; j < 8; ++j) {
                    lsum1 += q8[j] * grid_i8(g, j);
                    lsum2 += q8[j];
                }
                sum1[l / 2] += lsum1;
                sum2[l / 2] += lsum2 * delta[l];
            }
            const int ls1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            const int ls2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        sumf += H2F(dh) * y[i].d * (sumi1 + LW_IQ1M_DELTA * sumi2);
    }
    return sumf;
}

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
    return (int8_t)(grid_u8(g, j) * (signs & lw__iq_kmask[sj] ? -1 : 1));
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
                for (int j = 0; j < 8; ++j) v[32 * ib + 8 * l + j] = (int8_t)grid_i8(g, j);
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
                    v[32 * ib + 8 * l + j] = (int8_t)grid_i8(g, j);
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
        for (int j = 0; j < 8; ++j) scale_min_k4(j, scales, &sc[j], &mn[j]);
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
        for (int j = 0; j < 8; ++j) scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
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
 * Table: ggml-cpu's vec_dot_type per weight type
 * ------------------------------------------------------------------------------------------------------- */

#define DOT(ID, fmt, act, ACT) [ID] = {ID, LW_TYPE_##ACT, lw__quantize_row_##act##_ref, lw__vec_dot_##fmt##_##act##_ref}

static const lw__quant_dot_t dot_table[LW_TYPE_COUNT] = {
    DOT(LW_TYPE_Q4_0, q4_0, q8_0, Q8_0),
    DOT(LW_TYPE_Q4_1, q4_1, q8_1, Q8_1),
    DOT(LW_TYPE_Q5_0, q5_0, q8_0, Q8_0),
    DOT(LW_TYPE_Q5_1, q5_1, q8_1, Q8_1),
    DOT(LW_TYPE_Q8_0, q8_0, q8_0, Q8_0),
    DOT(LW_TYPE_Q1_0, q1_0, q8_0, Q8_0),
    DOT(LW_TYPE_Q2_0, q2_0, q8_0, Q8_0),
    DOT(LW_TYPE_MXFP4, mxfp4, q8_0, Q8_0),
    DOT(LW_TYPE_NVFP4, nvfp4, q8_0, Q8_0),
    DOT(LW_TYPE_IQ4_NL, iq4_nl, q8_0, Q8_0),
    DOT(LW_TYPE_Q2_K, q2_K, q8_K, Q8_K),
    DOT(LW_TYPE_Q3_K, q3_K, q8_K, Q8_K),
    DOT(LW_TYPE_Q4_K, q4_K, q8_K, Q8_K),
    DOT(LW_TYPE_Q5_K, q5_K, q8_K, Q8_K),
    DOT(LW_TYPE_Q6_K, q6_K, q8_K, Q8_K),
    DOT(LW_TYPE_TQ1_0, tq1_0, q8_K, Q8_K),
    DOT(LW_TYPE_TQ2_0, tq2_0, q8_K, Q8_K),
    DOT(LW_TYPE_IQ4_XS, iq4_xs, q8_K, Q8_K),
    DOT(LW_TYPE_IQ2_XXS, iq2_xxs, q8_K, Q8_K),
    DOT(LW_TYPE_IQ2_XS, iq2_xs, q8_K, Q8_K),
    DOT(LW_TYPE_IQ2_S, iq2_s, q8_K, Q8_K),
    DOT(LW_TYPE_IQ3_XXS, iq3_xxs, q8_K, Q8_K),
    DOT(LW_TYPE_IQ3_S, iq3_s, q8_K, Q8_K),
    DOT(LW_TYPE_IQ1_S, iq1_s, q8_K, Q8_K),
    DOT(LW_TYPE_IQ1_M, iq1_m, q8_K, Q8_K),
};

const lw__quant_dot_t *lw__quant_dot(uint32_t type) {
    if (type >= LW_TYPE_COUNT || !dot_table[type].dot) return NULL;
    return &dot_table[type];
}

/* ---------------------------------------------------------------------------------------------------------
 * Which of the above reproduces llama.cpp's x86 CPU build
 * ------------------------------------------------------------------------------------------------------- */

lw__vec_dot_fn lw__quant_dot_x86(uint32_t type, bool avx512, bool rows_mult8, bool gemm_row) {
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

lw__from_float_fn lw__quant_act_x86(uint32_t vec_dot_type) {
    switch (vec_dot_type) {
    case LW_TYPE_Q8_0: return lw__quantize_row_q8_0_x86;
    case LW_TYPE_Q8_1: return lw__quantize_row_q8_1_x86;
    case LW_TYPE_Q8_K: return lw__quantize_row_q8_K_ref;
    default: return NULL;
    }
}
