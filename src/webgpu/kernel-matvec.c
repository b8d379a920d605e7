/* Mat-vec kernel family: variant choice, template expansion into a pipeline, and per-call planning. */
#include "webgpu/gpu-tune.h"
#include "webgpu/kernels-matmat.h"
#include "webgpu/kernels.h"
#include "webgpu/wgsl-pp.h"

#include <stdio.h>
#include <string.h>

bool lw__gpu_matvec_supported(uint32_t type) {
    return lw__gpu_format_of(type) != NULL;
}

uint32_t lw__gpu_matvec_block(uint32_t type) {
    const lw__gpu_format *f = lw__gpu_format_of(type);
    return f ? f->block : 0;
}

bool lw__gpu_matvec_has_exact(uint32_t type, bool repacked) {
    switch (type) {
    case LW_TYPE_TQ1_0:
    case LW_TYPE_TQ2_0:
    case LW_TYPE_IQ1_S:
    case LW_TYPE_IQ1_M:
    case LW_TYPE_IQ2_XXS:
    case LW_TYPE_IQ2_XS:
    case LW_TYPE_IQ2_S:
    case LW_TYPE_IQ3_XXS:
    case LW_TYPE_IQ3_S:
    case LW_TYPE_Q3_K:
    case LW_TYPE_Q5_K:
    case LW_TYPE_Q6_K:
        return true;
    case LW_TYPE_Q2_K:
    case LW_TYPE_Q4_K:
        return repacked;
    default:
        return false;
    }
}

/* The measured defaults live with the run-time overrides in gpu-tune.c. */
lw__gpu_matvec_variant lw__gpu_matvec_default(const lw_gpu_info *info, uint32_t type) {
    return lw__gpu_matvec_tuned(NULL, info, type);
}

void lw__gpu_matvec_round_acts(lw__gpu_matvec_variant *v) {
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    v->actq = f ? f->actq : LW_GPU_ACTQ_NONE;
    if (lw__gpu_actq_block(v->actq)) {
        /* a block's activation scale is computed by the invocation that takes the block, or per K step */
        if (!v->stage) v->blocks = true;
        v->f16 = false; /* q * d of an 8-bit activation is not an f16 value */
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Pipeline
 * ------------------------------------------------------------------------------------------------------- */

/* Both pipelines: glu = 0 (plain), LW_GPU_GLU_SILU or LW_GPU_GLU_GELU (X_GLU). */
static lw_status matvec_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                 const lw__gpu_matvec_variant *v, uint32_t glu, const lw_gpu_info *info,
                                 lw_gpu_pipeline *out, char *err) {
    *out = 0;
    if (glu > LW_GPU_GLU_GELU) return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: unknown GLU %u", glu);
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const lw_type_info *ti = lw_type_get(v->type);
    if (!f)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec: no GPU kernel for type %s", ti ? ti->name : "?");
    if (v->f16 && !info->has_f16)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec: f16 variant needs shader-f16");
    if (v->subgroups && !info->has_subgroups)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec: subgroup variant needs the subgroups feature");
    if (v->wg_size == 0 || (v->wg_size & (v->wg_size - 1)) ||
        v->wg_size > info->max_compute_invocations_per_workgroup ||
        v->wg_size > info->max_compute_workgroup_size_x)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: workgroup size %u does not suit this device",
                          v->wg_size);
    if (v->rows < 1 || v->rows > 16 ||
        (uint64_t)v->wg_size * v->rows * 4 > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec: %u rows per workgroup of %u do not suit this device", v->rows, v->wg_size);
    char wg[16], rows[16], actq[4], xglu[4], stage[16];
    snprintf(xglu, sizeof xglu, "%u", glu);
    snprintf(wg, sizeof wg, "%u", v->wg_size);
    snprintf(rows, sizeof rows, "%u", v->rows);
    char label[LW_GPU_CACHE_KEY];
    static const lw_gpu_binding_kind kinds[LW_GPU_MATVEC_BINDINGS + 1] = {
        LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM,
        LW_GPU_BIND_STORAGE_READ}; /* X_GLU=2: the GELU table */
    const uint32_t n_kinds = LW_GPU_MATVEC_BINDINGS + (glu == LW_GPU_GLU_GELU);
    if (v->exact) { /* the CPU's order: integer sums shared through workgroup atomics, one float chain per row
                     */
        if (!lw__gpu_matvec_has_exact(v->type, true))
            return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec: no exact CPU order for type %s",
                              ti ? ti->name : "?");
        snprintf(label, sizeof label, "matvec-exact %s wg%u r%u%s", ti ? ti->name : "?", v->wg_size, v->rows,
                 glu == LW_GPU_GLU_SILU   ? " swiglu"
                 : glu == LW_GPU_GLU_GELU ? " geglu"
                                          : "");
        lw__wgsl_define defs[] = {
            {"WEIGHT_TYPE", f->define}, {"WG_SIZE", wg}, {"ROWS", rows}, {"X_GLU", xglu}};
        return lw__gpu_build_pipeline(gpu, cache, alloc, label, "matvec-exact.wgsl", defs,
                                      sizeof defs / sizeof defs[0], kinds, n_kinds, out, err);
    }

    if (v->idot) { /* integer products over x quantized by lw__gpu_actq_quant_* */
        if (glu || !lw__gpu_matmat_has_idot(v->type) || v->actq != f->actq || !info->has_dot4)
            return lw__errorf(
                err, LW_ERR_UNSUPPORTED,
                "matvec: no integer-product variant for type %s here (GLU %u, actq %u, dot4 %d)",
                ti ? ti->name : "?", glu, v->actq, info->has_dot4 ? 1 : 0);
        if (v->rows > v->wg_size) /* matvec-reduce.wgsl: invocation r stores row r */
            return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: %u rows need as many invocations (%u)",
                              v->rows, v->wg_size);
        if (v->pair && v->type != LW_TYPE_Q4_0 && v->type != LW_TYPE_Q8_0) /* (oct is a kind of pair) */
            return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec: block pairs are for Q4_0 and Q8_0");
        snprintf(label, sizeof label, "matvec-q8 %s%s wg%u r%u%s", ti ? ti->name : "?",
                 v->subgroups ? " sg" : "", v->wg_size, v->rows,
                 v->oct    ? " oct"
                 : v->pair ? " pair"
                           : "");
        snprintf(actq, sizeof actq, "%u", v->actq);
        lw__wgsl_define defs[] = {{"WEIGHT_TYPE", f->define},
                                  {"WG_SIZE", wg},
                                  {"ROWS", rows},
                                  {"SUBGROUPS", v->subgroups ? "1" : "0"},
                                  {"ACTQ", actq},
                                  {"PAIR", v->pair ? "1" : "0"},
                                  {"OCT", v->oct ? "1" : "0"}};
        return lw__gpu_build_pipeline(gpu, cache, alloc, label, "matvec-q8.wgsl", defs,
                                      sizeof defs / sizeof defs[0], kinds, LW_GPU_MATVEC_BINDINGS, out, err);
    }

    const uint32_t ab = lw__gpu_actq_block(v->actq);
    if (v->actq > LW_GPU_ACTQ_BF16 || (ab && ((!v->blocks && !v->stage) || v->f16 || f->block % ab)))
        return lw__errorf(
            err, LW_ERR_INVALID_ARG,
            "matvec: activation rounding %u needs whole blocks of a multiple of its size and f32", v->actq);
    /* STAGE: ROWS tiles of stage words (at least one block and its misalignment), plus the step's activation
     * scales, beside the reduction's ROWS x WG_SIZE floats */
    const uint64_t nb = v->stage ? ((uint64_t)v->stage * 4 - 3) / f->block_bytes : 0;
    const uint64_t stage_bytes = (uint64_t)v->rows * v->stage * 4 + (ab ? nb * (f->block / ab) * 8 : 0);
    if (v->stage &&
        (v->stage > 8192 || nb < 1 ||
         (uint64_t)v->wg_size * v->rows * 4 + stage_bytes > info->max_compute_workgroup_storage_size))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec: a weight tile of %u words per row does not suit this format or device",
                          v->stage);

    char st[16] = "";
    if (v->stage) snprintf(st, sizeof st, " s%u", v->stage);
    snprintf(label, sizeof label, "matvec %s%s%s wg%u r%u%s a%u%s%s", ti ? ti->name : "?",
             v->f16 ? " f16" : "", v->subgroups ? " sg" : "", v->wg_size, v->rows, v->blocks ? " b" : "",
             v->actq, st,
             glu == LW_GPU_GLU_SILU   ? " swiglu"
             : glu == LW_GPU_GLU_GELU ? " geglu"
                                      : "");
    snprintf(stage, sizeof stage, "%u", v->stage);
    snprintf(actq, sizeof actq, "%u", v->actq);
    lw__wgsl_define defs[] = {{"WEIGHT_TYPE", f->define},
                              {"F16", v->f16 ? "1" : "0"},
                              {"SUBGROUPS", v->subgroups ? "1" : "0"},
                              {"WG_SIZE", wg},
                              {"ROWS", rows},
                              {"BLOCKS", v->blocks ? "1" : "0"},
                              {"ACTQ", actq},
                              {"X_GLU", xglu},
                              {"STAGE", stage}};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "matvec.wgsl", defs, sizeof defs / sizeof defs[0],
                                  kinds, n_kinds, out, err);
}

lw_status lw__gpu_matvec_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                  const lw__gpu_matvec_variant *v, const lw_gpu_info *info,
                                  lw_gpu_pipeline *out, char *err) {
    return matvec_pipeline(gpu, cache, alloc, v, 0, info, out, err);
}

lw_status lw__gpu_matvec_glu_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                      const lw_allocator *alloc, const lw__gpu_matvec_variant *v,
                                      uint32_t glu, const lw_gpu_info *info, lw_gpu_pipeline *out,
                                      char *err) {
    if (glu != LW_GPU_GLU_SILU && glu != LW_GPU_GLU_GELU)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: unknown GLU %u", glu);
    return matvec_pipeline(gpu, cache, alloc, v, glu, info, out, err);
}

/* ---------------------------------------------------------------------------------------------------------
 * Planning one call
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__gpu_matvec_plan(const lw_gpu_info *info, const lw__gpu_matvec_variant *v, uint64_t rows,
                              uint64_t k, uint64_t w_offset, uint64_t x_offset, uint64_t y_offset,
                              lw__gpu_matvec_params *p, uint32_t grid[3], char *err) {
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    if (!f) return lw__errorf(err, LW_ERR_UNSUPPORTED, "matvec: unsupported weight type %u", v->type);
    if (v->rows < 1 || v->rows > 16)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: %u rows per workgroup", v->rows);
    /* f32/f16 (bytes per element are whole): any k that is a multiple of 4 (x is read as vec4) */
    const bool plain = f->block_bytes % f->block == 0;
    if (rows == 0 || k == 0 || (plain ? k % 4 : k % f->block))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec: k=%llu must be a positive multiple of %u (rows=%llu)",
                          (unsigned long long)k, f->block, (unsigned long long)rows);
    if (w_offset % 2 || x_offset % 4)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec: misaligned offsets (w %llu must be even, x %llu a "
                          "multiple of 4)",
                          (unsigned long long)w_offset, (unsigned long long)x_offset);
    uint64_t stride, w_end, last;
    /* the shader indexes bytes with u32: the whole matrix must lie below 4 GiB of its binding */
    if (!lw__mul_u64(plain ? k : k / f->block, plain ? f->block_bytes / f->block : f->block_bytes, &stride) ||
        !lw__mul_u64(stride, rows - 1, &last) || !lw__add_u64(last, stride, &w_end) ||
        !lw__add_u64(w_end, w_offset, &w_end) || w_end > UINT32_MAX ||
        w_end > info->max_storage_buffer_binding_size)
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "matvec: %llu x %llu weights exceed one binding (%llu bytes)",
                          (unsigned long long)rows, (unsigned long long)k,
                          (unsigned long long)info->max_storage_buffer_binding_size);
    if (v->idot && (v->type == LW_TYPE_Q4_K || v->type == LW_TYPE_Q5_K) && w_offset % 4)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: integer Q4_K / Q5_K rows must be 4-byte aligned");
    if (v->idot && v->pair && (k % 64 || stride % 4 || w_offset % 4))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matvec: block pairs need k %% 64 == 0 and aligned rows");
    if (v->idot && v->oct && (k % 256 || stride % 16 || w_offset % 16))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec: eight-block steps need k %% 256 == 0 and 16-byte aligned rows");
    if (rows > UINT32_MAX || x_offset / 4 > UINT32_MAX || y_offset > UINT32_MAX - rows || k >= 0x80000000u)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matvec: offsets or rows beyond 32 bits");
    uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    uint64_t groups = (rows + v->rows - 1) / v->rows, gx = groups < gmax ? groups : gmax,
             gy = (groups + gx - 1) / gx;
    if (gy > gmax)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matvec: %llu rows exceed the dispatch grid",
                          (unsigned long long)rows);
    *p = (lw__gpu_matvec_params){(uint32_t)k,
                                 (uint32_t)rows,
                                 (uint32_t)stride,
                                 (uint32_t)w_offset,
                                 (uint32_t)(x_offset / 4),
                                 (uint32_t)y_offset,
                                 (uint32_t)gx,
                                 0,
                                 0,
                                 {0, 0, 0}};
    grid[0] = (uint32_t)gx;
    grid[1] = (uint32_t)gy;
    grid[2] = 1;
    return LW_OK;
}

lw_status lw__gpu_matvec_glu_plan(const lw_gpu_info *info, const lw__gpu_matvec_variant *v, uint64_t rows,
                                  uint64_t k, uint64_t w_offset, uint64_t g_offset, uint64_t u_offset,
                                  uint64_t y_offset, lw__gpu_matvec_params *p, uint32_t grid[3], char *err) {
    lw_status st = lw__gpu_matvec_plan(info, v, rows, k, w_offset, g_offset, y_offset, p, grid, err);
    if (st != LW_OK) return st;
    if (u_offset % 4 || u_offset < g_offset + k || (u_offset - g_offset) / 4 > UINT32_MAX ||
        u_offset / 4 > UINT32_MAX - k / 4)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matvec: u at %llu must be a multiple of 4 after g (%llu + %llu)",
                          (unsigned long long)u_offset, (unsigned long long)g_offset, (unsigned long long)k);
    p->x_up = (uint32_t)((u_offset - g_offset) / 4);
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * The integer mat-vec's activation quantizer
 * ------------------------------------------------------------------------------------------------------- */

#define ACTQ_QUANT_WG 256u /* invocations (one per 4 elements): a 4096-wide x is 4 workgroups */

uint64_t lw__gpu_actq_quant_bytes(uint64_t k) {
    return k + (k / 32 + 1) / 2 * 16; /* the mat-vec reads the groups' pairs as vec4s: whole ones */
}

lw_status lw__gpu_actq_quant_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                      const lw_allocator *alloc, uint32_t actq, uint32_t glu,
                                      const lw_gpu_info *info, lw_gpu_pipeline *out, char *err) {
    *out = 0;
    if ((actq != LW_GPU_ACTQ_Q8_0 && actq != LW_GPU_ACTQ_Q8_K) || (glu && glu != LW_GPU_GLU_SILU))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "actq-quant: 8-bit kinds and SwiGLU only (got %u, %u)",
                          actq, glu);
    if (!info->has_dot4)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "actq-quant: needs packed_4x8_integer_dot_product");
    char label[LW_GPU_CACHE_KEY], kind[4], wg[8];
    snprintf(label, sizeof label, "actq-quant a%u%s", actq, glu ? " swiglu" : "");
    snprintf(kind, sizeof kind, "%u", actq);
    snprintf(wg, sizeof wg, "%u", ACTQ_QUANT_WG);
    static const lw_gpu_binding_kind kinds[LW_GPU_ACTQ_QUANT_BINDINGS] = {
        LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM};
    lw__wgsl_define defs[] = {{"ACTQ", kind}, {"WG_SIZE", wg}, {"X_GLU", glu ? "1" : "0"}};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "actq-quant.wgsl", defs,
                                  sizeof defs / sizeof defs[0], kinds, LW_GPU_ACTQ_QUANT_BINDINGS, out, err);
}

lw_status lw__gpu_actq_quant_plan(const lw_gpu_info *info, uint32_t actq, uint64_t k, uint64_t x_offset,
                                  uint64_t u_offset, lw__gpu_actq_quant_params *p, uint32_t grid[3],
                                  char *err) {
    const uint64_t blk = lw__gpu_actq_block(actq);
    if (!blk || k == 0 || k % blk || x_offset % 4 || k >= 0x80000000u || x_offset / 4 > UINT32_MAX - k / 4 ||
        (u_offset && (u_offset % 4 || u_offset < x_offset + k || u_offset / 4 > UINT32_MAX - k / 4)))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "actq-quant: k=%llu (kind %u) at %llu, u at %llu",
                          (unsigned long long)k, actq, (unsigned long long)x_offset,
                          (unsigned long long)u_offset);
    uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    uint64_t groups = (k / 4 + ACTQ_QUANT_WG - 1) / ACTQ_QUANT_WG, gx = groups < gmax ? groups : gmax,
             gy = (groups + gx - 1) / gx;
    *p = (lw__gpu_actq_quant_params){(uint32_t)k,
                                     (uint32_t)(x_offset / 4),
                                     (uint32_t)gx,
                                     (uint32_t)(u_offset ? (u_offset - x_offset) / 4 : 0),
                                     0,
                                     1,
                                     {0, 0}};
    grid[0] = (uint32_t)gx;
    grid[1] = (uint32_t)gy;
    grid[2] = 1;
    return LW_OK;
}

uint64_t lw__gpu_actq_rows_bytes(uint64_t k, uint64_t tokens) {
    return tokens * k + (tokens * (k / 32) + 1) / 2 * 16;
}

lw_status lw__gpu_actq_quant_plan_rows(const lw_gpu_info *info, uint32_t actq, uint64_t k, uint64_t x_offset,
                                       uint64_t x_stride, uint64_t tokens, lw__gpu_actq_quant_params *p,
                                       uint32_t grid[3], char *err) {
    uint64_t span, end;
    uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    if (tokens == 0 || tokens > gmax || x_stride % 4 || x_stride < k ||
        !lw__mul_u64(tokens - 1, x_stride, &span) || !lw__add_u64(x_offset, span, &end) ||
        end / 4 > UINT32_MAX - k / 4 || !lw__mul_u64(tokens, k, &span) || span / 4 > UINT32_MAX / 2)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "actq-quant: %llu tokens of k=%llu at stride %llu",
                          (unsigned long long)tokens, (unsigned long long)k, (unsigned long long)x_stride);
    lw_status st = lw__gpu_actq_quant_plan(info, actq, k, x_offset, 0, p, grid, err);
    if (st != LW_OK) return st;
    p->x_stride = (uint32_t)(x_stride / 4);
    p->tokens = (uint32_t)tokens;
    grid[2] = (uint32_t)tokens;
    return LW_OK;
}
