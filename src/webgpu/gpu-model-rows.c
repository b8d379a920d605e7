/* The token embedding table from a row store on the WebGPU engine (ARCHITECTURE.md invariant 7,
 * lw__gpu_model_params.rows_embd): only n_slots of its rows live on the GPU, in a slots buffer in the table's
 * own format, with a GPU id -> slot table that the gather (get-rows.wgsl ROW_MAP) reads through, mirrored
 * from the CPU row cache's map (src/rows/, a cache without bytes of its own). A miss brings the row from the
 * model's byte source at its offset in the GGUF (a file of fixed-size rows already): streamed by the host
 * (buffer_write_host; the bytes never enter the wasm heap) or, without a host source (native tests), read
 * into one row of memory and written. Both are queue-ordered writes: a host stream lands asynchronously, so
 * the host loads a step's rows (lw__gpu_model_rows_load), awaits them, and only then records the step.
 * Chained steps (the GPU-resident loop) gather an id the host has not seen yet: the host checks it afterwards
 * (lw__gpu_model_rows_check) and undoes the steps that read a row that was not resident. */
#include "rows/rows.h"
#include "webgpu/gpu-model-impl.h"

#include <stdio.h>
#include <string.h>

/* The load hook of the mirror: the row into its slot, and (but while warming, which writes the whole map
 * afterwards) the map's two changed entries. The first failure is kept: the GPU then lacks a row that the
 * map claims, so every later step is refused. */
static void on_load(void *user, uint32_t slot, uint32_t id, uint32_t evicted, const void *row, size_t rb) {
    lw__gpu_model *g = user;
    gm_rows *r = &g->rows;
    (void)row;
    if (r->load_st != LW_OK) return;
    const lw_gpu_ops *o = g->inner.ops;
    const uint64_t dst = (uint64_t)slot * r->row_bytes, src = r->src_off + (uint64_t)id * r->row_bytes;
    lw_status st;
    if (g->p.host_source) {
        st = o->buffer_write_host
                 ? o->buffer_write_host(g->inner.ctx, r->slots, dst, g->p.host_source, src, rb)
                 : LW_ERR_UNSUPPORTED;
    } else {
        const int64_t gi = lw_gguf_find_tensor(g->m->gguf, "token_embd.weight");
        st = gi < 0 ? LW_ERR_NOT_FOUND
                    : lw_gguf_read_tensor(g->m->gguf, gi, (uint64_t)id * r->row_bytes, r->row_buf, rb);
        if (st == LW_OK) st = o->buffer_write(g->inner.ctx, r->slots, dst, r->row_buf, rb);
    }
    if (st == LW_OK && !r->warming) {
        const uint32_t none = LW__ROWS_NONE;
        st = o->buffer_write(g->inner.ctx, r->map, (uint64_t)id * 4, &slot, 4);
        if (st == LW_OK && evicted != LW__ROWS_NONE)
            st = o->buffer_write(g->inner.ctx, r->map, (uint64_t)evicted * 4, &none, 4);
    }
    if (st != LW_OK) {
        r->load_st = st;
        lw__errorf(g->err, st, "row store: loading row %u of token_embd failed", id);
    }
}

/* Why the table cannot be served (the graph's view): tied output projection, rows that are not whole words,
 * no gather of it. Returns the table tensor, or -1 with why. */
static int32_t find_table(lw__gpu_model *g, char *why, size_t cap) {
    const lw__graph *gr = &g->graph;
    const lw__wt *e = &g->m->tok_embd;
    int32_t table = -1;
    for (int32_t t = 0; t < gr->n_t && table < 0; t++)
        if (gr->t[t].kind == LW_T_WEIGHT && gr->t[t].offset == e->file_off && gr->t[t].type == e->type &&
            gr->t[t].ne1 == e->ne1)
            table = t;
    if (table < 0) {
        snprintf(why, cap, "the graph does not read token_embd");
        return -1;
    }
    for (int32_t i = 0; i < gr->n_nodes; i++) {
        const lw__node *nd = &gr->nodes[i];
        for (int k = 0; k < 3; k++) {
            const int32_t s = nd->src[k];
            if (s < 0 || gr->t[s].kind != LW_T_WEIGHT || gr->t[s].offset != e->file_off) continue;
            if (nd->op != LW_OP_GET_ROWS || k != 0 || s != table) {
                snprintf(
                    why, cap,
                    "token_embd is also read by %s (tied embeddings: the output projection reads every row)",
                    lw__op_name((lw__op)nd->op));
                return -1;
            }
        }
    }
    if (g->loc[table].joined) {
        snprintf(why, cap, "token_embd is part of a fused weight");
        return -1;
    }
    if (gr->t[table].row_bytes % 4) {
        snprintf(why, cap, "a row of %zu bytes is not whole 32-bit words (GPU writes are)",
                 gr->t[table].row_bytes);
        return -1;
    }
    return table;
}

lw_status lw__gm_plan_rows(lw__gpu_model *g) {
    gm_rows *r = &g->rows;
    r->table = -1;
    r->status = LW_OK;
    r->msg[0] = 0;
    const uint32_t asked = g->p.rows_embd, n_vocab = g->m->hp.n_vocab;
    if (asked == 0) return LW_OK;
    if (asked >= n_vocab) {
        snprintf(r->msg, sizeof r->msg,
                 "token_embd: %u rows asked for hold the whole table of %u: resident, no row store", asked,
                 n_vocab);
        return LW_OK;
    }
    char why[LW_ERRMSG_SIZE];
    const int32_t table = find_table(g, why, sizeof why);
    if (table < 0) {
        r->status = LW_ERR_UNSUPPORTED;
        snprintf(r->msg, sizeof r->msg, "row store not used, token_embd resident: %.200s", why);
        return LW_OK;
    }
    const lw__tensor *w = &g->graph.t[table];
    const uint64_t rb = w->row_bytes, cap = lw__gm_bind_max(&g->info);
    uint32_t n_slots = asked;
    char clip[96] = "";
    if ((uint64_t)n_slots * rb > cap) { /* the slots are one binding */
        n_slots = (uint32_t)(cap / rb);
        snprintf(clip, sizeof clip, " (%u asked: one binding holds %u)", asked, n_slots);
    }
    lw_status st = lw__rowcache_create_mirror(&g->alloc, n_vocab, rb, n_slots, on_load, g, &r->cache, g->err);
    if (st != LW_OK) return st;
    r->table = table;
    g->loc[table].piece0 = -1; /* no weight piece: matches no other tensor's pieces */
    g->loc[table].n_pieces = 0;
    g->loc[table].colour = -1;
    r->n_rows = n_vocab;
    r->n_slots = n_slots;
    r->row_bytes = rb;
    r->src_off = w->offset;
    r->step = n_slots < g->n_batch ? n_slots : g->n_batch;
    if (!g->p.host_source && !(r->row_buf = lw__malloc(&g->alloc, (size_t)rb)))
        return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    uint64_t map_bytes;
    if (!lw__mul_u64(n_vocab, 4, &map_bytes)) return lw__errorf(g->err, LW_ERR_OVERFLOW, "row map overflows");
    if ((st = lw__gm_new_buffer(g, (uint64_t)n_slots * rb, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST,
                                "token_embd slots", &r->slots)) != LW_OK ||
        (st = lw__gm_new_buffer(g, map_bytes, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, "token_embd map",
                                &r->map)) != LW_OK)
        return st;
    snprintf(
        r->msg, sizeof r->msg,
        "token_embd: %u of %u rows on the GPU%s (%llu of %llu bytes), read from the model file on a miss",
        n_slots, n_vocab, clip, (unsigned long long)((uint64_t)n_slots * rb),
        (unsigned long long)((uint64_t)n_vocab * rb));
    return LW_OK;
}

lw_status lw__gm_rows_warm(lw__gpu_model *g) {
    gm_rows *r = &g->rows;
    if (!r->cache) return LW_OK;
    const int32_t want = g->p.rows_warm;
    if (want >= 0) {
        r->warming = true; /* the map is written whole below */
        lw_status st = lw__rowcache_warm(r->cache, 0, want == 0 ? r->n_slots : (uint32_t)want);
        r->warming = false;
        if (st != LW_OK)
            return lw__errorf(g->err, st, "row store: warming: %s", lw__rowcache_error(r->cache));
        if (r->load_st != LW_OK) return r->load_st;
    }
    lw_status st = g->inner.ops->buffer_write(g->inner.ctx, r->map, 0, lw__rowcache_id_slots(r->cache),
                                              (uint64_t)r->n_rows * 4);
    return st == LW_OK ? LW_OK : lw__errorf(g->err, st, "row store: writing the map failed");
}

void lw__gm_rows_free(lw__gpu_model *g) {
    lw__rowcache_free(g->rows.cache);
    lw__free(&g->alloc, g->rows.row_buf);
    g->rows.cache = NULL;
    g->rows.row_buf = NULL;
}

lw_status lw__gm_rows_ready(lw__gpu_model *g, const int32_t *tokens, int32_t n) {
    gm_rows *r = &g->rows;
    if (!r->cache) return LW_OK;
    if (r->load_st != LW_OK)
        return lw__errorf(g->err, r->load_st, "row store: an earlier row load failed; the model is unusable");
    if ((uint32_t)n > r->step)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "row store: a step of %d tokens exceeds %u", n,
                          r->step);
    if (!g->p.host_source) { /* loads are synchronous writes: look up here */
        lw_status st = lw__rowcache_lookup(r->cache, tokens, (size_t)n, NULL);
        if (st != LW_OK) return lw__errorf(g->err, st, "row store: %s", lw__rowcache_error(r->cache));
        return r->load_st;
    }
    const uint32_t *map = lw__rowcache_id_slots(r->cache); /* host streams: loaded and awaited before */
    for (int32_t i = 0; i < n; i++)
        if (map[tokens[i]] == LW__ROWS_NONE)
            return lw__errorf(
                g->err, LW_ERR_INVALID_ARG,
                "row store: the row of token %d is not resident (lw__gpu_model_rows_load, then await)",
                tokens[i]);
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * API (gpu-model.h)
 * ------------------------------------------------------------------------------------------------------- */

uint32_t lw__gpu_model_rows_step(const lw__gpu_model *g) {
    return g && g->rows.cache ? g->rows.step : 0;
}

lw_status lw__gpu_model_rows_load(lw__gpu_model *g, const int32_t *tokens, int32_t n, uint32_t *loads) {
    if (loads) *loads = 0;
    if (!g || (!tokens && n) || n < 0) return LW_ERR_INVALID_ARG;
    gm_rows *r = &g->rows;
    if (!r->cache) return LW_OK;
    if (r->load_st != LW_OK) return lw__errorf(g->err, r->load_st, "row store: an earlier row load failed");
    if ((uint32_t)n > r->step)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "row store: %d tokens exceed a step of %u", n, r->step);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= r->n_rows)
            return lw__errorf(g->err, LW_ERR_INVALID_ARG, "token %d at %d is outside the vocabulary (%u)",
                              tokens[i], i, r->n_rows);
    lw__rowcache_stats before, after;
    lw__rowcache_get_stats(r->cache, &before);
    lw_status st = lw__rowcache_lookup(r->cache, tokens, (size_t)n, NULL);
    if (st != LW_OK) return lw__errorf(g->err, st, "row store: %s", lw__rowcache_error(r->cache));
    lw__rowcache_get_stats(r->cache, &after);
    if (loads) *loads = (uint32_t)(after.misses - before.misses);
    return r->load_st;
}

int lw__gpu_model_rows_check(lw__gpu_model *g, int32_t id) {
    if (!g || !g->rows.cache) return 1;
    if (id >= 0 && lw__rowcache_touch_resident(g->rows.cache, (uint32_t)id)) return 1;
    g->rows.rewinds++;
    return 0;
}

lw_status lw__gpu_model_rows_status(const lw__gpu_model *g, const char **message) {
    if (message) *message = g ? g->rows.msg : "no model";
    return g ? g->rows.status : LW_ERR_INVALID_ARG;
}

lw_status lw__gpu_model_rows_stats(const lw__gpu_model *g, lw_rows_stats *out, uint64_t *rewinds) {
    if (!g || !out) return LW_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (rewinds) *rewinds = g->rows.rewinds;
    if (!g->rows.cache) return LW_OK;
    lw__rowcache_stats s;
    lw__rowcache_get_stats(g->rows.cache, &s);
    out->active = 1;
    out->n_rows = g->rows.n_rows;
    out->n_slots = g->rows.n_slots;
    out->row_bytes = g->rows.row_bytes;
    out->lookups = s.lookups;
    out->hits = s.hits;
    out->misses = s.misses;
    out->warm_loads = s.warm_loads;
    out->evictions = s.evictions;
    out->bytes_read = s.bytes_read;
    return LW_OK;
}
