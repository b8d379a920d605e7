/* Mat-vec with the RMS norm of x in its prologue (shaders/matvec-q8-norm.wgsl): variant, pipeline, one call's
 * plan. The runner uses it for one-token steps where a norm's only reader is such a mat-vec
 * (gpu-model-ops.c, lw__gm_plan_norm_mv). */
#include "webgpu/gpu-tune.h"
#include "webgpu/kernels.h"

#include <stdio.h>
#include <string.h>

/* Whether v's weights are a K format whose sub-blocks of 32 the shader takes (x rounded as Q8_K). */
static bool is_kq(uint32_t type) {
    return type == LW_TYPE_Q4_K || type == LW_TYPE_Q5_K;
}

/* Workgroup memory of the shader's arrays for v: x's quants (k bytes), the pairs' scales, the squares'
 * partials, two words per block, the rows' partials, the layout flag (, the GLU's rows and block words; the K
 * formats' two words per super-block). */
static uint64_t wg_bytes(const lw__gpu_matvec_norm_variant *v) {
    return (uint64_t)v->k + (uint64_t)v->k / 64 * 16 + (uint64_t)v->wg_size * 4 + (uint64_t)v->k / 32 * 8 +
           (uint64_t)v->wg_size * v->rows * 4 + 8 + (v->glu ? 64 * 4 + 8 : 0) +
           (is_kq(v->type) ? (uint64_t)v->k / 256 * 8 : 0);
}

uint32_t lw__gpu_matvec_norm_bindings(const lw__gpu_matvec_norm_variant *v) {
    return (v->add ? LW_GPU_MATVEC_NORM_ADD_BINDINGS : LW_GPU_MATVEC_NORM_BINDINGS) + (v->glu ? 1u : 0u) +
           (v->rope ? 3u : 0u);
}

bool lw__gpu_matvec_norm_glu_wide(const lw_gpu_info *info) {
    return !lw__gpu_cpu_adapter(info) && info->max_compute_invocations_per_workgroup >= 512 &&
           info->max_compute_workgroup_size_x >= 512;
}

lw__gpu_matvec_norm_variant lw__gpu_matvec_norm_default(const lw_gpu_info *info, uint32_t type, uint32_t k,
                                                        bool add, bool subgroups, bool glu) {
    /* 8 row groups of 4 rows: 32 rows per workgroup, so that the prologue's re-reads of x (k floats, and b)
     * cost 1/32 of a row each; smaller where the device allows fewer invocations or less memory. No
     * prefetch of the first weights before the prologue (H200, STEPS=models tg128 alternating, default /
     * "npre" 1: llama-3.1-8b Q4_0 338.6 / 306.8 and 340.7 / 315.1 t/s, llama-3.2-1b Q4_0 1093 / 1077 and
     * 1102 / 919) */
    lw__gpu_matvec_norm_variant v = {type, k,     256,   glu ? 8 : 4, add, subgroups && info->has_subgroups,
                                     glu,  false, false, false, 0};
    /* The GLU one's 64 rows a workgroup on GPUs: 16 row groups of 4 rows, so that the prologue's chunks of x
     * per invocation stay as many as the plain one's (H100, llama-3.1-8b Q4_0, `bench -p 512 -n 64 -r 2`,
     * t/s: 8 x 8 279.8, 16 x 4 312.6 / 313.3, 32 x 2 252.6, without the GLU output and its quantizer
     * dispatch of its own 302.6 / 305.1; 229 -> 197 dispatches per token. llama-3.2-1b, rows of 2048,
     * `bench -p 512 -n 128 -r 2` alternating, 8 x 8 / 16 x 4: Q4_0 754.5 / 887.9 and 850.1 / 978.2, Q8_0
     * 715.3 / 859.4 and 864.5 / 772.5). The Q|K|V one keeps 256 x 4 (8B, `bench -p 512 -n 128 -r 2`, default
     * 309.7 / 298.6 / 296.3 t/s; qnwg 512 qnrows 2 297.8 / 301.3, 512 x 4 296.9 / 302.2, 128 x 4 291.0) */
    if (glu && lw__gpu_matvec_norm_glu_wide(info)) v.wg_size = 512, v.rows = 4;
    while (!glu && v.wg_size > 32 &&
           (v.wg_size > info->max_compute_invocations_per_workgroup ||
            v.wg_size > info->max_compute_workgroup_size_x ||
            wg_bytes(&v) > info->max_compute_workgroup_storage_size))
        v.wg_size /= 2;
    return v;
}

lw_status lw__gpu_matvec_norm_check(const lw_gpu_info *info, const lw__gpu_matvec_norm_variant *v,
                                    char *err) {
    const bool kq = is_kq(v->type);
    if (v->type != LW_TYPE_Q4_0 && v->type != LW_TYPE_Q8_0 && !kq)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec-norm: Q4_0, Q8_0, Q4_K and Q5_K weights only");
    if (kq && (v->prefetch || v->k % 256))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec-norm: K-format rows of a multiple of 256, no prefetch");
    if (!info->has_dot4) return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec-norm: needs dot4I8Packed");
    if (v->subgroups && !info->has_subgroups)
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "matvec-norm: subgroup variant needs the subgroups feature");
    if (v->k == 0 || v->k % 64 || v->k >= 0x40000000u)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec-norm: k=%u must be a positive multiple of 64",
                          v->k);
    if (v->wg_size < 32 || (v->wg_size & (v->wg_size - 1)) || v->wg_size > 1024 ||
        v->wg_size > info->max_compute_invocations_per_workgroup ||
        v->wg_size > info->max_compute_workgroup_size_x)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec-norm: workgroup size %u does not suit this device",
                          v->wg_size);
    if (v->rows < 1 || v->rows > 8 || (v->glu && (v->rows % 2 || v->wg_size / 32 * v->rows != 64)))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec-norm: %u rows per row group of %u%s", v->rows,
                          v->wg_size, v->glu ? " (the GLU needs 64 rows a workgroup, row pairs)" : "");
    if (v->tiles && (v->prefetch || v->tiles > 65535))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec-norm: a grid of %u tiles' workgroups, no prefetch",
                          v->tiles);
    if (v->rope && (v->glu || v->rows % 2))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec-norm: the RoPE epilogue needs row pairs, no GLU");
    if (info->max_storage_buffers_per_shader_stage &&
        lw__gpu_matvec_norm_bindings(v) - 1 > info->max_storage_buffers_per_shader_stage)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec-norm: %u storage bindings exceed the device's",
                          lw__gpu_matvec_norm_bindings(v) - 1);
    if (wg_bytes(v) > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "matvec-norm: rows of %u need %llu bytes of workgroup memory", v->k,
                          (unsigned long long)wg_bytes(v));
    return LW_OK;
}

lw_status lw__gpu_matvec_norm_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                       const lw_allocator *alloc, const lw__gpu_matvec_norm_variant *v,
                                       const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = lw__gpu_matvec_norm_check(info, v, err);
    if (st != LW_OK) return st;
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const lw_type_info *ti = lw_type_get(v->type);
    char label[LW_GPU_CACHE_KEY], nk[16], wg[8], rows[8];
    snprintf(label, sizeof label, "matvec-q8-norm %s%s k%u wg%u r%u%s%s%s%s%s", ti ? ti->name : "?",
             v->subgroups ? " sg" : "", v->k, v->wg_size, v->rows, v->add ? " add" : "", v->glu ? " glu" : "",
             v->rope ? (v->kv_f16 ? " rope f16" : " rope") : "", v->prefetch ? " pre" : "",
             v->tiles ? " tiles" : "");
    snprintf(nk, sizeof nk, "%u", v->k);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    snprintf(rows, sizeof rows, "%u", v->rows);
    /* weights, a, (b, h,) norm weight, y, (qo,) (kc, vc, ff,) params: weights, norm weight, ff read-only */
    lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS];
    const uint32_t n = lw__gpu_matvec_norm_bindings(v);
    for (uint32_t i = 0; i < n; i++) kinds[i] = LW_GPU_BIND_STORAGE;
    kinds[0] = kinds[v->add ? 4 : 2] = LW_GPU_BIND_STORAGE_READ;
    if (v->rope) kinds[n - 2] = LW_GPU_BIND_STORAGE_READ;
    kinds[n - 1] = LW_GPU_BIND_UNIFORM;
    lw__wgsl_define defs[] = {{"WEIGHT_TYPE", f->define},
                              {"NK", nk},
                              {"WG_SIZE", wg},
                              {"ROWS", rows},
                              {"ADD", v->add ? "1" : "0"},
                              {"GLU_OUT", v->glu ? "1" : "0"},
                              {"ROPE_OUT", v->rope ? "1" : "0"},
                              {"KV_F16", v->kv_f16 ? "1" : "0"},
                              {"PREFETCH", v->prefetch ? "1" : "0"},
                              {"TILES", v->tiles ? "1" : "0"},
                              {"SUBGROUPS", v->subgroups ? "1" : "0"}};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "matvec-q8-norm.wgsl", defs,
                                  sizeof defs / sizeof defs[0], kinds, n, out, err);
}

lw_status lw__gpu_matvec_norm_plan(const lw_gpu_info *info, const lw__gpu_matvec_norm_variant *v,
                                   uint64_t rows, uint64_t w_offset, uint64_t a_offset, uint64_t b_offset,
                                   uint64_t h_offset, uint64_t nw_offset, uint64_t y_offset, float eps,
                                   lw__gpu_matvec_norm_params *p, uint32_t grid[3], char *err) {
    lw_status st = lw__gpu_matvec_norm_check(info, v, err);
    if (st != LW_OK) return st;
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const uint64_t stride = (uint64_t)v->k / f->block * f->block_bytes;
    uint64_t last, end;
    if (rows == 0 || !lw__mul_u64(stride, rows - 1, &last) || !lw__add_u64(last, stride, &end) ||
        !lw__add_u64(end, w_offset, &end) || end > UINT32_MAX || end > info->max_storage_buffer_binding_size)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matvec-norm: %llu rows of %u exceed one binding",
                          (unsigned long long)rows, v->k);
    if (stride % 4 || w_offset % 4 || a_offset % 4 || b_offset % 4 || h_offset % 4 || nw_offset % 4)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec-norm: misaligned rows or offsets");
    if (a_offset / 4 > UINT32_MAX || b_offset / 4 > UINT32_MAX || h_offset / 4 > UINT32_MAX ||
        nw_offset / 4 > UINT32_MAX || y_offset > UINT32_MAX - rows)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matvec-norm: offsets beyond 32 bits");
    const uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    if (v->glu && rows % 64)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec-norm: the GLU needs gate and up rows of a multiple of 32");
    const uint64_t per = v->glu ? 64 : (uint64_t)v->wg_size / 32 * v->rows, tiles = (rows + per - 1) / per,
                   groups = v->tiles && v->tiles < tiles ? v->tiles : tiles, gx = groups < gmax ? groups : gmax,
                   gy = (groups + gx - 1) / gx;
    if (gy > gmax)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matvec-norm: %llu rows exceed the dispatch grid",
                          (unsigned long long)rows);
    memset(p, 0, sizeof *p);
    p->rows = (uint32_t)rows;
    p->row_stride = (uint32_t)stride;
    p->w_offset = (uint32_t)w_offset;
    p->groups_x = (uint32_t)gx;
    p->a_offset = (uint32_t)(a_offset / 4);
    p->b_offset = (uint32_t)(b_offset / 4);
    p->h_offset = (uint32_t)(h_offset / 4);
    p->nw_offset = (uint32_t)(nw_offset / 4);
    p->y_offset = (uint32_t)y_offset;
    p->eps = eps;
    p->tile_step = (uint32_t)(gx * gy);
    grid[0] = (uint32_t)gx;
    grid[1] = (uint32_t)gy;
    grid[2] = 1;
    return LW_OK;
}
