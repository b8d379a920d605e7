/* Attention kernel family (kernels-attn.h): variant choice, template expansion into pipelines, scratch
 * sizing and per-call planning for the decode (split-KV + reduce) and prefill (tiled) kernels. */
#include "webgpu/kernels-attn.h"
#include "webgpu/gpu-tune.h"
#include "webgpu/wgsl-pp.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Variants
 * ------------------------------------------------------------------------------------------------------- */

#define ATTN_MAX_HEAD_DIM 256u /* the largest D: Gemma's 256 */
#define ATTN_MAX_GROUP    16u  /* the largest GQA ratio (query heads per KV head) */

uint32_t lw__gpu_kv_block_words(uint32_t kv_type) {
    return kv_type == LW_TYPE_Q8_0   ? 9  /* 8 words of int8 quants + 1 of scale */
           : kv_type == LW_TYPE_Q4_0 ? 5  /* 4 words of 4-bit quants + 1 of scale */
                                     : 0; /* not quantized (or no kernels)        */
}

bool lw__gpu_kv_cell_bytes(uint32_t kv_type, uint64_t kv_row, uint64_t *bytes) {
    *bytes = 0;
    switch (kv_type) {
    case LW_TYPE_F32:
        return lw__mul_u64(kv_row, 4, bytes);
    case LW_TYPE_F16:
        return lw__mul_u64(kv_row, 2, bytes);
    case LW_TYPE_Q8_0:
    case LW_TYPE_Q4_0:
        return kv_row % 32 == 0 &&
               lw__mul_u64(kv_row / 32, 4 * (uint64_t)lw__gpu_kv_block_words(kv_type), bytes);
    default:
        return false;
    }
}

bool lw__gpu_attn_supported(uint32_t kv_type, uint32_t head_dim, uint32_t group) {
    /* a quantized head is whole blocks (the CPU context asks the same of its quantized caches) */
    const bool kv_ok = kv_type == LW_TYPE_F16 || kv_type == LW_TYPE_F32 ||
                       (lw__gpu_kv_block_words(kv_type) && head_dim % 32 == 0);
    return kv_ok && head_dim >= 4 && head_dim % 4 == 0 && head_dim <= ATTN_MAX_HEAD_DIM && group >= 1 &&
           group <= ATTN_MAX_GROUP;
}

/* The cache type's name in labels and messages. */
static const char *kv_name(uint32_t kv_type) {
    return kv_type == LW_TYPE_F16    ? "f16"
           : kv_type == LW_TYPE_F32  ? "f32"
           : kv_type == LW_TYPE_Q8_0 ? "q8_0"
           : kv_type == LW_TYPE_Q4_0 ? "q4_0"
                                     : "?";
}

uint64_t lw__gpu_attn_wg_bytes(const lw__gpu_attn_variant *v, lw__gpu_attn_kernel k) {
    const uint64_t d4 = v->head_dim / 4, g = v->group, wg = v->wg_size;
    switch (k) {
    case LW_GPU_ATTN_DECODE: /* qs, ps, red_m + red_l, red_v (when outputs are fewer than invocations) */
        return 16 * g * d4 + 4 * g * v->chunk + 8 * wg + (g * d4 < wg ? 16 * wg : 0);
    case LW_GPU_ATTN_PREFILL: /* qs, kvs (padded K dims), ss (padded rows), red, als */
        return 16 * ((uint64_t)v->bq * d4 + ((uint64_t)v->bk + 1) * d4 + (uint64_t)v->bq * (v->bk / 4 + 1)) +
               4 * (uint64_t)v->pwg + 4 * (uint64_t)v->bq;
    case LW_GPU_ATTN_EXACT: /* qv, 4 arrays of 256 cells, s_final */
        return 16 * d4 + 16 * 256 + 4;
    default:
        return 0;
    }
}

/* Why variant v of kernel k cannot run on the device (a message in err), or LW_OK. */
static lw_status check_variant(const lw__gpu_attn_variant *v, lw__gpu_attn_kernel k, const lw_gpu_info *info,
                               char *err) {
    if (!lw__gpu_attn_supported(v->kv_type, v->head_dim, v->group))
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "attn: no GPU kernel for a %s cache, head dim %u, %u query heads per KV head",
                          kv_name(v->kv_type), v->head_dim, v->group);
    if ((unsigned)k >= LW_GPU_ATTN_KERNELS)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "attn: kernel %d", (int)k);
    const uint32_t wg = k == LW_GPU_ATTN_PREFILL ? v->pwg : v->wg_size;
    if (wg == 0 || (wg & (wg - 1)) || wg > info->max_compute_invocations_per_workgroup ||
        wg > info->max_compute_workgroup_size_x)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "attn: workgroup size %u does not suit this device", wg);
    if (k == LW_GPU_ATTN_DECODE && (v->wg_size < v->group || v->chunk == 0))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "attn-decode: workgroup size %u must be at least the group (%u), chunk > 0",
                          v->wg_size, v->group);
    if (k == LW_GPU_ATTN_DECODE && (v->vb > 64 || v->kb > 64 || (v->kb && (v->head_dim / 4) % v->kb)))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "attn-decode: K quads at a time (%u) must divide the head's %u, at most 64 of each",
                          v->kb, v->head_dim / 4);
    if (k == LW_GPU_ATTN_DECODE && v->one_max > v->chunk)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "attn-decode: one split of up to %u cells exceeds the chunk %u", v->one_max,
                          v->chunk);
    if (k == LW_GPU_ATTN_DECODE && v->q8_out &&
        (v->q8_out != LW_GPU_ACTQ_Q8_0 || v->head_dim % 32 || !info->has_dot4))
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "attn-decode: an 8-bit output needs a head dim of a multiple of 32 (not %u)",
                          v->head_dim);
    if (k == LW_GPU_ATTN_PREFILL && (v->bq == 0 || v->pwg % v->bq || v->bk == 0 || v->bk % 4))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "attn-prefill: %u rows per tile must divide the workgroup size %u, cells (%u) be a "
                          "multiple of 4",
                          v->bq, v->pwg, v->bk);
    if (k == LW_GPU_ATTN_PREFILL &&
        (v->rq == 0 || v->bq % v->rq || v->rk == 0 || v->bk % v->rk || v->rq * v->rk > 64))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "attn-prefill: register blocks of %u rows x %u cells must divide the %u x %u tile "
                          "(at most 64 scores)",
                          v->rq, v->rk, v->bq, v->bk);
    /* EXACT follows the CPU's f16 / f32 kernels; the CPU reads a quantized cache in its flash-attention
     * order, which EXACT does not follow: a quantized cache never takes it (gpu-model-attn.c) */
    if (k == LW_GPU_ATTN_EXACT && lw__gpu_kv_block_words(v->kv_type))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "attn-exact: no kernel for a %s cache",
                          kv_name(v->kv_type));
    if (k == LW_GPU_ATTN_DECODE && v->rope && lw__gpu_kv_block_words(v->kv_type))
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "attn-decode: the RoPE prologue writes f16 / f32 cells, not a %s cache's blocks",
                          kv_name(v->kv_type));
    if (k == LW_GPU_ATTN_EXACT && v->kv_type == LW_TYPE_F16 && v->head_dim % 64)
        return lw__errorf(err, LW_ERR_UNSUPPORTED,
                          "attn-exact: an f16 cache needs a head dim that is a multiple of 64 (not %u)",
                          v->head_dim);
    const uint64_t bytes = lw__gpu_attn_wg_bytes(v, k);
    if (bytes > info->max_compute_workgroup_storage_size)
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "attn: %llu bytes of workgroup memory exceed the device's %u",
                          (unsigned long long)bytes, info->max_compute_workgroup_storage_size);
    return LW_OK;
}

lw__gpu_attn_variant lw__gpu_attn_default(const lw_gpu_info *info, uint32_t kv_type, uint32_t head_dim,
                                          uint32_t group) {
    lw__gpu_attn_variant v = {.kv_type = kv_type,
                              .head_dim = head_dim,
                              .group = group,
                              .wg_size = 64,
                              .chunk = 256,
                              .splits = 16,
                              .min_chunk = 64,
                              .decode_max = 4,
                              .pwg = 64};
    const bool gpu = !lw__gpu_cpu_adapter(info);
    /* GPUs: 128 invocations and up to 32 splits of at least 32 cells, so a short context still fills the
     * device (H200, llama-3.2-1b shape decoding after 512 tokens: 9 splits x 8 KV heads = 72 workgroups took
     * 46 us per layer, more and smaller splits ~15 us, plus a reduce that grows with the splits: 32 x 32 was
     * the best tg128 of three); CPU adapters keep the above, and so do devices whose bindings are no larger
     * than WebGPU's default 128 MiB (the split partials' scratch doubles and must fit one binding) */
    if (gpu && info->max_storage_buffer_binding_size > (128u << 20)) {
        v.wg_size = 128;
        v.splits = 32;
        v.min_chunk = 32;
    }
    char err[LW_ERRMSG_SIZE];
    /* decode: the largest chunk that fits */
    while (v.chunk > 32 && check_variant(&v, LW_GPU_ATTN_DECODE, info, err) != LW_OK) v.chunk /= 2;
    if (v.min_chunk > v.chunk) v.min_chunk = v.chunk;
    /* prefill: the first tile that fits the device's workgroup memory.
     * CPU adapters (llvmpipe, SwiftShader): 64 invocations, 16 rows x 32 cells, one score (and one row of P
     * V) per invocation at a time: the tiles CI has always run, so lavapipe timings stay comparable. GPUs:
     * 128 invocations, tiles of up to 64 rows (16 tokens of a GQA-4 group) x 32 cells, each invocation a
     * block of 4 x 4 scores and 4 rows x D / 32 quads of P V, so one workgroup load feeds 2-4 vec4 FMAs
     * instead of one, and each K/V tile read from the cache serves 4x the rows. Head dim 128 takes 64 x 16
     * (64 x 32 needs 58 KiB: the H200 offers 48), 256 smaller tiles. */
    static const uint32_t cpu_tiles[][4] = {{16, 32, 1, 1}, {16, 16, 1, 1}, {8, 32, 1, 1},
                                            {8, 16, 1, 1},  {4, 16, 1, 1},  {4, 8, 1, 1}};
    static const uint32_t gpu_tiles[][4] = {{64, 32, 4, 4}, {64, 16, 4, 2}, {32, 32, 2, 4}, {32, 16, 2, 2},
                                            {16, 16, 1, 2}, {16, 8, 1, 1},  {8, 8, 1, 1},   {4, 8, 1, 1}};
    const uint32_t(*tiles)[4] = gpu ? gpu_tiles : cpu_tiles;
    const size_t n_tiles =
        gpu ? sizeof gpu_tiles / sizeof gpu_tiles[0] : sizeof cpu_tiles / sizeof cpu_tiles[0];
    if (gpu) v.pwg = 128;
    while (v.pwg > 1 && (v.pwg > info->max_compute_invocations_per_workgroup ||
                         v.pwg > info->max_compute_workgroup_size_x))
        v.pwg /= 2;
    for (size_t i = 0; i < n_tiles; i++) {
        v.bq = tiles[i][0];
        v.bk = tiles[i][1];
        v.rq = tiles[i][2];
        v.rk = tiles[i][3];
        if (check_variant(&v, LW_GPU_ATTN_PREFILL, info, err) == LW_OK) break;
    }
    return v;
}

/* ---------------------------------------------------------------------------------------------------------
 * Pipelines
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__gpu_attn_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_attn_variant *v, lw__gpu_attn_kernel k, const lw_gpu_info *info,
                                lw_gpu_pipeline *out, char *err) {
    *out = 0;
    lw_status st = check_variant(v, k, info, err);
    if (st != LW_OK) return st;
    static const char *const names[LW_GPU_ATTN_KERNELS] = {"decode", "reduce", "prefill", "exact"};
    char label[LW_GPU_CACHE_KEY], dim[16], grp[16], wg[16], a[16], b[16], rq[16], rk[16], vb[16], kb[16];
    const char *kv = kv_name(v->kv_type);
    if (k == LW_GPU_ATTN_DECODE)
        snprintf(label, sizeof label, "attn-decode %s d%u g%u wg%u c%u vb%u kb%u%s%s", kv, v->head_dim,
                 v->group, v->wg_size, v->chunk, v->vb, v->kb, v->rope ? " rope" : "",
                 v->q8_out ? " q8" : "");
    else if (k == LW_GPU_ATTN_PREFILL)
        snprintf(label, sizeof label, "attn-prefill %s d%u g%u wg%u q%u k%u r%ux%u", kv, v->head_dim,
                 v->group, v->pwg, v->bq, v->bk, v->rq, v->rk);
    else if (k == LW_GPU_ATTN_EXACT)
        snprintf(label, sizeof label, "attn-exact %s d%u g%u wg%u", kv, v->head_dim, v->group, v->wg_size);
    else
        snprintf(label, sizeof label, "attn-reduce %s d%u g%u wg%u%s", kv, v->head_dim, v->group, v->wg_size,
                 v->q8_out ? " q8" : "");
    const bool rope = k == LW_GPU_ATTN_DECODE && v->rope;
    const bool q8 = (k == LW_GPU_ATTN_REDUCE || k == LW_GPU_ATTN_DECODE) && v->q8_out;
    if (q8 && (v->q8_out != LW_GPU_ACTQ_Q8_0 || v->head_dim % 32 || v->head_dim > 4 * v->wg_size ||
               !info->has_dot4))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "attn: no 8-bit output for head dim %u here", v->head_dim);
    snprintf(dim, sizeof dim, "%u", v->head_dim);
    snprintf(grp, sizeof grp, "%u", v->group);
    snprintf(wg, sizeof wg, "%u", k == LW_GPU_ATTN_PREFILL ? v->pwg : v->wg_size);
    snprintf(a, sizeof a, "%u", k == LW_GPU_ATTN_PREFILL ? v->bq : v->chunk);
    snprintf(b, sizeof b, "%u", v->bk);
    snprintf(rq, sizeof rq, "%u", v->rq);
    snprintf(rk, sizeof rk, "%u", v->rk);
    lw__wgsl_define defs[12] = {{"HEAD_DIM", dim},
                                {"GROUP", grp},
                                {"KV_F16", v->kv_type == LW_TYPE_F16 ? "1" : "0"},
                                {"KV_Q8", v->kv_type == LW_TYPE_Q8_0 ? "1" : "0"},
                                {"KV_Q4", v->kv_type == LW_TYPE_Q4_0 ? "1" : "0"},
                                {"WG_SIZE", wg}};
    size_t n_defs = 6;
    if (q8) defs[n_defs++] = (lw__wgsl_define){"Q8_OUT", "1"};
    if (rope) defs[n_defs++] = (lw__wgsl_define){"ROPE", "1"};
    if (k == LW_GPU_ATTN_DECODE) {
        defs[n_defs++] = (lw__wgsl_define){"CHUNK", a};
        snprintf(vb, sizeof vb, "%u", v->vb);
        snprintf(kb, sizeof kb, "%u", v->kb);
        if (v->vb) defs[n_defs++] = (lw__wgsl_define){"VB", vb};
        if (v->kb) defs[n_defs++] = (lw__wgsl_define){"KB", kb};
    } else if (k == LW_GPU_ATTN_PREFILL) {
        defs[n_defs++] = (lw__wgsl_define){"TILE_Q", a};
        defs[n_defs++] = (lw__wgsl_define){"TILE_K", b};
        defs[n_defs++] = (lw__wgsl_define){"ROW_BLOCK", rq};
        defs[n_defs++] = (lw__wgsl_define){"CELL_BLOCK", rk};
    }
    char file[32];
    snprintf(file, sizeof file, "attn-%s.wgsl", names[k]);
    /* Q and the caches read_write as every activation/cache binding (kernels-ops.h conventions) */
    static const lw_gpu_binding_kind kinds[LW_GPU_ATTN_BINDINGS + 1] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM, LW_GPU_BIND_STORAGE}; /* (q8: the quants) */
    static const lw_gpu_binding_kind rope_kinds[LW_GPU_ATTN_ROPE_BINDINGS + 1] = {
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE, LW_GPU_BIND_STORAGE,      LW_GPU_BIND_STORAGE,
        LW_GPU_BIND_STORAGE, LW_GPU_BIND_UNIFORM, LW_GPU_BIND_STORAGE_READ, LW_GPU_BIND_STORAGE};
    if (rope)
        return lw__gpu_build_pipeline(gpu, cache, alloc, label, file, defs, n_defs, rope_kinds,
                                      LW_GPU_ATTN_ROPE_BINDINGS + (q8 ? 1 : 0), out, err);
    return lw__gpu_build_pipeline(gpu, cache, alloc, label, file, defs, n_defs, kinds,
                                  LW_GPU_ATTN_BINDINGS + (q8 ? 1 : 0), out, err);
}

/* ---------------------------------------------------------------------------------------------------------
 * Scratch and planning
 * ------------------------------------------------------------------------------------------------------- */

/* Cells per split for a span of cells: chunk-sized, or smaller (not below min_chunk) to reach `splits`. */
static uint64_t split_cells(const lw__gpu_attn_variant *v, uint64_t span) {
    uint64_t c = v->chunk;
    if (v->splits) {
        uint64_t want = (span + v->splits - 1) / v->splits;
        if (want < v->min_chunk) want = v->min_chunk;
        if (want < c) c = want;
    }
    return c ? c : 1;
}

lw_status lw__gpu_attn_scratch_bytes(const lw__gpu_attn_variant *v, uint32_t n_head, uint32_t max_tokens,
                                     uint64_t n_ctx, uint64_t *bytes, char *err) {
    *bytes = 16;
    if (v->chunk == 0 || v->head_dim % 4 || n_head == 0)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "attn: bad variant or head count for the scratch size");
    if (max_tokens > v->decode_max) max_tokens = v->decode_max;
    /* the most splits any span up to n_ctx gets (split_cells: a span reaching `splits` splits uses at least
     * span / splits cells each, else chunk-sized ones) */
    uint64_t splits = (n_ctx + v->chunk - 1) / v->chunk;
    if (v->splits > splits) splits = v->splits;
    uint64_t b;
    if (!lw__mul_u64((uint64_t)max_tokens * n_head, splits, &b) || !lw__mul_u64(b, v->head_dim / 4 + 1, &b) ||
        !lw__mul_u64(b, 16, &b))
        return lw__errorf(err, LW_ERR_OVERFLOW, "attn: scratch size overflows");
    if (b > *bytes) *bytes = b;
    return LW_OK;
}

/* Checks that an operand of `count` vec4 units (count > 0) at vec4 offset `off` has u32 indices. */
static bool fits_u32(uint64_t off, uint64_t count) {
    return off <= UINT32_MAX && count <= (uint64_t)UINT32_MAX + 1 - off;
}

lw_status lw__gpu_attn_plan(const lw_gpu_info *info, const lw__gpu_attn_variant *v,
                            const lw__gpu_attn_shape *s, uint64_t scratch_bytes, lw__gpu_attn_params *p,
                            lw__gpu_attn_dispatch *d, char *err) {
    memset(p, 0, sizeof *p);
    memset(d, 0, sizeof *d);
    if (!lw__gpu_attn_supported(v->kv_type, v->head_dim, v->group))
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "attn: unsupported variant (head dim %u, group %u)",
                          v->head_dim, v->group);
    /* quad: bytes of the cache's index unit (4 elements; Q8_0 / Q4_0: a word), head_units: units per head */
    const uint64_t D = v->head_dim, d4 = D / 4, bw = lw__gpu_kv_block_words(v->kv_type);
    const uint64_t quad = bw ? 4 : v->kv_type == LW_TYPE_F16 ? 8 : 16;
    const uint64_t head_units = bw ? D / 32 * bw : d4;
    if (s->n_head_kv == 0 || s->n_head != (uint64_t)s->n_head_kv * v->group)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "attn: %u heads over %u KV heads do not make groups of %u",
                          s->n_head, s->n_head_kv, v->group);
    if (s->n_tokens == 0 || (uint64_t)s->pos0 + s->n_tokens > s->n_ctx)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "attn: %u tokens at position %u do not fit %llu cells",
                          s->n_tokens, s->pos0, (unsigned long long)s->n_ctx);
    const uint64_t row = (uint64_t)s->n_head * D, qs = s->q_stride ? s->q_stride : row,
                   os = s->o_stride ? s->o_stride : row;
    if (s->q_offset % 4 || s->o_offset % 4 || qs % 4 || os % 4 || qs < row || os < row ||
        s->k_offset % quad || s->v_offset % quad)
        return lw__errorf(
            err, LW_ERR_INVALID_ARG,
            "attn: Q/output offsets and strides must be multiples of 4 elements (rows of %llu), "
            "cache offsets of %llu bytes",
            (unsigned long long)row, (unsigned long long)quad);
    const uint64_t kv_stride = (uint64_t)s->n_head_kv * head_units; /* units per cell */
    uint64_t cache_quads, k_end, v_end;
    if (!lw__mul_u64(kv_stride, s->n_ctx, &cache_quads) ||
        !lw__add_u64(s->k_offset / quad, cache_quads, &k_end) ||
        !lw__add_u64(s->v_offset / quad, cache_quads, &v_end) || k_end > UINT32_MAX || v_end > UINT32_MAX ||
        k_end > info->max_storage_buffer_binding_size / quad ||
        v_end > info->max_storage_buffer_binding_size / quad)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "attn: a KV cache of %llu cells exceeds one binding",
                          (unsigned long long)s->n_ctx);
    if (!fits_u32(s->q_offset / 4, ((uint64_t)(s->n_tokens - 1) * qs + row) / 4) ||
        !fits_u32(s->o_offset / 4, ((uint64_t)(s->n_tokens - 1) * os + row) / 4))
        return lw__errorf(err, LW_ERR_TOO_LARGE, "attn: Q or output beyond 32-bit indices");
    const uint32_t gmax =
        info->max_compute_workgroups_per_dimension ? info->max_compute_workgroups_per_dimension : 65535;
    *p = (lw__gpu_attn_params){.n_tokens = s->n_tokens,
                               .pos0 = s->pos0,
                               .n_head = s->n_head,
                               .swa = s->swa,
                               .q_offset = (uint32_t)(s->q_offset / 4),
                               .q_stride = (uint32_t)(qs / 4),
                               .o_offset = (uint32_t)(s->o_offset / 4),
                               .o_stride = (uint32_t)(os / 4),
                               .k_offset = (uint32_t)(s->k_offset / quad),
                               .v_offset = (uint32_t)(s->v_offset / quad),
                               .kv_stride = (uint32_t)kv_stride,
                               .n_splits = 1,
                               .scale = s->scale,
                               .softcap = s->softcap};

    if (v->exact && s->n_tokens < LW_GPU_ATTN_EXACT_TOKENS) { /* one workgroup per (head, token) */
        if (s->n_head > gmax || s->n_tokens > gmax)
            return lw__errorf(err, LW_ERR_TOO_LARGE,
                              "attn-exact: %u heads x %u tokens exceed the dispatch grid", s->n_head,
                              s->n_tokens);
        d->n = 1;
        d->kernel[0] = LW_GPU_ATTN_EXACT;
        d->grid[0][0] = s->n_head;
        d->grid[0][1] = s->n_tokens;
        d->grid[0][2] = 1;
        return LW_OK;
    }
    if (s->n_tokens <= v->decode_max) {
        /* cells seen by any token: from the first token's window start to the last token's position */
        const uint64_t nv0 = (uint64_t)s->pos0 + 1, lo = s->swa && nv0 > s->swa ? nv0 - s->swa : 0;
        const uint64_t span = (uint64_t)s->pos0 + s->n_tokens - lo,
                       chunk = span <= v->one_max ? span : split_cells(v, span),
                       n_splits = (span + chunk - 1) / chunk;
        if (n_splits > gmax || s->n_head_kv > gmax || s->n_tokens > gmax || s->n_head > gmax)
            return lw__errorf(err, LW_ERR_TOO_LARGE, "attn-decode: %llu splits exceed the dispatch grid",
                              (unsigned long long)n_splits);
        if (n_splits > 1) {
            uint64_t need;
            if (!lw__mul_u64((uint64_t)s->n_tokens * s->n_head * n_splits, (d4 + 1) * 16, &need) ||
                need > scratch_bytes || need / 16 > (uint64_t)UINT32_MAX + 1)
                return lw__errorf(err, LW_ERR_TOO_LARGE,
                                  "attn-decode: %llu splits need more scratch than the %llu bytes given",
                                  (unsigned long long)n_splits, (unsigned long long)scratch_bytes);
        }
        p->n_splits = (uint32_t)n_splits;
        p->base = (uint32_t)lo;
        p->chunk = (uint32_t)chunk;
        d->n = n_splits > 1 ? 2 : 1;
        d->kernel[0] = LW_GPU_ATTN_DECODE;
        d->grid[0][0] = (uint32_t)n_splits;
        d->grid[0][1] = s->n_head_kv;
        d->grid[0][2] = s->n_tokens;
        d->kernel[1] = LW_GPU_ATTN_REDUCE;
        if (d->n == 2) {
            d->grid[1][0] = s->n_head;
            d->grid[1][1] = s->n_tokens;
            d->grid[1][2] = 1;
        }
        return LW_OK;
    }
    const uint64_t tiles = ((uint64_t)s->n_tokens * v->group + v->bq - 1) / (v->bq ? v->bq : 1);
    if (v->bq == 0 || tiles > gmax || s->n_head_kv > gmax)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "attn-prefill: %u tokens exceed the dispatch grid",
                          s->n_tokens);
    d->n = 1;
    d->kernel[0] = LW_GPU_ATTN_PREFILL;
    d->grid[0][0] = (uint32_t)tiles;
    d->grid[0][1] = s->n_head_kv;
    d->grid[0][2] = 1;
    return LW_OK;
}
