/* Wasm test entry points of GPU sampling (kernels-ops.h: topk.wgsl with SAMPLE=1), used by
 * tests/web/sample.test.mjs. One call runs many draws of the sampling pass over one candidate list (or one
 * top-k pass 1 over n logits, then the draws), one dispatch and one parameter slot per draw, and computes
 * for each draw the scalar reference's pick (lw__gpu_sample_ref) with its margin; with logits and a seed it
 * also draws the same number of tokens with the CPU sampler (src/sample) from the same generator and the
 * exact probabilities of the CPU sampler's chain in double precision, for the distribution test.
 * lw_wasm_sample_bench() times top-k + the sampling pass (or the plain top-k / argmax) over n logits for
 * tests/web/bench-sample.mjs. Compiled only by the wasm build. */
#include "core/core.h"
#include "sample/sample.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels-ops.h"

#include <emscripten/emscripten.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lw_status lw_wasm_gpu_open(const lw_allocator *alloc, lw_gpu *out); /* lw-gpu-wasm.c */

#define SAMPLE_SLOT 256u  /* bytes per parameter slot (dynamic offsets)        */
#define SAMPLE_BATCH 512u /* draws per submission                              */

/* A test context: the device and the last run's inputs and results. */
typedef struct lw_wasm_sample {
    lw_gpu gpu;                   /* the HAL                                            */
    lw_gpu_info info;             /* its device                                         */
    lw__gpu_pipeline_cache cache; /* pipelines by variant                               */
    lw_gpu_buffer bufs[4];        /* the last run's buffers                             */
    int n_bufs;                   /* used                                               */
    uint32_t *gpu_pairs;          /* n_draws (id, value) pairs read back                */
    int32_t *ref_ids;             /* the reference's pick per draw                      */
    double *margins;              /* its margin per draw                                */
    int32_t *cpu_ids;             /* the CPU sampler's draws (logits with a seed)       */
    double *expected;             /* the CPU chain's probability per id (logits mode)   */
    int n_draws;                  /* draws of the last run                              */
    int n;                        /* its candidates or logits                           */
    uint32_t k;                   /* candidates the draws chose from                    */
    char err[LW_ERRMSG_SIZE];     /* why the last call failed                           */
} lw_wasm_sample;

static void release_run(lw_wasm_sample *c) {
    for (int i = 0; i < c->n_bufs; i++) c->gpu.ops->buffer_destroy(c->gpu.ctx, c->bufs[i]);
    c->n_bufs = 0;
    free(c->gpu_pairs);
    free(c->ref_ids);
    free(c->margins);
    free(c->cpu_ids);
    free(c->expected);
    c->gpu_pairs = NULL;
    c->ref_ids = c->cpu_ids = NULL;
    c->margins = c->expected = NULL;
    c->n_draws = 0;
    c->err[0] = 0;
}

EMSCRIPTEN_KEEPALIVE void lw_wasm_sample_free(lw_wasm_sample *c) {
    if (!c) return;
    if (c->gpu.ops) {
        release_run(c);
        c->gpu.ops->destroy(c->gpu.ctx);
    }
    lw__gpu_cache_free(&c->cache);
    free(c);
}

EMSCRIPTEN_KEEPALIVE lw_wasm_sample *lw_wasm_sample_new(void) {
    lw_wasm_sample *c = calloc(1, sizeof *c);
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

EMSCRIPTEN_KEEPALIVE const char *lw_wasm_sample_error(const lw_wasm_sample *c) {
    return c ? c->err : "out of memory";
}

static lw_status new_buffer(lw_wasm_sample *c, uint64_t size, uint32_t usage, const char *label, lw_gpu_buffer *out) {
    lw_status st = c->gpu.ops->buffer_create(c->gpu.ctx, size ? size : 4, usage, label, out);
    if (st != LW_OK) return lw__errorf(c->err, st, "buffer %s: %s", label, c->gpu.ops->error(c->gpu.ctx));
    c->bufs[c->n_bufs++] = *out;
    return LW_OK;
}

/* The CPU sampler's chain (sample.c, after its top-k of k) in double precision: the probability of each of
 * the n ids. */
static void chain_probs(const float *logits, uint32_t n, uint32_t k, const lw_sampler_params *sp, double *prob) {
    uint32_t *ci = malloc(k * sizeof *ci);
    float *cv = malloc(k * sizeof *cv);
    uint32_t *ids = malloc(n * sizeof *ids);
    double *w = malloc(k * sizeof *w);
    memset(prob, 0, n * sizeof *prob);
    if (!ci || !cv || !ids || !w) goto done;
    for (uint32_t i = 0; i < n; i++) ids[i] = i;
    lw__gpu_sample_ref_topk(ids, logits, n, k, ci, cv); /* the order only: value descending, ties by id */
    if (!(sp->temp > 0.0f)) {
        prob[ci[0]] = 1.0;
        goto done;
    }
    uint32_t m = k;
    if (sp->top_p < 1.0f) {
        double tot = 0, cum = 0;
        for (uint32_t r = 0; r < k; r++) tot += w[r] = exp((double)cv[r] - cv[0]);
        for (uint32_t r = 0; r < k; r++) {
            cum += w[r] / tot;
            if (cum >= sp->top_p) {
                m = r + 1;
                break;
            }
        }
    }
    if (sp->min_p > 0.0f) {
        const float cut = cv[0] + logf(sp->min_p);
        uint32_t keep = 1;
        while (keep < m && cv[keep] >= cut) keep++;
        m = keep;
    }
    double tot = 0;
    for (uint32_t r = 0; r < m; r++) tot += w[r] = exp(((double)cv[r] - cv[0]) / sp->temp);
    for (uint32_t r = 0; r < m; r++) prob[ci[r]] = w[r] / tot;
done:
    free(ci);
    free(cv);
    free(ids);
    free(w);
}

/* Runs n_draws draws of the sampling pass on the GPU and their reference picks.
 *   logits = 0: ids/values are n candidate pairs, the input of the sampling pass itself (n <= wg * per);
 *   logits = 1: values are n logits (ids unused): top-k pass 1 once, then the draws, as the model runner.
 * k: the top-k; temp/top_p/min_p: the CPU sampler's parameters. us: n_draws uniform numbers (f32), or NULL:
 * numbers from the CPU sampler's generator seeded with seed (then, with logits = 1, the CPU sampler draws
 * n_draws tokens from the same logits and seed, and the chain's exact probabilities are computed).
 * Returns an lw_status; await settle() before reading the results. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_sample_run(lw_wasm_sample *c, int logits, const uint32_t *ids, const float *values, int n,
                                            int k, float temp, float top_p, float min_p, const float *us, int n_draws,
                                            double seed) {
    if (!c->gpu.ops) return LW_ERR_IO;
    release_run(c);
    if (n <= 0 || k <= 0 || k > n || k > (int)LW_GPU_TOPK_MAX || n_draws <= 0)
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad sizes");
    const lw_gpu_ops *o = c->gpu.ops;
    lw__gpu_topk_variant v = lw__gpu_topk_default(&c->info);
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_last_n = 0;
    sp.temp = temp;
    sp.top_k = k;
    sp.top_p = top_p;
    sp.min_p = min_p;
    sp.seed = (uint64_t)seed;
    lw__gpu_topk_plan_out pl;
    lw_status st;
    if (logits) {
        if ((st = lw__gpu_topk_plan(&c->info, &v, (uint64_t)n, (uint64_t)k, 0, 0, 0, &pl, c->err)) != LW_OK) return st;
    } else {
        if ((uint64_t)n > (uint64_t)v.wg_size * v.per) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "too many pairs");
        memset(&pl, 0, sizeof pl);
        pl.pass2 = (lw__gpu_topk_params){(uint32_t)n, (uint32_t)k, 0, 0, (uint32_t)n, 1, 1, 0};
        pl.grid2[0] = pl.grid2[1] = pl.grid2[2] = 1;
        pl.scratch_pairs = (uint32_t)n;
    }
    lw__gpu_sample_params sprm;
    if ((st = lw__gpu_sample_setup(&pl.pass2, &sp, &sprm, c->err)) != LW_OK) return st;
    c->n_draws = n_draws;
    c->n = n;
    c->k = (uint32_t)k;
    c->gpu_pairs = malloc((size_t)n_draws * 8);
    c->ref_ids = malloc((size_t)n_draws * sizeof(int32_t));
    c->margins = malloc((size_t)n_draws * sizeof(double));
    float *u = malloc((size_t)n_draws * sizeof(float));
    uint32_t *pairs = malloc((size_t)n * 8), *ci = malloc((size_t)k * 4), *all_ids = malloc((size_t)n * 4);
    float *cv = malloc((size_t)k * 4);
    uint8_t *slots = calloc(SAMPLE_BATCH, SAMPLE_SLOT);
    if (!c->gpu_pairs || !c->ref_ids || !c->margins || !u || !pairs || !ci || !all_ids || !cv || !slots) {
        st = lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
        goto done;
    }
    memset(c->gpu_pairs, 0xff, (size_t)n_draws * 8);
    /* the uniform numbers, and the references */
    uint64_t rng[4];
    lw__sampler_rng_seed(rng, sp.seed);
    for (int j = 0; j < n_draws; j++) u[j] = us ? us[j] : lw__gpu_sample_u(lw__sampler_rng_uniform(rng));
    for (int i = 0; i < n; i++) all_ids[i] = logits ? (uint32_t)i : ids[i];
    lw__gpu_sample_ref_topk(all_ids, values, (uint32_t)n, (uint32_t)k, ci, cv);
    for (int j = 0; j < n_draws; j++) {
        lw__gpu_sample_params p = sprm;
        p.u = u[j];
        c->ref_ids[j] = (int32_t)ci[lw__gpu_sample_ref_draw(cv, (uint32_t)k, &p, &c->margins[j])];
    }
    if (logits && !us) {
        c->cpu_ids = malloc((size_t)n_draws * sizeof(int32_t));
        c->expected = malloc((size_t)n * sizeof(double));
        lw_sampler *s = NULL;
        if (!c->cpu_ids || !c->expected || lw_sampler_create(n, &sp, NULL, &s) != LW_OK) {
            st = lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int j = 0; j < n_draws; j++) c->cpu_ids[j] = lw_sampler_sample(s, values);
        lw_sampler_free(s);
        chain_probs(values, (uint32_t)n, (uint32_t)k, &sp, c->expected);
    }
    /* GPU: input (logits, or pairs), scratch (pass 1's pairs), results, parameter slots */
    lw_gpu_pipeline p1 = 0, p2 = 0;
    lw_gpu_buffer in, scratch, res, ub;
    const uint32_t rw = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST | LW_GPU_USAGE_COPY_SRC;
    if ((st = new_buffer(c, (uint64_t)n * (logits ? 4 : 8), rw, "sample input", &in)) != LW_OK ||
        (st = new_buffer(c, (uint64_t)pl.scratch_pairs * 8 + 16, rw, "sample scratch", &scratch)) != LW_OK ||
        (st = new_buffer(c, (uint64_t)n_draws * 8, rw, "sample results", &res)) != LW_OK ||
        (st = new_buffer(c, (uint64_t)SAMPLE_BATCH * SAMPLE_SLOT, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST, "params",
                         &ub)) != LW_OK)
        goto done;
    if (logits) {
        st = o->buffer_write(c->gpu.ctx, in, 0, values, (uint64_t)n * 4);
    } else {
        for (int i = 0; i < n; i++) {
            pairs[2 * i] = ids[i];
            memcpy(&pairs[2 * i + 1], &values[i], 4);
        }
        st = o->buffer_write(c->gpu.ctx, in, 0, pairs, (uint64_t)n * 8);
    }
    if (st == LW_OK && logits) st = lw__gpu_topk_pipeline(&c->gpu, &c->cache, NULL, &v, false, &c->info, &p1, c->err);
    /* pass 2's variant as the model runner picks it: sized for the most pairs it may get (k at its cap) */
    uint64_t most = (uint64_t)n;
    if (logits) {
        lw__gpu_topk_plan_out widest;
        if (st == LW_OK) st = lw__gpu_topk_plan(&c->info, &v, (uint64_t)n, lw__gpu_topk_max_k(&v, (uint64_t)n), 0, 0, 0,
                                                &widest, c->err);
        if (st == LW_OK) most = widest.scratch_pairs;
    }
    const lw__gpu_topk_variant v2 = lw__gpu_sample_variant(&v, most);
    if (st == LW_OK) st = lw__gpu_sample_pipeline(&c->gpu, &c->cache, NULL, &v2, &c->info, &p2, c->err);
    if (st != LW_OK) goto done;
    lw_gpu_bind_group g1 = 0, g2 = 0;
    const lw_gpu_bind b1[3] = {{in, 0, 0}, {scratch, 0, 0}, {ub, 0, SAMPLE_SLOT}};
    const lw_gpu_bind b2[3] = {{logits ? scratch : in, 0, 0}, {res, 0, 0}, {ub, 0, SAMPLE_SLOT}};
    if ((logits && (st = o->bind_group_create(c->gpu.ctx, p1, b1, 3, &g1)) != LW_OK) ||
        (st = o->bind_group_create(c->gpu.ctx, p2, b2, 3, &g2)) != LW_OK) {
        lw__errorf(c->err, st, "bind group: %s", o->error(c->gpu.ctx) ? o->error(c->gpu.ctx) : "");
        goto done;
    }
    /* batches of draws: slot i of the uniform buffer holds draw (batch start + i)'s block (pass 1 first) */
    for (int j0 = 0; j0 < n_draws && st == LW_OK;) {
        uint32_t slot = 0;
        if (j0 == 0 && logits) {
            memcpy(slots, &pl.pass1, sizeof pl.pass1);
            slot = 1;
        }
        const int first = j0;
        for (; j0 < n_draws && slot < SAMPLE_BATCH; j0++, slot++) {
            lw__gpu_sample_params p = sprm;
            p.u = u[j0];
            p.topk.out_offset = (uint32_t)j0;
            memcpy(slots + (size_t)slot * SAMPLE_SLOT, &p, sizeof p);
        }
        if ((st = o->buffer_write(c->gpu.ctx, ub, 0, slots, (uint64_t)slot * SAMPLE_SLOT)) != LW_OK) break;
        uint32_t s = 0;
        if (first == 0 && logits) o->dispatch(c->gpu.ctx, p1, g1, s++ * SAMPLE_SLOT, pl.grid1[0], pl.grid1[1], pl.grid1[2]);
        for (; s < slot; s++) o->dispatch(c->gpu.ctx, p2, g2, s * SAMPLE_SLOT, 1, 1, 1);
        st = o->submit(c->gpu.ctx); /* the next batch's parameter write goes after this work in queue order */
    }
    if (st == LW_OK) st = o->read(c->gpu.ctx, res, 0, c->gpu_pairs, (uint64_t)n_draws * 8);
    if (st != LW_OK && !c->err[0]) lw__errorf(c->err, st, "sample: submit/read failed");
done:
    free(u);
    free(pairs);
    free(ci);
    free(all_ids);
    free(cv);
    free(slots);
    return st;
}

/* After settle(): the GPU's first asynchronous error (validation, compilation), or "". */
EMSCRIPTEN_KEEPALIVE const char *lw_wasm_sample_gpu_error(const lw_wasm_sample *c) {
    const char *e = c->gpu.ops ? c->gpu.ops->error(c->gpu.ctx) : "no GPU device";
    return e ? e : "";
}

/* Results of the last run (valid after settle()): GPU id / reference id / margin of draw j; the CPU
 * sampler's draw j (-1 when not run); the chain's probability of id i (logits runs with a seed; else -1). */
EMSCRIPTEN_KEEPALIVE int lw_wasm_sample_gpu_id(const lw_wasm_sample *c, int j) {
    return c->gpu_pairs && j >= 0 && j < c->n_draws ? (int)c->gpu_pairs[2 * j] : -1;
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_sample_ref_id(const lw_wasm_sample *c, int j) {
    return c->ref_ids && j >= 0 && j < c->n_draws ? c->ref_ids[j] : -1;
}
EMSCRIPTEN_KEEPALIVE double lw_wasm_sample_margin(const lw_wasm_sample *c, int j) {
    return c->margins && j >= 0 && j < c->n_draws ? c->margins[j] : -1;
}
EMSCRIPTEN_KEEPALIVE int lw_wasm_sample_cpu_id(const lw_wasm_sample *c, int j) {
    return c->cpu_ids && j >= 0 && j < c->n_draws ? c->cpu_ids[j] : -1;
}
EMSCRIPTEN_KEEPALIVE double lw_wasm_sample_expected(const lw_wasm_sample *c, int i) {
    return c->expected && i >= 0 && i < c->n ? c->expected[i] : -1;
}

/* Benchmark: `reps` times top-k pass 1 + pass 2 over n random logits in one submission (sample = 1: the
 * sampling pass with the CPU sampler's defaults and the given k; 0: the plain pass 2, k = 1 being the greedy
 * argmax), then a 4-byte read-back: the JS side times it to settle(). The model runner's variants. Returns an
 * lw_status. */
EMSCRIPTEN_KEEPALIVE int lw_wasm_sample_bench(lw_wasm_sample *c, int n, int k, int sample, int reps) {
    if (!c->gpu.ops) return LW_ERR_IO;
    release_run(c);
    if (n <= 0 || k <= 0 || reps <= 0) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad sizes");
    const lw_gpu_ops *o = c->gpu.ops;
    lw__gpu_topk_variant v = lw__gpu_topk_default(&c->info);
    lw__gpu_topk_plan_out pl, widest;
    lw_status st = lw__gpu_topk_plan(&c->info, &v, (uint64_t)n, (uint64_t)k, 0, 0, 0, &pl, c->err);
    if (st == LW_OK)
        st = lw__gpu_topk_plan(&c->info, &v, (uint64_t)n, lw__gpu_topk_max_k(&v, (uint64_t)n), 0, 0, 0, &widest, c->err);
    if (st != LW_OK) return st;
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_last_n = 0;
    lw__gpu_sample_params sprm;
    if ((st = lw__gpu_sample_setup(&pl.pass2, &sp, &sprm, c->err)) != LW_OK) return st;
    sprm.u = 0.5f;
    float *logits = malloc((size_t)n * sizeof(float));
    uint8_t slots[2 * SAMPLE_SLOT];
    c->gpu_pairs = malloc(8);
    if (!logits || !c->gpu_pairs) {
        free(logits);
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    }
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        logits[i] = (float)(x >> 8) * (8.0f / 16777216.0f);
    }
    memset(slots, 0, sizeof slots);
    memcpy(slots, &pl.pass1, sizeof pl.pass1);
    if (sample) memcpy(slots + SAMPLE_SLOT, &sprm, sizeof sprm);
    else memcpy(slots + SAMPLE_SLOT, &pl.pass2, sizeof pl.pass2);
    const lw__gpu_topk_variant v2 = sample ? lw__gpu_sample_variant(&v, widest.scratch_pairs) : v;
    lw_gpu_buffer in, scratch, res, ub;
    lw_gpu_pipeline p1 = 0, p2 = 0;
    lw_gpu_bind_group g1 = 0, g2 = 0;
    const uint32_t rw = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST | LW_GPU_USAGE_COPY_SRC;
    if ((st = new_buffer(c, (uint64_t)n * 4, rw, "bench logits", &in)) == LW_OK &&
        (st = new_buffer(c, (uint64_t)widest.scratch_pairs * 8 + 16, rw, "bench scratch", &scratch)) == LW_OK &&
        (st = new_buffer(c, (uint64_t)k * 8 + 16, rw, "bench result", &res)) == LW_OK &&
        (st = new_buffer(c, sizeof slots, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST, "bench params", &ub)) == LW_OK &&
        (st = o->buffer_write(c->gpu.ctx, in, 0, logits, (uint64_t)n * 4)) == LW_OK &&
        (st = o->buffer_write(c->gpu.ctx, ub, 0, slots, sizeof slots)) == LW_OK &&
        (st = lw__gpu_topk_pipeline(&c->gpu, &c->cache, NULL, &v, false, &c->info, &p1, c->err)) == LW_OK)
        st = sample ? lw__gpu_sample_pipeline(&c->gpu, &c->cache, NULL, &v2, &c->info, &p2, c->err)
                    : lw__gpu_topk_pipeline(&c->gpu, &c->cache, NULL, &v, true, &c->info, &p2, c->err);
    free(logits);
    if (st != LW_OK) return st;
    const lw_gpu_bind b1[3] = {{in, 0, 0}, {scratch, 0, 0}, {ub, 0, SAMPLE_SLOT}};
    const lw_gpu_bind b2[3] = {{scratch, 0, 0}, {res, 0, 0}, {ub, 0, SAMPLE_SLOT}};
    if ((st = o->bind_group_create(c->gpu.ctx, p1, b1, 3, &g1)) != LW_OK ||
        (st = o->bind_group_create(c->gpu.ctx, p2, b2, 3, &g2)) != LW_OK)
        return lw__errorf(c->err, st, "bind group: %s", o->error(c->gpu.ctx) ? o->error(c->gpu.ctx) : "");
    for (int r = 0; r < reps; r++) {
        o->dispatch(c->gpu.ctx, p1, g1, 0, pl.grid1[0], pl.grid1[1], pl.grid1[2]);
        o->dispatch(c->gpu.ctx, p2, g2, SAMPLE_SLOT, pl.grid2[0], pl.grid2[1], pl.grid2[2]);
    }
    st = o->submit(c->gpu.ctx);
    if (st == LW_OK) st = o->read(c->gpu.ctx, res, 0, c->gpu_pairs, 8);
    c->n_draws = 1;
    return st;
}
