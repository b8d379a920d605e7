/* Grid-search quantizers of the IQ family, byte-exact with ggml v0.4.0's quantize_<fmt>
 * (ggml_quantize_chunk's path) and, where ggml has one, quantize_row_<fmt>_ref: IQ3_XXS, IQ3_S, IQ2_S and
 * IQ1_M work without an importance matrix (one is used when given); IQ2_XXS, IQ2_XS and IQ1_S require one, as
 * in ggml, and return 0 bytes without it. (IQ4_NL / IQ4_XS are in quant-iq.c.)
 *
 * How they work (ggml's method): each group of 4 magnitudes |x| (IQ3; 8 for IQ2) is rounded to odd levels
 * 2l + 1 (l in 0..7; 0..2 for IQ2) for a trial scale; the levels form a 12-bit (16-bit) key. If the key is a
 * grid point, its index is stored; if not, the best of the key's nearest grid points (by weighted squared
 * error) is used. 31 (IQ3_XXS) or 19 (IQ3_S, IQ2_S) trial scales are tried per sub-block of 32 (16 for IQ2_S)
 * and the weighted least-squares best is kept; the sub-block scales are then quantized to 4 bits against the
 * block's largest scale.
 *
 * The key -> grid map and the neighbour lists are derived from the grids in iq-grids.c within each quantize
 * call (lists lazily, see iq_tables) instead of living in process-wide state as in ggml. Their content and
 * order are ggml's: neighbours sorted by (squared distance, grid index), all points of the 2 (IQ3_XXS), 3
 * (IQ3_S) or 1 (IQ2_S) smallest distances. As in quant-iq.c, every float expression keeps ggml's operation
 * order. */
#include "core/core.h"
#include "quant/iq-grids.h"
#include "quant/quant-iq.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K       LW_QK_K
#define IQ3_KMAX_Q 8     /* levels per coordinate: 2l + 1, l in 0..7       */
#define IQ3XXS_EPS 1e-8f /* ggml GROUP_MAX_EPS_IQ3_XXS                     */

/* ---------------------------------------------------------------------------------------------------------
 * Search tables
 * ------------------------------------------------------------------------------------------------------- */

/* Key -> grid tables of one grid, built from its packed magnitudes. A grid point has dim coordinates (4 for
 * IQ3, 8 for IQ2) whose levels l (0..7 for IQ3, 0..2 for IQ2) are stored as 2l + 1; a key packs the levels,
 * bits bits each, coordinate 0 lowest. ggml computes the neighbour lists of all off-grid keys up front (tens
 * of milliseconds, more for IQ2); here a key's list is computed the first time the key occurs and kept for
 * the rest of the call, so quantizing one short row stays cheap. */
typedef struct {
    lw_allocator alloc;         /* libc's: the quantize entry points take no allocator                  */
    int dim;                    /* coordinates per grid point: 4 or 8                                  */
    int bits;                   /* key bits per coordinate: 3 or 2                                     */
    int ngrid;                  /* grid points: 256 (IQ3_XXS, IQ2_XXS), 512 (IQ3_S, IQ2_XS), 1024, 2048 */
    int nwant;                  /* neighbours = all points of the nwant smallest distances             */
    uint8_t pos[2048][8];       /* the odd levels 2l + 1 of each grid point                            */
    int *map;                   /* [1 << dim*bits] key -> grid index; -1: off-grid, list not made yet;
                                   -(off + 1): list at neighbours[off]                                 */
    uint16_t *neighbours;       /* lists: count n, then n grid indices                                 */
    size_t nn, cap;             /* entries used / allocated in neighbours                              */
    uint16_t scratch[1 + 2048]; /* a list that could not be stored (allocation failed)                 */
    int d2[2048];               /* squared distances of one key to every grid point                    */
} iq_tables;

/* Level of a byte of a grid: IQ3_XXS stores {4, 12, ..., 52, 62}, IQ3_S {1, 3, ..., 15}, the IQ2 grids
 * {8, 25, 43}, the IQ1 grid {-1, 0, +1}. */
static int grid_level(uint32_t type, unsigned byte) {
    switch (type) {
    case LW_TYPE_IQ3_S:
        return (int)(byte - 1) / 2;
    case LW_TYPE_IQ3_XXS:
        return byte == 62 ? 7 : (int)(byte - 4) / 8;
    case LW_TYPE_IQ1_S:
    case LW_TYPE_IQ1_M:
        return (int)(int8_t)byte + 1; /* -1, 0, +1 */
    default:
        return byte == 8 ? 0 : byte == 25 ? 1 : 2;
    }
}

static void iq_tables_free(iq_tables *t) {
    if (!t) return;
    lw__free(&t->alloc, t->map);
    lw__free(&t->alloc, t->neighbours);
    lw__free(&t->alloc, t);
}

/* Allocates and fills the tables of the grid of a format; NULL when allocation fails. The numbers of
 * neighbour distances (nwant) are ggml's: 3 for IQ3_S and IQ1, 1 for IQ2_S, 2 for the others. */
static iq_tables *iq_tables_new(uint32_t type) {
    const lw_allocator alloc = lw__allocator_or_default(NULL);
    iq_tables *t = lw__malloc(&alloc, sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->alloc = alloc;
    const bool iq3 = type == LW_TYPE_IQ3_XXS || type == LW_TYPE_IQ3_S;
    t->dim = iq3 ? 4 : 8;
    t->bits = iq3 ? 3 : 2;
    const bool iq1 = type == LW_TYPE_IQ1_S || type == LW_TYPE_IQ1_M;
    t->ngrid = type == LW_TYPE_IQ3_XXS || type == LW_TYPE_IQ2_XXS ? 256
               : type == LW_TYPE_IQ3_S || type == LW_TYPE_IQ2_XS  ? 512
               : iq1                                              ? 2048
                                                                  : 1024;
    t->nwant = type == LW_TYPE_IQ2_S ? 1 : type == LW_TYPE_IQ3_S || iq1 ? 3 : 2;
    const size_t nkeys = (size_t)1 << (t->dim * t->bits);
    t->map = lw__malloc(&alloc, sizeof(int) * nkeys);
    if (!t->map) {
        iq_tables_free(t);
        return NULL;
    }
    for (size_t i = 0; i < nkeys; ++i) t->map[i] = -1;
    for (int j = 0; j < t->ngrid; ++j) {
        const uint64_t e = type == LW_TYPE_IQ3_XXS   ? lw__iq3xxs_grid[j]
                           : type == LW_TYPE_IQ3_S   ? lw__iq3s_grid[j]
                           : type == LW_TYPE_IQ2_XXS ? lw__iq2xxs_grid[j]
                           : type == LW_TYPE_IQ2_XS  ? lw__iq2xs_grid[j]
                           : iq1                     ? lw__iq1s_grid[j]
                                                     : lw__iq2s_grid[j];
        int key = 0;
        for (int k = 0; k < t->dim; ++k) {
            const int l = grid_level(type, (unsigned)(e >> (8 * k)) & 0xff);
            t->pos[j][k] = (uint8_t)(2 * l + 1);
            key |= l << (t->bits * k);
        }
        t->map[key] = j;
    }
    return t;
}

/* The neighbour list of an off-grid key: grid points in order of (squared distance, index), all those at the
 * nwant smallest distinct distances (ggml's iq2xs_init_impl / iq3xs_init_impl make the same lists). */
static const uint16_t *iq_neighbours(iq_tables *t, int key) {
    if (t->map[key] < -1) return t->neighbours + (-t->map[key] - 1);
    int p[8];
    const int lmask = (1 << t->bits) - 1;
    for (int k = 0; k < t->dim; ++k) p[k] = 2 * ((key >> (t->bits * k)) & lmask) + 1;
    for (int j = 0; j < t->ngrid; ++j) {
        int s = 0;
        for (int k = 0; k < t->dim; ++k) s += (t->pos[j][k] - p[k]) * (t->pos[j][k] - p[k]);
        t->d2[j] = s;
    }
    /* the nwant smallest distinct distances, ascending */
    int v[3], nv = 0;
    for (int j = 0; j < t->ngrid; ++j) {
        const int x = t->d2[j];
        int i = 0;
        while (i < nv && v[i] < x) ++i;
        if ((i < nv && v[i] == x) || i >= t->nwant) continue;
        for (int m = nv < t->nwant ? nv : t->nwant - 1; m > i; --m) v[m] = v[m - 1];
        v[i] = x;
        if (nv < t->nwant) ++nv;
    }
    uint16_t n = 0;
    for (int m = 0; m < nv; ++m) {
        for (int j = 0; j < t->ngrid; ++j) {
            if (t->d2[j] == v[m]) t->scratch[1 + n++] = (uint16_t)j;
        }
    }
    t->scratch[0] = n;
    /* keep it for the next time the key occurs (if memory allows; the scratch copy serves this time) */
    const size_t need = t->nn + 1 + n;
    if (need > t->cap) {
        const size_t cap = need > 2 * t->cap ? need + 4096 : 2 * t->cap;
        uint16_t *nb = lw__realloc(&t->alloc, t->neighbours, sizeof(uint16_t) * cap);
        if (!nb) return t->scratch;
        t->neighbours = nb;
        t->cap = cap;
    }
    memcpy(t->neighbours + t->nn, t->scratch, sizeof(uint16_t) * (1 + (size_t)n));
    t->map[key] = -(int)(t->nn + 1);
    t->nn = need;
    return t->neighbours + need - 1 - n;
}

/* Among the neighbours of an off-grid key, the grid point nearest to xval / scale by weighted squared error
 * (first one on ties); writes its levels l to L and returns its index. */
static int iq_best_neighbour(const iq_tables *t, const uint16_t *nb, const float *xval, const float *weight,
                             float scale, int8_t *L) {
    const int n = nb[0];
    float best_d2 = FLT_MAX;
    int best = nb[1];
    for (int j = 1; j <= n; ++j) {
        const uint8_t *pg = t->pos[nb[j]];
        float d2 = 0;
        for (int i = 0; i < t->dim; ++i) {
            const float q = pg[i];
            const float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = nb[j];
        }
    }
    for (int i = 0; i < t->dim; ++i) L[i] = (int8_t)((t->pos[best][i] - 1) / 2);
    return best;
}

/* Key of the levels L of one grid group. */
static int iq_key(const iq_tables *t, const int8_t *L) {
    int u = 0;
    for (int i = 0; i < t->dim; ++i) u |= L[i] << (t->bits * i);
    return u;
}

/* A grid index for the levels L (the best neighbour's when off-grid, which then rewrites L). */
static int iq_lookup(iq_tables *t, int8_t *L, const float *xval, const float *waux, float scale,
                     bool *on_grid) {
    const int u = iq_key(t, L);
    int gi = t->map[u];
    *on_grid = gi >= 0;
    if (gi < 0) gi = iq_best_neighbour(t, iq_neighbours(t, u), xval, waux, scale, L);
    return gi;
}

/* Grid index of levels that are on the grid (always so after a sub-block search). */
static int iq_index(const iq_tables *t, const int8_t *L) {
    const int gi = t->map[iq_key(t, L)];
    return gi >= 0 ? gi : 0;
}

static inline int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Rounds one group of n values to the odd levels 2l+1 at inverse scale id (l clamped to 0..kmax-1) into L,
 * then snaps the group to the grid (iq_lookup, at scale); returns the grid index. Every IQ2/IQ3 search does
 * this. */
static int iq_round_group(iq_tables *t, float id, float scale, int n, int kmax, const float *xval,
                          const float *waux, int8_t *L, bool *on_grid) {
    for (int i = 0; i < n; ++i) {
        const int l = lw__nearest_int(0.5f * (id * xval[i] - 1));
        L[i] = (int8_t)clampi(l, 0, kmax - 1);
    }
    return iq_lookup(t, L, xval, waux, scale, on_grid);
}

/* Weighted least-squares sums of x against the levels 2L+1, in ggml's order (one pass, i ascending), so the
 * fitted scale sumqx / sumq2 keeps ggml's bits. */
static void iq_lsq(int n, const float *weight, const float *xval, const int8_t *L, float *sumqx,
                   float *sumq2) {
    float qx = 0, q2 = 0;
    for (int i = 0; i < n; ++i) {
        const float w = weight[i];
        const float q = (float)(2 * L[i] + 1);
        qx += w * xval[i] * q;
        q2 += w * q * q;
    }
    *sumqx = qx;
    *sumq2 = q2;
}

/* Magnitudes xval = |xb| and one sign byte per group of 8 (bit i: element i negative) for ngroups groups.
 * With parity (IQ2_XXS, IQ2_XS, IQ3_XXS store 7 sign bits and imply the 8th), a group with an odd number of
 * negatives gets its least important element (smallest weight * x^2) flipped: its xval turns negative, and
 * the stored byte is the 7 low bits. */
static void iq_signs(const float *xb, const float *weight, int ngroups, bool parity, float *xval,
                     uint8_t *block_signs) {
    for (int k = 0; k < ngroups; ++k) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            if (xb[8 * k + i] >= 0) {
                xval[8 * k + i] = xb[8 * k + i];
            } else {
                xval[8 * k + i] = -xb[8 * k + i];
                ++nflip;
                s |= (uint8_t)(1 << i);
            }
        }
        if (parity && nflip % 2) {
            int imin = 0;
            float min = weight[8 * k + imin] * xb[8 * k + imin] * xb[8 * k + imin];
            for (int i = 1; i < 8; ++i) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= (uint8_t)(1 << imin);
        }
        block_signs[k] = parity ? (uint8_t)(s & 127) : s;
    }
}

/* The scale < 0 branch ggml keeps "just in case" (cannot happen with xval >= 0): flip the stored signs. */
static void iq_flip_signs(uint8_t *block_signs, int ngroups, bool parity) {
    for (int k = 0; k < ngroups; ++k) {
        block_signs[k] = parity ? (uint8_t)(~block_signs[k] & 127) : (uint8_t)~block_signs[k];
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * One sub-block of 32: the shared search of both formats (ggml duplicates it with these differences:
 * IQ3_XXS has 7-bit sign groups with even parity, 31 trial scales, an epsilon test and re-rounds only the
 * off-grid groups at the end; IQ3_S has free sign bytes, 19 trials, a zero test and re-rounds every group).
 * Fills L (levels) and block_signs; returns the sub-block scale (0 for an all-tiny sub-block).
 * ------------------------------------------------------------------------------------------------------- */
static float iq3_subblock(iq_tables *t, bool xxs, const float *xb, const float *weight, int8_t *L,
                          uint8_t *block_signs, bool *skipped) {
    float xval[32], waux[32];
    int8_t Laux[32];
    bool is_on_grid[8], is_on_grid_aux[8];
    for (int i = 0; i < 32; ++i) waux[i] = sqrtf(weight[i]);
    iq_signs(xb, weight, 4, xxs, xval, block_signs);
    float max = xval[0];
    for (int i = 1; i < 32; ++i) max = max > xval[i] ? max : xval[i];
    memset(L, 0, 32);
    *skipped = false;
    if (xxs ? max < IQ3XXS_EPS : !max) {
        *skipped = true;
        return 0;
    }
    const int ntry = xxs ? 15 : 9;
    float best = 0;
    float scale = max / (2 * IQ3_KMAX_Q - 1);
    for (int k = 0; k < 8; ++k) is_on_grid[k] = xxs;
    for (int is = -ntry; is <= ntry; ++is) {
        const float id = (2 * IQ3_KMAX_Q - 1 + (float)is * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; ++k) {
            iq_round_group(t, id, this_scale, 4, IQ3_KMAX_Q, xval + 4 * k, waux + 4 * k, Laux + 4 * k,
                           &is_on_grid_aux[k]);
        }
        float sumqx, sumq2;
        iq_lsq(32, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
            memcpy(is_on_grid, is_on_grid_aux, sizeof is_on_grid);
        }
    }
    int n_not_ongrid = 0;
    for (int k = 0; k < 8; ++k) n_not_ongrid += !is_on_grid[k];
    if (n_not_ongrid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 8; ++k) {
            if (xxs && is_on_grid[k]) continue;
            int8_t Lk[4];
            bool on;
            const int gi = iq_round_group(t, id, scale, 4, IQ3_KMAX_Q, xval + 4 * k, waux + 4 * k, Lk, &on);
            for (int i = 0; i < 4; ++i) L[4 * k + i] = (int8_t)((t->pos[gi][i] - 1) / 2);
        }
        float sumqx, sumq2;
        iq_lsq(32, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        iq_flip_signs(block_signs, 4, xxs);
    }
    return scale;
}

/* Per-sub-block importance weights: imatrix * sqrt(sigma2 + x^2), or x^2 without one. */
static void iq3_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    if (qw) {
        for (int i = 0; i < 32; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < 32; ++i) weight[i] = xb[i] * xb[i];
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ3_XXS
 * ------------------------------------------------------------------------------------------------------- */
static void iq3_xxs_row(iq_tables *t, const float *x, lw__block_iq3_xxs *y, int64_t nbl, const float *qw) {
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        uint8_t q3[3 * QK_K / 8];
        uint32_t scales_and_signs[QK_K / 32];
        float scales[QK_K / 32];
        memset(q3, 0, sizeof q3);
        memset(scales_and_signs, 0, sizeof scales_and_signs);
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            float weight[32];
            int8_t L[32];
            uint8_t block_signs[4];
            bool skipped;
            iq3_weights(xbl + 32 * ib, qw ? qw + QK_K * ibl + 32 * ib : NULL, sigma2, weight);
            const float scale = iq3_subblock(t, true, xbl + 32 * ib, weight, L, block_signs, &skipped);
            if (skipped) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 8; ++k) q3[8 * ib + k] = (uint8_t)iq_index(t, L + 4 * k);
            scales_and_signs[ib] = block_signs[0] | (uint32_t)block_signs[1] << 7 |
                                   (uint32_t)block_signs[2] << 14 | (uint32_t)block_signs[3] << 21;
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        memset(&y[ibl], 0, sizeof y[ibl]); /* d = fp16(0) is all zero bits, as are ggml's skipped blocks */
        if (!max_scale) continue;
        const float d = max_scale / 31;
        const uint16_t dh = lw__fp32_to_fp16(d * 1.0125f); /* ggml's fudge factor */
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            int l = lw__nearest_int(0.5f * (id * scales[ib] - 1));
            l = clampi(l, 0, 15);
            scales_and_signs[ib] |= (uint32_t)l << 28;
        }
        memcpy(y[ibl].qs, q3, QK_K / 4);
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            for (int m = 0; m < 4; ++m)
                y[ibl].qs[QK_K / 4 + 4 * ib + m] = (uint8_t)(scales_and_signs[ib] >> (8 * m));
        }
        y[ibl].d = dh;
    }
}

size_t lw__quantize_iq3_xxs(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                            const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ3_XXS);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq3_xxs *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq3_xxs_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq3_xxs);
}

void lw__quantize_row_iq3_xxs_ref(const float *x, void *y, int64_t k) {
    lw__quantize_iq3_xxs(x, y, 1, k, NULL);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ3_S
 * ------------------------------------------------------------------------------------------------------- */
static void iq3_s_row(iq_tables *t, const float *x, lw__block_iq3_s *y, int64_t nbl, const float *qw) {
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        lw__block_iq3_s *b = &y[ibl];
        memset(b, 0, sizeof *b); /* also d = fp16(0) */
        /* ggml advances these two write positions only after a sub-block that was not skipped (all zero), so
         * the grid bytes and signs of later sub-blocks move up into a skipped one's place; qh is indexed by
         * sub-block. Reproduced as is: it is what ggml writes into files. */
        uint8_t *qs = b->qs;
        uint8_t *signs = b->signs;
        float scales[QK_K / 32];
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            float weight[32];
            int8_t L[32];
            uint8_t block_signs[4];
            bool skipped;
            iq3_weights(xbl + 32 * ib, qw ? qw + QK_K * ibl + 32 * ib : NULL, sigma2, weight);
            const float scale = iq3_subblock(t, false, xbl + 32 * ib, weight, L, block_signs, &skipped);
            if (skipped) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 8; ++k) {
                const int gi = iq_index(t, L + 4 * k);
                qs[k] = (uint8_t)(gi & 255);
                b->qh[ib] |= (uint8_t)((gi >> 8) << k);
            }
            qs += 8;
            memcpy(signs, block_signs, 4);
            signs += 4;
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        b->d = lw__fp32_to_fp16(d * 1.033f); /* ggml's fudge factor */
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ib += 2) {
            const int l1 = clampi(lw__nearest_int(0.5f * (id * scales[ib + 0] - 1)), 0, 15);
            const int l2 = clampi(lw__nearest_int(0.5f * (id * scales[ib + 1] - 1)), 0, 15);
            b->scales[ib / 2] = (uint8_t)(l1 | (l2 << 4));
        }
    }
}

size_t lw__quantize_iq3_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ3_S);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq3_s *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq3_s_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq3_s);
}

void lw__quantize_row_iq3_s_ref(const float *x, void *y, int64_t k) {
    lw__quantize_iq3_s(x, y, 1, k, NULL);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ2_S: sub-blocks of 16 (two groups of 8 on the 1024-point grid, levels 0..2, free sign bytes), 19 trial
 * scales, nearest neighbour only (nwant = 1), 4-bit sub-block scales against d = max / 31 * 0.9875.
 * ------------------------------------------------------------------------------------------------------- */
#define IQ2_KMAX_Q 3     /* levels per coordinate: 2l + 1, l in 0..2 */
#define IQ2S_EPS   1e-8f /* ggml GROUP_MAX_EPS_IQ2_S                 */

/* One sub-block of 16 of IQ2_S (free sign bytes) or IQ2_XS (7 sign bits + parity): fills L and block_signs,
 * returns the scale (skipped: all below eps). */
static float iq2_subblock16(iq_tables *t, bool parity, float eps, const float *xb, const float *weight,
                            int8_t *L, uint8_t *block_signs, bool *skipped) {
    float xval[16], waux[16];
    int8_t Laux[16];
    bool is_on_grid[2], is_on_grid_aux[2];
    for (int i = 0; i < 16; ++i) waux[i] = sqrtf(weight[i]);
    iq_signs(xb, weight, 2, parity, xval, block_signs);
    float max = xval[0];
    for (int i = 1; i < 16; ++i) max = max > xval[i] ? max : xval[i];
    memset(L, 0, 16);
    *skipped = max < eps;
    if (*skipped) return 0;
    float best = 0;
    float scale = max / (2 * IQ2_KMAX_Q - 1);
    is_on_grid[0] = is_on_grid[1] = true;
    for (int is = -9; is <= 9; ++is) {
        const float id = (2 * IQ2_KMAX_Q - 1 + (float)is * 0.1f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 2; ++k) {
            iq_round_group(t, id, this_scale, 8, IQ2_KMAX_Q, xval + 8 * k, waux + 8 * k, Laux + 8 * k,
                           &is_on_grid_aux[k]);
        }
        float sumqx, sumq2;
        iq_lsq(16, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 16);
            is_on_grid[0] = is_on_grid_aux[0];
            is_on_grid[1] = is_on_grid_aux[1];
        }
    }
    if ((!is_on_grid[0] || !is_on_grid[1]) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; ++k) {
            if (is_on_grid[k]) continue;
            bool on;
            iq_round_group(t, id, scale, 8, IQ2_KMAX_Q, xval + 8 * k, waux + 8 * k, L + 8 * k, &on);
        }
        float sumqx, sumq2;
        iq_lsq(16, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        iq_flip_signs(block_signs, 2, parity);
    }
    return scale;
}

static void iq2_s_row(iq_tables *t, const float *x, lw__block_iq2_s *y, int64_t nbl, const float *qw) {
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        lw__block_iq2_s *b = &y[ibl];
        memset(b, 0, sizeof *b); /* also d = fp16(0) */
        float scales[QK_K / 16];
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float *xb = xbl + 16 * ib;
            float weight[16];
            if (qw) {
                const float *q = qw + QK_K * ibl + 16 * ib;
                for (int i = 0; i < 16; ++i) weight[i] = q[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            } else {
                for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
            }
            int8_t L[16];
            uint8_t block_signs[2];
            bool skipped;
            const float scale = iq2_subblock16(t, false, IQ2S_EPS, xb, weight, L, block_signs, &skipped);
            if (skipped) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; ++k) {
                const int gi = iq_index(t, L + 8 * k);
                const int i8 = 2 * ib + k;
                b->qs[i8] = (uint8_t)(gi & 255);
                b->qh[i8 / 4] |= (uint8_t)((gi >> 8) << (2 * (i8 % 4)));
                b->qs[QK_K / 8 + i8] = block_signs[k];
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        b->d = lw__fp32_to_fp16(d * 0.9875f); /* ggml's fudge factor */
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const int l = clampi(lw__nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
            if (ib % 2 == 0)
                b->scales[ib / 2] = (uint8_t)l;
            else
                b->scales[ib / 2] |= (uint8_t)(l << 4);
        }
    }
}

size_t lw__quantize_iq2_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ2_S);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq2_s *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq2_s_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq2_s);
}

void lw__quantize_row_iq2_s_ref(const float *x, void *y, int64_t k) {
    lw__quantize_iq2_s(x, y, 1, k, NULL);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ2_XS (ggml requires an importance matrix): IQ2_S's search with 7-bit signs + parity, the 512-point grid,
 * sigma2 without the factor 2, and no fudge factor on d.
 * ------------------------------------------------------------------------------------------------------- */
#define IQ2_EPS 1e-15f /* ggml GROUP_MAX_EPS */

static void iq2_xs_row(iq_tables *t, const float *x, lw__block_iq2_xs *y, int64_t nbl, const float *qw) {
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        lw__block_iq2_xs *b = &y[ibl];
        memset(b, 0, sizeof *b); /* also d = fp16(0) */
        uint16_t q2[QK_K / 8];
        memset(q2, 0, sizeof q2);
        float scales[QK_K / 16];
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float *xb = xbl + 16 * ib;
            const float *q = qw + QK_K * ibl + 16 * ib;
            float weight[16];
            for (int i = 0; i < 16; ++i) weight[i] = q[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            int8_t L[16];
            uint8_t block_signs[2];
            bool skipped;
            const float scale = iq2_subblock16(t, true, IQ2_EPS, xb, weight, L, block_signs, &skipped);
            if (skipped) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; ++k)
                q2[2 * ib + k] = (uint16_t)(iq_index(t, L + 8 * k) | (block_signs[k] << 9));
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        b->d = lw__fp32_to_fp16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const int l = clampi(lw__nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
            if (ib % 2 == 0)
                b->scales[ib / 2] = (uint8_t)l;
            else
                b->scales[ib / 2] |= (uint8_t)(l << 4);
        }
        memcpy(b->qs, q2, sizeof q2);
    }
}

size_t lw__quantize_iq2_xs(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                           const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0 || !imatrix) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ2_XS);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq2_xs *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq2_xs_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq2_xs);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ2_XXS (ggml requires an importance matrix): sub-blocks of 32, the 256-point grid, a start scale from
 * make_qp_quants, 13 trial scales, then every group re-rounded against the best scale.
 * ------------------------------------------------------------------------------------------------------- */

/* One sub-block of 32 of IQ2_XXS: fills L and block_signs; returns the scale (skipped: scale 0). */
static float iq2_xxs_subblock(iq_tables *t, const float *xb, const float *weight, int8_t *L,
                              uint8_t *block_signs, bool *skipped) {
    float xval[32], waux[32];
    int8_t Laux[32];
    for (int i = 0; i < 32; ++i) waux[i] = sqrtf(weight[i]);
    iq_signs(xb, weight, 4, true, xval, block_signs);
    float max = xval[0];
    for (int i = 1; i < 32; ++i) max = max > xval[i] ? max : xval[i];
    *skipped = true;
    memset(L, 0, 32);
    if (max < IQ2_EPS) return 0;
    float scale = lw__make_qp_quants(32, IQ2_KMAX_Q + 1, xval, (uint8_t *)L, weight);
    const float eff_max = scale * IQ2_KMAX_Q;
    if (eff_max <= 0) {
        memset(L, 0, 32);
        return 0;
    }
    *skipped = false;
    float best = 0;
    for (int is = -6; is <= 6; ++is) {
        const float id = (2 * IQ2_KMAX_Q - 1 + (float)is * 0.1f) / eff_max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 4; ++k) {
            bool on;
            iq_round_group(t, id, this_scale, 8, IQ2_KMAX_Q, xval + 8 * k, waux + 8 * k, Laux + 8 * k, &on);
        }
        float sumqx, sumq2;
        iq_lsq(32, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
        }
    }
    if (scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 4; ++k) {
            bool on;
            iq_round_group(t, id, scale, 8, IQ2_KMAX_Q, xval + 8 * k, waux + 8 * k, L + 8 * k, &on);
        }
        float sumqx, sumq2;
        iq_lsq(32, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        iq_flip_signs(block_signs, 4, true);
    }
    return scale;
}

static void iq2_xxs_row(iq_tables *t, const float *x, lw__block_iq2_xxs *y, int64_t nbl, const float *qw) {
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        lw__block_iq2_xxs *b = &y[ibl];
        memset(b, 0, sizeof *b); /* also d = fp16(0) */
        uint32_t q2[QK_K / 16];
        memset(q2, 0, sizeof q2);
        float scales[QK_K / 32];
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float *xb = xbl + 32 * ib;
            const float *q = qw + QK_K * ibl + 32 * ib;
            float weight[32];
            for (int i = 0; i < 32; ++i) weight[i] = q[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            int8_t L[32];
            uint8_t block_signs[4];
            bool skipped;
            const float scale = iq2_xxs_subblock(t, xb, weight, L, block_signs, &skipped);
            if (skipped) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 4; ++k) {
                q2[2 * ib + 0] |= (uint32_t)iq_index(t, L + 8 * k) << (8 * k);
                q2[2 * ib + 1] |= (uint32_t)block_signs[k] << (7 * k);
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        b->d = lw__fp32_to_fp16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int l = clampi(lw__nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
            q2[2 * ib + 1] |= (uint32_t)l << 28;
        }
        memcpy(b->qs, q2, sizeof q2);
    }
}

size_t lw__quantize_iq2_xxs(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                            const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0 || !imatrix) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ2_XXS);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq2_xxs *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq2_xxs_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq2_xxs);
}

/* =========================================================================================================
 * IQ1_S and IQ1_M: values (-1, 0, +1) + delta, delta = +-1/8 per sub-block (IQ1_S, 32 elements) or per group
 * of 8 (IQ1_M, sub-blocks of 16). The best split of the sorted values into the three levels is found
 * exhaustively for each delta sign, then off-grid groups move to the best neighbour (ggml's method).
 * ======================================================================================================= */

#define IQ1S_EPS 1e-12f /* ggml GROUP_MAX_EPS_IQ1_S */
#define IQ1M_EPS 1e-7f  /* ggml GROUP_MAX_EPS_IQ1_M */

/* Sorts the n values of xb ascending into idx (positions). Stable: equal values keep their order, as glibc's
 * qsort (a merge sort) leaves them in ggml on this platform; ggml's result for tied values follows its C
 * library's qsort, so a library with an unstable qsort may order ties differently. */
static void iq1_sort(const float *xb, int n, int *idx) {
    for (int j = 0; j < n; ++j) {
        int k = j;
        while (k > 0 && xb[idx[k - 1]] > xb[j]) {
            idx[k] = idx[k - 1];
            --k;
        }
        idx[k] = j;
    }
}

/* The neighbour of an off-grid IQ1 group nearest to xval / scale, values mapped through xg (the three levels
 * with this group's delta); writes its levels to L. ggml's iq1_find_best_neighbour2 (its fallback scan of the
 * whole grid, reached only when every distance is infinite or NaN, is replaced by the first neighbour). */
static int iq1_best_neighbour(const iq_tables *t, const uint16_t *nb, const float *xval, const float *weight,
                              float scale, const float *xg, int8_t *L) {
    const int n = nb[0];
    float best_score = FLT_MAX;
    int best = nb[1];
    for (int j = 1; j <= n; ++j) {
        const uint8_t *pg = t->pos[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            const float q = xg[(pg[i] - 1) / 2];
            const float w = weight[i];
            const float diff = scale * q - xval[i];
            d2 += w * diff * diff;
        }
        if (d2 < best_score) {
            best_score = d2;
            best = nb[j];
        }
    }
    for (int i = 0; i < 8; ++i) L[i] = (int8_t)((t->pos[best][i] - 1) / 2);
    return best;
}

/* Grid index for the levels of one group of 8, moving an off-grid group to its best neighbour. */
static int iq1_group_index(iq_tables *t, int8_t *L, const float *xb, const float *weight, float scale,
                           const float *xx, bool *all_on_grid) {
    const int u = iq_key(t, L);
    const int gi = t->map[u];
    if (gi >= 0) return gi;
    *all_on_grid = false;
    return iq1_best_neighbour(t, iq_neighbours(t, u), xb, weight, scale, xx, L);
}

static const float iq1s_xp[3] = {-1 + LW_IQ1S_DELTA, LW_IQ1S_DELTA, 1 + LW_IQ1S_DELTA};
static const float iq1s_xm[3] = {-1 - LW_IQ1S_DELTA, -LW_IQ1S_DELTA, 1 - LW_IQ1S_DELTA};

/* ---------------------------------------------------------------------------------------------------------
 * IQ1_S (ggml requires an importance matrix; without one the call is refused: 0 bytes)
 * ------------------------------------------------------------------------------------------------------- */
static void iq1_s_row(iq_tables *t, const float *x, lw__block_iq1_s *y, int64_t nbl, const float *qw) {
    enum { BS = 32 };
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        lw__block_iq1_s *b = &y[ibl];
        memset(b, 0, sizeof *b); /* also d = fp16(0) */
        float scales[QK_K / BS];
        int8_t shifts[QK_K / BS];
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / BS; ++ib) {
            const float *xb = xbl + BS * ib;
            const float *q = qw + QK_K * ibl + BS * ib;
            float weight[BS];
            for (int i = 0; i < BS; ++i) weight[i] = q[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            float max = fabsf(xb[0]);
            for (int i = 1; i < BS; ++i) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
            scales[ib] = 0;
            shifts[ib] = 1;
            if (max < IQ1S_EPS) continue;
            /* prefix sums over the values in ascending order: every split into the three levels is then O(1)
             */
            int idx[BS];
            iq1_sort(xb, BS, idx);
            float sumx[BS + 1], sumw[BS + 1];
            sumx[0] = sumw[0] = 0;
            for (int j = 0; j < BS; ++j) {
                const int i = idx[j];
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            float best_score = -FLT_MAX, scale = max;
            int besti1 = -1, besti2 = -1, best_shift = 0;
            for (int i1 = 0; i1 <= BS; ++i1) {
                for (int i2 = i1; i2 <= BS; ++i2) {
                    for (int sgn = 0; sgn < 2; ++sgn) {
                        const float *xx = sgn == 0 ? iq1s_xp : iq1s_xm;
                        const float sumqx = (sumx[i1] - sumx[0]) * xx[0] + (sumx[i2] - sumx[i1]) * xx[1] +
                                            (sumx[BS] - sumx[i2]) * xx[2];
                        const float sumq2 = (sumw[i1] - sumw[0]) * xx[0] * xx[0] +
                                            (sumw[i2] - sumw[i1]) * xx[1] * xx[1] +
                                            (sumw[BS] - sumw[i2]) * xx[2] * xx[2];
                        if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                            scale = sumqx / sumq2;
                            best_score = scale * sumqx;
                            besti1 = i1;
                            besti2 = i2;
                            best_shift = sgn == 0 ? 1 : -1;
                        }
                    }
                }
            }
            if (besti1 < 0 || besti2 < 0 || best_shift == 0) continue;
            int8_t L[BS];
            for (int j = 0; j < BS; ++j) L[idx[j]] = (int8_t)(j < besti1 ? 0 : j < besti2 ? 1 : 2);
            if (scale < 0) {
                for (int j = 0; j < BS; ++j) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                best_shift = -best_shift;
            }
            bool all_on_grid = true;
            const float *xx = best_shift == 1 ? iq1s_xp : iq1s_xm;
            int index[BS / 8];
            for (int k = 0; k < BS / 8; ++k) {
                index[k] = iq1_group_index(t, L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx, &all_on_grid);
            }
            if (!all_on_grid) {
                float sumqx = 0, sumq2 = 0;
                for (int k = 0; k < BS / 8; ++k) {
                    const uint8_t *pg = t->pos[index[k]];
                    for (int j = 0; j < 8; ++j) {
                        const float w = weight[8 * k + j];
                        const float qv = xx[(pg[j] - 1) / 2];
                        sumqx += w * qv * xb[8 * k + j];
                        sumq2 += w * qv * qv;
                    }
                }
                if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
            }
            unsigned h = 0;
            for (int k = 0; k < BS / 8; ++k) {
                b->qs[(BS / 8) * ib + k] = (uint8_t)(index[k] & 255);
                h |= (unsigned)(index[k] >> 8) << (3 * k);
            }
            b->qh[ib] = (uint16_t)h;
            scales[ib] = scale;
            shifts[ib] = (int8_t)best_shift;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 15;
        b->d = lw__fp32_to_fp16(d * 1.125f); /* ggml's fudge factor */
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / BS; ++ib) {
            int l = clampi(lw__nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
            if (shifts[ib] == -1) l |= 8;
            b->qh[ib] = (uint16_t)(b->qh[ib] | (l << 12));
        }
    }
}

size_t lw__quantize_iq1_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0 || !imatrix) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ1_S);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq1_s *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq1_s_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq1_s);
}

/* ---------------------------------------------------------------------------------------------------------
 * IQ1_M: sub-blocks of 16, a delta sign per group of 8 (4 combinations per sub-block: k = 2 * (second group
 * negative) + (first group negative)... in ggml's numbering 0: +,+  1: +,-  2: -,+  3: -,-), 3-bit scales,
 * and the fp16 super-block scale refitted over all sub-blocks at the end.
 * ------------------------------------------------------------------------------------------------------- */

/* The delta table of group g (0, 1) of a sub-block with sign combination k. */
static const float *iq1m_xx(int k, int g) {
    if (g == 0) return k < 2 ? iq1s_xp : iq1s_xm;
    return k % 2 == 0 ? iq1s_xp : iq1s_xm;
}

static void iq1m_weights(const float *xb, const float *q, float sigma2, float *weight) {
    if (q) {
        for (int i = 0; i < 16; ++i) weight[i] = q[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < 16; ++i) weight[i] = xb[i] * xb[i];
    }
}

static void iq1_m_row(iq_tables *t, const float *x, lw__block_iq1_m *y, int64_t nbl, const float *qw) {
    enum { BS = 16 };
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    for (int64_t ibl = 0; ibl < nbl; ++ibl) {
        lw__block_iq1_m *b = &y[ibl];
        memset(b, 0, sizeof *b);
        float scales[QK_K / BS];
        int8_t shifts[QK_K / BS];
        float max_scale = 0;
        const float *xbl = x + QK_K * ibl;
        float sumx2 = 0;
        for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int ib = 0; ib < QK_K / BS; ++ib) {
            const float *xb = xbl + BS * ib;
            float weight[BS];
            iq1m_weights(xb, qw ? qw + QK_K * ibl + BS * ib : NULL, sigma2, weight);
            float max = fabsf(xb[0]);
            for (int i = 1; i < BS; ++i) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
            scales[ib] = 0;
            shifts[ib] = 0;
            if (max < IQ1M_EPS) continue;
            int idx[BS];
            iq1_sort(xb, BS, idx);
            float best_score = -FLT_MAX, scale = max;
            int besti1 = -1, besti2 = -1, best_k = -1;
            for (int i1 = 0; i1 <= BS; ++i1) {
                for (int i2 = i1; i2 <= BS; ++i2) {
                    /* the four delta-sign combinations, each summed in ascending order of the values */
                    float sumqx[4] = {0, 0, 0, 0}, sumq2[4] = {0, 0, 0, 0};
                    for (int j = 0; j < BS; ++j) {
                        const int i = idx[j];
                        const int m = j < i1 ? 0 : j < i2 ? 1 : 2;
                        for (int k = 0; k < 4; ++k) {
                            const float v = iq1m_xx(k, i < BS / 2 ? 0 : 1)[m];
                            sumqx[k] += weight[i] * v * xb[i];
                            sumq2[k] += weight[i] * v * v;
                        }
                    }
                    for (int k = 0; k < 4; ++k) {
                        if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            besti1 = i1;
                            besti2 = i2;
                            best_k = k;
                        }
                    }
                }
            }
            if (besti1 < 0 || besti2 < 0 || best_k < 0) continue;
            int8_t L[BS];
            for (int j = 0; j < BS; ++j) L[idx[j]] = (int8_t)(j < besti1 ? 0 : j < besti2 ? 1 : 2);
            if (scale < 0) {
                for (int j = 0; j < BS; ++j) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                best_k = 3 - best_k;
            }
            bool all_on_grid = true;
            int index[2];
            for (int k = 0; k < 2; ++k) {
                index[k] = iq1_group_index(t, L + 8 * k, xb + 8 * k, weight + 8 * k, scale,
                                           iq1m_xx(best_k, k), &all_on_grid);
            }
            if (!all_on_grid) {
                float sumqx_f = 0, sumq2_f = 0;
                for (int k = 0; k < 2; ++k) {
                    const float *xx = iq1m_xx(best_k, k);
                    const uint8_t *pg = t->pos[index[k]];
                    for (int j = 0; j < 8; ++j) {
                        const float w = weight[8 * k + j];
                        const float qv = xx[(pg[j] - 1) / 2];
                        sumqx_f += w * qv * xb[8 * k + j];
                        sumq2_f += w * qv * qv;
                    }
                }
                if (sumqx_f > 0 && sumq2_f > 0) scale = sumqx_f / sumq2_f;
            }
            b->qs[2 * ib + 0] = (uint8_t)(index[0] & 255);
            b->qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
            b->qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
            scales[ib] = scale;
            shifts[ib] = (int8_t)best_k;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        /* 3-bit scales against max / 15, then d refitted by least squares over the whole block */
        uint16_t sc[4] = {0, 0, 0, 0};
        float d = max_scale / 15;
        const float id = 1 / d;
        float sumqx_f = 0, sumq2_f = 0;
        for (int ib = 0; ib < QK_K / BS; ++ib) {
            const int l = clampi(lw__nearest_int(0.5f * (id * scales[ib + 0] - 1)), 0, 7);
            sc[ib / 4] = (uint16_t)(sc[ib / 4] | (l << (3 * (ib % 4))));
            b->qh[ib] |= masks[shifts[ib]];
            const float *xb = xbl + BS * ib;
            float weight[BS];
            iq1m_weights(xb, qw ? qw + QK_K * ibl + BS * ib : NULL, sigma2, weight);
            for (int k = 0; k < 2; ++k) {
                const float *xx = iq1m_xx(shifts[ib], k);
                const unsigned gi = b->qs[2 * ib + k] + (((unsigned)b->qh[ib] << (8 - 4 * k)) & 0x700);
                const uint8_t *pg = t->pos[gi];
                for (int j = 0; j < 8; ++j) {
                    const float w = weight[8 * k + j];
                    const float qv = xx[(pg[j] - 1) / 2] * (float)(2 * l + 1);
                    sumqx_f += w * qv * xb[8 * k + j];
                    sumq2_f += w * qv * qv;
                }
            }
        }
        if (sumq2_f > 0) d = sumqx_f / sumq2_f;
        const uint16_t s = lw__fp32_to_fp16(d * 1.1125f); /* ggml's fudge factor */
        sc[0] = (uint16_t)(sc[0] | ((s & 0x000f) << 12));
        sc[1] = (uint16_t)(sc[1] | ((s & 0x00f0) << 8));
        sc[2] = (uint16_t)(sc[2] | ((s & 0x0f00) << 4));
        sc[3] = (uint16_t)(sc[3] | (s & 0xf000));
        for (int m = 0; m < 4; ++m) {
            b->scales[2 * m] = (uint8_t)sc[m];
            b->scales[2 * m + 1] = (uint8_t)(sc[m] >> 8);
        }
    }
}

size_t lw__quantize_iq1_m(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *imatrix) {
    if (nrows <= 0 || n_per_row <= 0) return 0;
    iq_tables *t = iq_tables_new(LW_TYPE_IQ1_M);
    if (!t) return 0;
    const int64_t nblock = n_per_row / QK_K;
    lw__block_iq1_m *y = dst;
    for (int64_t r = 0; r < nrows; ++r) iq1_m_row(t, src + r * n_per_row, y + r * nblock, nblock, imatrix);
    iq_tables_free(t);
    return (size_t)(nrows * nblock) * sizeof(lw__block_iq1_m);
}
