/* WebGPU model runner: graph rewrites made before planning, so that fewer dispatches run per step.
 *
 * Fused projections: the MUL_MAT nodes that read one input (a block's Q, K, V projections of the attention
 * norm; its gate and up projections of the FFN norm) become ONE mat-vec (or mat-mat) call. Their weights
 * are placed side by side in one weight buffer, rows contiguous (same type, same row length, hence the
 * same row stride), and a joined weight tensor spanning them is added to the graph: one more weight piece
 * whose rows are [Wq | Wk | Wv]. Its output is a joined activation whose rows are [q | k | v]; the parts'
 * outputs stay in the graph as views of it (gm_loc.base, .part) and their readers address them with an
 * offset and a row stride (every kernel family of kernels-ops.h that can read a part takes both). Each
 * output element is the same dot product as before: the results are bit-identical.
 *
 * A group is fused only when all of it fits: every MUL_MAT reading the input takes part (2 or 3 of them),
 * with one weight type and row length (Q4_K_M files often give attn_v another type: those blocks keep
 * separate projections), parts of whole words (the streaming writes words), together within one binding,
 * and every reader of a part can address a view (ROPE, RMS_NORM, KV_STORE, SCALE, SOFTCAP, ADD as their
 * first input; SWIGLU/GEGLU both inputs). Anything else keeps today's nodes. */
#include "webgpu/gpu-model-impl.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Views
 * ------------------------------------------------------------------------------------------------------- */

int32_t lw__gm_base(const lw__gpu_model *g, int32_t t) {
    if (t < 0 || g->graph.t[t].kind == LW_T_WEIGHT || g->loc[t].base < 0) return t;
    return g->loc[t].base;
}

void lw__gm_part(const lw__gpu_model *g, int32_t t, uint64_t *offset, uint64_t *stride) {
    const int32_t b = lw__gm_base(g, t);
    *offset = b != t ? g->loc[t].part : 0;
    *stride = b >= 0 ? (uint64_t)g->graph.t[b].ne0 : 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * Matching
 * ------------------------------------------------------------------------------------------------------- */

/* Whether node r may read a part of a fused output as its input k (its kernel takes an offset and a
 * row stride there). */
static bool reads_views(const lw__node *r, int k) {
    switch (r->op) {
    case LW_OP_RMS_NORM:
    case LW_OP_ROPE:
    case LW_OP_KV_STORE:
    case LW_OP_SCALE:
    case LW_OP_SOFTCAP:
    case LW_OP_ADD: return k == 0;
    case LW_OP_SWIGLU:
    case LW_OP_GEGLU: return k <= 1;
    default: return false;
    }
}

/* Whether another weight tensor than w has w's bytes (a weight used twice is placed once: never join it). */
static bool shared_weight(const lw__graph *gr, int32_t w) {
    for (int32_t u = 0; u < gr->n_t; u++)
        if (u != w && gr->t[u].kind == LW_T_WEIGHT && gr->t[u].offset == gr->t[w].offset) return true;
    return false;
}

/* Collects into f the MUL_MAT nodes from node i on that read node i's input, when they form a group this
 * file can fuse (see the top). */
static bool match_group(const lw__gpu_model *g, int32_t i, gm_fusion *f) {
    const lw__graph *gr = &g->graph;
    const lw__node *a = &gr->nodes[i];
    const int32_t x = a->src[1];
    if (a->op != LW_OP_MUL_MAT || a->dst < 0 || x < 0 || gr->t[x].kind == LW_T_WEIGHT || a->src[0] < 0 ||
        gr->t[a->src[0]].kind != LW_T_WEIGHT || g->loc[x].base >= 0 || g->nodes[i].fuse != GM_FUSE_NONE)
        return false;
    memset(f, 0, sizeof *f);
    for (int32_t j = 0; j < gr->n_nodes; j++) { /* every MUL_MAT reading x, none before node i */
        const lw__node *b = &gr->nodes[j];
        if (b->op != LW_OP_MUL_MAT || b->src[1] != x) continue;
        if (j < i || f->n_parts == GM_MAX_PARTS) return false;
        f->node[f->n_parts++] = j;
    }
    if (f->n_parts < 2) return false;
    const lw__tensor *w0 = &gr->t[a->src[0]];
    uint64_t bytes = 0;
    for (int32_t k = 0; k < f->n_parts; k++) {
        const lw__node *b = &gr->nodes[f->node[k]];
        f->w[k] = b->src[0];
        f->out[k] = b->dst;
        if (b->dst < 0 || b->src[0] < 0) return false;
        const lw__tensor *w = &gr->t[b->src[0]], *o = &gr->t[b->dst];
        const uint64_t wb = (uint64_t)w->ne1 * w->row_bytes;
        if (w->kind != LW_T_WEIGHT || w->type != w0->type || w->ne0 != w0->ne0 || w->row_bytes != w0->row_bytes ||
            wb % 4 || shared_weight(gr, b->src[0]) || o->kind != LW_T_ACT || o->rows != gr->t[a->dst].rows ||
            o->ne0 != w->ne1 || g->loc[b->dst].base >= 0)
            return false;
        for (int32_t q = 0; q < k; q++)
            if (f->w[q] == f->w[k]) return false;
        bytes += wb;
    }
    if (bytes > lw__gm_bind_max(&g->info)) return false; /* would need pieces: keep the separate ones */
    for (int32_t r = 0; r < gr->n_nodes; r++) /* every reader of a part can address a view */
        for (int kk = 0; kk < 3; kk++)
            for (int32_t k = 0; k < f->n_parts; k++)
                if (gr->nodes[r].src[kk] == f->out[k] && !reads_views(&gr->nodes[r], kk)) return false;
    return true;
}

/* Collects into f the ADD nodes that add one bias vector to each part of the fused output of p, all its
 * parts in order (qwen2's Q, K and V biases): one ADD over the whole rows with the biases placed side by
 * side does them all, and its output's parts replace theirs. */
static bool match_bias(const lw__gpu_model *g, const gm_fusion *p, gm_fusion *f) {
    const lw__graph *gr = &g->graph;
    memset(f, 0, sizeof *f);
    for (int32_t k = 0; k < p->n_parts; k++) {
        int32_t add = -1;
        for (int32_t j = 0; j < gr->n_nodes; j++) {
            const lw__node *b = &gr->nodes[j];
            if (b->op != LW_OP_ADD || b->src[0] != p->out[k]) continue;
            if (add >= 0) return false; /* two of them: leave it */
            add = j;
        }
        if (add < 0 || (k && add < f->node[0])) return false;
        const lw__node *b = &gr->nodes[add];
        const int32_t w = b->src[1];
        if (w < 0 || b->dst < 0 || gr->t[w].kind != LW_T_WEIGHT || gr->t[w].type != LW_TYPE_F32 || gr->t[w].ne1 != 1 ||
            gr->t[w].ne0 != gr->t[p->out[k]].ne0 || shared_weight(gr, w) || gr->t[b->dst].kind != LW_T_ACT ||
            gr->t[b->dst].rows != gr->t[p->act].rows || gr->t[b->dst].ne0 != gr->t[w].ne0 || g->loc[b->dst].base >= 0 ||
            g->nodes[add].fuse != GM_FUSE_NONE)
            return false;
        f->node[k] = add;
        f->w[k] = w;
        f->out[k] = b->dst;
        f->n_parts++;
    }
    for (int32_t r = 0; r < gr->n_nodes; r++) /* every reader of a biased part can address a view */
        for (int kk = 0; kk < 3; kk++)
            for (int32_t k = 0; k < f->n_parts; k++)
                if (gr->nodes[r].src[kk] == f->out[k] && !reads_views(&gr->nodes[r], kk)) return false;
    return true;
}

/* (lw__gm_glu_source: gpu-model-impl.h.) */
int32_t lw__gm_glu_source(const lw__gpu_model *g, int32_t d) {
    return g->glu_fold ? lw__gm_glu_match(g, d) : -1;
}

/* (lw__gm_glu_match: gpu-model-impl.h.) */
int32_t lw__gm_glu_match(const lw__gpu_model *g, int32_t d) {
    const lw__graph *gr = &g->graph;
    const lw__node *nd = &gr->nodes[d];
    const int32_t x = nd->src[1];
    if (nd->op != LW_OP_MUL_MAT || x < 0 || gr->t[x].kind != LW_T_ACT || nd->dst < 0) return -1;
    int32_t s = -1;
    for (int32_t j = 0; j < gr->n_nodes; j++) {
        if (gr->nodes[j].dst == x) s = j;
        for (int k = 0; k < 3; k++)
            if (j != d && gr->nodes[j].src[k] == x) return -1; /* read elsewhere */
    }
    if (s < 0 || s > d) return -1;
    const lw__node *glu = &gr->nodes[s];
    const int32_t gate = glu->src[0], up = glu->src[1];
    if ((glu->op != LW_OP_SWIGLU && glu->op != LW_OP_GEGLU) || gate < 0 || up < 0 || gr->t[gate].kind != LW_T_ACT ||
        gr->t[up].kind != LW_T_ACT || lw__gm_base(g, gate) == gate || lw__gm_base(g, up) != lw__gm_base(g, gate) ||
        gr->t[x].rows != gr->t[nd->dst].rows)
        return -1;
    const uint32_t k = (uint32_t)gr->t[x].ne0, go = g->loc[gate].part, uo = g->loc[up].part;
    if (gr->t[gate].ne0 != (int64_t)k || gr->t[up].ne0 != (int64_t)k || go % 4 || uo % 4 || uo < go + k) return -1;
    return s;
}

/* ---------------------------------------------------------------------------------------------------------
 * Rewriting
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__gm_plan_fusions(lw__gpu_model *g) {
    lw__graph *gr = &g->graph;
    for (int32_t t = 0; t < gr->cap_t; t++) g->loc[t].base = -1;
    int32_t cap = 0;
    for (int32_t i = 0; i < gr->n_nodes; i++) cap += gr->nodes[i].op == LW_OP_MUL_MAT;
    g->fus = lw__calloc(&g->alloc, (size_t)cap + 1, sizeof *g->fus); /* a projection and its biases each */
    if (!g->fus) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < gr->n_nodes; i++) { /* (at most cap / 2 projections, as many bias joins) */
        gm_fusion f;
        bool bias = false;
        if (!match_group(g, i, &f)) continue;
        for (int pass = 0; pass < 2; pass++) { /* the projection, then its biases when they join */
            if (pass == 1 && !(bias = match_bias(g, &g->fus[g->n_fus - 1], &f))) break;
            if (gr->n_t + 2 > gr->cap_t) break; /* no room for the joined tensors: the rest stay separate */
            const lw__tensor *w0 = &gr->t[f.w[0]], *o0 = &gr->t[f.out[0]];
            int64_t rows = 0, ne0 = 0; /* joined weight: rows of the parts (projection); elements (biases) */
            for (int32_t k = 0; k < f.n_parts; k++) rows += gr->t[f.w[k]].ne1, ne0 += gr->t[f.w[k]].ne0;
            const char *name = bias ? "Qcur_b|Kcur_b|Vcur_b" : f.n_parts == 3 ? "Qcur|Kcur|Vcur" : "ffn_gate|ffn_up";
            const int32_t saved = gr->cur_layer;
            gr->cur_layer = o0->layer;
            f.wt = bias ? lw__graph_weight(gr, name, LW_TYPE_F32, ne0, 1, NULL) : lw__graph_weight(gr, name, w0->type, w0->ne0, rows, NULL);
            f.act = lw__graph_act(gr, name, bias ? ne0 : rows, (lw__rows)o0->rows);
            gr->cur_layer = saved;
            if (f.wt < 0 || f.act < 0) return lw__errorf(g->err, gr->status, "adding a fused projection failed");
            gr->t[f.wt].offset = UINT64_MAX; /* no bytes in the file: never taken for another weight */
            g->loc[f.wt].joined = true;
            uint32_t part = 0;
            for (int32_t k = 0; k < f.n_parts; k++) {
                g->loc[f.out[k]].base = f.act;
                g->loc[f.out[k]].part = part;
                part += (uint32_t)gr->t[f.out[k]].ne0;
                if (k) g->nodes[f.node[k]].fuse = GM_FUSE_DONE;
            }
            lw__node *n0 = &gr->nodes[f.node[0]]; /* node 0 now computes every part */
            if (bias) { /* the projection's whole rows + the joined biases (broadcast) */
                n0->src[0] = g->fus[g->n_fus - 1].act;
                n0->src[1] = f.wt;
            } else {
                n0->src[0] = f.wt;
            }
            n0->dst = f.act;
            g->fus[g->n_fus++] = f;
        }
    }
    return LW_OK;
}
