/* WebGPU model runner: what each graph op dispatches. At plan time (prepare) a node gets its pipelines and
 * bind groups; per step (record) only the parameter blocks and grids are computed by the kernel families'
 * *_plan() functions and the dispatches recorded. Kernels: mat-vec (kernels.h), ops (kernels-ops.h),
 * attention (kernels-attn.h). */
#include "webgpu/gpu-model-impl.h"
#include "webgpu/gpu-tune.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------------- */

/* Rows tensor t has in a step of n_tokens tokens (the runner's output rows are the last token's only). */
static uint64_t rows_of(const lw__gpu_model *g, int32_t t, int32_t n_tokens) {
    return g->graph.t[t].rows == LW_ROWS_OUTPUTS ? 1u : (uint64_t)n_tokens;
}

static bool is_weight(const lw__gpu_model *g, int32_t t) {
    return t >= 0 && g->graph.t[t].kind == LW_T_WEIGHT;
}

/* The binding of tensor t: an activation's range, or a weight's only piece (small vectors: norms, biases,
 * frequency factors are never split); absent inputs get the dummy buffer. */
lw_gpu_bind lw__gm_bind_of(const lw__gpu_model *g, int32_t t) {
    if (t < 0) return lw__gm_whole(g->dummy);
    if (is_weight(g, t)) return lw__gm_piece(g, g->loc[t].piece0);
    return lw__gm_act(g, t);
}

/* ---------------------------------------------------------------------------------------------------------
 * Which ops run here
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__gm_check_ops(lw__gpu_model *g) {
    /* gemma4 runs on the CPU engine only: no GPU kernels for its blocks' own head sizes, shared KV caches,
     * per-layer input ops (GELU, MUL) yet */
    if (!strcmp(g->m->arch->name, "gemma4"))
        return lw__errorf(g->err, LW_ERR_UNSUPPORTED,
                          "gemma4 is not supported on WebGPU yet (per-block head sizes, shared KV caches, "
                          "per-layer input); run it on the CPU engine");
    const lw__graph *gr = &g->graph;
    for (int32_t i = 0; i < gr->n_nodes; i++) {
        const lw__node *nd = &gr->nodes[i];
        switch (nd->op) {
        case LW_OP_MUL_MAT:
        case LW_OP_GET_ROWS: {
            const lw__tensor *w = &gr->t[nd->src[0]];
            if (!lw__gpu_format_of(w->type))
                return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "%s: weight type %s has no WGSL kernel yet",
                                  w->name, lw_type_get(w->type)->name);
            break;
        }
        case LW_OP_ATTN:
            if (!lw__gpu_attn_supported(g->kv_type, (uint32_t)nd->ip[3], (uint32_t)(nd->ip[1] / nd->ip[2])))
                return lw__errorf(g->err, LW_ERR_UNSUPPORTED,
                                  "attention with head dim %d, group %d is not supported (%s KV cache%s)",
                                  nd->ip[3], nd->ip[1] / nd->ip[2], lw_type_get(g->kv_type)->name,
                                  lw__gpu_kv_block_words(g->kv_type) ? ": head dims of multiples of 32" : "");
            break;
        case LW_OP_RMS_NORM:
        case LW_OP_ADD:
        case LW_OP_ROPE:
        case LW_OP_KV_STORE:
        case LW_OP_SWIGLU:
        case LW_OP_OUT_ROWS:
        case LW_OP_SCALE:
        case LW_OP_GEGLU:
        case LW_OP_SOFTCAP:
            break;
        default:
            return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "op %s has no GPU kernel",
                              lw__op_name((lw__op)nd->op));
        }
    }
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Fusion (plan time): consecutive nodes that one fused kernel of kernels-ops.h runs in one dispatch
 * ------------------------------------------------------------------------------------------------------- */

/* Index of the node that writes tensor t (-1: none, e.g. an input); a part of a fused output is written
 * with it. */
static int32_t producer(const lw__gpu_model *g, int32_t t) {
    t = lw__gm_base(g, t);
    for (int32_t j = 0; j < g->graph.n_nodes; j++)
        if (g->graph.nodes[j].dst == t) return j;
    return -1;
}

/* Whether activation t is a part of a fused projection's output (addressed by offset and stride). */
static bool is_part(const lw__gpu_model *g, int32_t t) {
    return lw__gm_base(g, t) != t;
}

/* Whether any node other than `except` reads tensor t. */
static bool read_elsewhere(const lw__graph *gr, int32_t t, int32_t except) {
    for (int32_t j = 0; j < gr->n_nodes; j++)
        for (int k = 0; j != except && k < 3; k++)
            if (gr->nodes[j].src[k] == t) return true;
    return false;
}

/* Whether two bindings share bytes of one buffer (WebGPU refuses overlapping writable bindings). */
static bool overlaps(lw_gpu_bind a, lw_gpu_bind b) {
    return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

/* Where the KV_STOREs of a rope_qkv match from node i are: after the two ROPEs, or after phi3's SCALE of
 * the rotated Q (which stays a node of its own, recorded after the fused call). */
static int32_t rope_qkv_gap(const lw__graph *gr, int32_t i) {
    const lw__node *nd = &gr->nodes[i];
    return i + 4 < gr->n_nodes && nd[2].op == LW_OP_SCALE && nd[2].src[0] == nd[0].dst ? 1 : 0;
}

/* Whether the q, k and v of a rope_qkv match from node i are the parts of one fused QKV output: the
 * qkv_one variant reads all three from its binding 0. */
static bool rope_qkv_one(const lw__gpu_model *g, int32_t i);

/* The per-head RMS_NORM node writing input t (Q or K) of a rope_qkv match from node i that the qk_norm
 * variant can do: it normalises a part of a fused output in groups of head_dim hd with a weight of hd,
 * and only ROPE node `rope` reads its output; -1 when none. */
static int32_t qk_norm_node(const lw__gpu_model *g, int32_t t, int32_t rope, int64_t hd) {
    const lw__graph *gr = &g->graph;
    const int32_t a = t >= 0 && !is_part(g, t) ? producer(g, t) : -1;
    if (a < 0) return -1;
    const lw__node *n = &gr->nodes[a];
    if (n->op != LW_OP_RMS_NORM || n->ip[0] != hd || n->src[1] < 0 || !is_weight(g, n->src[1]) ||
        gr->t[n->src[1]].type != LW_TYPE_F32 || gr->t[n->src[1]].ne0 != hd || gr->t[n->src[1]].ne1 != 1 ||
        !is_part(g, n->src[0]) || read_elsewhere(gr, t, rope))
        return -1;
    return a;
}

/* Whether the Q and K of the rope_qkv match from node i come from per-head RMS_NORMs of parts of the fused
 * output that also holds V (qwen3, gemma3): the qkv_one + qk_norm variant reads q, k, v there and does the
 * norms. *qa, *ka: the two norm nodes. */
static bool rope_qkv_norms(const lw__gpu_model *g, int32_t i, int32_t *qa, int32_t *ka) {
    const lw__node *nd = &g->graph.nodes[i], *kv = nd + 2 + rope_qkv_gap(&g->graph, i);
    *qa = qk_norm_node(g, nd[0].src[0], i, nd[0].ip[1]);
    *ka = qk_norm_node(g, nd[1].src[0], i + 1, nd[0].ip[1]);
    if (*qa < 0 || *ka < 0) return false;
    const lw__node *a = &g->graph.nodes[*qa], *b = &g->graph.nodes[*ka];
    const int32_t base = lw__gm_base(g, a->src[0]);
    return a->fp[0] == b->fp[0] && lw__gm_base(g, b->src[0]) == base && lw__gm_base(g, kv[1].src[0]) == base;
}

/* The ADD node whose output holds the q, k and v of the rope_qkv match from node i as parts, adding joined
 * biases to a fused Q|K|V output (qwen2, gpu-model-fuse.c) and read by the match only: the qkv_bias variant
 * adds them itself, reading that fused output; -1 when none. */
static int32_t rope_qkv_bias(const lw__gpu_model *g, int32_t i) {
    const lw__graph *gr = &g->graph;
    const lw__node *nd = &gr->nodes[i], *kv = nd + 2 + rope_qkv_gap(gr, i);
    const int32_t b2 = lw__gm_base(g, nd[0].src[0]);
    if (b2 == nd[0].src[0] || lw__gm_base(g, nd[1].src[0]) != b2 || lw__gm_base(g, kv[1].src[0]) != b2)
        return -1;
    const int32_t a = producer(g, b2);
    if (a < 0 || a >= i) return -1;
    const lw__node *add = &gr->nodes[a];
    const int32_t b = add->src[0], w = add->src[1];
    if (add->op != LW_OP_ADD || add->dst != b2 || b < 0 || w < 0 || gr->t[b].kind != LW_T_ACT ||
        is_part(g, b) || !is_weight(g, w) || gr->t[w].type != LW_TYPE_F32 || gr->t[w].ne1 != 1 ||
        gr->t[w].ne0 != gr->t[b2].ne0 || gr->t[b].ne0 != gr->t[b2].ne0 || gr->t[b].rows != gr->t[b2].rows)
        return -1;
    const int32_t kv_v = (int32_t)(kv + 1 - gr->nodes);
    for (int32_t r = 0; r < gr->n_nodes; r++) /* the biased rows are read by the match only */
        for (int k = 0; k < 3; k++)
            if (gr->nodes[r].src[k] >= 0 && lw__gm_base(g, gr->nodes[r].src[k]) == b2 && r != i &&
                r != i + 1 && r != kv_v)
                return -1;
    return a;
}

static bool rope_qkv_one(const lw__gpu_model *g, int32_t i) {
    const lw__node *nd = &g->graph.nodes[i], *kv = nd + 2 + rope_qkv_gap(&g->graph, i);
    const int32_t b = lw__gm_base(g, nd[0].src[0]);
    int32_t qa, ka;
    return (b != nd[0].src[0] && lw__gm_base(g, nd[1].src[0]) == b && lw__gm_base(g, kv[1].src[0]) == b) ||
           rope_qkv_norms(g, i, &qa, &ka);
}

/* The SCALE node between a rope_qkv match's ROPEs and KV_STOREs (phi3, gemma) that its q_out can take
 * (q_scale): it reads the rotated Q, the only reader of it, and writes as many rows; -1 when none. Then the
 * rotated Q itself is never written. */
static int32_t rope_qkv_scale(const lw__gpu_model *g, int32_t i) {
    const lw__graph *gr = &g->graph;
    const lw__node *nd = &gr->nodes[i];
    if (!rope_qkv_gap(gr, i) || nd[2].dst < 0 || nd[0].dst < 0 ||
        gr->t[nd[2].dst].rows != gr->t[nd[0].dst].rows || is_part(g, nd[2].dst) ||
        read_elsewhere(gr, nd[0].dst, i + 2))
        return -1;
    return i + 2;
}

/* The rope_qkv bindings of the nodes from i: q, ff, q_out, k, K cache, v, V cache, params; qkv_one: qkv,
 * ff, q_out, K cache, V cache, params. Returns how many. q_out: the folded SCALE's output, if any. */
static uint32_t rope_qkv_binds(const lw__gpu_model *g, int32_t i, lw_gpu_bind b[LW_GPU_ROPE_QKV_BINDINGS]) {
    const lw__node *nd = &g->graph.nodes[i], *kv = nd + 2 + rope_qkv_gap(&g->graph, i);
    const uint32_t n_layer = g->m->hp.n_layer, il = (uint32_t)kv[0].ip[0];
    const int32_t sc = rope_qkv_scale(g, i), q_out = sc >= 0 ? g->graph.nodes[sc].dst : nd[0].dst;
    int32_t qa, ka;
    if (rope_qkv_one(g, i)) {
        const bool norms = rope_qkv_norms(g, i, &qa, &ka);     /* q, k: the norms' inputs */
        const int32_t bias = norms ? -1 : rope_qkv_bias(g, i); /* q, k, v: parts of the ADD's input */
        b[0] = lw__gm_act(g, norms       ? g->graph.nodes[qa].src[0]
                             : bias >= 0 ? g->graph.nodes[bias].src[0]
                                         : nd[0].src[0]);
        b[1] = lw__gm_rope_bind(g, i, lw__gm_bind_of(g, nd[0].src[1]));
        b[2] = lw__gm_act(g, q_out);
        b[3] = lw__gm_whole(g->kv[il]);
        b[4] = lw__gm_whole(g->kv[n_layer + il]);
        b[5] = lw__gm_params(g);
        if (bias >= 0) {
            b[6] = lw__gm_bind_of(g, g->graph.nodes[bias].src[1]);
            return LW_GPU_ROPE_QKV_ONE_BINDINGS + 1;
        }
        if (!norms) return LW_GPU_ROPE_QKV_ONE_BINDINGS;
        b[6] = lw__gm_bind_of(g, g->graph.nodes[qa].src[1]);
        b[7] = lw__gm_bind_of(g, g->graph.nodes[ka].src[1]);
        return LW_GPU_ROPE_QKV_NORM_BINDINGS;
    }
    b[0] = lw__gm_act(g, nd[0].src[0]);
    b[1] = lw__gm_rope_bind(g, i, lw__gm_bind_of(g, nd[0].src[1]));
    b[2] = lw__gm_act(g, q_out);
    b[3] = lw__gm_act(g, nd[1].src[0]);
    b[4] = lw__gm_whole(g->kv[il]);
    b[5] = lw__gm_act(g, kv[1].src[0]);
    b[6] = lw__gm_whole(g->kv[n_layer + il]);
    b[7] = lw__gm_params(g);
    return LW_GPU_ROPE_QKV_BINDINGS;
}

/* Nodes from i are ROPE(Q), ROPE(K), (SCALE(Q),) KV_STORE(K rotated), KV_STORE(V) of one layer, the two ROPEs
 * differ only in their head count, the rotated K is read by its KV_STORE only, K and V are written before
 * node i (the fused call runs at node i) and the activation bindings are disjoint: then rope_qkv does all
 * four. */
/* Whether tensors a and b hold the same data: one tensor, or two references to one weight (the graph
 * builders make a tensor per use of a weight, e.g. rope_freqs for both ROPEs). */
static bool same_tensor(const lw__gpu_model *g, int32_t a, int32_t b) {
    if (a == b) return true;
    if (a < 0 || b < 0) return false;
    const lw__tensor *x = &g->graph.t[a], *y = &g->graph.t[b];
    return x->kind == LW_T_WEIGHT && y->kind == LW_T_WEIGHT && x->offset == y->offset && x->type == y->type &&
           x->ne0 == y->ne0 && x->ne1 == y->ne1;
}

static bool rope_qkv_shape(const lw__gpu_model *g, int32_t i) {
    const lw__graph *gr = &g->graph;
    /* (Q8_0 / Q4_0 caches too: rope_qkv then takes a 32-element block per work item; the matches built on
     * it that store cells an element or a quad at a time, the norm mat-vec's ROPE_OUT epilogue and the
     * decode attention's RoPE prologue, check the cache type themselves) */
    if (i + 3 >= gr->n_nodes) return false;
    const lw__node *nd = &gr->nodes[i];
    const int32_t s = rope_qkv_gap(gr, i); /* the KV_STOREs are nodes i + 2 + s, i + 3 + s */
    const lw__node *kv = nd + 2 + s;
    if (nd[0].op != LW_OP_ROPE || nd[1].op != LW_OP_ROPE || kv[0].op != LW_OP_KV_STORE ||
        kv[1].op != LW_OP_KV_STORE)
        return false;
    if (kv[0].src[0] != nd[1].dst || kv[0].ip[1] != 0 || kv[1].ip[1] != 1 || kv[0].ip[0] != kv[1].ip[0])
        return false;
    if (!same_tensor(g, nd[0].src[1], nd[1].src[1]) ||
        memcmp(&nd[0].ip[1], &nd[1].ip[1], 3 * sizeof nd[0].ip[0]) ||
        memcmp(nd[0].fp, nd[1].fp, 6 * sizeof nd[0].fp[0]))
        return false;
    if (nd[0].dst < 0 || nd[1].dst < 0 || is_weight(g, nd[0].src[0]) || is_weight(g, nd[1].src[0]) ||
        is_weight(g, kv[1].src[0]) || read_elsewhere(gr, nd[1].dst, i + 2 + s))
        return false;
    if (producer(g, nd[1].src[0]) >= i || producer(g, kv[1].src[0]) >= i) return false;
    return (uint32_t)kv[0].ip[0] < g->m->hp.n_layer;
}

/* ... with bindings that do not overlap (the planned activation ranges) */
static bool match_rope_qkv(const lw__gpu_model *g, int32_t i) {
    if (!rope_qkv_shape(g, i)) return false;
    lw_gpu_bind b[LW_GPU_ROPE_QKV_BINDINGS];
    const bool one = rope_qkv_binds(g, i, b) != LW_GPU_ROPE_QKV_BINDINGS;
    static const int rw[4] = {0, 2, 3, 5}; /* the activation bindings (all writable) */
    const int n_rw = one ? 2 : 4;          /* qkv_one: qkv, q_out */
    for (int x = 0; x < n_rw; x++)
        for (int y = x + 1; y < n_rw; y++)
            if (overlaps(b[rw[x]], b[rw[y]])) return false;
    return true;
}

int32_t lw__gm_bias_fold(const lw__gpu_model *g, int32_t a) {
    const lw__graph *gr = &g->graph;
    if (gr->nodes[a].op != LW_OP_ADD || gr->nodes[a].dst < 0) return -1;
    for (int32_t j = a + 1; j < gr->n_nodes; j++)
        if (gr->nodes[j].op == LW_OP_ROPE && lw__gm_base(g, gr->nodes[j].src[0]) == gr->nodes[a].dst)
            return rope_qkv_shape(g, j) && rope_qkv_bias(g, j) == a ? j : -1;
    return -1;
}

int32_t lw__gm_rope_qkv_scale(const lw__gpu_model *g, int32_t i) {
    return g->graph.nodes[i].op == LW_OP_ROPE && rope_qkv_shape(g, i) ? rope_qkv_scale(g, i) : -1;
}

int32_t lw__gm_rope_qkv_plain(const lw__gpu_model *g, int32_t i) {
    const lw__graph *gr = &g->graph;
    if (i < 0 || gr->nodes[i].op != LW_OP_ROPE || !rope_qkv_shape(g, i) || !rope_qkv_one(g, i)) return -1;
    int32_t qa, ka;
    if (rope_qkv_norms(g, i, &qa, &ka) || rope_qkv_bias(g, i) >= 0) return -1;
    const int32_t sc = rope_qkv_scale(g, i);
    if (gr->nodes[i].dst < 0 || (rope_qkv_gap(gr, i) && sc < 0)) return -1; /* a SCALE it cannot take */
    return sc >= 0 ? gr->nodes[sc].dst : gr->nodes[i].dst;
}

/* The add_input norm bindings of ADD node i and RMS_NORM node i + 1: a, w, d, b, sum, params. */
static void add_norm_binds(const lw__gpu_model *g, int32_t i, lw_gpu_bind b[LW_GPU_NORM_ADD_BINDINGS]) {
    const lw__node *nd = &g->graph.nodes[i];
    b[0] = lw__gm_act(g, nd[0].src[0]);
    b[1] = lw__gm_bind_of(g, nd[1].src[1]);
    b[2] = lw__gm_act(g, nd[1].dst);
    b[3] = lw__gm_act(g, nd[0].src[1]);
    b[4] = lw__gm_act(g, nd[0].dst);
    b[5] = lw__gm_params(g);
}

/* (lw__gm_add_norm_shape: gpu-model-impl.h.) Then the norm's add_input variant computes the sum, stores
 * it and normalises it at node i + 1. Nothing runs between the two, so the ADD's inputs are intact there;
 * their ranges must not overlap the norm's output (plan_acts gives the norm's output another colour than
 * the ADD's inputs for that), else the two stay separate. */
bool lw__gm_add_norm_shape(const lw__gpu_model *g, int32_t i) {
    const lw__graph *gr = &g->graph;
    if (i < 0 || i + 1 >= gr->n_nodes) return false;
    const lw__node *nd = &gr->nodes[i];
    if (nd[0].op != LW_OP_ADD || nd[1].op != LW_OP_RMS_NORM || nd[1].src[0] != nd[0].dst || nd[0].dst < 0 ||
        nd[1].dst < 0 || nd[0].src[0] < 0 || nd[0].src[1] < 0 || is_weight(g, nd[0].src[0]) ||
        is_weight(g, nd[0].src[1]) || is_part(g, nd[0].src[0]) || is_part(g, nd[0].src[1]))
        return false;
    const uint8_t rows = gr->t[nd[0].dst].rows;
    if (gr->t[nd[0].src[0]].rows != rows || gr->t[nd[0].src[1]].rows != rows ||
        gr->t[nd[1].dst].rows != rows || gr->t[nd[0].src[0]].ne0 != gr->t[nd[0].dst].ne0 ||
        gr->t[nd[0].src[1]].ne0 != gr->t[nd[0].dst].ne0)
        return false;
    return true;
}

static bool match_add_norm(const lw__gpu_model *g, int32_t i) {
    if (!lw__gm_add_norm_shape(g, i)) return false;
    lw_gpu_bind b[LW_GPU_NORM_ADD_BINDINGS];
    add_norm_binds(g, i, b);
    static const int rw[4] = {0, 2, 3, 4}; /* the activation bindings (all writable) */
    for (int x = 0; x < 4; x++)
        for (int y = x + 1; y < 4; y++)
            if (overlaps(b[rw[x]], b[rw[y]])) return false;
    return true;
}

/* Rows of W per (prep, mat-mat) pair on the matrix units for products of k columns over pieces of `rows`
 * rows of row_bytes bytes: all of them, or fewer (a multiple of 128 where that leaves any; even where rows
 * have an odd byte count, MXFP4's 17-byte blocks: a part starts at an even byte) where the piece's digits
 * with X's would exceed a binding (lw__gpu_smx_prep_bytes); 0 where not even X's digits fit. */
static uint64_t smx_sub_rows(const lw__gpu_model *g, uint64_t k, uint64_t rows, uint64_t row_bytes) {
    const uint64_t bind = g->info.max_storage_buffer_binding_size;
    uint64_t bytes, r;
    if (lw__gpu_smx_prep_bytes(k, g->n_batch, rows, &bytes) == LW_OK && bytes <= bind) return rows;
    if (lw__gpu_smx_prep_bytes(k, g->n_batch, 0, &bytes) != LW_OK || bytes >= bind || k < 2) return 0;
    r = (bind - bytes) / (4 * (k / 2 + 1)); /* each row: k / 2 words of digits and a max */
    if (r >= 256) r -= r % 128;
    while (r > 0 && (lw__gpu_smx_prep_bytes(k, g->n_batch, r, &bytes) != LW_OK || bytes > bind)) r--;
    if (row_bytes & 1) r &= ~(uint64_t)1;
    return r < rows ? r : rows;
}

/* The mat-mat tiles of a weight of format type: the tuned ones, but with raw activations (f32 products)
 * neither integer tiles nor the matrix units (they round X), and without the matrix units where no_smx. */
static lw__gpu_matmat_variant mm_tiles(const lw__gpu_model *g, const lw_gpu_info *info, uint32_t type,
                                       bool no_smx) {
    lw__gpu_tune t;
    if (g->p.tune)
        t = *g->p.tune;
    else
        lw__gpu_tune_init(&t);
    if (g->p.raw_acts) t.matmat[type][LW_GPU_TUNE_MM_IDOT] = 0;
    if (g->p.raw_acts || no_smx) t.matmat[type][LW_GPU_TUNE_MM_SMX] = 0;
    lw__gpu_matmat_variant v = lw__gpu_matmat_tuned(&t, info, type);
    v.f16 = v.f16 && g->f16;
    if (!g->p.raw_acts)
        lw__gpu_matmat_round_acts(&v);
    else
        v.idot = false, v.actq = LW_GPU_ACTQ_NONE; /* integer products round X */
    return v;
}

/* The mat-vec variant MUL_MAT node j runs: tuned for its weight, fitted to the model's switches. */
static lw__gpu_matvec_variant mm_variant(const lw__gpu_model *g, int32_t j) {
    const lw__tensor *w = &g->graph.t[g->graph.nodes[j].src[0]];
    lw__gpu_matvec_variant v = lw__gpu_matvec_tuned(g->p.tune, &g->info, w->type);
    v.f16 = v.f16 && g->f16;
    v.subgroups = v.subgroups && g->subgroups;
    if (!g->p.raw_acts) lw__gpu_matvec_round_acts(&v);
    /* the CPU's order where it has one for this weight: llama.cpp repacks weights of a multiple of 8 rows
     * that are not the tied embedding table (src/cpu/engine-ops.c) */
    v.exact = v.exact && !g->p.raw_acts && lw__gpu_matvec_has_exact(w->type, w->ne1 % 8 == 0 && !w->plain);
    /* integer products round x themselves (their own pass): not for raw activations, and only where x's rows
     * are whole blocks of the rounding */
    const uint32_t ab = lw__gpu_actq_block(v.actq);
    v.idot = v.idot && !v.exact && !g->p.raw_acts && ab && w->ne0 % ab == 0;
    v.pair = v.idot && (w->type == LW_TYPE_Q4_0 || w->type == LW_TYPE_Q8_0) && w->ne0 % 64 == 0;
    v.oct = v.oct && v.pair && w->ne0 % 256 == 0; /* (pieces are bound at 256-byte offsets: rows align) */
    lw__gpu_matvec_shape(g->p.tune, &g->info, &v, (uint64_t)w->ne0);
    return v;
}

/* The 8-bit kind in which RMS_NORM node i can round its output for the integer mat-vecs that read it
 * (Q8_OUT), or 0: a whole-row norm whose every reader is such a mat-vec of one kind (its x). (Whether the
 * scratch still holds it when a reader runs is tracked while recording: lw__gpu_model.q8_tensor.) */
static uint32_t norm_q8_kind(const lw__gpu_model *g, int32_t i) {
    const lw__graph *gr = &g->graph;
    const int32_t d = gr->nodes[i].dst;
    if (d < 0 || lw__gm_base(g, d) != d || (gr->nodes[i].ip[0] && gr->nodes[i].ip[0] != gr->t[d].ne0))
        return 0;
    uint32_t kind = 0;
    for (int32_t j = i + 1; j < gr->n_nodes; j++)
        for (int k = 0; k < 3; k++) {
            if (gr->nodes[j].src[k] != d) continue;
            if (gr->nodes[j].op != LW_OP_MUL_MAT || k != 1) return 0;
            const lw__gpu_matvec_variant v = mm_variant(g, j);
            if (!v.idot || (kind && v.actq != kind)) return 0;
            kind = v.actq;
        }
    return kind;
}

/* The norm mat-vec variant for weight w (the device's default, tune keys nwg / nrows / npre applied; for a
 * Q|K|V projection, qkv, also qnwg / qnrows). */
static lw__gpu_matvec_norm_variant norm_variant(const lw__gpu_model *g, int32_t w, bool add, bool glu,
                                                bool qkv) {
    const lw__tensor *t = &g->graph.t[w];
    lw__gpu_matvec_norm_variant v =
        lw__gpu_matvec_norm_default(&g->info, t->type, (uint32_t)t->ne0, add, g->subgroups, glu);
    lw__gpu_matvec_norm_tune(g->p.tune, t->type, qkv, &v);
    return v;
}

/* The MUL_MAT node whose one-row mat-vec can compute RMS_NORM node n in its prologue (see
 * lw__gm_plan_norm_mv), or -1. Readers of the norm's output that are the other parts of that mat-vec's
 * fused projection record nothing. */
static int32_t norm_mv_match(const lw__gpu_model *g, int32_t n) {
    const lw__graph *gr = &g->graph;
    const lw__node *nd = &gr->nodes[n];
    const int32_t d = nd->dst, x = nd->src[0], wn = nd->src[1];
    if (nd->op != LW_OP_RMS_NORM || d < 0 || x < 0 || wn < 0 || is_part(g, d) || is_part(g, x) ||
        is_weight(g, x) || !is_weight(g, wn) || gr->t[wn].type != LW_TYPE_F32 ||
        gr->t[wn].ne0 != gr->t[d].ne0 || gr->t[wn].ne1 != 1 || (nd->ip[0] && nd->ip[0] != gr->t[d].ne0) ||
        gr->t[x].ne0 != gr->t[d].ne0)
        return -1;
    int32_t m = -1;
    for (int32_t j = n + 1; j < gr->n_nodes; j++)
        for (int k = 0; k < 3; k++) {
            if (gr->nodes[j].src[k] != d) continue;
            if (gr->nodes[j].op != LW_OP_MUL_MAT || k != 1) return -1;
            if (g->nodes[j].fuse == GM_FUSE_DONE) continue; /* another part of m's projection */
            if (m >= 0) return -1;
            m = j;
        }
    if (m < 0) return -1;
    const int32_t w = gr->nodes[m].src[0];
    const lw__gpu_matvec_variant v = mm_variant(g, m);
    const uint32_t wt = gr->t[w].type;
    /* Q4_0 / Q8_0 block pairs, or Q8_K activations (which weight types the kernel takes: the check below) */
    const bool pair = v.pair && !v.oct && v.actq == LW_GPU_ACTQ_Q8_0;
    if (!v.idot || !(pair || v.actq == LW_GPU_ACTQ_Q8_K) || !lw__gpu_matvec_norm_tuned(g->p.tune, wt) ||
        g->loc[w].n_pieces != 1 || gr->t[w].ne0 != gr->t[d].ne0 ||
        gr->t[gr->nodes[m].dst].ne0 != gr->t[w].ne1)
        return -1;
    const lw__gpu_matvec_norm_variant nv = norm_variant(g, w, true, false, false);
    char why[LW_ERRMSG_SIZE];
    return lw__gpu_matvec_norm_check(&g->info, &nv, why) == LW_OK ? m : -1;
}

/* The down projection whose input the one-row call of MUL_MAT node m (norm in the prologue) can also produce
 * rounded (GLU_OUT), or -1: m's output is a fused gate|up of two parts [gate | up] that a SWIGLU reads whole,
 * and that SWIGLU's output is the x of an integer mat-vec rounding it to Q8_0 blocks (lw__gm_glu_match). */
static int32_t glu_down_match(const lw__gpu_model *g, int32_t m) {
    const lw__graph *gr = &g->graph;
    const int32_t y = gr->nodes[m].dst, w = gr->nodes[m].src[0];
    for (int32_t d = m + 1; d < gr->n_nodes; d++) {
        if (gr->nodes[d].op != LW_OP_MUL_MAT) continue;
        const int32_t s = lw__gm_glu_match(g, d);
        if (s < 0 || gr->nodes[s].op != LW_OP_SWIGLU || lw__gm_base(g, gr->nodes[s].src[0]) != y) continue;
        uint64_t go, uo, stride;
        lw__gm_part(g, gr->nodes[s].src[0], &go, &stride);
        lw__gm_part(g, gr->nodes[s].src[1], &uo, &stride);
        const int64_t f = gr->t[gr->nodes[d].src[1]].ne0;
        const lw__gpu_matvec_variant v = mm_variant(g, d);
        const lw__gpu_matvec_norm_variant nv = norm_variant(g, w, true, true, false);
        char why[LW_ERRMSG_SIZE];
        /* Q4_0 / Q8_0 gate|up: Q8_0 blocks for a Q8_0-activation down projection; Q4_K / Q5_K: Q8_0-style
         * blocks with the K formats' group words for a Q8_K-activation one (matvec-q8-norm.wgsl GLU_OUT) */
        const uint32_t wt = gr->t[w].type;
        const bool kq = wt == LW_TYPE_Q4_K || wt == LW_TYPE_Q5_K;
        if (!lw__gpu_matvec_glu_tuned(g->p.tune, &g->info, wt, (uint64_t)gr->t[w].ne0) || go != 0 ||
            uo != (uint64_t)f || gr->t[y].ne0 != 2 * f || f % 32 || !v.idot ||
            v.actq != (kq ? LW_GPU_ACTQ_Q8_K : LW_GPU_ACTQ_Q8_0) ||
            lw__gpu_matvec_norm_check(&g->info, &nv, why) != LW_OK)
            return -1;
        return d;
    }
    return -1;
}

/* The ROPE node whose rope_qkv call the one-row call of MUL_MAT node m (norm in the prologue) can do as its
 * epilogue (matvec-q8-norm.wgsl ROPE_OUT), or -1: m's whole output is a plain rope_qkv match's fused Q|K|V
 * (parts q, k, v at 0, n_q, n_q + n_k), read by that match alone, with NORMAL pairs (a pair is two
 * neighbouring rows, which one lane holds; NEOX pairs are half a head apart). */
static int32_t mv_rope_match(const lw__gpu_model *g, int32_t m) {
    const lw__graph *gr = &g->graph;
    const int32_t y = gr->nodes[m].dst, w = gr->nodes[m].src[0];
    /* (its epilogue stores f16 / f32 cells a quad at a time: a quantized cache's block needs all 32) */
    if (y < 0 || lw__gm_base(g, y) != y || lw__gpu_kv_block_words(g->kv_type) ||
        !lw__gpu_matvec_rope_tuned(g->p.tune, gr->t[w].type))
        return -1;
    int32_t r = m + 1;
    while (r < gr->n_nodes && !(gr->nodes[r].op == LW_OP_ROPE && lw__gm_base(g, gr->nodes[r].src[0]) == y))
        r++;
    if (r >= gr->n_nodes || lw__gm_rope_qkv_plain(g, r) < 0 || gr->nodes[r].ip[3] != LW_ROPE_NORMAL)
        return -1;
    const lw__node *nd = &gr->nodes[r];
    const int32_t vs = r + 3 + rope_qkv_gap(gr, r); /* KV_STORE(V) */
    uint64_t qo, ko, vo, stride;
    lw__gm_part(g, nd[0].src[0], &qo, &stride);
    lw__gm_part(g, nd[1].src[0], &ko, &stride);
    lw__gm_part(g, gr->nodes[vs].src[0], &vo, &stride);
    const uint64_t nq = (uint64_t)nd[0].ip[0] * (uint64_t)nd[0].ip[1],
                   nk = (uint64_t)nd[1].ip[0] * (uint64_t)nd[1].ip[1];
    if (qo != 0 || ko != nq || vo != nq + nk || (uint64_t)gr->t[y].ne0 != nq + 2 * nk || nd[0].ip[1] % 2)
        return -1;
    for (int32_t j = 0; j < gr->n_nodes; j++)
        for (int k = 0; k < 3; k++)
            if (j != r && j != r + 1 && j != vs && lw__gm_base(g, gr->nodes[j].src[k]) == y) return -1;
    return r;
}

lw_status lw__gm_plan_norm_mv(lw__gpu_model *g) {
    for (int32_t i = 0; i < g->graph.n_nodes; i++)
        g->nodes[i].norm_mv = g->nodes[i].norm_src = g->nodes[i].glu_down = g->nodes[i].mv_rope = -1;
    for (int32_t i = 0; i < g->graph.n_nodes; i++) {
        const int32_t m = norm_mv_match(g, i);
        if (m < 0) continue;
        g->nodes[i].norm_mv = m;
        g->nodes[m].norm_src = i;
        g->nodes[m].glu_down = glu_down_match(g, m);
        const int32_t r = g->nodes[m].glu_down < 0 ? mv_rope_match(g, m) : -1;
        if (r >= 0) g->nodes[m].mv_rope = r, g->nodes[r].mv_rope = m;
    }
    return LW_OK;
}

int32_t lw__gm_mv_rope_writer(const lw__gpu_model *g, int32_t n) {
    const lw__graph *gr = &g->graph;
    for (int32_t r = n - 2; r <= n; r += 2) /* the ROPE(Q) node itself, or its folded SCALE two nodes on */
        if (r >= 0 && gr->nodes[r].op == LW_OP_ROPE && g->nodes[r].mv_rope >= 0 && gr->nodes[n].dst >= 0 &&
            lw__gm_rope_qkv_plain(g, r) == gr->nodes[n].dst)
            return g->nodes[r].mv_rope;
    return -1;
}

/* Prepares MUL_MAT node i's one-row call with its norm in the prologue (the node's last call), or gives the
 * fusion up (both nodes back to their own calls) where the bindings would overlap. */
static lw_status prepare_norm_mv(lw__gpu_model *g, int32_t i, int32_t piece) {
    const lw__graph *gr = &g->graph;
    const int32_t n = g->nodes[i].norm_src;
    const lw__node *nd = &gr->nodes[i], *nn = &gr->nodes[n];
    const bool add = g->nodes[n].fuse == GM_FUSE_ADD_NORM; /* the ADD before it is done by the norm */
    gm_call c;
    memset(&c, 0, sizeof c);
    c.aux = piece;
    const bool glu = g->nodes[i].glu_down >= 0;
    const lw__gpu_matvec_norm_variant v = norm_variant(g, nd->src[0], add, glu, g->nodes[i].mv_rope >= 0);
    lw_gpu_bind b[LW_GPU_MAX_BINDINGS];
    uint32_t nb = 0;
    b[nb++] = lw__gm_piece(g, piece);
    if (add) {
        b[nb++] = lw__gm_act(g, nn[-1].src[0]);
        b[nb++] = lw__gm_act(g, nn[-1].src[1]);
        b[nb++] = lw__gm_act(g, nn[-1].dst);
    } else {
        b[nb++] = lw__gm_act(g, nn->src[0]);
    }
    const uint32_t acts = nb;
    b[nb++] = lw__gm_bind_of(g, nn->src[1]);
    const uint32_t yb = nb;
    b[nb++] = lw__gm_act(g, nd->dst);
    if (glu) b[nb++] = lw__gm_whole(g->actq_scratch); /* the down projection's rounded x */
    b[nb++] = lw__gm_params(g);
    for (uint32_t k = 1; k < acts; k++)
        if (overlaps(b[k], b[yb])) { /* planning keeps them apart: cannot happen */
            g->nodes[n].norm_mv = g->nodes[i].norm_src = g->nodes[i].glu_down = -1;
            return LW_OK;
        }
    c.v.mvn = v;
    lw_status st = lw__gpu_matvec_norm_pipeline(&g->gpu, &g->cache, &g->alloc, &v, &g->info, &c.pipe, g->err);
    if (st != LW_OK) return st;
    if ((st = lw__gm_add_call(g, &c, b, nb, false)) != LW_OK) return st;
    const int32_t r = g->nodes[i].mv_rope;
    if (r < 0) return LW_OK;
    /* then (last) the same call with rope_qkv's writes as its epilogue: y = q_out, the caches, ff */
    const lw__node *rn = &gr->nodes[r], *kv = rn + 2 + rope_qkv_gap(gr, r);
    const uint32_t n_layer = g->m->hp.n_layer, il = (uint32_t)kv[0].ip[0];
    c.v.mvn.rope = true;
    c.v.mvn.kv_f16 = g->kv_type == LW_TYPE_F16;
    nb = yb;
    b[nb++] = lw__gm_act(g, lw__gm_rope_qkv_plain(g, r));
    b[nb++] = lw__gm_whole(g->kv[il]);
    b[nb++] = lw__gm_whole(g->kv[n_layer + il]);
    b[nb++] = lw__gm_rope_bind(g, r, lw__gm_bind_of(g, rn->src[1]));
    b[nb++] = lw__gm_params(g);
    char why[LW_ERRMSG_SIZE];
    bool ok = lw__gpu_matvec_norm_check(&g->info, &c.v.mvn, why) == LW_OK;
    for (uint32_t k = 1; ok && k < acts; k++)
        ok = !overlaps(b[k], b[yb]); /* planning keeps them apart (plan_acts): cannot happen */
    if (ok && (st = lw__gpu_matvec_norm_pipeline(&g->gpu, &g->cache, &g->alloc, &c.v.mvn, &g->info, &c.pipe,
                                                 g->err)) != LW_OK)
        return st;
    if (!ok) {
        g->nodes[i].mv_rope = g->nodes[r].mv_rope = -1;
        return LW_OK;
    }
    return lw__gm_add_call(g, &c, b, nb, false);
}

/* Whether ATTN node i's REDUCE can round its one-token output for the integer mat-vec reading it (Q8_0 only:
 * a head's elements are whole blocks of 32): its output's only reader is a MUL_MAT over all of it. */
bool lw__gm_attn_q8(const lw__gpu_model *g, int32_t i, const lw__gpu_attn_variant *v) {
    const lw__graph *gr = &g->graph;
    const int32_t d = gr->nodes[i].dst;
    if (d < 0 || lw__gm_base(g, d) != d || v->head_dim % 32 || v->head_dim > 4 * v->wg_size) return false;
    int32_t reader = -1;
    for (int32_t j = 0; j < gr->n_nodes; j++)
        for (int k = 0; k < 3; k++)
            if (gr->nodes[j].src[k] == d) {
                if (reader >= 0 || k != 1 || gr->nodes[j].op != LW_OP_MUL_MAT) return false;
                reader = j;
            }
    if (reader < 0) return false;
    const lw__gpu_matvec_variant mv = mm_variant(g, reader);
    return mv.idot && mv.actq == LW_GPU_ACTQ_Q8_0 &&
           gr->t[gr->nodes[reader].src[0]].ne0 == (int64_t)gr->nodes[i].ip[1] * (int64_t)v->head_dim;
}

/* ---------------------------------------------------------------------------------------------------------
 * Preparing (plan time)
 * ------------------------------------------------------------------------------------------------------- */

/* The element-wise family's op for a graph op. */
static uint32_t elt_op(uint8_t op) {
    switch (op) {
    case LW_OP_ADD:
        return LW_GPU_ELT_ADD;
    case LW_OP_SCALE:
        return LW_GPU_ELT_SCALE;
    case LW_OP_SOFTCAP:
        return LW_GPU_ELT_SOFTCAP;
    case LW_OP_SWIGLU:
        return LW_GPU_ELT_SWIGLU;
    case LW_OP_GEGLU:
        return LW_GPU_ELT_GEGLU;
    default:
        return LW_GPU_ELT_COPY; /* OUT_ROWS */
    }
}

lw_status lw__gm_prepare_node(lw__gpu_model *g, int32_t i) {
    const lw__node *nd = &g->graph.nodes[i];
    const lw_gpu *gpu = &g->gpu;
    const lw_gpu_info *info = &g->info;
    gm_call c;
    memset(&c, 0, sizeof c);
    lw_status st = LW_OK;
    if (g->nodes[i].fuse == GM_FUSE_DONE) return LW_OK; /* an earlier node's call does its work */
    const int32_t bias_rope = nd->op == LW_OP_ADD ? lw__gm_bias_fold(g, i) : -1;
    if (bias_rope >= 0) { /* joined Q/K/V biases: the rope_qkv call adds them (qkv_bias) */
        lw__gpu_rope_qkv_variant v = lw__gpu_rope_qkv_default(info, g->kv_type);
        v.qkv_one = v.qkv_bias = true;
        lw_gpu_pipeline pipe; /* (cached for the ROPE node) */
        if ((st = lw__gpu_rope_qkv_pipeline(gpu, &g->cache, &g->alloc, &v, info, &pipe, g->err)) != LW_OK)
            return st;
        if (!match_rope_qkv(g, bias_rope)) /* planning kept the rows alive for it: cannot happen */
            return lw__errorf(g->err, LW_ERR_INVALID_ARG, "bias fold: rope_qkv bindings overlap at node %d",
                              bias_rope);
        g->nodes[i].fuse = GM_FUSE_DONE;
        return LW_OK;
    }
    if (nd->op == LW_OP_ADD && match_add_norm(g, i)) { /* the next node's norm computes the sum */
        g->nodes[i].fuse = GM_FUSE_DONE;
        g->nodes[i + 1].fuse = GM_FUSE_ADD_NORM;
        return LW_OK;
    }
    switch (nd->op) {
    case LW_OP_MUL_MAT: { /* per piece of the weight (a row range each): a mat-vec call, and a mat-mat call
                             for steps of several tokens when the graph is planned for them */
        const lw__tensor *w = &g->graph.t[nd->src[0]];
        gm_call mm = c;
        c.v.mv = mm_variant(g, i);
        g->nodes[i].exact = c.v.mv.exact;
        if ((st = lw__gpu_matvec_pipeline(gpu, &g->cache, &g->alloc, &c.v.mv, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        if (c.v.mv.idot) { /* calls[0]: x rounded into the scratch the mat-vecs read */
            gm_call q = c;
            if ((st = lw__gpu_actq_quant_pipeline(gpu, &g->cache, &g->alloc, c.v.mv.actq, 0, info, &q.pipe,
                                                  g->err)) != LW_OK)
                return st;
            lw_gpu_bind qb[3] = {lw__gm_act(g, nd->src[1]), lw__gm_whole(g->actq_scratch), lw__gm_params(g)};
            if ((st = lw__gm_add_call(g, &q, qb, 3, false)) != LW_OK) return st;
            g->nodes[i].q8 = true;
        }
        bool batched = g->n_batch > 1 && rows_of(g, nd->dst, 2) > 1;
        if (batched) { /* only where the mat-mat kernel takes the shape (e.g. k a multiple of its block) */
            mm.v.mm = mm_tiles(g, info, w->type, false);
            const gm_piece *pc = &g->pieces[g->loc[nd->src[0]].piece0];
            uint64_t rows_max = 0; /* the node's largest piece */
            for (int32_t k = 0; k < g->loc[nd->src[0]].n_pieces; k++)
                if ((uint64_t)g->pieces[pc - g->pieces + k].rows > rows_max)
                    rows_max = (uint64_t)g->pieces[pc - g->pieces + k].rows;
            const uint64_t sub =
                mm.v.mm.smx ? smx_sub_rows(g, (uint64_t)w->ne0, rows_max, (uint64_t)w->row_bytes) : 0;
            lw__gpu_matmat_shape sh = {mm.v.mm.smx && sub ? sub : (uint64_t)pc->rows,
                                       (uint64_t)w->ne0,
                                       g->n_batch,
                                       0,
                                       0,
                                       0,
                                       0,
                                       (uint64_t)w->ne1};
            lw__gpu_matmat_params p;
            uint32_t grid[3];
            char why[LW_ERRMSG_SIZE];
            batched = lw__gpu_matmat_check(info, &mm.v.mm, why) == LW_OK &&
                      lw__gpu_matmat_plan(info, &mm.v.mm, &sh, &p, grid, why) == LW_OK;
            if (!batched && mm.v.mm.smx) { /* not even X's digits fit a binding: the other tiles */
                mm.v.mm = mm_tiles(g, info, w->type, true);
                sh.rows = (uint64_t)pc->rows;
                batched = lw__gpu_matmat_check(info, &mm.v.mm, why) == LW_OK &&
                          lw__gpu_matmat_plan(info, &mm.v.mm, &sh, &p, grid, why) == LW_OK;
            }
            if (batched && mm.v.mm.smx) {
                g->nodes[i].smx_rows = (uint32_t)sub;
                g->nodes[i].smx_subs = (int32_t)((rows_max + sub - 1) / sub);
            }
        }
        if (batched && (st = lw__gpu_matmat_pipeline(gpu, &g->cache, &g->alloc, &mm.v.mm, info, &mm.pipe,
                                                     g->err)) != LW_OK)
            return st;
        gm_call prep = mm; /* the matrix units: X's digits and the piece's row maxima first (smx-prep.wgsl) */
        if (batched && mm.v.mm.smx &&
            (st = lw__gpu_smx_prep_pipeline(gpu, &g->cache, &g->alloc, w->type, info, &prep.pipe, g->err)) !=
                LW_OK)
            return st;
        g->nodes[i].batched = batched;
        for (int32_t k = 0; k < g->loc[nd->src[0]].n_pieces && st == LW_OK; k++) {
            c.aux = mm.aux = prep.aux = g->loc[nd->src[0]].piece0 + k;
            lw_gpu_bind b[4] = {lw__gm_piece(g, c.aux), lw__gm_act(g, nd->src[1]), lw__gm_act(g, nd->dst),
                                lw__gm_params(g)};
            lw_gpu_bind bq[4] = {b[0], lw__gm_whole(g->actq_scratch), b[2], b[3]};
            lw_gpu_bind bp[4] = {b[0], b[1], lw__gm_whole(g->actq_scratch), b[3]};
            st = lw__gm_add_call(g, &c, c.v.mv.idot ? bq : b, 4, false);
            for (int32_t u = 0; u < g->nodes[i].smx_subs && st == LW_OK; u++) { /* the matrix units */
                st = lw__gm_add_call(g, &prep, bp, 4, false);
                if (st == LW_OK) st = lw__gm_add_call(g, &mm, bq, 4, false);
            }
            if (st == LW_OK && batched && !mm.v.mm.smx) st = lw__gm_add_call(g, &mm, b, 4, false);
        }
        if (st == LW_OK && g->nodes[i].norm_src >= 0) /* last: the one-row call with its norm in front */
            st = prepare_norm_mv(g, i, g->loc[nd->src[0]].piece0);
        const int32_t s = st != LW_OK ? -1 : c.v.mv.idot ? lw__gm_glu_match(g, i) : lw__gm_glu_source(g, i);
        if (s >= 0 &&
            c.v.mv.idot) { /* one-row steps: SwiGLU in the quantizer's loads, after the other calls */
            if (g->graph.nodes[s].op != LW_OP_SWIGLU) return st; /* GEGLU runs on its own */
            gm_call q = c;
            if ((st = lw__gpu_actq_quant_pipeline(gpu, &g->cache, &g->alloc, c.v.mv.actq, LW_GPU_GLU_SILU,
                                                  info, &q.pipe, g->err)) != LW_OK)
                return st;
            lw_gpu_bind qb[3] = {lw__gm_act(g, g->graph.nodes[s].src[0]), lw__gm_whole(g->actq_scratch),
                                 lw__gm_params(g)};
            if ((st = lw__gm_add_call(g, &q, qb, 3, false)) != LW_OK) return st;
            g->nodes[i].glu = true;
            g->nodes[i].glu_node = s;
            g->nodes[s].fuse = GM_FUSE_GLU;
            return st;
        }
        if (s >=
            0) { /* one-row steps: the GLU in this mat-vec's x loads, reading gate|up (gpu-model-fuse.c) */
            const uint32_t glu = g->graph.nodes[s].op == LW_OP_SWIGLU ? LW_GPU_GLU_SILU : LW_GPU_GLU_GELU;
            if ((st = lw__gpu_matvec_glu_pipeline(gpu, &g->cache, &g->alloc, &c.v.mv, glu, info, &c.pipe,
                                                  g->err)) != LW_OK)
                return st;
            for (int32_t k = 0; k < g->loc[nd->src[0]].n_pieces && st == LW_OK; k++) {
                c.aux = g->loc[nd->src[0]].piece0 + k;
                lw_gpu_bind b[5] = {lw__gm_piece(g, c.aux), lw__gm_act(g, g->graph.nodes[s].src[0]),
                                    lw__gm_act(g, nd->dst), lw__gm_params(g), lw__gm_whole(g->gelu)};
                st = lw__gm_add_call(g, &c, b, glu == LW_GPU_GLU_GELU ? 5 : 4, false);
            }
            g->nodes[i].glu = true;
            g->nodes[i].glu_node = s;
            g->nodes[s].fuse = GM_FUSE_GLU;
        }
        return st;
    }
    case LW_OP_GET_ROWS: { /* one call per part of the table; each writes the tokens whose id it holds */
        const lw__tensor *w = &g->graph.t[nd->src[0]];
        c.v.gr = lw__gpu_get_rows_default(info, w->type);
        if (nd->src[0] == g->rows.table) { /* a row store's slots, gathered through its id -> slot map */
            c.v.gr.row_map = true;
            if ((st = lw__gpu_get_rows_pipeline(gpu, &g->cache, &g->alloc, &c.v.gr, info, &c.pipe, g->err)) !=
                LW_OK)
                return st;
            c.aux = -1;
            lw_gpu_bind b[5] = {lw__gm_whole(g->rows.slots), lw__gm_whole(g->tokens), lw__gm_act(g, nd->dst),
                                lw__gm_params(g), lw__gm_whole(g->rows.map)};
            return lw__gm_add_call(g, &c, b, 5, false);
        }
        if ((st = lw__gpu_get_rows_pipeline(gpu, &g->cache, &g->alloc, &c.v.gr, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        for (int32_t k = 0; k < g->loc[nd->src[0]].n_pieces && st == LW_OK; k++) {
            c.aux = g->loc[nd->src[0]].piece0 + k;
            lw_gpu_bind b[4] = {lw__gm_piece(g, c.aux), lw__gm_whole(g->tokens), lw__gm_act(g, nd->dst),
                                lw__gm_params(g)};
            st = lw__gm_add_call(g, &c, b, 4, false);
        }
        return st;
    }
    case LW_OP_RMS_NORM: {
        for (int32_t j = i + 1; j < g->graph.n_nodes && g->nodes[i].fuse == GM_FUSE_NONE; j++) {
            int32_t qa, ka; /* a per-head Q/K norm that the rope_qkv call reading it can do (qk_norm)? */
            if (g->graph.nodes[j].op != LW_OP_ROPE || g->graph.nodes[j].src[0] != nd->dst ||
                !match_rope_qkv(g, j) || !rope_qkv_norms(g, j, &qa, &ka) || qa != i)
                continue;
            lw__gpu_rope_qkv_variant v = lw__gpu_rope_qkv_default(info, g->kv_type);
            v.qkv_one = v.qk_norm = true;
            lw_gpu_pipeline pipe; /* (cached for the ROPE node; 7 storage bindings: WebGPU guarantees 8) */
            if ((st = lw__gpu_rope_qkv_pipeline(gpu, &g->cache, &g->alloc, &v, info, &pipe, g->err)) != LW_OK)
                return st;
            g->nodes[qa].fuse = g->nodes[ka].fuse = GM_FUSE_DONE;
        }
        if (g->nodes[i].fuse == GM_FUSE_DONE) return LW_OK; /* done by the rope_qkv call */
        c.v.norm = lw__gpu_norm_default(info);
        if (g->p.exact_norm >= 0) c.v.norm.exact = g->p.exact_norm != 0;
        c.v.norm.subgroups = c.v.norm.subgroups && g->subgroups;
        c.v.norm.add_input = g->nodes[i].fuse == GM_FUSE_ADD_NORM;
        if ((st = lw__gpu_norm_pipeline(gpu, &g->cache, &g->alloc, &c.v.norm, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        lw_gpu_bind b[LW_GPU_NORM_ADD_BINDINGS + 1];
        uint32_t nb = LW_GPU_NORM_BINDINGS;
        if (c.v.norm.add_input) {
            add_norm_binds(g, i - 1, b);
            nb = LW_GPU_NORM_ADD_BINDINGS;
        } else {
            b[0] = lw__gm_act(g, nd->src[0]);
            b[1] = lw__gm_rope_bind(g, i, lw__gm_bind_of(g, nd->src[1]));
            b[2] = lw__gm_act(g, nd->dst);
            b[3] = lw__gm_params(g);
        }
        if ((st = lw__gm_add_call(g, &c, b, nb, false)) != LW_OK) return st;
        /* one-row steps: the same norm also rounds its row for the integer mat-vecs reading it */
        const uint32_t q8 = norm_q8_kind(g, i);
        if (!q8) return LW_OK;
        c.v.norm.q8_out = q8;
        if ((st = lw__gpu_norm_pipeline(gpu, &g->cache, &g->alloc, &c.v.norm, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        b[nb] = lw__gm_whole(g->actq_scratch);
        if ((st = lw__gm_add_call(g, &c, b, nb + 1, false)) != LW_OK) return st;
        g->nodes[i].q8_norm = true;
        return LW_OK;
    }
    case LW_OP_ROPE: {
        int32_t qa, ka;
        if (match_rope_qkv(g, i)) { /* ROPE(Q), ROPE(K) + KV_STORE(K), KV_STORE(V) in one call */
            c.v.qkv = lw__gpu_rope_qkv_default(info, g->kv_type);
            c.v.qkv.qkv_one = rope_qkv_one(g, i);
            c.v.qkv.qk_norm =
                rope_qkv_norms(g, i, &qa, &ka) && g->nodes[qa].fuse == GM_FUSE_DONE; /* see RMS_NORM */
            const int32_t bias = c.v.qkv.qk_norm ? -1 : rope_qkv_bias(g, i);
            c.v.qkv.qkv_bias = bias >= 0 && g->nodes[bias].fuse == GM_FUSE_DONE; /* see ADD */
            if (lw__gpu_rope_qkv_pipeline(gpu, &g->cache, &g->alloc, &c.v.qkv, info, &c.pipe, g->err) ==
                LW_OK) {
                lw_gpu_bind b[LW_GPU_ROPE_QKV_BINDINGS];
                const uint32_t nb = rope_qkv_binds(g, i, b);
                const int32_t s = rope_qkv_gap(&g->graph, i), sc = rope_qkv_scale(g, i);
                if (sc >= 0) g->nodes[sc].fuse = GM_FUSE_DONE; /* q_out = its output, q_scale its factor */
                g->nodes[i].fuse = GM_FUSE_ROPE_QKV;
                g->nodes[i].qk_norm[0] = c.v.qkv.qk_norm ? qa : -1;
                g->nodes[i].qk_norm[1] = c.v.qkv.qk_norm ? ka : -1;
                g->nodes[i + 1].fuse = g->nodes[i + 2 + s].fuse = g->nodes[i + 3 + s].fuse = GM_FUSE_DONE;
                return lw__gm_add_call(g, &c, b, nb, false);
            }
            g->err[0] = 0; /* e.g. too few storage bindings per stage: the separate kernels */
        }
        g->nodes[i].mv_rope = -1; /* (the Q|K|V mat-vec's epilogue call, if prepared, stays unused) */
        c.v.rope = lw__gpu_rope_default(info);
        if ((st = lw__gpu_rope_pipeline(gpu, &g->cache, &g->alloc, &c.v.rope, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        lw_gpu_bind b[4] = {lw__gm_act(g, nd->src[0]), lw__gm_rope_bind(g, i, lw__gm_bind_of(g, nd->src[1])),
                            lw__gm_act(g, nd->dst), lw__gm_params(g)};
        return lw__gm_add_call(g, &c, b, 4, false);
    }
    case LW_OP_KV_STORE: {
        const uint32_t n_layer = g->m->hp.n_layer;
        c.v.kv = lw__gpu_kv_store_default(info, g->kv_type);
        if ((st = lw__gpu_kv_store_pipeline(gpu, &g->cache, &g->alloc, &c.v.kv, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        lw_gpu_buffer cache = g->kv[(uint32_t)nd->ip[1] * n_layer + (uint32_t)nd->ip[0]];
        lw_gpu_bind b[3] = {lw__gm_act(g, nd->src[0]), lw__gm_whole(cache), lw__gm_params(g)};
        return lw__gm_add_call(g, &c, b, 3, false);
    }
    case LW_OP_ATTN:
        return lw__gm_prepare_attn(g, i, &c);
    default: { /* element-wise: ADD, SCALE, SOFTCAP, SWIGLU, GEGLU, OUT_ROWS (a row copy) */
        c.v.elt = lw__gpu_eltwise_default(info, elt_op(nd->op));
        /* both inputs parts of one fused output (gate|up): b is read from a's binding */
        c.v.elt.b_in_a = nd->src[1] >= 0 && is_part(g, nd->src[0]) &&
                         lw__gm_base(g, nd->src[1]) == lw__gm_base(g, nd->src[0]);
        if ((st = lw__gpu_eltwise_pipeline(gpu, &g->cache, &g->alloc, &c.v.elt, info, &c.pipe, g->err)) !=
            LW_OK)
            return st;
        lw_gpu_binding_kind kinds[LW_GPU_MAX_BINDINGS];
        const uint32_t n = lw__gpu_eltwise_layout(&c.v.elt, kinds);
        lw_gpu_bind b[5];
        if (n == 3 || c.v.elt.b_in_a) { /* unary or b_in_a: a, d, params (, GELU table) */
            b[0] = lw__gm_act(g, nd->src[0]);
            b[1] = lw__gm_act(g, nd->dst);
            b[2] = lw__gm_params(g);
            b[3] = lw__gm_whole(g->gelu);
        } else { /* binary: a, b, d, params (, GELU table) */
            b[0] = lw__gm_act(g, nd->src[0]);
            b[1] = lw__gm_bind_of(g, nd->src[1]);
            b[2] = lw__gm_act(g, nd->dst);
            b[3] = lw__gm_params(g);
            b[4] = lw__gm_whole(g->gelu);
        }
        if (n < 3 || n > 5) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "eltwise layout of %u bindings", n);
        return lw__gm_add_call(g, &c, b, n, false);
    }
    }
}

lw_status lw__gm_prepare_shared(lw__gpu_model *g) {
    const lw__graph *gr = &g->graph;
    lw_status st;
    const uint32_t rw = LW_GPU_USAGE_STORAGE | LW_GPU_USAGE_COPY_DST;
    /* attention scratch: the largest any ATTN node needs */
    g->attn_scratch_bytes = 16;
    bool geglu = false;
    for (int32_t i = 0; i < gr->n_nodes; i++) {
        const lw__node *nd = &gr->nodes[i];
        geglu |= nd->op == LW_OP_GEGLU;
        if (nd->op != LW_OP_ATTN) continue;
        lw__gpu_attn_variant v = lw__gm_attn_variant(g, nd);
        uint64_t bytes;
        if ((st = lw__gpu_attn_scratch_bytes(&v, (uint32_t)nd->ip[1], g->n_batch, g->n_ctx, &bytes,
                                             g->err)) != LW_OK)
            return st;
        if (bytes > g->attn_scratch_bytes) g->attn_scratch_bytes = bytes;
    }
    /* the integer mat-vecs' rounded x: one at a time, so one buffer for the widest input */
    uint64_t k_max = 0;
    for (int32_t i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i].op == LW_OP_MUL_MAT && (uint64_t)gr->t[gr->nodes[i].src[0]].ne0 > k_max)
            k_max = (uint64_t)gr->t[gr->nodes[i].src[0]].ne0;
    /* the subgroup-matrix mat-mats read a whole step's digits of X and a piece's of W (or of the rows of a
     * piece's part: smx_sub_rows) from it (lw__gpu_smx_prep_bytes): the most any batched product needs */
    uint64_t q_bytes = lw__gpu_actq_quant_bytes(k_max) + 16, smx_bytes = 0;
    for (int32_t i = 0; i < gr->n_nodes && lw__gpu_smx_available(&g->info) && g->n_batch > 1; i++) {
        const lw__node *nd = &gr->nodes[i];
        if (nd->op != LW_OP_MUL_MAT || !is_weight(g, nd->src[0]) || rows_of(g, nd->dst, 2) < 2 ||
            !lw__gpu_matmat_has_smx(gr->t[nd->src[0]].type))
            continue;
        for (int32_t k = 0; k < g->loc[nd->src[0]].n_pieces; k++) {
            const gm_piece *pc = &g->pieces[g->loc[nd->src[0]].piece0 + k];
            const uint64_t kk = (uint64_t)gr->t[nd->src[0]].ne0,
                           sub =
                               smx_sub_rows(g, kk, (uint64_t)pc->rows, (uint64_t)gr->t[nd->src[0]].row_bytes);
            if (sub && lw__gpu_smx_prep_bytes(kk, g->n_batch, sub, &smx_bytes) == LW_OK &&
                smx_bytes > q_bytes)
                q_bytes = smx_bytes;
        }
    }
    if ((st = lw__gm_new_buffer(g, q_bytes, rw, "activation quants", &g->actq_scratch)) != LW_OK) return st;
    if ((st = lw__gm_new_buffer(g, g->attn_scratch_bytes, rw, "attention scratch", &g->attn_scratch)) !=
            LW_OK ||
        (st = lw__gm_new_buffer(g, 256, rw, "dummy", &g->dummy)) != LW_OK)
        return st;
    /* sampling: the top-k plan is fixed (the logits never move), so its scratch is sized now */
    g->argmax[0].v.topk = lw__gpu_topk_default(&g->info);
    if ((st = lw__gpu_topk_plan(&g->info, &g->argmax[0].v.topk, g->m->hp.n_vocab, 1, 0, 0, 0, &g->topk,
                                g->err)) != LW_OK)
        return st;
    if ((st = lw__gm_new_buffer(g, (uint64_t)g->topk.scratch_pairs * 8 + 16, rw, "top-k scratch",
                                &g->topk_scratch)) != LW_OK)
        return st;
    /* ggml's GELU table for GEGLU (128 KiB, written once) */
    if (geglu) {
        uint32_t *words = lw__malloc(&g->alloc, LW_GPU_GELU_TABLE_WORDS * sizeof(uint32_t));
        if (!words) return lw__errorf(g->err, LW_ERR_NOMEM, "out of memory");
        lw__gpu_gelu_table(words);
        st = lw__gm_new_buffer(g, LW_GPU_GELU_TABLE_WORDS * 4, rw, "GELU table", &g->gelu);
        if (st == LW_OK)
            st = g->inner.ops->buffer_write(g->inner.ctx, g->gelu, 0, words, LW_GPU_GELU_TABLE_WORDS * 4);
        lw__free(&g->alloc, words);
        if (st != LW_OK) return lw__errorf(g->err, st, "GELU table upload failed");
    } else {
        g->gelu = g->dummy;
    }
    return LW_OK;
}

lw_status lw__gm_prepare_argmax(lw__gpu_model *g) {
    const lw_gpu *gpu = &g->gpu;
    lw_status st;
    gm_call c = g->argmax[0];
    g->argmax[0] = g->argmax[1] = c;
    if ((st = lw__gpu_topk_pipeline(gpu, &g->cache, &g->alloc, &c.v.topk, false, &g->info, &g->argmax[0].pipe,
                                    g->err)) ||
        (st = lw__gpu_topk_pipeline(gpu, &g->cache, &g->alloc, &c.v.topk, true, &g->info, &g->argmax[1].pipe,
                                    g->err)))
        return st;
    lw_gpu_bind b1[3] = {lw__gm_act(g, g->logits), lw__gm_whole(g->topk_scratch), lw__gm_params(g)};
    lw_gpu_bind b2[3] = {lw__gm_whole(g->topk_scratch), lw__gm_whole(g->result), lw__gm_params(g)};
    if ((st = lw__gm_add_call(g, &g->argmax[0], b1, 3, true)) != LW_OK) return st;
    return lw__gm_add_call(g, &g->argmax[1], b2, 3, true);
}

/* ---------------------------------------------------------------------------------------------------------
 * Recording (per step)
 * ------------------------------------------------------------------------------------------------------- */

/* A kernel family's plan refused a shape that planning accepted: a bug, reported with its message. */
/* ROPE node i's arguments for a step of n_tokens at pos0 (the node's fields, the host table's rows). */
static void rope_step_args(const lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0,
                           lw__gpu_rope_args *a) {
    memset(a, 0, sizeof *a);
    lw__gpu_rope_args_from_node(&g->graph.nodes[i], a);
    lw__gm_rope_table_args(g, i, a);
    a->rows = (uint64_t)n_tokens;
    a->pos0 = (uint64_t)pos0;
}

lw_status lw__gm_rope_qkv_step(lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0,
                               lw__gpu_rope_qkv_params *p, uint32_t grid[3]) {
    const lw__node *nd = &g->graph.nodes[i];
    const gm_node *gn = &g->nodes[i];
    const gm_call *calls = g->calls + gn->call0;
    const lw__node *kn = nd + 1; /* ROPE(K) */
    lw__gpu_rope_args a;
    rope_step_args(g, i, n_tokens, pos0, &a);
    const uint64_t row = (uint64_t)kn->ip[0] * (uint64_t)kn->ip[1]; /* a cache cell: K/V heads x head dim */
    lw__gpu_kv_dest kv;
    memset(&kv, 0, sizeof kv);
    kv.n_head_kv = (uint32_t)kn->ip[0];
    kv.kc_offset = kv.vc_offset = (uint64_t)pos0 * row;
    const lw__node *vn = nd + 3 + rope_qkv_gap(&g->graph, i); /* KV_STORE(V) */
    /* q and k: parts of a fused QKV output (or the norms' inputs), or whole */
    const int32_t qa = gn->qk_norm[0], ka = gn->qk_norm[1];
    const bool norms = calls[0].v.qkv.qk_norm;
    lw__gm_part(g, norms ? g->graph.nodes[qa].src[0] : nd->src[0], &a.x_offset, &a.x_stride);
    lw__gm_part(g, norms ? g->graph.nodes[ka].src[0] : kn->src[0], &kv.k_offset, &kv.k_stride);
    lw__gm_part(g, vn->src[0], &kv.v_offset, &kv.v_stride);
    lw_status st = lw__gpu_rope_qkv_plan(&g->info, &calls[0].v.qkv, &a, &kv, p, grid, g->err);
    if (st != LW_OK) return st;
    if (g->nodes[i + 2].fuse == GM_FUSE_DONE && nd[2].op == LW_OP_SCALE)
        p->q_scale = nd[2].fp[0]; /* folded */
    if (norms) p->qk_eps = g->graph.nodes[qa].fp[0];
    return LW_OK;
}

#define PLAN(call)                                                                                           \
    do {                                                                                                     \
        lw_status st_ = (call);                                                                              \
        if (st_ != LW_OK) return st_;                                                                        \
    } while (0)

lw_status lw__gm_record_node(lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0) {
    const lw__node *nd = &g->graph.nodes[i];
    const gm_node *gn = &g->nodes[i];
    const gm_call *calls = g->calls + gn->call0;
    const lw_gpu_info *info = &g->info;
    uint32_t grid[3];
    if (i == 0) g->q8_tensor = -1;              /* a step starts with nothing rounded */
    if (gn->fuse == GM_FUSE_DONE) return LW_OK; /* recorded with an earlier node */
    if (gn->fuse == GM_FUSE_ROPE_QKV) {
        if (n_tokens == 1 && gn->attn_rope >= 0) return LW_OK; /* in the decode attention's prologue */
        if (n_tokens == 1 && gn->mv_rope >= 0) return LW_OK;   /* in the Q|K|V mat-vec's epilogue */
        lw__gpu_rope_qkv_params p;
        PLAN(lw__gm_rope_qkv_step(g, i, n_tokens, pos0, &p, grid));
        lw__gm_emit(g, &calls[0], &p, sizeof p, grid);
        return LW_OK;
    }
    switch (nd->op) {
    case LW_OP_MUL_MAT: {
        const lw__tensor *w = &g->graph.t[nd->src[0]];
        const uint64_t rows_t = rows_of(g, nd->dst, n_tokens);
        if (rows_t == 1 && gn->norm_src >= 0) {     /* the norm (and the ADD before it) in the prologue */
            const bool has_rope = gn->mv_rope >= 0; /* the epilogue call is the last (maybe unused) */
            const gm_call *c = &calls[gn->n_calls - 1 - has_rope];
            lw__gpu_matvec_norm_rope_params p;
            PLAN(lw__gpu_matvec_norm_plan(info, &c->v.mvn, (uint64_t)w->ne1, 0, 0, 0, 0, 0, 0,
                                          g->graph.nodes[gn->norm_src].fp[0], &p.mv, grid, g->err));
            if (has_rope && g->nodes[gn->mv_rope].mv_rope == i) { /* rope_qkv's writes as the epilogue */
                uint32_t unused[3];
                PLAN(lw__gm_rope_qkv_step(g, gn->mv_rope, 1, pos0, &p.q, unused));
                p.mv.y_offset = p.q.rope.d_offset;
                lw__gm_emit(g, &calls[gn->n_calls - 1], &p, sizeof p, grid);
                return LW_OK;
            }
            lw__gm_emit(g, c, &p.mv, sizeof p.mv, grid);
            if (gn->glu_down >= 0) /* the SwiGLU of this output, rounded for the down projection (K formats:
                                      in the Q8_K-reading layout, glu_down_match) */
                g->q8_tensor = g->graph.nodes[gn->glu_down].src[1],
                g->q8_kind =
                    w->type == LW_TYPE_Q4_K || w->type == LW_TYPE_Q5_K ? LW_GPU_ACTQ_Q8_K : LW_GPU_ACTQ_Q8_0;
            return LW_OK;
        }
        const gm_call *quant = gn->q8 ? &calls[0] : NULL; /* rounds x for the integer mat-vecs */
        if (quant) calls++;
        /* mat-vec (, the matrix units' prep pass, mat-mat) per piece */
        const int32_t per_piece = !gn->batched ? 1 : gn->smx_subs ? 1 + 2 * gn->smx_subs : 2;
        if (rows_t == 1 && gn->glu) { /* the GLU's inputs, gate and up parts of one fused output */
            const lw__node *glu = &g->graph.nodes[gn->glu_node];
            const int32_t n_pieces = g->loc[nd->src[0]].n_pieces;
            uint64_t go, uo, stride;
            lw__gm_part(g, glu->src[0], &go, &stride);
            lw__gm_part(g, glu->src[1], &uo, &stride);
            if (quant) { /* SwiGLU folded into the quantizer, then the integer mat-vecs */
                const gm_call *gq = &calls[n_pieces * per_piece];
                lw__gpu_actq_quant_params qp;
                PLAN(lw__gpu_actq_quant_plan(info, gq->v.mv.actq, (uint64_t)w->ne0, go, uo, &qp, grid,
                                             g->err));
                if (g->q8_tensor != nd->src[1] || g->q8_kind != gq->v.mv.actq) /* (gate|up's call: done) */
                    lw__gm_emit(g, gq, &qp, sizeof qp, grid);
                g->q8_tensor = nd->src[1], g->q8_kind = gq->v.mv.actq; /* the GLU's output, rounded */
                for (int32_t k = 0; k < n_pieces * per_piece; k += per_piece) {
                    const gm_piece *pc = &g->pieces[calls[k].aux];
                    lw__gpu_matvec_params p;
                    PLAN(lw__gpu_matvec_plan(info, &calls[k].v.mv, (uint64_t)pc->rows, (uint64_t)w->ne0, 0, 0,
                                             (uint64_t)pc->row0, &p, grid, g->err));
                    lw__gm_emit(g, &calls[k], &p, sizeof p, grid);
                }
                return LW_OK;
            }
            for (int32_t k = 0; k < n_pieces; k++) {
                const gm_call *c = &calls[n_pieces * per_piece + k];
                const gm_piece *pc = &g->pieces[c->aux];
                lw__gpu_matvec_params p;
                PLAN(lw__gpu_matvec_glu_plan(info, &c->v.mv, (uint64_t)pc->rows, (uint64_t)w->ne0, 0, go, uo,
                                             (uint64_t)pc->row0, &p, grid, g->err));
                lw__gm_emit(g, c, &p, sizeof p, grid);
            }
            return LW_OK;
        }
        if (rows_t > 1 && per_piece >= 2 &&
            !(gn->exact && rows_t <= GM_EXACT_TOKENS)) { /* one mat-mat per piece */
            const int32_t n_pieces = g->loc[nd->src[0]].n_pieces;
            for (int32_t k = 0; k < n_pieces; k++) {
                const gm_call *mc = &calls[k * per_piece + per_piece - 1];
                const gm_piece *pc = &g->pieces[mc->aux];
                lw__gpu_matmat_shape sh = {(uint64_t)pc->rows, (uint64_t)w->ne0, rows_t, 0, 0, 0,
                                           (uint64_t)pc->row0, (uint64_t)w->ne1};
                if (!gn->smx_subs) {
                    lw__gpu_matmat_params p;
                    PLAN(lw__gpu_matmat_plan(info, &mc->v.mm, &sh, &p, grid, g->err));
                    lw__gm_emit(g, mc, &p, sizeof p, grid);
                    continue;
                }
                /* the matrix units, per part of at most smx_rows rows: X's digits (once, with the first),
                 * the part's digits and row maxima, then its product */
                const uint64_t stride = (uint64_t)w->row_bytes;
                for (uint64_t r0 = 0, u = 0; r0 < (uint64_t)pc->rows; r0 += gn->smx_rows, u++) {
                    lw__gpu_matmat_shape part = sh;
                    part.rows =
                        (uint64_t)pc->rows - r0 < gn->smx_rows ? (uint64_t)pc->rows - r0 : gn->smx_rows;
                    part.w_offset = r0 * stride;
                    part.y_offset = (uint64_t)pc->row0 + r0;
                    const gm_call *pcall = &calls[k * per_piece + 1 + 2 * u];
                    lw__gpu_smx_prep_params pp;
                    PLAN(lw__gpu_smx_prep_plan(info, w->type, &part, k == 0 && r0 == 0 ? rows_t : 0, &pp,
                                               grid, g->err));
                    lw__gm_emit(g, pcall, &pp, sizeof pp, grid);
                    lw__gpu_matmat_params p;
                    PLAN(lw__gpu_matmat_plan(info, &pcall[1].v.mm, &part, &p, grid, g->err));
                    lw__gm_emit(g, &pcall[1], &p, sizeof p, grid);
                }
                g->q8_tensor = -1; /* the integer mat-vecs' rounded x is overwritten */
            }
            return LW_OK;
        }
        for (uint64_t t = 0; t < rows_t; t++) {
            /* token t's x, once for every piece, unless its producer rounded it already (one-row steps) */
            if (quant && !(rows_t == 1 && g->q8_tensor == nd->src[1] && g->q8_kind == quant->v.mv.actq)) {
                lw__gpu_actq_quant_params qp;
                PLAN(lw__gpu_actq_quant_plan(info, quant->v.mv.actq, (uint64_t)w->ne0, t * (uint64_t)w->ne0,
                                             0, &qp, grid, g->err));
                lw__gm_emit(g, quant, &qp, sizeof qp, grid);
                g->q8_tensor = rows_t == 1 ? nd->src[1] : -1;
                g->q8_kind = quant->v.mv.actq;
            }
            for (int32_t k = 0; k < g->loc[nd->src[0]].n_pieces * per_piece; k += per_piece) {
                const gm_piece *pc = &g->pieces[calls[k].aux];
                lw__gpu_matvec_params p;
                PLAN(lw__gpu_matvec_plan(info, &calls[k].v.mv, (uint64_t)pc->rows, (uint64_t)w->ne0, 0,
                                         quant ? 0 : t * (uint64_t)w->ne0,
                                         t * (uint64_t)w->ne1 + (uint64_t)pc->row0, &p, grid, g->err));
                /* the CPU multiplies repacked weights in groups of 4 tokens of a step in its gemm order, the
                 * rest in its gemv order (engine-ops.c) */
                p.order = rows_t > 1 && t < rows_t / 4 * 4;
                lw__gm_emit(g, &calls[k], &p, sizeof p, grid);
            }
        }
        return LW_OK;
    }
    case LW_OP_GET_ROWS: {
        const lw__tensor *w = &g->graph.t[nd->src[0]];
        for (int32_t k = 0; k < gn->n_calls; k++) {
            lw__gpu_get_rows_params p;
            if (calls[k].aux < 0) { /* the row store's slots: row ids are slots */
                PLAN(lw__gpu_get_rows_plan(info, &calls[k].v.gr, (uint64_t)w->ne0, (uint64_t)n_tokens, 0,
                                           g->rows.n_slots, 0, 0, 0, 0, &p, grid, g->err));
                lw__gm_emit(g, &calls[k], &p, sizeof p, grid);
                continue;
            }
            const gm_piece *pc = &g->pieces[calls[k].aux];
            PLAN(lw__gpu_get_rows_plan(info, &calls[k].v.gr, (uint64_t)w->ne0, (uint64_t)n_tokens,
                                       (uint64_t)pc->row0, (uint64_t)pc->rows, 0, 0, 0, 0, &p, grid, g->err));
            lw__gm_emit(g, &calls[k], &p, sizeof p, grid);
        }
        return LW_OK;
    }
    case LW_OP_RMS_NORM: {
        if (gn->norm_mv >= 0 && rows_of(g, nd->dst, n_tokens) == 1)
            return LW_OK; /* in the mat-vec's prologue */
        const lw__tensor *x = &g->graph.t[nd->src[0]];
        const uint64_t w_len = nd->src[1] >= 0 ? (uint64_t)g->graph.t[nd->src[1]].ne0 : 0;
        lw__gpu_norm_params p;
        if (gn->fuse == GM_FUSE_ADD_NORM) { /* a, b and the sum (x) at the start of their bindings */
            PLAN(lw__gpu_norm_add_plan(info, &calls[0].v.norm, (uint64_t)x->ne0, (uint64_t)nd->ip[0],
                                       rows_of(g, nd->dst, n_tokens), 0, 0, 0, 0, w_len, 0, nd->fp[0], &p,
                                       grid, g->err));
        } else { /* x may be a part of a fused output (per-head q/k norms) */
            uint64_t xo, xs;
            lw__gm_part(g, nd->src[0], &xo, &xs);
            PLAN(lw__gpu_norm_plan(info, &calls[0].v.norm, (uint64_t)x->ne0, (uint64_t)nd->ip[0],
                                   rows_of(g, nd->dst, n_tokens), xo, 0, w_len, 0, nd->fp[0], &p, grid,
                                   g->err));
            PLAN(lw__gpu_norm_strides(&p, xs, 0, g->err));
        }
        const bool q8 = gn->q8_norm && rows_of(g, nd->dst, n_tokens) == 1;
        if (q8) g->q8_tensor = nd->dst, g->q8_kind = calls[1].v.norm.q8_out; /* its readers find it rounded */
        lw__gm_emit(g, &calls[q8 ? 1 : 0], &p, sizeof p, grid);
        return LW_OK;
    }
    case LW_OP_ROPE: {
        lw__gpu_rope_args a;
        rope_step_args(g, i, n_tokens, pos0, &a);
        lw__gm_part(g, nd->src[0], &a.x_offset, &a.x_stride);
        lw__gpu_rope_params p;
        PLAN(lw__gpu_rope_plan(info, &calls[0].v.rope, &a, &p, grid, g->err));
        lw__gm_emit(g, &calls[0], &p, sizeof p, grid);
        return LW_OK;
    }
    case LW_OP_KV_STORE: {
        const lw__tensor *x = &g->graph.t[nd->src[0]];
        lw__gpu_kv_store_params p;
        uint64_t xo, xs;
        lw__gm_part(g, nd->src[0], &xo, &xs);
        PLAN(lw__gpu_kv_store_plan(info, &calls[0].v.kv, (uint64_t)x->ne0, (uint64_t)n_tokens, xo, xs, 0,
                                   (uint64_t)pos0, g->n_ctx, &p, grid, g->err));
        lw__gm_emit(g, &calls[0], &p, sizeof p, grid);
        return LW_OK;
    }
    case LW_OP_ATTN:
        return lw__gm_record_attn(g, i, n_tokens, pos0);
    default: {
        const lw__tensor *a = &g->graph.t[nd->src[0]];
        const uint64_t rows = rows_of(g, nd->dst, n_tokens);
        if (gn->fuse == GM_FUSE_GLU && rows == 1) return LW_OK; /* in the next mat-vec's x loads */
        lw__gpu_eltwise_params p;
        if (nd->op == LW_OP_OUT_ROWS) {
            const uint64_t src_rows = rows_of(g, nd->src[0], n_tokens);
            PLAN(lw__gpu_out_rows_plan(info, &calls[0].v.elt, (uint64_t)a->ne0, src_rows - 1, 1, 0, 0, &p,
                                       grid, g->err));
        } else {
            uint64_t b_rows = 1;
            if (nd->src[1] >= 0 && !is_weight(g, nd->src[1])) b_rows = rows_of(g, nd->src[1], n_tokens);
            if (nd->src[1] >= 0 && is_weight(g, nd->src[1])) b_rows = (uint64_t)g->graph.t[nd->src[1]].ne1;
            uint64_t ao, as, bo = 0, bs = 0; /* inputs may be parts of a fused output (gate|up, q|k|v) */
            lw__gm_part(g, nd->src[0], &ao, &as);
            if (nd->src[1] >= 0 && !is_weight(g, nd->src[1])) lw__gm_part(g, nd->src[1], &bo, &bs);
            PLAN(lw__gpu_eltwise_plan(info, &calls[0].v.elt, (uint64_t)a->ne0, rows, ao, bo, b_rows, 0,
                                      nd->fp[0], nd->fp[1], &p, grid, g->err));
            PLAN(lw__gpu_eltwise_strides(&p, as, bs, 0, g->err));
        }
        lw__gm_emit(g, &calls[0], &p, sizeof p, grid);
        return LW_OK;
    }
    }
}

void lw__gm_record_argmax(lw__gpu_model *g) {
    lw__gm_emit(g, &g->argmax[0], &g->topk.pass1, sizeof g->topk.pass1, g->topk.grid1);
    lw__gm_emit(g, &g->argmax[1], &g->topk.pass2, sizeof g->topk.pass2, g->topk.grid2);
}
