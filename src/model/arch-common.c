/* Graph-building helpers shared by the architecture builders (see arch-common.h). */
#include "model/arch-common.h"

#include <math.h>

int32_t lw__W(lw__graph *g, const lw__wt *w) {
    if (!w->data) return -1;
    int32_t i = lw__graph_weight(g, w->name, w->type, w->ne0, w->ne1, w->data);
    if (i >= 0) g->t[i].offset = w->file_off; /* where a backend that streams weights finds them */
    return i;
}

int32_t lw__op_node(lw__graph *g, lw__op op, const char *name, int64_t ne0, lw__rows rows, int32_t s0,
                    int32_t s1, lw__node **out) {
    int32_t d = lw__graph_act(g, name, ne0, rows);
    lw__node *n = lw__graph_node(g, op, d, s0, s1, -1);
    if (out) *out = n;
    return n ? d : -1;
}

int32_t lw__rms_norm(lw__graph *g, const char *name, int32_t x, int32_t w, int64_t ne0, int64_t group,
                     float eps, lw__rows rows) {
    lw__node *n;
    int32_t d = lw__op_node(g, LW_OP_RMS_NORM, name, ne0, rows, x, w, &n);
    if (n) {
        n->ip[0] = (int32_t)group;
        n->fp[0] = eps;
    }
    return d;
}

int32_t lw__mul_mat(lw__graph *g, const char *name, const lw__wt *w, int32_t x, lw__rows rows) {
    return lw__op_node(g, LW_OP_MUL_MAT, name, w->ne1, rows, lw__W(g, w), x, NULL);
}

int32_t lw__add_bias(lw__graph *g, const char *name, int32_t x, const lw__wt *b, int64_t ne0) {
    if (!b->data) return x;
    return lw__op_node(g, LW_OP_ADD, name, ne0, LW_ROWS_TOKENS, x, lw__W(g, b), NULL);
}

void lw__qkv(lw__graph *g, const lw__layer *L, int32_t x, int64_t q_dim, int64_t kv_dim, int32_t out[3]) {
    const lw__rows T = LW_ROWS_TOKENS;
    out[0] = lw__add_bias(g, "Qcur_b", lw__mul_mat(g, "Qcur", &L->wq, x, T), &L->bq, q_dim);
    out[1] = lw__add_bias(g, "Kcur_b", lw__mul_mat(g, "Kcur", &L->wk, x, T), &L->bk, kv_dim);
    out[2] = lw__add_bias(g, "Vcur_b", lw__mul_mat(g, "Vcur", &L->wv, x, T), &L->bv, kv_dim);
}

int32_t lw__rope(lw__graph *g, const lw__hparams *hp, const char *name, int32_t x, int64_t n_head,
                 float freq_base, float freq_scale, const lw__wt *freq_factors) {
    return lw__rope_dims(g, hp, name, x, n_head, hp->n_embd_head_k, hp->n_rot, freq_base, freq_scale,
                         freq_factors);
}

int32_t lw__rope_dims(lw__graph *g, const lw__hparams *hp, const char *name, int32_t x, int64_t n_head,
                      int64_t head_dim, int64_t n_rot, float freq_base, float freq_scale,
                      const lw__wt *freq_factors) {
    lw__node *n;
    const int32_t ff = freq_factors ? lw__W(g, freq_factors) : -1;
    int32_t d = lw__op_node(g, LW_OP_ROPE, name, n_head * head_dim, LW_ROWS_TOKENS, x, ff, &n);
    if (n) {
        n->ip[0] = (int32_t)n_head;
        n->ip[1] = (int32_t)head_dim;
        n->ip[2] = (int32_t)n_rot;
        n->ip[3] = hp->rope_type;
        n->fp[0] = freq_base;
        n->fp[1] = freq_scale;
        n->fp[2] = hp->yarn_ext_factor;
        n->fp[3] = hp->yarn_attn_factor;
        /* ggml_rope_yarn_corr_dims (computed by ggml-base, where nothing is fused) */
        const float n_dims = (float)n_rot, orig = (float)hp->n_ctx_orig_yarn,
                    two_pi = 2.0f * (float)3.14159265358979323846;
        const float lb = 2.0f * logf(freq_base);
        const float start = floorf(n_dims * logf(orig / (hp->yarn_beta_fast * two_pi)) / lb);
        const float end = ceilf(n_dims * logf(orig / (hp->yarn_beta_slow * two_pi)) / lb);
        n->fp[4] = start > 0.0f ? start : 0.0f;
        n->fp[5] = end < n_dims - 1.0f ? end : n_dims - 1.0f;
    }
    return d;
}

int32_t lw__scale(lw__graph *g, const char *name, int32_t x, int64_t ne0, lw__rows rows, float v) {
    lw__node *n;
    int32_t d = lw__op_node(g, LW_OP_SCALE, name, ne0, rows, x, -1, &n);
    if (n) n->fp[0] = v;
    return d;
}

int32_t lw__gemma_ffn(lw__graph *g, const lw__hparams *hp, const lw__layer *L, int32_t x, int64_t n_ff,
                      const lw__wt *post, lw__rows rows) {
    const int64_t E = hp->n_embd;
    int32_t cur = lw__rms_norm(g, "ffn_norm", x, lw__W(g, &L->ffn_norm), E, 0, hp->rms_eps, rows);
    int32_t gate = lw__mul_mat(g, "ffn_gate", &L->ffn_gate, cur, rows);
    int32_t up = lw__mul_mat(g, "ffn_up", &L->ffn_up, cur, rows);
    cur = lw__op_node(g, LW_OP_GEGLU, "ffn_geglu", n_ff, rows, gate, up, NULL);
    cur = lw__mul_mat(g, "ffn_out", &L->ffn_down, cur, rows);
    return lw__rms_norm(g, "ffn_post_norm", cur, lw__W(g, post), E, 0, hp->rms_eps, rows);
}
