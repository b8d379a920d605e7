/* Graph builder for Gemma 4, node for node as llama.cpp's models/gemma4.cpp builds it (v0.4.0):
 *  - embeddings scaled by sqrt(n_embd); with per-layer input (E2B/E4B) every token also gathers its row of
 *    per_layer_token_embd (n_layer slices of n_embd_per_layer, scaled by sqrt(n_embd_per_layer)) and adds it
 *    to the projection of its scaled embedding (per_layer_model_proj, scaled by 1/sqrt(n_embd), RMS-normed
 *    per slice), the sum scaled by 1/sqrt(2);
 *  - blocks with their own geometry (lw__layer_hp: sliding ones with other head sizes, KV heads, RoPE
 *    dimensions and base than global ones): RMSNorm -> Q (per-head RMSNorm, RoPE) and, in blocks with their
 * own KV cache, K (per-head RMSNorm, RoPE) and V (K's projection when attn_v is absent; RMSNorm without
 *    weight) stored into the cache; blocks that share KV attend over an earlier block's cache. No score
 *    scaling (Q and K are normed), the window on sliding blocks, proportional RoPE on global ones
 *    (rope_freqs.weight: frequency factors of 1e30 leave the unrotated pairs as they are);
 *  - post-attention RMSNorm -> residual -> RMSNorm -> GELU-gated FFN of the block's width -> post-FFN RMSNorm
 *    -> residual; in blocks with a router (26B-A4B) that FFN is a shared expert (its own post norm) added to
 *    the experts' output (build_moe_ffn with GELU experts, normalised weights, the router on the block input
 *    RMS-normed without weight, scaled by 1/sqrt(n_embd) and by ffn_gate_inp.scale), then post_ffw_norm; then
 * the per-layer input: gate (GELU) times the block's slice, projected, RMS-normed, added; then the optional
 * layer output scale;
 *  - every token through every block (llama.cpp keeps all rows there by default), the output rows picked
 *    after the final norm; logits soft-capped. */
#include "model/arch-common.h"

#include <math.h>

lw_status lw__build_gemma4(const lw_model *m, lw__graph *g, int32_t *logits) {
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, PL = hp->n_embd_per_layer, NL = hp->n_layer;
    const lw__rows T = LW_ROWS_TOKENS;
    lw__node *n;

    g->cur_layer = -1;
    int32_t inpL = lw__op_node(g, LW_OP_GET_ROWS, "inp_embd", E, T, lw__W(g, &m->tok_embd), -1, NULL);
    inpL = lw__scale(g, "inp_scaled", inpL, E, T, sqrtf((float)E));
    int32_t inp_pl = -1; /* [n_layer x n_embd_per_layer] per token */
    if (PL > 0) {
        int32_t sel = lw__op_node(g, LW_OP_GET_ROWS, "inp_per_layer_selected", PL * NL, T,
                                  lw__W(g, &m->pl_tok_embd), -1, NULL);
        sel = lw__scale(g, "inp_per_layer_selected", sel, PL * NL, T, sqrtf((float)PL));
        int32_t proj = lw__mul_mat(g, "per_layer_proj", &m->pl_model_proj, inpL, T);
        proj = lw__scale(g, "per_layer_proj", proj, PL * NL, T, 1.0f / sqrtf((float)E));
        proj =
            lw__rms_norm(g, "per_layer_proj", proj, lw__W(g, &m->pl_proj_norm), PL * NL, PL, hp->rms_eps, T);
        inp_pl = lw__op_node(g, LW_OP_ADD, "inp_per_layer", PL * NL, T, proj, sel, NULL);
        inp_pl = lw__scale(g, "inp_per_layer", inp_pl, PL * NL, T, 1.0f / sqrtf(2.0f));
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const lw__layer *L = &m->layers[il];
        const lw__layer_hp *lh = &m->lhp[il];
        const int64_t HD = lh->head_dim, QD = (int64_t)lh->n_head * HD, KD = (int64_t)lh->n_head_kv * HD;
        const float base = lh->swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
        const float fscale = lh->swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
        const lw__wt *ff = lh->swa ? NULL : &m->rope_freqs; /* proportional RoPE on global blocks */
        g->cur_layer = (int32_t)il;

        int32_t cur = lw__rms_norm(g, "attn_norm", inpL, lw__W(g, &L->attn_norm), E, 0, hp->rms_eps, T);
        int32_t q = lw__mul_mat(g, "Qcur", &L->wq, cur, T);
        q = lw__rms_norm(g, "Qcur_normed", q, lw__W(g, &L->q_norm), QD, HD, hp->rms_eps, T);
        q = lw__rope_dims(g, hp, "Qcur_pos", q, lh->n_head, HD, lh->n_rot, base, fscale, ff);
        if (lh->kv_src == (int32_t)il) {
            int32_t k = lw__mul_mat(g, "Kcur", &L->wk, cur, T);
            int32_t v = L->wv.data ? lw__mul_mat(g, "Vcur", &L->wv, cur, T) : k;
            k = lw__rms_norm(g, "Kcur_normed", k, lw__W(g, &L->k_norm), KD, HD, hp->rms_eps, T);
            v = lw__rms_norm(g, "Vcur_normed", v, -1, KD, HD, hp->rms_eps, T);
            k = lw__rope_dims(g, hp, "Kcur_pos", k, lh->n_head_kv, HD, lh->n_rot, base, fscale, ff);
            if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, k, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 0;
            if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, v, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 1;
        }
        cur = lw__op_node(g, LW_OP_ATTN, "kqv_out", QD, T, q, -1, &n);
        if (n) {
            n->ip[0] = lh->kv_src; /* shared blocks read the cache their source block filled */
            n->ip[1] = (int32_t)lh->n_head;
            n->ip[2] = (int32_t)lh->n_head_kv;
            n->ip[3] = (int32_t)HD;
            n->fp[0] = 1.0f; /* f_attention_scale: Q and K are RMS-normed instead */
            n->swa = lh->swa ? (int32_t)hp->n_swa : 0;
        }
        cur = lw__mul_mat(g, "attn_out", &L->wo, cur, T);
        cur = lw__rms_norm(g, "attn_post_norm", cur, lw__W(g, &L->attn_post_norm), E, 0, hp->rms_eps, T);
        int32_t attn_out = lw__op_node(g, LW_OP_ADD, "attn_out", E, T, cur, inpL, NULL);

        if (L->ffn_gate_inp.data) { /* MoE block: the dense FFN as a shared expert, plus the experts */
            int32_t mlp = lw__gemma_ffn(g, hp, L, attn_out, lh->n_ff, &L->ffn_post_norm_1, T);
            int32_t moe =
                lw__rms_norm(g, "ffn_norm_2", attn_out, lw__W(g, &L->ffn_pre_norm_2), E, 0, hp->rms_eps, T);
            /* the router reads the block input normed without weight, scaled, times its per-column scale */
            int32_t r = lw__rms_norm(g, "ffn_moe_router_in", attn_out, -1, E, 0, hp->rms_eps, T);
            r = lw__scale(g, "ffn_moe_router_in", r, E, T, 1.0f / sqrtf((float)E));
            r = lw__op_node(g, LW_OP_MUL, "ffn_moe_router_in", E, T, r, lw__W(g, &L->ffn_gate_inp_s), NULL);
            r = lw__mul_mat(g, "ffn_moe_logits", &L->ffn_gate_inp, r, T);
            moe = lw__moe_ffn(g, m, L, moe, r, T, 1, 1.0f, 1);
            moe = lw__rms_norm(g, "ffn_moe", moe, lw__W(g, &L->ffn_post_norm_2), E, 0, hp->rms_eps, T);
            cur = lw__op_node(g, LW_OP_ADD, "ffn_moe_combined", E, T, mlp, moe, NULL);
            cur = lw__rms_norm(g, "ffn_post_norm", cur, lw__W(g, &L->ffn_post_norm), E, 0, hp->rms_eps, T);
        } else {
            cur = lw__gemma_ffn(g, hp, L, attn_out, lh->n_ff, &L->ffn_post_norm, T);
        }
        cur = lw__op_node(g, LW_OP_ADD, "pe_in", E, T, cur, attn_out, NULL);

        if (inp_pl >= 0) {
            int32_t pe = lw__mul_mat(g, "per_layer_gate", &L->pl_inp_gate, cur, T);
            pe = lw__op_node(g, LW_OP_GELU, "per_layer_gelu", PL, T, pe, -1, NULL);
            pe = lw__op_node(g, LW_OP_MUL, "per_layer_mul", PL, T, pe, inp_pl, &n);
            if (n) n->ip[0] = (int32_t)(il * PL); /* this block's slice */
            pe = lw__mul_mat(g, "per_layer_proj_out", &L->pl_proj, pe, T);
            pe = lw__rms_norm(g, "per_layer_embd_out", pe, lw__W(g, &L->pl_post_norm), E, 0, hp->rms_eps, T);
            cur = lw__op_node(g, LW_OP_ADD, "per_layer_out", E, T, cur, pe, NULL);
        }
        if (L->out_scale.data)
            cur = lw__op_node(g, LW_OP_MUL, "out_scaled", E, T, cur, lw__W(g, &L->out_scale), NULL);
        inpL = cur;
    }
    g->cur_layer = -1;
    int32_t cur = lw__rms_norm(g, "result_norm", inpL, lw__W(g, &m->output_norm), E, 0, hp->rms_eps, T);
    cur = lw__op_node(g, LW_OP_OUT_ROWS, "result_norm_sel", E, LW_ROWS_OUTPUTS, cur, -1, NULL);
    const float cap = hp->final_softcap;
    int32_t out =
        lw__mul_mat(g, cap != 0.0f ? "result_output_raw" : "result_output", &m->output, cur, LW_ROWS_OUTPUTS);
    /* a tied head is not kept plain here: gemma4's loader creates the output (token_embd as
     * TENSOR_DUPLICATED, typed as the output tensor) before the embedding table, in a buffer llama.cpp
     * repacks on x86 (measured: a tied pure-q4_k head is bit-identical only in the repacked order) */
    if (cap != 0.0f) {
        out = lw__op_node(g, LW_OP_SOFTCAP, "result_output", hp->n_vocab, LW_ROWS_OUTPUTS, out, -1, &n);
        if (n) n->fp[0] = 1.0f / cap, n->fp[1] = cap;
    }
    if (g->status != LW_OK) return g->status;
    g->t[out].kind = LW_T_OUTPUT;
    *logits = out;
    return LW_OK;
}
