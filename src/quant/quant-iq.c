/* Scalar reference of the IQ quantization family (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M,
 * IQ4_NL, IQ4_XS): dequantization bit-exact with ggml v0.4.0 (ggml-quants.c), the IQ4_NL / IQ4_XS quantizers
 * byte-exact with ggml_quantize_chunk and with ggml's quantize_row_*_ref, and a generator of random valid
 * blocks of every IQ format (for tests and synthetic models; IQ2_XXS, IQ2_XS and IQ1_S cannot be quantized
 * without an importance matrix). The other formats' quantizers are in quant-iq-search.c.
 *
 * Bit-exactness rests on doing every float operation in ggml's order with the same operand types: a scale is
 * d * (0.5f + s) * 0.25f, never d * (0.125f + 0.25f * s); a value is (scale * grid) * (+-1). Do not
 * "simplify" these expressions. The grids are in iq-grids.c; blocks are read as little-endian bytes.
 *
 * Common shape: a super-block of 256 elements is 8 sub-blocks of 32; each sub-block is 4 groups of 8
 * elements; a group's magnitudes come from one grid entry (IQ2/IQ1) or two (IQ3, 4 elements each), its signs
 * from a sign byte (bit j negates element j). */
#include "quant/quant-iq.h"

#include "core/core.h"
#include "quant/iq-grids.h"

#include <math.h>
#include <string.h>

/* Contracting a*b + c into one fused multiply-add would change results; gcc in ISO C mode and clang without
 * this pragma on FMA targets differ, so say it explicitly where the compiler understands it. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K LW_QK_K

/* Byte j of a packed grid entry: element j of the group it encodes. */
static inline uint8_t grid8_u8(uint64_t e, int j) {
    return (uint8_t)(e >> (8 * j));
}
static inline int8_t grid8_i8(uint64_t e, int j) {
    return (int8_t)(uint8_t)(e >> (8 * j));
}
static inline uint8_t grid4_u8(uint32_t e, int j) {
    return (uint8_t)(e >> (8 * j));
}

/* =========================================================================================================
 * Dequantization (ggml dequantize_row_*). k must be a whole number of blocks; callers (lw__dequantize in
 * quant.c) check that. A partial trailing block is ignored rather than read past.
 * ======================================================================================================= */

/* ---------------------------------------------------------------------------------------------------------
 * IQ2_XXS: per sub-block of 32, 8 bytes: 4 grid indices (bytes 0..3), then a u32 holding four 7-bit sign
 * indices (bits 7l..7l+6, expanded with even parity by lw__iq_ksigns) and a 4-bit scale (bits 28..31).
 * x = d * (0.5 + s) / 4 * grid * sign.
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq2_xxs(const void *vx, float *y, int64_t k) {
    const lw__block_iq2_xxs *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *q = (const uint8_t *)x[i].qs;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            const uint8_t *idx = q + 8 * ib32;
            const uint32_t aux = lw__rd_u32(q + 8 * ib32 + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const uint64_t g = lw__iq2xxs_grid[idx[l]];
                const uint8_t signs = lw__iq_ksigns[(aux >> (7 * l)) & 127];
                for (int j = 0; j < 8; ++j) {
                    y[j] = db * (float)grid8_u8(g, j) * ((signs & lw__iq_kmask[j]) ? -1.f : 1.f);
                }
                y += 8;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ2_XS: one u16 per group of 8: a 9-bit grid index and a 7-bit sign index; one byte of two 4-bit scales per
 * sub-block of 32 (low nibble: groups 0-1, high nibble: groups 2-3).
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq2_xs(const void *vx, float *y, int64_t k) {
    const lw__block_iq2_xs *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *q = (const uint8_t *)x[i].qs;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            float db[2];
            db[0] = d * (0.5f + (float)(x[i].scales[ib32] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(x[i].scales[ib32] >> 4)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const uint16_t v = lw__rd_u16(q + 2 * (4 * ib32 + l));
                const uint64_t g = lw__iq2xs_grid[v & 511];
                const uint8_t signs = lw__iq_ksigns[v >> 9];
                for (int j = 0; j < 8; ++j) {
                    y[j] = db[l / 2] * (float)grid8_u8(g, j) * ((signs & lw__iq_kmask[j]) ? -1.f : 1.f);
                }
                y += 8;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ2_S: qs[0..31] low 8 bits of the 10-bit grid indices (4 per sub-block), qs[32..63] a full sign byte per
 * group (no parity), qh[ib32] the high 2 bits of group l's index at bits 2l..2l+1; scales as IQ2_XS.
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq2_s(const void *vx, float *y, int64_t k) {
    const lw__block_iq2_s *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *signs = x[i].qs + QK_K / 8;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            float db[2];
            db[0] = d * (0.5f + (float)(x[i].scales[ib32] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(x[i].scales[ib32] >> 4)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const float dl = db[l / 2];
                const unsigned idx = qs[l] | (((unsigned)x[i].qh[ib32] << (8 - 2 * l)) & 0x300);
                const uint64_t g = lw__iq2s_grid[idx];
                for (int j = 0; j < 8; ++j) {
                    y[j] = dl * (float)grid8_u8(g, j) * ((signs[l] & lw__iq_kmask[j]) ? -1.f : 1.f);
                }
                y += 8;
            }
            qs += 4;
            signs += 4;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ3_XXS: qs[0..63] grid indices, two per group of 8 (4 elements each); then per sub-block a u32 of four
 * 7-bit sign indices and a 4-bit scale, as IQ2_XXS. x = d * (0.5 + s) / 2 * grid * sign.
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq3_xxs(const void *vx, float *y, int64_t k) {
    const lw__block_iq3_xxs *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *scales_and_signs = x[i].qs + QK_K / 4;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            const uint32_t aux = lw__rd_u32(scales_and_signs + 4 * ib32);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; ++l) {
                const uint8_t signs = lw__iq_ksigns[(aux >> (7 * l)) & 127];
                const uint32_t g1 = lw__iq3xxs_grid[qs[2 * l + 0]];
                const uint32_t g2 = lw__iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; ++j) {
                    y[j + 0] = db * (float)grid4_u8(g1, j) * ((signs & lw__iq_kmask[j + 0]) ? -1.f : 1.f);
                    y[j + 4] = db * (float)grid4_u8(g2, j) * ((signs & lw__iq_kmask[j + 4]) ? -1.f : 1.f);
                }
                y += 8;
            }
            qs += 8;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ3_S: qs[0..63] low 8 bits of 9-bit grid indices (two per group of 8), qh[ib32] their 9th bits (bit m for
 * index m of the sub-block), signs[] a full sign byte per group, scales[] one byte per 64 elements (low
 * nibble: first sub-block, high: second). x = d * (1 + 2s) * grid * sign.
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq3_s(const void *vx, float *y, int64_t k) {
    const lw__block_iq3_s *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *qh = x[i].qh;
        const uint8_t *signs = x[i].signs;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            const uint8_t sc = x[i].scales[ib32 / 2];
            const float db = d * (float)(1 + 2 * ((ib32 % 2) ? (sc >> 4) : (sc & 0xf)));
            const unsigned h = qh[ib32];
            for (int l = 0; l < 4; ++l) {
                const uint32_t g1 = lw__iq3s_grid[qs[2 * l + 0] | ((h << (8 - 2 * l)) & 256)];
                const uint32_t g2 = lw__iq3s_grid[qs[2 * l + 1] | ((h << (7 - 2 * l)) & 256)];
                for (int j = 0; j < 4; ++j) {
                    y[j + 0] = db * (float)grid4_u8(g1, j) * ((signs[l] & lw__iq_kmask[j + 0]) ? -1.f : 1.f);
                    y[j + 4] = db * (float)grid4_u8(g2, j) * ((signs[l] & lw__iq_kmask[j + 4]) ? -1.f : 1.f);
                }
                y += 8;
            }
            qs += 8;
            signs += 4;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ1_S: qs[] low 8 bits of 11-bit grid indices (one per group of 8); per sub-block a u16 qh: bits 3l..3l+2
 * the high 3 index bits of group l, bits 12..14 a 3-bit scale s, bit 15 the sign of the shared delta.
 * x = d * (2s + 1) * (grid + delta), grid in {-1, 0, 1}, delta = +-1/8.
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq1_s(const void *vx, float *y, int64_t k) {
    const lw__block_iq1_s *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *qhb = (const uint8_t *)x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const unsigned qh = lw__rd_u16(qhb + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = (qh & 0x8000) ? -LW_IQ1S_DELTA : LW_IQ1S_DELTA;
            for (int l = 0; l < 4; ++l) {
                const uint64_t g = lw__iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; ++j) {
                    y[j] = dl * ((float)grid8_i8(g, j) + delta);
                }
                y += 8;
            }
            qs += 4;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ1_M: no separate scale field. scales[] is read as four u16: bits 0..11 of u16 m hold four 3-bit group
 * scales (two per sub-block: groups 0-1, then 2-3), and the top nibbles of the four u16 together form the
 * fp16 super-block scale (nibble m of d = bits 12..15 of u16 m). qh[] has one byte per pair of groups: low
 * nibble = high 3 index bits + delta sign of the first group, high nibble the same for the second.
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq1_m(const void *vx, float *y, int64_t k) {
    const lw__block_iq1_m *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        uint16_t sc[4];
        for (int m = 0; m < 4; ++m) sc[m] = lw__rd_u16(x[i].scales + 2 * m);
        const uint16_t dbits =
            (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = lw__fp16_to_fp32(dbits);
        const uint8_t *qs = x[i].qs;
        const uint8_t *qh = x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float dl1 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
            const float dl2 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
            unsigned idx[4];
            float delta[4];
            idx[0] = qs[0] | (((unsigned)qh[0] << 8) & 0x700);
            idx[1] = qs[1] | (((unsigned)qh[0] << 4) & 0x700);
            idx[2] = qs[2] | (((unsigned)qh[1] << 8) & 0x700);
            idx[3] = qs[3] | (((unsigned)qh[1] << 4) & 0x700);
            delta[0] = (qh[0] & 0x08) ? -LW_IQ1M_DELTA : LW_IQ1M_DELTA;
            delta[1] = (qh[0] & 0x80) ? -LW_IQ1M_DELTA : LW_IQ1M_DELTA;
            delta[2] = (qh[1] & 0x08) ? -LW_IQ1M_DELTA : LW_IQ1M_DELTA;
            delta[3] = (qh[1] & 0x80) ? -LW_IQ1M_DELTA : LW_IQ1M_DELTA;
            for (int l = 0; l < 4; ++l) {
                const float dl = l < 2 ? dl1 : dl2;
                const uint64_t g = lw__iq1s_grid[idx[l]];
                for (int j = 0; j < 8; ++j) {
                    y[j] = dl * ((float)grid8_i8(g, j) + delta[l]);
                }
                y += 8;
            }
            qs += 4;
            qh += 2;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ4_NL: blocks of 32, x = d * kvalues[nibble]; byte j holds element j (low nibble) and j + 16 (high).
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq4_nl(const void *vx, float *y, int64_t k) {
    const lw__block_iq4_nl *x = vx;
    const int64_t nb = k / LW_QK4_NL;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qs = x[i].qs;
        const float d = lw__fp16_to_fp32(x[i].d);
        for (int j = 0; j < LW_QK4_NL / 2; ++j) {
            y[j + 0] = d * (float)lw__iq4nl_values[qs[j] & 0xf];
            y[j + LW_QK4_NL / 2] = d * (float)lw__iq4nl_values[qs[j] >> 4];
        }
        y += LW_QK4_NL;
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ4_XS: IQ4_NL's levels in super-blocks of 256 with a 6-bit scale per 32 (low 4 bits in scales_l, two per
 * byte; high 2 bits in scales_h, bits 2ib..2ib+1). x = d * (ls - 32) * kvalues[nibble].
 * ------------------------------------------------------------------------------------------------------- */
void lw__dequantize_row_iq4_xs(const void *vx, float *y, int64_t k) {
    const lw__block_iq4_xs *x = vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qs = x[i].qs;
        const float d = lw__fp16_to_fp32(x[i].d);
        const unsigned scales_h = lw__rd_u16((const uint8_t *)&x[i].scales_h);
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls =
                ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j + 0] = dl * (float)lw__iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * (float)lw__iq4nl_values[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* =========================================================================================================
 * IQ4_NL / IQ4_XS quantization (ggml quantize_row_iq4_nl_impl and its three callers)
 * ======================================================================================================= */

#define IQ4_GROUP_MAX_EPS 1e-15f /* a sub-block whose largest |x| is below this gets scale 0 */

/* Index of the level of the ascending table val[0..n) nearest to x; ties go to the upper level. */
static inline int iq4_best_index(int n, const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav])
            mu = mav;
        else
            ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* Quantizes one super-block of sb elements in sub-blocks of 32 (sb = 32: IQ4_NL, sb = 256: IQ4_XS).
 * Per sub-block: weights w = x^2 (or imatrix * sqrt(sigma2 + x^2)), a first scale from the largest |x|, then
 * 2 * ntry + 1 candidate scales (itry + values[0]) / max, keeping the weighted least-squares best. With
 * ntry < 0 only the first pass runs (ggml's quantize_row_iq4_nl_ref). IQ4_XS then quantizes the sub-block
 * scales to 6 bits against d = -max_scale / 32 and re-picks the levels.
 * L (sb bytes) persists across calls on purpose: for IQ4_NL with ntry < 0, a sub-block below the epsilon
 * keeps the previous block's levels, exactly as ggml's loop does (its d is 0, so values are unaffected). */
static void iq4_quantize_superblock(int sb, const float *x, uint16_t *dh, uint8_t *q4, uint8_t *scales_h,
                                    uint8_t *scales_l, float *scales, uint8_t *L, const float *quant_weights,
                                    int ntry) {
    const int8_t *values = lw__iq4nl_values;
    float weight[32];
    float sigma2 = 0;
    for (int j = 0; j < sb; ++j) sigma2 += x[j] * x[j];
    sigma2 *= 2.f / (float)sb;

    memset(q4, 0, (size_t)sb / 2);
    *dh = lw__fp32_to_fp16(0.f);

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sb / 32; ++ib) {
        const float *xb = x + ib * 32;
        uint8_t *Lb = L + ib * 32;
        if (quant_weights) {
            const float *qw = quant_weights + ib * 32;
            for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        } else {
            for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
        }
        float amax = 0, max = 0;
        for (int j = 0; j < 32; ++j) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax < IQ4_GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = ntry > 0 ? -max / values[0] : max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float al = id * xb[j];
            const int l = iq4_best_index(16, values, al);
            Lb[j] = (uint8_t)l;
            const float q = values[l];
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (float)(itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; ++j) {
                const float al = id * xb[j];
                const int l = iq4_best_index(16, values, al);
                const float q = values[l];
                const float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        const float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }

    if (sb / 32 > 1) {
        /* IQ4_XS: 6-bit sub-block scales l in -32..31 stored as l + 32. */
        scales_h[0] = scales_h[1] = 0;
        const float d = -max_scale / 32;
        *dh = lw__fp32_to_fp16(d);
        const float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < sb / 32; ++ib) {
            int l = lw__nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l;
            const float idl = dl ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * 32;
            const float *xb = x + ib * 32;
            for (int j = 0; j < 32; ++j) Lb[j] = (uint8_t)iq4_best_index(16, values, idl * xb[j]);
            l += 32;
            const uint8_t l_l = (uint8_t)(l & 0xf);
            const uint8_t l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0)
                scales_l[ib / 2] = l_l;
            else
                scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            /* scales_h is a little-endian u16: bits 2ib..2ib+1. */
            scales_h[(2 * ib) / 8] |= (uint8_t)(l_h << ((2 * ib) % 8));
        }
    } else {
        *dh = lw__fp32_to_fp16(scales[0]);
        if (ntry > 0) {
            const float id = scales[0] ? 1 / scales[0] : 0;
            for (int j = 0; j < sb; ++j) L[j] = (uint8_t)iq4_best_index(16, values, id * x[j]);
        }
    }

    for (int i = 0; i < sb / 32; ++i) {
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
}

/* Stores a half into a block's (possibly unaligned) little-endian u16 field. */
static inline void put_u16(void *p, uint16_t v) {
    uint8_t *b = p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

/* One IQ4_NL row of nblock blocks; L carries across blocks (see iq4_quantize_superblock). */
static void iq4_nl_row(const float *x, lw__block_iq4_nl *y, int64_t nblock, const float *qw, int ntry) {
    uint8_t L[LW_QK4_NL] = {0};
    for (int64_t ib = 0; ib < nblock; ++ib) {
        uint16_t dh;
        float scale;
        iq4_quantize_superblock(LW_QK4_NL, x + LW_QK4_NL * ib, &dh, y[ib].qs, NULL, NULL, &scale, L,
                                qw ? qw + LW_QK4_NL * ib : NULL, ntry);
        put_u16(&y[ib].d, dh);
    }
}

/* One IQ4_XS row of nblock super-blocks. */
static void iq4_xs_row(const float *x, lw__block_iq4_xs *y, int64_t nblock, const float *qw) {
    uint8_t L[QK_K];
    float scales[QK_K / 32];
    for (int64_t ib = 0; ib < nblock; ++ib) {
        uint16_t dh;
        iq4_quantize_superblock(QK_K, x + QK_K * ib, &dh, y[ib].qs, (uint8_t *)&y[ib].scales_h,
                                y[ib].scales_l, scales, L, qw ? qw + QK_K * ib : NULL, 7);
        put_u16(&y[ib].d, dh);
    }
}

/* ggml quantize_iq4_nl (ggml_quantize_chunk's path): scale search with ntry = 7; imatrix optional. */
size_t lw__quantize_iq4_nl(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                           const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0) return 0;
    const int64_t nblock = n_per_row / LW_QK4_NL;
    lw__block_iq4_nl *y = dst;
    for (int64_t r = 0; r < nrows; ++r) {
        iq4_nl_row(src + r * n_per_row, y + r * nblock, nblock, imatrix, 7);
    }
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq4_nl);
}

/* ggml quantize_row_iq4_nl_ref (the traits' from_float_ref): no scale search (ntry = -1), so its bytes
 * differ from lw__quantize_iq4_nl's. */
void lw__quantize_row_iq4_nl_ref(const float *x, void *y, int64_t k) {
    if (k <= 0) return;
    iq4_nl_row(x, y, k / LW_QK4_NL, NULL, -1);
}

/* ggml quantize_iq4_xs; its quantize_row_iq4_xs_ref is the same with no imatrix. */
size_t lw__quantize_iq4_xs(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                           const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq4_xs *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq4_xs_row(src + r * n_per_row, y + r * nblock, nblock, imatrix);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq4_xs);
}

void lw__quantize_row_iq4_xs_ref(const float *x, void *y, int64_t k) {
    if (k <= 0) return;
    iq4_xs_row(x, y, k / QK_K, NULL);
}

/* =========================================================================================================
 * Random valid blocks (for tests and synthetic models)
 * ======================================================================================================= */

/* splitmix64: a full-period 64-bit generator whose state is one integer the caller keeps. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static unsigned rng_bits(uint64_t *s, int n) {
    return (unsigned)(rng_next(s) >> (64 - n));
}

/* Largest |value| a block can decode to per unit of d (largest scale code times largest grid magnitude). */
static float iq_max_per_d(uint32_t type) {
    switch (type) {
    case LW_TYPE_IQ2_XXS:
    case LW_TYPE_IQ2_XS:
    case LW_TYPE_IQ2_S:
        return 15.5f * 0.25f * 43.f;
    case LW_TYPE_IQ3_XXS:
        return 15.5f * 0.5f * 62.f;
    case LW_TYPE_IQ3_S:
        return 31.f * 15.f;
    case LW_TYPE_IQ1_S:
    case LW_TYPE_IQ1_M:
        return 15.f * (1.f + LW_IQ1S_DELTA);
    case LW_TYPE_IQ4_NL:
        return 127.f;
    case LW_TYPE_IQ4_XS:
        return 32.f * 127.f;
    default:
        return 0.f;
    }
}

lw_status lw__iq_random_block(uint32_t type, uint64_t *rng, float amax, void *block) {
    const float per_d = iq_max_per_d(type);
    if (!rng || !block || per_d == 0.f) return LW_ERR_INVALID_ARG;
    if (!(amax > 0.f) || !isfinite(amax)) return LW_ERR_INVALID_ARG;
    /* d in [0.5, 0.99] * amax / per_d: the 1 % margin covers fp16 rounding of d (2^-11 relative). */
    const float u = 0.5f + 0.49f * (float)rng_bits(rng, 24) / 16777216.f;
    const uint16_t dh = lw__fp32_to_fp16(amax / per_d * u);
    const float dcheck = lw__fp16_to_fp32(dh);
    if (!(dcheck > 0.f) || !isfinite(dcheck)) return LW_ERR_INVALID_ARG; /* amax outside fp16's range */

    switch (type) {
    case LW_TYPE_IQ2_XXS: {
        lw__block_iq2_xxs *b = block;
        uint8_t *q = (uint8_t *)b->qs;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            uint32_t aux = rng_bits(rng, 4) << 28; /* sub-block scale */
            for (int l = 0; l < 4; ++l) {
                q[8 * ib32 + l] = (uint8_t)rng_bits(rng, 8);  /* grid index, 256 entries       */
                aux |= (uint32_t)rng_bits(rng, 7) << (7 * l); /* 7 sign bits, parity implied   */
            }
            for (int m = 0; m < 4; ++m) q[8 * ib32 + 4 + m] = (uint8_t)(aux >> (8 * m));
        }
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ2_XS: {
        lw__block_iq2_xs *b = block;
        for (int g = 0; g < QK_K / 8; ++g) {
            const unsigned idx = rng_bits(rng, 9); /* 512 entries                 */
            const unsigned sgn = rng_bits(rng, 7); /* 7 sign bits, parity implied */
            put_u16((uint8_t *)b->qs + 2 * g, (uint16_t)(idx | sgn << 9));
        }
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) b->scales[ib32] = (uint8_t)rng_bits(rng, 8);
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ2_S: {
        lw__block_iq2_s *b = block;
        memset(b->qh, 0, sizeof b->qh);
        for (int g = 0; g < QK_K / 8; ++g) {
            const unsigned idx = rng_bits(rng, 10); /* 1024 entries */
            b->qs[g] = (uint8_t)idx;
            b->qh[g / 4] |= (uint8_t)((idx >> 8) << (2 * (g % 4)));
            b->qs[QK_K / 8 + g] = (uint8_t)rng_bits(rng, 8); /* free sign byte */
        }
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) b->scales[ib32] = (uint8_t)rng_bits(rng, 8);
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ3_XXS: {
        lw__block_iq3_xxs *b = block;
        for (int h = 0; h < QK_K / 4; ++h) b->qs[h] = (uint8_t)rng_bits(rng, 8); /* 256 entries */
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            uint32_t aux = rng_bits(rng, 4) << 28;
            for (int l = 0; l < 4; ++l) aux |= (uint32_t)rng_bits(rng, 7) << (7 * l);
            for (int m = 0; m < 4; ++m) b->qs[QK_K / 4 + 4 * ib32 + m] = (uint8_t)(aux >> (8 * m));
        }
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ3_S: {
        lw__block_iq3_s *b = block;
        memset(b->qh, 0, sizeof b->qh);
        for (int h = 0; h < QK_K / 4; ++h) {
            const unsigned idx = rng_bits(rng, 9); /* 512 entries */
            b->qs[h] = (uint8_t)idx;
            b->qh[h / 8] |= (uint8_t)((idx >> 8) << (h % 8));
        }
        for (int g = 0; g < QK_K / 8; ++g) b->signs[g] = (uint8_t)rng_bits(rng, 8);
        for (int m = 0; m < QK_K / 64; ++m) b->scales[m] = (uint8_t)rng_bits(rng, 8);
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ1_S: {
        lw__block_iq1_s *b = block;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            unsigned qh = rng_bits(rng, 3) << 12; /* sub-block scale  */
            qh |= rng_bits(rng, 1) << 15;         /* delta sign       */
            for (int l = 0; l < 4; ++l) {
                const unsigned idx = rng_bits(rng, 11); /* 2048 entries */
                b->qs[4 * ib + l] = (uint8_t)idx;
                qh |= (idx >> 8) << (3 * l);
            }
            put_u16((uint8_t *)b->qh + 2 * ib, (uint16_t)qh);
        }
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ1_M: {
        lw__block_iq1_m *b = block;
        uint16_t sc[4] = {0, 0, 0, 0};
        for (int g = 0; g < QK_K / 8; ++g) {
            const unsigned idx = rng_bits(rng, 11);
            const unsigned neg = rng_bits(rng, 1);
            const unsigned nib = (idx >> 8) | neg << 3; /* high index bits, delta sign */
            b->qs[g] = (uint8_t)idx;
            if (g % 2 == 0)
                b->qh[g / 2] = (uint8_t)nib;
            else
                b->qh[g / 2] |= (uint8_t)(nib << 4);
        }
        for (int s = 0; s < QK_K / 16; ++s) sc[s / 4] |= (uint16_t)(rng_bits(rng, 3) << (3 * (s % 4)));
        for (int m = 0; m < 4; ++m) {
            sc[m] |= (uint16_t)(((dh >> (4 * m)) & 0xf) << 12); /* nibble m of the fp16 scale */
            put_u16(b->scales + 2 * m, sc[m]);
        }
        break;
    }
    case LW_TYPE_IQ4_NL: {
        lw__block_iq4_nl *b = block;
        for (int j = 0; j < LW_QK4_NL / 2; ++j) b->qs[j] = (uint8_t)rng_bits(rng, 8);
        put_u16(&b->d, dh);
        break;
    }
    case LW_TYPE_IQ4_XS: {
        lw__block_iq4_xs *b = block;
        unsigned sh = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const unsigned ls = rng_bits(rng, 6); /* scale ls - 32 in -32..31 */
            if (ib % 2 == 0)
                b->scales_l[ib / 2] = (uint8_t)(ls & 0xf);
            else
                b->scales_l[ib / 2] |= (uint8_t)((ls & 0xf) << 4);
            sh |= (ls >> 4) << (2 * ib);
        }
        put_u16(&b->scales_h, (uint16_t)sh);
        for (int j = 0; j < QK_K / 2; ++j) b->qs[j] = (uint8_t)rng_bits(rng, 8);
        put_u16(&b->d, dh);
        break;
    }
    default:
        return LW_ERR_INVALID_ARG;
    }
    return LW_OK;
}

void lw__iq_random_blocks(uint32_t type, void *dst, int64_t n_blocks, uint64_t seed) {
    const lw_type_info *ti = lw_type_get(type);
    if (!ti || !dst || n_blocks <= 0) return;
    uint64_t rng = seed;
    for (int64_t i = 0; i < n_blocks; ++i) {
        if (lw__iq_random_block(type, &rng, 1.0f, (uint8_t *)dst + (size_t)i * ti->type_size) != LW_OK)
            return;
    }
}
