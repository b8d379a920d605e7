/* GPU sampling support (kernels-ops.h): top-k / argmax over the logits in two passes of topk.wgsl, so a
 * decode step reads back a token id (greedy) or k candidates for the CPU sampler. */
#include "webgpu/kernels-ops.h"

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

lw_status lw__gpu_topk_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_topk_variant *v, bool pairs, const lw_gpu_info *info,
                                lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, true, "topk", err);
    if (st != LW_OK) return st;
    if (v->per < 1 || v->per > 32 ||
        (uint64_t)v->wg_size * 16 > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "topk: %u inputs per invocation (1..32) of %u", v->per, v->wg_size);
    char label[LW_GPU_CACHE_KEY], wg[16], per[16];
    snprintf(label, sizeof label, "topk %s wg%u per%u", pairs ? "merge" : "logits", v->wg_size, v->per);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    snprintf(per, sizeof per, "%u", v->per);
    lw__wgsl_define defs[] = {{"PAIRS", pairs ? "1" : "0"}, {"WG_SIZE", wg}, {"PER", per}};
    static const lw_gpu_binding_kind kinds[LW_GPU_TOPK_BINDINGS] = {LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,
                                                                    LW_GPU_BIND_UNIFORM_DYNAMIC};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "topk.wgsl", defs, sizeof defs / sizeof defs[0], kinds,
                                  LW_GPU_TOPK_BINDINGS, out, err);
}

lw_status lw__gpu_topk_plan(const lw_gpu_info *info, const lw__gpu_topk_variant *v, uint64_t n, uint64_t k,
                            uint64_t logits_offset, uint64_t scratch_offset, uint64_t out_offset,
                            lw__gpu_topk_plan_out *out, char *err) {
    if (v->wg_size == 0 || v->per < 1 || v->per > 32)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "topk: bad variant");
    if (n == 0 || k == 0 || k > n || k > LW_GPU_TOPK_MAX)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "topk: k = %llu of %llu logits (1..%u)", (unsigned long long)k,
                          (unsigned long long)n, LW_GPU_TOPK_MAX);
    const uint64_t cap = (uint64_t)v->wg_size * v->per; /* inputs one workgroup holds */
    const uint64_t groups = (n + cap - 1) / cap;
    uint64_t pairs;
    if (!lw__mul_u64(groups, k, &pairs) || pairs > cap)
        return lw__errorf(err, LW_ERR_TOO_LARGE,
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
    out->pass2 = (lw__gpu_topk_params){(uint32_t)pairs, (uint32_t)k, (uint32_t)scratch_offset, (uint32_t)out_offset,
                                       (uint32_t)pairs, 1, 1, 0};
    out->grid2[0] = out->grid2[1] = out->grid2[2] = 1;
    out->scratch_pairs = (uint32_t)pairs;
    return LW_OK;
}
