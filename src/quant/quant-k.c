/* K-quants (Q2_K..Q6_K, Q8_K), ternary formats (TQ1_0, TQ2_0), the scale searches they share, and the
 * imatrix-weighted paths of Q4_0/Q4_1/Q5_0/Q5_1 (which use the same searches).
 *
 * Bit-exactness with ggml: the searches below pick among candidate scales by comparing float sums, so the
 * result depends on every rounding. Each expression keeps ggml-quants.c's operand order and types (e.g.
 * `w*x[i]*l` is (w*x)*float(l)); no reassociation, no FMA (ISO C mode disables contraction). */
#include "quant/quant.h"

#include "core/core.h"

#include <math.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f /* below this a group counts as all zero (ggml's constant) */

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------------------
 * Scale searches
 * ------------------------------------------------------------------------------------------------------- */

/* Weight of element i in make_qx_quants when no importance weights are given. */
static inline float qx_weight(int rmse_type, float x) {
    return rmse_type == 1 ? x * x : rmse_type == 2 ? 1 : rmse_type == 3 ? fabsf(x) : sqrtf(fabsf(x));
}

/* Symmetric quantization of n values to -nmax..nmax-1 (stored as L + nmax): starts from the scale that maps
 * the largest-magnitude value to -nmax, then tries 18 nearby scales and keeps the one that maximizes the
 * weighted least-squares fit. Returns the scale. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            const int l = lw__nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = lw__nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = qw ? qw[i] : qx_weight(rmse_type, x[i]);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = lw__nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            const float w = qw ? qw[i] : qx_weight(rmse_type, x[i]);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = lw__nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's search: like make_qx_quants, then up to 5 passes moving single quants while the x^2-weighted fit
 * improves. L ends as 0..2*nmax-1. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = lw__nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            L[i] = (int8_t)l;
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                const float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = lw__nearest_int(x[i] * sl2 / slx);
                    new_l = imax(-nmax, imin(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = lw__nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

/* Asymmetric quantization x ~ scale * L + min (min <= 0, L in 0..nmax) minimizing the weighted error
 * (absolute when use_mad, else squared) over nstep+1 candidate scales around nmax / (max - min), each
 * refined by a weighted least-squares fit of scale and min. Returns the scale; *the_min = -min.
 * weights == NULL means x^2 (ggml's make_qkx3_quants); make_qkx2_quants always passes weights. */
static float make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                             uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad, bool qkx3) {
#define QKX_W(i) (weights ? weights[i] : x[i] * x[i])
    float min = x[0], max = x[0];
    float sum_w = QKX_W(0);
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = QKX_W(i);
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    /* qkx2 tests max == min, qkx3 max <= min: equivalent here since max >= min always, kept for clarity. */
    if (qkx3 ? max <= min : max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = lw__nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += QKX_W(i) * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = lw__nearest_int(iscale * (x[i] - min));
            l = imax(0, imin(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = QKX_W(i);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += QKX_W(i) * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
#undef QKX_W
}

/* Quantizes n non-negative values (sub-block scales or mins) to 0..nmax with importance weights: best of 9
 * scales by weighted squared error, then up to 5 passes of single-value moves. Returns the scale. */
float lw__make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (max < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)lw__nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * L[i];
        const float w = quant_weights[i];
        best_mse += w * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = lw__nearest_int(iscale_is * x[i]);
            l = imin(nmax, l);
            const float diff = x[i] - scale_is * l;
            const float w = quant_weights[i];
            mse += w * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = lw__nearest_int(iscale * x[i]);
        l = imin(nmax, l);
        L[i] = (uint8_t)l;
        const float w = quant_weights[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = quant_weights[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = lw__nearest_int(x[i] * sl2 / slx);
                new_l = imin(nmax, new_l);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* 6-bit scale j and min j of Q4_K/Q5_K's packed 12 bytes: j < 4 in the low 6 bits of bytes j and j + 4;
 * j >= 4 split into a nibble in bytes 8..11 and the top 2 bits of bytes j - 4 (scale) and j (min). */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Inverse of get_scale_min_k4 for all 8 pairs. */
static void put_scales_mins_k4(uint8_t scales[LW_K_SCALE_SIZE], const uint8_t *ls, const uint8_t *lm) {
    for (int j = 0; j < LW_QK_K / 32; ++j) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
            scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Packs 256 2-bit values: byte l of each 32-byte group holds elements l, l+32, l+64, l+96 of 128. */
static void pack_2bit_k(uint8_t *qs, const uint8_t *L) {
    for (int j = 0; j < LW_QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] =
                (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* ---------------------------------------------------------------------------------------------------------
 * Q2_K
 * ------------------------------------------------------------------------------------------------------- */

/* After d/dmin and the 4-bit scales are final, requantizes each sub-block of 16 against them. */
static void q2_K_requantize(const lw__block_q2_K *y, const float *x, uint8_t *L) {
    for (int j = 0; j < LW_QK_K / 16; ++j) {
        const float d = lw__fp16_to_fp32(y->d) * (y->scales[j] & 0xf);
        if (!d) continue;
        const float dm = lw__fp16_to_fp32(y->dmin) * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = lw__nearest_int((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
        }
    }
}

void lw__quantize_row_q2_K_ref(const float *x, void *vy, int64_t k) {
    lw__block_q2_K *y = vy;
    const int64_t nb = k / LW_QK_K;
    uint8_t L[LW_QK_K], Laux[16];
    float weights[16], mins[LW_QK_K / 16], scales[LW_QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        float max_scale = 0, max_min = 0; /* the min is subtracted, so scales are positive */
        for (int j = 0; j < LW_QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15,
                                        true, false);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < LW_QK_K / 16; ++j) y[i].scales[j] = (uint8_t)lw__nearest_int(iscale * scales[j]);
            y[i].d = lw__fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < LW_QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = lw__fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < LW_QK_K / 16; ++j) {
                const int l = lw__nearest_int(iscale * mins[j]);
                /* l is negative only for NaN input; shift as unsigned (same low byte, no UB) */
                y[i].scales[j] |= (uint8_t)((uint32_t)l << 4);
            }
            y[i].dmin = lw__fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = lw__fp32_to_fp16(0.f);
        }
        q2_K_requantize(&y[i], x, L);
        pack_2bit_k(y[i].qs, L);
    }
}

/* ggml's quantize_row_q2_K_impl (imatrix given). */
static void quantize_row_q2_K_imat(const float *x, lw__block_q2_K *y, int64_t n_per_row, const float *qw_row) {
    const int64_t nb = n_per_row / LW_QK_K;
    uint8_t L[LW_QK_K], Laux[16], Ls[LW_QK_K / 16], Lm[LW_QK_K / 16];
    float mins[LW_QK_K / 16], scales[LW_QK_K / 16], sw[LW_QK_K / 16], weight[16];
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        memset(sw, 0, sizeof sw);
        float sumx2 = 0;
        for (int j = 0; j < LW_QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / LW_QK_K;
        for (int j = 0; j < LW_QK_K / 16; ++j) {
            const float *qw = qw_row + LW_QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < LW_QK_K / 16; ++l) sw[j] += weight[l];
            scales[j] = make_qkx_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36,
                                        false, true);
        }
        const float dm = lw__make_qp_quants(LW_QK_K / 16, 15, scales, Ls, sw);
        const float mm = lw__make_qp_quants(LW_QK_K / 16, 15, mins, Lm, sw);
        y[i].d = lw__fp32_to_fp16(dm);
        y[i].dmin = lw__fp32_to_fp16(mm);
        for (int j = 0; j < LW_QK_K / 16; ++j) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_requantize(&y[i], x, L);
        pack_2bit_k(y[i].qs, L);
    }
}

void lw__dequantize_row_q2_K(const void *vx, float *y, int64_t k) {
    const lw__block_q2_K *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const float min = lw__fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < LW_QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xf), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 16 * half] >> shift) & 3)) - ml;
                }
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q3_K
 * ------------------------------------------------------------------------------------------------------- */

/* Stores 6-bit scale l (0..63) of sub-block j: low nibbles in bytes 0..7, high 2 bits in bytes 8..11. */
static inline void q3_K_put_scale(uint8_t *scales, int j, int l) {
    if (j < 8) scales[j] = (uint8_t)(l & 0xf);
    else scales[j - 8] |= (uint8_t)((l & 0xf) << 4);
    l >>= 4;
    scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
}

/* Requantizes against the final scales, then splits into hmask (bit 2) and 2-bit qs. */
static void q3_K_finish(lw__block_q3_K *y, const float *x, int8_t *L) {
    for (int j = 0; j < LW_QK_K / 16; ++j) {
        int8_t sc = (int8_t)(j < 8 ? y->scales[j] & 0xf : y->scales[j - 8] >> 4);
        sc = (int8_t)((sc | (((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
        const float d = lw__fp16_to_fp32(y->d) * sc;
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = lw__nearest_int(x[16 * j + ii] / d);
            l = imax(-4, imin(3, l));
            L[16 * j + ii] = (int8_t)(l + 4);
        }
    }
    /* The high bit of quants 0..31 goes to bit 0 of hmask[0..31], of 32..63 to bit 1, and so on. */
    memset(y->hmask, 0, sizeof y->hmask);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < LW_QK_K; ++j) {
        if (L[j] > 3) {
            y->hmask[m] |= hm;
            L[j] -= 4;
        }
        if (++m == LW_QK_K / 8) {
            m = 0;
            hm <<= 1;
        }
    }
    pack_2bit_k(y->qs, (const uint8_t *)L);
}

void lw__quantize_row_q3_K_ref(const float *x, void *vy, int64_t k) {
    lw__block_q3_K *y = vy;
    const int64_t nb = k / LW_QK_K;
    int8_t L[LW_QK_K];
    float scales[LW_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < LW_QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            const float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < LW_QK_K / 16; ++j) {
                int8_t l = (int8_t)lw__nearest_int(iscale * scales[j]);
                l = (int8_t)(imax(-32, imin(31, l)) + 32);
                q3_K_put_scale(y[i].scales, j, l);
            }
            y[i].d = lw__fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = lw__fp32_to_fp16(0.f);
        }
        q3_K_finish(&y[i], x, L);
    }
}

/* ggml's quantize_row_q3_K_impl (imatrix given). */
static void quantize_row_q3_K_imat(const float *x, lw__block_q3_K *y, int64_t n_per_row, const float *qw_row) {
    const int64_t nb = n_per_row / LW_QK_K;
    int8_t L[LW_QK_K], Ls[LW_QK_K / 16];
    float scales[LW_QK_K / 16], weight[16], sw[LW_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        float sumx2 = 0;
        for (int j = 0; j < LW_QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / LW_QK_K;
        for (int j = 0; j < LW_QK_K / 16; ++j) {
            const float *qw = qw_row + LW_QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; ++l) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        const float d_block = make_qx_quants(LW_QK_K / 16, 32, scales, Ls, 1, sw);
        for (int j = 0; j < LW_QK_K / 16; ++j) q3_K_put_scale(y[i].scales, j, Ls[j]);
        y[i].d = lw__fp32_to_fp16(d_block);
        q3_K_finish(&y[i], x, L);
    }
}

void lw__dequantize_row_q3_K(const void *vx, float *y, int64_t k) {
    const lw__block_q3_K *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d_all = lw__fp16_to_fp32(x[i].d);
        /* Unpack the 16 6-bit scales (as ggml's kmask shuffle). */
        int8_t scales[16];
        for (int j = 0; j < 16; j++) {
            const int lo = j < 8 ? x[i].scales[j] & 0xf : x[i].scales[j - 8] >> 4;
            const int hi = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            scales[j] = (int8_t)(lo | (hi << 4));
        }
        const uint8_t *q = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < LW_QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 0; l < 16; ++l) {
                        const int o = l + 16 * half;
                        *y++ = dl * ((int8_t)((q[o] >> shift) & 3) - ((hm[o] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q4_K, Q5_K
 * ------------------------------------------------------------------------------------------------------- */

/* Quantizes the 8 sub-block scales and mins to 6 bits against their maxima (the reference path). */
static void k4_scales_ref(uint8_t *packed, uint16_t *d, uint16_t *dmin, const float *scales, const float *mins,
                          float max_scale, float max_min) {
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[LW_QK_K / 32], lm[LW_QK_K / 32];
    for (int j = 0; j < LW_QK_K / 32; ++j) {
        /* ggml assigns the int to uint8_t before clamping (wraps, then MIN 63). */
        ls[j] = (uint8_t)lw__nearest_int(inv_scale * scales[j]);
        lm[j] = (uint8_t)lw__nearest_int(inv_min * mins[j]);
        if (ls[j] > 63) ls[j] = 63;
        if (lm[j] > 63) lm[j] = 63;
    }
    put_scales_mins_k4(packed, ls, lm);
    *d = lw__fp32_to_fp16(max_scale / 63.f);
    *dmin = lw__fp32_to_fp16(max_min / 63.f);
}

/* Requantizes all 256 values against the final 6-bit scales/mins into L (0..nmax). */
static void k4_requantize(const uint8_t *packed, uint16_t dh, uint16_t dminh, const float *x, uint8_t *L,
                          int nmax) {
    for (int j = 0; j < LW_QK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed, &sc, &m);
        const float d = lw__fp16_to_fp32(dh) * sc;
        if (!d) continue;
        const float dm = lw__fp16_to_fp32(dminh) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = lw__nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

/* Reference sub-block search shared by Q4_K (nmax 15) and Q5_K (nmax 31): weights av_x + |x|. */
static void k4_subblocks_ref(const float *x, uint8_t *L, float *scales, float *mins, float *max_scale,
                             float *max_min, int nmax, float rmin, int nstep) {
    uint8_t Laux[32];
    float weights[32];
    *max_scale = 0;
    *max_min = 0;
    for (int j = 0; j < LW_QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep,
                                    false, false);
        if (scales[j] > *max_scale) *max_scale = scales[j];
        if (mins[j] > *max_min) *max_min = mins[j];
    }
}

/* imatrix sub-block search shared by Q4_K and Q5_K (ggml's *_impl), filling packed scales, d and dmin. */
static void k4_subblocks_imat(const float *x, const float *qw_blk, uint8_t *L, int nmax, uint8_t *packed,
                              uint16_t *d, uint16_t *dmin, bool clamp63) {
    uint8_t Laux[32], Ls[LW_QK_K / 32], Lm[LW_QK_K / 32];
    float weights[32], sw[LW_QK_K / 32], mins[LW_QK_K / 32], scales[LW_QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < LW_QK_K; ++l) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / LW_QK_K;
    for (int j = 0; j < LW_QK_K / 32; ++j) {
        const float *qw = qw_blk + 32 * j;
        for (int l = 0; l < 32; ++l) weights[l] = qw[l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36,
                                    false, true);
    }
    const float d_block = lw__make_qp_quants(LW_QK_K / 32, 63, scales, Ls, sw);
    const float m_block = lw__make_qp_quants(LW_QK_K / 32, 63, mins, Lm, sw);
    /* ggml clamps here for Q5_K only (a no-op unless a scale came out negative and wrapped). */
    for (int j = 0; clamp63 && j < LW_QK_K / 32; ++j) {
        if (Ls[j] > 63) Ls[j] = 63;
        if (Lm[j] > 63) Lm[j] = 63;
    }
    put_scales_mins_k4(packed, Ls, Lm);
    *d = lw__fp32_to_fp16(d_block);
    *dmin = lw__fp32_to_fp16(m_block);
}

static void q4_K_pack(lw__block_q4_K *y, const uint8_t *L) {
    uint8_t *q = y->qs;
    for (int j = 0; j < LW_QK_K; j += 64, q += 32)
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

void lw__quantize_row_q4_K_ref(const float *x, void *vy, int64_t k) {
    lw__block_q4_K *y = vy;
    const int64_t nb = k / LW_QK_K;
    uint8_t L[LW_QK_K];
    float mins[LW_QK_K / 32], scales[LW_QK_K / 32], max_scale, max_min;
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        k4_subblocks_ref(x, L, scales, mins, &max_scale, &max_min, 15, -1.f, 20);
        k4_scales_ref(y[i].scales, &y[i].d, &y[i].dmin, scales, mins, max_scale, max_min);
        k4_requantize(y[i].scales, y[i].d, y[i].dmin, x, L, 15);
        q4_K_pack(&y[i], L);
    }
}

static void quantize_row_q4_K_imat(const float *x, lw__block_q4_K *y, int64_t n_per_row, const float *qw) {
    const int64_t nb = n_per_row / LW_QK_K;
    uint8_t L[LW_QK_K];
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        k4_subblocks_imat(x, qw + LW_QK_K * i, L, 15, y[i].scales, &y[i].d, &y[i].dmin, false);
        k4_requantize(y[i].scales, y[i].d, y[i].dmin, x, L, 15);
        q4_K_pack(&y[i], L);
    }
}

void lw__dequantize_row_q4_K(const void *vx, float *y, int64_t k) {
    const lw__block_q4_K *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *q = x[i].qs;
        const float d = lw__fp16_to_fp32(x[i].d);
        const float min = lw__fp16_to_fp32(x[i].dmin);
        int is = 0;
        for (int j = 0; j < LW_QK_K; j += 64, q += 32, is += 2) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void q5_K_pack(lw__block_q5_K *y, const uint8_t *L) {
    uint8_t *qh = y->qh, *ql = y->qs;
    memset(qh, 0, sizeof y->qh);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < LW_QK_K; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            int l2 = L[n + j + 32];
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
    }
}

void lw__quantize_row_q5_K_ref(const float *x, void *vy, int64_t k) {
    lw__block_q5_K *y = vy;
    const int64_t nb = k / LW_QK_K;
    uint8_t L[LW_QK_K];
    float mins[LW_QK_K / 32], scales[LW_QK_K / 32], max_scale, max_min;
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        k4_subblocks_ref(x, L, scales, mins, &max_scale, &max_min, 31, -0.5f, 15);
        k4_scales_ref(y[i].scales, &y[i].d, &y[i].dmin, scales, mins, max_scale, max_min);
        k4_requantize(y[i].scales, y[i].d, y[i].dmin, x, L, 31);
        q5_K_pack(&y[i], L);
    }
}

static void quantize_row_q5_K_imat(const float *x, lw__block_q5_K *y, int64_t n_per_row, const float *qw) {
    const int64_t nb = n_per_row / LW_QK_K;
    uint8_t L[LW_QK_K];
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        k4_subblocks_imat(x, qw + LW_QK_K * i, L, 31, y[i].scales, &y[i].d, &y[i].dmin, true);
        k4_requantize(y[i].scales, y[i].d, y[i].dmin, x, L, 31);
        q5_K_pack(&y[i], L);
    }
}

void lw__dequantize_row_q5_K(const void *vx, float *y, int64_t k) {
    const lw__block_q5_K *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = lw__fp16_to_fp32(x[i].d);
        const float min = lw__fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < LW_QK_K; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q6_K
 * ------------------------------------------------------------------------------------------------------- */

/* One Q6_K block from 16 sub-block searches (qw: the block's 256 importance weights, or NULL). */
static void q6_K_block(const float *x, lw__block_q6_K *y, const float *qw) {
    int8_t L[LW_QK_K];
    float scales[LW_QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < LW_QK_K / 16; ++ib) {
        const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + 16 * ib : NULL);
        scales[ib] = scale;
        const float abs_scale = fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        y->d = lw__fp32_to_fp16(0.f);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = lw__fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < LW_QK_K / 16; ++ib) y->scales[ib] = (int8_t)imin(127, lw__nearest_int(iscale * scales[ib]));
    for (int j = 0; j < LW_QK_K / 16; ++j) {
        const float d = lw__fp16_to_fp32(y->d) * y->scales[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = lw__nearest_int(x[16 * j + ii] / d);
            l = imax(-32, imin(31, l));
            L[16 * j + ii] = (int8_t)(l + 32);
        }
    }
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < LW_QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l + 0] & 0xf;
            const uint8_t q2 = L[j + l + 32] & 0xf;
            const uint8_t q3 = L[j + l + 64] & 0xf;
            const uint8_t q4 = L[j + l + 96] & 0xf;
            ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                              ((L[j + l + 96] >> 4) << 6));
        }
    }
}

void lw__quantize_row_q6_K_ref(const float *x, void *vy, int64_t k) {
    lw__block_q6_K *y = vy;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) q6_K_block(x + LW_QK_K * i, &y[i], NULL);
}

void lw__dequantize_row_q6_K(const void *vx, float *y, int64_t k) {
    const lw__block_q6_K *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lw__fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < LW_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)(((ql[l + 0] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
                const int8_t q2 = (int8_t)(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
                const int8_t q3 = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                const int8_t q4 = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Q8_K (activations for K-quant dot products)
 * ------------------------------------------------------------------------------------------------------- */

void lw__quantize_row_q8_K_ref(const float *x, void *vy, int64_t k) {
    lw__block_q8_K *y = vy;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++, x += LW_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < LW_QK_K; ++j) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (!amax) {
            /* ggml leaves bsums untouched here; we zero them (they are sums of zero quants). */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127 (not -128) so that IQ2_XXS SIMD dot products never see -128. */
        const float iscale = -127.f / max;
        for (int j = 0; j < LW_QK_K; ++j) y[i].qs[j] = (int8_t)imin(127, lw__nearest_int(iscale * x[j]));
        for (int j = 0; j < LW_QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void lw__dequantize_row_q8_K(const void *vx, float *y, int64_t k) {
    const lw__block_q8_K *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++)
        for (int j = 0; j < LW_QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
}

/* ---------------------------------------------------------------------------------------------------------
 * TQ1_0, TQ2_0 (ternary)
 * ------------------------------------------------------------------------------------------------------- */

/* Packs n trits (0..2, most significant first) into one byte as ceil(t * 256 / 243), so that the trit k can
 * be read back as ((byte * 3^k) mod 256) * 3 >> 8. */
static inline uint8_t tq1_pack(const float *x, int stride, int n, float id, bool shift_once) {
    uint8_t q = 0;
    for (int t = 0; t < n; ++t) {
        const int xi = lw__lroundf_int(x[t * stride] * id) + 1;
        q = (uint8_t)(q * 3 + xi);
    }
    if (shift_once) q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

void lw__quantize_row_tq1_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_tq1_0 *y = vy;
    const int64_t nb = k / LW_QK_K;
    const int nqs = (int)sizeof y->qs, nqh = (int)sizeof y->qh;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < LW_QK_K; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        /* qs[0..31]: 5 trits each, elements m + 32n; qs[32..47]: elements m + 16n of the next 80. */
        int j = 0;
        for (; j < nqs - nqs % 32; j += 32, x += 5 * 32)
            for (int m = 0; m < 32; ++m) y[i].qs[j + m] = tq1_pack(x + m, 32, 5, id, false);
        for (; j < nqs; j += 16, x += 5 * 16)
            for (int m = 0; m < 16; ++m) y[i].qs[j + m] = tq1_pack(x + m, 16, 5, id, false);
        /* qh: 4 trits each (elements j + 4m), shifted up one trit. */
        for (int jj = 0; jj < nqh; ++jj) y[i].qh[jj] = tq1_pack(x + jj, nqh, 4, id, true);
        x += 4 * nqh;
    }
}

void lw__dequantize_row_tq1_0(const void *vx, float *y, int64_t k) {
    const lw__block_tq1_0 *x = vx;
    const int64_t nb = k / LW_QK_K;
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    const int nqs = (int)sizeof x->qs, nqh = (int)sizeof x->qh;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = lw__fp16_to_fp32(x[i].d);
        int j = 0;
        for (; j < nqs - nqs % 32; j += 32)
            for (int n = 0; n < 5; ++n)
                for (int m = 0; m < 32; ++m) {
                    const uint8_t q = (uint8_t)(x[i].qs[j + m] * pow3[n]);
                    const int16_t xi = (int16_t)(((uint16_t)q * 3) >> 8);
                    *y++ = (float)(xi - 1) * d;
                }
        for (; j < nqs; j += 16)
            for (int n = 0; n < 5; ++n)
                for (int m = 0; m < 16; ++m) {
                    const uint8_t q = (uint8_t)(x[i].qs[j + m] * pow3[n]);
                    const int16_t xi = (int16_t)(((uint16_t)q * 3) >> 8);
                    *y++ = (float)(xi - 1) * d;
                }
        for (int n = 0; n < 4; ++n)
            for (int jj = 0; jj < nqh; ++jj) {
                const uint8_t q = (uint8_t)(x[i].qh[jj] * pow3[n]);
                const int16_t xi = (int16_t)(((uint16_t)q * 3) >> 8);
                *y++ = (float)(xi - 1) * d;
            }
    }
}

void lw__quantize_row_tq2_0_ref(const float *x, void *vy, int64_t k) {
    lw__block_tq2_0 *y = vy;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < LW_QK_K; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lw__fp32_to_fp16(d);
        for (int j = 0; j < (int)sizeof y->qs; j += 32, x += 4 * 32) {
            for (int m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (int n = 0; n < 4; ++n) {
                    const int xi = lw__lroundf_int(x[m + n * 32] * id) + 1; /* -1, 0, 1 -> 0, 1, 2 */
                    q = (uint8_t)(q + ((xi & 3) << (2 * n)));
                }
                y[i].qs[j + m] = q;
            }
        }
    }
}

void lw__dequantize_row_tq2_0(const void *vx, float *y, int64_t k) {
    const lw__block_tq2_0 *x = vx;
    const int64_t nb = k / LW_QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = lw__fp16_to_fp32(x[i].d);
        for (int j = 0; j < (int)sizeof x->qs; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) {
                    const int8_t q = (int8_t)((x[i].qs[j + m] >> (l * 2)) & 3);
                    *y++ = (float)(q - 1) * d;
                }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * imatrix paths of the 32-element formats (ggml's quantize_row_q4_0_impl etc.): weights qw * sqrt(sigma2 +
 * x^2) with sigma2 the row's mean square.
 * ------------------------------------------------------------------------------------------------------- */

static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

static void quantize_row_q4_0_imat(const float *x, lw__block_q4_0 *y, int64_t n_per_row, const float *qw_row) {
    float weight[LW_QK4_0];
    int8_t L[LW_QK4_0];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / LW_QK4_0; ++ib) {
        const float *xb = x + LW_QK4_0 * ib, *qw = qw_row + LW_QK4_0 * ib;
        for (int j = 0; j < LW_QK4_0; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        const float d = make_qx_quants(LW_QK4_0, 8, xb, L, 1, weight);
        y[ib].d = lw__fp32_to_fp16(d);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void quantize_row_q4_1_imat(const float *x, lw__block_q4_1 *y, int64_t n_per_row, const float *qw_row) {
    float weight[LW_QK4_1];
    uint8_t L[LW_QK4_1], Laux[LW_QK4_1];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / LW_QK4_1; ++ib) {
        const float *xb = x + LW_QK4_1 * ib, *qw = qw_row + LW_QK4_1 * ib;
        for (int j = 0; j < LW_QK4_1; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        const float d = make_qkx_quants(LW_QK4_1, 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false, true);
        y[ib].d = lw__fp32_to_fp16(d);
        y[ib].m = lw__fp32_to_fp16(-min);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* Packs 32 5-bit quants into Q5_0/Q5_1's qs (low nibbles) and qh (5th bits). */
static void pack_q5(uint8_t *qs, uint8_t qh_out[4], const uint8_t *L) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = L[j], xi1 = L[j + 16];
        qs[j] = (uint8_t)((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << j;
        qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    for (int b = 0; b < 4; b++) qh_out[b] = (uint8_t)(qh >> (8 * b));
}

static void quantize_row_q5_0_imat(const float *x, lw__block_q5_0 *y, int64_t n_per_row, const float *qw_row) {
    float weight[LW_QK5_0];
    int8_t L[LW_QK5_0];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / LW_QK5_0; ++ib) {
        const float *xb = x + LW_QK5_0 * ib, *qw = qw_row + LW_QK5_0 * ib;
        for (int j = 0; j < LW_QK5_0; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        const float d = make_qx_quants(LW_QK5_0, 16, xb, L, 1, weight);
        y[ib].d = lw__fp32_to_fp16(d);
        pack_q5(y[ib].qs, y[ib].qh, (const uint8_t *)L);
    }
}

static void quantize_row_q5_1_imat(const float *x, lw__block_q5_1 *y, int64_t n_per_row, const float *qw_row) {
    float weight[LW_QK5_1];
    uint8_t L[LW_QK5_1], Laux[LW_QK5_1];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / LW_QK5_1; ++ib) {
        const float *xb = x + LW_QK5_1 * ib, *qw = qw_row + LW_QK5_1 * ib;
        for (int j = 0; j < LW_QK5_1; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        const float d = make_qkx_quants(LW_QK5_1, 31, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false, true);
        y[ib].d = lw__fp32_to_fp16(d);
        y[ib].m = lw__fp32_to_fp16(-min);
        pack_q5(y[ib].qs, y[ib].qh, L);
    }
}

static void quantize_row_q6_K_imat(const float *x, lw__block_q6_K *y, int64_t n_per_row, const float *qw) {
    for (int64_t i = 0; i < n_per_row / LW_QK_K; i++) q6_K_block(x + LW_QK_K * i, &y[i], qw + LW_QK_K * i);
}

/* ---------------------------------------------------------------------------------------------------------
 * Whole-row quantizers (ggml_quantize_chunk's path): without an imatrix all rows are one run of blocks
 * through the reference; with one, each row goes through the weighted search.
 * ------------------------------------------------------------------------------------------------------- */

#define QUANTIZE_WITH_IMAT(fmt, block_elems)                                                                 \
    size_t lw__quantize_##fmt(const float *src, void *dst, int64_t nrows, int64_t n_per_row,                \
                              const float *imatrix) {                                                        \
        const size_t row_size = (size_t)(n_per_row / (block_elems)) * sizeof(lw__block_##fmt);               \
        if (!imatrix) {                                                                                      \
            lw__quantize_row_##fmt##_ref(src, dst, nrows * n_per_row);                                      \
        } else {                                                                                             \
            char *qrow = dst;                                                                                \
            for (int64_t row = 0; row < nrows; ++row, src += n_per_row, qrow += row_size)                   \
                quantize_row_##fmt##_imat(src, (lw__block_##fmt *)(void *)qrow, n_per_row, imatrix);        \
        }                                                                                                    \
        return (size_t)nrows * row_size;                                                                     \
    }

QUANTIZE_WITH_IMAT(q4_0, LW_QK4_0)
QUANTIZE_WITH_IMAT(q4_1, LW_QK4_1)
QUANTIZE_WITH_IMAT(q5_0, LW_QK5_0)
QUANTIZE_WITH_IMAT(q5_1, LW_QK5_1)
QUANTIZE_WITH_IMAT(q2_K, LW_QK_K)
QUANTIZE_WITH_IMAT(q3_K, LW_QK_K)
QUANTIZE_WITH_IMAT(q4_K, LW_QK_K)
QUANTIZE_WITH_IMAT(q5_K, LW_QK_K)
QUANTIZE_WITH_IMAT(q6_K, LW_QK_K)

/* Q8_K and the ternary formats ignore the imatrix, as in ggml. */
#define QUANTIZE_WITH_REF(fmt)                                                                               \
    size_t lw__quantize_##fmt(const float *src, void *dst, int64_t nrows, int64_t n_per_row,                \
                              const float *imatrix) {                                                        \
        (void)imatrix;                                                                                       \
        lw__quantize_row_##fmt##_ref(src, dst, nrows * n_per_row);                                          \
        return (size_t)(nrows * (n_per_row / LW_QK_K)) * sizeof(lw__block_##fmt);                           \
    }

QUANTIZE_WITH_REF(q8_K)
QUANTIZE_WITH_REF(tq1_0)
QUANTIZE_WITH_REF(tq2_0)
