/* The GPU HAL (src/webgpu/gpu.h) in the wasm build: each entry calls the project's JS glue (web/lw-gpu.js,
 * an Emscripten --js-library) against today's WebGPU JS API. 64-bit sizes and offsets cross as doubles
 * (exact below 2^53), so no BigInt or i64 legalization is involved. Compiled only by the wasm build. */
#include "core/core.h"
#include "webgpu/gpu.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * The JS side (web/lw-gpu.js)
 * ------------------------------------------------------------------------------------------------------- */

extern int lw_js_gpu_ready(void);
extern double lw_js_gpu_limit(const char *name);
extern int lw_js_gpu_has_feature(const char *name);
extern int lw_js_gpu_smx(int which); /* M, N, K of the i8 subgroup-matrix configuration, 0 without */
extern int lw_js_gpu_has_wgsl_feature(const char *name);
extern double lw_js_gpu_adapter_info(const char *field, char *dst, int cap);
extern uint32_t lw_js_context_new(void);
extern uint32_t lw_js_buffer_create(uint32_t ctx, double size, uint32_t usage, const char *label);
extern void lw_js_buffer_destroy(uint32_t buf);
extern int lw_js_buffer_write(uint32_t buf, double offset, const void *src, double size);
extern int lw_js_buffer_write_host(uint32_t buf, double offset, uint32_t src, double src_offset, double size);
extern uint32_t lw_js_pipeline_create(uint32_t ctx, const char *wgsl, const char *entry,
                                      const uint32_t *kinds, uint32_t n, const char *label);
extern uint32_t lw_js_bind_group_create(uint32_t ctx, uint32_t pipeline, const double *entries, uint32_t n);
extern void lw_js_dispatch(uint32_t pipeline, uint32_t group, uint32_t dyn_offset, uint32_t x, uint32_t y,
                           uint32_t z);
extern void lw_js_copy(uint32_t src, double src_offset, uint32_t dst, double dst_offset, double size);
extern int lw_js_submit(void);
extern int lw_js_read(uint32_t buf, double offset, void *dst, double size);
extern uint32_t lw_js_pending(void);
extern int lw_js_error(uint32_t ctx, char *dst, int cap); /* the device's error, else this context's */
extern void lw_js_context_destroy(uint32_t ctx);

/* ---------------------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------------------- */

/* State of the wasm HAL: the JS side holds the objects, C keeps the allocator and the error text. */
typedef struct wasm_gpu {
    lw_allocator alloc;       /* where this struct came from             */
    uint32_t id;              /* the JS side's context: owns our objects */
    char err[LW_ERRMSG_SIZE]; /* copy of the JS side's sticky error      */
} wasm_gpu;

#define MAX_EXACT 9007199254740992.0 /* 2^53: doubles carry integers exactly below this */

static bool aligned4(uint64_t v) {
    return (v & 3) == 0;
}

static lw_status w_info(void *ctx, lw_gpu_info *o) {
    (void)ctx;
    memset(o, 0, sizeof *o);
    lw_js_gpu_adapter_info("vendor", o->vendor, sizeof o->vendor);
    lw_js_gpu_adapter_info("architecture", o->architecture, sizeof o->architecture);
    lw_js_gpu_adapter_info("device", o->device, sizeof o->device);
    lw_js_gpu_adapter_info("description", o->description, sizeof o->description);
    double sg_min = lw_js_gpu_adapter_info("subgroupMinSize", NULL, 0);
    double sg_max = lw_js_gpu_adapter_info("subgroupMaxSize", NULL, 0);
    o->subgroup_min_size = sg_min > 0 ? (uint32_t)sg_min : 0;
    o->subgroup_max_size = sg_max > 0 ? (uint32_t)sg_max : 0;
#define LIMIT(field, name, type) o->field = (type)(lw_js_gpu_limit(name) < 0 ? 0 : lw_js_gpu_limit(name))
    LIMIT(max_buffer_size, "maxBufferSize", uint64_t);
    LIMIT(max_storage_buffer_binding_size, "maxStorageBufferBindingSize", uint64_t);
    LIMIT(max_uniform_buffer_binding_size, "maxUniformBufferBindingSize", uint64_t);
    LIMIT(min_storage_buffer_offset_alignment, "minStorageBufferOffsetAlignment", uint32_t);
    LIMIT(min_uniform_buffer_offset_alignment, "minUniformBufferOffsetAlignment", uint32_t);
    LIMIT(max_storage_buffers_per_shader_stage, "maxStorageBuffersPerShaderStage", uint32_t);
    LIMIT(max_compute_workgroup_storage_size, "maxComputeWorkgroupStorageSize", uint32_t);
    LIMIT(max_compute_invocations_per_workgroup, "maxComputeInvocationsPerWorkgroup", uint32_t);
    LIMIT(max_compute_workgroup_size_x, "maxComputeWorkgroupSizeX", uint32_t);
    LIMIT(max_compute_workgroups_per_dimension, "maxComputeWorkgroupsPerDimension", uint32_t);
#undef LIMIT
    o->has_f16 = lw_js_gpu_has_feature("shader-f16");
    o->has_subgroups = lw_js_gpu_has_feature("subgroups");
    o->has_timestamp_query = lw_js_gpu_has_feature("timestamp-query");
    o->has_dot4 = lw_js_gpu_has_wgsl_feature("packed_4x8_integer_dot_product");
    o->smx_m = (uint32_t)lw_js_gpu_smx(0);
    o->smx_n = (uint32_t)lw_js_gpu_smx(1);
    o->smx_k = (uint32_t)lw_js_gpu_smx(2);
    return LW_OK;
}

static const char *w_error(void *ctx) {
    wasm_gpu *g = ctx;
    return lw_js_error(g->id, g->err, (int)sizeof g->err) ? g->err : NULL;
}

/* Status of a failed JS call, with the JS side's message kept. */
static lw_status js_failed(wasm_gpu *g, lw_status st) {
    w_error(g);
    return st;
}

static lw_status w_buffer_create(void *ctx, uint64_t size, uint32_t usage, const char *label,
                                 lw_gpu_buffer *out) {
    uint64_t sz;
    *out = 0;
    if (size == 0 || !lw__align_up_u64(size, 4, &sz) || (double)sz >= MAX_EXACT) return LW_ERR_INVALID_ARG;
    *out = lw_js_buffer_create(((wasm_gpu *)ctx)->id, (double)sz, usage, label);
    return *out ? LW_OK : js_failed(ctx, LW_ERR_NOMEM);
}

static void w_buffer_destroy(void *ctx, lw_gpu_buffer buf) {
    (void)ctx;
    if (buf) lw_js_buffer_destroy(buf);
}

static lw_status w_buffer_write(void *ctx, lw_gpu_buffer buf, uint64_t offset, const void *data,
                                uint64_t size) {
    if (!buf || !aligned4(offset) || (size && !data) || (double)offset >= MAX_EXACT || size > SIZE_MAX)
        return LW_ERR_INVALID_ARG;
    if (!size) return LW_OK;
    return lw_js_buffer_write(buf, (double)offset, data, (double)size) ? js_failed(ctx, LW_ERR_IO) : LW_OK;
}

static lw_status w_buffer_write_host(void *ctx, lw_gpu_buffer buf, uint64_t offset, uint32_t src,
                                     uint64_t src_offset, uint64_t size) {
    if (!buf || !src || !aligned4(offset) || (double)offset >= MAX_EXACT || (double)src_offset >= MAX_EXACT ||
        (double)size >= MAX_EXACT)
        return LW_ERR_INVALID_ARG;
    if (!size) return LW_OK;
    return lw_js_buffer_write_host(buf, (double)offset, src, (double)src_offset, (double)size)
               ? js_failed(ctx, LW_ERR_IO)
               : LW_OK;
}

static lw_status w_pipeline_create(void *ctx, const char *wgsl, const char *entry,
                                   const lw_gpu_binding_kind *kinds, uint32_t n, const char *label,
                                   lw_gpu_pipeline *out) {
    *out = 0;
    if (!wgsl || !entry || n > LW_GPU_MAX_BINDINGS || (n && !kinds)) return LW_ERR_INVALID_ARG;
    uint32_t k[LW_GPU_MAX_BINDINGS];
    for (uint32_t i = 0; i < n; i++) k[i] = (uint32_t)kinds[i];
    *out = lw_js_pipeline_create(((wasm_gpu *)ctx)->id, wgsl, entry, k, n, label);
    return *out ? LW_OK : js_failed(ctx, LW_ERR_INVALID_ARG);
}

static lw_status w_bind_group_create(void *ctx, lw_gpu_pipeline pipeline, const lw_gpu_bind *binds,
                                     uint32_t n, lw_gpu_bind_group *out) {
    *out = 0;
    if (!pipeline || n > LW_GPU_MAX_BINDINGS || (n && !binds)) return LW_ERR_INVALID_ARG;
    double e[3 * LW_GPU_MAX_BINDINGS];
    for (uint32_t i = 0; i < n; i++) {
        if (!binds[i].buffer || (double)binds[i].offset >= MAX_EXACT || (double)binds[i].size >= MAX_EXACT)
            return LW_ERR_INVALID_ARG;
        e[3 * i] = binds[i].buffer;
        e[3 * i + 1] = (double)binds[i].offset;
        e[3 * i + 2] = (double)binds[i].size;
    }
    *out = lw_js_bind_group_create(((wasm_gpu *)ctx)->id, pipeline, e, n);
    return *out ? LW_OK : js_failed(ctx, LW_ERR_INVALID_ARG);
}

static void w_dispatch(void *ctx, lw_gpu_pipeline p, lw_gpu_bind_group g, uint32_t dyn, uint32_t x,
                       uint32_t y, uint32_t z) {
    (void)ctx;
    lw_js_dispatch(p, g, dyn, x, y, z);
}

static void w_copy(void *ctx, lw_gpu_buffer src, uint64_t so, lw_gpu_buffer dst, uint64_t doff,
                   uint64_t size) {
    (void)ctx;
    lw_js_copy(src, (double)so, dst, (double)doff, (double)size);
}

static lw_status w_submit(void *ctx) {
    return lw_js_submit() ? js_failed(ctx, LW_ERR_IO) : LW_OK;
}

static lw_status w_read(void *ctx, lw_gpu_buffer buf, uint64_t offset, void *dst, uint64_t size) {
    if (!buf || !dst || !size || !aligned4(offset) || !aligned4(size) || size > SIZE_MAX ||
        (double)offset >= MAX_EXACT)
        return LW_ERR_INVALID_ARG;
    return lw_js_read(buf, (double)offset, dst, (double)size) ? js_failed(ctx, LW_ERR_IO) : LW_OK;
}

static uint32_t w_pending(void *ctx) {
    (void)ctx;
    return lw_js_pending();
}

static void w_destroy(void *ctx) {
    wasm_gpu *g = ctx;
    lw_js_context_destroy(g->id);
    lw_allocator a = g->alloc;
    lw__free(&a, g);
}

static const lw_gpu_ops wasm_ops = {
    w_info,
    w_buffer_create,
    w_buffer_destroy,
    w_buffer_write,
    w_buffer_write_host,
    w_pipeline_create,
    w_bind_group_create,
    w_dispatch,
    w_copy,
    w_submit,
    w_read,
    w_pending,
    NULL,
    w_error,
    w_destroy,
};

/* Opens the HAL over the device the host handed to lwGpu.init(); LW_ERR_UNSUPPORTED when there is none. */
lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out) {
    out->ops = NULL;
    out->ctx = NULL;
    if (!lw_js_gpu_ready()) return LW_ERR_UNSUPPORTED;
    lw_allocator a = lw__allocator_or_default(alloc);
    wasm_gpu *g = lw__calloc(&a, 1, sizeof *g);
    if (!g) return LW_ERR_NOMEM;
    g->alloc = a;
    g->id = lw_js_context_new();
    out->ops = &wasm_ops;
    out->ctx = g;
    return LW_OK;
}
