/* Functions the wasm module exports for JS: opening the GPU HAL, describing the device, and the mat-vec
 * check used by tests/web (random weights quantized by our C quantizers, the GPU kernel, and the CPU
 * reference: dequantize + dot in double). Compiled only by the wasm build (cmake/webgpu.cmake). */
#include "core/core.h"
#include "quant/quant.h"
#include <math.h>
#include "webgpu/gpu.h"
#include "webgpu/kernels.h"
#include "lw-wasm-ref.h"

#include <emscripten/emscripten.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

/* ---------------------------------------------------------------------------------------------------------
 * Device description as JSON (what C sees through the HAL; tests compare it with the JS device)
 * ------------------------------------------------------------------------------------------------------- */

EMSCRIPTEN_KEEPALIVE int lw_wasm_gpu_info_json(char *dst, int cap) {
    lw_gpu gpu;
    lw_gpu_info i;
    if (!dst || cap <= 0 || lw_wasm_gpu_open(NULL, &gpu) != LW_OK) return -1;
    lw_status st = gpu.ops->info(gpu.ctx, &i);
    gpu.ops->destroy(gpu.ctx);
    if (st != LW_OK) return -1;
    int n = snprintf(dst, (size_t)cap,
                     "{\"vendor\":\"%s\",\"architecture\":\"%s\",\"device\":\"%s\",\"maxBufferSize\":%llu,"
                     "\"maxStorageBufferBindingSize\":%llu,\"maxComputeWorkgroupStorageSize\":%u,"
                     "\"maxComputeInvocationsPerWorkgroup\":%u,\"maxComputeWorkgroupsPerDimension\":%u,"
                     "\"minStorageBufferOffsetAlignment\":%u,\"maxStorageBuffersPerShaderStage\":%u,"
                     "\"subgroupMinSize\":%u,\"subgroupMaxSize\":%u,"
                     "\"f16\":%d,\"subgroups\":%d,\"timestampQuery\":%d,\"smx\":[%u,%u,%u]}",
                     i.vendor, i.architecture, i.device, (unsigned long long)i.max_buffer_size,
                     (unsigned long long)i.max_storage_buffer_binding_size,
                     i.max_compute_workgroup_storage_size, i.max_compute_invocations_per_workgroup,
                     i.max_compute_workgroups_per_dimension, i.min_storage_buffer_offset_alignment,
                     i.max_storage_buffers_per_shader_stage, i.subgroup_min_size, i.subgroup_max_size,
                     i.has_f16, i.has_subgroups, i.has_timestamp_query, i.smx_m, i.smx_n, i.smx_k);
    return n < cap ? n : -1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Mat-vec check
 * ------------------------------------------------------------------------------------------------------- */

/* One mat-vec problem: host data, reference result and the GPU objects that run it. */
typedef struct lw_wasm_matvec {
    lw_gpu gpu;                   /* the HAL (opened on first run)                      */
    lw_gpu_info info;             /* its device description                             */
    uint32_t type;                /* weight format                                      */
    int rows, k;                  /* W is rows x k                                      */
    uint8_t *wq;                  /* W in its format (as in a GGUF file)                */
    size_t wq_bytes;              /* bytes of wq                                        */
    float *x;                     /* k inputs                                           */
    double *y_ref;                /* rows reference outputs (dequantize + double dot)   */
    double *y_cpu;                /* rows outputs of the CPU engine's own product (x
                                     rounded to the format's vec_dot_type), or NULL     */
    float *y;                     /* rows GPU outputs (read-back target)                */
    lw_gpu_buffer bw, bx, by, bp; /* weights, x, y, params                            */
    lw_gpu_buffer bq, bqp;        /* idot: x's 8-bit quants (actq-quant.wgsl), its params */
    lw_gpu_pipeline pipe;         /* pipeline of the last run                           */
    lw_gpu_bind_group group;      /* its bind group                                     */
    lw__gpu_pipeline_cache cache; /* pipelines by variant: each is compiled once          */
    char err[LW_ERRMSG_SIZE];     /* why the last call failed                           */
} lw_wasm_matvec;

EMSCRIPTEN_KEEPALIVE void lw_wasm_matvec_free(lw_wasm_matvec *m) {
    if (!m) return;
    if (m->gpu.ops) m->gpu.ops->destroy(m->gpu.ctx);
    lw__gpu_cache_free(&m->cache);
    free(m->wq);
    free(m->x);
    free(m->y_ref);
    free(m->y_cpu);
    free(m->y);
    free(m);
}

/* y_cpu: what the CPU engine computes for this product, the target of the activation-rounding variants. */
static lw_status matvec_cpu(lw_wasm_matvec *m) {
    if (!(m->y_cpu = malloc((size_t)m->rows * sizeof(double))))
        return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
    return lw_wasm_cpu_product(m->type, m->rows, m->k, m->wq, m->x, m->y_cpu, m->err);
}

/* Makes random W (row scales vary) and x, quantizes W with our quantizer and computes the reference.
 * Returns NULL only when memory runs out; otherwise check lw_wasm_matvec_error(). */
EMSCRIPTEN_KEEPALIVE lw_wasm_matvec *lw_wasm_matvec_new(int type, int rows, int k, uint32_t seed) {
    lw_wasm_matvec *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    lw__gpu_cache_init(&m->cache, NULL);
    m->type = (uint32_t)type;
    m->rows = rows;
    m->k = k;
    uint32_t s = seed ? seed : 1;
    float *deq = NULL;
    lw_status st = lw_wasm_ref_weights((uint32_t)type, rows, k, &s, &m->wq, &m->wq_bytes, &deq, m->err);
    if (st == LW_ERR_NOMEM) {
        lw_wasm_matvec_free(m);
        return NULL;
    }
    if (st != LW_OK) return m;
    m->x = malloc((size_t)k * sizeof(float));
    m->y_ref = malloc((size_t)rows * sizeof(double));
    m->y = malloc((size_t)rows * sizeof(float));
    if (!m->x || !m->y_ref || !m->y) {
        free(deq);
        lw_wasm_matvec_free(m);
        return NULL;
    }
    for (int i = 0; i < k; i++) m->x[i] = lw_wasm_rnd(&s);
    lw_wasm_ref_matvec(deq, rows, k, m->x, m->y_ref);
    free(deq);
    return m;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_matvec_error(const lw_wasm_matvec *m) {
    return m ? m->err : "out of memory";
}
EMSCRIPTEN_KEEPALIVE const uint8_t *lw_wasm_matvec_weights(const lw_wasm_matvec *m) {
    return m->wq;
}
EMSCRIPTEN_KEEPALIVE double lw_wasm_matvec_weights_size(const lw_wasm_matvec *m) {
    return (double)m->wq_bytes;
}

/* Opens the GPU and creates the buffers on first use, then uploads W (from the heap, or streamed from host
 * source host_source when it is not 0; that completes asynchronously: await lwGpu.settle() before running)
 * and x. Returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matvec_upload(lw_wasm_matvec *m, uint32_t host_source) {
    lw_status st;
    if (m->err[0]) return LW_ERR_INVALID_ARG;
    if (!m->gpu.ops) {
        if ((st = lw_wasm_gpu_open(NULL, &m->gpu)) != LW_OK) return lw__errorf(m->err, st, "no GPU device");
        m->gpu.ops->info(m->gpu.ctx, &m->info);
    }
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    if (!m->bw) {
        if ((st = o->buffer_create(c, m->wq_bytes, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, "W",
                                   &m->bw)) ||
            (st = o->buffer_create(c, (uint64_t)m->k * 4, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, "x",
                                   &m->bx)) ||
            (st = o->buffer_create(c, (uint64_t)m->rows * 4,
                                   LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST | LW_GPU_USAGE_COPY_SRC, "y",
                                   &m->by)) ||
            (st = o->buffer_create(c, sizeof(lw__gpu_matvec_params),
                                   LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST, "params", &m->bp)))
            return lw__errorf(m->err, st, "buffer creation failed: %s", o->error(c) ? o->error(c) : "");
    }
    if ((st = o->buffer_write(c, m->bx, 0, m->x, (uint64_t)m->k * 4)) != LW_OK)
        return lw__errorf(m->err, st, "writing x failed");
    if (host_source)
        st = o->buffer_write_host(c, m->bw, 0, host_source, 0, m->wq_bytes);
    else
        st = o->buffer_write(c, m->bw, 0, m->wq, m->wq_bytes);
    if (st != LW_OK) return lw__errorf(m->err, st, "writing weights failed");
    return LW_OK;
}

/* Runs one variant on the uploaded data: poisons y, writes the parameters, builds the variant's pipeline,
 * records the dispatch and schedules the read of y. The JS caller awaits lwGpu.settle() before
 * lw_wasm_matvec_nmse(). Returns an lw_status. */
/* The integer mat-vec's quantizer pass (idot): x rounded to 8 bits into m->bq, recorded before the mat-vec.
 */
static lw_status matvec_quant(lw_wasm_matvec *m, uint32_t actq) {
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw_status st;
    lw__gpu_actq_quant_params qp;
    uint32_t grid[3];
    lw_gpu_pipeline qpipe;
    lw_gpu_bind_group qg;
    if ((st = lw__gpu_actq_quant_plan(&m->info, actq, (uint64_t)m->k, 0, 0, &qp, grid, m->err)) != LW_OK ||
        (st = lw__gpu_actq_quant_pipeline(&m->gpu, &m->cache, NULL, actq, 0, &m->info, &qpipe, m->err)) !=
            LW_OK)
        return st;
    if (!m->bq && ((st = o->buffer_create(c, lw__gpu_actq_quant_bytes((uint64_t)m->k), LW_GPU_USAGE_STORAGE,
                                          "xq", &m->bq)) ||
                   (st = o->buffer_create(c, sizeof qp, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST,
                                          "xq params", &m->bqp))))
        return lw__errorf(m->err, st, "buffer creation failed: %s", o->error(c) ? o->error(c) : "");
    if ((st = o->buffer_write(c, m->bqp, 0, &qp, sizeof qp)) != LW_OK)
        return lw__errorf(m->err, st, "writing quant params failed");
    lw_gpu_bind b[LW_GPU_ACTQ_QUANT_BINDINGS] = {{m->bx, 0, 0}, {m->bq, 0, 0}, {m->bqp, 0, 0}};
    if ((st = o->bind_group_create(c, qpipe, b, LW_GPU_ACTQ_QUANT_BINDINGS, &qg)) != LW_OK)
        return lw__errorf(m->err, st, "bind group: %s", o->error(c) ? o->error(c) : "");
    o->dispatch(c, qpipe, qg, 0, grid[0], grid[1], grid[2]);
    return LW_OK;
}

/* The variant the harness's arguments name (idot 1: integer products, 2: block pairs, 3: eight-block steps).
 */
static lw__gpu_matvec_variant harness_variant(uint32_t type, int f16, int subgroups, int wg_size, int rows,
                                              int blocks, int actq, int stage, int exact, int idot) {
    lw__gpu_matvec_variant v;
    memset(&v, 0, sizeof v);
    v.type = type;
    v.f16 = f16 != 0;
    v.subgroups = subgroups != 0;
    v.wg_size = (uint32_t)wg_size;
    v.rows = (uint32_t)rows;
    v.blocks = blocks != 0;
    v.actq = (uint32_t)actq;
    v.stage = (uint32_t)stage;
    v.exact = exact != 0;
    v.idot = idot != 0;
    v.pair = idot >= 2;
    v.oct = idot == 3;
    return v;
}

EMSCRIPTEN_KEEPALIVE int lw_wasm_matvec_run(lw_wasm_matvec *m, int f16, int subgroups, int wg_size, int rows,
                                            int blocks, int actq, int stage, int exact, int idot) {
    lw_status st;
    if (m->err[0]) return LW_ERR_INVALID_ARG;
    if (!m->bw) return lw__errorf(m->err, LW_ERR_INVALID_ARG, "upload first");
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw__gpu_matvec_params p;
    uint32_t grid[3];
    const lw__gpu_matvec_variant v =
        harness_variant(m->type, f16, subgroups, wg_size, rows, blocks, actq, stage, exact, idot);
    if ((st = lw__gpu_matvec_plan(&m->info, &v, (uint64_t)m->rows, (uint64_t)m->k, 0, 0, 0, &p, grid,
                                  m->err)) != LW_OK)
        return st;
    p.order = exact == 2;                    /* exact 2: the repacked gemm order (Q2_K, Q4_K) */
    memset(m->y, 0xff, (size_t)m->rows * 4); /* NaN: a row the kernel does not write fails the check */
    if ((st = o->buffer_write(c, m->by, 0, m->y, (uint64_t)m->rows * 4)) != LW_OK ||
        (st = o->buffer_write(c, m->bp, 0, &p, sizeof p)) != LW_OK)
        return lw__errorf(m->err, st, "writing y/params failed");
    if ((st = lw__gpu_matvec_pipeline(&m->gpu, &m->cache, NULL, &v, &m->info, &m->pipe, m->err)) != LW_OK)
        return st;
    if (idot && (st = matvec_quant(m, (uint32_t)actq)) != LW_OK) return st;
    lw_gpu_bind b[LW_GPU_MATVEC_BINDINGS] = {
        {m->bw, 0, 0}, {idot ? m->bq : m->bx, 0, 0}, {m->by, 0, 0}, {m->bp, 0, 0}};
    if ((st = o->bind_group_create(c, m->pipe, b, LW_GPU_MATVEC_BINDINGS, &m->group)) != LW_OK)
        return lw__errorf(m->err, st, "bind group: %s", o->error(c) ? o->error(c) : "");
    o->dispatch(c, m->pipe, m->group, 0, grid[0], grid[1], grid[2]);
    if ((st = o->submit(c)) != LW_OK) return lw__errorf(m->err, st, "submit failed");
    if ((st = o->read(c, m->by, 0, m->y, (uint64_t)m->rows * 4)) != LW_OK)
        return lw__errorf(m->err, st, "read failed");
    return LW_OK;
}

/* Benchmark step: records iters dispatches of variant (f16, subgroups, wg_size) on the uploaded data in one
 * compute pass, submits, and schedules the read of y; the JS caller times it up to settle(). The pipeline
 * and bind group are made on the first call for a variant (rows: rows per workgroup) (call once to warm up).
 * Returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matvec_bench(lw_wasm_matvec *m, int f16, int subgroups, int wg_size,
                                              int rows, int blocks, int iters, int actq, int stage, int exact,
                                              int idot) {
    lw_status st;
    if (m->err[0]) return LW_ERR_INVALID_ARG;
    if (!m->bw || iters <= 0) return lw__errorf(m->err, LW_ERR_INVALID_ARG, "upload first; iters > 0");
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw__gpu_matvec_params p;
    uint32_t grid[3];
    const lw__gpu_matvec_variant v =
        harness_variant(m->type, f16, subgroups, wg_size, rows, blocks, actq, stage, exact, idot);
    if ((st = lw__gpu_matvec_plan(&m->info, &v, (uint64_t)m->rows, (uint64_t)m->k, 0, 0, 0, &p, grid,
                                  m->err)) != LW_OK)
        return st;
    lw_gpu_pipeline pipe;
    if ((st = lw__gpu_matvec_pipeline(&m->gpu, &m->cache, NULL, &v, &m->info, &pipe, m->err)) != LW_OK)
        return st;
    if (pipe != m->pipe || !m->group) {
        m->pipe = pipe;
        if ((st = o->buffer_write(c, m->bp, 0, &p, sizeof p)) != LW_OK)
            return lw__errorf(m->err, st, "params");
        /* idot: x quantized once (x does not change between iterations); only the mat-vec is timed */
        if (idot && (st = matvec_quant(m, (uint32_t)actq)) != LW_OK) return st;
        lw_gpu_bind b[LW_GPU_MATVEC_BINDINGS] = {
            {m->bw, 0, 0}, {idot ? m->bq : m->bx, 0, 0}, {m->by, 0, 0}, {m->bp, 0, 0}};
        if ((st = o->bind_group_create(c, m->pipe, b, LW_GPU_MATVEC_BINDINGS, &m->group)) != LW_OK)
            return lw__errorf(m->err, st, "bind group");
    }
    for (int i = 0; i < iters; i++) o->dispatch(c, m->pipe, m->group, 0, grid[0], grid[1], grid[2]);
    /* read() appends its copy to the recording and submits both: one queue submission per step */
    return o->read(c, m->by, 0, m->y, (uint64_t)m->rows * 4);
}

/* After settle(): normalised mean squared error sum((y - ref)^2) / sum(ref^2) of the last run, or -1 with
 * the reason in lw_wasm_matvec_error() (GPU error, read not finished, non-finite output). */
EMSCRIPTEN_KEEPALIVE double lw_wasm_matvec_nmse(lw_wasm_matvec *m) {
    if (m->err[0] || !m->gpu.ops) return -1;
    const char *e = m->gpu.ops->error(m->gpu.ctx);
    if (e) {
        lw__errorf(m->err, LW_ERR_IO, "GPU: %.220s", e);
        return -1;
    }
    if (m->gpu.ops->pending(m->gpu.ctx)) {
        lw__errorf(m->err, LW_ERR_INVALID_ARG, "read-back still pending (await lwGpu.settle())");
        return -1;
    }
    return lw_wasm_nmse(m->y, m->y_ref, (size_t)m->rows, m->err);
}

/* After settle(): how many of the rows differ in their bits from the CPU engine's product in its plain order
 * (repacked 0) or llama.cpp's repacked gemv (1) or gemm (2) order, or -1 with the reason in
 * lw_wasm_matvec_error(). The target of the exact variant (matvec-exact.wgsl), which must match every row. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matvec_mismatch(lw_wasm_matvec *m, int repacked) {
    if (lw_wasm_matvec_nmse(m) < 0) return -1;
    double *ref = malloc((size_t)m->rows * sizeof(double));
    if (!ref) return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory"), -1;
    int bad = 0;
    if (lw_wasm_cpu_product_order(m->type, m->rows, m->k, m->wq, m->x, repacked, ref, m->err) != LW_OK)
        bad = -1;
    for (int r = 0; r < m->rows && bad >= 0; r++) {
        const float c = (float)ref[r]; /* the CPU's float, exactly */
        uint32_t a, b;
        memcpy(&a, &m->y[r], 4);
        memcpy(&b, &c, 4);
        bad += a != b;
    }
    free(ref);
    return bad;
}

/* The same against the CPU engine's own product (activations rounded to the format's vec_dot_type): near 0
 * for the activation-rounding variants, the activation quantization error for the others. */
EMSCRIPTEN_KEEPALIVE double lw_wasm_matvec_nmse_cpu(lw_wasm_matvec *m) {
    if (lw_wasm_matvec_nmse(m) < 0) return -1;
    if (!m->y_cpu && matvec_cpu(m) != LW_OK) return -1;
    return lw_wasm_nmse(m->y, m->y_cpu, (size_t)m->rows, m->err);
}
