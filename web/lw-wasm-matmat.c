/* Wasm entry points for the mat-mat kernel (src/webgpu/kernel-matmat.c) and the kernel tunables
 * (src/webgpu/gpu-tune.c), used by tests/web/matmat.test.mjs and web/tune.mjs: the format table as JSON,
 * a mat-mat check against the CPU reference (lw-wasm-ref.h) with W, X and Y placed at offsets and strides
 * inside their bindings, timing of a mat-mat dispatch and of one mat-vec dispatch per token on the same
 * data, and tune JSON -> assembled variants. Compiled only by the wasm build (cmake/webgpu.cmake). */
#include "core/core.h"
#include "lw-wasm-ref.h"
#include "webgpu/gpu-tune.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-matmat.h"
#include "webgpu/kernels.h"

#include <emscripten/emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

/* ---------------------------------------------------------------------------------------------------------
 * The format table (gpu-formats.c) as JSON: tests and the tuner iterate over it
 * ------------------------------------------------------------------------------------------------------- */

/* [{"type":2,"name":"q4_0","block":32,"bytes":18}, ...] for every lw_type the GPU kernels read. Returns the
 * length, or -1 when cap is too small. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_gpu_formats_json(char *dst, int cap) {
    if (!dst || cap <= 2) return -1;
    size_t n = 0, c = (size_t)cap;
    dst[n++] = '[';
    for (uint32_t id = 0; id < LW_TYPE_COUNT; id++) {
        const lw__gpu_format *f = lw__gpu_format_of(id);
        const lw_type_info *ti = lw_type_get(id);
        if (!f || !ti) continue;
        int w = snprintf(dst + n, c - n, "%s{\"type\":%u,\"name\":\"%s\",\"block\":%u,\"bytes\":%u}",
                         n > 1 ? "," : "", id, ti->name, f->block, f->block_bytes);
        if (w < 0 || (size_t)w >= c - n) return -1;
        n += (size_t)w;
    }
    if (n + 2 > c) return -1;
    dst[n++] = ']';
    dst[n] = 0;
    return (int)n;
}

/* ---------------------------------------------------------------------------------------------------------
 * Mat-mat check
 * ------------------------------------------------------------------------------------------------------- */

/* Where W, X and Y lie inside their bindings (elements for X and Y, bytes for W). */
typedef struct lw_wasm_layout {
    uint32_t w_offset;           /* bytes before row 0 of W (even; may be 2 mod 4) */
    uint32_t x_offset, x_stride; /* X[t] starts at x_offset + t * x_stride        */
    uint32_t y_offset, y_stride; /* Y[t] starts at y_offset + t * y_stride        */
} lw_wasm_layout;

/* One mat-mat problem: host data, reference result and the GPU objects that run it. */
typedef struct lw_wasm_matmat {
    lw_gpu gpu;                   /* the HAL (opened on upload)                               */
    lw_gpu_info info;             /* its device description                                   */
    uint32_t type;                /* weight format                                            */
    int rows, k, tokens;          /* W is rows x k; X has tokens rows of k                    */
    uint8_t *wq;                  /* W in its format (as in a GGUF file)                      */
    size_t wq_bytes;              /* bytes of wq                                              */
    float *x;                     /* tokens x k inputs, packed                                */
    double *y_ref;                /* tokens x rows reference outputs (dequantize + double dot) */
    double *y_cpu;                /* tokens x rows of the CPU engine's own products, or NULL    */
    lw_wasm_layout lay;           /* placement of W, X, Y in their buffers                    */
    size_t x_len, y_len;          /* elements of the X and Y buffers                          */
    float *y;                     /* Y buffer image (read-back target)                        */
    float *y_packed;              /* tokens x rows of y, packed for the NMSE                  */
    lw_gpu_buffer bw, bx, by, bp; /* weights, X, Y, mat-mat params                            */
    lw_gpu_buffer bpv;            /* mat-vec params, one 256-byte slot per token              */
    lw_gpu_pipeline pipe;         /* mat-mat pipeline of the bind group below                 */
    lw_gpu_bind_group group;      /* its bind group                                           */
    lw_gpu_pipeline mv_pipe;      /* mat-vec pipeline of the bind groups below                */
    lw_gpu_bind_group *mv_groups; /* one per token (its params slot)                          */
    lw_gpu_buffer bq, bqp;        /* smx: the prep pass's digits and row maxima, its params   */
    lw_gpu_pipeline q_pipe;       /* smx: the prep pass's pipeline (smx-prep.wgsl)            */
    lw_gpu_bind_group q_group;    /* its bind group                                           */
    bool group_smx;               /* the mat-mat bind group binds bq as X                     */
    lw__gpu_pipeline_cache cache; /* pipelines by variant: each is compiled once              */
    bool broken;                  /* setup failed: every later call refuses                   */
    char err[LW_ERRMSG_SIZE];     /* why the last call failed                                 */
} lw_wasm_matmat;

#define MV_SLOT                                                                                              \
    256u /* bytes per mat-vec parameter slot (WebGPU's largest minUniformBufferOffsetAlignment)              \
          */

EMSCRIPTEN_KEEPALIVE void lw_wasm_matmat_free(lw_wasm_matmat *m) {
    if (!m) return;
    if (m->gpu.ops) m->gpu.ops->destroy(m->gpu.ctx);
    lw__gpu_cache_free(&m->cache);
    free(m->wq);
    free(m->x);
    free(m->y_ref);
    free(m->y_cpu);
    free(m->y);
    free(m->y_packed);
    free(m->mv_groups);
    free(m);
}

/* Makes random W (rows x k, quantized to type) and X (tokens x k) and the reference Y. Returns NULL only when
 * memory runs out; otherwise check lw_wasm_matmat_error(). */
EMSCRIPTEN_KEEPALIVE lw_wasm_matmat *lw_wasm_matmat_new(int type, int rows, int k, int tokens,
                                                        uint32_t seed) {
    lw_wasm_matmat *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    lw__gpu_cache_init(&m->cache, NULL);
    m->type = (uint32_t)type;
    m->rows = rows;
    m->k = k;
    m->tokens = tokens;
    size_t nx, ny;
    if (tokens <= 0 || !lw__mul_size((size_t)tokens, (size_t)k > 0 ? (size_t)k : 0, &nx) ||
        !lw__mul_size((size_t)tokens, rows > 0 ? (size_t)rows : 0, &ny)) {
        lw__errorf(m->err, LW_ERR_INVALID_ARG, "bad shape: %d tokens", tokens);
        m->broken = true;
        return m;
    }
    uint32_t s = seed ? seed : 1;
    float *deq = NULL;
    lw_status st = lw_wasm_ref_weights((uint32_t)type, rows, k, &s, &m->wq, &m->wq_bytes, &deq, m->err);
    if (st == LW_ERR_NOMEM) {
        lw_wasm_matmat_free(m);
        return NULL;
    }
    if (st != LW_OK) {
        m->broken = true;
        return m;
    }
    m->x = malloc(nx * sizeof(float));
    m->y_ref = malloc(ny * sizeof(double));
    m->y_packed = malloc(ny * sizeof(float));
    if (!m->x || !m->y_ref || !m->y_packed) {
        free(deq);
        lw_wasm_matmat_free(m);
        return NULL;
    }
    for (size_t i = 0; i < nx; i++) m->x[i] = lw_wasm_rnd(&s);
    for (int t = 0; t < tokens; t++)
        lw_wasm_ref_matvec(deq, rows, k, m->x + (size_t)t * (size_t)k, m->y_ref + (size_t)t * (size_t)rows);
    free(deq);
    return m;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_matmat_error(const lw_wasm_matmat *m) {
    return m ? m->err : "out of memory";
}

/* Opens the GPU, creates the buffers and uploads W and X with this placement: W at byte w_offset of its
 * buffer (even), X[t] at element x_offset + t * (k + x_pad), Y[t] at y_offset + t * (rows + y_pad). Once per
 * problem. Returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matmat_upload(lw_wasm_matmat *m, uint32_t w_offset, uint32_t x_offset,
                                               uint32_t x_pad, uint32_t y_offset, uint32_t y_pad) {
    lw_status st;
    if (m->broken) return LW_ERR_INVALID_ARG;
    if (m->gpu.ops) return lw__errorf(m->err, LW_ERR_INVALID_ARG, "upload once per problem");
    if (w_offset > (1u << 20) || x_offset > (1u << 20) || x_pad > (1u << 20) || y_offset > (1u << 20) ||
        y_pad > (1u << 20))
        return lw__errorf(m->err, LW_ERR_INVALID_ARG, "offsets up to 1 Mi only");
    m->lay =
        (lw_wasm_layout){w_offset, x_offset, (uint32_t)m->k + x_pad, y_offset, (uint32_t)m->rows + y_pad};
    m->x_len = m->lay.x_offset + (size_t)(m->tokens - 1) * m->lay.x_stride + (size_t)m->k;
    m->y_len = m->lay.y_offset + (size_t)(m->tokens - 1) * m->lay.y_stride + (size_t)m->rows;
    size_t w_len = ((size_t)w_offset + m->wq_bytes + 3) & ~(size_t)3;
    uint8_t *wimg = calloc(w_len, 1);
    float *ximg = calloc(m->x_len, sizeof(float));
    m->y = malloc(m->y_len * sizeof(float));
    if (!wimg || !ximg || !m->y) {
        free(wimg);
        free(ximg);
        return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
    }
    memcpy(wimg + w_offset, m->wq, m->wq_bytes);
    for (int t = 0; t < m->tokens; t++)
        memcpy(ximg + m->lay.x_offset + (size_t)t * m->lay.x_stride, m->x + (size_t)t * (size_t)m->k,
               (size_t)m->k * sizeof(float));
    if ((st = lw_wasm_gpu_open(NULL, &m->gpu)) != LW_OK) {
        free(wimg);
        free(ximg);
        m->gpu.ops = NULL;
        m->broken = true;
        return lw__errorf(m->err, st, "no GPU device");
    }
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    o->info(c, &m->info);
    const uint32_t sd = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST;
    if ((st = o->buffer_create(c, w_len, sd, "W", &m->bw)) ||
        (st = o->buffer_create(c, m->x_len * 4, sd, "X", &m->bx)) ||
        (st = o->buffer_create(c, m->y_len * 4, sd | LW_GPU_USAGE_COPY_SRC, "Y", &m->by)) ||
        (st = o->buffer_create(c, sizeof(lw__gpu_matmat_params), LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST,
                               "params", &m->bp)) ||
        (st = o->buffer_create(c, (uint64_t)m->tokens * MV_SLOT, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST,
                               "matvec params", &m->bpv)))
        lw__errorf(m->err, st, "buffer creation failed: %s", o->error(c) ? o->error(c) : "");
    else if ((st = o->buffer_write(c, m->bw, 0, wimg, w_len)) != LW_OK ||
             (st = o->buffer_write(c, m->bx, 0, ximg, m->x_len * 4)) != LW_OK)
        lw__errorf(m->err, st, "upload failed");
    free(wimg);
    free(ximg);
    if (st != LW_OK) m->broken = true;
    return st;
}

/* The variant of the arguments: tm == 0 picks the device's default (lw__gpu_matmat_default). */
static lw__gpu_matmat_variant variant_of(const lw_wasm_matmat *m, int f16, int tm, int tn, int tk, int rm,
                                         int rn) {
    if (tm == 0) return lw__gpu_matmat_default(&m->info, m->type);
    lw__gpu_matmat_variant v = {
        m->type, f16 != 0, (uint32_t)tm, (uint32_t)tn, (uint32_t)tk, (uint32_t)rm, (uint32_t)rn, 0, false,
        false,   0};
    return v;
}

/* The shape of the uploaded problem. */
static lw__gpu_matmat_shape shape_of(const lw_wasm_matmat *m) {
    lw__gpu_matmat_shape s = {(uint64_t)m->rows, (uint64_t)m->k,  (uint64_t)m->tokens, m->lay.w_offset,
                              m->lay.x_offset,   m->lay.x_stride, m->lay.y_offset,     m->lay.y_stride};
    return s;
}

/* The subgroup-matrix variants' inputs: X's digits and W's row maxima by the prep pass into bq (made on
 * first use), its pipeline, parameters and bind group ready for dispatch_quant. */
static lw_status quantizer(lw_wasm_matmat *m) {
    lw_status st;
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw__gpu_smx_prep_params qp;
    uint32_t grid[3];
    const lw__gpu_matmat_shape s = shape_of(m);
    uint64_t bytes;
    if ((st = lw__gpu_smx_prep_plan(&m->info, m->type, &s, s.tokens, &qp, grid, m->err)) != LW_OK) return st;
    if (!m->bq) {
        const uint32_t sd = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST;
        if ((st = lw__gpu_smx_prep_bytes(s.k, s.tokens, s.rows, &bytes)) != LW_OK ||
            (st = o->buffer_create(c, bytes, sd, "X digits", &m->bq)) != LW_OK ||
            (st = o->buffer_create(c, sizeof qp, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST, "prep params",
                                   &m->bqp)) != LW_OK)
            return lw__errorf(m->err, st, "buffer creation failed");
    }
    lw_gpu_pipeline pipe;
    if ((st = lw__gpu_smx_prep_pipeline(&m->gpu, &m->cache, NULL, m->type, &m->info, &pipe, m->err)) != LW_OK)
        return st;
    if ((st = o->buffer_write(c, m->bqp, 0, &qp, sizeof qp)) != LW_OK)
        return lw__errorf(m->err, st, "params");
    if (pipe != m->q_pipe || !m->q_group) {
        m->q_pipe = pipe;
        lw_gpu_bind b[LW_GPU_SMX_PREP_BINDINGS] = {
            {m->bw, 0, 0}, {m->bx, 0, 0}, {m->bq, 0, 0}, {m->bqp, 0, 0}};
        if ((st = o->bind_group_create(c, pipe, b, LW_GPU_SMX_PREP_BINDINGS, &m->q_group)) != LW_OK)
            return lw__errorf(m->err, st, "bind group: %s", o->error(c) ? o->error(c) : "");
    }
    return LW_OK;
}

/* Dispatches the prep pass of the smx variants (after quantizer()). */
static void dispatch_quant(lw_wasm_matmat *m) {
    lw__gpu_smx_prep_params qp;
    uint32_t grid[3];
    char err[LW_ERRMSG_SIZE];
    const lw__gpu_matmat_shape s = shape_of(m);
    if (lw__gpu_smx_prep_plan(&m->info, m->type, &s, s.tokens, &qp, grid, err) == LW_OK)
        m->gpu.ops->dispatch(m->gpu.ctx, m->q_pipe, m->q_group, 0, grid[0], grid[1], grid[2]);
}

/* Plans variant v, writes its parameters and makes its pipeline + bind group (when not the last one's). */
static lw_status prepare(lw_wasm_matmat *m, const lw__gpu_matmat_variant *v, uint32_t grid[3]) {
    lw_status st;
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw__gpu_matmat_shape s = shape_of(m);
    lw__gpu_matmat_params p;
    if ((st = lw__gpu_matmat_plan(&m->info, v, &s, &p, grid, m->err)) != LW_OK) return st;
    if ((st = o->buffer_write(c, m->bp, 0, &p, sizeof p)) != LW_OK) return lw__errorf(m->err, st, "params");
    lw_gpu_pipeline pipe;
    if ((st = lw__gpu_matmat_pipeline(&m->gpu, &m->cache, NULL, v, &m->info, &pipe, m->err)) != LW_OK)
        return st;
    if (v->smx && (st = quantizer(m)) != LW_OK) return st; /* makes bq, which the group binds */
    if (pipe != m->pipe || !m->group || m->group_smx != v->smx) {
        m->pipe = pipe;
        m->group_smx = v->smx;
        lw_gpu_bind b[LW_GPU_MATMAT_BINDINGS] = {
            {m->bw, 0, 0}, {v->smx ? m->bq : m->bx, 0, 0}, {m->by, 0, 0}, {m->bp, 0, 0}};
        if ((st = o->bind_group_create(c, m->pipe, b, LW_GPU_MATMAT_BINDINGS, &m->group)) != LW_OK)
            return lw__errorf(m->err, st, "bind group: %s", o->error(c) ? o->error(c) : "");
    }
    return LW_OK;
}

/* Poisons the Y buffer with NaN (a value the kernel does not write fails the check, one it writes outside
 * Y[t] shows up in the padding). */
static lw_status poison(lw_wasm_matmat *m) {
    memset(m->y, 0xff, m->y_len * 4);
    return m->gpu.ops->buffer_write(m->gpu.ctx, m->by, 0, m->y, m->y_len * 4);
}

/* Runs one variant (tm == 0: the default) on the uploaded data: poisons Y, records the dispatch and
 * schedules the read of Y. round_acts: 1 rounds X as the CPU does, 2 also takes integer products (idot), 3
 * the matrix units; pad >= 0: their tile rows' padding (lw__gpu_matmat_variant.pad; < 0 the variant's own).
 * The JS caller awaits lwGpu.settle() before lw_wasm_matmat_nmse(). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matmat_run(lw_wasm_matmat *m, int f16, int tm, int tn, int tk, int rm,
                                            int rn, int round_acts, int pad) {
    lw_status st;
    if (m->broken) return LW_ERR_INVALID_ARG;
    m->err[0] = 0; /* a refused variant before does not stick */
    if (!m->gpu.ops) return lw__errorf(m->err, LW_ERR_INVALID_ARG, "upload first");
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw__gpu_matmat_variant v = variant_of(m, f16, tm, tn, tk, rm, rn);
    if (!tm && ((round_acts != 2 && v.idot) || (round_acts != 3 && v.smx))) {
        /* the default without integer products / matrix units: its own tiles */
        lw__gpu_tune t;
        lw__gpu_tune_init(&t);
        t.matmat[m->type][LW_GPU_TUNE_MM_SMX] = 0;
        if (round_acts != 2) t.matmat[m->type][LW_GPU_TUNE_MM_IDOT] = 0;
        v = lw__gpu_matmat_tuned(&t, &m->info, m->type);
        v.f16 = f16 != 0;
    }
    if (round_acts && round_acts != 3) lw__gpu_matmat_round_acts(&v);
    v.idot = round_acts == 2;
    v.smx = round_acts == 3;
    if (v.smx) v.actq = LW_GPU_ACTQ_NONE; /* the matrix units take X's 16-bit digits */
    if (v.smx && pad >= 0) v.pad = (uint32_t)pad;
    uint32_t grid[3];
    if ((st = poison(m)) != LW_OK) return lw__errorf(m->err, st, "writing Y failed");
    if ((st = prepare(m, &v, grid)) != LW_OK) return st;
    if (v.smx) dispatch_quant(m);
    o->dispatch(c, m->pipe, m->group, 0, grid[0], grid[1], grid[2]);
    if ((st = o->read(c, m->by, 0, m->y, m->y_len * 4)) != LW_OK)
        return lw__errorf(m->err, st, "read failed");
    return LW_OK;
}

/* Benchmark step: iters dispatches of the variant in one compute pass, then the read of Y (the caller times
 * it up to settle(); call once to warm up). idot: integer products (X rounded as the CPU does), 2 the
 * matrix units; pad >= 0: their tile rows' padding (lw__gpu_matmat_variant.pad). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matmat_bench(lw_wasm_matmat *m, int f16, int tm, int tn, int tk, int rm,
                                              int rn, int idot, int pad, int iters) {
    lw_status st;
    if (m->broken) return LW_ERR_INVALID_ARG;
    m->err[0] = 0; /* a refused variant before does not stick */
    if (!m->gpu.ops || iters <= 0) return lw__errorf(m->err, LW_ERR_INVALID_ARG, "upload first; iters > 0");
    lw__gpu_matmat_variant v = variant_of(m, f16, tm, tn, tk, rm, rn);
    if (idot && tm) {
        if (idot == 1) lw__gpu_matmat_round_acts(&v);
        v.idot = idot == 1;
        v.smx = idot == 2;
    }
    if (pad >= 0 && v.smx) v.pad = (uint32_t)pad; /* < 0: the variant's own */
    uint32_t grid[3];
    /* a single dispatch is the caller's correctness run: Y poisoned first, so a variant that writes
     * nothing cannot pass on the previous variant's results */
    if (iters == 1 && (st = poison(m)) != LW_OK) return lw__errorf(m->err, st, "writing Y failed");
    if ((st = prepare(m, &v, grid)) != LW_OK) return st;
    for (int i = 0; i < iters; i++) {
        if (v.smx) dispatch_quant(m); /* its cost counts: the runner quantizes before each mat-mat */
        m->gpu.ops->dispatch(m->gpu.ctx, m->pipe, m->group, 0, grid[0], grid[1], grid[2]);
    }
    return m->gpu.ops->read(m->gpu.ctx, m->by, 0, m->y, m->y_len * 4);
}

/* The same product as one mat-vec dispatch per token (variant f16, sg, wg, rows, blocks; wg == 0: the
 * device's default), iters times over all tokens, in one compute pass, then the read of Y. With iters == 0
 * only poisons Y first and runs once (a correctness run: check with lw_wasm_matmat_nmse). Each token has
 * its own parameter slot and bind group, made when the variant changes. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_matmat_matvec(lw_wasm_matmat *m, int f16, int sg, int wg, int rows,
                                               int blocks, int iters) {
    lw_status st;
    if (m->broken) return LW_ERR_INVALID_ARG;
    m->err[0] = 0; /* a refused variant before does not stick */
    if (!m->gpu.ops || iters < 0) return lw__errorf(m->err, LW_ERR_INVALID_ARG, "upload first; iters >= 0");
    const lw_gpu_ops *o = m->gpu.ops;
    void *c = m->gpu.ctx;
    lw__gpu_matvec_variant v = lw__gpu_matvec_default(&m->info, m->type);
    v.exact = v.idot = false; /* the f32 product of the reference: the exact and integer kernels round x */
    v.actq = LW_GPU_ACTQ_NONE;
    if (wg)
        v = (lw__gpu_matvec_variant){m->type, f16 != 0, sg != 0, (uint32_t)wg, (uint32_t)rows, blocks != 0,
                                     0,       0,        false,   false,        false,          false};
    lw_gpu_pipeline pipe;
    uint32_t grid[3];
    if ((st = lw__gpu_matvec_pipeline(&m->gpu, &m->cache, NULL, &v, &m->info, &pipe, m->err)) != LW_OK)
        return st;
    if (pipe != m->mv_pipe || !m->mv_groups) {
        if (!m->mv_groups && !(m->mv_groups = calloc((size_t)m->tokens, sizeof *m->mv_groups)))
            return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
        m->mv_pipe = pipe;
        for (int t = 0; t < m->tokens; t++) {
            lw__gpu_matvec_params p;
            if ((st = lw__gpu_matvec_plan(&m->info, &v, (uint64_t)m->rows, (uint64_t)m->k, m->lay.w_offset,
                                          m->lay.x_offset + (uint64_t)t * m->lay.x_stride,
                                          m->lay.y_offset + (uint64_t)t * m->lay.y_stride, &p, grid,
                                          m->err)) != LW_OK)
                return st;
            if ((st = o->buffer_write(c, m->bpv, (uint64_t)t * MV_SLOT, &p, sizeof p)) != LW_OK)
                return lw__errorf(m->err, st, "params");
            lw_gpu_bind b[LW_GPU_MATVEC_BINDINGS] = {
                {m->bw, 0, 0}, {m->bx, 0, 0}, {m->by, 0, 0}, {m->bpv, (uint64_t)t * MV_SLOT, sizeof p}};
            if ((st = o->bind_group_create(c, pipe, b, LW_GPU_MATVEC_BINDINGS, &m->mv_groups[t])) != LW_OK)
                return lw__errorf(m->err, st, "bind group: %s", o->error(c) ? o->error(c) : "");
        }
    }
    lw__gpu_matvec_params p;
    if ((st =
             lw__gpu_matvec_plan(&m->info, &v, (uint64_t)m->rows, (uint64_t)m->k, 0, 0, 0, &p, grid, m->err)))
        return st;
    if (iters == 0 && (st = poison(m)) != LW_OK) return lw__errorf(m->err, st, "writing Y failed");
    for (int i = 0; i < (iters ? iters : 1); i++)
        for (int t = 0; t < m->tokens; t++)
            o->dispatch(c, pipe, m->mv_groups[t], 0, grid[0], grid[1], grid[2]);
    return o->read(c, m->by, 0, m->y, m->y_len * 4);
}

/* After settle(): NMSE of Y against the reference over all tokens, or -1 with the reason in
 * lw_wasm_matmat_error() (GPU error, read pending, non-finite output, a write outside Y[t]). */
EMSCRIPTEN_KEEPALIVE double lw_wasm_matmat_nmse(lw_wasm_matmat *m) {
    if (m->broken || m->err[0] || !m->gpu.ops || !m->y) return -1;
    const char *e = m->gpu.ops->error(m->gpu.ctx);
    if (e) {
        lw__errorf(m->err, LW_ERR_IO, "GPU: %.220s", e);
        return -1;
    }
    if (m->gpu.ops->pending(m->gpu.ctx)) {
        lw__errorf(m->err, LW_ERR_INVALID_ARG, "read-back still pending (await lwGpu.settle())");
        return -1;
    }
    /* everything outside the Y[t] ranges must still hold the poison */
    size_t next = 0;
    for (int t = 0; t <= m->tokens; t++) {
        size_t start = t < m->tokens ? m->lay.y_offset + (size_t)t * m->lay.y_stride : m->y_len;
        for (size_t i = next; i < start; i++) {
            uint32_t u;
            memcpy(&u, &m->y[i], 4);
            if (u != 0xffffffffu) {
                lw__errorf(m->err, LW_ERR_INVALID_ARG, "Y element %zu (outside every Y[t]) was written", i);
                return -1;
            }
        }
        if (t < m->tokens) {
            memcpy(m->y_packed + (size_t)t * (size_t)m->rows, m->y + start, (size_t)m->rows * sizeof(float));
            next = start + (size_t)m->rows;
        }
    }
    return lw_wasm_nmse(m->y_packed, m->y_ref, (size_t)m->tokens * (size_t)m->rows, m->err);
}

/* The same against the CPU engine's own products (lw_wasm_cpu_product per token): near 0 for the
 * activation-rounding variants, the activation quantization error for the others. */
EMSCRIPTEN_KEEPALIVE double lw_wasm_matmat_nmse_cpu(lw_wasm_matmat *m) {
    if (lw_wasm_matmat_nmse(m) < 0) return -1;
    if (!m->y_cpu) {
        const size_t n = (size_t)m->tokens * (size_t)m->rows;
        if (!(m->y_cpu = malloc(n * sizeof(double))))
            return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory"), -1;
        for (int t = 0; t < m->tokens; t++)
            if (lw_wasm_cpu_product(m->type, m->rows, m->k, m->wq, m->x + (size_t)t * (size_t)m->k,
                                    m->y_cpu + (size_t)t * (size_t)m->rows, m->err) != LW_OK) {
                free(m->y_cpu);
                m->y_cpu = NULL;
                return -1;
            }
    }
    return lw_wasm_nmse(m->y_packed, m->y_cpu, (size_t)m->tokens * (size_t)m->rows, m->err);
}

/* ---------------------------------------------------------------------------------------------------------
 * Tunables
 * ------------------------------------------------------------------------------------------------------- */

/* Applies tune JSON (may be empty: no overrides) to a fresh lw__gpu_tune and writes, for format type on this
 * device, {"matvec":{"wg":..,"rows":..,"blocks":..,"f16":..,"sg":..},"matmat":{"tm":..,...,"wg":..},
 * "overrides":<the overrides as JSON>} into dst, or {"error":"..."} when the JSON is refused. Returns the
 * length or -1 (no device, or cap too small). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_tune_variants(const char *json, int type, char *dst, int cap) {
    if (!dst || cap <= 0) return -1;
    lw_gpu gpu;
    lw_gpu_info info;
    if (lw_wasm_gpu_open(NULL, &gpu) != LW_OK) return -1;
    lw_status st = gpu.ops->info(gpu.ctx, &info);
    gpu.ops->destroy(gpu.ctx);
    if (st != LW_OK) return -1;
    lw__gpu_tune t;
    lw__gpu_tune_init(&t);
    char err[LW_ERRMSG_SIZE] = "";
    int n;
    if (json && json[0] && lw__gpu_tune_json(&t, json, strlen(json), err) != LW_OK) {
        for (char *p = err; *p; p++)
            if (*p == '"' || *p == '\\') *p = '\'';
        n = snprintf(dst, (size_t)cap, "{\"error\":\"%s\"}", err);
        return n >= 0 && n < cap ? n : -1;
    }
    char over[2048];
    if (lw__gpu_tune_to_json(&t, over, sizeof over) < 0) return -1;
    lw__gpu_matvec_variant mv = lw__gpu_matvec_tuned(&t, &info, (uint32_t)type);
    lw__gpu_matmat_variant mm = lw__gpu_matmat_tuned(&t, &info, (uint32_t)type);
    n = snprintf(dst, (size_t)cap,
                 "{\"matvec\":{\"wg\":%u,\"rows\":%u,\"blocks\":%d,\"f16\":%d,\"sg\":%d,\"exact\":%d},"
                 "\"matmat\":{\"tm\":%u,\"tn\":%u,\"tk\":%u,\"rm\":%u,\"rn\":%u,\"f16\":%d,\"wg\":%u},"
                 "\"overrides\":%s}",
                 mv.wg_size, mv.rows, mv.blocks, mv.f16, mv.subgroups, mv.exact, mm.tm, mm.tn, mm.tk, mm.rm,
                 mm.rn, mm.f16, lw__gpu_matmat_wg_size(&mm), over);
    return n >= 0 && n < cap ? n : -1;
}
