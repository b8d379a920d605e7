/* Sampling on the GPU for the model runner (gpu-model.h LW_GPU_OUT_SAMPLE): top-k pass 1 over the logits,
 * then pass 2 with the draw (topk.wgsl SAMPLE=1), so a sampled step reads back the 4-byte token id as a
 * greedy one. Everything is created at load; a draw only takes the next number of the host generator (the
 * CPU sampler's, src/sample) into the pass-2 parameter block. Also the plan's kernel variants as JSON (what
 * tune overrides changed). */
#include "webgpu/gpu-model-impl.h"
#include "sample/sample.h"

#include <stdio.h>
#include <string.h>

/* The sampling state of a GPU model. */
typedef struct gm_sampling {
    gm_call pass[2];              /* top-k pass 1 into scratch; pass 2 + draw into g->result         */
    lw_gpu_buffer scratch;        /* pass 1's candidates, sized for k_max                             */
    uint32_t k_max;               /* largest k the scratch and one pass-2 merge take                  */
    uint32_t k;                   /* the top-k in effect                                              */
    lw__gpu_topk_plan_out plan;   /* top-k plan for k (pass 2's block is inside params)               */
    lw__gpu_sample_params params; /* pass 2's block; u is rewritten per draw                          */
    uint64_t rng[4];              /* the CPU sampler's generator, seeded by lw__gpu_model_set_sampling */
    /* a grammar's mask (lw__gpu_model_set_mask): pass 1 over the allowed ids only, for the argmax (into
     * g->topk_scratch, then g->argmax[1]) and the draw (into scratch, then pass[1]) */
    lw_gpu_buffer mask;  /* ceil(n_vocab / 32) words, written by the host per step           */
    uint32_t mask_words; /* its words                                                         */
    gm_call masked[2];   /* masked pass 1: [0] for the argmax, [1] for the draw               */
    bool mask_armed;     /* the next step with an id applies the mask                         */
} gm_sampling;

lw_status lw__gm_prepare_sample(lw__gpu_model *g) {
    const lw_gpu *gpu = &g->gpu;
    const uint64_t n_vocab = g->m->hp.n_vocab;
    lw_status st;
    gm_sampling *s = lw__calloc(&g->alloc, 1, sizeof *s);
    if (!s) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    g->samp = s;
    lw__gpu_topk_variant v = lw__gpu_topk_default(&g->info);
    s->k_max = lw__gpu_topk_max_k(&v, n_vocab);
    lw__gpu_topk_plan_out widest;
    if ((st = lw__gpu_topk_plan(&g->info, &v, n_vocab, s->k_max, 0, 0, 0, &widest, g->err)) != LW_OK)
        return st;
    s->pass[0].v.topk = v;
    s->pass[1].v.topk =
        lw__gpu_sample_variant(&v, widest.scratch_pairs); /* one workgroup: as small as fits */
    if ((st = lw__gm_new_buffer(g, (uint64_t)widest.scratch_pairs * 8 + 16,
                                LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, "sampling scratch",
                                &s->scratch)) != LW_OK)
        return st;
    if ((st = lw__gpu_topk_pipeline(gpu, &g->cache, &g->alloc, &v, false, &g->info, &s->pass[0].pipe,
                                    g->err)) != LW_OK ||
        (st = lw__gpu_sample_pipeline(gpu, &g->cache, &g->alloc, &s->pass[1].v.topk, &g->info,
                                      &s->pass[1].pipe, g->err)) != LW_OK)
        return st;
    lw_gpu_bind b1[3] = {lw__gm_act(g, g->logits), lw__gm_whole(s->scratch), lw__gm_params(g)};
    lw_gpu_bind b2[3] = {lw__gm_whole(s->scratch), lw__gm_whole(g->result), lw__gm_params(g)};
    if ((st = lw__gm_add_call(g, &s->pass[0], b1, 3, true)) != LW_OK ||
        (st = lw__gm_add_call(g, &s->pass[1], b2, 3, true)) != LW_OK)
        return st;
    /* the grammar mask's buffer and passes: made here so a constrained decode creates nothing */
    s->mask_words = (uint32_t)((n_vocab + 31) / 32);
    if ((st = lw__gm_new_buffer(g, (uint64_t)s->mask_words * 4, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST,
                                "grammar mask", &s->mask)) != LW_OK)
        return st;
    s->masked[0] = g->argmax[0];
    s->masked[1] = s->pass[0];
    if ((st = lw__gpu_topk_mask_pipeline(gpu, &g->cache, &g->alloc, &g->argmax[0].v.topk, &g->info,
                                         &s->masked[0].pipe, g->err)) != LW_OK ||
        (st = lw__gpu_topk_mask_pipeline(gpu, &g->cache, &g->alloc, &v, &g->info, &s->masked[1].pipe,
                                         g->err)) != LW_OK)
        return st;
    lw_gpu_bind m1[4] = {lw__gm_act(g, g->logits), lw__gm_whole(g->topk_scratch), lw__gm_params(g),
                         lw__gm_whole(s->mask)};
    lw_gpu_bind m2[4] = {lw__gm_act(g, g->logits), lw__gm_whole(s->scratch), lw__gm_params(g),
                         lw__gm_whole(s->mask)};
    if ((st = lw__gm_add_call(g, &s->masked[0], m1, 4, true)) != LW_OK ||
        (st = lw__gm_add_call(g, &s->masked[1], m2, 4, true)) != LW_OK)
        return st;
    lw_sampler_params sp = lw_sampler_default_params();
    sp.penalty_last_n = 0; /* penalties are the CPU sampler's only */
    return lw__gpu_model_set_sampling(g, &sp, NULL);
}

void lw__gm_free_sample(lw__gpu_model *g) {
    lw__free(&g->alloc, g->samp);
    g->samp = NULL;
}

lw_status lw__gpu_model_set_sampling(lw__gpu_model *g, const lw_sampler_params *sp, uint32_t *k_used) {
    if (!g || !g->samp || !sp) return LW_ERR_INVALID_ARG;
    gm_sampling *s = g->samp;
    const uint32_t k = sp->top_k > 0 && (uint32_t)sp->top_k < s->k_max ? (uint32_t)sp->top_k : s->k_max;
    lw__gpu_topk_plan_out plan;
    lw__gpu_sample_params params;
    lw_status st =
        lw__gpu_topk_plan(&g->info, &s->pass[0].v.topk, g->m->hp.n_vocab, k, 0, 0, 0, &plan, g->err);
    if (st == LW_OK) st = lw__gpu_sample_setup(&plan.pass2, sp, &params, g->err);
    if (st != LW_OK) return st; /* the previous parameters stay */
    s->k = k;
    s->plan = plan;
    s->params = params;
    lw__sampler_rng_seed(s->rng, sp->seed);
    if (k_used) *k_used = k;
    return LW_OK;
}

void lw__gm_record_sample(lw__gpu_model *g) {
    gm_sampling *s = g->samp;
    if (s->params.flags & LW_GPU_SAMPLE_GREEDY) { /* as the CPU sampler: no draw, the argmax */
        lw__gm_record_argmax(g);
        return;
    }
    s->params.u = lw__gpu_sample_u(lw__sampler_rng_uniform(s->rng));
    lw__gm_emit(g, &s->pass[0], &s->plan.pass1, sizeof s->plan.pass1, s->plan.grid1);
    lw__gm_emit(g, &s->pass[1], &s->params, sizeof s->params, s->plan.grid2);
}

lw_status lw__gpu_model_set_mask(lw__gpu_model *g, const uint32_t *bits, size_t n_words) {
    if (!g || !g->samp || !bits) return LW_ERR_INVALID_ARG;
    gm_sampling *s = g->samp;
    if (n_words != s->mask_words)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar mask: %zu words for %u tokens (%u words)",
                          n_words, (unsigned)g->m->hp.n_vocab, s->mask_words);
    lw_status st = g->inner.ops->buffer_write(g->inner.ctx, s->mask, 0, bits, (uint64_t)n_words * 4);
    if (st != LW_OK) return lw__errorf(g->err, st, "writing the grammar mask failed");
    s->mask_armed = true;
    return LW_OK;
}

bool lw__gm_mask_armed(const lw__gpu_model *g) {
    return g->samp && g->samp->mask_armed;
}

void lw__gm_record_masked(lw__gpu_model *g, lw__gpu_out out) {
    gm_sampling *s = g->samp;
    s->mask_armed = false;
    g->cnt.masked++;
    if (out != LW_GPU_OUT_SAMPLE || (s->params.flags & LW_GPU_SAMPLE_GREEDY)) {
        /* the argmax's plan and pass 2, over the allowed ids' candidates */
        lw__gm_emit(g, &s->masked[0], &g->topk.pass1, sizeof g->topk.pass1, g->topk.grid1);
        lw__gm_emit(g, &g->argmax[1], &g->topk.pass2, sizeof g->topk.pass2, g->topk.grid2);
        return;
    }
    s->params.u = lw__gpu_sample_u(lw__sampler_rng_uniform(s->rng));
    lw__gm_emit(g, &s->masked[1], &s->plan.pass1, sizeof s->plan.pass1, s->plan.grid1);
    lw__gm_emit(g, &s->pass[1], &s->params, sizeof s->params, s->plan.grid2);
}

void lw__gm_sample_rng_get(const lw__gpu_model *g, uint64_t st[4]) {
    for (int i = 0; i < 4; i++) st[i] = g->samp ? g->samp->rng[i] : 0;
}

void lw__gm_sample_rng_set(lw__gpu_model *g, const uint64_t st[4]) {
    if (g->samp) memcpy(g->samp->rng, st, sizeof g->samp->rng);
}

/* ---------------------------------------------------------------------------------------------------------
 * The plan's kernel variants
 * ------------------------------------------------------------------------------------------------------- */

/* Appends s to dst (cap bytes) at *n; false when it does not fit. */
static bool put(char *dst, size_t cap, size_t *n, const char *s) {
    size_t l = strlen(s);
    if (*n + l + 1 > cap) return false;
    memcpy(dst + *n, s, l + 1);
    *n += l;
    return true;
}

int lw__gpu_model_variants_json(const lw__gpu_model *g, char *dst, size_t cap) {
    size_t n = 0;
    char item[160];
    bool ok = cap > 0 && put(dst, cap, &n, "{");
    for (int fam = 0; fam < 2 && ok; fam++) {
        ok = put(dst, cap, &n, fam ? ",\"matmat\":{" : "\"matvec\":{");
        bool seen[LW_TYPE_COUNT] = {false}, first = true;
        for (int32_t i = 0; i < g->graph.n_nodes && ok; i++) {
            const lw__node *nd = &g->graph.nodes[i];
            const gm_node *gn = &g->nodes[i];
            if (nd->op != LW_OP_MUL_MAT || gn->n_calls == 0 || (fam && !gn->batched)) continue;
            const gm_call *c = &g->calls[gn->call0 + (gn->q8 ? 1 : 0) + fam];
            const uint32_t type = fam ? c->v.mm.type : c->v.mv.type;
            const lw_type_info *tt = lw_type_get(type);
            if (type >= LW_TYPE_COUNT || seen[type] || !tt) continue;
            seen[type] = true;
            if (fam)
                snprintf(item, sizeof item, "%s\"%s\":\"tm%u tn%u tk%u rm%u rn%u f16 %d idot %d smx %d\"",
                         first ? "" : ",", tt->name, c->v.mm.tm, c->v.mm.tn, c->v.mm.tk, c->v.mm.rm,
                         c->v.mm.rn, c->v.mm.f16 ? 1 : 0, c->v.mm.idot ? 1 : 0, c->v.mm.smx ? 1 : 0);
            else
                snprintf(
                    item, sizeof item,
                    "%s\"%s\":\"wg%u rows%u blocks%d f16 %d sg %d stage %u actq %u exact %d idot %d pair %d "
                    "oct %d\"",
                    first ? "" : ",", tt->name, c->v.mv.wg_size, c->v.mv.rows, c->v.mv.blocks ? 1 : 0,
                    c->v.mv.f16 ? 1 : 0, c->v.mv.subgroups ? 1 : 0, c->v.mv.stage, c->v.mv.actq,
                    c->v.mv.exact ? 1 : 0, c->v.mv.idot ? 1 : 0, c->v.mv.pair ? 1 : 0, c->v.mv.oct ? 1 : 0);
            first = false;
            ok = put(dst, cap, &n, item);
        }
        ok = ok && put(dst, cap, &n, "}");
    }
    ok = ok && put(dst, cap, &n, "}");
    return ok ? (int)n : -1;
}
