/* Mat-mat kernel family: variant checks, template expansion into a pipeline, and per-call planning. */
#include "webgpu/gpu-tune.h"
#include "webgpu/kernels-matmat.h"
#include "webgpu/wgsl-pp.h"

#include <stdio.h>
#include <string.h>

uint32_t lw__gpu_matmat_wg_size(const lw__gpu_matmat_variant *v) {
    if (!v->rm || !v->rn) return 0;
    if (v->smx) return (v->tm / (16 * v->rm)) * (v->tn / (16 * v->rn)) * 32u; /* subgroups of 32 */
    return (v->tm / v->rm) * (v->tn / v->rn);
}

/* Blocks of 8-bit activation scales a K step keeps per token (matmat.wgsl SB), and scales per block. */
static uint64_t actq_scales(const lw__gpu_matmat_variant *v) {
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const uint32_t ab = lw__gpu_actq_block(v->actq);
    if (!f || !ab) return 0;
    const uint64_t chunks = f->block / 8, ck = v->tk / 8, sub = f->block / ab;
    return ((ck + chunks - 1) / chunks + 1) * (sub ? sub : 1);
}

/* Sub-blocks per block of the idot formats (dequant-int.wgsl NSUB), 0 for the others. */
static uint32_t idot_subs(uint32_t type) {
    switch (type) {
    case LW_TYPE_Q8_0:
    case LW_TYPE_Q4_0:
    case LW_TYPE_Q4_1:
    case LW_TYPE_Q5_0:
    case LW_TYPE_Q5_1:
    case LW_TYPE_IQ4_NL:
        return 1;
    case LW_TYPE_Q4_K:
    case LW_TYPE_Q5_K:
        return 8;
    case LW_TYPE_Q6_K:
        return 16;
    default:
        return 0;
    }
}

bool lw__gpu_matmat_has_idot(uint32_t type) {
    return idot_subs(type) != 0;
}

bool lw__gpu_matmat_has_smx(uint32_t type) {
    /* every quantized format (its dq_chunk feeds the digits); F32/F16/BF16 keep the float tiles */
    const lw__gpu_format *f = lw__gpu_format_of(type);
    return f && f->block % 32 == 0;
}

bool lw__gpu_smx_available(const lw_gpu_info *info) {
    return info->smx_m == 16 && info->smx_n == 16 && info->smx_k == 32 && info->subgroup_min_size == 32 &&
           info->subgroup_max_size == 32;
}

uint64_t lw__gpu_matmat_wg_bytes(const lw__gpu_matmat_variant *v) {
    /* idot (matmat-q8.wgsl): (tm + tn) rows of tk / 4 + 1 words of quants; per row and block a vec2 of
     * scales and per sub-block one of integer scale and min; per token and block a vec2, and with
     * sub-blocks (the K formats) an i32 sum per sub-block */
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    if (v->smx) { /* matmat-smx.wgsl: two buffers of two digit tiles each of W and X (rows of tk bytes), and
                     one 16 x 16 i32 fragment per subgroup for the end (in X's tiles where they hold it) */
        const uint64_t sgs = lw__gpu_matmat_wg_size(v) / 32, row = (uint64_t)v->tk + 4u * v->pad,
                       x = 4u * (uint64_t)v->tn * row;
        return 4u * (uint64_t)v->tm * row + x + (x / 2 >= sgs * 1024u ? 0 : sgs * 1024u);
    }
    if (v->idot && f) {
        const uint64_t nb = v->tk / f->block, subs = idot_subs(v->type);
        return ((uint64_t)v->tm + v->tn) * ((uint64_t)v->tk / 4 + 1) * 4u +
               (uint64_t)v->tm * nb * (1 + subs) * 8u +
               (uint64_t)v->tn * nb * (8u + (subs > 1 ? subs * 4u : 0));
    }
    /* both tiles: (tm + tn) rows of tk / 4 + 1 vec4s (one of padding), vec4 of f16 or f32; with 8-bit
     * activation rounding, a vec2 scale per token per activation block of the step */
    return ((uint64_t)v->tm + v->tn) * ((uint64_t)v->tk / 4 + 1) * (v->f16 ? 8u : 16u) +
           (uint64_t)v->tn * actq_scales(v) * 8u;
}

void lw__gpu_matmat_round_acts(lw__gpu_matmat_variant *v) {
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    v->actq = f ? f->actq : LW_GPU_ACTQ_NONE;
    if (lw__gpu_actq_block(v->actq)) v->f16 = false; /* q * d is not an f16 */
}

lw__gpu_matmat_variant lw__gpu_matmat_default(const lw_gpu_info *info, uint32_t type) {
    return lw__gpu_matmat_tuned(NULL, info, type);
}

lw_status lw__gpu_matmat_check(const lw_gpu_info *info, const lw__gpu_matmat_variant *v, char *err) {
    const lw_type_info *ti = lw_type_get(v->type);
    if (!lw__gpu_format_of(v->type))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matmat: no GPU kernel for type %s", ti ? ti->name : "?");
    if (v->f16 && !info->has_f16)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "matmat: f16 variant needs shader-f16");
    if (v->tm < 1 || v->tm > 256 || v->tn < 1 || v->tn > 256 || v->tk < 8 || v->tk > 256 || v->tk % 8 ||
        v->rm < 1 || v->rm > 16 || v->rn < 1 || v->rn > 16 || v->tm % v->rm || v->tn % v->rn)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matmat: tiles %ux%ux%u with %ux%u per invocation break the template's rules",
                          v->tm, v->tn, v->tk, v->rm, v->rn);
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const uint32_t ab = lw__gpu_actq_block(v->actq);
    if (v->actq > LW_GPU_ACTQ_BF16 || (ab && (v->f16 || f->block % ab)))
        return lw__errorf(
            err, LW_ERR_INVALID_ARG,
            "matmat: activation rounding %u needs blocks of a multiple of its size and f32 tiles", v->actq);
    if (v->idot && (!lw__gpu_matmat_has_idot(v->type) || v->actq != f->actq || v->tk % f->block || v->f16))
        return lw__errorf(
            err, LW_ERR_INVALID_ARG,
            "matmat: integer products need Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/Q4_K/Q5_K/Q6_K "
            "weights, their 8-bit activation rounding, f32 and K steps of whole blocks (%s, actq "
            "%u, tk %u)",
            ti ? ti->name : "?", v->actq, v->tk);
    if (v->smx && (!lw__gpu_matmat_has_smx(v->type) || v->idot || v->f16 || v->tk % 32 ||
                   v->tm % (16 * v->rm) || v->tn % (16 * v->rn) || v->pad % 4 || v->pad > 16))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matmat: subgroup matrices need quantized weights (blocks of a multiple of 32), "
                          "f32, tk a multiple of 32, tm of 16 rm, tn of 16 rn and a row padding of 0..16 "
                          "words, a multiple of 4 (%s, %ux%ux%u, %ux%u fragments, pad %u)",
                          ti ? ti->name : "?", v->tm, v->tn, v->tk, v->rm, v->rn, v->pad);
    if (!v->smx && v->pad)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "matmat: row padding is the subgroup-matrix kernel's");
    if (v->smx && !lw__gpu_smx_available(info))
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "matmat: this device has no i8 16x16x32 subgroup matrices with 32-wide subgroups");
    if (v->idot && !v->smx && !info->has_dot4)
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "matmat: integer products need WGSL's dot4I8Packed "
                          "(packed_4x8_integer_dot_product)");
    uint32_t wg = lw__gpu_matmat_wg_size(v);
    if (wg > info->max_compute_invocations_per_workgroup || wg > info->max_compute_workgroup_size_x)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matmat: %u invocations per workgroup do not suit this device", wg);
    if (lw__gpu_matmat_wg_bytes(v) > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matmat: tiles %ux%ux%u need %llu bytes of workgroup memory (device: %u)", v->tm,
                          v->tn, v->tk, (unsigned long long)lw__gpu_matmat_wg_bytes(v),
                          info->max_compute_workgroup_storage_size);
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Pipeline
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__gpu_matmat_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                  const lw__gpu_matmat_variant *v, const lw_gpu_info *info,
                                  lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = lw__gpu_matmat_check(info, v, err);
    if (st != LW_OK) return st;
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    const lw_type_info *ti = lw_type_get(v->type);
    char label[LW_GPU_CACHE_KEY];
    char padn[16] = "";
    if (v->pad) snprintf(padn, sizeof padn, " p%u", v->pad);
    snprintf(label, sizeof label, "matmat %s%s t%ux%ux%u r%ux%u a%u%s%s", ti ? ti->name : "?",
             v->f16 ? " f16" : "", v->tm, v->tn, v->tk, v->rm, v->rn, v->actq,
             v->smx    ? " smx"
             : v->idot ? " idot"
                       : "",
             padn);
    char tm[12], tn[12], tk[12], rm[12], rn[12], wg[12], actq[12], pad[12];
    snprintf(pad, sizeof pad, "%u", v->pad);
    snprintf(actq, sizeof actq, "%u", v->actq);
    snprintf(tm, sizeof tm, "%u", v->tm);
    snprintf(tn, sizeof tn, "%u", v->tn);
    snprintf(tk, sizeof tk, "%u", v->tk);
    snprintf(rm, sizeof rm, "%u", v->rm);
    snprintf(rn, sizeof rn, "%u", v->rn);
    snprintf(wg, sizeof wg, "%u", lw__gpu_matmat_wg_size(v));
    lw__wgsl_define defs[] = {{"WEIGHT_TYPE", f->define},
                              {"F16", v->f16 ? "1" : "0"},
                              {"TM", tm},
                              {"TN", tn},
                              {"TK", tk},
                              {"RM", rm},
                              {"RN", rn},
                              {"WG_SIZE", wg},
                              {"ACTQ", actq},
                              {"RF", rm},
                              {"TF", rn},
                              {"PAD", pad}};
    static const lw_gpu_binding_kind kinds[LW_GPU_MATMAT_BINDINGS] = {
        LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label,
                                  v->smx    ? "matmat-smx.wgsl"
                                  : v->idot ? "matmat-q8.wgsl"
                                            : "matmat.wgsl",
                                  defs, sizeof defs / sizeof defs[0], kinds, LW_GPU_MATMAT_BINDINGS, out,
                                  err);
}

/* ---------------------------------------------------------------------------------------------------------
 * Planning one call
 * ------------------------------------------------------------------------------------------------------- */

/* *end = offset + (n - 1) * stride + len, the first element past a strided range; false on overflow. */
static bool strided_end(uint64_t offset, uint64_t n, uint64_t stride, uint64_t len, uint64_t *end) {
    uint64_t span;
    return lw__mul_u64(n - 1, stride, &span) && lw__add_u64(offset, span, end) && lw__add_u64(*end, len, end);
}

lw_status lw__gpu_matmat_plan(const lw_gpu_info *info, const lw__gpu_matmat_variant *v,
                              const lw__gpu_matmat_shape *s, lw__gpu_matmat_params *p, uint32_t grid[3],
                              char *err) {
    const lw__gpu_format *f = lw__gpu_format_of(v->type);
    if (!f) return lw__errorf(err, LW_ERR_UNSUPPORTED, "matmat: unsupported weight type %u", v->type);
    if (v->tm < 1 || v->tn < 1) return lw__errorf(err, LW_ERR_INVALID_ARG, "matmat: empty tile");
    uint64_t xs = s->x_stride ? s->x_stride : s->k, ys = s->y_stride ? s->y_stride : s->rows;
    if (s->rows == 0 || s->tokens == 0 || s->k == 0 || s->k % f->block)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "matmat: k=%llu must be a positive multiple of %u (rows=%llu, tokens=%llu)",
                          (unsigned long long)s->k, f->block, (unsigned long long)s->rows,
                          (unsigned long long)s->tokens);
    if (s->w_offset % 2 || s->x_offset % 4 || xs % 4 || xs < s->k || ys < s->rows)
        return lw__errorf(
            err, LW_ERR_INVALID_ARG,
            "matmat: misaligned offsets or short strides (w offset %llu even; x offset %llu and "
            "stride %llu multiples of 4, stride >= k; y stride %llu >= rows)",
            (unsigned long long)s->w_offset, (unsigned long long)s->x_offset, (unsigned long long)xs,
            (unsigned long long)ys);
    uint64_t bind = info->max_storage_buffer_binding_size, stride, w_end, x_end, y_end;
    /* the shader indexes bytes of W, vec4s of X and elements of Y with u32, within one binding each */
    if (!lw__mul_u64(s->k / f->block, f->block_bytes, &stride) ||
        !strided_end(s->w_offset, s->rows, stride, stride, &w_end) || w_end > UINT32_MAX || w_end > bind)
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "matmat: %llu x %llu weights exceed one binding (%llu bytes)",
                          (unsigned long long)s->rows, (unsigned long long)s->k, (unsigned long long)bind);
    uint64_t smx_bytes = 0;
    if (v->smx && (s->k % 32 || lw__gpu_smx_prep_bytes(s->k, s->tokens, s->rows, &smx_bytes) != LW_OK ||
                   smx_bytes > bind || smx_bytes / 4 > UINT32_MAX))
        return lw__errorf(err, LW_ERR_TOO_LARGE,
                          "matmat: the digits of %llu tokens of k=%llu (a multiple of 32) exceed one binding",
                          (unsigned long long)s->tokens, (unsigned long long)s->k);
    if ((v->smx && s->k > 65536) || /* the cross accumulator: 2 * 127 * 128 * k must stay below 2^31 */
        (!v->smx && (!strided_end(s->x_offset, s->tokens, xs, s->k, &x_end) || x_end > bind / 4 ||
                     x_end / 4 > UINT32_MAX)) ||
        !strided_end(s->y_offset, s->tokens, ys, s->rows, &y_end) || y_end > bind / 4 || y_end > UINT32_MAX)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matmat: %llu tokens of X or Y exceed one binding",
                          (unsigned long long)s->tokens);
    uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    /* the matrix units: row and token tiles fold together over x and y, token tiles fastest (a row tile's
     * workgroups run side by side, so its W words come from DRAM once); the others: row tiles over x and y,
     * token tiles over z */
    const uint64_t row_tiles = (s->rows + v->tm - 1) / v->tm, tok_tiles = (s->tokens + v->tn - 1) / v->tn;
    uint64_t groups = v->smx ? row_tiles * tok_tiles : row_tiles, gx = groups < gmax ? groups : gmax,
             gy = (groups + gx - 1) / gx, gz = v->smx ? 1 : tok_tiles;
    if (gy > gmax || gz > gmax)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "matmat: %llu rows x %llu tokens exceed the dispatch grid",
                          (unsigned long long)s->rows, (unsigned long long)s->tokens);
    *p = (lw__gpu_matmat_params){(uint32_t)s->k,
                                 (uint32_t)s->rows,
                                 (uint32_t)s->tokens,
                                 (uint32_t)stride,
                                 (uint32_t)s->w_offset,
                                 (uint32_t)(s->x_offset / 4),
                                 (uint32_t)(xs / 4),
                                 (uint32_t)s->y_offset,
                                 (uint32_t)ys,
                                 (uint32_t)gx,
                                 {v->smx ? (uint32_t)tok_tiles : 0, 0}};
    grid[0] = (uint32_t)gx;
    grid[1] = (uint32_t)gy;
    grid[2] = (uint32_t)gz;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * The subgroup-matrix kernel's prep pass (shaders/smx-prep.wgsl): X's 16-bit digits, W's row maxima
 * ------------------------------------------------------------------------------------------------------- */

#define SMX_PREP_WG  256u /* invocations per workgroup: a token each, or SMX_PREP_RPW rows          */
#define SMX_PREP_RPW 4u   /* rows of W per workgroup (64 invocations stride each row's chunks)       */

lw_status lw__gpu_smx_prep_bytes(uint64_t k, uint64_t tokens, uint64_t rows, uint64_t *bytes) {
    /* X's two planes of whole 16-token fragments, a max per token and per row, up to a multiple of 4 words,
     * W's two planes (smx-prep.wgsl's layout) */
    uint64_t words, w_planes;
    if (tokens > UINT32_MAX || !lw__mul_u64((tokens + 15) / 16 * 16, k / 2, &words) ||
        !lw__add_u64(words, tokens, &words) || !lw__add_u64(words, rows + 3, &words) ||
        !lw__mul_u64(rows, k / 2, &w_planes) || !lw__add_u64(words / 4 * 4, w_planes, &words) ||
        !lw__mul_u64(words, 4, bytes))
        return LW_ERR_TOO_LARGE;
    return LW_OK;
}

lw_status lw__gpu_smx_prep_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, uint32_t type, const lw_gpu_info *info,
                                    lw_gpu_pipeline *out, char *err) {
    *out = 0;
    const lw__gpu_format *f = lw__gpu_format_of(type);
    const lw_type_info *ti = lw_type_get(type);
    if (!f || !lw__gpu_matmat_has_smx(type))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "smx-prep: no subgroup-matrix kernel for %s",
                          ti ? ti->name : "?");
    if (SMX_PREP_WG > info->max_compute_invocations_per_workgroup)
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "smx-prep: needs %u invocations per workgroup",
                          SMX_PREP_WG);
    char label[LW_GPU_CACHE_KEY], wg[12], rpw[12], actq[12];
    /* X rounded as the CPU rounds it for the format (its 8-bit blocks; the float roundings do not apply) */
    const uint32_t aq = lw__gpu_actq_block(f->actq) ? f->actq : LW_GPU_ACTQ_NONE;
    snprintf(label, sizeof label, "smx-prep %s a%u", ti ? ti->name : "?", aq);
    snprintf(actq, sizeof actq, "%u", aq);
    snprintf(wg, sizeof wg, "%u", SMX_PREP_WG);
    snprintf(rpw, sizeof rpw, "%u", SMX_PREP_RPW);
    lw__wgsl_define defs[] = {{"WEIGHT_TYPE", f->define}, {"WG_SIZE", wg}, {"RPW", rpw}, {"ACTQ", actq}};
    static const lw_gpu_binding_kind kinds[LW_GPU_SMX_PREP_BINDINGS] = {
        LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM};
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, "smx-prep.wgsl", defs,
                                  sizeof defs / sizeof defs[0], kinds, LW_GPU_SMX_PREP_BINDINGS, out, err);
}

lw_status lw__gpu_smx_prep_plan(const lw_gpu_info *info, uint32_t type, const lw__gpu_matmat_shape *s,
                                uint64_t tokens, lw__gpu_smx_prep_params *p, uint32_t grid[3], char *err) {
    const lw__gpu_format *f = lw__gpu_format_of(type);
    if (!f || !lw__gpu_matmat_has_smx(type))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "smx-prep: unsupported weight type %u", type);
    const uint64_t xs = s->x_stride ? s->x_stride : s->k;
    uint64_t bytes, stride, span, end;
    if (s->rows == 0 || s->tokens == 0 || s->k == 0 || s->k % 32 || s->k % f->block || tokens > s->tokens ||
        s->x_offset % 4 || xs % 4 || xs < s->k || s->w_offset % 2)
        return lw__errorf(
            err, LW_ERR_INVALID_ARG,
            "smx-prep: k=%llu (a multiple of 32 and of the block), %llu of %llu tokens, x at %llu "
            "stride %llu (multiples of 4)",
            (unsigned long long)s->k, (unsigned long long)tokens, (unsigned long long)s->tokens,
            (unsigned long long)s->x_offset, (unsigned long long)xs);
    if (lw__gpu_smx_prep_bytes(s->k, s->tokens, s->rows, &bytes) != LW_OK ||
        bytes > info->max_storage_buffer_binding_size ||
        !lw__mul_u64(s->k / f->block, f->block_bytes, &stride) || !lw__mul_u64(s->rows, stride, &span) ||
        !lw__add_u64(span, s->w_offset, &end) || end > UINT32_MAX || !lw__mul_u64(s->tokens - 1, xs, &span) ||
        !lw__add_u64(span, s->x_offset + s->k, &end) || end / 4 > UINT32_MAX)
        return lw__errorf(
            err, LW_ERR_TOO_LARGE, "smx-prep: %llu x %llu weights or %llu tokens exceed a binding",
            (unsigned long long)s->rows, (unsigned long long)s->k, (unsigned long long)s->tokens);
    uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    const uint64_t groups = tokens + (s->rows + SMX_PREP_RPW - 1) / SMX_PREP_RPW,
                   gx = groups < gmax ? groups : gmax, gy = (groups + gx - 1) / gx;
    if (gy > gmax)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "smx-prep: %llu rows exceed the grid",
                          (unsigned long long)s->rows);
    *p = (lw__gpu_smx_prep_params){(uint32_t)s->k,
                                   (uint32_t)s->rows,
                                   (uint32_t)tokens,
                                   (uint32_t)s->tokens,
                                   (uint32_t)stride,
                                   (uint32_t)s->w_offset,
                                   (uint32_t)(s->x_offset / 4),
                                   (uint32_t)(xs / 4),
                                   (uint32_t)gx,
                                   {0, 0, 0}};
    grid[0] = (uint32_t)gx;
    grid[1] = (uint32_t)gy;
    grid[2] = 1;
    return LW_OK;
}
