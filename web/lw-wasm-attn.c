/* Wasm entry points for the attention kernel tests (tests/web/attn.test.mjs): random Q and a random KV cache
 * in the CPU engine's layout, the CPU engine's own LW_OP_ATTN (src/cpu/engine-ops.c, run as a one-node graph
 * in both its flash-attention and classic modes) as the reference, and the GPU kernels of
 * src/webgpu/kernel-attn.c through the HAL: normalised MSE between them. Compiled only by the wasm build. */
#include "core/core.h"
#include "cpu/engine-ops.h"
#include "graph/graph.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-attn.h"

#include <emscripten/emscripten.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

/* The GPU side shared by the problems of a test run: one HAL context and one pipeline cache, so each
 * variant is compiled once per run (CPU drivers take a second or more per attention pipeline). */
typedef struct lw_wasm_attn_gpu {
    lw_gpu gpu;                   /* the HAL                  */
    lw_gpu_info info;             /* its device description   */
    lw__gpu_pipeline_cache cache; /* pipelines by variant     */
} lw_wasm_attn_gpu;

/* One attention problem: host data, the two CPU results, and the GPU objects that run it. */
typedef struct lw_wasm_attn {
    lw_wasm_attn_gpu *g;                  /* the GPU it runs on (set by its first run)             */
    uint32_t kv_type;                     /* LW_TYPE_F16 or LW_TYPE_F32                            */
    int n_head, n_head_kv, hd;            /* heads, KV heads, head dim                             */
    int n_tokens, pos0, n_ctx, swa;       /* query tokens, first position, cache cells, window     */
    float scale, softcap;                 /* score scale and soft-cap                              */
    size_t q_n, cache_bytes;              /* floats of Q (= of the output), bytes of one cache     */
    float *q;                             /* n_tokens x n_head x hd                                */
    uint8_t *kc, *vc;                     /* n_ctx cells of n_head_kv x hd elements                */
    float *ref[2];                        /* CPU results: [0] flash attention, [1] classic path    */
    float *out;                           /* GPU result (read-back target)                         */
    lw_gpu_buffer bq, bk, bv, bo, bs, bp; /* Q, K, V, output, scratch, params                  */
    uint64_t scratch_bytes;               /* size of bs                                            */
    lw__gpu_attn_variant var;             /* variant of the last run                               */
    lw__gpu_attn_dispatch disp;           /* its dispatches                                        */
    lw__gpu_attn_params params;           /* its parameter block                                   */
    lw_gpu_pipeline pipe[2];              /* its pipelines, per dispatch                           */
    lw_gpu_bind_group group[2];           /* their bind groups                                     */
    char err[LW_ERRMSG_SIZE];             /* why the last call failed                              */
} lw_wasm_attn;

/* Opens the GPU for a test run; NULL when there is no device or memory. */
EMSCRIPTEN_KEEPALIVE lw_wasm_attn_gpu *lw_wasm_attn_gpu_open(void) {
    lw_wasm_attn_gpu *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    if (lw_wasm_gpu_open(NULL, &g->gpu) != LW_OK) {
        free(g);
        return NULL;
    }
    g->gpu.ops->info(g->gpu.ctx, &g->info);
    lw__gpu_cache_init(&g->cache, NULL);
    return g;
}

/* Releases the GPU and everything created on it (free the problems that used it first). */
EMSCRIPTEN_KEEPALIVE void lw_wasm_attn_gpu_close(lw_wasm_attn_gpu *g) {
    if (!g) return;
    g->gpu.ops->destroy(g->gpu.ctx);
    lw__gpu_cache_free(&g->cache);
    free(g);
}

/* Deterministic uniform numbers in [-1, 1) (xorshift32). */
static float rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)((*s >> 8) * (2.0 / 16777216.0) - 1.0);
}

/* Runs the CPU engine's attention node (flash 1: ggml's flash attention, 0: the KQ/softmax/KQV path) on
 * the problem, single-threaded, into out. */
static lw_status cpu_attn(lw_wasm_attn *a, int flash, float *out) {
    lw__graph g;
    lw__pool *pool = NULL;
    void *arena = NULL, *shared = NULL, *thread = NULL;
    const int64_t row = (int64_t)a->n_head * a->hd;
    lw_status st = lw__graph_init(&g, NULL, 4, 4);
    if (st != LW_OK) return st;
    int32_t tq = lw__graph_weight(&g, "q", LW_TYPE_F32, row, a->n_tokens, a->q); /* an input: a "weight" */
    int32_t to = lw__graph_act(&g, "attn", row, LW_ROWS_TOKENS);
    lw__node *nd = lw__graph_node(&g, LW_OP_ATTN, to, tq, -1, -1);
    if (nd) {
        nd->ip[0] = 0;
        nd->ip[1] = a->n_head;
        nd->ip[2] = a->n_head_kv;
        nd->ip[3] = a->hd;
        nd->fp[0] = a->scale;
        nd->fp[1] = a->softcap;
        nd->swa = a->swa;
    }
    size_t shared_bytes = 0, thread_floats = 0;
    if ((st = lw__graph_plan(&g, a->n_tokens, a->n_tokens, 64)) != LW_OK ||
        (st = lw__cpu_scratch_needs(&g, a->n_tokens, a->n_ctx, &shared_bytes, &thread_floats)) != LW_OK)
        goto done;
    arena = malloc((size_t)g.arena_size + 64);
    shared = malloc(shared_bytes + 64);
    thread = malloc(thread_floats * sizeof(float) + 64);
    if (!arena || !shared || !thread) {
        st = LW_ERR_NOMEM;
        goto done;
    }
    lw__graph_bind(&g, (void *)(((uintptr_t)arena + 63) & ~(uintptr_t)63));
    if ((st = lw__pool_create(NULL, 1, &pool)) != LW_OK) goto done;
    void *k[1] = {a->kc}, *v[1] = {a->vc};
    lw__exec ex = {.g = &g,
                   .kern = lw__cpu_kernels_best(),
                   .pool = pool,
                   .n_tokens = a->n_tokens,
                   .n_outputs = a->n_tokens,
                   .pos0 = a->pos0,
                   .flash_attn = flash,
                   .n_ctx = a->n_ctx,
                   .kv_type = a->kv_type,
                   .kv_row = (int64_t)a->n_head_kv * a->hd,
                   .k = k,
                   .v = v,
                   .scratch = shared,
                   .thread_scratch = thread,
                   .thread_floats = thread_floats};
    lw__cpu_exec(&ex);
    memcpy(out, g.t[to].data, a->q_n * sizeof(float));
done:
    lw__pool_free(pool);
    free(arena);
    free(shared);
    free(thread);
    lw__graph_free(&g);
    return st;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_attn_free(lw_wasm_attn *a) {
    if (!a) return;
    if (a->g) {
        const lw_gpu_buffer bufs[] = {a->bq, a->bk, a->bv, a->bo, a->bs, a->bp};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) a->g->gpu.ops->buffer_destroy(a->g->gpu.ctx, bufs[i]);
    }
    free(a->q);
    free(a->kc);
    free(a->vc);
    free(a->ref[0]);
    free(a->ref[1]);
    free(a->out);
    free(a);
}

/* Makes a problem: Q uniform in [-qmag, qmag), K and V uniform in [-1, 1) for the cells the tokens see and
 * NaN beyond them (a kernel reading past the causal end fails the check), then both CPU references unless
 * refs is 0 (benchmarks of long prompts: the references take minutes there; lw_wasm_attn_keep() makes a GPU
 * run the reference instead). kv_f16: the cache type. Returns NULL only when memory runs out; otherwise
 * check lw_wasm_attn_error(). */
EMSCRIPTEN_KEEPALIVE lw_wasm_attn *lw_wasm_attn_new_refs(int kv_f16, int n_head, int n_head_kv, int hd,
                                                         int n_tokens, int pos0, int n_ctx, int swa,
                                                         float scale, float softcap, float qmag,
                                                         uint32_t seed, int refs) {
    lw_wasm_attn *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->kv_type = kv_f16 ? LW_TYPE_F16 : LW_TYPE_F32;
    a->n_head = n_head;
    a->n_head_kv = n_head_kv;
    a->hd = hd;
    a->n_tokens = n_tokens;
    a->pos0 = pos0;
    a->n_ctx = n_ctx;
    a->swa = swa;
    a->scale = scale;
    a->softcap = softcap;
    if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv || hd <= 0 || hd % 4 || n_tokens <= 0 ||
        pos0 < 0 || n_ctx < pos0 + n_tokens || swa < 0 || n_ctx > (1 << 20) || n_head > 256 || hd > 1024 ||
        n_tokens > 4096) {
        lw__errorf(a->err, LW_ERR_INVALID_ARG, "bad problem shape");
        return a;
    }
    const size_t esize = kv_f16 ? 2 : 4, kv_row = (size_t)n_head_kv * (size_t)hd;
    a->q_n = (size_t)n_tokens * (size_t)n_head * (size_t)hd;
    a->cache_bytes = (size_t)n_ctx * kv_row * esize;
    a->q = malloc(a->q_n * sizeof(float));
    a->kc = malloc(a->cache_bytes);
    a->vc = malloc(a->cache_bytes);
    a->ref[0] = malloc(a->q_n * sizeof(float));
    a->ref[1] = malloc(a->q_n * sizeof(float));
    a->out = malloc(a->q_n * sizeof(float));
    if (!a->q || !a->kc || !a->vc || !a->ref[0] || !a->ref[1] || !a->out) {
        lw_wasm_attn_free(a);
        return NULL;
    }
    uint32_t s = seed ? seed : 1;
    for (size_t i = 0; i < a->q_n; i++) a->q[i] = qmag * rnd(&s);
    const size_t seen = (size_t)(pos0 + n_tokens) * kv_row;
    for (int which = 0; which < 2; which++) {
        uint8_t *c = which ? a->vc : a->kc;
        for (size_t i = 0; i < (size_t)n_ctx * kv_row; i++) {
            float x = i < seen ? rnd(&s) : NAN;
            if (kv_f16)
                ((uint16_t *)c)[i] = lw__fp32_to_fp16(x);
            else
                ((float *)c)[i] = x;
        }
    }
    lw_status st;
    if (!refs) {
        memset(a->ref[0], 0, a->q_n * sizeof(float));
        memset(a->ref[1], 0, a->q_n * sizeof(float));
        return a;
    }
    for (int flash = 1; flash >= 0; flash--)
        if ((st = cpu_attn(a, flash, a->ref[1 - flash])) != LW_OK) {
            lw__errorf(a->err, st, "CPU reference (flash_attn=%d): %s", flash, lw_status_str(st));
            return a;
        }
    return a;
}

/* lw_wasm_attn_new_refs with both CPU references. */
EMSCRIPTEN_KEEPALIVE lw_wasm_attn *lw_wasm_attn_new(int kv_f16, int n_head, int n_head_kv, int hd,
                                                    int n_tokens, int pos0, int n_ctx, int swa, float scale,
                                                    float softcap, float qmag, uint32_t seed) {
    return lw_wasm_attn_new_refs(kv_f16, n_head, n_head_kv, hd, n_tokens, pos0, n_ctx, swa, scale, softcap,
                                 qmag, seed, 1);
}

/* Forgets the last run's refusal (a benchmark goes on to its next variant). */
EMSCRIPTEN_KEEPALIVE void lw_wasm_attn_clear_error(lw_wasm_attn *a) {
    a->err[0] = 0;
}

/* After settle(): the last GPU result becomes both references (a benchmark checks later variants against
 * its peer's output). */
EMSCRIPTEN_KEEPALIVE void lw_wasm_attn_keep(lw_wasm_attn *a) {
    memcpy(a->ref[0], a->out, a->q_n * sizeof(float));
    memcpy(a->ref[1], a->out, a->q_n * sizeof(float));
}

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_attn_error(const lw_wasm_attn *a) {
    return a ? a->err : "out of memory";
}

/* Creates the buffers on g and uploads Q and the caches on first use. Returns an lw_status. */
static lw_status attn_upload(lw_wasm_attn *a, lw_wasm_attn_gpu *g) {
    lw_status st;
    if (a->g && a->g != g) return lw__errorf(a->err, LW_ERR_INVALID_ARG, "a problem runs on one GPU");
    a->g = g;
    if (a->bq) return LW_OK;
    const lw_gpu_ops *o = g->gpu.ops;
    void *c = g->gpu.ctx;
    const uint32_t rw = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST;
    if ((st = o->buffer_create(c, a->q_n * 4, rw, "Q", &a->bq)) ||
        (st = o->buffer_create(c, a->cache_bytes, rw, "K cache", &a->bk)) ||
        (st = o->buffer_create(c, a->cache_bytes, rw, "V cache", &a->bv)) ||
        (st = o->buffer_create(c, a->q_n * 4, rw | LW_GPU_USAGE_COPY_SRC, "attn out", &a->bo)) ||
        (st = o->buffer_create(c, sizeof(lw__gpu_attn_params), LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST,
                               "attn params", &a->bp)))
        return lw__errorf(a->err, st, "buffer creation failed: %s", o->error(c) ? o->error(c) : "");
    if ((st = o->buffer_write(c, a->bq, 0, a->q, a->q_n * 4)) ||
        (st = o->buffer_write(c, a->bk, 0, a->kc, (a->cache_bytes + 3) & ~(size_t)3)) ||
        (st = o->buffer_write(c, a->bv, 0, a->vc, (a->cache_bytes + 3) & ~(size_t)3)))
        return lw__errorf(a->err, st, "upload failed");
    return LW_OK;
}

EMSCRIPTEN_KEEPALIVE double lw_wasm_attn_nmse(lw_wasm_attn *a, int which);

/* Runs variant v on problem a (the GPU opened by g) as its plan says (decode + reduce, prefill, or exact).
 * Poisons the output first; the JS caller awaits lwGpu.settle() before lw_wasm_attn_nmse(). */
static lw_status run_variant(lw_wasm_attn *a, lw_wasm_attn_gpu *g, lw__gpu_attn_variant v) {
    lw_status st;
    const lw_gpu_ops *o = g->gpu.ops;
    void *c = g->gpu.ctx;
    a->var = v;
    uint64_t need;
    if ((st = lw__gpu_attn_scratch_bytes(&v, (uint32_t)a->n_head, (uint32_t)a->n_tokens, (uint64_t)a->n_ctx,
                                         &need, a->err)) != LW_OK)
        return st;
    if (need > a->scratch_bytes) { /* a test harness: a real runner sizes it once at load */
        if (a->bs) o->buffer_destroy(c, a->bs);
        a->bs = 0;
        if ((st = o->buffer_create(c, need, LW_GPU_USAGE_STORAGE, "attn scratch", &a->bs)) != LW_OK)
            return lw__errorf(a->err, st, "scratch buffer");
        a->scratch_bytes = need;
    }
    lw__gpu_attn_shape sh = {.n_head = (uint32_t)a->n_head,
                             .n_head_kv = (uint32_t)a->n_head_kv,
                             .n_tokens = (uint32_t)a->n_tokens,
                             .pos0 = (uint32_t)a->pos0,
                             .swa = (uint32_t)a->swa,
                             .n_ctx = (uint64_t)a->n_ctx,
                             .scale = a->scale,
                             .softcap = a->softcap};
    if ((st = lw__gpu_attn_plan(&g->info, &v, &sh, a->scratch_bytes, &a->params, &a->disp, a->err)) != LW_OK)
        return st;
    memset(a->out, 0xff, a->q_n * 4); /* NaN: an element the kernels do not write fails the check */
    if ((st = o->buffer_write(c, a->bo, 0, a->out, a->q_n * 4)) ||
        (st = o->buffer_write(c, a->bp, 0, &a->params, sizeof a->params)))
        return lw__errorf(a->err, st, "writing output/params failed");
    lw_gpu_bind b[LW_GPU_ATTN_BINDINGS] = {{a->bq, 0, 0}, {a->bk, 0, 0}, {a->bv, 0, 0},
                                           {a->bo, 0, 0}, {a->bs, 0, 0}, {a->bp, 0, 0}};
    for (uint32_t i = 0; i < a->disp.n; i++) {
        if ((st = lw__gpu_attn_pipeline(&g->gpu, &g->cache, NULL, &v, (lw__gpu_attn_kernel)a->disp.kernel[i],
                                        &g->info, &a->pipe[i], a->err)) != LW_OK)
            return st;
        if ((st = o->bind_group_create(c, a->pipe[i], b, LW_GPU_ATTN_BINDINGS, &a->group[i])) != LW_OK)
            return lw__errorf(a->err, st, "bind group: %s", o->error(c) ? o->error(c) : "");
        o->dispatch(c, a->pipe[i], a->group[i], 0, a->disp.grid[i][0], a->disp.grid[i][1],
                    a->disp.grid[i][2]);
    }
    if ((st = o->submit(c)) != LW_OK) return lw__errorf(a->err, st, "submit failed");
    if ((st = o->read(c, a->bo, 0, a->out, a->q_n * 4)) != LW_OK)
        return lw__errorf(a->err, st, "read failed");
    return LW_OK;
}

/* The default variant of problem a on g. */
static lw__gpu_attn_variant default_variant(const lw_wasm_attn *a, const lw_wasm_attn_gpu *g) {
    return lw__gpu_attn_default(&g->info, a->kv_type, (uint32_t)a->hd, (uint32_t)(a->n_head / a->n_head_kv));
}

/* Runs the kernels on the problem: the device's default variant with the given tunables overriding it
 * (0: keep the default; pwg, rq, rk: the prefill kernel's invocations and register block). Returns an
 * lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_attn_run(lw_wasm_attn *a, lw_wasm_attn_gpu *g, int wg_size, int chunk,
                                          int splits, int min_chunk, int decode_max, int bq, int bk, int pwg,
                                          int rq, int rk) {
    lw_status st;
    if (a->err[0]) return LW_ERR_INVALID_ARG;
    if (!g) return lw__errorf(a->err, LW_ERR_INVALID_ARG, "no GPU");
    if ((st = attn_upload(a, g)) != LW_OK) return st;
    lw__gpu_attn_variant v = default_variant(a, g);
    if (wg_size > 0) v.wg_size = (uint32_t)wg_size;
    if (chunk > 0) v.chunk = (uint32_t)chunk;
    if (splits >= 0) v.splits = (uint32_t)splits;
    if (min_chunk > 0) v.min_chunk = (uint32_t)min_chunk;
    if (decode_max >= 0) v.decode_max = (uint32_t)decode_max;
    if (bq > 0) v.bq = (uint32_t)bq;
    if (bk > 0) v.bk = (uint32_t)bk;
    if (pwg > 0) v.pwg = (uint32_t)pwg;
    if (rq > 0) v.rq = (uint32_t)rq;
    if (rk > 0) v.rk = (uint32_t)rk;
    return run_variant(a, g, v);
}

/* Runs the CPU-order kernel (attn-exact.wgsl) with wg_size invocations (0: the default). Check with
 * lw_wasm_attn_mismatch(). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_attn_run_exact(lw_wasm_attn *a, lw_wasm_attn_gpu *g, int wg_size) {
    lw_status st;
    if (a->err[0]) return LW_ERR_INVALID_ARG;
    if (!g) return lw__errorf(a->err, LW_ERR_INVALID_ARG, "no GPU");
    if ((st = attn_upload(a, g)) != LW_OK) return st;
    lw__gpu_attn_variant v = default_variant(a, g);
    v.exact = true;
    if (wg_size > 0) v.wg_size = (uint32_t)wg_size;
    return run_variant(a, g, v);
}

/* After settle(): output elements whose bits differ from the CPU engine's flash attention, or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_attn_mismatch(lw_wasm_attn *a) {
    if (lw_wasm_attn_nmse(a, 0) < 0) return -1;
    int bad = 0;
    for (size_t i = 0; i < a->q_n; i++) bad += memcmp(&a->out[i], &a->ref[0][i], 4) != 0;
    return bad;
}

/* Benchmark step after a run: records the run's dispatches iters times in one compute pass (creating
 * nothing), submits, and schedules the read of the output; the JS caller times it up to settle(). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_attn_bench(lw_wasm_attn *a, int iters) {
    if (a->err[0]) return LW_ERR_INVALID_ARG;
    if (!a->g || !a->disp.n || iters <= 0)
        return lw__errorf(a->err, LW_ERR_INVALID_ARG, "run first; iters > 0");
    const lw_gpu_ops *o = a->g->gpu.ops;
    void *c = a->g->gpu.ctx;
    for (int it = 0; it < iters; it++)
        for (uint32_t i = 0; i < a->disp.n; i++)
            o->dispatch(c, a->pipe[i], a->group[i], 0, a->disp.grid[i][0], a->disp.grid[i][1],
                        a->disp.grid[i][2]);
    return o->read(c, a->bo, 0, a->out, a->q_n * 4);
}

/* What the last run did, as JSON into dst: kernels, grids, splits, chunk, the variant. Returns the length
 * or -1. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_attn_plan_json(const lw_wasm_attn *a, char *dst, int cap) {
    const lw__gpu_attn_dispatch *d = &a->disp;
    const lw__gpu_attn_variant *v = &a->var;
    int n = snprintf(dst, (size_t)cap,
                     "{\"dispatches\":%u,\"kernel\":[%u,%u],\"grid\":[[%u,%u,%u],[%u,%u,%u]],\"splits\":%u,"
                     "\"chunk\":%u,\"base\":%u,\"wg\":%u,\"chunkMax\":%u,\"pwg\":%u,\"bq\":%u,\"bk\":%u,"
                     "\"rq\":%u,\"rk\":%u,\"scratch\":%llu}",
                     d->n, d->kernel[0], d->kernel[1], d->grid[0][0], d->grid[0][1], d->grid[0][2],
                     d->grid[1][0], d->grid[1][1], d->grid[1][2], a->params.n_splits, a->params.chunk,
                     a->params.base, v->wg_size, v->chunk, v->pwg, v->bq, v->bk, v->rq, v->rk,
                     (unsigned long long)a->scratch_bytes);
    return n < cap ? n : -1;
}

/* After settle(): sum((gpu - ref)^2) / sum(ref^2) against CPU reference `which` (0: flash attention, 1: the
 * classic path), or -1 with the reason in lw_wasm_attn_error() (GPU error, pending read, non-finite
 * output). */
EMSCRIPTEN_KEEPALIVE double lw_wasm_attn_nmse(lw_wasm_attn *a, int which) {
    if (a->err[0] || !a->g || which < 0 || which > 1) return -1;
    const char *e = a->g->gpu.ops->error(a->g->gpu.ctx);
    if (e) {
        lw__errorf(a->err, LW_ERR_IO, "GPU: %.220s", e);
        return -1;
    }
    if (a->g->gpu.ops->pending(a->g->gpu.ctx)) {
        lw__errorf(a->err, LW_ERR_INVALID_ARG, "read-back still pending (await lwGpu.settle())");
        return -1;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < a->q_n; i++) {
        if (!isfinite(a->out[i]) || !isfinite(a->ref[which][i])) {
            lw__errorf(a->err, LW_ERR_INVALID_ARG, "element %zu (token %zu): GPU %g, CPU %g", i,
                       i / ((size_t)a->n_head * (size_t)a->hd), (double)a->out[i], (double)a->ref[which][i]);
            return -1;
        }
        double d = (double)a->out[i] - (double)a->ref[which][i];
        num += d * d;
        den += (double)a->ref[which][i] * (double)a->ref[which][i];
    }
    return den > 0 ? num / den : num;
}

/* NMSE between the two CPU references (how far apart llama.cpp's own two modes are). */
EMSCRIPTEN_KEEPALIVE double lw_wasm_attn_ref_gap(const lw_wasm_attn *a) {
    if (a->err[0]) return -1;
    double num = 0, den = 0;
    for (size_t i = 0; i < a->q_n; i++) {
        double d = (double)a->ref[0][i] - (double)a->ref[1][i];
        num += d * d;
        den += (double)a->ref[1][i] * (double)a->ref[1][i];
    }
    return den > 0 ? num / den : num;
}
