/* The traits table, the checked (de)quantize wrappers, and the scalar references of the plain and simple
 * block formats: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q1_0, Q2_0, MXFP4, NVFP4.
 *
 * Bit-exactness with ggml: every float expression below is written in the same order and with the same
 * types as ggml-quants.c (C evaluates `a*b*c` as `(a*b)*c`, ints convert to float at the operator), since
 * a single reassociation changes the rounding. We build without -ffast-math and with ISO C (no FMA
 * contraction), like libggml-base. */
#include "quant/quant.h"

#include "core/core.h"
#include "quant/quant-iq.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Shared helpers
 * ------------------------------------------------------------------------------------------------------- */

const int8_t lw__kvalues_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static inline float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float lw__e8m0_to_fp32_half(uint8_t e) {
    /* 2^(e-128): below e = 2 the result is a float subnormal, built from its bit pattern. */
    if (e < 2) return bits_to_f32(0x00200000u << e);
    return bits_to_f32((uint32_t)(e - 1) << 23);
}

float lw__ue4m3_to_fp32(uint8_t x) {
    /* 0 and the NaN code 0x7f both decode to 0 in ggml; the result is halved because the FP4 table holds
     * doubled E2M1 values. */
    if (x == 0 || x == 0x7f) return 0.0f;
    int exp = (x >> 3) & 0xf;
    int man = x & 0x7;
    float raw = exp == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return raw * 0.5f;
}

/* Nearest UE4M3 code of x > 0 (0 for x <= 0 or NaN), saturating at 448; ggml's rounding (half up on the
 * first dropped mantissa bit). */
static uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    int fexp = (int)((bits >> 23) & 0xff) - 127;
    int fman = (int)((bits >> 20) & 0x7);
    int e = fexp + 7;
    if (e <= 0) { /* subnormal: value = man * 2^-9 */
        int man = (int)(x * 512.0f + 0.5f);
        if (man > 7) man = 7;
        if (man < 1) return 0;
        return (uint8_t)man;
    }
    if (e >= 15) return 0x7e;
    int m = fman + (int)((bits >> 19) & 1);
    if (m > 7) {
        m = 0;
        e++;
        if (e >= 15) return 0x7e;
    }
    return (uint8_t)((e << 3) | m);
}

static inline int imin(int a, int b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------------------
 * Plain types: F32 (copy), F16, BF16
 * ------------------------------------------------------------------------------------------------------- */

static void dequantize_row_f32(const void *x, float *y, int64_t k) {
    memcpy(y, x, (size_t)k * sizeof(float));
}
static void quantize_row_f32_ref(const float *x, void *y, int64_t k) {
    memcpy(y, x, (size_t)k * sizeof(float));
}
static size_t quantize_f32(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *imatrix) {
    (void)imatrix;
    quantize_row_f32_ref(src, dst, nrows * n_per_row);
    return (size_t)(nrows * n_per_row) * sizeof(float);
}

void lw__dequantize_row_f16(const void *x, float *y, int64_t k) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < k; i++) y[i] = lw__fp16_to_fp32(lw__rd_u16(p + 2 * i));
}
void lw__quantize_row_f16_ref(const float *x, void *y, int64_t k) {
    uint16_t *q = y;
    for (int64_t i = 0; i < k; i++) q[i] = lw__fp32_to_fp16(x[i]);
}
void lw__dequantize_row_bf16(const void *x, float *y, int64_t k) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < k; i++) y[i] = lw__bf16_to_fp32(lw__rd_u16(p + 2 * i));
}
void lw__quantize_row_bf16_ref(const float *x, void *y, int64_t k) {
    uint16_t *q = y;
    for (int64_t i = 0; i < k; i++) q[i] = lw__fp32_to_bf16(x[i]);
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_0, Q4_1, Q5_0, Q5_1: 32-element blocks; element j and j + 16 share byte j (low, high nibble)
 * ------------------------------------------------------------------------------------------------------- */

void lw__quantize_row_q4_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_q4_0 *y = vy;
    const int64_t nb = k / LW_QK4_0;
    for (int64_t i = 0; i < nb; i++, x += LW_QK4_0) {
        /* The signed value of largest magnitude maps to -8, so the full range -8..7 is used. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < LW_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        for (int j = 0; j < LW_QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[LW_QK4_0 / 2 + j] * id;
            const uint8_t q0 = (uint8_t)imin(15, (int8_t)lw__f2i_trunc(x0 + 8.5f));
            const uint8_t q1 = (uint8_t)imin(15, (int8_t)lw__f2i_trunc(x1 + 8.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void lw__dequantize_row_q4_0(const void *vx, float *y, int64_t k) {
    const lw__block_q4_0 *x = vx;
    const int64_t nb = k / LW_QK4_0;
    for (int64_t i = 0; i < nb; i++, y += LW_QK4_0) {
        const float d = lw__fp16_to_fp32(x[i].d);
        for (int j = 0; j < LW_QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0f) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[j] = x0 * d;
            y[j + LW_QK4_0 / 2] = x1 * d;
        }
    }
}

void lw__quantize_row_q4_1_ref(const float *x, void *vy, int64_t k) {
    lw__block_q4_1 *y = vy;
    const int64_t nb = k / LW_QK4_1;
    for (int64_t i = 0; i < nb; i++, x += LW_QK4_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < LW_QK4_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        y[i].m = lw__fp32_to_fp16(min);
        for (int j = 0; j < LW_QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[LW_QK4_1 / 2 + j] - min) * id;
            const uint8_t q0 = (uint8_t)imin(15, (int8_t)lw__f2i_trunc(x0 + 0.5f));
            const uint8_t q1 = (uint8_t)imin(15, (int8_t)lw__f2i_trunc(x1 + 0.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void lw__dequantize_row_q4_1(const void *vx, float *y, int64_t k) {
    const lw__block_q4_1 *x = vx;
    const int64_t nb = k / LW_QK4_1;
    for (int64_t i = 0; i < nb; i++, y += LW_QK4_1) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const float m = lw__fp16_to_fp32(x[i].m);
        for (int j = 0; j < LW_QK4_1 / 2; j++) {
            const int x0 = x[i].qs[j] & 0x0f;
            const int x1 = x[i].qs[j] >> 4;
            y[j] = x0 * d + m;
            y[j + LW_QK4_1 / 2] = x1 * d + m;
        }
    }
}

/* Packs the 5th bits of 32 quants (element j -> bit j) into qh, little-endian as ggml's memcpy of a u32. */
static void put_qh(uint8_t qh[4], uint32_t bits) {
    qh[0] = (uint8_t)bits;
    qh[1] = (uint8_t)(bits >> 8);
    qh[2] = (uint8_t)(bits >> 16);
    qh[3] = (uint8_t)(bits >> 24);
}

void lw__quantize_row_q5_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_q5_0 *y = vy;
    const int64_t nb = k / LW_QK5_0;
    for (int64_t i = 0; i < nb; i++, x += LW_QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < LW_QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < LW_QK5_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[LW_QK5_0 / 2 + j] * id;
            const uint8_t q0 = (uint8_t)imin(31, (int8_t)lw__f2i_trunc(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)imin(31, (int8_t)lw__f2i_trunc(x1 + 16.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + LW_QK5_0 / 2);
        }
        put_qh(y[i].qh, qh);
    }
}

void lw__dequantize_row_q5_0(const void *vx, float *y, int64_t k) {
    const lw__block_q5_0 *x = vx;
    const int64_t nb = k / LW_QK5_0;
    for (int64_t i = 0; i < nb; i++, y += LW_QK5_0) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint32_t qh = lw__rd_u32(x[i].qh);
        for (int j = 0; j < LW_QK5_0 / 2; j++) {
            const int h0 = (int)((qh >> j) << 4) & 0x10;
            const int h1 = (int)(qh >> (j + 12)) & 0x10;
            const int32_t x0 = ((x[i].qs[j] & 0x0f) | h0) - 16;
            const int32_t x1 = ((x[i].qs[j] >> 4) | h1) - 16;
            y[j] = x0 * d;
            y[j + LW_QK5_0 / 2] = x1 * d;
        }
    }
}

void lw__quantize_row_q5_1_ref(const float *x, void *vy, int64_t k) {
    lw__block_q5_1 *y = vy;
    const int64_t nb = k / LW_QK5_1;
    for (int64_t i = 0; i < nb; i++, x += LW_QK5_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < LW_QK5_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        y[i].m = lw__fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < LW_QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[LW_QK5_1 / 2 + j] - min) * id;
            /* ggml converts straight to uint8_t here (no clamp at 31). */
            const uint8_t q0 = (uint8_t)lw__f2i_trunc(x0 + 0.5f);
            const uint8_t q1 = (uint8_t)lw__f2i_trunc(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + LW_QK5_1 / 2);
        }
        put_qh(y[i].qh, qh);
    }
}

void lw__dequantize_row_q5_1(const void *vx, float *y, int64_t k) {
    const lw__block_q5_1 *x = vx;
    const int64_t nb = k / LW_QK5_1;
    for (int64_t i = 0; i < nb; i++, y += LW_QK5_1) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const float m = lw__fp16_to_fp32(x[i].m);
        const uint32_t qh = lw__rd_u32(x[i].qh);
        for (int j = 0; j < LW_QK5_1 / 2; j++) {
            const int h0 = (int)((qh >> j) << 4) & 0x10;
            const int h1 = (int)(qh >> (j + 12)) & 0x10;
            const int x0 = (x[i].qs[j] & 0x0f) | h0;
            const int x1 = (x[i].qs[j] >> 4) | h1;
            y[j] = x0 * d + m;
            y[j + LW_QK5_1 / 2] = x1 * d + m;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q8_0, Q8_1
 * ------------------------------------------------------------------------------------------------------- */

void lw__quantize_row_q8_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_q8_0 *y = vy;
    const int64_t nb = k / LW_QK8_0;
    for (int64_t i = 0; i < nb; i++, x += LW_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < LW_QK8_0; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        for (int j = 0; j < LW_QK8_0; j++) y[i].qs[j] = (int8_t)lw__f2i_trunc(roundf(x[j] * id));
    }
}

void lw__dequantize_row_q8_0(const void *vx, float *y, int64_t k) {
    const lw__block_q8_0 *x = vx;
    const int64_t nb = k / LW_QK8_0;
    for (int64_t i = 0; i < nb; i++, y += LW_QK8_0) {
        const float d = lw__fp16_to_fp32(x[i].d);
        for (int j = 0; j < LW_QK8_0; j++) y[j] = x[i].qs[j] * d;
    }
}

void lw__quantize_row_q8_1_ref(const float *x, void *vy, int64_t k) {
    lw__block_q8_1 *y = vy;
    const int64_t nb = k / LW_QK8_1;
    for (int64_t i = 0; i < nb; i++, x += LW_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < LW_QK8_1; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < LW_QK8_1; j++) {
            y[i].qs[j] = (int8_t)lw__f2i_trunc(roundf(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = lw__fp32_to_fp16(sum * d);
    }
}

void lw__dequantize_row_q8_1(const void *vx, float *y, int64_t k) {
    /* ggml has no dequantize for Q8_1 (it is an activation format); same as Q8_0, s is redundant. */
    const lw__block_q8_1 *x = vx;
    const int64_t nb = k / LW_QK8_1;
    for (int64_t i = 0; i < nb; i++, y += LW_QK8_1) {
        const float d = lw__fp16_to_fp32(x[i].d);
        for (int j = 0; j < LW_QK8_1; j++) y[j] = x[i].qs[j] * d;
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q1_0 (sign bits), Q2_0 (2-bit, -1..2)
 * ------------------------------------------------------------------------------------------------------- */

void lw__quantize_row_q1_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_q1_0 *y = vy;
    const int64_t nb = k / LW_QK1_0;
    for (int64_t i = 0; i < nb; i++, x += LW_QK1_0) {
        /* The scale is the mean magnitude; each weight keeps only its sign (>= 0 -> bit set). */
        float sum_abs = 0.0f;
        for (int j = 0; j < LW_QK1_0; j++) sum_abs += fabsf(x[j]);
        y[i].d = lw__fp32_to_fp16(sum_abs / LW_QK1_0);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int j = 0; j < LW_QK1_0; j++)
            if (x[j] >= 0.0f) y[i].qs[j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

void lw__dequantize_row_q1_0(const void *vx, float *y, int64_t k) {
    const lw__block_q1_0 *x = vx;
    const int64_t nb = k / LW_QK1_0;
    for (int64_t i = 0; i < nb; i++, y += LW_QK1_0) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const float neg_d = -d;
        for (int j = 0; j < LW_QK1_0; j++) y[j] = ((x[i].qs[j / 8] >> (j % 8)) & 1) ? d : neg_d;
    }
}

void lw__quantize_row_q2_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_q2_0 *y = vy;
    const int64_t nb = k / LW_QK2_0;
    for (int64_t i = 0; i < nb; i++, x += LW_QK2_0) {
        float amax = 0.0f;
        for (int j = 0; j < LW_QK2_0; j++) {
            const float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        const float d = amax;
        const float id = d > 0.0f ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int j = 0; j < LW_QK2_0; j++) {
            int q = lw__f2i_trunc(roundf(x[j] * id)) + 1; /* codes 0..3 mean -1, 0, +1, +2 */
            if (q < 0) q = 0;
            if (q > 3) q = 3;
            y[i].qs[j / 4] |= (uint8_t)(q << ((j % 4) * 2));
        }
    }
}

void lw__dequantize_row_q2_0(const void *vx, float *y, int64_t k) {
    const lw__block_q2_0 *x = vx;
    const int64_t nb = k / LW_QK2_0;
    for (int64_t i = 0; i < nb; i++, y += LW_QK2_0) {
        const float d = lw__fp16_to_fp32(x[i].d);
        for (int j = 0; j < LW_QK2_0; j++) {
            const int q = (x[i].qs[j / 4] >> ((j % 4) * 2)) & 3;
            y[j] = (q - 1) * d;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * MXFP4, NVFP4
 * ------------------------------------------------------------------------------------------------------- */

/* Index of the FP4 code whose value times e is nearest to x (first one on ties, as ggml). */
static int best_index_fp4(float x, float e) {
    int best = 0;
    float best_err = fabsf(lw__kvalues_fp4[0] * e - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(lw__kvalues_fp4[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

void lw__quantize_row_mxfp4_ref(const float *x, void *vy, int64_t k) {
    lw__block_mxfp4 *y = vy;
    const int64_t nb = k / LW_QK_MXFP4;
    for (int64_t i = 0; i < nb; i++, x += LW_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < LW_QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        /* Exponent so that amax lands in the top binade of E2M1 (max 6 = 1.5 * 2^2). */
        const uint8_t e = amax > 0.0f ? (uint8_t)lw__f2i_trunc(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = lw__e8m0_to_fp32_half(e);
        y[i].e = e;
        for (int j = 0; j < LW_QK_MXFP4 / 2; j++) {
            const int q0 = best_index_fp4(x[j], d);
            const int q1 = best_index_fp4(x[LW_QK_MXFP4 / 2 + j], d);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void lw__dequantize_row_mxfp4(const void *vx, float *y, int64_t k) {
    const lw__block_mxfp4 *x = vx;
    const int64_t nb = k / LW_QK_MXFP4;
    for (int64_t i = 0; i < nb; i++, y += LW_QK_MXFP4) {
        const float d = lw__e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < LW_QK_MXFP4 / 2; j++) {
            const int8_t x0 = lw__kvalues_fp4[x[i].qs[j] & 0x0f];
            const int8_t x1 = lw__kvalues_fp4[x[i].qs[j] >> 4];
            y[j] = x0 * d;
            y[j + LW_QK_MXFP4 / 2] = x1 * d;
        }
    }
}

void lw__quantize_row_nvfp4_ref(const float *x, void *vy, int64_t k) {
    lw__block_nvfp4 *y = vy;
    const int sub = LW_QK_NVFP4_SUB;
    const int64_t nb = k / LW_QK_NVFP4;
    for (int64_t i = 0; i < nb; i++) {
        for (int s = 0; s < LW_QK_NVFP4 / LW_QK_NVFP4_SUB; s++) {
            const float *xb = x + i * LW_QK_NVFP4 + s * sub;
            float amax = 0.0f;
            for (int j = 0; j < sub; j++)
                if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
            /* amax / 6 maps the largest E2M1 value (6) onto amax. */
            const uint8_t ue = fp32_to_ue4m3(amax / 6.0f);
            y[i].d[s] = ue;
            const float d = lw__ue4m3_to_fp32(ue);
            for (int j = 0; j < sub / 2; j++) {
                const int q0 = best_index_fp4(xb[j], d);
                const int q1 = best_index_fp4(xb[sub / 2 + j], d);
                y[i].qs[s * (sub / 2) + j] = (uint8_t)(q0 | (q1 << 4));
            }
        }
    }
}

void lw__dequantize_row_nvfp4(const void *vx, float *y, int64_t k) {
    const lw__block_nvfp4 *x = vx;
    const int sub = LW_QK_NVFP4_SUB;
    const int64_t nb = k / LW_QK_NVFP4;
    for (int64_t i = 0; i < nb; i++) {
        for (int s = 0; s < LW_QK_NVFP4 / LW_QK_NVFP4_SUB; s++) {
            const float d = lw__ue4m3_to_fp32(x[i].d[s]);
            float *yb = y + i * LW_QK_NVFP4 + s * sub;
            for (int j = 0; j < sub / 2; j++) {
                const int8_t v0 = lw__kvalues_fp4[x[i].qs[s * (sub / 2) + j] & 0x0f];
                const int8_t v1 = lw__kvalues_fp4[x[i].qs[s * (sub / 2) + j] >> 4];
                yb[j] = v0 * d;
                yb[j + sub / 2] = v1 * d;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Whole-row quantizers (ggml_quantize_chunk's path) for the formats that ignore the imatrix: ggml quantizes
 * all rows as one run of blocks with the reference function.
 * ------------------------------------------------------------------------------------------------------- */

#define QUANTIZE_WITH_REF(fmt, block_bytes, block_elems)                                                     \
    size_t lw__quantize_##fmt(const float *src, void *dst, int64_t nrows, int64_t n_per_row,                \
                              const float *imatrix) {                                                        \
        (void)imatrix;                                                                                       \
        lw__quantize_row_##fmt##_ref(src, dst, nrows * n_per_row);                                          \
        return (size_t)(nrows * (n_per_row / (block_elems))) * (block_bytes);                                \
    }

QUANTIZE_WITH_REF(f16, 2, 1)
QUANTIZE_WITH_REF(bf16, 2, 1)
QUANTIZE_WITH_REF(q8_0, sizeof(lw__block_q8_0), LW_QK8_0)
QUANTIZE_WITH_REF(q8_1, sizeof(lw__block_q8_1), LW_QK8_1)
QUANTIZE_WITH_REF(q1_0, sizeof(lw__block_q1_0), LW_QK1_0)
QUANTIZE_WITH_REF(q2_0, sizeof(lw__block_q2_0), LW_QK2_0)
QUANTIZE_WITH_REF(mxfp4, sizeof(lw__block_mxfp4), LW_QK_MXFP4)
QUANTIZE_WITH_REF(nvfp4, sizeof(lw__block_nvfp4), LW_QK_NVFP4)

/* ---------------------------------------------------------------------------------------------------------
 * Traits table
 * ------------------------------------------------------------------------------------------------------- */

/* An entry whose functions all exist: dequantize, reference quantize, whole-row quantize. */
#define TRAITS(ID, nm, fmt, blk, req_imat)                                                                   \
    [ID] = {ID, nm, blk, sizeof(lw__block_##fmt), lw__dequantize_row_##fmt, lw__quantize_row_##fmt##_ref,    \
            lw__quantize_##fmt, req_imat, true}

/* IQ entries: filled in as quant-iq.c lands (see the flags in quant-iq.h). */
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ2_XXS
#define IQ_DQ_iq2_xxs lw__dequantize_row_iq2_xxs
#else
#define IQ_DQ_iq2_xxs NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ2_XS
#define IQ_DQ_iq2_xs lw__dequantize_row_iq2_xs
#else
#define IQ_DQ_iq2_xs NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ2_S
#define IQ_DQ_iq2_s lw__dequantize_row_iq2_s
#else
#define IQ_DQ_iq2_s NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ3_XXS
#define IQ_DQ_iq3_xxs lw__dequantize_row_iq3_xxs
#else
#define IQ_DQ_iq3_xxs NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ3_S
#define IQ_DQ_iq3_s lw__dequantize_row_iq3_s
#else
#define IQ_DQ_iq3_s NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ1_S
#define IQ_DQ_iq1_s lw__dequantize_row_iq1_s
#else
#define IQ_DQ_iq1_s NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ1_M
#define IQ_DQ_iq1_m lw__dequantize_row_iq1_m
#else
#define IQ_DQ_iq1_m NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ4_NL
#define IQ_DQ_iq4_nl lw__dequantize_row_iq4_nl
#else
#define IQ_DQ_iq4_nl NULL
#endif
#if LW_QUANT_IQ_HAVE_DEQUANT_IQ4_XS
#define IQ_DQ_iq4_xs lw__dequantize_row_iq4_xs
#else
#define IQ_DQ_iq4_xs NULL
#endif

#if LW_QUANT_IQ_HAVE_QUANT_IQ2_XXS
#define IQ_Q_iq2_xxs lw__quantize_iq2_xxs
#else
#define IQ_Q_iq2_xxs NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ2_XS
#define IQ_Q_iq2_xs lw__quantize_iq2_xs
#else
#define IQ_Q_iq2_xs NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ2_S
#define IQ_Q_iq2_s lw__quantize_iq2_s
#else
#define IQ_Q_iq2_s NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ3_XXS
#define IQ_Q_iq3_xxs lw__quantize_iq3_xxs
#else
#define IQ_Q_iq3_xxs NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ3_S
#define IQ_Q_iq3_s lw__quantize_iq3_s
#else
#define IQ_Q_iq3_s NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ1_S
#define IQ_Q_iq1_s lw__quantize_iq1_s
#else
#define IQ_Q_iq1_s NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ1_M
#define IQ_Q_iq1_m lw__quantize_iq1_m
#else
#define IQ_Q_iq1_m NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ4_NL
#define IQ_Q_iq4_nl lw__quantize_iq4_nl
#else
#define IQ_Q_iq4_nl NULL
#endif
#if LW_QUANT_IQ_HAVE_QUANT_IQ4_XS
#define IQ_Q_iq4_xs lw__quantize_iq4_xs
#else
#define IQ_Q_iq4_xs NULL
#endif

#if LW_QUANT_IQ_HAVE_REF_IQ2_S
#define IQ_R_iq2_s lw__quantize_row_iq2_s_ref
#else
#define IQ_R_iq2_s NULL
#endif
#if LW_QUANT_IQ_HAVE_REF_IQ3_XXS
#define IQ_R_iq3_xxs lw__quantize_row_iq3_xxs_ref
#else
#define IQ_R_iq3_xxs NULL
#endif
#if LW_QUANT_IQ_HAVE_REF_IQ3_S
#define IQ_R_iq3_s lw__quantize_row_iq3_s_ref
#else
#define IQ_R_iq3_s NULL
#endif
#if LW_QUANT_IQ_HAVE_REF_IQ4_NL
#define IQ_R_iq4_nl lw__quantize_row_iq4_nl_ref
#else
#define IQ_R_iq4_nl NULL
#endif
#if LW_QUANT_IQ_HAVE_REF_IQ4_XS
#define IQ_R_iq4_xs lw__quantize_row_iq4_xs_ref
#else
#define IQ_R_iq4_xs NULL
#endif

#define IQ_TRAITS(ID, nm, fmt, ref, req_imat)                                                                \
    [ID] = {ID, nm, LW_QK_K, sizeof(lw__block_##fmt), IQ_DQ_##fmt, ref, IQ_Q_##fmt, req_imat, true}

/* Indexed by type id; the 28 formats weights are stored in (Q8_1 and Q8_K are activation formats: their
 * functions exist but they are not weight types, as in ggml's quantize API). */
static const lw__quant_traits_t quant_traits[LW_TYPE_COUNT] = {
    [LW_TYPE_F32] = {LW_TYPE_F32, "f32", 1, 4, dequantize_row_f32, quantize_row_f32_ref, quantize_f32, false,
                     true},
    [LW_TYPE_F16] = {LW_TYPE_F16, "f16", 1, 2, lw__dequantize_row_f16, lw__quantize_row_f16_ref,
                     lw__quantize_f16, false, true},
    [LW_TYPE_BF16] = {LW_TYPE_BF16, "bf16", 1, 2, lw__dequantize_row_bf16, lw__quantize_row_bf16_ref,
                      lw__quantize_bf16, false, true},
    TRAITS(LW_TYPE_Q4_0, "q4_0", q4_0, LW_QK4_0, false),
    TRAITS(LW_TYPE_Q4_1, "q4_1", q4_1, LW_QK4_1, false),
    TRAITS(LW_TYPE_Q5_0, "q5_0", q5_0, LW_QK5_0, false),
    TRAITS(LW_TYPE_Q5_1, "q5_1", q5_1, LW_QK5_1, false),
    TRAITS(LW_TYPE_Q8_0, "q8_0", q8_0, LW_QK8_0, false),
    TRAITS(LW_TYPE_Q2_K, "q2_K", q2_K, LW_QK_K, false),
    TRAITS(LW_TYPE_Q3_K, "q3_K", q3_K, LW_QK_K, false),
    TRAITS(LW_TYPE_Q4_K, "q4_K", q4_K, LW_QK_K, false),
    TRAITS(LW_TYPE_Q5_K, "q5_K", q5_K, LW_QK_K, false),
    TRAITS(LW_TYPE_Q6_K, "q6_K", q6_K, LW_QK_K, false),
    IQ_TRAITS(LW_TYPE_IQ2_XXS, "iq2_xxs", iq2_xxs, NULL, true),
    IQ_TRAITS(LW_TYPE_IQ2_XS, "iq2_xs", iq2_xs, NULL, true),
    IQ_TRAITS(LW_TYPE_IQ3_XXS, "iq3_xxs", iq3_xxs, IQ_R_iq3_xxs, false),
    IQ_TRAITS(LW_TYPE_IQ1_S, "iq1_s", iq1_s, NULL, true),
    [LW_TYPE_IQ4_NL] = {LW_TYPE_IQ4_NL, "iq4_nl", LW_QK4_NL, sizeof(lw__block_iq4_nl), IQ_DQ_iq4_nl,
                        IQ_R_iq4_nl, IQ_Q_iq4_nl, false, true},
    IQ_TRAITS(LW_TYPE_IQ3_S, "iq3_s", iq3_s, IQ_R_iq3_s, false),
    IQ_TRAITS(LW_TYPE_IQ2_S, "iq2_s", iq2_s, IQ_R_iq2_s, false),
    IQ_TRAITS(LW_TYPE_IQ4_XS, "iq4_xs", iq4_xs, IQ_R_iq4_xs, false),
    IQ_TRAITS(LW_TYPE_IQ1_M, "iq1_m", iq1_m, NULL, false),
    TRAITS(LW_TYPE_TQ1_0, "tq1_0", tq1_0, LW_QK_K, false),
    TRAITS(LW_TYPE_TQ2_0, "tq2_0", tq2_0, LW_QK_K, false),
    TRAITS(LW_TYPE_MXFP4, "mxfp4", mxfp4, LW_QK_MXFP4, false),
    TRAITS(LW_TYPE_NVFP4, "nvfp4", nvfp4, LW_QK_NVFP4, false),
    TRAITS(LW_TYPE_Q1_0, "q1_0", q1_0, LW_QK1_0, false),
    TRAITS(LW_TYPE_Q2_0, "q2_0", q2_0, LW_QK2_0, false),
};

const lw__quant_traits_t *lw__quant_traits(uint32_t type) {
    if (type >= LW_TYPE_COUNT || !quant_traits[type].name) return NULL;
    return &quant_traits[type];
}

/* ---------------------------------------------------------------------------------------------------------
 * Checked wrappers
 * ------------------------------------------------------------------------------------------------------- */

size_t lw__row_size(uint32_t type, int64_t n, lw_status *st) {
    const lw__quant_traits_t *t = lw__quant_traits(type);
    lw_status s = LW_OK;
    uint64_t bytes = 0;
    if (!t) s = LW_ERR_BAD_TENSOR_TYPE;
    else if (n < 0 || n % t->block_size != 0) s = LW_ERR_INVALID_ARG;
    else if (!lw__mul_u64((uint64_t)n / t->block_size, t->type_size, &bytes) || bytes > SIZE_MAX)
        s = LW_ERR_OVERFLOW;
    if (st) *st = s;
    return s == LW_OK ? (size_t)bytes : 0;
}

lw_status lw__quantize(uint32_t type, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                       const float *imatrix) {
    const lw__quant_traits_t *t = lw__quant_traits(type);
    if (!t) return LW_ERR_BAD_TENSOR_TYPE;
    if (nrows < 0 || n_per_row < 0) return LW_ERR_INVALID_ARG;
    lw_status st;
    const size_t row_bytes = lw__row_size(type, n_per_row, &st);
    if (st != LW_OK) return st;
    uint64_t n, total;
    if (!lw__mul_u64((uint64_t)nrows, (uint64_t)n_per_row, &n) || n > INT64_MAX ||
        !lw__mul_u64((uint64_t)nrows, row_bytes, &total) || total > SIZE_MAX)
        return LW_ERR_OVERFLOW;
    if (n == 0) return LW_OK;
    if (!src || !dst) return LW_ERR_INVALID_ARG;
    if (!t->quantize) return LW_ERR_UNSUPPORTED;
    if (t->requires_imatrix && !imatrix) return LW_ERR_INVALID_ARG;
    if (imatrix && !t->imatrix_supported) return LW_ERR_UNSUPPORTED;
    const size_t written = t->quantize(src, dst, nrows, n_per_row, imatrix);
    return written == (size_t)total ? LW_OK : LW_ERR_UNSUPPORTED;
}

lw_status lw__dequantize(uint32_t type, const void *src, float *dst, int64_t n) {
    const lw__quant_traits_t *t = lw__quant_traits(type);
    if (!t) return LW_ERR_BAD_TENSOR_TYPE;
    lw_status st;
    const size_t bytes = lw__row_size(type, n, &st);
    if (st != LW_OK) return st;
    size_t out_bytes;
    if (!lw__mul_size((size_t)n, sizeof(float), &out_bytes)) return LW_ERR_OVERFLOW;
    (void)bytes;
    if (n == 0) return LW_OK;
    if (!src || !dst) return LW_ERR_INVALID_ARG;
    if (!t->to_float) return LW_ERR_UNSUPPORTED;
    t->to_float(src, dst, n);
    return LW_OK;
}
