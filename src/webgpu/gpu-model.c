/* WebGPU model runner: the static plan (weights, KV cache, activation buffers, parameter arena, pipelines
 * and bind groups) and the step loop (record, submit every N dispatches, read back the sampled id). What
 * each graph op dispatches lives in gpu-model-ops.c. See gpu-model.h. */
#include "webgpu/gpu-model-impl.h"
#include "webgpu/gpu-tune.h"

#include <stdio.h>
#include <string.h>

lw__gpu_model_params lw__gpu_model_default_params(void) {
    lw__gpu_model_params p;
    memset(&p, 0, sizeof p);
    p.f16 = -1;
    p.subgroups = -1;
    p.kv_type = LW_TYPE_F16;
    p.glu_fold = -1;
    p.exact_attn = -1;
    p.exact_norm = -1;
    return p;
}

/* ---------------------------------------------------------------------------------------------------------
 * The HAL as the kernel families see it: their pipelines declare a plain uniform parameter block; the
 * runner binds all of them to one arena and moves between slots with a dynamic offset, so every uniform
 * binding becomes LW_GPU_BIND_UNIFORM_DYNAMIC here. Everything else is forwarded.
 * ------------------------------------------------------------------------------------------------------- */

#define INNER(ctx) (((lw__gpu_model *)(ctx))->inner)

static lw_status d_info(void *ctx, lw_gpu_info *o) {
    return INNER(ctx).ops->info(INNER(ctx).ctx, o);
}
static lw_status d_buffer_create(void *ctx, uint64_t size, uint32_t usage, const char *label,
                                 lw_gpu_buffer *o) {
    return INNER(ctx).ops->buffer_create(INNER(ctx).ctx, size, usage, label, o);
}
static void d_buffer_destroy(void *ctx, lw_gpu_buffer b) {
    INNER(ctx).ops->buffer_destroy(INNER(ctx).ctx, b);
}
static lw_status d_buffer_write(void *ctx, lw_gpu_buffer b, uint64_t off, const void *data, uint64_t size) {
    return INNER(ctx).ops->buffer_write(INNER(ctx).ctx, b, off, data, size);
}
static lw_status d_pipeline_create(void *ctx, const char *wgsl, const char *entry,
                                   const lw_gpu_binding_kind *kinds, uint32_t n, const char *label,
                                   lw_gpu_pipeline *out) {
    lw_gpu_binding_kind k[LW_GPU_MAX_BINDINGS];
    if (n > LW_GPU_MAX_BINDINGS) return LW_ERR_INVALID_ARG;
    int dynamic = 0;
    for (uint32_t i = 0; i < n; i++) {
        k[i] = kinds[i];
        if (k[i] == LW_GPU_BIND_UNIFORM && !dynamic) k[i] = LW_GPU_BIND_UNIFORM_DYNAMIC, dynamic = 1;
    }
    lw_status st = INNER(ctx).ops->pipeline_create(INNER(ctx).ctx, wgsl, entry, k, n, label, out);
    if (st == LW_OK) ((lw__gpu_model *)ctx)->cnt.pipelines++;
    return st;
}
static lw_status d_bind_group_create(void *ctx, lw_gpu_pipeline p, const lw_gpu_bind *b, uint32_t n,
                                     lw_gpu_bind_group *o) {
    return INNER(ctx).ops->bind_group_create(INNER(ctx).ctx, p, b, n, o);
}
static void d_dispatch(void *ctx, lw_gpu_pipeline p, lw_gpu_bind_group g, uint32_t dyn, uint32_t x,
                       uint32_t y, uint32_t z) {
    INNER(ctx).ops->dispatch(INNER(ctx).ctx, p, g, dyn, x, y, z);
}
static void d_copy(void *ctx, lw_gpu_buffer s, uint64_t so, lw_gpu_buffer d, uint64_t dof, uint64_t n) {
    INNER(ctx).ops->copy(INNER(ctx).ctx, s, so, d, dof, n);
}
static lw_status d_submit(void *ctx) {
    return INNER(ctx).ops->submit(INNER(ctx).ctx);
}
static lw_status d_read(void *ctx, lw_gpu_buffer b, uint64_t off, void *dst, uint64_t n) {
    return INNER(ctx).ops->read(INNER(ctx).ctx, b, off, dst, n);
}
static uint32_t d_pending(void *ctx) {
    return INNER(ctx).ops->pending(INNER(ctx).ctx);
}
static const char *d_error(void *ctx) {
    return INNER(ctx).ops->error(INNER(ctx).ctx);
}
static void d_destroy(void *ctx) {
    (void)ctx; /* the model destroys the inner HAL itself */
}

static const lw_gpu_ops dynamic_ops = {
    d_info,
    d_buffer_create,
    d_buffer_destroy,
    d_buffer_write,
    NULL,
    d_pipeline_create,
    d_bind_group_create,
    d_dispatch,
    d_copy,
    d_submit,
    d_read,
    d_pending,
    NULL,
    d_error,
    d_destroy,
};

/* ---------------------------------------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------------------------------------- */

/* Creates a buffer and remembers it for destruction. */
lw_status lw__gm_new_buffer(lw__gpu_model *g, uint64_t size, uint32_t usage, const char *label,
                            lw_gpu_buffer *out) {
    *out = 0;
    if (g->n_bufs == g->cap_bufs) {
        uint32_t cap = g->cap_bufs ? 2 * g->cap_bufs : 64;
        lw_gpu_buffer *b = lw__realloc(&g->alloc, g->bufs, (size_t)cap * sizeof *b);
        if (!b) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
        g->bufs = b;
        g->cap_bufs = cap;
    }
    if (size > g->info.max_buffer_size)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "%s: %llu bytes exceed maxBufferSize %llu", label,
                          (unsigned long long)size, (unsigned long long)g->info.max_buffer_size);
    lw_status st = g->inner.ops->buffer_create(g->inner.ctx, size ? size : 4, usage, label, out);
    if (st != LW_OK) {
        const char *e = g->inner.ops->error(g->inner.ctx);
        return lw__errorf(g->err, st, "creating %s (%llu bytes) failed%s%.160s", label,
                          (unsigned long long)size, e ? ": " : "", e ? e : "");
    }
    g->bufs[g->n_bufs++] = *out;
    g->cnt.buffers++;
    return LW_OK;
}

/* The largest binding the plan uses for a weight piece: maxStorageBufferBindingSize (and maxBufferSize),
 * at most 2^32 - 4 (the kernels index bytes with u32), a multiple of 4. */
static uint64_t bind_max(const lw_gpu_info *i) {
    uint64_t m = i->max_storage_buffer_binding_size;
    if (i->max_buffer_size && i->max_buffer_size < m) m = i->max_buffer_size;
    if (m > 0xfffffffcull) m = 0xfffffffcull;
    return m & ~3ull;
}

uint64_t lw__gm_bind_max(const lw_gpu_info *i) {
    return bind_max(i);
}

/* Storage offset alignment: the device's (a power of two), at least 16 (vec4 loads of activations). */
static uint64_t storage_align(const lw_gpu_info *i) {
    uint64_t a = i->min_storage_buffer_offset_alignment;
    if (a < 16 || (a & (a - 1))) a = a < 16 ? 16 : 256;
    return a;
}

/* ---------------------------------------------------------------------------------------------------------
 * Weights: pieces packed into buffers of at most one binding, then streamed
 * ------------------------------------------------------------------------------------------------------- */

static lw_status plan_weights(lw__gpu_model *g) {
    lw__graph *gr = &g->graph;
    const uint64_t cap = bind_max(&g->info), align = storage_align(&g->info);
    /* pieces: count first (a weight shared by two graph tensors, e.g. a tied head, is placed once) */
    int32_t n = 0;
    for (int32_t t = 0; t < gr->n_t; t++) {
        const lw__tensor *w = &gr->t[t];
        if (w->kind != LW_T_WEIGHT || t == g->rows.table) continue; /* (the row store's slots instead) */
        if (g->loc[t].joined) { /* one piece over its parts' (which fit one binding together) */
            n++;
            continue;
        }
        if (w->row_bytes == 0 || w->row_bytes > cap)
            return lw__errorf(g->err, LW_ERR_TOO_LARGE, "weight %s: a row of %zu bytes exceeds a binding",
                              w->name, w->row_bytes);
        int64_t per = (int64_t)(cap / w->row_bytes);
        n += (int32_t)((w->ne1 + per - 1) / per);
    }
    g->pieces = lw__calloc(&g->alloc, (size_t)n + 1, sizeof(gm_piece));
    uint64_t *buf_size = lw__calloc(&g->alloc, (size_t)n + 1, sizeof(uint64_t)); /* per weight buffer */
    if (!g->pieces || !buf_size) {
        lw__free(&g->alloc, buf_size);
        return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    }
    int32_t n_wbufs = 0;
    /* fused projections first: their parts side by side (rows contiguous), then one piece spanning them */
    for (int32_t i = 0; i < g->n_fus; i++) {
        const gm_fusion *f = &g->fus[i];
        uint64_t total = 0, at;
        for (int32_t k = 0; k < f->n_parts; k++)
            total += (uint64_t)gr->t[f->w[k]].ne1 * gr->t[f->w[k]].row_bytes;
        if (n_wbufs == 0 || !lw__align_up_u64(buf_size[n_wbufs - 1], align, &at) || at + total > cap) {
            n_wbufs++;
            at = 0;
        }
        buf_size[n_wbufs - 1] = at + total;
        for (int32_t k = 0; k <= f->n_parts; k++) {
            const int32_t t = k < f->n_parts ? f->w[k] : f->wt;
            gm_piece *p = &g->pieces[g->n_pieces];
            p->buf = (lw_gpu_buffer)(n_wbufs - 1);
            p->off = at;
            p->row0 = 0;
            p->rows = gr->t[t].ne1;
            p->bytes = (uint64_t)p->rows * gr->t[t].row_bytes; /* parts: whole words (gpu-model-fuse.c) */
            if (k < f->n_parts) at += p->bytes;
            g->loc[t].piece0 = g->n_pieces++;
            g->loc[t].n_pieces = 1;
            g->loc[t].colour = -1;
        }
        g->pieces[g->loc[f->wt].piece0].off = g->pieces[g->loc[f->w[0]].piece0].off;
    }
    for (int32_t t = 0; t < gr->n_t; t++) {
        const lw__tensor *w = &gr->t[t];
        if (w->kind != LW_T_WEIGHT || g->loc[t].n_pieces || t == g->rows.table)
            continue; /* (placed with a fused projection; or the row store's) */
        int32_t same = -1;
        for (int32_t u = 0; u < t && same < 0; u++)
            if (gr->t[u].kind == LW_T_WEIGHT && gr->t[u].offset == w->offset && gr->t[u].type == w->type &&
                gr->t[u].ne0 == w->ne0 && gr->t[u].ne1 == w->ne1)
                same = u;
        if (same >= 0) {
            g->loc[t] = g->loc[same];
            continue;
        }
        const int64_t per = (int64_t)(cap / w->row_bytes);
        g->loc[t].piece0 = g->n_pieces;
        g->loc[t].colour = -1;
        for (int64_t r0 = 0; r0 < w->ne1; r0 += per) {
            gm_piece *p = &g->pieces[g->n_pieces++];
            p->row0 = r0;
            p->rows = w->ne1 - r0 < per ? w->ne1 - r0 : per;
            p->bytes = (uint64_t)p->rows * w->row_bytes;
            uint64_t padded = (p->bytes + 3) & ~3ull, at;
            /* into the current buffer when it fits, else a new one */
            if (n_wbufs == 0 || !lw__align_up_u64(buf_size[n_wbufs - 1], align, &at) || at + padded > cap) {
                n_wbufs++;
                at = 0;
            }
            p->buf = (lw_gpu_buffer)(n_wbufs - 1); /* buffer index for now */
            p->off = at;
            buf_size[n_wbufs - 1] = at + padded;
            g->loc[t].n_pieces++;
        }
    }
    /* create the buffers, then turn indices into handles */
    lw_gpu_buffer *handles = lw__calloc(&g->alloc, (size_t)n_wbufs + 1, sizeof(lw_gpu_buffer));
    lw_status st = handles ? LW_OK : lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; st == LW_OK && i < n_wbufs; i++) {
        char label[32];
        snprintf(label, sizeof label, "weights %d", i);
        st = lw__gm_new_buffer(g, buf_size[i], LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, label,
                               &handles[i]);
        g->weight_bytes += buf_size[i];
    }
    for (int32_t i = 0; st == LW_OK && i < g->n_pieces; i++) g->pieces[i].buf = handles[g->pieces[i].buf];
    lw__free(&g->alloc, handles);
    lw__free(&g->alloc, buf_size);
    return st;
}

/* Writes every piece's bytes: streamed from the host source, or read through the model's source in
 * bounded chunks (native tests). */
static lw_status upload_weights(lw__gpu_model *g) {
    lw__graph *gr = &g->graph;
    uint8_t *chunk = NULL;
    const size_t chunk_bytes = 1u << 20;
    lw_status st = LW_OK;
    for (int32_t t = 0; st == LW_OK && t < gr->n_t; t++) {
        const lw__tensor *w = &gr->t[t];
        /* joined: streamed as its parts; the row store's table: its rows are loaded when used */
        if (w->kind != LW_T_WEIGHT || g->loc[t].joined || t == g->rows.table) continue;
        int first = 1; /* the first graph tensor owning these pieces uploads them */
        for (int32_t u = 0; u < t && first; u++)
            if (gr->t[u].kind == LW_T_WEIGHT && g->loc[u].piece0 == g->loc[t].piece0) first = 0;
        if (!first) continue;
        for (int32_t k = 0; st == LW_OK && k < g->loc[t].n_pieces; k++) {
            const gm_piece *p = &g->pieces[g->loc[t].piece0 + k];
            const uint64_t src = w->offset + (uint64_t)p->row0 * w->row_bytes;
            if (g->p.host_source) {
                st = g->inner.ops->buffer_write_host
                         ? g->inner.ops->buffer_write_host(g->inner.ctx, p->buf, p->off, g->p.host_source,
                                                           src, p->bytes)
                         : LW_ERR_UNSUPPORTED;
                if (st != LW_OK) lw__errorf(g->err, st, "streaming %s failed", w->name);
                continue;
            }
            /* no host source: through memory, chunk by chunk */
            int64_t gi = lw_gguf_find_tensor(g->m->gguf, w->name);
            const lw_gguf_tensor *gt = gi >= 0 ? lw_gguf_tensor_at(g->m->gguf, gi) : NULL;
            if (!gt || src < gt->file_offset || src - gt->file_offset + p->bytes > gt->n_bytes) {
                st = lw__errorf(g->err, LW_ERR_INVALID_ARG, "weight %s: not found in the file", w->name);
                break;
            }
            if (!chunk && !(chunk = lw__malloc(&g->alloc, chunk_bytes))) {
                st = lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
                break;
            }
            for (uint64_t done = 0; st == LW_OK && done < p->bytes; done += chunk_bytes) {
                size_t len = p->bytes - done < chunk_bytes ? (size_t)(p->bytes - done) : chunk_bytes;
                st = lw_gguf_read_tensor(g->m->gguf, gi, src - gt->file_offset + done, chunk, len);
                if (st != LW_OK) {
                    lw__errorf(g->err, st, "reading %s: %s", w->name, lw_gguf_error(g->m->gguf));
                    break;
                }
                st = g->inner.ops->buffer_write(g->inner.ctx, p->buf, p->off + done, chunk, len);
                if (st != LW_OK) lw__errorf(g->err, st, "writing %s failed", w->name);
            }
        }
    }
    lw__free(&g->alloc, chunk);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Activations: colours so that no node binds one buffer as input and output, then the graph's planner per
 * colour (tensors of other colours are hidden from it as if they were weights)
 * ------------------------------------------------------------------------------------------------------- */

static lw_status plan_acts(lw__gpu_model *g) {
    lw__graph *gr = &g->graph;
    for (int32_t t = 0; t < gr->n_t; t++)
        if (gr->t[t].kind != LW_T_WEIGHT) g->loc[t].colour = -1;
    g->n_act = 1;
    /* the parts of a fused output are seen as that output (lw__gm_base) */
    for (int32_t n = 0; n < gr->n_nodes; n++) {
        const lw__node *nd = &gr->nodes[n];
        const int32_t dst = lw__gm_base(g, nd->dst);
        if (dst < 0 || g->loc[dst].colour >= 0) continue;
        unsigned used = 0;
        for (int k = 0; k < 3; k++) {
            const int32_t s = lw__gm_base(g, nd->src[k]);
            if (s >= 0 && gr->t[s].kind != LW_T_WEIGHT && g->loc[s].colour >= 0)
                used |= 1u << g->loc[s].colour;
        }
        const int32_t glu = nd->op == LW_OP_MUL_MAT ? lw__gm_glu_source(g, n) : -1;
        if (glu >= 0) { /* its X_GLU calls read the GLU's gate|up input (read-only binding) */
            const int32_t s = lw__gm_base(g, gr->nodes[glu].src[0]);
            if (g->loc[s].colour >= 0) used |= 1u << g->loc[s].colour;
        }
        const int32_t mr = lw__gm_mv_rope_writer(g, n); /* (its Q written by that mat-vec's epilogue) */
        const int32_t nm = nd->op == LW_OP_MUL_MAT ? g->nodes[n].norm_src
                           : mr >= 0               ? g->nodes[mr].norm_src
                                                   : -1;
        if (nm >= 0) { /* its one-row mat-vec reads the norm's input (the ADD's inputs before it), which may
                          die before this output is born: apart, so the output never takes their place */
            const bool add = lw__gm_add_norm_shape(g, nm - 1);
            const lw__node *src = add ? &gr->nodes[nm - 1] : &gr->nodes[nm];
            for (int k = 0; k < (add ? 2 : 1); k++)
                if (g->loc[src->src[k]].colour >= 0) used |= 1u << g->loc[src->src[k]].colour;
        }
        const int32_t ar = nd->op == LW_OP_ATTN ? lw__gm_attn_rope_match(g, n) : -1;
        if (ar >= 0) { /* its one-token calls may read the unrotated Q|K|V (RoPE in the prologue): apart */
            const int32_t s = lw__gm_base(g, gr->nodes[ar].src[0]);
            if (g->loc[s].colour >= 0) used |= 1u << g->loc[s].colour;
        }
        if (lw__gm_add_norm_shape(g, n - 1)) /* fused with the ADD before it: binds that ADD's inputs too */
            for (int k = 0; k < 2; k++)
                if (g->loc[gr->nodes[n - 1].src[k]].colour >= 0)
                    used |= 1u << g->loc[gr->nodes[n - 1].src[k]].colour;
        int c = 0;
        while (used & (1u << c)) c++;
        if (c >= GM_MAX_ACT)
            return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "node %d would need a %dth activation buffer", n,
                              c + 1);
        g->loc[dst].colour = (int8_t)c;
        if (c + 1 > g->n_act) g->n_act = c + 1;
    }
    lw__tensor *tc = lw__calloc(&g->alloc, (size_t)gr->n_t, sizeof *tc);
    lw__node *nc = lw__calloc(&g->alloc, (size_t)gr->n_nodes, sizeof *nc);
    lw_status st = tc && nc ? LW_OK : lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    const uint64_t align = storage_align(&g->info);
    for (int c = 0; st == LW_OK && c < g->n_act; c++) {
        memcpy(tc, gr->t, (size_t)gr->n_t * sizeof *tc);
        memcpy(nc, gr->nodes, (size_t)gr->n_nodes * sizeof *nc);
        for (int32_t t = 0; t < gr->n_t; t++) /* other colours and parts are hidden (as weights) */
            if (tc[t].kind != LW_T_WEIGHT && (g->loc[t].colour != c || g->loc[t].base >= 0))
                tc[t].kind = LW_T_WEIGHT;
        for (int32_t n = 0; n < gr->n_nodes; n++) {
            for (int k = 0; k < 3; k++) nc[n].src[k] = lw__gm_base(g, nc[n].src[k]);
            nc[n].dst = lw__gm_base(g, nc[n].dst);
        }
        for (int32_t n = 0; n < gr->n_nodes; n++) { /* a folded bias ADD's output stands for its input */
            if (lw__gm_bias_fold(g, n) < 0) continue;
            const int32_t b2 = gr->nodes[n].dst, b = lw__gm_base(g, gr->nodes[n].src[0]);
            for (int32_t r = 0; r < gr->n_nodes; r++)
                for (int k = 0; k < 3; k++)
                    if (nc[r].src[k] == b2) nc[r].src[k] = b;
            nc[n].dst = -1;
            nc[n].src[0] = nc[n].src[1] = -1;
        }
        for (int32_t n = 0; n < gr->n_nodes;
             n++) { /* a folded SCALE's output is written by the rope_qkv call */
            const int32_t sc = lw__gm_rope_qkv_scale(g, n);
            if (sc < 0) continue;
            nc[n].dst = nc[sc].dst;
            nc[sc].dst = nc[sc].src[0] = -1;
        }
        for (int32_t n = 0; n < gr->n_nodes; n++)
            if (nc[n].dst >= 0 && tc[nc[n].dst].kind == LW_T_WEIGHT) nc[n].dst = -1;
        lw__graph sub = *gr;
        sub.t = tc;
        sub.nodes = nc;
        if ((st = lw__graph_plan(&sub, g->n_batch, 1, align)) != LW_OK) {
            lw__errorf(g->err, st, "planning activation buffer %d failed", c);
            break;
        }
        g->act_bytes[c] = sub.arena_size;
        char label[32];
        snprintf(label, sizeof label, "activations %d", c);
        if ((st = lw__gm_new_buffer(g, sub.arena_size,
                                    LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_SRC | LW_GPU_USAGE_COPY_DST,
                                    label, &g->act[c])) != LW_OK)
            break;
        for (int32_t t = 0; t < gr->n_t; t++) {
            if (gr->t[t].kind == LW_T_WEIGHT || g->loc[t].colour != c) continue;
            gr->t[t].ne1 = tc[t].ne1;
            gr->t[t].offset = tc[t].offset;
            gr->t[t].size = tc[t].size;
            g->loc[t].buf = g->act[c];
            g->loc[t].off = tc[t].offset;
            g->loc[t].size = tc[t].size;
            if (tc[t].size > g->info.max_storage_buffer_binding_size)
                st = lw__errorf(g->err, LW_ERR_TOO_LARGE,
                                "activation %s: %llu bytes exceed a binding (n_batch %u)", gr->t[t].name,
                                (unsigned long long)tc[t].size, g->n_batch);
        }
    }
    for (int32_t t = 0; st == LW_OK && t < gr->n_t; t++) { /* a part's binding is its base's */
        const int32_t b = lw__gm_base(g, t);
        if (b == t) continue;
        g->loc[t].buf = g->loc[b].buf;
        g->loc[t].off = g->loc[b].off;
        g->loc[t].size = g->loc[b].size;
        g->loc[t].colour = g->loc[b].colour;
    }
    lw__free(&g->alloc, tc);
    lw__free(&g->alloc, nc);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Services for the op wiring (gpu-model-impl.h)
 * ------------------------------------------------------------------------------------------------------- */

lw_gpu_bind lw__gm_act(const lw__gpu_model *g, int32_t t) {
    lw_gpu_bind b = {g->loc[t].buf, g->loc[t].off, g->loc[t].size};
    return b;
}

lw_gpu_bind lw__gm_piece(const lw__gpu_model *g, int32_t i) {
    lw_gpu_bind b = {g->pieces[i].buf, g->pieces[i].off, (g->pieces[i].bytes + 3) & ~3ull};
    return b;
}

lw_gpu_bind lw__gm_params(const lw__gpu_model *g) {
    lw_gpu_bind b = {g->params, 0, GM_SLOT};
    return b;
}

lw_gpu_bind lw__gm_whole(lw_gpu_buffer buf) {
    lw_gpu_bind b = {buf, 0, 0};
    return b;
}

lw_status lw__gm_add_call(lw__gpu_model *g, gm_call *c, const lw_gpu_bind *binds, uint32_t n, bool out_only) {
    if (n == 0 || n > GM_MAX_BINDS) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "bad binding count %u", n);
    if (!out_only && g->n_calls == g->cap_calls) {
        int32_t cap = g->cap_calls ? 2 * g->cap_calls : 256;
        gm_call *cs = lw__realloc(&g->alloc, g->calls, (size_t)cap * sizeof *cs);
        if (!cs) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
        g->calls = cs;
        g->cap_calls = cap;
    }
    lw_status st = g->inner.ops->bind_group_create(g->inner.ctx, c->pipe, binds, n, &c->group);
    if (st != LW_OK) {
        const char *e = g->inner.ops->error(g->inner.ctx);
        return lw__errorf(g->err, st, "bind group failed%s%.200s", e ? ": " : "", e ? e : "");
    }
    g->cnt.bind_groups++;
    if (!out_only) g->calls[g->n_calls++] = *c;
    return LW_OK;
}

/* Writes the used parameter slots and submits what was recorded. */
static lw_status flush(lw__gpu_model *g) {
    lw_status st = LW_OK;
    if (g->slot)
        st = g->inner.ops->buffer_write(g->inner.ctx, g->params, 0, g->shadow, (uint64_t)g->slot * GM_SLOT);
    if (st == LW_OK && g->since_submit) {
        st = g->inner.ops->submit(g->inner.ctx);
        g->cnt.submits++;
    }
    g->slot = 0;
    g->since_submit = 0;
    return st;
}

void lw__gm_emit(lw__gpu_model *g, const gm_call *c, const void *params, size_t bytes,
                 const uint32_t grid[3]) {
    if (!grid[0] || !grid[1] || !grid[2]) return;
    if (g->slot == g->slots) flush(g);
    memcpy(g->shadow + (size_t)g->slot * GM_SLOT, params, bytes < GM_SLOT ? bytes : GM_SLOT);
    g->inner.ops->dispatch(g->inner.ctx, c->pipe, c->group, g->slot * GM_SLOT, grid[0], grid[1], grid[2]);
    g->slot++;
    g->since_submit++;
    g->cnt.dispatches++;
    if (g->since_submit >= g->p.submit_every) flush(g);
}

/* ---------------------------------------------------------------------------------------------------------
 * Creation
 * ------------------------------------------------------------------------------------------------------- */

static lw_status create(lw__gpu_model *g) {
    lw_model *m = g->m;
    const lw__hparams *hp = &m->hp;
    lw_status st;
    if ((st = g->inner.ops->info(g->inner.ctx, &g->info)) != LW_OK)
        return lw__errorf(g->err, st, "no device info");
    g->f16 = g->p.f16 < 0 ? g->info.has_f16 : g->p.f16 != 0;
    g->subgroups = g->p.subgroups < 0 ? g->info.has_subgroups : g->p.subgroups != 0;
    g->glu_fold = g->p.glu_fold < 0 ? !lw__gpu_cpu_adapter(&g->info) : g->p.glu_fold != 0;
    g->exact_attn = g->p.exact_attn < 0 ? lw__gpu_cpu_adapter(&g->info) : g->p.exact_attn != 0;
    if ((g->f16 && !g->info.has_f16) || (g->subgroups && !g->info.has_subgroups))
        return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "the device lacks %s",
                          g->f16 && !g->info.has_f16 ? "shader-f16" : "subgroups");
    /* GPUs: 32, so the GPU starts on a step's first dispatches while the rest are recorded (H200,
     * llama-3.2-1b shape tg128: Q4_0 180.6 -> 204.9 tok/s, Q4_K_M 82.9 -> 89.1, Q8_0 188.5 -> 215.3 against
     * 256); CPU adapters run a command buffer on the recording thread's cores anyway: 256 */
    if (!g->p.submit_every) g->p.submit_every = lw__gpu_cpu_adapter(&g->info) ? 256 : 32;
    g->n_ctx = g->p.n_ctx ? g->p.n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (g->n_ctx == 0 || g->n_ctx > (1u << 24))
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "bad n_ctx %u", g->n_ctx);
    /* tokens per step: 512 where the prompt's products run on the matrix units (llama.cpp's default ubatch;
     * H200 pp512 with them, 8B Q4_0: 1149 t/s in steps of 128, 2568 in one step of 512: a step of 128 gives
     * a 4096-row product 32 workgroups of 128 x 128), else 128 */
    g->n_batch = g->p.n_batch ? g->p.n_batch : lw__gpu_smx_available(&g->info) ? 512 : 128;
    if (g->n_batch > g->n_ctx) g->n_batch = g->n_ctx;
    lw__gpu_cache_init(&g->cache, &g->alloc);

    /* the graph, as the CPU context builds it */
    st = lw__graph_init(&g->graph, &g->alloc, 64 * (int32_t)hp->n_layer + 64, 64 * (int32_t)hp->n_layer + 64);
    if (st != LW_OK) return lw__errorf(g->err, st, "out of memory");
    if ((st = m->arch->build(m, &g->graph, &g->logits)) != LW_OK)
        return lw__errorf(g->err, st, "building the %s graph failed", m->arch->name);
    g->loc = lw__calloc(&g->alloc, (size_t)g->graph.cap_t, sizeof *g->loc); /* (fusions add tensors) */
    g->nodes = lw__calloc(&g->alloc, (size_t)g->graph.n_nodes, sizeof *g->nodes);
    g->logits_out = lw__calloc(&g->alloc, hp->n_vocab, sizeof(float));
    g->slots = g->p.submit_every + 1;
    g->shadow = lw__calloc(&g->alloc, g->slots, GM_SLOT);
    if (!g->loc || !g->nodes || !g->logits_out || !g->shadow)
        return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < g->graph.n_nodes; i++) g->nodes[i].attn_rope = -1; /* (set at preparing) */
    /* the cache type before the fusions: the kernels that write cells in passing (rope_qkv, the decode
     * attention's and the norm mat-vec's RoPE epilogues) write f16 / f32 only, so a quantized cache keeps
     * them off (gpu-model-ops.c rope_qkv_shape) */
    if (g->p.kv_type != LW_TYPE_F32 && g->p.kv_type != LW_TYPE_F16 && !lw__gpu_kv_block_words(g->p.kv_type))
        return lw__errorf(g->err, LW_ERR_INVALID_ARG,
                          "KV cache type %u: the WebGPU engine keeps f16, f32, q8_0 or q4_0 caches",
                          g->p.kv_type);
    g->kv_type = g->p.kv_type;
    if ((st = lw__gm_plan_fusions(g)) != LW_OK || (st = lw__gm_check_ops(g)) != LW_OK) return st;
    if ((st = lw__gm_plan_rows(g)) != LW_OK) return st; /* before the weights: a served table has no piece */

    /* buffers: weights, KV cache, activations, parameters, tokens, result */
    if ((st = plan_weights(g)) != LW_OK || (st = lw__gm_plan_norm_mv(g)) != LW_OK ||
        (st = plan_acts(g)) != LW_OK)
        return st;
    const uint64_t kv_row = (uint64_t)hp->n_head_kv * hp->n_embd_head_k;
    uint64_t cell_bytes; /* one cell of one layer's K (or V) */
    if (!lw__gpu_kv_cell_bytes(g->kv_type, kv_row, &cell_bytes))
        return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "a %s KV cache needs rows of whole 32-element blocks",
                          lw_type_get(g->kv_type)->name);
    if (!lw__mul_u64(cell_bytes, g->n_ctx, &g->kv_layer_bytes) || g->kv_layer_bytes > bind_max(&g->info))
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "a block's KV cache exceeds a binding (n_ctx %u)",
                          g->n_ctx);
    g->kv = lw__calloc(&g->alloc, 2 * (size_t)hp->n_layer, sizeof *g->kv);
    if (!g->kv) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; l < 2 * hp->n_layer; l++) {
        char label[32];
        snprintf(label, sizeof label, "%s cache %u", l < hp->n_layer ? "K" : "V", l % hp->n_layer);
        if ((st = lw__gm_new_buffer(g, g->kv_layer_bytes, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST, label,
                                    &g->kv[l])) != LW_OK)
            return st;
    }
    if ((st = lw__gm_new_buffer(g, (uint64_t)g->slots * GM_SLOT, LW_GPU_USAGE_UNIFORM | LW_GPU_USAGE_COPY_DST,
                                "parameters", &g->params)) != LW_OK ||
        (st = lw__gm_new_buffer(g, (uint64_t)g->n_batch * 4, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST,
                                "tokens", &g->tokens)) != LW_OK ||
        (st = lw__gm_new_buffer(g, 256, LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_SRC | LW_GPU_USAGE_COPY_DST,
                                "result", &g->result)) != LW_OK)
        return st;

    /* pipelines and bind groups of every node, then the weights */
    if ((st = lw__gm_plan_rope(g)) != LW_OK || (st = lw__gm_prepare_shared(g)) != LW_OK) return st;
    for (int32_t i = 0; i < g->graph.n_nodes; i++) {
        g->nodes[i].call0 = g->n_calls;
        if ((st = lw__gm_prepare_node(g, i)) != LW_OK) return st;
        g->nodes[i].n_calls = g->n_calls - g->nodes[i].call0;
    }
    if ((st = lw__gm_prepare_argmax(g)) != LW_OK) return st;
    if ((st = lw__gm_prepare_sample(g)) != LW_OK) return st;
    if ((st = upload_weights(g)) != LW_OK) return st;
    return lw__gm_rows_warm(g);
}

lw_status lw__gpu_model_create(lw_gpu gpu, lw_model *m, const lw__gpu_model_params *p, lw__gpu_model **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (!m || !m->arch || !gpu.ops) {
        if (gpu.ops) gpu.ops->destroy(gpu.ctx);
        return LW_ERR_INVALID_ARG;
    }
    lw__gpu_model *g = lw__calloc(&m->alloc, 1, sizeof *g);
    if (!g) {
        gpu.ops->destroy(gpu.ctx);
        return LW_ERR_NOMEM;
    }
    g->alloc = m->alloc;
    g->m = m;
    g->inner = gpu;
    g->gpu.ops = &dynamic_ops;
    g->gpu.ctx = g;
    g->p = p ? *p : lw__gpu_model_default_params();
    g->rows.table = -1; /* (until lw__gm_plan_rows decides) */
    *out = g;
    lw_status st = create(g);
    g->p.tune = NULL; /* the caller's; read during creation only */
    return st;
}

void lw__gpu_model_free(lw__gpu_model *g) {
    if (!g) return;
    if (g->inner.ops) {
        for (uint32_t i = 0; i < g->n_bufs; i++) g->inner.ops->buffer_destroy(g->inner.ctx, g->bufs[i]);
        g->inner.ops->destroy(g->inner.ctx);
    }
    lw__gpu_cache_free(&g->cache);
    lw__gm_free_sample(g);
    lw__gm_rows_free(g);
    lw__graph_free(&g->graph);
    lw_allocator a = g->alloc;
    lw__free(&a, g->bufs);
    lw__free(&a, g->loc);
    lw__free(&a, g->pieces);
    lw__free(&a, g->fus);
    lw__free(&a, g->kv);
    lw__free(&a, g->shadow);
    lw__free(&a, g->rope_host);
    lw__free(&a, g->calls);
    lw__free(&a, g->nodes);
    lw__free(&a, g->logits_out);
    lw__free(&a, g);
}

const char *lw__gpu_model_error(const lw__gpu_model *g) {
    return g ? g->err : "out of memory";
}

/* ---------------------------------------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------------------------------------- */

/* Records one step of `step` tokens at n_past (their ids already in g->tokens, or copied there on the GPU),
 * then `out`'s argmax or draw into g->result, and submits. */
static lw_status record_step(lw__gpu_model *g, int32_t step, lw__gpu_out out) {
    lw_status st;
    if ((st = lw__gm_write_rope(g, step, (int32_t)g->n_past)) != LW_OK) return st;
    const uint64_t before = g->cnt.dispatches;
    for (int32_t i = 0; i < g->graph.n_nodes; i++)
        if ((st = lw__gm_record_node(g, i, step, (int32_t)g->n_past)) != LW_OK) return st;
    if (step == 1) g->step_dispatches = g->cnt.dispatches - before;
    g->cnt.steps++;
    g->n_past += (uint32_t)step;
    if (out != LW_GPU_OUT_NONE && lw__gm_mask_armed(g))
        lw__gm_record_masked(g, out);
    else if (out == LW_GPU_OUT_SAMPLE)
        lw__gm_record_sample(g);
    else if (out != LW_GPU_OUT_NONE)
        lw__gm_record_argmax(g);
    g->result_valid = out != LW_GPU_OUT_NONE;
    if ((st = flush(g)) != LW_OK) return lw__errorf(g->err, st, "submit failed");
    return LW_OK;
}

lw_status lw__gpu_model_decode(lw__gpu_model *g, const int32_t *tokens, int32_t n, lw__gpu_out out) {
    if (!g || !g->calls) return LW_ERR_INVALID_ARG;
    if (!tokens || n <= 0) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "no tokens");
    if ((uint64_t)g->n_past + (uint64_t)n > g->n_ctx)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "%d tokens after %u do not fit the %u-cell context", n,
                          g->n_past, g->n_ctx);
    const int32_t n_vocab = (int32_t)g->m->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return lw__errorf(g->err, LW_ERR_INVALID_ARG, "token %d at %d is outside the vocabulary (%d)",
                              tokens[i], i, n_vocab);
    const lw_gpu_ops *o = g->inner.ops;
    lw_status st;
    g->n_chain = 0;
    /* with a row store, a step's rows must be resident together: steps of at most rows.step tokens */
    const int32_t most = g->rows.cache ? (int32_t)g->rows.step : (int32_t)g->n_batch;
    if (g->rows.cache && g->p.host_source && n > most)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG,
                          "row store: %d tokens in one call exceed a step of %d (lw__gpu_model_rows_step)", n,
                          most);
    for (int32_t done = 0; done < n;) {
        const int32_t step = n - done < most ? n - done : most;
        if ((st = lw__gm_rows_ready(g, tokens + done, step)) != LW_OK) return st;
        /* the token ids of this step: queue order puts the write after the previous step's submission */
        if ((st = o->buffer_write(g->inner.ctx, g->tokens, 0, tokens + done, (uint64_t)step * 4)) != LW_OK)
            return lw__errorf(g->err, st, "writing token ids failed");
        done += step;
        if ((st = record_step(g, step, done == n ? out : LW_GPU_OUT_NONE)) != LW_OK) return st;
    }
    st = LW_OK;
    if (out != LW_GPU_OUT_NONE) {
        g->token_out = -1;
        st = o->read(g->inner.ctx, g->result, 0, &g->token_out, 4);
    }
    if (st == LW_OK && out == LW_GPU_OUT_LOGITS) {
        const gm_loc *l = &g->loc[g->logits];
        st = o->read(g->inner.ctx, l->buf, l->off, g->logits_out, (uint64_t)n_vocab * 4);
    }
    return st == LW_OK ? LW_OK : lw__errorf(g->err, st, "read-back failed");
}

lw_status lw__gpu_model_decode_next(lw__gpu_model *g, lw__gpu_out out, int32_t *slot) {
    if (!g || !g->calls || !slot || (out != LW_GPU_OUT_ARGMAX && out != LW_GPU_OUT_SAMPLE))
        return LW_ERR_INVALID_ARG;
    if (!g->result_valid)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "a chained step needs a previous step's sampled id");
    if ((uint64_t)g->n_past + 1 > g->n_ctx)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "1 token after %u does not fit the %u-cell context",
                          g->n_past, g->n_ctx);
    const uint32_t i = g->n_chain % GM_CHAIN;
    g->chain_past[i] = g->n_past;
    lw__gm_sample_rng_get(g, g->chain_rng[i]);
    /* the input id is the previous step's output, copied on the GPU: nothing waits for the host */
    g->inner.ops->copy(g->inner.ctx, g->result, 0, g->tokens, 0, 4);
    lw_status st = record_step(g, 1, out);
    if (st != LW_OK) return st;
    g->n_chain++;
    g->chain_ids[i] = -1;
    if ((st = g->inner.ops->read(g->inner.ctx, g->result, 0, &g->chain_ids[i], 4)) != LW_OK)
        return lw__errorf(g->err, st, "read-back failed");
    *slot = (int32_t)i;
    return LW_OK;
}

const int32_t *lw__gpu_model_chain_ids(const lw__gpu_model *g) {
    return g->chain_ids;
}

lw_status lw__gpu_model_rewind(lw__gpu_model *g, uint32_t k) {
    if (!g) return LW_ERR_INVALID_ARG;
    if (k == 0) return LW_OK;
    if (k > g->n_chain || k > GM_CHAIN)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "cannot undo %u of %u chained steps", k, g->n_chain);
    g->n_chain -= k;
    const uint32_t i = g->n_chain % GM_CHAIN;
    g->n_past = g->chain_past[i];
    lw__gm_sample_rng_set(g, g->chain_rng[i]);
    /* `result` holds a discarded step's id: the next chained step must follow a host decode */
    g->result_valid = false;
    return LW_OK;
}

lw_status lw__gpu_model_probe(lw__gpu_model *g, const int32_t *tokens, int32_t n, int32_t node, float *dst,
                              uint64_t cap) {
    if (!g || !g->calls || !tokens || n <= 0 || (uint32_t)n > g->n_batch || node < 0 ||
        node >= g->graph.n_nodes || g->graph.nodes[node].dst < 0 ||
        (uint64_t)g->n_past + (uint64_t)n > g->n_ctx)
        return LW_ERR_INVALID_ARG;
    if (g->nodes[node].fuse == GM_FUSE_DONE)
        return LW_ERR_UNSUPPORTED; /* fused away: its dst is never written */
    if (g->nodes[node].fuse == GM_FUSE_ROPE_QKV && node + 2 < g->graph.n_nodes &&
        g->nodes[node + 2].fuse == GM_FUSE_DONE && g->graph.nodes[node + 2].op == LW_OP_SCALE)
        return LW_ERR_UNSUPPORTED; /* the rotated Q went straight into the folded SCALE's output */
    if (g->nodes[node].fuse == GM_FUSE_ROPE_QKV && g->nodes[node].attn_rope >= 0 && n == 1)
        return LW_ERR_UNSUPPORTED; /* rotated inside the decode attention's prologue in one-token steps */
    if (g->graph.nodes[node].op == LW_OP_MUL_MAT && g->nodes[node].mv_rope >= 0 && n == 1)
        return LW_ERR_UNSUPPORTED; /* its rows went rotated into q_out and the caches in one-row steps */
    if (g->nodes[node].norm_mv >= 0 && n == 1)
        return LW_ERR_UNSUPPORTED; /* computed inside the next mat-vec's prologue in one-row steps */
    if (g->nodes[node].fuse == GM_FUSE_GLU &&
        (n == 1 || g->graph.t[g->graph.nodes[node].dst].rows == LW_ROWS_OUTPUTS))
        return LW_ERR_UNSUPPORTED; /* computed inside the next mat-vec in one-row steps */
    const lw__tensor *t = &g->graph.t[g->graph.nodes[node].dst];
    const uint64_t rows = t->rows == LW_ROWS_OUTPUTS ? 1 : (uint64_t)n, count = rows * (uint64_t)t->ne0;
    if (count > cap) return LW_ERR_TOO_LARGE;
    lw_status st = lw__gm_rows_ready(g, tokens, n);
    if (st == LW_OK) st = g->inner.ops->buffer_write(g->inner.ctx, g->tokens, 0, tokens, (uint64_t)n * 4);
    if (st == LW_OK) st = lw__gm_write_rope(g, n, (int32_t)g->n_past);
    for (int32_t i = 0; st == LW_OK && i <= node; i++) st = lw__gm_record_node(g, i, n, (int32_t)g->n_past);
    if (st == LW_OK) st = flush(g);
    const gm_loc *l = &g->loc[g->graph.nodes[node].dst];
    if (st == LW_OK) st = g->inner.ops->read(g->inner.ctx, l->buf, l->off, dst, count * 4);
    return st;
}

int32_t lw__gpu_model_node(const lw__gpu_model *g, int32_t i, const char **name, int32_t *layer,
                           int64_t *ne0) {
    if (i >= 0 && i < g->graph.n_nodes) {
        const lw__node *nd = &g->graph.nodes[i];
        const lw__tensor *t = nd->dst >= 0 ? &g->graph.t[nd->dst] : NULL;
        *name = t ? t->name : lw__op_name((lw__op)nd->op);
        *layer = t ? t->layer : nd->ip[0];
        *ne0 = t ? t->ne0 : 0;
    }
    return g->graph.n_nodes;
}

int32_t lw__gpu_model_token(const lw__gpu_model *g) {
    return g->token_out;
}
const float *lw__gpu_model_logits(const lw__gpu_model *g) {
    return g->logits_out;
}
lw_status lw__gpu_model_set_n_past(lw__gpu_model *g, uint32_t n_past) {
    if (n_past > g->n_past)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "n_past %u is beyond the %u cells in use", n_past,
                          g->n_past);
    g->n_past = n_past;
    g->n_chain = 0; /* chained steps before this cannot be undone past it */
    return LW_OK;
}
uint32_t lw__gpu_model_n_past(const lw__gpu_model *g) {
    return g->n_past;
}
uint32_t lw__gpu_model_n_ctx(const lw__gpu_model *g) {
    return g->n_ctx;
}
uint32_t lw__gpu_model_kv_type(const lw__gpu_model *g) {
    return g->kv_type;
}
lw__gpu_model_counters lw__gpu_model_get_counters(const lw__gpu_model *g) {
    return g->cnt;
}
const lw_gpu *lw__gpu_model_gpu(const lw__gpu_model *g) {
    return &g->inner;
}
void lw__gpu_model_bytes(const lw__gpu_model *g, uint64_t *weights, uint64_t *kv, uint64_t *acts) {
    *weights = g->weight_bytes;
    *kv = g->kv_layer_bytes * 2 * g->m->hp.n_layer;
    *acts = 0;
    for (int c = 0; c < g->n_act; c++) *acts += g->act_bytes[c];
}
uint64_t lw__gpu_model_step_dispatches(const lw__gpu_model *g) {
    return g->step_dispatches;
}
