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

/* Adds one Q4_K/Q5_K block (values v, 0..31) to the lane sums and its min term to *sumf. */
static void k4_block(const int8_t *v, const uint8_t *scales12, uint16_t dh, uint16_t dminh, const lw__block_q8_K *yb,
                     float sums[8], float *sumf) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) lw__k4_scale_min(j, scales12, &sc[j], &mn[j]);
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

/* Signed dot of 8 grid magnitudes with 8 activations. */
static inline int dot8_signed(uint64_t g, uint8_t signs, const int8_t *q8) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += lw__grid_u8(g, j) * q8[j] * (signs & lw__iq_kmask[j] ? -1 : 1);
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
        s += lw__grid_u8(g1, j) * q8[j] * (signs & lw__iq_kmask[j] ? -1 : 1);
        s += lw__grid_u8(g2, j) * q8[j + 4] * (signs & lw__iq_kmask[j + 4] ? -1 : 1);
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
                for (int j = 0; j < 8; ++j) lsum += q8[j] * lw__grid_i8(g, j);
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
                    lsum1 += q8[j] * lw__grid_i8(g, j);
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
