/* Wasm test entry points of the graph-op kernels (src/webgpu/kernels-ops.h), used by tests/web/ops.test.mjs:
 * each lw_wasm_ops_<op>() makes random inputs with odd sizes, runs the CPU reference of the op (the real
 * engine kernels of src/cpu/engine-ops.c, through lw__cpu_exec on a one-node graph), then plans, binds and
 * dispatches the GPU kernel and schedules the read-back. After the JS side awaits lwGpu.settle(),
 * lw_wasm_ops_nmse() / lw_wasm_ops_equal() compare the two (lw_wasm_ops_topk_check() for sampling).
 *
 * The GPU side is laid out as a runner would: every activation of a node in ONE arena buffer at disjoint
 * 256-byte aligned ranges, each bound to its own binding (read_write), weights and tables in a second
 * buffer, and parameter blocks in a uniform arena bound with dynamic offsets (slot 1, not 0, so a wrong
 * offset shows). Compiled only by the wasm build. */
#include "core/core.h"
#include "cpu/engine-ops.h"
#include "quant/quant.h"
#include "sample/sample.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-attn.h"
#include "webgpu/kernels-ops.h"

#include <emscripten/emscripten.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

/* ---------------------------------------------------------------------------------------------------------
 * Test context
 * ------------------------------------------------------------------------------------------------------- */

#define OPS_MAX_BUFS 8    /* GPU buffers of one case          */
#define OPS_SLOT     256u /* parameter slot used: 1 x this    */

typedef struct lw_wasm_ops {
    lw_gpu gpu;                       /* the HAL                                                        */
    lw_gpu_info info;                 /* its device                                                     */
    lw__gpu_pipeline_cache cache;     /* pipelines by variant                                           */
    lw_gpu_buffer bufs[OPS_MAX_BUFS]; /* the last case's buffers (destroyed by the next case)        */
    int n_bufs;                       /* used                                                           */
    float *ref;                       /* CPU result of the last case                                    */
    float *out;                       /* GPU result (read-back target)                                  */
    size_t count;                     /* floats in ref and out                                          */
    uint32_t *pairs;                  /* top-k: GPU result pairs (id, value bits)                       */
    float *logits;                    /* top-k: the logits                                              */
    uint32_t topk_n, topk_k;          /* top-k: logits, candidates                                      */
    uint8_t *raw;                     /* rope_qkv: the two caches as read back (f16 or f32)             */
    size_t raw_elems;                 /* elements of both caches                                        */
    size_t raw_at;                    /* where in out they go once widened                              */
    int raw_f16;                      /* the caches are f16                                             */
    uint32_t kv_type;                 /* what lw_wasm_ops_kv_widen reads: the kv_store case's cache type
                                         (LW_TYPE_F16 otherwise: a RoPE case's f16 cache)               */
    char err[LW_ERRMSG_SIZE];         /* why the last call failed                                       */
} lw_wasm_ops;

static float rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)((*s >> 8) * (2.0 / 16777216.0) - 1.0);
}

static uint32_t rndu(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void release_case(lw_wasm_ops *c) {
    for (int i = 0; i < c->n_bufs; i++) c->gpu.ops->buffer_destroy(c->gpu.ctx, c->bufs[i]);
    c->n_bufs = 0;
    free(c->ref);
    free(c->out);
    free(c->pairs);
    free(c->logits);
    free(c->raw);
    c->raw = NULL;
    c->ref = c->out = c->logits = NULL;
    c->pairs = NULL;
    c->count = 0;
    c->kv_type = LW_TYPE_F16;
    c->err[0] = 0;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_ops_free(lw_wasm_ops *c) {
    if (!c) return;
    if (c->gpu.ops) {
        release_case(c);
        c->gpu.ops->destroy(c->gpu.ctx);
    }
    lw__gpu_cache_free(&c->cache);
    free(c);
}

EMSCRIPTEN_KEEPALIVE lw_wasm_ops *lw_wasm_ops_new(void) {
    lw_wasm_ops *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    lw__gpu_cache_init(&c->cache, NULL);
    if (lw_wasm_gpu_open(NULL, &c->gpu) != LW_OK) {
        snprintf(c->err, sizeof c->err, "no GPU device");
        c->gpu.ops = NULL;
        return c;
    }
    c->gpu.ops->info(c->gpu.ctx, &c->info);
    return c;
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_ops_error(const lw_wasm_ops *c) {
    return c ? c->err : "out of memory";
}

/* Starts a case: frees the last one's objects, allocates ref/out of n floats. */
static lw_status begin_case(lw_wasm_ops *c, size_t n) {
    if (!c->gpu.ops) return LW_ERR_IO;
    release_case(c);
    c->ref = calloc(n ? n : 1, sizeof(float));
    c->out = malloc((n ? n : 1) * sizeof(float));
    if (!c->ref || !c->out) return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    memset(c->out, 0xff, n * sizeof(float)); /* NaN: an element the kernel misses fails the check */
    c->count = n;
    return LW_OK;
}

static lw_status new_buffer(lw_wasm_ops *c, uint64_t size, uint32_t usage, const char *label,
                            lw_gpu_buffer *out) {
    if (c->n_bufs == OPS_MAX_BUFS) return lw__errorf(c->err, LW_ERR_TOO_LARGE, "too many buffers");
    lw_status st = c->gpu.ops->buffer_create(c->gpu.ctx, size ? size : 4, usage, label, out);
    if (st != LW_OK) return lw__errorf(c->err, st, "buffer %s: %s", label, c->gpu.ops->error(c->gpu.ctx));
    c->bufs[c->n_bufs++] = *out;
    return LW_OK;
}

/* An arena of 256-byte aligned ranges, as a planned activation arena. */
typedef struct arena {
    uint64_t off[6];  /* range starts (bytes) */
    uint64_t size[6]; /* range sizes (bytes)  */
    int n;            /* ranges               */
    uint64_t top;     /* bytes in all         */
} arena;

static int arena_add(arena *a, uint64_t bytes) {
    a->off[a->n] = a->top;
    a->size[a->n] = bytes ? (bytes + 3) & ~(uint64_t)3 : 4;
    a->top += (a->size[a->n] + 255) & ~(uint64_t)255;
    return a->n++;
}

/* Creates the arena buffer and uploads data[i] (bytes[i]; NULL: leave zero) into range i. */
static lw_status arena_upload(lw_wasm_ops *c, const arena *a, const void *const *data, const uint64_t *bytes,
                              lw_gpu_buffer *buf) {
    lw_status st = new_buffer(c, a->top, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST | LW_GPU_USAGE_COPY_SRC,
                              "arena", buf);
    for (int i = 0; st == LW_OK && i < a->n; i++)
        if (data[i] && bytes[i])
            st = c->gpu.ops->buffer_write(c->gpu.ctx, *buf, a->off[i], data[i], bytes[i]);
    return st;
}

/* Uploads bytes (padded to 4) into a new read-only-usage buffer. */
static lw_status upload(lw_wasm_ops *c, const void *data, uint64_t bytes, const char *label,
                        lw_gpu_buffer *buf) {
    lw_status st =
        new_buffer(c, (bytes + 3) & ~(uint64_t)3, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, label, buf);
    if (st != LW_OK || !bytes) return st;
    if (bytes % 4) { /* writes are multiples of 4 bytes */
        uint8_t *pad = calloc(1, (bytes + 3) & ~(uint64_t)3);
        if (!pad) return LW_ERR_NOMEM;
        memcpy(pad, data, bytes);
        st = c->gpu.ops->buffer_write(c->gpu.ctx, *buf, 0, pad, (bytes + 3) & ~(uint64_t)3);
        free(pad);
        return st;
    }
    return c->gpu.ops->buffer_write(c->gpu.ctx, *buf, 0, data, bytes);
}

/* Writes the parameter block into slot 1 of a new uniform buffer, binds binds[0..n) + the params (the
 * last binding, dynamic), records one dispatch. */
static lw_status dispatch(lw_wasm_ops *c, lw_gpu_pipeline pipe, lw_gpu_bind *binds, uint32_t n_storage,
                          uint32_t params_at, const void *params, size_t params_size,
                          const uint32_t grid[3]) {
    const lw_gpu_ops *o = c->gpu.ops;
    lw_gpu_buffer ub;
    uint8_t slots[2 * OPS_SLOT];
    memset(slots, 0xee, sizeof slots); /* slot 0 holds garbage: the dynamic offset must be honoured */
    memcpy(slots + OPS_SLOT, params, params_size);
    lw_status st = new_buffer(c, sizeof slots, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST, "params", &ub);
    if (st == LW_OK) st = o->buffer_write(c->gpu.ctx, ub, 0, slots, sizeof slots);
    if (st != LW_OK) return st;
    lw_gpu_bind all[LW_GPU_MAX_BINDINGS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_storage + 1; i++) {
        if (i == params_at)
            all[n++] = (lw_gpu_bind){ub, 0, OPS_SLOT};
        else
            all[n++] = *binds++;
    }
    lw_gpu_bind_group group;
    if ((st = o->bind_group_create(c->gpu.ctx, pipe, all, n, &group)) != LW_OK)
        return lw__errorf(c->err, st, "bind group: %s", o->error(c->gpu.ctx) ? o->error(c->gpu.ctx) : "");
    o->dispatch(c->gpu.ctx, pipe, group, OPS_SLOT, grid[0], grid[1], grid[2]);
    return LW_OK;
}

/* Submits and schedules the read of bytes at off of buf into dst. */
static lw_status finish(lw_wasm_ops *c, lw_gpu_buffer buf, uint64_t off, void *dst, uint64_t bytes) {
    lw_status st = c->gpu.ops->submit(c->gpu.ctx);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, buf, off, dst, bytes);
    if (st != LW_OK) lw__errorf(c->err, st, "submit/read failed");
    return st;
}

static lw_gpu_bind bind_range(lw_gpu_buffer buf, const arena *a, int i) {
    return (lw_gpu_bind){buf, a->off[i], a->size[i]};
}

/* ---------------------------------------------------------------------------------------------------------
 * The CPU reference: one node of a graph through the engine's own executor
 * ------------------------------------------------------------------------------------------------------- */

/* A one-node graph. Inputs are "weight" tensors (any data the node reads); dst is an activation pointed at
 * c->ref. */
typedef struct ref_graph {
    lw__graph g; /* the graph        */
    lw__exec ex; /* its execution    */
} ref_graph;

static lw_status ref_run(lw_wasm_ops *c, ref_graph *r, int64_t n_ctx) {
    size_t shared = 0, tf = 0;
    lw__pool *pool = NULL;
    lw_status st = lw__cpu_scratch_needs(&r->g, r->ex.n_tokens, n_ctx, &shared, &tf);
    uint8_t *scratch = NULL;
    float *ts = NULL;
    if (st == LW_OK && (st = lw__pool_create(NULL, 1, &pool)) == LW_OK) {
        scratch = malloc(shared + 16);
        ts = malloc((tf + 16) * sizeof(float));
        if (!scratch || !ts) st = LW_ERR_NOMEM;
    }
    if (st == LW_OK) {
        r->ex.g = &r->g;
        r->ex.kern = lw__cpu_kernels_best();
        r->ex.pool = pool;
        r->ex.scratch = scratch;
        r->ex.thread_scratch = ts;
        r->ex.thread_floats = tf;
        lw__cpu_exec(&r->ex);
    } else {
        lw__errorf(c->err, st, "CPU reference: %s", lw_status_str(st));
    }
    free(scratch);
    free(ts);
    lw__pool_free(pool);
    lw__graph_free(&r->g);
    return st;
}

/* Output activation of ne0 x rows at c->ref. */
static int32_t ref_dst(ref_graph *r, float *data, int64_t ne0, int64_t rows, lw__rows kind) {
    int32_t d = lw__graph_act(&r->g, "dst", ne0, kind);
    if (d >= 0) {
        r->g.t[d].data = data;
        r->g.t[d].ne1 = rows;
    }
    return d;
}

/* ---------------------------------------------------------------------------------------------------------
 * Statistics of the last case
 * ------------------------------------------------------------------------------------------------------- */

static bool ready(lw_wasm_ops *c) {
    if (c->err[0] || !c->gpu.ops) return false;
    const char *e = c->gpu.ops->error(c->gpu.ctx);
    if (e) {
        lw__errorf(c->err, LW_ERR_IO, "GPU: %.220s", e);
        return false;
    }
    if (c->gpu.ops->pending(c->gpu.ctx)) {
        lw__errorf(c->err, LW_ERR_INVALID_ARG, "read-back still pending (await lwGpu.settle())");
        return false;
    }
    return true;
}

/* sum((gpu - ref)^2) / sum(ref^2) (the plain sum when ref is all zero); -1 with a message on failure or a
 * non-finite value where the reference is finite. */
EMSCRIPTEN_KEEPALIVE double lw_wasm_ops_nmse(lw_wasm_ops *c) {
    if (!ready(c)) return -1;
    double num = 0, den = 0;
    for (size_t i = 0; i < c->count; i++) {
        if (!isfinite(c->out[i]) && isfinite(c->ref[i])) {
            lw__errorf(c->err, LW_ERR_INVALID_ARG, "element %zu: GPU %g, CPU %g", i, (double)c->out[i],
                       (double)c->ref[i]);
            return -1;
        }
        if (memcmp(&c->out[i], &c->ref[i], sizeof(float)) == 0) { /* equal (also equal infinities) */
            if (isfinite(c->ref[i])) den += (double)c->ref[i] * c->ref[i];
            continue;
        }
        double d = (double)c->out[i] - (double)c->ref[i];
        num += d * d;
        den += (double)c->ref[i] * c->ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Elements whose GPU and CPU bits are identical. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_equal(lw_wasm_ops *c) {
    if (!ready(c)) return -1;
    int n = 0;
    for (size_t i = 0; i < c->count; i++) n += memcmp(&c->out[i], &c->ref[i], sizeof(float)) == 0;
    return n;
}

/* Largest distance in f16 steps between GPU and CPU values that are both halves (GEGLU with b = 1); -1
 * when a value is not a half. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_max_f16_ulps(lw_wasm_ops *c) {
    if (!ready(c)) return -1;
    int m = 0;
    for (size_t i = 0; i < c->count; i++) {
        uint16_t a = lw__fp32_to_fp16(c->out[i]), b = lw__fp32_to_fp16(c->ref[i]);
        if (lw__fp16_to_fp32(a) != c->out[i] || lw__fp16_to_fp32(b) != c->ref[i]) return -1;
        /* halves as ordered integers: sign-magnitude to two's complement */
        int ia = a & 0x8000 ? -(a & 0x7fff) : a, ib = b & 0x8000 ? -(b & 0x7fff) : b;
        int d = ia > ib ? ia - ib : ib - ia;
        if (d > m) m = d;
    }
    return m;
}

EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_count(const lw_wasm_ops *c) {
    return (int)c->count;
}

/* Largest |gpu - cpu| / max(|cpu|, tiny) over the elements. */
EMSCRIPTEN_KEEPALIVE double lw_wasm_ops_max_rel(lw_wasm_ops *c) {
    if (!ready(c)) return -1;
    double m = 0;
    for (size_t i = 0; i < c->count; i++) {
        double d = fabs((double)c->out[i] - c->ref[i]) / fmax(fabs((double)c->ref[i]), 1e-30);
        if (d > m) m = d;
    }
    return m;
}

/* ---------------------------------------------------------------------------------------------------------
 * Element-wise ops (ADD, SCALE, SOFTCAP, SWIGLU, GEGLU) and OUT_ROWS
 * ------------------------------------------------------------------------------------------------------- */

/* op: lw__gpu_eltwise_op; rows x n; b_rows 1 or rows (ADD); table: GEGLU's table variant; range: inputs
 * uniform in [-range, range); b_ones: b = 1 (GEGLU's GELU values alone); layout on the GPU: 0 contiguous
 * rows, 1 rows 7 elements further apart than n (a, b, d), 2 b inside a's binding as a fused gate|up
 * projection (rows [a | b], stride 2n; binary ops, b_rows = rows). Returns an lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_eltwise(lw_wasm_ops *c, int op, int n, int rows, int b_rows, int table,
                                             int wg, uint32_t seed, float f0, float f1, float range,
                                             int b_ones, int layout) {
    size_t total = (size_t)n * (size_t)rows, tb = (size_t)n * (size_t)b_rows;
    lw_status st = begin_case(c, total);
    if (st != LW_OK) return st;
    float *a = malloc(total * sizeof(float)), *b = malloc(tb * sizeof(float));
    uint32_t *gt = NULL;
    if (!a || !b) {
        free(a);
        free(b);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i < total; i++) a[i] = range * rnd(&s);
    for (size_t i = 0; i < tb; i++) b[i] = b_ones ? 1.0f : rnd(&s);

    /* CPU: the engine's op */
    static const uint8_t gop[] = {0, LW_OP_ADD, LW_OP_SCALE, LW_OP_SOFTCAP, LW_OP_SWIGLU, LW_OP_GEGLU};
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 4, 1);
    int32_t ta = lw__graph_weight(&r.g, "a", LW_TYPE_F32, n, rows, a);
    int32_t tbi = lw__graph_weight(&r.g, "b", LW_TYPE_F32, n, b_rows, b);
    int32_t td = ref_dst(&r, c->ref, n, rows, LW_ROWS_TOKENS);
    const bool bin = op == LW_GPU_ELT_ADD || op == LW_GPU_ELT_SWIGLU || op == LW_GPU_ELT_GEGLU;
    lw__node *nd =
        op >= 1 && op <= 5 ? lw__graph_node(&r.g, (lw__op)gop[op], td, ta, bin ? tbi : -1, -1) : NULL;
    if (!nd) {
        free(a);
        free(b);
        lw__graph_free(&r.g);
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "eltwise: bad op %d or shape", op);
    }
    nd->fp[0] = f0;
    nd->fp[1] = f1;
    r.ex.n_tokens = rows;
    r.ex.n_outputs = rows;
    st = ref_run(c, &r, 1);

    /* GPU */
    lw__gpu_eltwise_variant v = lw__gpu_eltwise_default(&c->info, (uint32_t)op);
    v.gelu_table = table != 0;
    if (wg > 0) v.wg_size = (uint32_t)wg;
    lw__gpu_eltwise_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    /* GPU-side copies of a, b and d in the asked layout */
    const size_t pad = layout == 1 ? 7 : 0, sa = layout == 2 ? 2 * (size_t)n : (size_t)n + pad,
                 sb = (size_t)n + pad, sd = (size_t)n + pad;
    const size_t na = sa * (size_t)rows, nb = sb * (size_t)b_rows, ndl = sd * (size_t)rows;
    float *ga = malloc(na * 4), *gb = malloc(nb * 4), *gd = malloc(ndl * 4);
    if (!ga || !gb || !gd) st = LW_ERR_NOMEM;
    if (layout == 2 && (!bin || b_rows != rows))
        st = lw__errorf(c->err, LW_ERR_INVALID_ARG, "layout 2: binary ops");
    for (int rr = 0; st == LW_OK && rr < rows; rr++) {
        memcpy(ga + (size_t)rr * sa, a + (size_t)rr * n, (size_t)n * 4);
        if (layout == 2) memcpy(ga + (size_t)rr * sa + n, b + (size_t)rr * n, (size_t)n * 4);
        memset(gd + (size_t)rr * sd, 0xff, sd * 4);
    }
    for (int rr = 0; st == LW_OK && rr < b_rows; rr++)
        memcpy(gb + (size_t)rr * sb, b + (size_t)rr * n, (size_t)n * 4);
    v.b_in_a = layout == 2;
    arena ar = {0};
    int ia = arena_add(&ar, na * 4), ib = arena_add(&ar, nb * 4), id = arena_add(&ar, ndl * 4);
    lw_gpu_buffer buf = 0, tbuf = 0;
    if (st == LW_OK)
        st = lw__gpu_eltwise_plan(&c->info, &v, n, rows, 0, layout == 2 ? (uint64_t)n : 0, b_rows, 0, f0, f1,
                                  &p, grid, c->err);
    if (st == LW_OK && layout) st = lw__gpu_eltwise_strides(&p, sa, layout == 2 ? sa : sb, sd, c->err);
    if (st == LW_OK) st = lw__gpu_eltwise_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[3] = {ga, gb, gd}; /* d starts as NaN */
        const uint64_t bytes[3] = {na * 4, nb * 4, ndl * 4};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK && op == LW_GPU_ELT_GEGLU && v.gelu_table) {
        gt = malloc(LW_GPU_GELU_TABLE_WORDS * 4);
        if (!gt)
            st = LW_ERR_NOMEM;
        else {
            lw__gpu_gelu_table(gt);
            st = upload(c, gt, LW_GPU_GELU_TABLE_WORDS * 4, "gelu table", &tbuf);
        }
    }
    if (st == LW_OK) {
        lw_gpu_bind binds[4];
        uint32_t nb = 0, at;
        binds[nb++] = bind_range(buf, &ar, ia);
        if (bin && !v.b_in_a) binds[nb++] = bind_range(buf, &ar, ib);
        binds[nb++] = bind_range(buf, &ar, id);
        at = nb;
        if (tbuf) binds[nb++] = (lw_gpu_bind){tbuf, 0, 0};
        st = dispatch(c, pipe, binds, nb, at, &p, sizeof p, grid);
    }
    /* strided d: read the whole range into a scratch kept on the context, compacted after settle */
    if (st == LW_OK && sd == (size_t)n) st = finish(c, buf, ar.off[id], c->out, total * 4);
    if (st == LW_OK && sd != (size_t)n) {
        c->raw = (uint8_t *)gd;
        gd = NULL;
        c->raw_elems = sd; /* row stride for lw_wasm_ops_compact */
        c->raw_at = (size_t)n;
        st = finish(c, buf, ar.off[id], c->raw, ndl * 4);
    }
    free(a);
    free(b);
    free(ga);
    free(gb);
    free(gd);
    free(gt);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "eltwise failed");
    return st;
}

/* After settle, for strided eltwise results: the rows of the read-back range into out. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_ops_compact(lw_wasm_ops *c) {
    if (!c->raw || !c->raw_at) return;
    const size_t n = c->raw_at, stride = c->raw_elems, rows = c->count / n;
    for (size_t r = 0; r < rows; r++) memcpy(c->out + r * n, (const float *)c->raw + r * stride, n * 4);
}

/* OUT_ROWS of n_tokens rows of n: the last row (last = 1) or all. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_out_rows(lw_wasm_ops *c, int n, int n_tokens, int last, uint32_t seed) {
    const int n_out = last ? 1 : n_tokens;
    size_t total = (size_t)n * (size_t)n_tokens;
    lw_status st = begin_case(c, (size_t)n * (size_t)n_out);
    if (st != LW_OK) return st;
    float *x = malloc(total * sizeof(float));
    int32_t *rows = malloc((size_t)n_out * sizeof(int32_t));
    if (!x || !rows) {
        free(x);
        free(rows);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i < total; i++) x[i] = rnd(&s);
    for (int i = 0; i < n_out; i++) rows[i] = last ? n_tokens - 1 : i;
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 2, 1);
    int32_t tx = lw__graph_weight(&r.g, "x", LW_TYPE_F32, n, n_tokens, x);
    int32_t td = ref_dst(&r, c->ref, n, n_out, LW_ROWS_OUTPUTS);
    lw__graph_node(&r.g, LW_OP_OUT_ROWS, td, tx, -1, -1);
    r.ex.n_tokens = n_tokens;
    r.ex.n_outputs = n_out;
    r.ex.out_rows = rows;
    st = ref_run(c, &r, 1);

    lw__gpu_eltwise_variant v = lw__gpu_eltwise_default(&c->info, LW_GPU_ELT_COPY);
    lw__gpu_eltwise_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    arena ar = {0};
    int ix = arena_add(&ar, total * 4), id = arena_add(&ar, (size_t)n * n_out * 4);
    lw_gpu_buffer buf = 0;
    if (st == LW_OK)
        st = lw__gpu_out_rows_plan(&c->info, &v, n, last ? n_tokens - 1 : 0, n_out, 0, 0, &p, grid, c->err);
    if (st == LW_OK) st = lw__gpu_eltwise_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[2] = {x, c->out};
        const uint64_t bytes[2] = {total * 4, (uint64_t)n * n_out * 4};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK) {
        lw_gpu_bind binds[2] = {bind_range(buf, &ar, ix), bind_range(buf, &ar, id)};
        st = dispatch(c, pipe, binds, 2, 2, &p, sizeof p, grid);
    }
    if (st == LW_OK) st = finish(c, buf, ar.off[id], c->out, (uint64_t)n * n_out * 4);
    free(x);
    free(rows);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "out_rows failed");
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * RMS_NORM
 * ------------------------------------------------------------------------------------------------------- */

/* rows x n, groups of `group` (0: whole row); weight: 0 none, 1 `group` elements, 2 n elements. add: the
 * fused residual ADD (x = a + b): the compared result is the normalised rows followed by the sum rows.
 * pad > 0 (without add): x and d rows on the GPU are n + pad elements apart (lw__gpu_norm_strides).
 * sum: 0 the device's default variant (exact on CPU adapters only), 1 the f32 sum of squares forced (the
 * GPUs' default), 2 the exact sum forced (the CPU's bits on any adapter). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_rms_norm(lw_wasm_ops *c, int n, int group, int rows, int weight, int sg,
                                              int wg, uint32_t seed, float eps, int add, int pad, int sum) {
    size_t total = (size_t)n * (size_t)rows;
    const int gs = group > 0 ? group : n, wlen = weight == 0 ? 0 : weight == 1 ? gs : n;
    lw_status st = begin_case(c, add ? 2 * total : total);
    if (st != LW_OK) return st;
    float *x = malloc(total * sizeof(float)), *b = malloc(total * sizeof(float)),
          *w = malloc(((size_t)wlen + 1) * sizeof(float));
    if (!x || !w || !b) {
        free(x);
        free(b);
        free(w);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    for (int r = 0; r < rows; r++) /* rows of different magnitudes */
        for (int i = 0; i < n; i++) x[(size_t)r * n + i] = rnd(&s) * (0.05f + (float)(r % 5));
    for (size_t i = 0; i < total; i++) b[i] = rnd(&s);
    for (int i = 0; i < wlen; i++) w[i] = 1.0f + 0.5f * rnd(&s);
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 5, 2);
    int32_t tx = lw__graph_weight(&r.g, "x", LW_TYPE_F32, n, rows, x);
    int32_t tw = wlen ? lw__graph_weight(&r.g, "w", LW_TYPE_F32, wlen, 1, w) : -1;
    int32_t td = ref_dst(&r, c->ref, n, rows, LW_ROWS_TOKENS);
    if (add) { /* ADD then RMS_NORM, as the engine's graph has them */
        int32_t tb = lw__graph_weight(&r.g, "b", LW_TYPE_F32, n, rows, b);
        int32_t tsum = ref_dst(&r, c->ref + total, n, rows, LW_ROWS_TOKENS);
        lw__graph_node(&r.g, LW_OP_ADD, tsum, tx, tb, -1);
        tx = tsum;
    }
    lw__node *nd = lw__graph_node(&r.g, LW_OP_RMS_NORM, td, tx, tw, -1);
    if (nd) {
        nd->ip[0] = group;
        nd->fp[0] = eps;
    }
    r.ex.n_tokens = rows;
    r.ex.n_outputs = rows;
    st = ref_run(c, &r, 1);

    lw__gpu_norm_variant v = lw__gpu_norm_default(&c->info);
    v.subgroups = sg != 0;
    v.add_input = add != 0;
    if (sum) v.exact = sum == 2;
    if (wg > 0) v.wg_size = (uint32_t)wg;
    lw__gpu_norm_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    arena ar = {0};
    int ix = arena_add(&ar, total * 4), id = arena_add(&ar, total * 4), ib = arena_add(&ar, total * 4),
        isum = arena_add(&ar, total * 4);
    lw_gpu_buffer buf = 0, wbuf = 0;
    /* the weight at an odd element offset inside its buffer, as a slice of a larger weight buffer */
    float *wpad = calloc((size_t)wlen + 8, sizeof(float));
    if (!wpad)
        st = LW_ERR_NOMEM;
    else
        memcpy(wpad + 3, w, (size_t)wlen * sizeof(float));
    if (st == LW_OK)
        st = add ? lw__gpu_norm_add_plan(&c->info, &v, n, group, rows, 0, 0, 0, 3, wlen, 0, eps, &p, grid,
                                         c->err)
                 : lw__gpu_norm_plan(&c->info, &v, n, group, rows, 0, 3, wlen, 0, eps, &p, grid, c->err);
    if (st == LW_OK && pad > 0 && !add) { /* strided rows: x re-laid, d read whole and compacted */
        const size_t stride = (size_t)n + (size_t)pad, sp = stride * (size_t)rows;
        float *xs = malloc(sp * 4);
        c->raw = malloc(sp * 4);
        if (!xs || !c->raw) {
            free(xs);
            st = LW_ERR_NOMEM;
        } else {
            for (int rr = 0; rr < rows; rr++)
                memcpy(xs + (size_t)rr * stride, x + (size_t)rr * n, (size_t)n * 4);
            memset(c->raw, 0xff, sp * 4);
            free(x);
            x = xs;
            c->raw_elems = stride;
            c->raw_at = (size_t)n;
            ar = (arena){0};
            ix = arena_add(&ar, sp * 4);
            id = arena_add(&ar, sp * 4);
            st = lw__gpu_norm_strides(&p, stride, stride, c->err);
        }
    }
    if (st == LW_OK) st = lw__gpu_norm_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const bool strided = c->raw != NULL;
        const uint64_t xb = strided ? ar.size[ix] : total * 4;
        const void *data[4] = {x, strided ? (const void *)c->raw : (const void *)c->out, b, c->out};
        const uint64_t bytes[4] = {xb, xb, total * 4, total * 4};
        arena up = ar;
        if (strided) up.n = 2;
        st = arena_upload(c, &up, data, bytes, &buf);
    }
    if (st == LW_OK) st = upload(c, wpad, ((size_t)wlen + 8) * 4, "norm weight", &wbuf);
    if (st == LW_OK) {
        lw_gpu_bind binds[5] = {bind_range(buf, &ar, ix),
                                {wbuf, 0, 0},
                                bind_range(buf, &ar, id),
                                bind_range(buf, &ar, ib),
                                bind_range(buf, &ar, isum)};
        st = dispatch(c, pipe, binds, add ? 5 : 3, add ? 5 : 3, &p, sizeof p, grid);
    }
    if (st == LW_OK)
        st = c->raw ? finish(c, buf, ar.off[id], c->raw, ar.size[id])
                    : finish(c, buf, ar.off[id], c->out, total * 4);
    if (st == LW_OK && add) st = c->gpu.ops->read(c->gpu.ctx, buf, ar.off[isum], c->out + total, total * 4);
    free(x);
    free(b);
    free(w);
    free(wpad);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "rms_norm failed");
    return st;
}

/* One row of n (fused ADD when add) through the f32-sum norm (subgroups, wg invocations; 0: the device's)
 * that also rounds it to 8 bits (kind LW_GPU_ACTQ_Q8_0 or _Q8_K) as the integer mat-vecs read it. out holds
 * the normalised row (n floats, ref: the CPU's; lw_wasm_ops_count() is n), then the quant words as the kernel
 * wrote them (n / 4 quants, then two words per 32 elements: actq-quant.wgsl's layout): the test rounds out's
 * row itself and compares those words (lw_wasm_ops_out_ptr). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_rms_norm_q8(lw_wasm_ops *c, int n, int kind, int wg, uint32_t seed,
                                                 int add) {
    if (n <= 0 || n % 256 || (kind != LW_GPU_ACTQ_Q8_0 && kind != LW_GPU_ACTQ_Q8_K))
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "rms_norm_q8: n a multiple of 256, kind 1 or 2");
    const size_t words = (size_t)n / 4 + (size_t)n / 16;
    lw_status st = begin_case(c, (size_t)n + words);
    if (st != LW_OK) return st;
    float *x = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *w = malloc((size_t)n * 4),
          *sum = malloc((size_t)n * 4);
    if (!x || !b || !w || !sum) {
        free(x);
        free(b);
        free(w);
        free(sum);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    /* a few large elements, so blocks' maxima and the Q8_K super-block's first largest element vary */
    for (int i = 0; i < n; i++) x[i] = rnd(&s) * ((rndu(&s) % 61) == 0 ? 9.0f : 1.0f);
    for (int i = 0; i < n; i++) b[i] = rnd(&s);
    for (int i = 0; i < n; i++) w[i] = 1.0f + 0.5f * rnd(&s);
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 5, 2);
    int32_t tx = lw__graph_weight(&r.g, "x", LW_TYPE_F32, n, 1, x);
    int32_t tw = lw__graph_weight(&r.g, "w", LW_TYPE_F32, n, 1, w);
    int32_t td = ref_dst(&r, c->ref, n, 1, LW_ROWS_TOKENS);
    if (add) {
        int32_t tb = lw__graph_weight(&r.g, "b", LW_TYPE_F32, n, 1, b);
        int32_t tsum = ref_dst(&r, sum, n, 1, LW_ROWS_TOKENS);
        lw__graph_node(&r.g, LW_OP_ADD, tsum, tx, tb, -1);
        tx = tsum;
    }
    lw__node *nd = lw__graph_node(&r.g, LW_OP_RMS_NORM, td, tx, tw, -1);
    if (nd) nd->fp[0] = 1e-5f;
    r.ex.n_tokens = 1;
    r.ex.n_outputs = 1;
    st = ref_run(c, &r, 1);
    lw__gpu_norm_variant v = lw__gpu_norm_default(&c->info);
    v.subgroups = true;
    v.exact = false;
    v.add_input = add != 0;
    v.q8_out = (uint32_t)kind;
    if (wg > 0) v.wg_size = (uint32_t)wg;
    lw__gpu_norm_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    arena ar = {0};
    const int ix = arena_add(&ar, (uint64_t)n * 4), id = arena_add(&ar, (uint64_t)n * 4),
              ib = arena_add(&ar, (uint64_t)n * 4), isum = arena_add(&ar, (uint64_t)n * 4),
              iq = arena_add(&ar, words * 4);
    lw_gpu_buffer buf = 0, wbuf = 0;
    if (st == LW_OK)
        st = add ? lw__gpu_norm_add_plan(&c->info, &v, n, 0, 1, 0, 0, 0, 0, n, 0, 1e-5f, &p, grid, c->err)
                 : lw__gpu_norm_plan(&c->info, &v, n, 0, 1, 0, 0, n, 0, 1e-5f, &p, grid, c->err);
    if (st == LW_OK) st = lw__gpu_norm_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[5] = {x, NULL, b, NULL, NULL};
        const uint64_t bytes[5] = {(uint64_t)n * 4, 0, (uint64_t)n * 4, 0, 0};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK) st = upload(c, w, (uint64_t)n * 4, "norm weight", &wbuf);
    if (st == LW_OK) {
        lw_gpu_bind sb[6] = {bind_range(buf, &ar, ix), {wbuf, 0, 0}, bind_range(buf, &ar, id)};
        uint32_t ns = 3;
        if (add) {
            sb[ns++] = bind_range(buf, &ar, ib);
            sb[ns++] = bind_range(buf, &ar, isum);
        }
        sb[ns++] = bind_range(buf, &ar, iq); /* (after the parameters) */
        st = dispatch(c, pipe, sb, ns, ns - 1, &p, sizeof p, grid);
    }
    if (st == LW_OK) st = finish(c, buf, ar.off[id], c->out, (uint64_t)n * 4);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, buf, ar.off[iq], c->out + n, words * 4);
    c->count = (size_t)n; /* the checks (lw_wasm_ops_nmse, ...) cover the row; the words follow it */
    free(x);
    free(b);
    free(w);
    free(sum);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "rms_norm_q8 failed");
    return st;
}

/* The GPU result of the last case (lw_wasm_ops_count() floats; some cases put words there). */
EMSCRIPTEN_KEEPALIVE const float *lw_wasm_ops_out_ptr(const lw_wasm_ops *c) {
    return c->out;
}

/* ---------------------------------------------------------------------------------------------------------
 * ROPE
 * ------------------------------------------------------------------------------------------------------- */

/* rows tokens at positions pos0.. of n_head heads of hd; n_rot rotated; mode 0 / 2; ff: frequency factors;
 * yarn: ext_factor 1 with correction dims (2, n_rot/2 - 3) and freq_scale 0.25. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_rope(lw_wasm_ops *c, int n_head, int hd, int n_rot, int mode, int rows,
                                          int pos0, int ff, int yarn, uint32_t seed, float freq_base,
                                          int kv16) {
    const int n = n_head * hd;
    size_t total = (size_t)n * (size_t)rows;
    /* ff 2: no frequency factors, and the kernel reads the host's sin/cos table of the rows (has_ff 2, as the
     * model runs it: gpu-model-rope.c), made by the CPU op's own lw__rope_cache */
    const int table = ff == 2;
    if (table) ff = 0;
    /* kv16: RoPE fused with KV_STORE into an f16 cache of pos0 + rows + 1 cells (compared whole, widened
     * with lw_wasm_ops_kv_widen; CPU: ROPE then KV_STORE) */
    const size_t cells = (size_t)n * (size_t)(pos0 + rows + 1), cache_bytes = cells * 2;
    uint16_t *cache = NULL, *gcache = NULL;
    float *rot = NULL;
    lw_status st = begin_case(c, kv16 ? cells : total);
    if (st != LW_OK) return st;
    float *x = malloc(total * sizeof(float)), *fr = malloc(((size_t)n_rot / 2 + 1) * sizeof(float));
    if (!x || !fr) {
        free(x);
        free(fr);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i < total; i++) x[i] = rnd(&s) * 2.0f;
    for (int i = 0; i < n_rot / 2; i++) fr[i] = 1.0f + 3.0f * (rnd(&s) + 1.0f); /* 1..7, like llama 3's */
    if (kv16) {
        cache = malloc(cache_bytes);
        gcache = malloc(cache_bytes);
        rot = malloc(total * sizeof(float));
        if (!cache || !gcache || !rot) {
            free(x);
            free(fr);
            free(cache);
            free(gcache);
            free(rot);
            return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < cells; i++) /* shared start pattern: small finite halves */
            cache[i] = lw__fp32_to_fp16(0.25f * (float)(i % 9) - 1.0f);
        memcpy(gcache, cache, cache_bytes);
    }
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 3, 2);
    int32_t tx = lw__graph_weight(&r.g, "x", LW_TYPE_F32, n, rows, x);
    int32_t tf = ff ? lw__graph_weight(&r.g, "ff", LW_TYPE_F32, n_rot / 2, 1, fr) : -1;
    int32_t td = ref_dst(&r, kv16 ? rot : c->ref, n, rows, LW_ROWS_TOKENS);
    lw__node *nd = lw__graph_node(&r.g, LW_OP_ROPE, td, tx, tf, -1);
    void *kv[1] = {cache};
    if (kv16) {
        lw__node *ks = lw__graph_node(&r.g, LW_OP_KV_STORE, -1, td, -1, -1);
        if (ks) ks->ip[0] = ks->ip[1] = 0;
        r.ex.kv_type = LW_TYPE_F16;
        r.ex.kv_row = n;
        r.ex.k = r.ex.v = kv;
        r.ex.n_ctx = pos0 + rows + 1;
    }
    if (nd) {
        nd->ip[0] = n_head;
        nd->ip[1] = hd;
        nd->ip[2] = n_rot;
        nd->ip[3] = mode;
        nd->fp[0] = freq_base;
        nd->fp[1] = yarn ? 0.25f : 1.0f;
        nd->fp[2] = yarn ? 1.0f : 0.0f;
        nd->fp[3] = yarn ? 1.0f : 1.0f;
        nd->fp[4] = yarn ? 2.0f : 0.0f;
        nd->fp[5] = yarn ? (float)(n_rot / 2 - 3) : 0.0f;
    }
    r.ex.n_tokens = rows;
    r.ex.n_outputs = rows;
    r.ex.pos0 = pos0;
    lw__gpu_rope_args args = {0};
    lw__node rope_node; /* (ref_run frees the graph) */
    memset(&rope_node, 0, sizeof rope_node);
    if (nd) {
        lw__gpu_rope_args_from_node(nd, &args);
        rope_node = *nd;
    }
    st = ref_run(c, &r, kv16 ? pos0 + rows + 1 : 1);
    if (st == LW_OK && kv16)
        for (size_t i = 0; i < cells; i++) c->ref[i] = lw__fp16_to_fp32(cache[i]);

    lw__gpu_rope_variant v = lw__gpu_rope_default(&c->info);
    v.out_f16 = kv16 != 0;
    lw__gpu_rope_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    arena ar = {0};
    int ix = arena_add(&ar, total * 4), id = arena_add(&ar, kv16 ? cache_bytes : total * 4);
    lw_gpu_buffer buf = 0, fbuf = 0;
    args.rows = (uint64_t)rows;
    args.pos0 = (uint64_t)pos0;
    args.ff_offset = 1;
    if (kv16) args.d_offset = (uint64_t)pos0 * (uint64_t)n; /* cell pos0 of the cache */
    const size_t f_floats = table ? 1 + (size_t)rows * (size_t)n_rot : (size_t)n_rot / 2 + 2;
    float *fpad = calloc(f_floats, sizeof(float));
    args.table = table != 0;
    if (!fpad)
        st = LW_ERR_NOMEM;
    else if (table && nd)
        for (int r = 0; r < rows; r++)
            lw__rope_cache(&rope_node, NULL, pos0 + r, n_rot / 2, fpad + 1 + (size_t)r * (size_t)n_rot);
    else
        memcpy(fpad + 1, fr, (size_t)n_rot / 2 * sizeof(float));
    if (st == LW_OK) st = lw__gpu_rope_plan(&c->info, &v, &args, &p, grid, c->err);
    if (st == LW_OK) st = lw__gpu_rope_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[2] = {x, kv16 ? (const void *)gcache : (const void *)c->out};
        const uint64_t bytes[2] = {total * 4, kv16 ? (cache_bytes + 3) & ~(uint64_t)3 : total * 4};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK) st = upload(c, fpad, f_floats * 4, table ? "sin/cos table" : "freq factors", &fbuf);
    if (st == LW_OK) {
        lw_gpu_bind binds[3] = {bind_range(buf, &ar, ix), {fbuf, 0, 0}, bind_range(buf, &ar, id)};
        st = dispatch(c, pipe, binds, 3, 3, &p, sizeof p, grid);
    }
    if (st == LW_OK)
        st = finish(c, buf, ar.off[id], c->out, kv16 ? (cache_bytes + 3) & ~(uint64_t)3 : total * 4);
    free(x);
    free(fr);
    free(fpad);
    free(cache);
    free(gcache);
    free(rot);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "rope failed");
    return st;
}

/* The attention epilogue (rope_qkv) against the engine's four nodes ROPE(Q), ROPE(K), KV_STORE(K),
 * KV_STORE(V): the compared result is q_out, then the whole K cache, then the whole V cache (caches of
 * pos0 + rows + 1 cells, start pattern shared); call lw_wasm_ops_qkv_widen() after settle. one: the
 * qkv_one variant, q, k, v interleaved per row in one tensor [q | k | v] as a fused projection makes.
 * qknorm (with one): q and k RMS-normalised per head first (the qk_norm variant against RMS_NORM nodes with
 * head-dim weights before the ROPEs, eps 1e-6): 1 the device's default variant (exact on CPU adapters), 2
 * forced f32 sums (the GPUs' default). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_rope_qkv(lw_wasm_ops *c, int n_head, int n_head_kv, int hd, int n_rot,
                                              int mode, int rows, int pos0, int ff, int kv16, uint32_t seed,
                                              float freq_base, int one, int qknorm) {
    const size_t nq = (size_t)n_head * hd, nkv = (size_t)n_head_kv * hd, ncell = (size_t)(pos0 + rows + 1);
    const size_t tq = nq * rows, tkv = nkv * rows, cells = nkv * ncell, esz = kv16 ? 2 : 4;
    const size_t cbytes = (cells * esz + 3) & ~(size_t)3;
    lw_status st = begin_case(c, tq + 2 * cells);
    if (st != LW_OK) return st;
    if (qknorm && !one) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "rope_qkv: qk norms need one");
    const float qk_eps = 1e-6f;
    float *q = malloc(tq * 4), *k = malloc(tkv * 4), *v = malloc(tkv * 4), *krot = malloc(tkv * 4),
          *fr = malloc(((size_t)n_rot / 2 + 2) * 4), *nw = malloc((size_t)hd * 2 * 4),
          *qn = malloc(tq * 4 + tkv * 4);
    uint8_t *kc = malloc(cbytes), *vc = malloc(cbytes);
    c->raw = malloc(2 * cbytes);
    if (!q || !k || !v || !krot || !fr || !nw || !qn || !kc || !vc || !c->raw) {
        free(q), free(k), free(v), free(krot), free(fr), free(nw), free(qn), free(kc), free(vc);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    c->raw_elems = cells;
    c->raw_at = tq;
    c->raw_f16 = kv16;
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i < tq; i++) q[i] = 2.0f * rnd(&s);
    for (size_t i = 0; i < tkv; i++) k[i] = 2.0f * rnd(&s), v[i] = 3.0f * rnd(&s);
    fr[0] = 0.0f;
    for (int i = 0; i < n_rot / 2; i++) fr[i + 1] = 1.0f + 3.0f * (rnd(&s) + 1.0f);
    /* the q norm's weight, then the k norm's; q heads of different magnitudes */
    for (int i = 0; i < 2 * hd; i++) nw[i] = 1.0f + 0.5f * rnd(&s);
    for (int r = 0; qknorm && r < rows; r++)
        for (size_t i = 0; i < nq; i++) q[(size_t)r * nq + i] *= 0.05f + (float)((r + i / (size_t)hd) % 5);
    for (size_t i = 0; i < cells; i++) { /* small finite start values, so the NMSE is not swamped */
        float a = 0.25f * (float)(i % 7) - 1.0f, b = 0.5f - 0.125f * (float)(i % 5);
        if (kv16) {
            ((uint16_t *)kc)[i] = lw__fp32_to_fp16(a);
            ((uint16_t *)vc)[i] = lw__fp32_to_fp16(b);
        } else {
            ((float *)kc)[i] = a;
            ((float *)vc)[i] = b;
        }
    }
    if (cbytes > cells * esz)
        memset(kc + cells * esz, 0, cbytes - cells * esz), memset(vc + cells * esz, 0, cbytes - cells * esz);
    memcpy(c->raw, kc, cbytes); /* the GPU's caches start as the CPU's */
    memcpy(c->raw + cbytes, vc, cbytes);

    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 12, 6);
    int32_t tq_ = lw__graph_weight(&r.g, "q", LW_TYPE_F32, (int64_t)nq, rows, q);
    int32_t tk = lw__graph_weight(&r.g, "k", LW_TYPE_F32, (int64_t)nkv, rows, k);
    if (qknorm) { /* RMS_NORM(q), RMS_NORM(k) per head, with their weights, as qwen3's graph */
        int32_t tqw = lw__graph_weight(&r.g, "q_norm", LW_TYPE_F32, hd, 1, nw);
        int32_t tkw = lw__graph_weight(&r.g, "k_norm", LW_TYPE_F32, hd, 1, nw + hd);
        int32_t tqn = ref_dst(&r, qn, (int64_t)nq, rows, LW_ROWS_TOKENS);
        int32_t tkn = ref_dst(&r, qn + tq, (int64_t)nkv, rows, LW_ROWS_TOKENS);
        lw__node *a = lw__graph_node(&r.g, LW_OP_RMS_NORM, tqn, tq_, tqw, -1);
        if (a) a->ip[0] = hd, a->fp[0] = qk_eps;
        lw__node *b = lw__graph_node(&r.g, LW_OP_RMS_NORM, tkn, tk, tkw, -1);
        if (b) b->ip[0] = hd, b->fp[0] = qk_eps;
        tq_ = tqn;
        tk = tkn;
    }
    int32_t tv = lw__graph_weight(&r.g, "v", LW_TYPE_F32, (int64_t)nkv, rows, v);
    int32_t tf = ff ? lw__graph_weight(&r.g, "ff", LW_TYPE_F32, n_rot / 2, 1, fr + 1) : -1;
    int32_t tqo = ref_dst(&r, c->ref, (int64_t)nq, rows, LW_ROWS_TOKENS);
    int32_t tkr = ref_dst(&r, krot, (int64_t)nkv, rows, LW_ROWS_TOKENS);
    lw__node *n1 = lw__graph_node(&r.g, LW_OP_ROPE, tqo, tq_, tf, -1);
    lw__node *n2 = lw__graph_node(&r.g, LW_OP_ROPE, tkr, tk, tf, -1);
    lw__node *n3 = lw__graph_node(&r.g, LW_OP_KV_STORE, -1, tkr, -1, -1);
    lw__node *n4 = lw__graph_node(&r.g, LW_OP_KV_STORE, -1, tv, -1, -1);
    if (n1 && n2 && n3 && n4) {
        n1->ip[0] = n_head;
        n2->ip[0] = n_head_kv;
        for (lw__node *nd = n1; nd <= n2; nd++) {
            nd->ip[1] = hd;
            nd->ip[2] = n_rot;
            nd->ip[3] = mode;
            nd->fp[0] = freq_base;
            nd->fp[1] = 1.0f;
            nd->fp[3] = 1.0f;
        }
        n3->ip[0] = n4->ip[0] = 0;
        n3->ip[1] = 0;
        n4->ip[1] = 1;
    }
    void *kk[1] = {kc}, *vv[1] = {vc};
    r.ex.n_tokens = rows;
    r.ex.n_outputs = rows;
    r.ex.pos0 = pos0;
    r.ex.kv_type = kv16 ? LW_TYPE_F16 : LW_TYPE_F32;
    r.ex.kv_row = (int64_t)nkv;
    r.ex.k = kk;
    r.ex.v = vv;
    r.ex.n_ctx = (int64_t)ncell;
    lw__gpu_rope_args args = {0};
    if (n1) lw__gpu_rope_args_from_node(n1, &args);
    st = ref_run(c, &r, (int64_t)ncell);
    for (size_t i = 0; st == LW_OK && i < cells; i++) {
        c->ref[tq + i] = kv16 ? lw__fp16_to_fp32(((uint16_t *)kc)[i]) : ((float *)kc)[i];
        c->ref[tq + cells + i] = kv16 ? lw__fp16_to_fp32(((uint16_t *)vc)[i]) : ((float *)vc)[i];
    }

    lw__gpu_rope_qkv_variant var = lw__gpu_rope_qkv_default(&c->info, kv16 ? LW_TYPE_F16 : LW_TYPE_F32);
    var.qkv_one = one != 0;
    var.qk_norm = qknorm != 0;
    if (qknorm == 2) var.exact_norm = false;
    const size_t fused = nq + 2 * nkv; /* row of the fused projection */
    float *qkv = one ? malloc(fused * (size_t)rows * 4) : NULL;
    if (one && !qkv) st = LW_ERR_NOMEM;
    for (int rr = 0; qkv && rr < rows; rr++) {
        memcpy(qkv + rr * fused, q + (size_t)rr * nq, nq * 4);
        memcpy(qkv + rr * fused + nq, k + (size_t)rr * nkv, nkv * 4);
        memcpy(qkv + rr * fused + nq + nkv, v + (size_t)rr * nkv, nkv * 4);
    }
    lw__gpu_rope_qkv_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    arena ar = {0};
    int iq = arena_add(&ar, one ? fused * rows * 4 : tq * 4), iqo = arena_add(&ar, tq * 4),
        ik = arena_add(&ar, tkv * 4), ikc = arena_add(&ar, cbytes), iv = arena_add(&ar, tkv * 4),
        ivc = arena_add(&ar, cbytes);
    lw_gpu_buffer buf = 0, fbuf = 0, qnbuf = 0, knbuf = 0;
    args.rows = (uint64_t)rows;
    args.pos0 = (uint64_t)pos0;
    args.ff_offset = 1;
    lw__gpu_kv_dest kv = {(uint32_t)n_head_kv, 0, 0, (uint64_t)pos0 * nkv, 0, 0, 0, (uint64_t)pos0 * nkv, 0};
    if (one) { /* everything inside the fused rows */
        args.x_stride = fused;
        kv.k_offset = nq;
        kv.k_stride = fused;
        kv.v_offset = nq + nkv;
        kv.v_stride = fused;
    }
    if (st == LW_OK) st = lw__gpu_rope_qkv_plan(&c->info, &var, &args, &kv, &p, grid, c->err);
    p.qk_eps = qk_eps;
    if (st == LW_OK) st = lw__gpu_rope_qkv_pipeline(&c->gpu, &c->cache, NULL, &var, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[6] = {one ? qkv : q, c->out, k, c->raw, v, c->raw + cbytes};
        const uint64_t bytes[6] = {one ? fused * rows * 4 : tq * 4, tq * 4, tkv * 4, cbytes, tkv * 4, cbytes};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK) st = upload(c, fr, ((size_t)n_rot / 2 + 2) * 4, "freq factors", &fbuf);
    if (st == LW_OK && qknorm) st = upload(c, nw, (size_t)hd * 4, "q norm", &qnbuf);
    if (st == LW_OK && qknorm) st = upload(c, nw + hd, (size_t)hd * 4, "k norm", &knbuf);
    if (st == LW_OK) {
        lw_gpu_bind b[7] = {bind_range(buf, &ar, iq),  {fbuf, 0, 0},
                            bind_range(buf, &ar, iqo), bind_range(buf, &ar, ik),
                            bind_range(buf, &ar, ikc), bind_range(buf, &ar, iv),
                            bind_range(buf, &ar, ivc)};
        if (one) { /* qkv, ff, q_out, K cache, V cache (, params,) q norm, k norm */
            b[3] = b[4];
            b[4] = b[6];
            b[5] = (lw_gpu_bind){qnbuf, 0, 0};
            b[6] = (lw_gpu_bind){knbuf, 0, 0};
        }
        st = dispatch(c, pipe, b, one ? (qknorm ? 7 : 5) : 7, one ? 5 : 7, &p, sizeof p, grid);
    }
    if (st == LW_OK) st = finish(c, buf, ar.off[iqo], c->out, tq * 4);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, buf, ar.off[ikc], c->raw, cbytes);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, buf, ar.off[ivc], c->raw + cbytes, cbytes);
    free(q), free(k), free(v), free(krot), free(fr), free(nw), free(qn), free(kc), free(vc), free(qkv);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "rope_qkv failed");
    return st;
}

/* After settle: the read-back caches of rope_qkv into out, widened to f32. */
EMSCRIPTEN_KEEPALIVE void lw_wasm_ops_qkv_widen(lw_wasm_ops *c) {
    if (!c->raw) return;
    const size_t cbytes = (c->raw_elems * (c->raw_f16 ? 2 : 4) + 3) & ~(size_t)3;
    for (int which = 0; which < 2; which++) {
        const uint8_t *src = c->raw + which * cbytes;
        float *dst = c->out + c->raw_at + which * c->raw_elems;
        for (size_t i = 0; i < c->raw_elems; i++)
            dst[i] = c->raw_f16 ? lw__fp16_to_fp32(((const uint16_t *)src)[i]) : ((const float *)src)[i];
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * KV_STORE
 * ------------------------------------------------------------------------------------------------------- */

/* rows of row_len into a cache of n_cells cells from cell0, of kv_type LW_TYPE_F32, F16, or Q8_0 / Q4_0 (the
 * CPU's ggml blocks against the GPU's own layouts, kernels-attn.h; row_len a multiple of 32); the compared
 * result is the whole cache, widened to f32 (f16: cells not written stay as they started, a pattern both
 * sides share; quantized: zeros on both, whose blocks read as zeros). The GPU side arrives raw in c->out:
 * lw_wasm_ops_kv_widen converts it after settle. Quantized caches also get blocks of quantizer ties: the
 * largest element -8 s, the others s (k + 0.5) for k in -8..7, so x * id + 8.5 lands on or next to an
 * integer (Q4_0: where a product fused into the add would truncate differently). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_kv_store(lw_wasm_ops *c, int kv_type, int row_len, int rows, int cell0,
                                              int n_cells, uint32_t seed) {
    const uint32_t bw = lw__gpu_kv_block_words((uint32_t)kv_type); /* GPU words per block; 0: f16 / f32 */
    if ((kv_type != LW_TYPE_F32 && kv_type != LW_TYPE_F16 && !bw) || row_len <= 0 || rows <= 0 || cell0 < 0 ||
        n_cells <= 0 || (bw && row_len % 32))
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "kv_store case: type %d, row %d", kv_type, row_len);
    /* the products below in a 32-bit size_t: the floats of x (rows) and of the widened cache (n_cells) */
    if ((size_t)row_len > SIZE_MAX / sizeof(float) / (size_t)(rows > n_cells ? rows : n_cells))
        return lw__errorf(c->err, LW_ERR_TOO_LARGE, "kv_store case: %d x %d elements", row_len,
                          rows > n_cells ? rows : n_cells);
    const bool f16 = kv_type == LW_TYPE_F16;
    const size_t total = (size_t)row_len * (size_t)rows, cells = (size_t)row_len * (size_t)n_cells;
    lw_status st = LW_OK;
    /* bytes of the whole cache: the CPU's (ggml rows) and the GPU's (its layout: the same but quantized) */
    const size_t cpu_bytes = lw__row_size((uint32_t)kv_type, (int64_t)row_len, &st) * (size_t)n_cells;
    const size_t gpu_bytes = bw ? cells / 32 * bw * 4 : cpu_bytes;
    if (st != LW_OK) return lw__errorf(c->err, st, "kv_store case: row size");
    if ((st = begin_case(c, cells)) != LW_OK) return st;
    float *x = malloc(total * sizeof(float));
    uint8_t *cache = malloc(cpu_bytes + 4), *gpu = malloc(gpu_bytes + 4);
    if (!x || !cache || !gpu) {
        free(x);
        free(cache);
        free(gpu);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i < total; i++) {
        float v = rnd(&s);
        if (bw && (i / 32) % 2) { /* a block of ties */
            const float sc = ldexpf(1.0f + 0.37f * (float)((i / 32) % 7), (int)((i / 32) % 11) - 5);
            x[i] = i % 32 == 0 ? -8.0f * sc : sc * ((float)(i % 16) - 7.5f);
            continue;
        }
        /* magnitudes from subnormal halves to past the f16 range, and exact ties of f16 rounding */
        switch (i % 8) {
        case 0:
            v *= 1e-6f;
            break;
        case 1:
            v *= 7e4f;
            break;
        case 2:
            v = ldexpf(1.0f + ldexpf((float)(i % 1024) * 2.0f + 1.0f, -11), (int)(i % 9) - 4);
            break;
        case 3:
            v *= 3e-5f;
            break;
        default:
            v *= 10.0f;
            break;
        }
        x[i] = v;
    }
    if (bw) { /* zeros: both layouts read them as zeros */
        memset(cache, 0, cpu_bytes);
        memset(gpu, 0, gpu_bytes);
    } else {
        for (size_t i = 0; i < cpu_bytes; i++) cache[i] = (uint8_t)(i * 37 + 11); /* shared start pattern */
        memcpy(gpu, cache, cpu_bytes);
    }
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 2, 1);
    int32_t tx = lw__graph_weight(&r.g, "x", LW_TYPE_F32, row_len, rows, x);
    lw__node *nd = lw__graph_node(&r.g, LW_OP_KV_STORE, -1, tx, -1, -1);
    if (nd) nd->ip[0] = nd->ip[1] = 0;
    void *kv[1] = {cache};
    r.ex.n_tokens = rows;
    r.ex.n_outputs = rows;
    r.ex.pos0 = cell0;
    r.ex.kv_type = (uint32_t)kv_type;
    r.ex.kv_row = row_len;
    r.ex.k = kv;
    r.ex.v = kv;
    r.ex.n_ctx = n_cells;
    st = ref_run(c, &r, n_cells);

    lw__gpu_kv_store_variant v = lw__gpu_kv_store_default(&c->info, (uint32_t)kv_type);
    lw__gpu_kv_store_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    arena ar = {0};
    const uint64_t gpu_words = (gpu_bytes + 3) & ~(size_t)3;
    int ix = arena_add(&ar, total * 4), ic = arena_add(&ar, gpu_words);
    lw_gpu_buffer buf = 0;
    if (st == LW_OK)
        st = lw__gpu_kv_store_plan(&c->info, &v, row_len, rows, 0, 0, 0, cell0, n_cells, &p, grid, c->err);
    if (st == LW_OK) st = lw__gpu_kv_store_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[2] = {x, gpu};
        const uint64_t bytes[2] = {total * 4, gpu_words};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK) {
        lw_gpu_bind binds[2] = {bind_range(buf, &ar, ix), bind_range(buf, &ar, ic)};
        st = dispatch(c, pipe, binds, 2, 2, &p, sizeof p, grid);
    }
    /* the read lands in c->out as raw cache bytes; lw_wasm_ops_kv_widen converts them after settle */
    if (st == LW_OK) st = finish(c, buf, ar.off[ic], c->out, gpu_words);
    if (st == LW_OK) {
        if (f16) {
            for (size_t i = 0; i < cells; i++) c->ref[i] = lw__fp16_to_fp32(((const uint16_t *)cache)[i]);
        } else if (kv_type == LW_TYPE_Q8_0) {
            lw__dequantize_row_q8_0(cache, c->ref, (int64_t)cells);
        } else if (kv_type == LW_TYPE_Q4_0) {
            lw__dequantize_row_q4_0(cache, c->ref, (int64_t)cells);
        } else {
            memcpy(c->ref, cache, cpu_bytes);
        }
        c->kv_type = (uint32_t)kv_type;
    }
    free(x);
    free(cache);
    free(gpu);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "kv_store failed");
    return st;
}

/* After settle, for an f16 cache (a RoPE case's, or a kv_store case's) or a kv_store case's quantized one:
 * widens the raw cache read back into c->out to floats in place, from the end (so nothing is overwritten
 * before it is read: a quantized block's words are taken into registers first). */
EMSCRIPTEN_KEEPALIVE void lw_wasm_ops_kv_widen(lw_wasm_ops *c) {
    const uint32_t bw = lw__gpu_kv_block_words(c->kv_type);
    if (bw) { /* the GPU's layouts: Q8_0 8 words of bytes + f32 scale, Q4_0 4 words of nibbles + f32 scale */
        const uint32_t *w = (const uint32_t *)c->out;
        for (size_t b = c->count / 32; b-- > 0;) {
            uint32_t q[9];
            memcpy(q, w + b * bw, bw * sizeof q[0]);
            float d;
            memcpy(&d, &q[bw - 1], sizeof d);
            for (int e = 0; e < 32; e++) {
                const int v = bw == 9 ? (int8_t)(q[e / 4] >> (8 * (e % 4)))
                                      : (int)((q[e / 8] >> (4 * (e % 8))) & 15u) - 8;
                c->out[b * 32 + (size_t)e] = (float)v * d;
            }
        }
        return;
    }
    const uint16_t *h = (const uint16_t *)c->out;
    for (size_t i = c->count; i-- > 0;) c->out[i] = lw__fp16_to_fp32(h[i]);
}

/* ---------------------------------------------------------------------------------------------------------
 * GET_ROWS
 * ------------------------------------------------------------------------------------------------------- */

/* A table of n_rows rows of n elements of type, split into `parts` parts of ceil(n_rows / parts) rows (each
 * its own buffer and dispatch, row 0 of a part at byte offset 6 of it); n_tokens random ids (some
 * repeated). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_get_rows(lw_wasm_ops *c, int type, int n, int n_rows, int n_tokens,
                                              int parts, uint32_t seed) {
    size_t total = (size_t)n * (size_t)n_tokens, nt = (size_t)n * (size_t)n_rows;
    lw_status st = begin_case(c, total);
    if (st != LW_OK) return st;
    size_t rb = lw__row_size((uint32_t)type, n, &st);
    if (st != LW_OK || parts < 1 || parts > 4)
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad type/shape");
    float *w = malloc(nt * sizeof(float)), *imat = malloc((size_t)n * sizeof(float));
    uint8_t *q = malloc(rb * (size_t)n_rows + 8);
    int32_t *ids = malloc((size_t)n_tokens * sizeof(int32_t));
    if (!w || !q || !ids || !imat) {
        free(w);
        free(q);
        free(ids);
        free(imat);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t s = seed ? seed : 1;
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < n; i++) w[(size_t)r * n + i] = rnd(&s) * (0.25f + 0.25f * (float)(r % 7));
    for (int i = 0; i < n; i++) imat[i] = 1.0f;
    for (int t = 0; t < n_tokens; t++) ids[t] = (int32_t)(rndu(&s) % (uint32_t)n_rows);
    if (n_tokens > 2) ids[n_tokens - 1] = ids[0]; /* a repeated id */
    if (n_tokens > 3) ids[1] = n_rows - 1;        /* the last row  */
    const lw__quant_traits_t *qt = lw__quant_traits((uint32_t)type);
    st = lw__quantize((uint32_t)type, w, q, n_rows, n, qt && qt->requires_imatrix ? imat : NULL);
    if (st != LW_OK) lw__errorf(c->err, st, "quantize type %d: %s", type, lw_status_str(st));
    ref_graph r;
    memset(&r, 0, sizeof r);
    if (st == LW_OK) {
        lw__graph_init(&r.g, NULL, 2, 1);
        int32_t tw = lw__graph_weight(&r.g, "table", (uint32_t)type, n, n_rows, q);
        int32_t td = ref_dst(&r, c->ref, n, n_tokens, LW_ROWS_TOKENS);
        lw__graph_node(&r.g, LW_OP_GET_ROWS, td, tw, -1, -1);
        r.ex.n_tokens = n_tokens;
        r.ex.n_outputs = n_tokens;
        r.ex.tokens = ids;
        st = ref_run(c, &r, 1);
    }

    lw__gpu_get_rows_variant v = lw__gpu_get_rows_default(&c->info, (uint32_t)type);
    lw_gpu_pipeline pipe = 0;
    arena ar = {0};
    int ii = arena_add(&ar, (size_t)n_tokens * 4), id = arena_add(&ar, total * 4);
    lw_gpu_buffer buf = 0;
    if (st == LW_OK) st = lw__gpu_get_rows_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[2] = {ids, c->out};
        const uint64_t bytes[2] = {(uint64_t)n_tokens * 4, total * 4};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    const int per = (n_rows + parts - 1) / parts;
    uint8_t *part = malloc(rb * (size_t)per + 8);
    if (!part && st == LW_OK) st = LW_ERR_NOMEM;
    for (int pi = 0; st == LW_OK && pi < parts; pi++) {
        int base = pi * per, cnt = n_rows - base < per ? n_rows - base : per;
        if (cnt <= 0) break;
        memset(part, 0, 6);
        memcpy(part + 6, q + (size_t)base * rb, (size_t)cnt * rb);
        lw_gpu_buffer pb;
        lw__gpu_get_rows_params p;
        uint32_t grid[3];
        st = lw__gpu_get_rows_plan(&c->info, &v, n, n_tokens, base, cnt, 6, 0, 0, 0, &p, grid, c->err);
        if (st == LW_OK) st = upload(c, part, (size_t)cnt * rb + 6, "table part", &pb);
        if (st == LW_OK) {
            lw_gpu_bind binds[3] = {{pb, 0, 0}, bind_range(buf, &ar, ii), bind_range(buf, &ar, id)};
            st = dispatch(c, pipe, binds, 3, 3, &p, sizeof p, grid);
        }
    }
    if (st == LW_OK) st = finish(c, buf, ar.off[id], c->out, total * 4);
    free(part);
    free(w);
    free(q);
    free(ids);
    free(imat);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "get_rows failed");
    return st;
}

/* A real-size Q4_0 embedding table (n_rows x n, e.g. 128256 x 2048 = 148 MB: above lavapipe's 128 MiB
 * binding limit) in ONE buffer, split by lw__gpu_get_rows_split into parts bound as ranges of it (one
 * dispatch each). Random blocks are written directly (no quantizer: only looked-up rows are dequantized by
 * the CPU reference). The ids hit the first, last and boundary rows of every part. Returns an lw_status;
 * lw_wasm_ops_parts() tells how many parts were used. */
static int g_parts;
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_parts(void) {
    return g_parts;
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_get_rows_big(lw_wasm_ops *c, int n, int n_rows, uint32_t seed) {
    const uint32_t type = LW_TYPE_Q4_0;
    lw_status st = LW_OK;
    const size_t rb = lw__row_size(type, n, &st);
    uint64_t per = 0, parts = 0;
    if (st != LW_OK || n_rows <= 0) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad shape");
    if ((st = lw__gpu_get_rows_split(&c->info, (uint64_t)n_rows, rb, &per, &parts, c->err)) != LW_OK)
        return st;
    g_parts = (int)parts;
    int32_t ids[32];
    int n_tokens = 0;
    for (uint64_t p = 0; p < parts && n_tokens + 4 <= 30; p++) {
        uint64_t b = p * per, e = b + per < (uint64_t)n_rows ? b + per : (uint64_t)n_rows;
        ids[n_tokens++] = (int32_t)b;
        ids[n_tokens++] = (int32_t)(e - 1);
        ids[n_tokens++] = (int32_t)(b + (e - b) / 2);
        if (e < (uint64_t)n_rows) ids[n_tokens++] = (int32_t)e;
    }
    ids[n_tokens++] = 7;
    const size_t total = (size_t)n * (size_t)n_tokens, bytes = rb * (size_t)n_rows;
    if ((st = begin_case(c, total)) != LW_OK) return st;
    uint8_t *q = malloc(bytes + 4);
    if (!q) return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory for %zu bytes", bytes);
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        uint32_t v = rndu(&s);
        memcpy(q + i, &v, 4);
    }
    for (size_t blk = 0; blk < bytes / 18; blk++) { /* finite scales */
        uint16_t d = lw__fp32_to_fp16(0.01f + 0.001f * (float)(blk % 97));
        memcpy(q + blk * 18, &d, 2);
    }
    ref_graph r;
    memset(&r, 0, sizeof r);
    lw__graph_init(&r.g, NULL, 2, 1);
    int32_t tw = lw__graph_weight(&r.g, "table", type, n, n_rows, q);
    int32_t td = ref_dst(&r, c->ref, n, n_tokens, LW_ROWS_TOKENS);
    lw__graph_node(&r.g, LW_OP_GET_ROWS, td, tw, -1, -1);
    r.ex.n_tokens = n_tokens;
    r.ex.n_outputs = n_tokens;
    r.ex.tokens = ids;
    st = ref_run(c, &r, 1);

    lw__gpu_get_rows_variant v = lw__gpu_get_rows_default(&c->info, type);
    lw_gpu_pipeline pipe = 0;
    arena ar = {0};
    int ii = arena_add(&ar, (size_t)n_tokens * 4), id = arena_add(&ar, total * 4);
    lw_gpu_buffer buf = 0, tbuf = 0;
    if (st == LW_OK) st = lw__gpu_get_rows_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        const void *data[2] = {ids, c->out};
        const uint64_t sz[2] = {(uint64_t)n_tokens * 4, total * 4};
        st = arena_upload(c, &ar, data, sz, &buf);
    }
    if (st == LW_OK) st = upload(c, q, bytes, "embedding table", &tbuf);
    for (uint64_t p = 0; st == LW_OK && p < parts; p++) {
        uint64_t b = p * per, cnt = b + per < (uint64_t)n_rows ? per : (uint64_t)n_rows - b;
        lw__gpu_get_rows_params gp;
        uint32_t grid[3];
        st = lw__gpu_get_rows_plan(&c->info, &v, n, n_tokens, b, cnt, 0, 0, 0, 0, &gp, grid, c->err);
        if (st == LW_OK) {
            lw_gpu_bind binds[3] = {{tbuf, b * rb, (cnt * rb + 3) & ~(uint64_t)3},
                                    bind_range(buf, &ar, ii),
                                    bind_range(buf, &ar, id)};
            st = dispatch(c, pipe, binds, 3, 3, &gp, sizeof gp, grid);
        }
    }
    if (st == LW_OK) st = finish(c, buf, ar.off[id], c->out, total * 4);
    free(q);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "get_rows (big) failed");
    return st;
}

/* Weight formats the GPU can gather (the whole WGSL format table), as type ids into dst (cap entries);
 * returns how many. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_gpu_formats(int *dst, int cap) {
    int n = 0;
    for (uint32_t t = 0; t < LW_TYPE_COUNT && n < cap; t++)
        if (lw__gpu_format_of(t)) dst[n++] = (int)t;
    return n;
}

/* Elements a row of type must be a multiple of: the format's block and the GPU routine's block. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_block(int type) {
    const lw_type_info *ti = lw_type_get((uint32_t)type);
    const lw__gpu_format *f = lw__gpu_format_of((uint32_t)type);
    if (!ti || !f) return 0;
    uint32_t a = ti->block_size, b = f->block, g = a, h = b;
    while (h) {
        uint32_t t = g % h;
        g = h;
        h = t;
    }
    return (int)(a / g * b);
}

/* ---------------------------------------------------------------------------------------------------------
 * Sampling: top-k / argmax
 * ------------------------------------------------------------------------------------------------------- */

/* n logits (ties: dup > 0 copies some values to other ids; ninf: some -inf), top k on the GPU. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_topk(lw_wasm_ops *c, int n, int k, int dup, int wg, int per,
                                          uint32_t seed) {
    lw_status st = begin_case(c, 0);
    if (st != LW_OK) return st;
    c->logits = malloc((size_t)n * sizeof(float));
    c->pairs = malloc((size_t)k * 8);
    if (!c->logits || !c->pairs) return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    memset(c->pairs, 0xff, (size_t)k * 8);
    c->topk_n = (uint32_t)n;
    c->topk_k = (uint32_t)k;
    uint32_t s = seed ? seed : 1;
    for (int i = 0; i < n; i++) c->logits[i] = 8.0f * rnd(&s);
    for (int i = 0; i < dup; i++) { /* equal logits at several ids, the largest among them */
        int a = (int)(rndu(&s) % (uint32_t)n);
        c->logits[a] = 9.0f + (float)(i % 3);
        c->logits[(a + n / 2) % n] = 9.0f + (float)(i % 3);
    }
    if (n > 10) c->logits[n - 1] = -INFINITY;

    lw__gpu_topk_variant v = lw__gpu_topk_default(&c->info);
    if (wg > 0) v.wg_size = (uint32_t)wg;
    if (per > 0) v.per = (uint32_t)per;
    lw__gpu_topk_plan_out pl;
    lw_gpu_pipeline p1, p2;
    arena ar = {0};
    st = lw__gpu_topk_plan(&c->info, &v, n, k, 0, 0, 0, &pl, c->err);
    if (st != LW_OK) return st;
    int il = arena_add(&ar, (uint64_t)n * 4), is = arena_add(&ar, (uint64_t)pl.scratch_pairs * 8),
        io = arena_add(&ar, (uint64_t)k * 8);
    lw_gpu_buffer buf = 0;
    if (st == LW_OK) st = lw__gpu_topk_pipeline(&c->gpu, &c->cache, NULL, &v, false, &c->info, &p1, c->err);
    if (st == LW_OK) st = lw__gpu_topk_pipeline(&c->gpu, &c->cache, NULL, &v, true, &c->info, &p2, c->err);
    if (st == LW_OK) {
        const void *data[3] = {c->logits, NULL, NULL};
        const uint64_t bytes[3] = {(uint64_t)n * 4, 0, 0};
        st = arena_upload(c, &ar, data, bytes, &buf);
    }
    if (st == LW_OK) {
        lw_gpu_bind b1[2] = {bind_range(buf, &ar, il), bind_range(buf, &ar, is)};
        st = dispatch(c, p1, b1, 2, 2, &pl.pass1, sizeof pl.pass1, pl.grid1);
    }
    if (st == LW_OK) {
        lw_gpu_bind b2[2] = {bind_range(buf, &ar, is), bind_range(buf, &ar, io)};
        st = dispatch(c, p2, b2, 2, 2, &pl.pass2, sizeof pl.pass2, pl.grid2);
    }
    if (st == LW_OK) st = finish(c, buf, ar.off[io], c->pairs, (uint64_t)k * 8);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "topk failed");
    return st;
}

/* After settle: checks the GPU's k pairs against the CPU sampler (src/sample): k = 1 must be its greedy
 * pick; for every k the pairs must be the k first logits in the sampler's order (value descending, ties
 * to the lower id) with their values; and a top-k sampler must draw the same tokens from the full logits as
 * from only the GPU's candidates, over 20 seeds. Returns the number of failures (-1: see the error). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_topk_check(lw_wasm_ops *c) {
    if (!ready(c) || !c->pairs) return -1;
    const uint32_t n = c->topk_n, k = c->topk_k;
    int bad = 0;
    /* order and values */
    for (uint32_t j = 0; j < k; j++) {
        uint32_t id = c->pairs[2 * j];
        float v;
        memcpy(&v, &c->pairs[2 * j + 1], 4);
        if (id >= n || memcmp(&v, &c->logits[id], 4) != 0) {
            if (!bad) lw__errorf(c->err, LW_ERR_INVALID_ARG, "pair %u: id %u value %g", j, id, (double)v);
            bad++;
            continue;
        }
        if (j > 0) {
            uint32_t pid = c->pairs[2 * j - 2];
            float pv = c->logits[pid];
            if (!(pv > v || (pv == v && pid < id))) {
                if (!bad)
                    lw__errorf(c->err, LW_ERR_INVALID_ARG, "pair %u (%u, %g) out of order", j, id, (double)v);
                bad++;
            }
        }
    }
    if (bad) return bad;
    /* nothing outside the candidates comes before the last one */
    uint32_t lid = c->pairs[2 * (k - 1)];
    float lv = c->logits[lid];
    uint8_t *in = calloc(n, 1);
    float *masked = malloc((size_t)n * sizeof(float));
    if (!in || !masked) {
        free(in);
        free(masked);
        return -1;
    }
    for (uint32_t j = 0; j < k; j++) in[c->pairs[2 * j]] = 1;
    for (uint32_t i = 0; i < n; i++)
        if (!in[i] && (c->logits[i] > lv || (c->logits[i] == lv && i < lid))) {
            if (!bad)
                lw__errorf(c->err, LW_ERR_INVALID_ARG, "logit %u (%g) belongs in the top %u", i,
                           (double)c->logits[i], k);
            bad++;
        }
    /* the CPU sampler: greedy, and top-k draws from full vs candidate-only logits */
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_last_n = 0;
    sp.temp = 0.0f;
    lw_sampler *smp = NULL;
    if (lw_sampler_create((int32_t)n, &sp, NULL, &smp) == LW_OK) {
        int32_t g = lw_sampler_sample(smp, c->logits);
        if ((uint32_t)g != c->pairs[0]) {
            if (!bad) lw__errorf(c->err, LW_ERR_INVALID_ARG, "greedy: CPU %d, GPU %u", g, c->pairs[0]);
            bad++;
        }
        lw_sampler_free(smp);
    } else {
        bad++;
    }
    for (uint32_t i = 0; i < n; i++) masked[i] = in[i] ? c->logits[i] : -INFINITY;
    sp.temp = 1.5f;
    sp.top_k = (int32_t)k;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    lw_sampler *s1 = NULL, *s2 = NULL;
    if (k > 1 && lw_sampler_create((int32_t)n, &sp, NULL, &s1) == LW_OK &&
        lw_sampler_create((int32_t)n, &sp, NULL, &s2) == LW_OK) {
        for (uint64_t seed = 1; seed <= 20; seed++) {
            lw_sampler_reset(s1, seed);
            lw_sampler_reset(s2, seed);
            int32_t a = lw_sampler_sample(s1, c->logits), b = lw_sampler_sample(s2, masked);
            if (a != b) {
                if (!bad)
                    lw__errorf(c->err, LW_ERR_INVALID_ARG, "seed %llu: full logits draw %d, candidates %d",
                               (unsigned long long)seed, a, b);
                bad++;
            }
        }
    }
    lw_sampler_free(s1);
    lw_sampler_free(s2);
    free(in);
    free(masked);
    return bad;
}

/* The GPU's pair j of the last top-k: its id (value: lw_wasm_ops_topk_value). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_ops_topk_id(const lw_wasm_ops *c, int j) {
    return c->pairs ? (int)c->pairs[2 * j] : -1;
}
