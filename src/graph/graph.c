/* Compute graph construction and the static memory planner (see graph.h).
 *
 * The planner is ggml-alloc's idea done once, offline: walk the nodes in order; before node i runs, give
 * each tensor it produces the best-fitting free block of the arena (or grow the arena); after node i, return
 * the blocks of tensors whose last reader was node i. Because a node's outputs are placed before its inputs
 * are released, no op ever reads and writes the same memory. */
#include "graph/graph.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------------------------------------- */

static const char *const op_names[LW_OP_COUNT] = {
    [LW_OP_GET_ROWS] = "get_rows",
    [LW_OP_RMS_NORM] = "rms_norm",
    [LW_OP_MUL_MAT] = "mul_mat",
    [LW_OP_ADD] = "add",
    [LW_OP_ROPE] = "rope",
    [LW_OP_KV_STORE] = "kv_store",
    [LW_OP_ATTN] = "attn",
    [LW_OP_SWIGLU] = "swiglu",
    [LW_OP_OUT_ROWS] = "out_rows",
    [LW_OP_SCALE] = "scale",
    [LW_OP_GEGLU] = "geglu",
    [LW_OP_SOFTCAP] = "softcap",
    [LW_OP_SOFTMAX] = "soft_max",
    [LW_OP_TOPK] = "argsort_top_k",
    [LW_OP_MOE_WEIGHTS] = "moe_weights",
    [LW_OP_MUL_MAT_ID] = "mul_mat_id",
    [LW_OP_MOE_SUM] = "moe_sum",
    [LW_OP_GELU] = "gelu",
    [LW_OP_MUL] = "mul",
};

const char *lw__op_name(lw__op op) {
    return (unsigned)op < LW_OP_COUNT ? op_names[op] : "?";
}

/* ---------------------------------------------------------------------------------------------------------
 * Building
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__graph_init(lw__graph *g, const lw_allocator *alloc, int32_t cap_tensors, int32_t cap_nodes) {
    memset(g, 0, sizeof(*g));
    g->cur_layer = -1;
    g->alloc = lw__allocator_or_default(alloc);
    if (cap_tensors <= 0 || cap_nodes <= 0) return LW_ERR_INVALID_ARG;
    g->t = lw__calloc(&g->alloc, (size_t)cap_tensors, sizeof(lw__tensor));
    g->nodes = lw__calloc(&g->alloc, (size_t)cap_nodes, sizeof(lw__node));
    if (!g->t || !g->nodes) {
        lw__graph_free(g);
        return LW_ERR_NOMEM;
    }
    g->cap_t = cap_tensors;
    g->cap_nodes = cap_nodes;
    g->cur_layer = -1;
    return LW_OK;
}

void lw__graph_free(lw__graph *g) {
    if (!g) return;
    lw__free(&g->alloc, g->t);
    lw__free(&g->alloc, g->nodes);
    g->t = NULL;
    g->nodes = NULL;
    g->n_t = g->cap_t = g->n_nodes = g->cap_nodes = 0;
}

static int32_t new_tensor(lw__graph *g, const char *name, uint32_t type, int64_t ne0) {
    if (g->status != LW_OK) return -1;
    if (g->n_t >= g->cap_t) {
        g->status = LW_ERR_TOO_LARGE;
        return -1;
    }
    const lw_type_info *ti = lw_type_get(type);
    if (!ti || ne0 <= 0 || ne0 % ti->block_size) {
        g->status = LW_ERR_BAD_DIMS;
        return -1;
    }
    uint64_t rb;
    if (!lw__mul_u64((uint64_t)(ne0 / ti->block_size), ti->type_size, &rb) || rb > SIZE_MAX) {
        g->status = LW_ERR_OVERFLOW;
        return -1;
    }
    lw__tensor *t = &g->t[g->n_t];
    memset(t, 0, sizeof(*t));
    t->name = name;
    t->type = type;
    t->ne0 = ne0;
    t->row_bytes = (size_t)rb;
    t->first = t->last = -1;
    t->layer = g->cur_layer;
    return g->n_t++;
}

int32_t lw__graph_weight(lw__graph *g, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                         void *data) {
    int32_t i = new_tensor(g, name, type, ne0);
    if (i < 0) return -1;
    g->t[i].kind = LW_T_WEIGHT;
    g->t[i].ne1 = ne1;
    g->t[i].data = data;
    return i;
}

int32_t lw__graph_act(lw__graph *g, const char *name, int64_t ne0, lw__rows rows) {
    return lw__graph_act_typed(g, name, LW_TYPE_F32, ne0, rows);
}

int32_t lw__graph_act_typed(lw__graph *g, const char *name, uint32_t type, int64_t ne0, lw__rows rows) {
    int32_t i = new_tensor(g, name, type, ne0);
    if (i < 0) return -1;
    g->t[i].kind = LW_T_ACT;
    g->t[i].rows = (uint8_t)rows;
    return i;
}

lw__node *lw__graph_node(lw__graph *g, lw__op op, int32_t dst, int32_t s0, int32_t s1, int32_t s2) {
    if (g->status != LW_OK) return NULL;
    if (g->n_nodes >= g->cap_nodes) {
        g->status = LW_ERR_TOO_LARGE;
        return NULL;
    }
    int32_t ids[4] = {dst, s0, s1, s2};
    for (int k = 0; k < 4; k++)
        if (ids[k] < -1 || ids[k] >= g->n_t) {
            g->status = LW_ERR_INVALID_ARG;
            return NULL;
        }
    lw__node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof(*n));
    n->op = (uint8_t)op;
    n->dst = dst;
    n->src[0] = s0;
    n->src[1] = s1;
    n->src[2] = s2;
    return n;
}

/* ---------------------------------------------------------------------------------------------------------
 * Planner
 * ------------------------------------------------------------------------------------------------------- */

/* A free block of the arena. */
typedef struct fblock {
    uint64_t off;  /* start  */
    uint64_t size; /* bytes  */
} fblock;

/* The free list during planning: blocks sorted by offset, never adjacent (merged on release). */
typedef struct flist {
    fblock *b;    /* blocks                          */
    int32_t n;    /* used                            */
    uint64_t top; /* arena size so far               */
} flist;

/* Takes size bytes (a multiple of the alignment): the smallest free block that fits, else the free block
 * touching the top (grown), else new space at the top. */
static uint64_t fl_take(flist *fl, uint64_t size) {
    int32_t best = -1;
    for (int32_t i = 0; i < fl->n; i++)
        if (fl->b[i].size >= size && (best < 0 || fl->b[i].size < fl->b[best].size)) best = i;
    if (best >= 0) {
        uint64_t off = fl->b[best].off;
        fl->b[best].off += size;
        fl->b[best].size -= size;
        if (fl->b[best].size == 0) {
            memmove(&fl->b[best], &fl->b[best + 1], (size_t)(fl->n - best - 1) * sizeof(fblock));
            fl->n--;
        }
        return off;
    }
    if (fl->n > 0 && fl->b[fl->n - 1].off + fl->b[fl->n - 1].size == fl->top) {
        uint64_t off = fl->b[fl->n - 1].off;
        fl->n--;
        fl->top = off + size;
        return off;
    }
    uint64_t off = fl->top;
    fl->top += size;
    return off;
}

/* Returns a block, merging it with its neighbours. The list has room for one more block. */
static void fl_give(flist *fl, uint64_t off, uint64_t size) {
    int32_t i = 0;
    while (i < fl->n && fl->b[i].off < off) i++;
    int merge_prev = i > 0 && fl->b[i - 1].off + fl->b[i - 1].size == off;
    int merge_next = i < fl->n && off + size == fl->b[i].off;
    if (merge_prev && merge_next) {
        fl->b[i - 1].size += size + fl->b[i].size;
        memmove(&fl->b[i], &fl->b[i + 1], (size_t)(fl->n - i - 1) * sizeof(fblock));
        fl->n--;
    } else if (merge_prev) {
        fl->b[i - 1].size += size;
    } else if (merge_next) {
        fl->b[i].off = off;
        fl->b[i].size += size;
    } else {
        memmove(&fl->b[i + 1], &fl->b[i], (size_t)(fl->n - i) * sizeof(fblock));
        fl->b[i].off = off;
        fl->b[i].size = size;
        fl->n++;
    }
}

lw_status lw__graph_plan(lw__graph *g, int64_t max_tokens, int64_t max_outputs, uint64_t align) {
    if (g->status != LW_OK) return g->status;
    if (max_tokens <= 0 || max_outputs <= 0 || max_outputs > max_tokens || !align || (align & (align - 1)))
        return LW_ERR_INVALID_ARG;

    /* lifetimes and sizes */
    for (int32_t i = 0; i < g->n_t; i++) {
        lw__tensor *t = &g->t[i];
        t->first = t->last = -1;
        if (t->kind == LW_T_WEIGHT) continue;
        t->ne1 = t->rows == LW_ROWS_OUTPUTS ? max_outputs : max_tokens;
        uint64_t bytes;
        if (!lw__mul_u64((uint64_t)t->ne1, t->row_bytes, &bytes) || !lw__align_up_u64(bytes, align, &t->size))
            return LW_ERR_OVERFLOW;
    }
    for (int32_t n = 0; n < g->n_nodes; n++) {
        const lw__node *nd = &g->nodes[n];
        if (nd->dst >= 0) {
            lw__tensor *t = &g->t[nd->dst];
            if (t->kind == LW_T_WEIGHT) return LW_ERR_INVALID_ARG; /* weights are read-only */
            if (t->first < 0) t->first = n;
        }
        for (int k = 0; k < 3; k++)
            if (nd->src[k] >= 0) {
                lw__tensor *t = &g->t[nd->src[k]];
                if (t->kind != LW_T_WEIGHT && t->first < 0)
                    return LW_ERR_INVALID_ARG; /* read before written */
                t->last = n;
            }
    }

    /* walk the nodes, placing outputs before releasing inputs */
    flist fl = {0};
    fl.b = lw__calloc(&g->alloc, (size_t)g->n_t + 1, sizeof(fblock));
    if (!fl.b) return LW_ERR_NOMEM;
    for (int32_t n = 0; n < g->n_nodes; n++) {
        const lw__node *nd = &g->nodes[n];
        if (nd->dst >= 0 && g->t[nd->dst].first == n) {
            lw__tensor *t = &g->t[nd->dst];
            uint64_t before = fl.top;
            t->offset = fl_take(&fl, t->size);
            if (fl.top < before) { /* cannot happen; guards the arithmetic */
                lw__free(&g->alloc, fl.b);
                return LW_ERR_OVERFLOW;
            }
        }
        for (int k = 0; k < 3; k++) {
            int32_t s = nd->src[k];
            if (s < 0 || g->t[s].kind != LW_T_ACT || g->t[s].last != n) continue;
            int dup = 0; /* the same tensor twice in one node: release once */
            for (int j = 0; j < k; j++) dup |= nd->src[j] == s;
            if (!dup) fl_give(&fl, g->t[s].offset, g->t[s].size);
        }
        /* an output nobody reads is still released (unless it is a kept output) */
        if (nd->dst >= 0 && g->t[nd->dst].kind == LW_T_ACT && g->t[nd->dst].last < 0 &&
            g->t[nd->dst].first == n)
            fl_give(&fl, g->t[nd->dst].offset, g->t[nd->dst].size);
    }
    g->arena_size = fl.top;
    lw__free(&g->alloc, fl.b);
    return LW_OK;
}

void lw__graph_bind(lw__graph *g, void *base) {
    for (int32_t i = 0; i < g->n_t; i++)
        if (g->t[i].kind != LW_T_WEIGHT) g->t[i].data = (uint8_t *)base + g->t[i].offset;
}
