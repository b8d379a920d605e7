/* Pipeline cache: compiled pipelines by variant key ("matvec q4_0 f16 sg wg64"), so each variant is expanded
 * and compiled once, at load, and generation only looks handles up. Pipelines belong to the HAL; the cache
 * holds their handles. */
#include "webgpu/gpu-tune.h"
#include "webgpu/kernels.h"
#include "webgpu/kernels-dequant.h"

#include <string.h>

#define LW_GPU_MAX_DEFINES 32 /* a template's defines per pipeline (the families pass at most ~12) */

/* One cached pipeline. */
struct lw__gpu_cache_entry {
    char key[LW_GPU_CACHE_KEY]; /* variant key, NUL-terminated */
    lw_gpu_pipeline pipeline;   /* its handle                  */
};

void lw__gpu_cache_init(lw__gpu_pipeline_cache *c, const lw_allocator *alloc) {
    memset(c, 0, sizeof *c);
    c->alloc = lw__allocator_or_default(alloc);
}

void lw__gpu_cache_free(lw__gpu_pipeline_cache *c) {
    lw__free(&c->alloc, c->entries);
    c->entries = NULL;
    c->n = c->cap = 0;
}

lw_gpu_pipeline lw__gpu_cache_find(lw__gpu_pipeline_cache *c, const char *key) {
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->entries[i].key, key) == 0) {
            c->hits++;
            return c->entries[i].pipeline;
        }
    c->misses++;
    return 0;
}

lw_status lw__gpu_cache_add(lw__gpu_pipeline_cache *c, const char *key, lw_gpu_pipeline p) {
    if (strlen(key) >= LW_GPU_CACHE_KEY || !p) return LW_ERR_INVALID_ARG;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16, bytes;
        if (!lw__mul_size(cap, sizeof *c->entries, &bytes)) return LW_ERR_NOMEM;
        struct lw__gpu_cache_entry *e = lw__realloc(&c->alloc, c->entries, bytes);
        if (!e) return LW_ERR_NOMEM;
        c->entries = e;
        c->cap = cap;
    }
    strcpy(c->entries[c->n].key, key);
    c->entries[c->n].pipeline = p;
    c->n++;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Template -> pipeline, through the cache
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__gpu_build_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                 const char *label, const char *template_name, const lw__wgsl_define *defs,
                                 size_t n_defs, const lw_gpu_binding_kind *kinds, uint32_t n_kinds,
                                 lw_gpu_pipeline *out, char *err) {
    if (cache && (*out = lw__gpu_cache_find(cache, label)) != 0) return LW_OK;
    *out = 0;
    lw_allocator a = lw__allocator_or_default(alloc);
    lw__gpu_shader_files files; /* the embedded shaders + the format tables generated from src/quant */
    if (lw__gpu_shader_files_make(&a, &files) != LW_OK)
        return lw__errorf(err, LW_ERR_NOMEM, "%s: out of memory for the shader tables", label);
    /* every template also sees EXACT_ARITH: 1 on CPU adapters (lavapipe, SwiftShader), whose fma may be
     * computed unfused, so ops-common.wgsl's fma_x / div_x decide those results in integers there (the CPU
     * engine's bits); GPUs keep the hardware fma and division (speed) */
    lw__wgsl_define all[LW_GPU_MAX_DEFINES + 1];
    if (n_defs > LW_GPU_MAX_DEFINES) {
        lw__gpu_shader_files_free(&a, &files);
        return lw__errorf(err, LW_ERR_INVALID_ARG, "%s: %zu defines", label, n_defs);
    }
    lw_gpu_info info;
    memset(&info, 0, sizeof info);
    const bool exact =
        !gpu->ops->info || gpu->ops->info(gpu->ctx, &info) != LW_OK || lw__gpu_cpu_adapter(&info);
    for (size_t i = 0; i < n_defs; i++) all[i] = defs[i];
    all[n_defs] = (lw__wgsl_define){"EXACT_ARITH", exact ? "1" : "0"};
    lw__wgsl_pp_params pp = {files.files, files.n, all, n_defs + 1, 0, 0};
    char *wgsl = NULL;
    lw_status st = lw__wgsl_pp(&a, template_name, &pp, &wgsl, NULL, err);
    lw__gpu_shader_files_free(&a, &files);
    if (st != LW_OK) return st;
    st = gpu->ops->pipeline_create(gpu->ctx, wgsl, "main", kinds, n_kinds, label, out);
    if (st != LW_OK) {
        const char *e = gpu->ops->error(gpu->ctx);
        lw__errorf(err, st, "%s: pipeline creation failed%s%.180s", label, e ? ": " : "", e ? e : "");
    } else if (cache && (st = lw__gpu_cache_add(cache, label, *out)) != LW_OK) {
        lw__errorf(err, st, "%s: cannot cache the pipeline", label);
    }
    lw__free(&a, wgsl);
    return st;
}
