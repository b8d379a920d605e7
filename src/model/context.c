/* Contexts: one allocation holding the KV cache, the planned activation arena (logits included) and the
 * kernels' scratch; a thread pool; and the graph built once for the largest batch. lw_decode only fills
 * the per-step fields and runs the graph: it allocates nothing. */
#include "cpu/engine-ops.h"
#include "model/embed.h"
#include "model/model.h"
#include "rows/rows.h"
#include "sample/sample.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define ARENA_ALIGN 64 /* every planned region starts on a cache line */

struct lw_context {
    lw_allocator alloc;       /* from the model                                         */
    char err[LW_ERRMSG_SIZE]; /* last error message                                     */
    lw_model *model;          /* not owned                                              */
    uint32_t n_ctx;           /* KV cells                                               */
    uint32_t n_batch;         /* most tokens per step                                   */
    uint32_t n_past;          /* cells in use                                           */
    int32_t n_outputs;        /* output rows of the last decode                         */
    lw__graph graph;          /* built and planned once                                 */
    int32_t logits;           /* index of the logits tensor in graph                    */
    int32_t embd;             /* embeddings contexts: index of the hidden-state tensor
                                 (the final norm's output); -1: a logits context        */
    lw__pool *pool;           /* threads                                                */
    lw__exec ex;              /* per-step state handed to the kernels                   */
    void **kv;                /* 2 * n_layer pointers: K caches then V caches (NULL for
                                 blocks that read another block's cache)                 */
    int64_t *kv_rows;         /* n_layer cache row lengths (elements)                   */
    int32_t *out_rows;        /* n_batch row indices (0, 1, ...)                        */
    void *mem;                /* the one big allocation (as returned)                   */
    uint64_t mem_bytes;       /* its size                                               */
    lw__rowcache *rows;       /* token_embd's row cache when the model's row store serves
                                 it (src/rows/), else NULL                              */
    uint8_t *rows_stage;      /* n_batch rows gathered from it for a step (in mem)      */
    uint32_t *rows_slots;     /* n_batch slots of a lookup (shared by the tables)       */
    lw__rowcache *pl_rows;    /* per_layer_token_embd's row cache, the same way, or NULL */
    uint8_t *pl_stage;        /* n_batch rows gathered from it for a step (in mem)      */
    lw__rowcache **exp_rows;  /* n_layer * 3 experts' caches (model's exp_rows order;
                                 NULL entries: resident), or NULL                       */
    lw_status rows_error;     /* an expert lookup's failure in the step just run        */
};

lw_context_params lw_context_default_params(void) {
    lw_context_params p = {0};
    p.n_ctx = 0;
    p.n_batch = 512;
    p.n_threads = 0;
    p.type_k = LW_TYPE_F16;
    p.type_v = LW_TYPE_F16;
    p.flash_attn = 1;
    return p;
}

/* ---------------------------------------------------------------------------------------------------------
 * Creation
 * ------------------------------------------------------------------------------------------------------- */

/* Reserves size bytes at *top (aligned), returning the offset. */
static int reserve(uint64_t *top, uint64_t size, uint64_t *off) {
    if (!lw__align_up_u64(*top, ARENA_ALIGN, off)) return 0;
    return lw__add_u64(*off, size, top);
}

/* The row cache of a table the model's row store serves (rf, bound as the weight whose data is marker): its
 * slots (the model's rows_embd / rows_per_layer), warmed with the first ids, and the staging rows' size for
 * the one allocation. The graph's table must have the row file's row size (it was bound from the same
 * tensor). */
static lw_status rows_create(lw_context *c, lw__rowfile *rf, const void *marker, uint32_t asked,
                             lw__rowcache **rc, uint64_t *stage_bytes) {
    lw_model *m = c->model;
    const lw__rows_manifest *man = lw__rowfile_manifest(rf);
    int found = 0;
    for (int32_t i = 0; i < c->graph.n_t; i++)
        if (c->graph.t[i].kind == LW_T_WEIGHT && c->graph.t[i].data == marker) {
            if (c->graph.t[i].row_bytes != man->row_bytes || c->graph.t[i].ne1 != (int64_t)man->n_rows)
                return lw__errorf(c->err, LW_ERR_BAD_DIMS, "row store: the graph's %s does not match its row file",
                                  c->graph.t[i].name);
            found = 1;
        }
    if (!found)
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "row store: the graph does not read %s", man->name);
    const uint32_t n_slots = asked < man->n_rows ? asked : (uint32_t)man->n_rows;
    lw_status st = lw__rowcache_create(&c->alloc, rf, n_slots, NULL, NULL, rc, c->err);
    if (st != LW_OK) return st;
    if (!c->rows_slots && !(c->rows_slots = lw__calloc(&c->alloc, c->n_batch, sizeof(uint32_t))))
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    if (!lw__mul_u64(man->row_bytes, c->n_batch, stage_bytes))
        return lw__errorf(c->err, LW_ERR_OVERFLOW, "row store: staging rows overflow");
    if (m->rows_warm >= 0) {
        const uint32_t warm = m->rows_warm == 0 ? n_slots : (uint32_t)m->rows_warm;
        if ((st = lw__rowcache_warm(*rc, 0, warm)) != LW_OK)
            return lw__errorf(c->err, st, "row store: warming: %s", lw__rowcache_error(*rc));
    }
    return LW_OK;
}

/* Gathers the rows of tokens[0..n) from rc into stage, in lookups of at most the cache's slots so every
 * lookup's rows are resident together. */
static lw_status rows_gather(lw_context *c, lw__rowcache *rc, uint8_t *stage, const int32_t *tokens,
                             int32_t n) {
    const uint32_t n_slots = lw__rowcache_n_slots(rc);
    const size_t rb = (size_t)lw__rowcache_row_bytes(rc);
    for (int32_t i = 0; i < n;) {
        const int32_t k = (uint32_t)(n - i) < n_slots ? n - i : (int32_t)n_slots;
        lw_status st = lw__rowcache_lookup(rc, tokens + i, (size_t)k, c->rows_slots);
        if (st != LW_OK) return lw__errorf(c->err, st, "row store: %s", lw__rowcache_error(rc));
        for (int32_t j = 0; j < k; j++)
            memcpy(stage + (size_t)(i + j) * rb, lw__rowcache_row(rc, c->rows_slots[j]), rb);
        i += k;
    }
    return LW_OK;
}

/* The experts' caches: one per row file, the model's rows_experts slots each (the row file's row is one
 * expert's slab of the graph's weight, checked here), warmed with experts 0.. as rows_warm says. */
static lw_status experts_create(lw_context *c) {
    lw_model *m = c->model;
    const uint32_t n = m->hp.n_layer * 3u;
    if (!(c->exp_rows = lw__calloc(&c->alloc, n, sizeof(*c->exp_rows))))
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        if (!m->exp_rows[i]) continue;
        const lw__rows_manifest *man = lw__rowfile_manifest(m->exp_rows[i]);
        int found = 0;
        for (int32_t j = 0; j < c->graph.n_t; j++) {
            const lw__tensor *t = &c->graph.t[j];
            if (t->kind != LW_T_WEIGHT || t->data != &m->exp_tokens[i]) continue;
            uint64_t slab;
            if (t->ne1 % (int64_t)man->n_rows ||
                !lw__mul_u64((uint64_t)(t->ne1 / (int64_t)man->n_rows), t->row_bytes, &slab) ||
                slab != man->row_bytes)
                return lw__errorf(c->err, LW_ERR_BAD_DIMS,
                                  "row store: the graph's %s does not match its row file", t->name);
            found = 1;
        }
        if (!found) continue; /* a tensor this graph does not read */
        const uint32_t n_slots = m->rows_experts < man->n_rows ? m->rows_experts : (uint32_t)man->n_rows;
        lw_status st =
            lw__rowcache_create(&c->alloc, m->exp_rows[i], n_slots, NULL, NULL, &c->exp_rows[i], c->err);
        if (st != LW_OK) return st;
        if (m->rows_warm >= 0) {
            const uint32_t warm = m->rows_warm == 0 ? n_slots : (uint32_t)m->rows_warm;
            if ((st = lw__rowcache_warm(c->exp_rows[i], 0, warm)) != LW_OK)
                return lw__errorf(c->err, st, "row store: warming experts: %s",
                                  lw__rowcache_error(c->exp_rows[i]));
        }
    }
    return LW_OK;
}

/* Adds a cache's counters to out (n_rows: its table's rows). */
static void rows_add_stats(const lw__rowcache *rc, uint64_t n_rows, lw_rows_stats *out) {
    lw__rowcache_stats s;
    lw__rowcache_get_stats(rc, &s);
    out->active = 1;
    out->n_rows += (uint32_t)n_rows;
    out->n_slots += lw__rowcache_n_slots(rc);
    out->lookups += s.lookups;
    out->hits += s.hits;
    out->misses += s.misses;
    out->warm_loads += s.warm_loads;
    out->evictions += s.evictions;
    out->bytes_read += s.bytes_read;
}

lw_status lw_context_rows_table_stats(const lw_context *c, lw_rows_table table, lw_rows_stats *out) {
    if (!c || !out || (unsigned)table >= LW_ROWS_N_TABLES) return LW_ERR_INVALID_ARG;
    memset(out, 0, sizeof(*out));
    const lw__rowcache *rc = table == LW_ROWS_TOKEN_EMBD  ? c->rows
                             : table == LW_ROWS_PER_LAYER ? c->pl_rows
                                                          : NULL;
    if (table == LW_ROWS_EXPERTS && c->exp_rows) {
        uint64_t bytes = 0, n = 0;
        for (uint32_t i = 0; i < c->model->hp.n_layer * 3u; i++)
            if (c->exp_rows[i]) {
                rows_add_stats(c->exp_rows[i], lw__rowfile_manifest(c->model->exp_rows[i])->n_rows, out);
                bytes += lw__rowcache_row_bytes(c->exp_rows[i]);
                n++;
            }
        out->row_bytes = n ? bytes / n : 0;
    }
    if (rc) {
        rows_add_stats(
            rc,
            lw__rowfile_manifest(table == LW_ROWS_TOKEN_EMBD ? c->model->embd_rows : c->model->pl_rows)
                ->n_rows,
            out);
        out->row_bytes = lw__rowcache_row_bytes(rc);
    }
    return LW_OK;
}

lw_status lw_context_rows_stats(const lw_context *c, lw_rows_stats *out) {
    return lw_context_rows_table_stats(c, LW_ROWS_TOKEN_EMBD, out);
}

static lw_status create(lw_context *c, const lw_context_params *p) {
    lw_model *m = c->model;
    const lw__hparams *hp = &m->hp;
    const bool kv_quant = p->type_k == LW_TYPE_Q8_0 || p->type_k == LW_TYPE_Q4_0;
    if (p->type_k != p->type_v || (p->type_k != LW_TYPE_F16 && p->type_k != LW_TYPE_F32 && !kv_quant))
        return lw__errorf(c->err, LW_ERR_UNSUPPORTED,
                          "KV cache types must both be f16, f32, q8_0 or q4_0 (K %u, V %u)", p->type_k,
                          p->type_v);
    if (kv_quant && !p->flash_attn) /* as llama.cpp: the classic path reads V by columns */
        return lw__errorf(c->err, LW_ERR_UNSUPPORTED, "a quantized KV cache needs flash attention");
    for (uint32_t l = 0; kv_quant && l < hp->n_layer; l++)
        if (m->lhp[l].head_dim % 32) /* each head's row must start on a 32-element block */
            return lw__errorf(c->err, LW_ERR_UNSUPPORTED,
                              "a quantized KV cache needs head sizes that are multiples of 32 (layer %u: %u)",
                              l, m->lhp[l].head_dim);
    c->n_ctx = p->n_ctx ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (c->n_ctx == 0 || c->n_ctx > (1u << 24))
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "bad n_ctx %u", c->n_ctx);
    c->n_batch = p->n_batch ? p->n_batch : 512;
    if (c->n_batch > c->n_ctx) c->n_batch = c->n_ctx; /* a step never holds more tokens than the cache */
    int n_threads = p->n_threads;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n < 1 ? 1 : n > 8 ? 8 : (int)n;
    }
    if (n_threads > 256) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "too many threads (%d)", n_threads);

    /* the graph, planned for the largest step */
    lw_status st =
        lw__graph_init(&c->graph, &c->alloc, 96 * (int32_t)hp->n_layer + 64, 96 * (int32_t)hp->n_layer + 64);
    if (st != LW_OK) return lw__errorf(c->err, st, "out of memory");
    if ((st = m->arch->build(m, &c->graph, &c->logits)) != LW_OK)
        return lw__errorf(c->err, st, "building the %s graph failed", m->arch->name);
    if (p->embeddings && (st = lw__embed_graph_cut(&c->graph, &c->embd)) != LW_OK)
        return lw__errorf(c->err, st, "the %s graph has no final norm to take embeddings from",
                          m->arch->name);
    if ((st = lw__graph_plan(&c->graph, c->n_batch, c->n_batch, ARENA_ALIGN)) != LW_OK)
        return lw__errorf(c->err, st, "planning the graph failed");
    size_t shared = 0, thread_floats = 0;
    if ((st = lw__cpu_scratch_needs(&c->graph, c->n_batch, c->n_ctx, &shared, &thread_floats)) != LW_OK)
        return lw__errorf(c->err, st, "%s",
                          st == LW_ERR_UNSUPPORTED ? "a weight type of this model has no CPU kernel yet"
                          : st == LW_ERR_OVERFLOW  ? "the kernels' scratch is too large"
                                                   : "the graph's expert shapes do not fit together");

    /* one allocation: [K and V caches per layer][activations][shared scratch][thread scratch]; a block that
     * reads another block's cache (gemma4's shared KV) has none, and rows follow each block's geometry */
    const int64_t kv_row = (int64_t)hp->n_head_kv * hp->n_embd_head_k;
    const lw_type_info *kti = lw_type_get(p->type_k);
    c->kv = lw__calloc(&c->alloc, 2 * (size_t)hp->n_layer, sizeof(void *));
    c->kv_rows = lw__calloc(&c->alloc, hp->n_layer, sizeof(int64_t));
    c->out_rows = lw__calloc(&c->alloc, c->n_batch, sizeof(int32_t));
    if (!c->kv || !c->kv_rows || !c->out_rows) return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory");
    uint64_t all_cache = 0, top = 0, kv_off, act_off, sh_off, th_off, th_bytes, st_off = 0, st_bytes = 0;
    uint64_t pl_off = 0, pl_bytes = 0;
    if (m->embd_rows &&
        (st = rows_create(c, m->embd_rows, &m->rows_token, m->rows_embd, &c->rows, &st_bytes)) != LW_OK)
        return st;
    if (m->pl_rows && (st = rows_create(c, m->pl_rows, &m->rows_pl_token, m->rows_per_layer, &c->pl_rows,
                                        &pl_bytes)) != LW_OK)
        return st;
    if (m->exp_rows && (st = experts_create(c)) != LW_OK) return st;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const lw__layer_hp *lh = &m->lhp[l];
        c->kv_rows[l] = (int64_t)lh->n_head_kv * lh->head_dim;
        uint64_t bytes;
        if (lh->kv_src == (int32_t)l &&
            (!lw__mul_u64((uint64_t)c->kv_rows[l] / kti->block_size * kti->type_size, c->n_ctx, &bytes) ||
             !lw__mul_u64(bytes, 2, &bytes) || !lw__add_u64(all_cache, bytes, &all_cache)))
            return lw__errorf(c->err, LW_ERR_OVERFLOW, "KV cache too large");
    }
    if (!reserve(&top, all_cache, &kv_off) || !reserve(&top, c->graph.arena_size, &act_off) ||
        !reserve(&top, shared, &sh_off) ||
        !lw__mul_u64((uint64_t)thread_floats * sizeof(float), (uint64_t)n_threads, &th_bytes) ||
        !reserve(&top, th_bytes, &th_off) || !reserve(&top, st_bytes, &st_off) ||
        !reserve(&top, pl_bytes, &pl_off) || !lw__add_u64(top, ARENA_ALIGN, &top) || top > SIZE_MAX)
        return lw__errorf(c->err, LW_ERR_OVERFLOW, "context too large");
    c->mem = lw__malloc(&c->alloc, (size_t)top);
    if (!c->mem)
        return lw__errorf(c->err, LW_ERR_NOMEM, "out of memory for a %llu-byte context",
                          (unsigned long long)top);
    c->mem_bytes = top;
    uint8_t *base = (uint8_t *)(((uintptr_t)c->mem + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    /* zero the cache once so never-written cells hold finite values */
    memset(base + kv_off, 0, (size_t)all_cache);
    size_t at = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        if (m->lhp[l].kv_src != (int32_t)l) continue;
        /* a row of whole blocks (quantized caches: head sizes are multiples of the block, checked above) */
        const size_t bytes = (size_t)c->kv_rows[l] / kti->block_size * kti->type_size * c->n_ctx;
        c->kv[l] = base + kv_off + at;
        c->kv[hp->n_layer + l] = base + kv_off + at + bytes;
        at += 2 * bytes;
    }
    /* every cache the graph touches exists and has the row its node expects */
    for (int32_t i = 0; i < c->graph.n_nodes; i++) {
        const lw__node *nd = &c->graph.nodes[i];
        const int32_t l = nd->ip[0];
        if (nd->op != LW_OP_KV_STORE && nd->op != LW_OP_ATTN) continue;
        const int64_t want =
            nd->op == LW_OP_ATTN ? (int64_t)nd->ip[2] * nd->ip[3] : c->graph.t[nd->src[0]].ne0;
        if (l < 0 || (uint32_t)l >= hp->n_layer || !c->kv[l] || c->kv_rows[l] != want)
            return lw__errorf(c->err, LW_ERR_INVALID_ARG,
                              "the graph's %s node %d does not fit block %d's cache",
                              lw__op_name((lw__op)nd->op), i, l);
    }
    lw__graph_bind(&c->graph, base + act_off);

    if ((st = lw__pool_create(&c->alloc, n_threads, &c->pool)) != LW_OK)
        return lw__errorf(c->err, st, "starting %d threads failed", n_threads);

    lw__exec *ex = &c->ex;
    ex->g = &c->graph;
    ex->kern = lw__cpu_kernels_best();
    ex->pool = c->pool;
    ex->out_rows = c->out_rows;
    ex->kv_type = p->type_k;
    ex->flash_attn = p->flash_attn != 0;
    ex->n_ctx = c->n_ctx;
    ex->kv_row = kv_row;
    ex->kv_rows = c->kv_rows;
    ex->k = c->kv;
    ex->v = c->kv + hp->n_layer;
    ex->scratch = base + sh_off;
    ex->thread_scratch = (float *)(base + th_off);
    ex->thread_floats = thread_floats;
    if (c->rows) {
        c->rows_stage = base + st_off;
        ex->rows_table[0] = &m->rows_token;
        ex->rows_stage[0] = c->rows_stage;
    }
    if (c->exp_rows) {
        ex->exp_marker = m->exp_tokens;
        ex->exp_n = hp->n_layer * 3u;
        ex->exp_caches = c->exp_rows;
    }
    ex->rows_error = &c->rows_error;
    ex->rows_error_msg = c->err;
    if (c->pl_rows) {
        c->pl_stage = base + pl_off;
        ex->rows_table[1] = &m->rows_pl_token;
        ex->rows_stage[1] = c->pl_stage;
    }
    return LW_OK;
}

lw_status lw_context_create(lw_model *m, const lw_context_params *params, lw_context **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (!m || !m->arch || !m->weights) return LW_ERR_INVALID_ARG;
    lw_context *c = lw__calloc(&m->alloc, 1, sizeof(*c));
    if (!c) return LW_ERR_NOMEM;
    c->alloc = m->alloc;
    c->model = m;
    c->embd = -1;
    *out = c;
    lw_context_params p = params ? *params : lw_context_default_params();
    return create(c, &p);
}

void lw_context_free(lw_context *c) {
    if (!c) return;
    lw__pool_free(c->pool);
    lw__graph_free(&c->graph);
    lw__free(&c->alloc, c->mem);
    lw__free(&c->alloc, c->kv);
    lw__free(&c->alloc, c->kv_rows);
    lw__free(&c->alloc, c->out_rows);
    lw__free(&c->alloc, c->rows_slots);
    lw__rowcache_free(c->rows);
    lw__rowcache_free(c->pl_rows);
    for (uint32_t i = 0; c->exp_rows && i < c->model->hp.n_layer * 3u; i++) lw__rowcache_free(c->exp_rows[i]);
    lw__free(&c->alloc, c->exp_rows);
    lw_allocator a = c->alloc;
    lw__free(&a, c);
}

const char *lw_context_error(const lw_context *c) {
    return c ? c->err : "out of memory";
}
uint32_t lw_context_n_ctx(const lw_context *c) {
    return c->n_ctx;
}
uint32_t lw_context_n_batch(const lw_context *c) {
    return c->n_batch;
}
int32_t lw_context_n_threads(const lw_context *c) {
    return lw__pool_n_threads(c->pool);
}
uint64_t lw_context_bytes(const lw_context *c) {
    return c->mem_bytes;
}
uint32_t lw_context_n_past(const lw_context *c) {
    return c->n_past;
}

lw_status lw_context_set_n_past(lw_context *c, uint32_t n_past) {
    if (n_past > c->n_past)
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "n_past %u is beyond the %u cells in use", n_past,
                          c->n_past);
    c->n_past = n_past; /* later steps overwrite the forgotten cells; attention never reads past n_past */
    c->n_outputs = 0;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw_decode(lw_context *c, const int32_t *tokens, int32_t n, int logits_all) {
    if (!c || !c->pool) return LW_ERR_INVALID_ARG;
    if (!tokens || n <= 0) return lw__errorf(c->err, LW_ERR_INVALID_ARG, "no tokens");
    if (logits_all && (uint32_t)n > c->n_batch)
        return lw__errorf(c->err, LW_ERR_INVALID_ARG, "%d tokens with all logits exceed n_batch %u", n,
                          c->n_batch);
    if ((uint64_t)c->n_past + (uint64_t)n > c->n_ctx)
        return lw__errorf(c->err, LW_ERR_TOO_LARGE, "%d tokens after %u do not fit the %u-cell context", n,
                          c->n_past, c->n_ctx);
    const int32_t n_vocab = (int32_t)c->model->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return lw__errorf(c->err, LW_ERR_INVALID_ARG, "token %d at %d is outside the vocabulary (%d)",
                              tokens[i], i, n_vocab);

    for (int32_t done = 0; done < n;) {
        int32_t step = n - done < (int32_t)c->n_batch ? n - done : (int32_t)c->n_batch;
        lw__exec *ex = &c->ex;
        if (c->rows) {
            lw_status st = rows_gather(c, c->rows, c->rows_stage, tokens + done, step);
            if (st != LW_OK) return st;
        }
        if (c->pl_rows) {
            lw_status st = rows_gather(c, c->pl_rows, c->pl_stage, tokens + done, step);
            if (st != LW_OK) return st;
        }
        ex->n_tokens = step;
        ex->tokens = tokens + done;
        ex->pos0 = (int32_t)c->n_past;
        if (logits_all) {
            ex->n_outputs = step;
            for (int32_t i = 0; i < step; i++) c->out_rows[i] = i;
        } else {
            ex->n_outputs = 1;
            c->out_rows[0] = step - 1;
        }
        c->rows_error = LW_OK;
        lw__cpu_exec(ex);
        if (c->rows_error != LW_OK) return c->rows_error; /* an expert's row could not be read (c->err) */
        c->n_past += (uint32_t)step;
        c->n_outputs = ex->n_outputs;
        done += step;
    }
    return LW_OK;
}

const float *lw_get_logits(const lw_context *c, int32_t i) {
    if (!c || c->n_outputs == 0 || c->embd >= 0) return NULL;
    if (i < 0) i += c->n_outputs;
    if (i < 0 || i >= c->n_outputs) return NULL;
    const lw__tensor *t = &c->graph.t[c->logits];
    return (const float *)((const uint8_t *)t->data + (size_t)i * t->row_bytes);
}

const float *lw_get_embeddings(const lw_context *c, int32_t i) {
    if (!c || c->n_outputs == 0 || c->embd < 0) return NULL;
    if (i < 0) i += c->n_outputs;
    if (i < 0 || i >= c->n_outputs) return NULL;
    const lw__tensor *t = &c->graph.t[c->embd];
    return (const float *)((const uint8_t *)t->data + (size_t)i * t->row_bytes);
}

int lw__context_embeddings(const lw_context *c) {
    return c && c->embd >= 0;
}

lw_model *lw_context_model(const lw_context *c) {
    return c ? c->model : NULL;
}

char *lw__context_err(lw_context *c) {
    return c->err;
}

int32_t lw_get_n_outputs(const lw_context *c) {
    return c ? c->n_outputs : 0;
}

void lw_context_set_eval_callback(lw_context *c, lw_eval_fn fn, void *user) {
    if (!c) return;
    c->ex.on_node = fn;
    c->ex.on_node_user = user;
}

int32_t lw_sample(const lw_context *c, lw_sampler *s, int32_t i) {
    const float *logits = lw_get_logits(c, i);
    if (!logits || !s) return -1;
    int32_t id = lw_sampler_sample(s, logits);
    lw_sampler_accept(s, id);
    return id;
}
