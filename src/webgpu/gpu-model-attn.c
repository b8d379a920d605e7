/* The ATTN node on the GPU (kernels-attn.h): its pipelines and bind groups at load, its dispatches per step.
 *
 * One-token steps of a llama-family block can also fold the block's rope_qkv call (ROPE(Q), ROPE(K),
 * KV_STORE(K), KV_STORE(V): gpu-model-ops.c) into the decode kernel's prologue (attn-decode.wgsl ROPE): every
 * workgroup rotates its own Q heads, the one holding the token's cell writes K and V. With a single split
 * (spans up to the variant's one_max) the same dispatch also rounds the output for the output projection's
 * integer mat-vec (Q8_OUT), so the block's attention is one dispatch instead of three (rope_qkv, decode,
 * reduce): on the H200 a small dispatch costs ~7-14 us of a decode step, far above its work. Without the
 * fold, a one-split call rounds its output all the same (a DECODE call with Q8_OUT after the REDUCE one). */
#include "webgpu/gpu-model-impl.h"
#include "webgpu/gpu-tune.h"

#include <string.h>

lw__gpu_attn_variant lw__gm_attn_variant(const lw__gpu_model *g, const lw__node *nd) {
    return lw__gpu_attn_tuned(g->p.tune, &g->info, g->kv_type, (uint32_t)nd->ip[3],
                              (uint32_t)(nd->ip[1] / nd->ip[2]));
}

int32_t lw__gm_attn_rope_match(const lw__gpu_model *g, int32_t a) {
    const lw__graph *gr = &g->graph;
    const lw__node *nd = &gr->nodes[a];
    if (nd->op != LW_OP_ATTN || nd->src[0] < 0) return -1;
    /* the match's nodes right before: ROPE(Q), ROPE(K), (SCALE,) KV_STORE(K), KV_STORE(V), then a */
    for (int32_t gap = 0; gap < 2; gap++) {
        const int32_t r = a - 4 - gap;
        if (r < 0 || lw__gm_rope_qkv_plain(g, r) != nd->src[0]) continue;
        const lw__node *kv = &gr->nodes[r + 2 + gap];
        if (kv[0].ip[0] != nd->ip[0]) return -1;  /* another layer's cache */
        for (int32_t j = 0; j < gr->n_nodes; j++) /* the rotated Q is the attention's alone */
            for (int k = 0; k < 3; k++)
                if (j != a && gr->nodes[j].src[k] == nd->src[0]) return -1;
        return r;
    }
    return -1;
}

/* The fold of ROPE node r into ATTN node i's one-token calls: the decode kernel with rope (and the 8-bit
 * output when the reduce has one), bound to the unrotated Q|K|V. Leaves the node as it is where the device
 * refuses the variant. */
static lw_status prepare_rope(lw__gpu_model *g, int32_t i, int32_t r, gm_call *c) {
    const lw__node *nd = &g->graph.nodes[i], *rn = &g->graph.nodes[r];
    const uint32_t n_layer = g->m->hp.n_layer, il = (uint32_t)nd->ip[0];
    c->aux = LW_GPU_ATTN_DECODE;
    c->v.attn.rope = true;
    c->v.attn.q8_out = g->nodes[i].q8_attn ? LW_GPU_ACTQ_Q8_0 : 0;
    char why[LW_ERRMSG_SIZE];
    if (lw__gpu_attn_pipeline(&g->gpu, &g->cache, &g->alloc, &c->v.attn, LW_GPU_ATTN_DECODE, &g->info,
                              &c->pipe, why) != LW_OK)
        return LW_OK;
    lw_gpu_bind b[LW_GPU_ATTN_ROPE_BINDINGS + 1] = {lw__gm_act(g, rn->src[0]),
                                                    lw__gm_whole(g->kv[il]),
                                                    lw__gm_whole(g->kv[n_layer + il]),
                                                    lw__gm_act(g, nd->dst),
                                                    lw__gm_whole(g->attn_scratch),
                                                    lw__gm_params(g),
                                                    lw__gm_rope_bind(g, r, lw__gm_bind_of(g, rn->src[1])),
                                                    lw__gm_whole(g->actq_scratch)};
    const lw_gpu_bind q = b[0], o = b[3];
    if (q.buffer == o.buffer && q.offset < o.offset + o.size && o.offset < q.offset + q.size)
        return LW_OK; /* planning keeps them apart (plan_acts): cannot happen */
    lw_status st = lw__gm_add_call(g, c, b, LW_GPU_ATTN_ROPE_BINDINGS + (c->v.attn.q8_out ? 1 : 0), false);
    if (st != LW_OK) return st;
    g->nodes[i].attn_rope = r;
    g->nodes[r].attn_rope = i;
    return LW_OK;
}

lw_status lw__gm_prepare_attn(lw__gpu_model *g, int32_t i, gm_call *c) {
    const lw__node *nd = &g->graph.nodes[i];
    const uint32_t n_layer = g->m->hp.n_layer, il = (uint32_t)nd->ip[0];
    lw_status st = LW_OK;
    c->v.attn = lw__gm_attn_variant(g, nd);
    /* (never for a Q8_0 / Q4_0 cache: EXACT follows the CPU's f16 / f32 order, not its quantized-cache one)
     */
    c->v.attn.exact =
        g->exact_attn && (g->kv_type == LW_TYPE_F32 || (g->kv_type == LW_TYPE_F16 && nd->ip[3] % 64 == 0));
    lw_gpu_bind b[LW_GPU_ATTN_BINDINGS + 1] = {lw__gm_act(g, nd->src[0]),         lw__gm_whole(g->kv[il]),
                                               lw__gm_whole(g->kv[n_layer + il]), lw__gm_act(g, nd->dst),
                                               lw__gm_whole(g->attn_scratch),     lw__gm_params(g)};
    /* calls[k] is kernel k's (EXACT last, only when used) */
    for (int k = 0; k < LW_GPU_ATTN_KERNELS - !c->v.attn.exact && st == LW_OK; k++) {
        c->aux = k;
        if ((st = lw__gpu_attn_pipeline(&g->gpu, &g->cache, &g->alloc, &c->v.attn, (lw__gpu_attn_kernel)k,
                                        &g->info, &c->pipe, g->err)) != LW_OK)
            return st;
        st = lw__gm_add_call(g, c, b, LW_GPU_ATTN_BINDINGS, false);
    }
    if (st != LW_OK) return st;
    if (lw__gm_attn_q8(g, i, &c->v.attn)) { /* then: REDUCE and DECODE rounding for the output projection */
        c->v.attn.q8_out = LW_GPU_ACTQ_Q8_0;
        b[LW_GPU_ATTN_BINDINGS] = lw__gm_whole(g->actq_scratch);
        static const lw__gpu_attn_kernel q8k[2] = {LW_GPU_ATTN_REDUCE, LW_GPU_ATTN_DECODE};
        for (int k = 0; k < 2; k++) {
            c->aux = q8k[k];
            if ((st = lw__gpu_attn_pipeline(&g->gpu, &g->cache, &g->alloc, &c->v.attn, q8k[k], &g->info,
                                            &c->pipe, g->err)) != LW_OK ||
                (st = lw__gm_add_call(g, c, b, LW_GPU_ATTN_BINDINGS + 1, false)) != LW_OK)
                return st;
        }
        g->nodes[i].q8_attn = true;
        c->v.attn.q8_out = 0;
    }
    /* last: the decode kernel with the RoPE of the rope_qkv call before (prepared already) */
    const int32_t r = lw__gm_attn_rope_match(g, i);
    /* (a quantized cache has no rope_qkv match either: rope_qkv_shape; the check keeps the prologue's f16 /
     * f32 stores off it whatever the fusions do) */
    if (r < 0 || c->v.attn.exact || lw__gpu_kv_block_words(g->kv_type) ||
        g->nodes[r].fuse != GM_FUSE_ROPE_QKV || g->nodes[r].mv_rope >= 0 ||
        !lw__gpu_attn_rope_tuned(g->p.tune, g->kv_type))
        return LW_OK;
    return prepare_rope(g, i, r, c);
}

lw_status lw__gm_record_attn(lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0) {
    const lw__node *nd = &g->graph.nodes[i];
    const gm_node *gn = &g->nodes[i];
    const gm_call *calls = g->calls + gn->call0;
    const bool rope = n_tokens == 1 && gn->attn_rope >= 0;
    lw__gpu_attn_shape s;
    memset(&s, 0, sizeof s);
    s.n_head = (uint32_t)nd->ip[1];
    s.n_head_kv = (uint32_t)nd->ip[2];
    s.n_tokens = (uint32_t)n_tokens;
    s.pos0 = (uint32_t)pos0;
    s.swa = (uint32_t)nd->swa;
    s.n_ctx = g->n_ctx;
    s.scale = nd->fp[0];
    s.softcap = nd->fp[1];
    lw__gpu_attn_rope_params rp;
    memset(&rp, 0, sizeof rp);
    if (rope) { /* Q, K, V unrotated in the fused projection's row; the RoPE as the rope_qkv call's */
        lw__gpu_rope_qkv_params qp;
        uint32_t unused[3];
        lw_status st = lw__gm_rope_qkv_step(g, gn->attn_rope, 1, pos0, &qp, unused);
        if (st != LW_OK) return st;
        s.q_offset = qp.rope.x_offset;
        s.q_stride = qp.rope.x_stride;
        rp.n_rot = qp.rope.n_rot;
        rp.neox = qp.rope.neox;
        rp.has_ff = qp.rope.has_ff;
        rp.ff_offset = qp.rope.ff_offset;
        rp.theta_scale = qp.rope.theta_scale;
        rp.freq_scale = qp.rope.freq_scale;
        rp.ext_factor = qp.rope.ext_factor;
        rp.mscale = qp.rope.mscale;
        rp.corr0 = qp.rope.corr0;
        rp.corr1 = qp.rope.corr1;
        rp.q_scale = qp.q_scale;
        rp.k_src = qp.k_offset;
        rp.v_src = qp.v_offset;
    }
    lw__gpu_attn_dispatch d;
    lw_status st =
        lw__gpu_attn_plan(&g->info, &calls[0].v.attn, &s, g->attn_scratch_bytes, &rp.a, &d, g->err);
    if (st != LW_OK) return st;
    /* the q8 calls follow the kernels' own (calls[k] for kernel k, EXACT only when used) */
    const int32_t q8_call = LW_GPU_ATTN_KERNELS - !calls[0].v.attn.exact;
    for (uint32_t k = 0; k < d.n; k++) {
        const bool q8 =
            gn->q8_attn && n_tokens == 1 &&
            (d.kernel[k] == LW_GPU_ATTN_REDUCE || (d.kernel[k] == LW_GPU_ATTN_DECODE && d.n == 1));
        if (rope && d.kernel[k] == LW_GPU_ATTN_DECODE) {
            const gm_call *f = &calls[gn->n_calls - 1];
            lw__gm_emit(g, f, &rp, sizeof rp, d.grid[k]);
            if (f->v.attn.q8_out && d.n == 1) g->q8_tensor = nd->dst, g->q8_kind = LW_GPU_ACTQ_Q8_0;
            continue;
        }
        lw__gm_emit(g, &calls[q8 ? q8_call + (d.kernel[k] == LW_GPU_ATTN_DECODE) : (int32_t)d.kernel[k]],
                    &rp.a, sizeof rp.a, d.grid[k]);
        if (q8) g->q8_tensor = nd->dst, g->q8_kind = LW_GPU_ACTQ_Q8_0; /* for the output projection */
    }
    return LW_OK;
}
