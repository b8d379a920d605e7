/* Mixture-of-experts kernels (see engine-moe.h), following ggml-cpu v0.4.0 as llama.cpp's build_moe_ffn uses
 * it for softmax-routed models (qwen3moe):
 *  - TOPK is ggml_argsort_top_k: a descending sort of the router's probabilities, the first k kept (ties:
 *    the lower index first, what std::sort does for the short rows where ties could matter);
 *  - MOE_WEIGHTS is get_rows of the probabilities, then sum_rows (a double sum rounded to f32), clamp at
 *    2^-14 and a true f32 division, then an optional scale;
 *  - MUL_MAT_ID is ggml_compute_forward_mul_mat_id: every (token, slot) activation row converted once to the
 *    weight's vec_dot_type, each expert's rows multiplied with vec_dot (not tinyBLAS: ggml hands expert
 *    products to it only for 2-D weights), or, for weights llama.cpp repacks (Q4_0, Q4_K, Q2_K, IQ4_NL,
 *    MXFP4 with rows % 8 == 0), with the repacked gemv on every row, whatever the step;
 *  - MOE_SUM is ggml_mul by the weights (each product rounded) and ggml_add of the slots in order.
 * For prompts the (token, slot) rows are grouped by expert, so each expert's weight rows meet all of its
 * tokens in one tiled product (quant-gemm.h kernels give the same bits as the row-by-row dots); one-token
 * steps take k experts' rows once each. Nothing here allocates: the grouping, the converted rows and the
 * grouped outputs live in the context's shared scratch (lw__cpu_moe_scratch sizes it). */
#include "cpu/engine-moe.h"
#include "rows/rows.h"

#include <math.h>
#include <string.h>

/* ggml's products and sums round separately (see engine-ops.c): no contraction into FMAs */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

static float *row_f32(const lw__tensor *t, int64_t r) {
    return (float *)lw__cpu_row(t, r);
}

/* ---------------------------------------------------------------------------------------------------------
 * Routing
 * ------------------------------------------------------------------------------------------------------- */

void lw__cpu_op_topk(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *x = &ex->g->t[nd->src[0]];
    const int64_t n = x->ne0, k = nd->ip[0];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *p = row_f32(x, r);
        int32_t *id = lw__cpu_row(dst, r);
        uint64_t taken[LW_MOE_MAX_EXPERTS / 64] = {0};
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t i = 0; i < n; i++) {
                if (taken[i / 64] >> (i % 64) & 1) continue;
                if (best < 0 || p[i] > p[best]) best = i; /* strict: the lower index wins a tie */
            }
            taken[best / 64] |= 1ull << (best % 64);
            id[j] = (int32_t)best;
        }
    }
}

void lw__cpu_op_moe_weights(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *probs = &ex->g->t[nd->src[0]], *ids = &ex->g->t[nd->src[1]];
    const int64_t k = dst->ne0;
    const float scale = nd->fp[0];
    int64_t r0, r1;
    lw__cpu_split(lw__cpu_rows(ex, dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *p = row_f32(probs, probs->kind == LW_T_WEIGHT ? 0 : r); /* a weight: per-expert values */
        const int32_t *id = lw__cpu_row(ids, r);
        float *w = row_f32(dst, r);
        for (int64_t j = 0; j < k; j++) w[j] = p[id[j]];
        if (nd->ip[0]) {
            double s = 0.0; /* ggml_vec_sum_f32: a double sum, rounded once */
            for (int64_t j = 0; j < k; j++) s += (double)w[j];
            float sum = (float)s;
            sum = sum > 6.103515625e-5f ? sum : 6.103515625e-5f; /* ggml_clamp(sum, 2^-14, INFINITY) */
            for (int64_t j = 0; j < k; j++) w[j] = w[j] / sum;
        }
        if (scale != 0.0f && scale != 1.0f)
            for (int64_t j = 0; j < k; j++) w[j] = w[j] * scale;
    }
}

void lw__cpu_op_moe_sum(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__tensor *dst = &ex->g->t[nd->dst], *e = &ex->g->t[nd->src[0]], *wt = &ex->g->t[nd->src[1]];
    const int64_t k = nd->ip[0], n = dst->ne0, C = 256, nc = (n + C - 1) / C;
    int64_t i0, i1;
    lw__cpu_split(lw__cpu_rows(ex, dst) * nc, ith, nth, &i0, &i1); /* (row, 256 columns) items: decode too */
    for (int64_t it = i0; it < i1; it++) {
        const int64_t r = it / nc, c0 = it % nc * C, c1 = c0 + C < n ? c0 + C : n;
        const float *x = row_f32(e, r), *w = row_f32(wt, r);
        float *y = row_f32(dst, r);
        for (int64_t c = c0; c < c1; c++) y[c] = x[c] * w[0];
        for (int64_t j = 1; j < k; j++)
            for (int64_t c = c0; c < c1; c++) y[c] = y[c] + x[j * n + c] * w[j];
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * MUL_MAT_ID
 * ------------------------------------------------------------------------------------------------------- */

/* Shapes of a MUL_MAT_ID node and where its parts lie in the shared scratch for a step of nt tokens (every
 * part grows with nt, so a step's layout fits in the largest step's). */
typedef struct moe_layout {
    int64_t n_exp;    /* experts in the weight                                         */
    int64_t m;        /* output rows per expert                                        */
    int64_t K;        /* elements per weight row                                       */
    int64_t k;        /* slots (experts used) per token                                */
    int64_t nx;       /* activation sub-rows per token: 1 (shared by all slots) or k    */
    size_t as;        /* bytes of one converted activation row                         */
    uint64_t counts;  /* int32[n_exp]: (token, slot) rows per expert                   */
    uint64_t offsets; /* int32[n_exp]: first grouped row of each expert                */
    uint64_t active;  /* int32[n_exp + 1]: the experts with rows, then their number    */
    uint64_t entries; /* int32[nt * k]: grouped row -> token * k + slot                 */
    uint64_t acts;    /* nt * k converted activation rows, grouped                     */
    uint64_t outs;    /* float[nt * k * m]: tiled products, grouped                    */
    uint64_t slots;   /* uint32[n_exp]: a round's row cache slots (row store)          */
    uint64_t bases;   /* const uint8_t *[n_exp]: each expert's weight rows (row store) */
    uint64_t total;   /* bytes                                                         */
} moe_layout;

static lw_status layout(const lw__graph *g, const lw__node *nd, int64_t nt, moe_layout *L) {
    if (nd->src[0] < 0 || nd->src[1] < 0 || nd->src[2] < 0 || nd->dst < 0) return LW_ERR_INVALID_ARG;
    const lw__tensor *w = &g->t[nd->src[0]], *x = &g->t[nd->src[1]], *ids = &g->t[nd->src[2]],
                     *dst = &g->t[nd->dst];
    const lw__cpu_mm *mm = lw__cpu_mm_get(w->type);
    if (!mm) return LW_ERR_UNSUPPORTED;
    L->n_exp = nd->ip[0], L->K = w->ne0, L->k = ids->ne0;
    if (L->n_exp <= 0 || L->n_exp > LW_MOE_MAX_EXPERTS || w->ne1 % L->n_exp || ids->type != LW_TYPE_I32 ||
        L->k <= 0 || L->k > L->n_exp || x->ne0 % L->K || w->kind != LW_T_WEIGHT)
        return LW_ERR_INVALID_ARG;
    L->m = w->ne1 / L->n_exp, L->nx = x->ne0 / L->K;
    if ((L->nx != 1 && L->nx != L->k) || dst->ne0 != L->k * L->m) return LW_ERR_INVALID_ARG;
    L->as = mm->from_float ? lw__cpu_row_size(mm->vec_dot_type, L->K) : (size_t)L->K * sizeof(float);
    uint64_t rows, a, o, top = 0;
    if (!lw__mul_u64((uint64_t)nt, (uint64_t)L->k, &rows) || !lw__mul_u64(rows, L->as, &a) ||
        !lw__mul_u64(rows * (uint64_t)L->m, sizeof(float), &o))
        return LW_ERR_OVERFLOW;
    const uint64_t ints = (uint64_t)L->n_exp * sizeof(int32_t);
    L->counts = top, top += ints;
    L->offsets = top, top += ints;
    L->active = top, top += ints + sizeof(int32_t);
    L->entries = top, top += rows * sizeof(int32_t);
    L->slots = top, top += ints;
    if (!lw__align_up_u64(top, sizeof(void *), &L->bases)) return LW_ERR_OVERFLOW;
    top = L->bases + (uint64_t)L->n_exp * sizeof(void *);
    if (!lw__align_up_u64(top, 64, &L->acts) || !lw__add_u64(L->acts, a, &top) ||
        !lw__align_up_u64(top, 64, &L->outs) || !lw__add_u64(L->outs, o, &L->total))
        return LW_ERR_OVERFLOW;
    return LW_OK;
}

/* The tiled kernel for a group of cnt (token, slot) rows of one expert, or NULL for row-by-row dots. */
static lw__quant_gemm_fn group_kernel(const lw__cpu_mm *mm, int64_t m, int64_t cnt) {
    if (cnt < LW_QGEMM_MIN_TOKENS) return NULL;
    return lw__cpu_mm_repacked(mm, m) ? mm->qgemm_repack_gemv : mm->qgemm;
}

lw_status lw__cpu_moe_scratch(const lw__graph *g, const lw__node *nd, int64_t max_tokens,
                              uint64_t *shared_bytes, uint64_t *thread_floats) {
    moe_layout L;
    lw_status st = layout(g, nd, max_tokens, &L);
    if (st != LW_OK) return st;
    const lw__cpu_mm *mm = lw__cpu_mm_get(g->t[nd->src[0]].type);
    *shared_bytes = L.total;
    *thread_floats = 0;
    if (group_kernel(mm, L.m, max_tokens)) {
        if (L.K > INT32_MAX || max_tokens > INT32_MAX) return LW_ERR_OVERFLOW;
        *thread_floats = (lw__quant_gemm_scratch(L.K, max_tokens) + sizeof(float) - 1) / sizeof(float);
    }
    return LW_OK;
}

void lw__cpu_op_mul_mat_id(const lw__exec *ex, const lw__node *nd, int ith, int nth) {
    const lw__graph *g = ex->g;
    const lw__tensor *dst = &g->t[nd->dst], *w = &g->t[nd->src[0]], *x = &g->t[nd->src[1]],
                     *ids = &g->t[nd->src[2]];
    const lw__cpu_mm *mm = lw__cpu_mm_get(w->type);
    const int64_t nt = lw__cpu_rows(ex, ids);
    moe_layout L;
    if (layout(g, nd, nt, &L) != LW_OK) return; /* checked when the context was made */
    uint8_t *sc = ex->scratch;
    int32_t *counts = (int32_t *)(sc + L.counts), *offsets = (int32_t *)(sc + L.offsets);
    int32_t *active = (int32_t *)(sc + L.active), *entries = (int32_t *)(sc + L.entries);
    uint8_t *acts = sc + L.acts;
    float *outs = (float *)(sc + L.outs);
    const int64_t k = L.k, m = L.m, K = L.K;

    /* 1. group the (token, slot) rows by expert, in token then slot order (ggml's matrix_rows) */
    if (ith == 0) {
        memset(counts, 0, (size_t)L.n_exp * sizeof(int32_t));
        for (int64_t t = 0; t < nt; t++) {
            const int32_t *id = lw__cpu_row(ids, t);
            for (int64_t j = 0; j < k; j++) counts[id[j]]++;
        }
        int32_t off = 0, n_active = 0;
        for (int64_t e = 0; e < L.n_exp; e++) {
            offsets[e] = off;
            off += counts[e];
            if (counts[e]) active[n_active++] = (int32_t)e;
        }
        active[L.n_exp] = n_active;
        for (int64_t t = 0; t < nt; t++) {
            const int32_t *id = lw__cpu_row(ids, t);
            for (int64_t j = 0; j < k; j++) entries[offsets[id[j]]++] = (int32_t)(t * k + j);
        }
        for (int64_t e = 0; e < L.n_exp; e++) offsets[e] -= counts[e]; /* back to each group's start */
    }
    lw__pool_barrier(ex->pool);

    /* 2. each grouped row's activation, converted to the weight's vec_dot_type */
    int64_t i0, i1;
    lw__cpu_split(nt * k, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t t = entries[i] / k, j = entries[i] % k;
        const float *src = row_f32(x, t) + (L.nx == 1 ? 0 : j) * K;
        if (mm->from_float)
            mm->from_float(src, acts + (size_t)i * L.as, K);
        else
            memcpy(acts + (size_t)i * L.as, src, (size_t)K * sizeof(float));
    }
    lw__pool_barrier(ex->pool);

    /* 3. panels of each active expert's rows, split over threads; consecutive panels of one expert run as
     *    one call (a thread's panels meet all of the expert's rows). With the row store serving w, the active
     *    experts go in rounds of at most its slots: thread 0 makes a round's experts resident while the
     *    others wait at the barrier (a miss is a positioned read of the row file: where a cold expert's time
     *    goes), then every thread multiplies from the slots; one round for a token's k experts. */
    const int64_t P = LW_QUANT_GEMM_ROWS, np = (m + P - 1) / P, n_active = active[L.n_exp];
    const size_t rb = w->row_bytes, eb = (size_t)m * rb;
    const int repacked = lw__cpu_mm_repacked(mm, m);
    float (*dot)(int64_t, const void *, const void *) = repacked ? mm->dot_repack : mm->dot;
    float *ts = ex->thread_scratch + (size_t)ith * ex->thread_floats;
    const uintptr_t wd = (uintptr_t)w->data, mk = (uintptr_t)ex->exp_marker; /* a marker, or the bytes */
    lw__rowcache *rc = ex->exp_caches && wd >= mk && wd < mk + ex->exp_n ? ex->exp_caches[wd - mk] : NULL;
    uint32_t *slots = (uint32_t *)(sc + L.slots);
    const uint8_t **bases = (const uint8_t **)(void *)(sc + L.bases);
    const int64_t per_round = rc ? (int64_t)lw__rowcache_n_slots(rc) : n_active;
    for (int64_t a0 = 0; a0 < n_active; a0 += per_round) {
        const int64_t na = n_active - a0 < per_round ? n_active - a0 : per_round;
        if (rc) {
            if (a0 > 0) lw__pool_barrier(ex->pool); /* the last round's slots are read no more */
            if (ith == 0) {
                lw_status st = lw__rowcache_lookup(rc, active + a0, (size_t)na, slots);
                if (st != LW_OK && *ex->rows_error == LW_OK)
                    *ex->rows_error =
                        lw__errorf(ex->rows_error_msg, st, "row store (experts): %s", lw__rowcache_error(rc));
                for (int64_t j = 0; st == LW_OK && j < na; j++)
                    bases[active[a0 + j]] = lw__rowcache_row(rc, slots[j]);
            }
            lw__pool_barrier(ex->pool);
            if (*ex->rows_error != LW_OK) return; /* every thread leaves here: the step fails */
        }
        int64_t p0, p1;
        lw__cpu_split(na * np, ith, nth, &p0, &p1);
        for (int64_t p = p0; p < p1;) {
            const int64_t a = a0 + p / np, e = active[a], pa = p / np;
            const int64_t q1 =
                (pa + 1) * np < p1 ? (pa + 1) * np : p1; /* this expert's panels in the share */
            const int64_t r0 = (p % np) * P, r1 = (q1 - pa * np) * P < m ? (q1 - pa * np) * P : m;
            const int64_t off = offsets[e], cnt = counts[e];
            const uint8_t *we = rc ? bases[e] : (const uint8_t *)w->data + (size_t)e * eb;
            lw__quant_gemm_fn qg = group_kernel(mm, m, cnt);
            if (qg) {
                qg(K, we + (size_t)r0 * rb, rb, r1 - r0, acts + (size_t)off * L.as, L.as, cnt,
                   outs + off * m + r0, (size_t)m, ts);
                for (int64_t i = off; i < off + cnt; i++) {
                    const int64_t t = entries[i] / k, j = entries[i] % k;
                    memcpy(row_f32(dst, t) + j * m + r0, outs + i * m + r0,
                           (size_t)(r1 - r0) * sizeof(float));
                }
            } else {
                for (int64_t r = r0; r < r1; r++) {
                    const void *wr = we + (size_t)r * rb;
                    for (int64_t i = off; i < off + cnt; i++) {
                        const int64_t t = entries[i] / k, j = entries[i] % k;
                        row_f32(dst, t)[j * m + r] = dot(K, wr, acts + (size_t)i * L.as);
                    }
                }
            }
            p = q1;
        }
    }
}
