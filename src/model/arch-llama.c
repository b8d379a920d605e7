/* Graph builder for the llama family (llama.cpp's llm_build_llama): pre-norm blocks of RMSNorm ->
 * attention with RoPE and grouped KV heads -> residual -> RMSNorm -> SwiGLU FFN -> residual. Optional
 * pieces used by relatives are wired when their weights are bound: Q/K/V biases (qwen2) and per-head Q/K
 * RMSNorm before RoPE (qwen3); the RoPE mode comes from the architecture table. */
#include "model/model.h"

#include <math.h>

/* Adds a weight tensor for a bound weight (-1 when absent). */
static int32_t W(lw__graph *g, const lw__wt *w) {
    if (!w->data) return -1;
    return lw__graph_weight(g, w->name, w->type, w->ne0, w->ne1, w->data);
}

/* dst = op(s0, s1) into a new activation of ne0 columns. */
static int32_t node(lw__graph *g, lw__op op, const char *name, int64_t ne0, lw__rows rows, int32_t s0, int32_t s1,
                    lw__node **out) {
    int32_t d = lw__graph_act(g, name, ne0, rows);
    lw__node *n = lw__graph_node(g, op, d, s0, s1, -1);
    if (out) *out = n;
    return n ? d : -1;
}

static int32_t rms_norm(lw__graph *g, const char *name, int32_t x, int32_t w, int64_t ne0, int64_t group, float eps,
                        lw__rows rows) {
    lw__node *n;
    int32_t d = node(g, LW_OP_RMS_NORM, name, ne0, rows, x, w, &n);
    if (n) {
        n->ip[0] = (int32_t)group;
        n->fp[0] = eps;
    }
    return d;
}

static int32_t mul_mat(lw__graph *g, const char *name, const lw__wt *w, int32_t x, lw__rows rows) {
    return node(g, LW_OP_MUL_MAT, name, w->ne1, rows, W(g, w), x, NULL);
}

/* x + bias when the bias is bound, else x. */
static int32_t add_bias(lw__graph *g, const char *name, int32_t x, const lw__wt *b, int64_t ne0) {
    if (!b->data) return x;
    return node(g, LW_OP_ADD, name, ne0, LW_ROWS_TOKENS, x, W(g, b), NULL);
}

static int32_t rope(lw__graph *g, const lw__hparams *hp, const char *name, int32_t x, int64_t n_head) {
    lw__node *n;
    int32_t d = node(g, LW_OP_ROPE, name, n_head * hp->n_embd_head_k, LW_ROWS_TOKENS, x, -1, &n);
    if (n) {
        n->ip[0] = (int32_t)n_head;
        n->ip[1] = (int32_t)hp->n_embd_head_k;
        n->ip[2] = (int32_t)hp->n_rot;
        n->ip[3] = hp->rope_type;
        n->fp[0] = hp->rope_freq_base;
        n->fp[1] = hp->rope_freq_scale;
    }
    return d;
}

lw_status lw__build_llama(const lw_model *m, lw__graph *g, int32_t *logits) {
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, HD = hp->n_embd_head_k, QD = (int64_t)hp->n_head * HD, KD = (int64_t)hp->n_head_kv * HD;
    /* phi3 scales Q (after RoPE) instead of the scores, which rounds differently */
    const float kq_scale = m->arch->q_prescale ? 1.0f : 1.0f / sqrtf((float)HD);
    lw__node *n;

    int32_t inpL = node(g, LW_OP_GET_ROWS, "inp_embd", E, LW_ROWS_TOKENS, W(g, &m->tok_embd), -1, NULL);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const lw__layer *L = &m->layers[il];
        const int last = il == hp->n_layer - 1;
        g->cur_layer = (int32_t)il;
        int32_t inpSA = inpL;

        int32_t cur = rms_norm(g, "attn_norm", inpL, W(g, &L->attn_norm), E, 0, hp->rms_eps, LW_ROWS_TOKENS);
        int32_t q = add_bias(g, "Qcur_b", mul_mat(g, "Qcur", &L->wq, cur, LW_ROWS_TOKENS), &L->bq, QD);
        int32_t k = add_bias(g, "Kcur_b", mul_mat(g, "Kcur", &L->wk, cur, LW_ROWS_TOKENS), &L->bk, KD);
        int32_t v = add_bias(g, "Vcur_b", mul_mat(g, "Vcur", &L->wv, cur, LW_ROWS_TOKENS), &L->bv, KD);
        if (L->q_norm.data) q = rms_norm(g, "Qcur_normed", q, W(g, &L->q_norm), QD, HD, hp->rms_eps, LW_ROWS_TOKENS);
        if (L->k_norm.data) k = rms_norm(g, "Kcur_normed", k, W(g, &L->k_norm), KD, HD, hp->rms_eps, LW_ROWS_TOKENS);
        q = rope(g, hp, "Qcur_rope", q, hp->n_head);
        k = rope(g, hp, "Kcur_rope", k, hp->n_head_kv);
        if (m->arch->q_prescale) {
            q = node(g, LW_OP_SCALE, "Qcur_scaled", QD, LW_ROWS_TOKENS, q, -1, &n);
            if (n) n->fp[0] = 1.0f / sqrtf((float)HD);
        }

        /* into the cache, then attention reads every visible cell from there */
        if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, k, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 0;
        if ((n = lw__graph_node(g, LW_OP_KV_STORE, -1, v, -1, -1))) n->ip[0] = (int32_t)il, n->ip[1] = 1;
        cur = node(g, LW_OP_ATTN, "kqv_out", QD, LW_ROWS_TOKENS, q, -1, &n);
        if (n) {
            n->ip[0] = (int32_t)il;
            n->ip[1] = (int32_t)hp->n_head;
            n->ip[2] = (int32_t)hp->n_head_kv;
            n->ip[3] = (int32_t)HD;
            n->fp[0] = kq_scale;
        }
        cur = mul_mat(g, "attn_out", &L->wo, cur, LW_ROWS_TOKENS);

        /* the last block only needs the rows whose logits are wanted (as llama.cpp's inp_out_ids) */
        lw__rows rows = LW_ROWS_TOKENS;
        if (last) {
            rows = LW_ROWS_OUTPUTS;
            cur = node(g, LW_OP_OUT_ROWS, "attn_out_sel", E, rows, cur, -1, NULL);
            inpSA = node(g, LW_OP_OUT_ROWS, "inpSA_sel", E, rows, inpSA, -1, NULL);
        }
        int32_t ffn_inp = node(g, LW_OP_ADD, "ffn_inp", E, rows, cur, inpSA, NULL);

        cur = rms_norm(g, "ffn_norm", ffn_inp, W(g, &L->ffn_norm), E, 0, hp->rms_eps, rows);
        int32_t gate = mul_mat(g, "ffn_gate", &L->ffn_gate, cur, rows);
        int32_t up = mul_mat(g, "ffn_up", &L->ffn_up, cur, rows);
        cur = node(g, LW_OP_SWIGLU, "ffn_swiglu", hp->n_ff, rows, gate, up, NULL);
        cur = mul_mat(g, "ffn_out", &L->ffn_down, cur, rows);
        inpL = node(g, LW_OP_ADD, "l_out", E, rows, cur, ffn_inp, NULL);
    }
    g->cur_layer = -1;
    int32_t cur = rms_norm(g, "result_norm", inpL, W(g, &m->output_norm), E, 0, hp->rms_eps, LW_ROWS_OUTPUTS);
    int32_t out = mul_mat(g, "result_output", &m->output, cur, LW_ROWS_OUTPUTS);
    if (out >= 0 && m->output.data == m->tok_embd.data) /* tied: llama.cpp keeps it in a plain buffer */
        g->t[g->nodes[g->n_nodes - 1].src[0]].plain = 1;
    if (m->output_b.data)
        out = node(g, LW_OP_ADD, "result_output_b", hp->n_vocab, LW_ROWS_OUTPUTS, out, W(g, &m->output_b), NULL);
    if (g->status != LW_OK) return g->status;
    g->t[out].kind = LW_T_OUTPUT; /* kept after the step: the caller reads it */
    *logits = out;
    return LW_OK;
}
