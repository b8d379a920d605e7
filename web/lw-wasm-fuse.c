/* Wasm test entry points of the fused kernels the model runner uses (gpu-model-fuse.c), for
 * tests/web/fuse.test.mjs: the down projection with the FFN's GLU in its x loads (matvec.wgsl X_GLU).
 *
 * One case: random weights quantized by our quantizers (web/lw-wasm-ref.c) and a random gate|up row laid out
 * as the runner's fused gate|up output (g and u at offsets, u not right after g here); on the GPU
 *   fused: one X_GLU mat-vec reading gate|up,
 *   split: the eltwise GLU (b_in_a: both halves from one binding) into h, then the plain mat-vec over h,
 * and on the CPU the engine's own GLU op (src/cpu/engine-ops.c through lw__cpu_exec on a one-node graph),
 * its dequantized product in double, and its own product (activations rounded as it rounds them). After the
 * JS side awaits lwGpu.settle(), lw_wasm_glu_stat() compares them. Compiled only by the wasm build. */
#include "core/core.h"
#include "cpu/engine-ops.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-ops.h"
#include "webgpu/kernels.h"
#include "lw-wasm-ref.h"

#include <emscripten/emscripten.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

#define GLU_BUFS 10 /* GPU buffers of one case                                   */
#define GLU_PAD  4  /* floats before g in the gate|up buffer                     */
#define GLU_GAP  8  /* floats between g's end and u (the runner has 0)           */

typedef struct lw_wasm_glu {
    lw_gpu gpu;                   /* the HAL                                             */
    lw_gpu_info info;             /* its device                                          */
    lw__gpu_pipeline_cache cache; /* pipelines by variant                                */
    lw_gpu_buffer bufs[GLU_BUFS]; /* the last case's buffers                             */
    int n_bufs;                   /* used                                                */
    int rows, k;                  /* the last case's shape                               */
    float *fused, *split, *h;     /* GPU results: X_GLU mat-vec, GLU + mat-vec, the GLU  */
    float *h_cpu;                 /* the CPU engine's GLU                                */
    double *y_ref, *y_cpu;        /* dequantized product in double; the CPU's product    */
    char err[LW_ERRMSG_SIZE];     /* why the last call failed                            */
} lw_wasm_glu;

static void release(lw_wasm_glu *c) {
    for (int i = 0; i < c->n_bufs; i++) c->gpu.ops->buffer_destroy(c->gpu.ctx, c->bufs[i]);
    c->n_bufs = 0;
    free(c->fused);
    free(c->split);
    free(c->h);
    free(c->h_cpu);
    free(c->y_ref);
    free(c->y_cpu);
    c->fused = c->split = c->h = c->h_cpu = NULL;
    c->y_ref = c->y_cpu = NULL;
    c->err[0] = 0;
}

EMSCRIPTEN_KEEPALIVE lw_wasm_glu *lw_wasm_glu_new(void) {
    lw_wasm_glu *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    lw__gpu_cache_init(&c->cache, NULL);
    if (lw_wasm_gpu_open(NULL, &c->gpu) != LW_OK) {
        lw__errorf(c->err, LW_ERR_IO, "no GPU device");
        c->gpu.ops = NULL;
        return c;
    }
    c->gpu.ops->info(c->gpu.ctx, &c->info);
    return c;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_glu_free(lw_wasm_glu *c) {
    if (!c) return;
    if (c->gpu.ops) {
        release(c);
        c->gpu.ops->destroy(c->gpu.ctx);
    }
    lw__gpu_cache_free(&c->cache);
    free(c);
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_glu_error(const lw_wasm_glu *c) {
    return c ? c->err : "out of memory";
}

static lw_status new_buffer(lw_wasm_glu *c, uint64_t size, uint32_t usage, const char *label,
                            const void *data, lw_gpu_buffer *out) {
    if (c->n_bufs == GLU_BUFS) return lw__errorf(c->err, LW_ERR_TOO_LARGE, "too many buffers");
    const uint64_t padded = (size + 3) & ~3ull;
    lw_status st =
        c->gpu.ops->buffer_create(c->gpu.ctx, padded ? padded : 4, usage | LW_GPU_USAGE_COPY_DST, label, out);
    if (st != LW_OK) return lw__errorf(c->err, st, "buffer %s failed", label);
    c->bufs[c->n_bufs++] = *out;
    if (!data || !size) return LW_OK;
    if (size == padded) return c->gpu.ops->buffer_write(c->gpu.ctx, *out, 0, data, size);
    uint8_t *tmp = calloc(1, (size_t)padded); /* writes are whole words */
    if (!tmp) return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    memcpy(tmp, data, (size_t)size);
    st = c->gpu.ops->buffer_write(c->gpu.ctx, *out, 0, tmp, padded);
    free(tmp);
    return st;
}

/* One dispatch of pipe over binds[0..n) (the parameter block pb of `bytes` at binding params_at). */
static lw_status run1(lw_wasm_glu *c, lw_gpu_pipeline pipe, lw_gpu_bind *b, uint32_t n, uint32_t params_at,
                      const void *pb, size_t bytes, const uint32_t grid[3]) {
    lw_gpu_buffer ub;
    lw_status st = new_buffer(c, 256, LW_GPU_USAGE_UNIFORM, "params", NULL, &ub);
    uint8_t slot[256] = {0};
    memcpy(slot, pb, bytes);
    if (st == LW_OK) st = c->gpu.ops->buffer_write(c->gpu.ctx, ub, 0, slot, sizeof slot);
    if (st != LW_OK) return st;
    b[params_at] = (lw_gpu_bind){ub, 0, 256};
    lw_gpu_bind_group group;
    if ((st = c->gpu.ops->bind_group_create(c->gpu.ctx, pipe, b, n, &group)) != LW_OK)
        return lw__errorf(c->err, st, "bind group failed");
    c->gpu.ops->dispatch(c->gpu.ctx, pipe, group, 0, grid[0], grid[1], grid[2]);
    return c->gpu.ops->submit(c->gpu.ctx);
}

/* The CPU engine's GLU (op SWIGLU or GEGLU) of g and u (k elements each) into h. */
static lw_status cpu_glu(lw_wasm_glu *c, int op, const float *g, const float *u, float *h, int k) {
    lw__graph gr;
    lw_status st = lw__graph_init(&gr, NULL, 4, 2);
    if (st != LW_OK) return lw__errorf(c->err, st, "out of memory");
    const int32_t a = lw__graph_weight(&gr, "g", LW_TYPE_F32, k, 1, (void *)g);
    const int32_t b = lw__graph_weight(&gr, "u", LW_TYPE_F32, k, 1, (void *)u);
    const int32_t d = lw__graph_act(&gr, "h", k, LW_ROWS_TOKENS);
    lw__graph_node(&gr, (lw__op)op, d, a, b, -1);
    if (gr.status == LW_OK) {
        gr.t[d].data = h;
        gr.t[d].ne1 = 1;
        lw__pool *pool = NULL;
        if ((st = lw__pool_create(NULL, 1, &pool)) == LW_OK) {
            lw__exec ex;
            memset(&ex, 0, sizeof ex);
            ex.g = &gr;
            ex.kern = lw__cpu_kernels_best();
            ex.pool = pool;
            ex.n_tokens = ex.n_outputs = 1;
            lw__cpu_exec(&ex);
            lw__pool_free(pool);
        }
    }
    st = gr.status != LW_OK ? gr.status : st;
    lw__graph_free(&gr);
    return st == LW_OK ? LW_OK : lw__errorf(c->err, st, "CPU GLU failed");
}

/* Runs one case (glu: LW_GPU_GLU_SILU or LW_GPU_GLU_GELU; the mat-vec variant's switches; seed) and schedules
 * the read-backs. Returns an lw_status (message: lw_wasm_glu_error). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_glu_run(lw_wasm_glu *c, int type, int glu, int rows, int k, int f16, int sg,
                                         int wg, int per_wg, int blocks, int actq, uint32_t seed) {
    if (!c->gpu.ops) return LW_ERR_IO;
    release(c);
    c->rows = rows;
    c->k = k;
    const int op = glu == (int)LW_GPU_GLU_SILU ? LW_OP_SWIGLU : LW_OP_GEGLU;
    uint32_t s = seed ? seed : 1;
    uint8_t *wq = NULL;
    float *deq = NULL, *gu = NULL;
    size_t wq_bytes = 0;
    lw_status st = lw_wasm_ref_weights((uint32_t)type, rows, k, &s, &wq, &wq_bytes, &deq, c->err);
    const size_t n_gu = GLU_PAD + (size_t)k + GLU_GAP + (size_t)k;
    c->fused = malloc((size_t)rows * 4);
    c->split = malloc((size_t)rows * 4);
    c->h = malloc((size_t)k * 4);
    c->h_cpu = malloc((size_t)k * 4);
    c->y_ref = malloc((size_t)rows * sizeof(double));
    c->y_cpu = malloc((size_t)rows * sizeof(double));
    gu = calloc(n_gu, sizeof(float));
    if (st == LW_OK && (!c->fused || !c->split || !c->h || !c->h_cpu || !c->y_ref || !c->y_cpu || !gu))
        st = lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    const float *g = gu + GLU_PAD, *u = gu + GLU_PAD + k + GLU_GAP;
    if (st == LW_OK) {
        /* gate values reach past +-10 (GEGLU's two cut-offs) and include exact +-10; up values in [-1, 1) */
        for (int i = 0; i < k; i++) {
            const float r = lw_wasm_rnd(&s);
            gu[GLU_PAD + i] = i % 37 == 5 ? (i % 2 ? 10.0f : -10.0f) : i % 11 == 3 ? 14.0f * r : 4.0f * r;
            gu[GLU_PAD + k + GLU_GAP + i] = lw_wasm_rnd(&s);
        }
        st = cpu_glu(c, op, g, u, c->h_cpu, k);
    }
    if (st == LW_OK) {
        lw_wasm_ref_matvec(deq, rows, k, c->h_cpu, c->y_ref);
        st = lw_wasm_cpu_product((uint32_t)type, rows, k, wq, c->h_cpu, c->y_cpu, c->err);
    }
    /* GPU buffers: W, gate|up, the GELU table, y (fused), h, y (split) */
    lw_gpu_buffer bw = 0, bx = 0, bt = 0, byf = 0, bh = 0, bys = 0;
    uint32_t *table = NULL;
    if (st == LW_OK && glu == (int)LW_GPU_GLU_GELU && !(table = malloc(LW_GPU_GELU_TABLE_WORDS * 4)))
        st = lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    if (table) lw__gpu_gelu_table(table);
    const uint32_t rw = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_SRC;
    if (st == LW_OK) st = new_buffer(c, wq_bytes, LW_GPU_USAGE_STORAGE, "W", wq, &bw);
    if (st == LW_OK) st = new_buffer(c, n_gu * 4, rw, "gate|up", gu, &bx);
    if (st == LW_OK)
        st = new_buffer(c, LW_GPU_GELU_TABLE_WORDS * 4, LW_GPU_USAGE_STORAGE, "table", table, &bt);
    if (st == LW_OK) st = new_buffer(c, (uint64_t)rows * 4, rw, "y fused", NULL, &byf);
    if (st == LW_OK) st = new_buffer(c, (uint64_t)k * 4, rw, "h", NULL, &bh);
    if (st == LW_OK) st = new_buffer(c, (uint64_t)rows * 4, rw, "y split", NULL, &bys);
    lw__gpu_matvec_variant v = lw__gpu_matvec_default(&c->info, (uint32_t)type);
    v.f16 = f16 != 0;
    v.subgroups = sg != 0;
    v.wg_size = (uint32_t)wg;
    v.rows = (uint32_t)per_wg;
    v.blocks = blocks != 0;
    v.actq = (uint32_t)actq;
    v.exact = v.exact && actq != 0; /* (the exact kernel rounds x as the CPU does) */
    lw__gpu_matvec_params p;
    uint32_t grid[3];
    lw_gpu_pipeline pipe;
    /* fused: one X_GLU mat-vec over gate|up */
    if (st == LW_OK)
        st = lw__gpu_matvec_glu_plan(&c->info, &v, (uint64_t)rows, (uint64_t)k, 0, GLU_PAD,
                                     GLU_PAD + (uint64_t)k + GLU_GAP, 0, &p, grid, c->err);
    if (st == LW_OK)
        st =
            lw__gpu_matvec_glu_pipeline(&c->gpu, &c->cache, NULL, &v, (uint32_t)glu, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        lw_gpu_bind b[5] = {{bw, 0, 0}, {bx, 0, 0}, {byf, 0, 0}, {0, 0, 0}, {bt, 0, 0}};
        st = run1(c, pipe, b, glu == (int)LW_GPU_GLU_GELU ? 5 : 4, 3, &p, sizeof p, grid);
    }
    /* split: the eltwise GLU (b_in_a, as the runner's prompt steps), then the plain mat-vec over h */
    lw__gpu_eltwise_variant ev =
        lw__gpu_eltwise_default(&c->info, op == LW_OP_SWIGLU ? LW_GPU_ELT_SWIGLU : LW_GPU_ELT_GEGLU);
    ev.b_in_a = true;
    lw__gpu_eltwise_params ep;
    if (st == LW_OK)
        st = lw__gpu_eltwise_plan(&c->info, &ev, (uint64_t)k, 1, GLU_PAD, GLU_PAD + (uint64_t)k + GLU_GAP, 1,
                                  0, 0.0f, 0.0f, &ep, grid, c->err);
    if (st == LW_OK) st = lw__gpu_eltwise_pipeline(&c->gpu, &c->cache, NULL, &ev, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS];
        lw_gpu_bind b[4] = {{bx, 0, 0}, {bh, 0, 0}, {0, 0, 0}, {bt, 0, 0}};
        st = run1(c, pipe, b, lw__gpu_eltwise_layout(&ev, kinds), 2, &ep, sizeof ep, grid);
    }
    if (st == LW_OK)
        st = lw__gpu_matvec_plan(&c->info, &v, (uint64_t)rows, (uint64_t)k, 0, 0, 0, &p, grid, c->err);
    if (st == LW_OK) st = lw__gpu_matvec_pipeline(&c->gpu, &c->cache, NULL, &v, &c->info, &pipe, c->err);
    if (st == LW_OK) {
        lw_gpu_bind b[4] = {{bw, 0, 0}, {bh, 0, 0}, {bys, 0, 0}, {0, 0, 0}};
        st = run1(c, pipe, b, 4, 3, &p, sizeof p, grid);
    }
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, byf, 0, c->fused, (uint64_t)rows * 4);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, bys, 0, c->split, (uint64_t)rows * 4);
    if (st == LW_OK) st = c->gpu.ops->read(c->gpu.ctx, bh, 0, c->h, (uint64_t)k * 4);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "GPU case failed");
    free(table);
    free(wq);
    free(deq);
    free(gu);
    return st;
}

/* After settle: statistic `what` of the last case, or -1 with a message:
 *   0 elements of y where fused and split differ in their bits    1 elements of h where GPU and CPU GLUs
 * differ 2 NMSE of fused against the dequantized product in double      3 NMSE of fused against the CPU's
 * product */
EMSCRIPTEN_KEEPALIVE double lw_wasm_glu_stat(lw_wasm_glu *c, int what) {
    if (c->err[0] || !c->gpu.ops || !c->fused) return -1;
    const char *e = c->gpu.ops->error(c->gpu.ctx);
    if (e) {
        lw__errorf(c->err, LW_ERR_IO, "GPU: %.220s", e);
        return -1;
    }
    if (c->gpu.ops->pending(c->gpu.ctx)) {
        lw__errorf(c->err, LW_ERR_INVALID_ARG, "read-back still pending (await lwGpu.settle())");
        return -1;
    }
    int diff = 0;
    switch (what) {
    case 0:
        for (int i = 0; i < c->rows; i++) diff += memcmp(&c->fused[i], &c->split[i], 4) != 0;
        return diff;
    case 1:
        for (int i = 0; i < c->k; i++) diff += memcmp(&c->h[i], &c->h_cpu[i], 4) != 0;
        return diff;
    case 2:
        return lw_wasm_nmse(c->fused, c->y_ref, (size_t)c->rows, c->err);
    case 3:
        return lw_wasm_nmse(c->fused, c->y_cpu, (size_t)c->rows, c->err);
    default:
        return -1;
    }
}
