/* Kernels of the graph ops other than MUL_MAT and ATTN (kernels-ops.h): element-wise ops, RMS_NORM, ROPE,
 * KV_STORE, GET_ROWS. Each family: default variant, pipeline (template expansion through
 * lw__gpu_build_pipeline), per-call planning. GPU sampling (top-k) is in kernel-ops-sample.c. */
#include "webgpu/kernels-ops.h"

#include "cpu/engine-ops.h"
#include "webgpu/gpu-tune.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Shared checks
 * ------------------------------------------------------------------------------------------------------- */

/* Splits `groups` work items into a grid under maxComputeWorkgroupsPerDimension. */
lw_status lw__gpu_ops_grid(const lw_gpu_info *info, uint64_t groups, uint32_t grid[3], uint32_t *groups_x,
                           const char *what, char *err) {
    uint64_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    uint64_t gx = groups < gmax ? groups : gmax;
    if (gx == 0) gx = 1;
    uint64_t gy = (groups + gx - 1) / gx;
    if (gy > gmax)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "%s: %llu workgroups exceed the dispatch grid", what,
                          (unsigned long long)groups);
    grid[0] = (uint32_t)gx;
    grid[1] = gy ? (uint32_t)gy : 1;
    grid[2] = 1;
    *groups_x = (uint32_t)gx;
    return LW_OK;
}

/* A workgroup size the device runs; pow2: must also be a power of two (tree reductions). */
lw_status lw__gpu_ops_check_wg(const lw_gpu_info *info, uint32_t wg, bool pow2, const char *what, char *err) {
    if (wg == 0 || (pow2 && (wg & (wg - 1))) || wg > info->max_compute_invocations_per_workgroup ||
        (info->max_compute_workgroup_size_x && wg > info->max_compute_workgroup_size_x))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "%s: workgroup size %u does not suit this device", what,
                          wg);
    return LW_OK;
}

/* Largest power of two <= want that the device runs (at least 1). */
static uint32_t fit_wg(const lw_gpu_info *info, uint32_t want) {
    uint32_t lim = info->max_compute_invocations_per_workgroup;
    if (info->max_compute_workgroup_size_x && info->max_compute_workgroup_size_x < lim)
        lim = info->max_compute_workgroup_size_x;
    while (want > 1 && want > lim) want /= 2;
    return want ? want : 1;
}

/* Every index a kernel forms from these offsets and counts stays below 2^32. */
static bool fits_u32(uint64_t offset, uint64_t count) {
    return offset <= UINT32_MAX && count <= UINT32_MAX - offset;
}

/* count = a * b checked, below 2^32. */
static bool mul_u32(uint64_t a, uint64_t b, uint64_t *out) {
    return lw__mul_u64(a, b, out) && *out <= UINT32_MAX;
}

/* ---------------------------------------------------------------------------------------------------------
 * Element-wise ops
 * ------------------------------------------------------------------------------------------------------- */

static const char *const elt_names[] = {"", "add", "scale", "softcap", "swiglu", "geglu", "copy"};

static bool elt_binary(uint32_t op) {
    return op == LW_GPU_ELT_ADD || op == LW_GPU_ELT_SWIGLU || op == LW_GPU_ELT_GEGLU;
}

lw__gpu_eltwise_variant lw__gpu_eltwise_default(const lw_gpu_info *info, uint32_t op) {
    lw__gpu_eltwise_variant v = {op, op == LW_GPU_ELT_GEGLU, fit_wg(info, 256), false};
    return v;
}

uint32_t lw__gpu_eltwise_layout(const lw__gpu_eltwise_variant *v, lw_gpu_binding_kind *kinds) {
    if (v->op < LW_GPU_ELT_ADD || v->op > LW_GPU_ELT_COPY) return 0;
    uint32_t n = 0;
    kinds[n++] = LW_GPU_BIND_STORAGE;
    if (elt_binary(v->op) && !v->b_in_a) kinds[n++] = LW_GPU_BIND_STORAGE;
    kinds[n++] = LW_GPU_BIND_STORAGE;
    kinds[n++] = LW_GPU_BIND_UNIFORM_DYNAMIC;
    if (v->op == LW_GPU_ELT_GEGLU && v->gelu_table) kinds[n++] = LW_GPU_BIND_STORAGE_READ;
    return n;
}

lw_status lw__gpu_eltwise_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                   const lw_allocator *alloc, const lw__gpu_eltwise_variant *v,
                                   const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS];
    uint32_t nk = lw__gpu_eltwise_layout(v, kinds);
    if (!nk) return lw__errorf(err, LW_ERR_INVALID_ARG, "eltwise: unknown op %u", v->op);
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, false, "eltwise", err);
    if (st != LW_OK) return st;
    const bool table = v->op == LW_GPU_ELT_GEGLU && v->gelu_table;
    char label[LW_GPU_CACHE_KEY], op[8], wg[16];
    const bool b_in_a = elt_binary(v->op) && v->b_in_a;
    snprintf(label, sizeof label, "eltwise %s%s%s wg%u", elt_names[v->op], table ? " table" : "",
             b_in_a ? " b_in_a" : "", v->wg_size);
    snprintf(op, sizeof op, "%u", v->op);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    lw__wgsl_define defs[] = {
        {"OP", op}, {"WG_SIZE", wg}, {"GELU_TABLE", table ? "1" : "0"}, {"B_IN_A", b_in_a ? "1" : "0"}};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "eltwise.wgsl", defs,
                                  sizeof defs / sizeof defs[0], kinds, nk, out, err);
}

lw_status lw__gpu_eltwise_plan(const lw_gpu_info *info, const lw__gpu_eltwise_variant *v, uint64_t n,
                               uint64_t rows, uint64_t a_offset, uint64_t b_offset, uint64_t b_rows,
                               uint64_t d_offset, float f0, float f1, lw__gpu_eltwise_params *p,
                               uint32_t grid[3], char *err) {
    if (v->op < LW_GPU_ELT_ADD || v->op > LW_GPU_ELT_COPY)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "eltwise: unknown op %u", v->op);
    if (v->wg_size == 0) return lw__errorf(err, LW_ERR_INVALID_ARG, "eltwise: workgroup size 0");
    const bool bin = elt_binary(v->op);
    if (!bin) b_rows = rows, b_offset = 0;
    uint64_t total;
    if (n == 0 || rows == 0 || (b_rows != 1 && b_rows != rows))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "eltwise %s: bad shape %llu x %llu (b rows %llu)",
                          elt_names[v->op], (unsigned long long)rows, (unsigned long long)n,
                          (unsigned long long)b_rows);
    if (!mul_u32(n, rows, &total) || !fits_u32(a_offset, total) || !fits_u32(d_offset, total) ||
        (bin && !fits_u32(b_offset, b_rows == 1 ? n : total)))
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "eltwise %s: %llu x %llu at these offsets exceeds 32-bit indices", elt_names[v->op],
                          (unsigned long long)rows, (unsigned long long)n);
    memset(p, 0, sizeof *p);
    lw_status st =
        lw__gpu_ops_grid(info, (total + v->wg_size - 1) / v->wg_size, grid, &p->groups_x, "eltwise", err);
    if (st != LW_OK) return st;
    p->n = (uint32_t)n;
    p->rows = (uint32_t)rows;
    p->a_offset = (uint32_t)a_offset;
    p->b_offset = (uint32_t)b_offset;
    p->d_offset = (uint32_t)d_offset;
    p->b_rows = (uint32_t)b_rows;
    p->a_stride = p->b_stride = p->d_stride = (uint32_t)n;
    p->f0 = f0;
    p->f1 = f1;
    return LW_OK;
}

/* The largest index a row stride reaches: offset + (rows - 1) * stride + n. */
static bool strided_fits(uint64_t offset, uint64_t rows, uint64_t stride, uint64_t n) {
    uint64_t span;
    return stride >= n && lw__mul_u64(rows - 1, stride, &span) && lw__add_u64(span, n, &span) &&
           fits_u32(offset, span);
}

lw_status lw__gpu_eltwise_strides(lw__gpu_eltwise_params *p, uint64_t a_stride, uint64_t b_stride,
                                  uint64_t d_stride, char *err) {
    if (!a_stride) a_stride = p->n;
    if (!b_stride) b_stride = p->n;
    if (!d_stride) d_stride = p->n;
    if (!strided_fits(p->a_offset, p->rows, a_stride, p->n) ||
        !strided_fits(p->d_offset, p->rows, d_stride, p->n) ||
        (p->b_rows != 1 && !strided_fits(p->b_offset, p->rows, b_stride, p->n)))
        return lw__errorf(
            err, LW_ERR_TOO_LARGE, "eltwise: strides %llu/%llu/%llu below the row or past 32 bits",
            (unsigned long long)a_stride, (unsigned long long)b_stride, (unsigned long long)d_stride);
    p->a_stride = (uint32_t)a_stride;
    p->b_stride = (uint32_t)b_stride;
    p->d_stride = (uint32_t)d_stride;
    return LW_OK;
}

lw_status lw__gpu_out_rows_plan(const lw_gpu_info *info, const lw__gpu_eltwise_variant *v, uint64_t n,
                                uint64_t first, uint64_t count, uint64_t src_offset, uint64_t d_offset,
                                lw__gpu_eltwise_params *p, uint32_t grid[3], char *err) {
    if (v->op != LW_GPU_ELT_COPY)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "out_rows: needs the copy variant");
    uint64_t skip;
    if (!lw__mul_u64(first, n, &skip) || !lw__add_u64(skip, src_offset, &skip))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "out_rows: row %llu too far", (unsigned long long)first);
    return lw__gpu_eltwise_plan(info, v, n, count, skip, 0, count, d_offset, 0.0f, 0.0f, p, grid, err);
}

void lw__gpu_gelu_table(uint32_t *words) {
    for (uint32_t i = 0; i < LW_GPU_GELU_TABLE_WORDS; i++) {
        uint32_t lo = lw__fp32_to_fp16(lw__cpu_gelu_f16((uint16_t)(2 * i)));
        uint32_t hi = lw__fp32_to_fp16(lw__cpu_gelu_f16((uint16_t)(2 * i + 1)));
        words[i] = lo | hi << 16;
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * RMS_NORM
 * ------------------------------------------------------------------------------------------------------- */

lw__gpu_norm_variant lw__gpu_norm_default(const lw_gpu_info *info) {
    /* GPUs 512 invocations: one workgroup takes a row, and each strided step over it waits on memory (H200,
     * llama-3.2-1b shape: 4 steps over a 2048-wide row instead of 16); CPU adapters keep 128. The exact sum
     * (the CPU's bits) only on CPU adapters, where tests compare bits: on the H200 it took ~26 us per 4,096
     * floats (decode profile, rms_norm add) */
    const bool cpu = lw__gpu_cpu_adapter(info);
    lw__gpu_norm_variant v = {info->has_subgroups, fit_wg(info, cpu ? 128 : 512), false, cpu, 0};
    return v;
}

lw_status lw__gpu_norm_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_norm_variant *v, const lw_gpu_info *info, lw_gpu_pipeline *out,
                                char *err) {
    *out = 0;
    if (v->subgroups && !info->has_subgroups)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "rms_norm: subgroup variant needs the subgroups feature");
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, true, "rms_norm", err);
    if (st != LW_OK) return st;
    if (v->exact && v->wg_size > 512) /* the exact sum's limbs: 24 bytes of workgroup memory per invocation */
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "rms_norm: exact sum with workgroup size %u above 512",
                          v->wg_size);
    if (v->q8_out > LW_GPU_ACTQ_Q8_K || (v->q8_out && !info->has_dot4))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "rms_norm: 8-bit output %u needs an 8-bit kind and dot4",
                          v->q8_out);
    char label[LW_GPU_CACHE_KEY], wg[16], q8[4] = "", q8l[8] = "";
    if (v->q8_out) snprintf(q8l, sizeof q8l, " q8a%u", v->q8_out);
    snprintf(q8, sizeof q8, "%u", v->q8_out);
    snprintf(label, sizeof label, "rms_norm%s%s%s wg%u%s", v->add_input ? " add" : "",
             v->subgroups ? " sg" : "", v->exact ? " exact" : " f32", v->wg_size, q8l);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    lw__wgsl_define defs[] = {{"WG_SIZE", wg},
                              {"SUBGROUPS", v->subgroups ? "1" : "0"},
                              {"ADD_INPUT", v->add_input ? "1" : "0"},
                              {"EXACT_SUM", v->exact ? "1" : "0"},
                              {"Q8_OUT", q8}};
    static const lw_gpu_binding_kind kinds[LW_GPU_NORM_ADD_BINDINGS + 1] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE_READ,    LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC, LW_GPU_BIND_STORAGE};
    static const lw_gpu_binding_kind plain[LW_GPU_NORM_BINDINGS + 1] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC,
        LW_GPU_BIND_STORAGE};
    const uint32_t n = (v->add_input ? LW_GPU_NORM_ADD_BINDINGS : LW_GPU_NORM_BINDINGS) + (v->q8_out ? 1 : 0);
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "rms-norm.wgsl", defs,
                                  sizeof defs / sizeof defs[0], v->add_input ? kinds : plain, n, out, err);
}

lw_status lw__gpu_norm_plan(const lw_gpu_info *info, const lw__gpu_norm_variant *v, uint64_t n,
                            uint64_t group, uint64_t rows, uint64_t x_offset, uint64_t w_offset,
                            uint64_t w_len, uint64_t d_offset, float eps, lw__gpu_norm_params *p,
                            uint32_t grid[3], char *err) {
    (void)v;
    if (group == 0) group = n;
    uint64_t total, items;
    /* group < 2^24: the exact mean's long division keeps its remainder times 256 in 32 bits (the f32 sum
     * divides by f32(group), exact below 2^24 too) */
    if (n == 0 || rows == 0 || n % group || group >= (1u << 24) || (w_len && w_len != group && w_len != n))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "rms_norm: bad shape %llu x %llu, group %llu, weight %llu",
                          (unsigned long long)rows, (unsigned long long)n, (unsigned long long)group,
                          (unsigned long long)w_len);
    if (!mul_u32(n, rows, &total) || !fits_u32(x_offset, total) || !fits_u32(d_offset, total) ||
        !fits_u32(w_offset, w_len))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "rms_norm: %llu x %llu exceeds 32-bit indices",
                          (unsigned long long)rows, (unsigned long long)n);
    items = rows * (n / group);
    memset(p, 0, sizeof *p);
    lw_status st = lw__gpu_ops_grid(info, items, grid, &p->groups_x, "rms_norm", err);
    if (st != LW_OK) return st;
    p->n = (uint32_t)n;
    p->group = (uint32_t)group;
    p->groups_per_row = (uint32_t)(n / group);
    p->rows = (uint32_t)rows;
    p->x_offset = (uint32_t)x_offset;
    p->d_offset = (uint32_t)d_offset;
    p->w_offset = (uint32_t)w_offset;
    p->w_step = w_len == n && n != group ? (uint32_t)group : 0;
    p->has_w = w_len != 0;
    p->eps = eps;
    p->x_stride = p->d_stride = (uint32_t)n;
    return LW_OK;
}

lw_status lw__gpu_norm_strides(lw__gpu_norm_params *p, uint64_t x_stride, uint64_t d_stride, char *err) {
    if (!x_stride) x_stride = p->n;
    if (!d_stride) d_stride = p->n;
    if (!strided_fits(p->x_offset, p->rows, x_stride, p->n) ||
        !strided_fits(p->d_offset, p->rows, d_stride, p->n) ||
        !strided_fits(p->b_offset, p->rows, x_stride, p->n) ||
        !strided_fits(p->sum_offset, p->rows, x_stride, p->n))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "rms_norm: strides %llu/%llu below the row or past 32 bits",
                          (unsigned long long)x_stride, (unsigned long long)d_stride);
    p->x_stride = (uint32_t)x_stride;
    p->d_stride = (uint32_t)d_stride;
    return LW_OK;
}

lw_status lw__gpu_norm_add_plan(const lw_gpu_info *info, const lw__gpu_norm_variant *v, uint64_t n,
                                uint64_t group, uint64_t rows, uint64_t a_offset, uint64_t b_offset,
                                uint64_t sum_offset, uint64_t w_offset, uint64_t w_len, uint64_t d_offset,
                                float eps, lw__gpu_norm_params *p, uint32_t grid[3], char *err) {
    if (!v->add_input)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "rms_norm: add plan for a variant without add");
    lw_status st =
        lw__gpu_norm_plan(info, v, n, group, rows, a_offset, w_offset, w_len, d_offset, eps, p, grid, err);
    if (st != LW_OK) return st;
    uint64_t total = (uint64_t)p->n * p->rows;
    if (!fits_u32(b_offset, total) || !fits_u32(sum_offset, total))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "rms_norm: b/sum offsets exceed 32-bit indices");
    p->b_offset = (uint32_t)b_offset;
    p->sum_offset = (uint32_t)sum_offset;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * ROPE
 * ------------------------------------------------------------------------------------------------------- */

lw__gpu_rope_variant lw__gpu_rope_default(const lw_gpu_info *info) {
    lw__gpu_rope_variant v = {fit_wg(info, 64), false};
    return v;
}

lw_status lw__gpu_rope_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_rope_variant *v, const lw_gpu_info *info, lw_gpu_pipeline *out,
                                char *err) {
    *out = 0;
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, false, "rope", err);
    if (st != LW_OK) return st;
    char label[LW_GPU_CACHE_KEY], wg[16];
    snprintf(label, sizeof label, "rope%s wg%u", v->out_f16 ? " f16out" : "", v->wg_size);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    lw__wgsl_define defs[] = {{"WG_SIZE", wg}, {"OUT_F16", v->out_f16 ? "1" : "0"}};
    static const lw_gpu_binding_kind kinds[LW_GPU_ROPE_BINDINGS] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "rope.wgsl", defs, sizeof defs / sizeof defs[0],
                                  kinds, LW_GPU_ROPE_BINDINGS, out, err);
}

void lw__gpu_rope_args_from_node(const lw__node *nd, lw__gpu_rope_args *a) {
    a->n_head = (uint32_t)nd->ip[0];
    a->head_dim = (uint32_t)nd->ip[1];
    a->n_rot = (uint32_t)nd->ip[2];
    a->mode = (uint32_t)nd->ip[3];
    a->freq_base = nd->fp[0];
    a->freq_scale = nd->fp[1];
    a->ext_factor = nd->fp[2];
    a->attn_factor = nd->fp[3];
    a->corr0 = nd->fp[4];
    a->corr1 = nd->fp[5];
    a->has_ff = nd->src[1] >= 0;
}

lw_status lw__gpu_rope_plan(const lw_gpu_info *info, const lw__gpu_rope_variant *v,
                            const lw__gpu_rope_args *a, lw__gpu_rope_params *p, uint32_t grid[3], char *err) {
    if (a->n_head == 0 || a->head_dim == 0 || a->head_dim % 2 || a->n_rot == 0 || a->n_rot % 2 ||
        a->n_rot > a->head_dim || (a->mode != LW_ROPE_NORMAL && a->mode != LW_ROPE_NEOX) || a->rows == 0 ||
        v->wg_size == 0)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "rope: bad shape (heads %u, head dim %u, rotated %u, mode %u)", a->n_head,
                          a->head_dim, a->n_rot, a->mode);
    uint64_t row = (uint64_t)a->n_head * a->head_dim, xs = a->x_stride ? a->x_stride : row,
             ds = a->d_stride ? a->d_stride : row, span_x, span_d, pairs;
    if (v->out_f16 && (a->d_offset % 2 || ds % 2))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "rope: an f16 destination needs even offsets (%llu, stride %llu)",
                          (unsigned long long)a->d_offset, (unsigned long long)ds);
    if (xs < row || ds < row || !mul_u32(xs, a->rows, &span_x) || !mul_u32(ds, a->rows, &span_d) ||
        !fits_u32(a->x_offset, span_x) || !fits_u32(a->d_offset, span_d) ||
        !fits_u32(a->ff_offset, (a->table ? a->rows : 1) * a->n_rot) || !mul_u32(row / 2, a->rows, &pairs) ||
        !fits_u32(a->pos0, a->rows) || a->pos0 + a->rows > (1u << 24))
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "rope: %llu rows at these offsets/positions exceed the kernel's range",
                          (unsigned long long)a->rows);
    memset(p, 0, sizeof *p);
    lw_status st =
        lw__gpu_ops_grid(info, (pairs + v->wg_size - 1) / v->wg_size, grid, &p->groups_x, "rope", err);
    if (st != LW_OK) return st;
    p->n_head = a->n_head;
    p->head_dim = a->head_dim;
    p->n_rot = a->n_rot;
    p->neox = a->mode == LW_ROPE_NEOX;
    p->rows = (uint32_t)a->rows;
    p->pos0 = (uint32_t)a->pos0;
    p->x_offset = (uint32_t)a->x_offset;
    p->x_stride = (uint32_t)xs;
    p->d_offset = (uint32_t)a->d_offset;
    p->d_stride = (uint32_t)ds;
    p->ff_offset = (uint32_t)a->ff_offset;
    p->has_ff = a->table ? 2 : a->has_ff;
    /* the host computes what the CPU computes once per node, with the same expressions (engine-ops.c) */
    p->theta_scale = powf(a->freq_base, -2.0f / (float)a->n_rot);
    p->freq_scale = a->freq_scale;
    p->ext_factor = a->ext_factor;
    p->mscale = a->ext_factor != 0.0f ? a->attn_factor * fmaf(0.1f, logf(1.0f / a->freq_scale), 1.0f)
                                      : a->attn_factor;
    p->corr0 = a->corr0;
    p->corr1 = a->corr1;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * ROPE(Q) + ROPE(K) -> K cache + V -> V cache
 * ------------------------------------------------------------------------------------------------------- */

lw__gpu_rope_qkv_variant lw__gpu_rope_qkv_default(const lw_gpu_info *info, uint32_t kv_type) {
    /* exact_norm (qk_norm's integer limbs, the CPU's bits) on CPU adapters only, as the norm's exact */
    const bool cpu = lw__gpu_cpu_adapter(info);
    lw__gpu_rope_qkv_variant v = {fit_wg(info, 64), kv_type == LW_TYPE_F16, false, false, false, cpu, 0};
    if (kv_type == LW_TYPE_Q8_0 || kv_type == LW_TYPE_Q4_0) v.kv_quant = kv_type;
    return v;
}

lw_status lw__gpu_rope_qkv_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, const lw__gpu_rope_qkv_variant *v,
                                    const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, false, "rope_qkv", err);
    if (st != LW_OK) return st;
    if ((v->kv_quant && (v->kv_f16 || (v->kv_quant != LW_TYPE_Q8_0 && v->kv_quant != LW_TYPE_Q4_0))))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "rope_qkv: quantized caches are Q8_0 or Q4_0 (not f16)");
    if ((v->qk_norm || v->qkv_bias) && (!v->qkv_one || (v->qk_norm && v->qkv_bias)))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "rope_qkv: qk_norm or qkv_bias (not both) need qkv_one");
    const uint32_t n_storage = v->qkv_one ? (v->qk_norm ? 7 : v->qkv_bias ? 6 : 5) : 7;
    if (info->max_storage_buffers_per_shader_stage && info->max_storage_buffers_per_shader_stage < n_storage)
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "rope_qkv: needs %u storage buffers per stage (device: %u)", n_storage,
                          info->max_storage_buffers_per_shader_stage);
    char label[LW_GPU_CACHE_KEY], wg[16];
    snprintf(label, sizeof label, "rope_qkv %s%s%s%s wg%u",
             v->kv_quant == LW_TYPE_Q8_0   ? "q8_0"
             : v->kv_quant == LW_TYPE_Q4_0 ? "q4_0"
             : v->kv_f16                   ? "f16"
                                           : "f32",
             v->qkv_one ? " one" : "", v->qk_norm ? (v->exact_norm ? " qknorm exact" : " qknorm f32") : "",
             v->qkv_bias ? " bias" : "", v->wg_size);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    lw__wgsl_define defs[] = {{"WG_SIZE", wg},
                              {"KV_F16", v->kv_f16 ? "1" : "0"},
                              {"Q8_CACHE", v->kv_quant == LW_TYPE_Q8_0 ? "1" : "0"},
                              {"Q4_CACHE", v->kv_quant == LW_TYPE_Q4_0 ? "1" : "0"},
                              {"QKV_ONE", v->qkv_one ? "1" : "0"},
                              {"QK_NORM", v->qk_norm ? "1" : "0"},
                              {"EXACT_NORM", v->exact_norm ? "1" : "0"},
                              {"QKV_BIAS", v->qkv_bias ? "1" : "0"}};
    static const lw_gpu_binding_kind kinds[LW_GPU_ROPE_QKV_BINDINGS] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,      LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC};
    static const lw_gpu_binding_kind one[LW_GPU_ROPE_QKV_NORM_BINDINGS] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE_READ,    LW_GPU_BIND_STORAGE,      LW_GPU_BIND_STORAGE,
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE_READ};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "rope-qkv.wgsl", defs,
                                  sizeof defs / sizeof defs[0], v->qkv_one ? one : kinds,
                                  v->qkv_one ? (v->qk_norm    ? LW_GPU_ROPE_QKV_NORM_BINDINGS
                                                : v->qkv_bias ? LW_GPU_ROPE_QKV_ONE_BINDINGS + 1
                                                              : LW_GPU_ROPE_QKV_ONE_BINDINGS)
                                             : LW_GPU_ROPE_QKV_BINDINGS,
                                  out, err);
}

lw_status lw__gpu_rope_qkv_plan(const lw_gpu_info *info, const lw__gpu_rope_qkv_variant *v,
                                const lw__gpu_rope_args *q, const lw__gpu_kv_dest *kv,
                                lw__gpu_rope_qkv_params *p, uint32_t grid[3], char *err) {
    lw__gpu_rope_variant rv = {v->wg_size, false};
    memset(p, 0, sizeof *p);
    lw_status st = lw__gpu_rope_plan(info, &rv, q, &p->rope, grid, err);
    if (st != LW_OK) return st;
    const uint64_t row = (uint64_t)kv->n_head_kv * q->head_dim;
    const uint64_t ks = kv->k_stride ? kv->k_stride : row, kcs = kv->kc_stride ? kv->kc_stride : row,
                   vs = kv->v_stride ? kv->v_stride : row, vcs = kv->vc_stride ? kv->vc_stride : row;
    uint64_t span[4], items;
    const unsigned align = v->kv_quant ? 32 : v->kv_f16 ? 2 : 1; /* cache elements per word / block */
    if (kv->n_head_kv == 0 || ks < row || kcs < row || vs < row || vcs < row || kv->kc_offset % align ||
        kv->vc_offset % align || kcs % align || vcs % align || (v->kv_quant && q->head_dim % 32))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "rope_qkv: bad K/V layout (%u heads; f16 caches need even offsets, quantized ones "
                          "head dims and offsets of multiples of 32)",
                          kv->n_head_kv);
    /* work items per row: Q's pairs, then K's and V's pairs (quantized caches: blocks) */
    const uint64_t kv_items = v->kv_quant ? row / 32 : row / 2;
    if (!mul_u32(ks, q->rows, &span[0]) || !fits_u32(kv->k_offset, span[0]) ||
        !mul_u32(kcs, q->rows, &span[1]) || !fits_u32(kv->kc_offset, span[1]) ||
        !mul_u32(vs, q->rows, &span[2]) || !fits_u32(kv->v_offset, span[2]) ||
        !mul_u32(vcs, q->rows, &span[3]) || !fits_u32(kv->vc_offset, span[3]) ||
        !mul_u32((uint64_t)q->n_head * (q->head_dim / 2) + 2 * kv_items, q->rows, &items))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "rope_qkv: K/V ranges exceed 32-bit indices");
    if ((st = lw__gpu_ops_grid(info, (items + v->wg_size - 1) / v->wg_size, grid, &p->rope.groups_x,
                               "rope_qkv", err)) != LW_OK)
        return st;
    p->rope.pad = kv->n_head_kv;
    p->k_offset = (uint32_t)kv->k_offset;
    p->k_stride = (uint32_t)ks;
    p->kc_offset = (uint32_t)kv->kc_offset;
    p->kc_stride = (uint32_t)kcs;
    p->v_offset = (uint32_t)kv->v_offset;
    p->v_stride = (uint32_t)vs;
    p->vc_offset = (uint32_t)kv->vc_offset;
    p->vc_stride = (uint32_t)vcs;
    p->q_scale = 1.0f;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * KV_STORE
 * ------------------------------------------------------------------------------------------------------- */

lw__gpu_kv_store_variant lw__gpu_kv_store_default(const lw_gpu_info *info, uint32_t kv_type) {
    /* Q8_0 / Q4_0: a block per invocation, 64 of them (a step's row is a few hundred blocks at most) */
    const bool q8 = kv_type == LW_TYPE_Q8_0, q4 = kv_type == LW_TYPE_Q4_0;
    lw__gpu_kv_store_variant v = {kv_type == LW_TYPE_F16, fit_wg(info, q8 || q4 ? 64 : 256), q8, q4};
    return v;
}

lw_status lw__gpu_kv_store_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, const lw__gpu_kv_store_variant *v,
                                    const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, false, "kv_store", err);
    if (st != LW_OK) return st;
    char label[LW_GPU_CACHE_KEY], wg[16];
    if ((int)v->f16_cache + (int)v->q8_cache + (int)v->q4_cache > 1)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "kv_store: more than one cache type at once");
    snprintf(label, sizeof label, "kv_store %s wg%u",
             v->f16_cache  ? "f16"
             : v->q8_cache ? "q8_0"
             : v->q4_cache ? "q4_0"
                           : "f32",
             v->wg_size);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    lw__wgsl_define defs[] = {{"WG_SIZE", wg},
                              {"F16_CACHE", v->f16_cache ? "1" : "0"},
                              {"Q8_CACHE", v->q8_cache ? "1" : "0"},
                              {"Q4_CACHE", v->q4_cache ? "1" : "0"}};
    static const lw_gpu_binding_kind kinds[LW_GPU_KV_STORE_BINDINGS] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "kv-store.wgsl", defs,
                                  sizeof defs / sizeof defs[0], kinds, LW_GPU_KV_STORE_BINDINGS, out, err);
}

lw_status lw__gpu_kv_store_plan(const lw_gpu_info *info, const lw__gpu_kv_store_variant *v, uint64_t row_len,
                                uint64_t rows, uint64_t x_offset, uint64_t x_stride, uint64_t cache_offset,
                                uint64_t cell0, uint64_t n_cells, lw__gpu_kv_store_params *p,
                                uint32_t grid[3], char *err) {
    if (!x_stride) x_stride = row_len;
    if (row_len == 0 || rows == 0 || x_stride < row_len || v->wg_size == 0 ||
        (v->f16_cache && (row_len % 2 || cache_offset % 2)) ||
        ((v->q8_cache || v->q4_cache) && (row_len % 32 || cache_offset % 32)))
        return lw__errorf(
            err, LW_ERR_INVALID_ARG, "kv_store: bad shape (row %llu, rows %llu, cache offset %llu)",
            (unsigned long long)row_len, (unsigned long long)rows, (unsigned long long)cache_offset);
    if (cell0 > n_cells || rows > n_cells - cell0)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "kv_store: cells %llu..%llu outside a cache of %llu",
                          (unsigned long long)cell0, (unsigned long long)(cell0 + rows),
                          (unsigned long long)n_cells);
    uint64_t span_x, span_c, words;
    /* (Q8_0 / Q4_0: the words past the cells are 9 / 5 per 32 elements, fewer than the elements checked) */
    if (!mul_u32(x_stride, rows, &span_x) || !fits_u32(x_offset, span_x) ||
        !mul_u32(row_len, cell0 + rows, &span_c) || !fits_u32(cache_offset, span_c))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "kv_store: cache range exceeds 32-bit indices");
    /* invocations: one per cache word (f16: two elements) or per block */
    const uint64_t per_row = v->f16_cache ? row_len / 2 : v->q8_cache || v->q4_cache ? row_len / 32 : row_len;
    words = per_row * rows;
    memset(p, 0, sizeof *p);
    lw_status st =
        lw__gpu_ops_grid(info, (words + v->wg_size - 1) / v->wg_size, grid, &p->groups_x, "kv_store", err);
    if (st != LW_OK) return st;
    p->row_len = (uint32_t)row_len;
    p->rows = (uint32_t)rows;
    p->x_offset = (uint32_t)x_offset;
    p->x_stride = (uint32_t)x_stride;
    p->cache_offset = (uint32_t)cache_offset;
    p->cell0 = (uint32_t)cell0;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * GET_ROWS
 * ------------------------------------------------------------------------------------------------------- */

lw__gpu_get_rows_variant lw__gpu_get_rows_default(const lw_gpu_info *info, uint32_t type) {
    lw__gpu_get_rows_variant v = {type, fit_wg(info, 64), false};
    return v;
}

lw_status lw__gpu_get_rows_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, const lw__gpu_get_rows_variant *v,
                                    const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    *out = 0;
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const lw_type_info *ti = lw_type_get(v->type);
    if (!f)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "get_rows: no GPU kernel for type %s",
                          ti ? ti->name : "?");
    lw_status st = lw__gpu_ops_check_wg(info, v->wg_size, false, "get_rows", err);
    if (st != LW_OK) return st;
    char label[LW_GPU_CACHE_KEY], wg[16];
    snprintf(label, sizeof label, "get_rows %s wg%u%s", ti ? ti->name : "?", v->wg_size,
             v->row_map ? " map" : "");
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    lw__wgsl_define defs[] = {{"WEIGHT_TYPE", f->define},
                              {"WG_SIZE", wg},
                              {"F16", "0"},
                              {"SUBGROUPS", "0"},
                              {"ROW_MAP", v->row_map ? "1" : "0"}};
    static const lw_gpu_binding_kind kinds[LW_GPU_GET_ROWS_MAP_BINDINGS] = {
        LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM_DYNAMIC,
        LW_GPU_BIND_STORAGE_READ};
    return lw__gpu_build_pipeline(
        gpu, cache, alloc, label, "get-rows.wgsl", defs, sizeof defs / sizeof defs[0], kinds,
        v->row_map ? LW_GPU_GET_ROWS_MAP_BINDINGS : LW_GPU_GET_ROWS_BINDINGS, out, err);
}

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

lw_status lw__gpu_get_rows_split(const lw_gpu_info *info, uint64_t n_rows, uint64_t row_bytes,
                                 uint64_t *rows_per_part, uint64_t *n_parts, char *err) {
    uint64_t align =
        info->min_storage_buffer_offset_alignment ? info->min_storage_buffer_offset_alignment : 256;
    uint64_t max = info->max_storage_buffer_binding_size;
    if (max > UINT32_MAX) max = UINT32_MAX; /* byte offsets are u32 in the kernel */
    if (n_rows == 0 || row_bytes == 0) return lw__errorf(err, LW_ERR_INVALID_ARG, "get_rows: empty table");
    uint64_t step = align / gcd_u64(row_bytes, align), fit = max / row_bytes / step * step;
    if (fit == 0)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "get_rows: a row of %llu bytes does not fit one binding",
                          (unsigned long long)row_bytes);
    *rows_per_part = fit < n_rows ? fit : n_rows;
    *n_parts = (n_rows + *rows_per_part - 1) / *rows_per_part;
    return LW_OK;
}

lw_status lw__gpu_get_rows_plan(const lw_gpu_info *info, const lw__gpu_get_rows_variant *v, uint64_t n,
                                uint64_t n_tokens, uint64_t row_base, uint64_t row_count, uint64_t w_offset,
                                uint64_t ids_offset, uint64_t d_offset, uint64_t d_stride,
                                lw__gpu_get_rows_params *p, uint32_t grid[3], char *err) {
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    if (!f) return lw__errorf(err, LW_ERR_UNSUPPORTED, "get_rows: unsupported weight type %u", v->type);
    if (!d_stride) d_stride = n;
    if (n == 0 || n % f->block || n_tokens == 0 || row_count == 0 || d_stride < n || w_offset % 2)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "get_rows: bad shape (row %llu elements, a multiple of %u; %llu tokens; %llu rows; "
                          "w offset %llu even)",
                          (unsigned long long)n, f->block, (unsigned long long)n_tokens,
                          (unsigned long long)row_count, (unsigned long long)w_offset);
    uint64_t stride, bytes, end, span_d;
    if (!lw__mul_u64(n / f->block, f->block_bytes, &stride) || !lw__mul_u64(stride, row_count, &bytes) ||
        !lw__add_u64(bytes, w_offset, &end) || end > UINT32_MAX ||
        end > info->max_storage_buffer_binding_size)
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "get_rows: %llu rows of %llu elements exceed one binding (%llu bytes)",
                          (unsigned long long)row_count, (unsigned long long)n,
                          (unsigned long long)info->max_storage_buffer_binding_size);
    if (!fits_u32(row_base, row_count) || !fits_u32(ids_offset, n_tokens) ||
        !mul_u32(d_stride, n_tokens, &span_d) || !fits_u32(d_offset, span_d))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "get_rows: offsets exceed 32-bit indices");
    memset(p, 0, sizeof *p);
    lw_status st = lw__gpu_ops_grid(info, n_tokens, grid, &p->groups_x, "get_rows", err);
    if (st != LW_OK) return st;
    p->n = (uint32_t)n;
    p->n_tokens = (uint32_t)n_tokens;
    p->row_stride = (uint32_t)stride;
    p->w_offset = (uint32_t)w_offset;
    p->row_base = (uint32_t)row_base;
    p->row_count = (uint32_t)row_count;
    p->ids_offset = (uint32_t)ids_offset;
    p->d_offset = (uint32_t)d_offset;
    p->d_stride = (uint32_t)d_stride;
    return LW_OK;
}
