/* Graph builder for Gemma 2 and Gemma 3 (llama.cpp's models/gemma2.cpp, gemma3.cpp): embeddings scaled by
 * sqrt(n_embd); blocks of RMSNorm -> attention (gemma3: per-head Q/K RMSNorm; NeoX RoPE, Q scaled by
 * 1/sqrt(head), sliding window on all but every period-th block, which also has its own RoPE base; gemma2:
 * scores soft-capped) -> post-attention RMSNorm -> residual -> RMSNorm -> GELU-gated FFN -> post-FFN
 * RMSNorm -> residual; logits soft-capped when the model says so (always for gemma2). */
#include "model/arch-common.h"

#include <math.h>
#include <string.h>

lw_status lw__build_gemma(const lw_model *m, lw__graph *g, int32_t *logits) {
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, HD = hp->n_embd_head_k, QD = (int64_t)hp->n_head * HD,
                  KD = (int64_t)hp->n_head_kv * HD;
    const int gemma3 = !strcmp(m->arch->name, "gemma3");
    /* llama.cpp: 1/sqrt(head size), except the 27B models' (gemma2: 46 blocks, gemma3: 62) 1/sqrt(n_embd /
     * n_head) */
    const float q_scale = hp->n_layer == (gemma3 ? 62u : 46u) ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                                              : 1.0f / sqrtf((float)HD);
    lw__node *n;

    g->cur_layer = -1;
    int32_t inpL =
        lw__op_node(g, LW_OP_GET_ROWS, "inp_embd", E, LW_ROWS_TOKENS, lw__W(g, &m->tok_embd), -1, NULL);
    inpL = lw__scale(g, "inp_scaled", inpL, E, LW_ROWS_TOKENS, sqrtf((float)E));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const lw__layer *L = &m->layers[il];
        const int last = il == hp->n_layer - 1, swa = lw__is_swa(hp, il);
        g->cur_layer = (int32_t)il;

        int32_t cur =
            lw__rms_norm(g, "attn_norm", inpL, lw__W(g, &L->attn_norm), E, 0, hp->rms_eps, LW_ROWS_TOKENS);
        int32_t qkv[3];
        lw__qkv(g, L, cur, QD, KD, qkv);
        int32_t q = qkv[0], k = qkv[1], v = qkv[2];
        if (gemma3) {
            q = lw__rms_norm(g, "Qcur_normed", q, lw__W(g, &L->q_norm), QD, HD, hp->rms_eps, LW_ROWS_TOKENS);
            k = lw__rms_norm(g, "Kcur_normed", k, lw__W(g, &L->k_norm), KD, HD, hp->rms_eps, LW_ROWS_TOKENS);
        }
        const float base = swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
        const float fscale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
        q = lw__rope(g, hp, "Qcur", q, hp->n_head, base, fscale, NULL);
        k = lw__rope(g, hp, "Kcur", k, hp->n_head_kv, base, fscale, NULL);
        q = lw__scale(g, "Qcur_scaled", q, QD, LW_ROWS_TOKENS, q_scale);

        if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, k, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 0;
        if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, v, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 1;
        cur = lw__op_node(g, LW_OP_ATTN, "kqv_out", QD, LW_ROWS_TOKENS, q, -1, &n);
        if (n) {
            n->ip[0] = (int32_t)il;
            n->ip[1] = (int32_t)hp->n_head;
            n->ip[2] = (int32_t)hp->n_head_kv;
            n->ip[3] = (int32_t)HD;
            n->fp[0] = 1.0f; /* Q is already scaled */
            n->fp[1] = hp->attn_softcap;
            n->swa = swa ? (int32_t)hp->n_swa : 0;
        }
        cur = lw__mul_mat(g, "attn_out", &L->wo, cur, LW_ROWS_TOKENS);

        lw__rows rows = LW_ROWS_TOKENS;
        if (last) {
            rows = LW_ROWS_OUTPUTS;
            cur = lw__op_node(g, LW_OP_OUT_ROWS, "attn_out_sel", E, rows, cur, -1, NULL);
            inpL = lw__op_node(g, LW_OP_OUT_ROWS, "inpL_sel", E, rows, inpL, -1, NULL);
        }
        cur = lw__rms_norm(g, "attn_post_norm", cur, lw__W(g, &L->attn_post_norm), E, 0, hp->rms_eps, rows);
        int32_t sa_out = lw__op_node(g, LW_OP_ADD, "sa_out", E, rows, cur, inpL, NULL);

        cur = lw__gemma_ffn(g, hp, L, sa_out, hp->n_ff, &L->ffn_post_norm, rows);
        inpL = lw__op_node(g, LW_OP_ADD, "l_out", E, rows, cur, sa_out, NULL);
    }
    g->cur_layer = -1;
    int32_t cur =
        lw__rms_norm(g, "result_norm", inpL, lw__W(g, &m->output_norm), E, 0, hp->rms_eps, LW_ROWS_OUTPUTS);
    const float cap = hp->final_softcap;
    int32_t out =
        lw__mul_mat(g, cap != 0.0f ? "result_output_raw" : "result_output", &m->output, cur, LW_ROWS_OUTPUTS);
    if (out >= 0 && m->output.data == m->tok_embd.data) g->t[g->nodes[g->n_nodes - 1].src[0]].plain = 1;
    if (cap != 0.0f) {
        out = lw__op_node(g, LW_OP_SOFTCAP, "result_output", hp->n_vocab, LW_ROWS_OUTPUTS, out, -1, &n);
        if (n) n->fp[0] = 1.0f / cap, n->fp[1] = cap;
    }
    if (g->status != LW_OK) return g->status;
    /* every block needs its norms: refuse files without them rather than compute something else */
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if ((gemma3 && (!m->layers[il].q_norm.data || !m->layers[il].k_norm.data)) ||
            !m->layers[il].attn_post_norm.data || !m->layers[il].ffn_post_norm.data)
            return LW_ERR_NOT_FOUND;
    g->t[out].kind = LW_T_OUTPUT;
    *logits = out;
    return LW_OK;
}
