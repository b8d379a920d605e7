/* Graph builder for the llama family (llama.cpp's llm_build_llama): pre-norm blocks of RMSNorm ->
 * attention with RoPE and grouped KV heads -> residual -> RMSNorm -> SwiGLU FFN -> residual. Optional
 * pieces used by relatives are wired when their weights are bound: Q/K/V biases (qwen2) and per-head Q/K
 * RMSNorm before RoPE (qwen3); the RoPE mode comes from the architecture table, and so does a
 * mixture-of-experts FFN in place of the dense one (qwen3moe: llama.cpp's models/qwen3moe.cpp, which is
 * qwen3's attention with build_moe_ffn). */
#include "model/arch-common.h"

#include <math.h>

lw_status lw__build_llama(const lw_model *m, lw__graph *g, int32_t *logits) {
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, HD = hp->n_embd_head_k, QD = (int64_t)hp->n_head * HD,
                  KD = (int64_t)hp->n_head_kv * HD;
    /* phi3 scales Q (after RoPE) instead of the scores, which rounds differently */
    const float kq_scale = m->arch->q_prescale ? 1.0f : 1.0f / sqrtf((float)HD);
    lw__node *n;

    int32_t inpL =
        lw__op_node(g, LW_OP_GET_ROWS, "inp_embd", E, LW_ROWS_TOKENS, lw__W(g, &m->tok_embd), -1, NULL);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const lw__layer *L = &m->layers[il];
        const int last = il == hp->n_layer - 1;
        g->cur_layer = (int32_t)il;
        int32_t inpSA = inpL;

        int32_t cur =
            lw__rms_norm(g, "attn_norm", inpL, lw__W(g, &L->attn_norm), E, 0, hp->rms_eps, LW_ROWS_TOKENS);
        int32_t qkv[3];
        lw__qkv(g, L, cur, QD, KD, qkv);
        int32_t q = qkv[0], k = qkv[1], v = qkv[2];
        if (L->q_norm.data)
            q = lw__rms_norm(g, "Qcur_normed", q, lw__W(g, &L->q_norm), QD, HD, hp->rms_eps, LW_ROWS_TOKENS);
        if (L->k_norm.data)
            k = lw__rms_norm(g, "Kcur_normed", k, lw__W(g, &L->k_norm), KD, HD, hp->rms_eps, LW_ROWS_TOKENS);
        q = lw__rope(g, hp, "Qcur_rope", q, hp->n_head, hp->rope_freq_base, hp->rope_freq_scale,
                     &m->rope_freqs);
        k = lw__rope(g, hp, "Kcur_rope", k, hp->n_head_kv, hp->rope_freq_base, hp->rope_freq_scale,
                     &m->rope_freqs);
        if (m->arch->q_prescale) {
            q = lw__op_node(g, LW_OP_SCALE, "Qcur_scaled", QD, LW_ROWS_TOKENS, q, -1, &n);
            if (n) n->fp[0] = 1.0f / sqrtf((float)HD);
        }

        /* into the cache, then attention reads every visible cell from there */
        if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, k, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 0;
        if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, v, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 1;
        cur = lw__op_node(g, LW_OP_ATTN, "kqv_out", QD, LW_ROWS_TOKENS, q, -1, &n);
        if (n) {
            n->ip[0] = (int32_t)il;
            n->ip[1] = (int32_t)hp->n_head;
            n->ip[2] = (int32_t)hp->n_head_kv;
            n->ip[3] = (int32_t)HD;
            n->fp[0] = kq_scale;
        }
        cur = lw__mul_mat(g, "attn_out", &L->wo, cur, LW_ROWS_TOKENS);

        /* the last block only needs the rows whose logits are wanted (as llama.cpp's inp_out_ids) */
        lw__rows rows = LW_ROWS_TOKENS;
        if (last) {
            rows = LW_ROWS_OUTPUTS;
            cur = lw__op_node(g, LW_OP_OUT_ROWS, "attn_out_sel", E, rows, cur, -1, NULL);
            inpSA = lw__op_node(g, LW_OP_OUT_ROWS, "inpSA_sel", E, rows, inpSA, -1, NULL);
        }
        int32_t ffn_inp = lw__op_node(g, LW_OP_ADD, "ffn_inp", E, rows, cur, inpSA, NULL);

        cur = lw__rms_norm(g, "ffn_norm", ffn_inp, lw__W(g, &L->ffn_norm), E, 0, hp->rms_eps, rows);
        if (m->arch->moe) { /* qwen3moe: normalised weights, no scale (its expert_weights_scale stays 0) */
            cur = lw__moe_ffn(g, m, L, cur, -1, rows, 1, 0.0f, 0);
        } else {
            int32_t gate = lw__mul_mat(g, "ffn_gate", &L->ffn_gate, cur, rows);
            int32_t up = lw__mul_mat(g, "ffn_up", &L->ffn_up, cur, rows);
            cur = lw__op_node(g, LW_OP_SWIGLU, "ffn_swiglu", hp->n_ff, rows, gate, up, NULL);
            cur = lw__mul_mat(g, "ffn_out", &L->ffn_down, cur, rows);
        }
        inpL = lw__op_node(g, LW_OP_ADD, "l_out", E, rows, cur, ffn_inp, NULL);
    }
    g->cur_layer = -1;
    int32_t cur =
        lw__rms_norm(g, "result_norm", inpL, lw__W(g, &m->output_norm), E, 0, hp->rms_eps, LW_ROWS_OUTPUTS);
    int32_t out = lw__mul_mat(g, "result_output", &m->output, cur, LW_ROWS_OUTPUTS);
    if (out >= 0 && m->output.data == m->tok_embd.data) /* tied: llama.cpp keeps it in a plain buffer */
        g->t[g->nodes[g->n_nodes - 1].src[0]].plain = 1;
    if (m->output_b.data)
        out = lw__op_node(g, LW_OP_ADD, "result_output_b", hp->n_vocab, LW_ROWS_OUTPUTS, out,
                          lw__W(g, &m->output_b), NULL);
    if (g->status != LW_OK) return g->status;
    g->t[out].kind = LW_T_OUTPUT; /* kept after the step: the caller reads it */
    *logits = out;
    return LW_OK;
}
