/* GPU sampling support (kernels-ops.h): top-k / argmax over the logits in two passes of topk.wgsl, and the
 * sampling pass 2 (SAMPLE=1) that draws the token on the GPU, with its scalar reference, so a decode step
 * reads back a token id whether greedy or sampled. */
#include "webgpu/kernels-ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

lw__gpu_topk_variant lw__gpu_topk_default(const lw_gpu_info *info) {
    uint32_t wg = 256;
    while (wg > 1 && (wg > info->max_compute_invocations_per_workgroup ||
                      (info->max_compute_workgroup_size_x && wg > info->max_compute_workgroup_size_x)))
        wg /= 2;
    lw__gpu_topk_variant v = {wg, 16};
    return v;
}

/* Pass 1 over logits (pairs false, optionally limited to a grammar's mask) or the merge pass 2 (pairs true).
 */
static lw_status topk_build(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                            const lw__gpu_topk_variant *v, bool pairs, bool mask, const lw_gpu_info *info,
                            lw_gpu_pipeline *out, char *err) {
    *out = 0;
    const char *what = mask ? "topk mask" : "topk";
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, true, what, err);
    if (st != LW_OK) return st;
    if (v->per < 1 || v->per > 32 || (uint64_t)v->wg_size * 16 > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "%s: %u inputs per invocation (1..32) of %u", what, v->per,
                          v->wg_size);
    char label[LW_GPU_CACHE_KEY], wg[16], per[16];
    snprintf(label, sizeof label, "topk %s wg%u per%u",
             pairs  ? "merge"
             : mask ? "logits masked"
                    : "logits",
             v->wg_size, v->per);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    snprintf(per, sizeof per, "%u", v->per);
    lw__wgsl_define defs[] = {
        {"PAIRS", pairs ? "1" : "0"}, {"MASK", mask ? "1" : "0"}, {"WG_SIZE", wg}, {"PER", per}};
    static const lw_gpu_binding_kind kinds[LW_GPU_TOPK_MASK_BINDINGS] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC, LW_GPU_BIND_STORAGE_READ};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "topk.wgsl", defs, sizeof defs / sizeof defs[0],
                                  kinds, mask ? LW_GPU_TOPK_MASK_BINDINGS : LW_GPU_TOPK_BINDINGS, out, err);
}

lw_status lw__gpu_topk_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_topk_variant *v, bool pairs, const lw_gpu_info *info,
                                lw_gpu_pipeline *out, char *err) {
    return topk_build(gpu, cache, alloc, v, pairs, false, info, out, err);
}

lw_status lw__gpu_topk_mask_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                     const lw_allocator *alloc, const lw__gpu_topk_variant *v,
                                     const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    return topk_build(gpu, cache, alloc, v, false, true, info, out, err);
}

lw_status lw__gpu_topk_plan(const lw_gpu_info *info, const lw__gpu_topk_variant *v, uint64_t n, uint64_t k,
                            uint64_t logits_offset, uint64_t scratch_offset, uint64_t out_offset,
                            lw__gpu_topk_plan_out *out, char *err) {
    if (v->wg_size == 0 || v->per < 1 || v->per > 32)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "topk: bad variant");
    if (n == 0 || k == 0 || k > n || k > LW_GPU_TOPK_MAX)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "topk: k = %llu of %llu logits (1..%u)",
                          (unsigned long long)k, (unsigned long long)n, LW_GPU_TOPK_MAX);
    const uint64_t cap = (uint64_t)v->wg_size * v->per; /* inputs one workgroup holds */
    const uint64_t groups = (n + cap - 1) / cap;
    uint64_t pairs;
    if (!lw__mul_u64(groups, k, &pairs) || pairs > cap)
        return lw__errorf(
            err, LW_ERR_TOO_LARGE,
            "topk: %llu logits need %llu workgroups; their %llu candidates exceed one merge of %llu",
            (unsigned long long)n, (unsigned long long)groups, (unsigned long long)(groups * k),
            (unsigned long long)cap);
    if (n > UINT32_MAX || logits_offset > UINT32_MAX - n || scratch_offset > UINT32_MAX / 2 - pairs ||
        out_offset > UINT32_MAX / 2 - k)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "topk: offsets exceed 32-bit indices");
    memset(out, 0, sizeof *out);
    lw_status st = lw__gpu_ops_grid(info, groups, out->grid1, &out->pass1.groups_x, "topk", err);
    if (st != LW_OK) return st;
    out->pass1.n = (uint32_t)n;
    out->pass1.k = (uint32_t)k;
    out->pass1.in_offset = (uint32_t)logits_offset;
    out->pass1.out_offset = (uint32_t)scratch_offset;
    out->pass1.chunk = (uint32_t)cap;
    out->pass1.groups = (uint32_t)groups;
    out->pass2 = (lw__gpu_topk_params){(uint32_t)pairs,
                                       (uint32_t)k,
                                       (uint32_t)scratch_offset,
                                       (uint32_t)out_offset,
                                       (uint32_t)pairs,
                                       1,
                                       1,
                                       0};
    out->grid2[0] = out->grid2[1] = out->grid2[2] = 1;
    out->scratch_pairs = (uint32_t)pairs;
    return LW_OK;
}

uint32_t lw__gpu_topk_max_k(const lw__gpu_topk_variant *v, uint64_t n) {
    if (v->wg_size == 0 || v->per < 1 || n == 0) return 0;
    const uint64_t cap = (uint64_t)v->wg_size * v->per, groups = (n + cap - 1) / cap;
    uint64_t k = cap / groups;
    if (k > LW_GPU_TOPK_MAX) k = LW_GPU_TOPK_MAX;
    if (k > n) k = n;
    return (uint32_t)k;
}

/* ---------------------------------------------------------------------------------------------------------
 * Sampling pass (topk.wgsl SAMPLE=1)
 * ------------------------------------------------------------------------------------------------------- */

#define SAMPLE_WG_BYTES (LW_GPU_TOPK_MAX * 8u) /* the k winners kept in workgroup memory (cand_v, cand_i) */

lw__gpu_topk_variant lw__gpu_sample_variant(const lw__gpu_topk_variant *v, uint64_t pairs) {
    lw__gpu_topk_variant r = *v;
    const uint64_t per = v->per ? v->per : 1;
    uint32_t wg = 16;
    while (wg < v->wg_size && (uint64_t)wg * per < pairs) wg *= 2;
    r.wg_size = wg < v->wg_size ? wg : v->wg_size;
    return r;
}

lw_status lw__gpu_sample_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                  const lw__gpu_topk_variant *v, const lw_gpu_info *info,
                                  lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, true, "sample", err);
    if (st != LW_OK) return st;
    if (v->per < 1 || v->per > 32 ||
        (uint64_t)v->wg_size * 16 + SAMPLE_WG_BYTES > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "sample: %u inputs per invocation (1..32) of %u", v->per,
                          v->wg_size);
    char label[LW_GPU_CACHE_KEY], wg[16], per[16];
    snprintf(label, sizeof label, "topk sample wg%u per%u", v->wg_size, v->per);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    snprintf(per, sizeof per, "%u", v->per);
    lw__wgsl_define defs[] = {{"PAIRS", "1"}, {"SAMPLE", "1"}, {"WG_SIZE", wg}, {"PER", per}};
    static const lw_gpu_binding_kind kinds[LW_GPU_TOPK_BINDINGS] = {LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,
                                                                    LW_GPU_BIND_UNIFORM_DYNAMIC};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "topk.wgsl", defs, sizeof defs / sizeof defs[0],
                                  kinds, LW_GPU_TOPK_BINDINGS, out, err);
}

lw_status lw__gpu_sample_setup(const lw__gpu_topk_params *pass2, const lw_sampler_params *sp,
                               lw__gpu_sample_params *p, char *err) {
    if (isnan(sp->temp) || isnan(sp->top_p) || isnan(sp->min_p))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "sample: NaN parameter");
    if (sp->penalty_last_n > 0 &&
        (sp->penalty_repeat != 1.0f || sp->penalty_freq != 0.0f || sp->penalty_present != 0.0f))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "sample: penalties are not applied on the GPU");
    memset(p, 0, sizeof *p);
    p->topk = *pass2;
    p->flags = 0;
    if (!(sp->temp > 0.0f)) {
        p->flags |= LW_GPU_SAMPLE_GREEDY;
        p->inv_temp = 1.0f;
    } else {
        /* 1/T within [1e-30, 3e38]: a temperature so small that 1/T overflows is greedy in effect, and an
         * infinite one stays > 0 so that -inf logits keep weight 0 (-inf * 0 would be NaN) */
        const float it = 1.0f / sp->temp;
        p->inv_temp = !isfinite(it) ? 3.0e38f : it < 1e-30f ? 1e-30f : it;
    }
    p->top_p = sp->top_p;
    if (sp->top_p < 1.0f) p->flags |= LW_GPU_SAMPLE_TOP_P;
    if (sp->min_p > 0.0f) {
        p->flags |= LW_GPU_SAMPLE_MIN_P;
        p->min_p_log = logf(sp->min_p); /* the CPU sampler's cut: c[0].logit + logf(min_p) */
    }
    return LW_OK;
}

float lw__gpu_sample_u(double u) {
    if (!(u > 0.0)) return 0.0f;
    if (u >= 1.0) return 16777215.0f / 16777216.0f;
    return (float)(floor(u * 16777216.0) / 16777216.0);
}

/* Whether (va, ia) comes before (vb, ib): larger value, then lower id (NaN never). */
static bool before_pair(float va, uint32_t ia, float vb, uint32_t ib) {
    return va > vb || (va == vb && ia < ib);
}

/* The kernel's weight(): exp((v_r - v_0) * s), exactly 1 for a tie with the best. */
static float weight(const float *cv, uint32_t r, float s) {
    const float d = cv[r] - cv[0];
    if (d == 0.0f) return 1.0f;
    const float x = d * s;
    return expf(x);
}

void lw__gpu_sample_ref_topk(const uint32_t *ids, const float *values, uint32_t n, uint32_t k,
                             uint32_t *top_ids, float *top_values) {
    /* round r picks the best pair after round r - 1's in the order (ids are distinct, so the order is total
     * on the non-NaN pairs); (-inf, none) when none is left, as the tournament pads */
    float pv = INFINITY;
    uint32_t pi = 0;
    bool any = false;
    for (uint32_t r = 0; r < k; r++) {
        float bv = -INFINITY;
        uint32_t bi = 0xffffffffu;
        for (uint32_t j = 0; j < n; j++)
            if ((!any || before_pair(pv, pi, values[j], ids[j])) && before_pair(values[j], ids[j], bv, bi)) {
                bv = values[j];
                bi = ids[j];
            }
        top_values[r] = bv;
        top_ids[r] = bi;
        if (bi != 0xffffffffu) {
            pv = bv;
            pi = bi;
            any = true;
        }
    }
}

uint32_t lw__gpu_sample_ref_draw(const float *cv, uint32_t k, const lw__gpu_sample_params *p,
                                 double *margin) {
    if (margin) *margin = INFINITY;
    if ((p->flags & LW_GPU_SAMPLE_GREEDY) || k <= 1) return 0;
    uint32_t m = k;
    if (p->flags & LW_GPU_SAMPLE_TOP_P) {
        float total = 0.0f, cum = 0.0f;
        for (uint32_t r = 0; r < m; r++) total += weight(cv, r, 1.0f);
        const float target = p->top_p * total;
        for (uint32_t r = 0; r < k; r++) {
            cum += weight(cv, r, 1.0f);
            if (cum >= target) {
                m = r + 1;
                break;
            }
        }
    }
    if (p->flags & LW_GPU_SAMPLE_MIN_P) {
        const float cut = cv[0] + p->min_p_log;
        uint32_t keep = 1;
        while (keep < m && cv[keep] >= cut) keep++;
        m = keep;
    }
    float total = 0.0f, cum = 0.0f;
    for (uint32_t r = 0; r < m; r++) total += weight(cv, r, p->inv_temp);
    const float target = p->u * total;
    for (uint32_t r = 0; r < m; r++) {
        const float lo = cum;
        cum += weight(cv, r, p->inv_temp);
        if (target < cum) {
            if (margin && total > 0.0f) { /* the boundaries of r's interval (0 below the first is none) */
                const double a = r ? ((double)target - lo) / total : INFINITY,
                             b = ((double)cum - target) / total;
                *margin = a < b ? a : b;
            }
            return r;
        }
    }
    if (margin && total > 0.0f) *margin = ((double)target - cum) / total; /* the fallback: u * total >= sum */
    return m - 1;
}

uint32_t lw__gpu_sample_ref(const uint32_t *ids, const float *values, uint32_t n,
                            const lw__gpu_sample_params *p, uint32_t *id, double *margin) {
    float cv[LW_GPU_TOPK_MAX];
    uint32_t ci[LW_GPU_TOPK_MAX];
    const uint32_t k = p->topk.k < LW_GPU_TOPK_MAX ? p->topk.k : LW_GPU_TOPK_MAX;
    lw__gpu_sample_ref_topk(ids, values, n, k, ci, cv);
    const uint32_t r = lw__gpu_sample_ref_draw(cv, k, p, margin);
    if (id) *id = ci[r];
    return r;
}
