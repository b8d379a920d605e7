/* The mixture-of-experts FFN shared by the architecture builders (arch-common.h: lw__moe_ffn), node for node
 * as llama.cpp's llm_graph_context::build_moe_ffn builds it for softmax-routed experts with a SiLU gate
 * (LLM_FFN_SILU, LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX, separate gate and up experts, no biases, no shared
 * expert): ffn_moe_logits -> ffn_moe_probs -> ffn_moe_topk -> ffn_moe_weights(_norm) -> ffn_moe_up /
 * ffn_moe_gate -> ffn_moe_swiglu -> ffn_moe_down -> ffn_moe_out (the names of llama.cpp's callbacks); and as
 * gemma4 calls it: router logits of the caller's, GELU-gated experts from one fused gate|up stack, per-expert
 * scales of the products (ffn_*_exps.scale). */
#include "model/arch-common.h"

/* dst = experts ids[t][j] of w times x for every slot j, side by side (rows per expert each). */
static int32_t expert_mm(lw__graph *g, const char *name, const lw__wt *w, int32_t x, int32_t ids, int64_t k,
                         lw__rows rows) {
    const int64_t per = w->ne2 > 0 ? w->ne1 / w->ne2 : 0;
    int32_t d = lw__graph_act(g, name, k * per, rows);
    lw__node *n = lw__graph_node(g, LW_OP_MUL_MAT_ID, d, lw__W(g, w), x, ids);
    if (n) n->ip[0] = (int32_t)w->ne2;
    return n ? d : -1;
}

/* An expert product's output times its expert's scale when the file has per-expert scales (llama.cpp's
 * build_lora_mm_id with w_s: the scales gathered per slot, then ggml_mul). */
static int32_t expert_scale(lw__graph *g, const char *name, int32_t y, int64_t ne0, const lw__wt *s,
                            int32_t ids, int64_t k, lw__rows rows) {
    if (!s->data) return y;
    lw__node *n;
    int32_t sel = lw__op_node(g, LW_OP_MOE_WEIGHTS, name, k, rows, lw__W(g, s), ids, NULL);
    int32_t out = lw__op_node(g, LW_OP_MUL, name, ne0, rows, y, sel, &n);
    if (n) n->ip[1] = (int32_t)k;
    return out;
}

int32_t lw__moe_ffn(lw__graph *g, const lw_model *m, const lw__layer *L, int32_t x, int32_t logits,
                    lw__rows rows, int norm_w, float w_scale, int gelu) {
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, k = hp->n_expert_used, F = hp->n_ff_exp;
    lw__node *n;
    if (logits < 0) logits = lw__mul_mat(g, "ffn_moe_logits", &L->ffn_gate_inp, x, rows);
    int32_t probs = lw__op_node(g, LW_OP_SOFTMAX, "ffn_moe_probs", hp->n_expert, rows, logits, -1, NULL);
    int32_t ids = lw__graph_act_typed(g, "ffn_moe_topk", LW_TYPE_I32, k, rows);
    if ((n = lw__graph_node(g, LW_OP_TOPK, ids, probs, -1, -1))) n->ip[0] = (int32_t)k;
    int32_t wts = lw__op_node(g, LW_OP_MOE_WEIGHTS, norm_w ? "ffn_moe_weights_norm" : "ffn_moe_weights", k,
                              rows, probs, ids, &n);
    if (n) n->ip[0] = norm_w != 0, n->fp[0] = w_scale;
    int32_t act;
    if (L->ffn_gate_up_exps.data) { /* one product, each slot's gate half then its up half */
        int32_t gu = expert_mm(g, "ffn_moe_gate_up", &L->ffn_gate_up_exps, x, ids, k, rows);
        act = lw__op_node(g, LW_OP_GEGLU, "ffn_moe_geglu", k * F, rows, gu, -1, &n);
        if (n) n->ip[0] = (int32_t)F, n->ip[1] = 1;
    } else {
        int32_t up = expert_mm(g, "ffn_moe_up", &L->ffn_up_exps, x, ids, k, rows);
        up = expert_scale(g, "ffn_moe_up_scaled", up, k * F, &L->ffn_up_exps_s, ids, k, rows);
        int32_t gate = expert_mm(g, "ffn_moe_gate", &L->ffn_gate_exps, x, ids, k, rows);
        gate = expert_scale(g, "ffn_moe_gate_scaled", gate, k * F, &L->ffn_gate_exps_s, ids, k, rows);
        act = lw__op_node(g, gelu ? LW_OP_GEGLU : LW_OP_SWIGLU, gelu ? "ffn_moe_geglu" : "ffn_moe_swiglu",
                          k * F, rows, gate, up, &n);
        if (n) n->ip[0] = (int32_t)F; /* ggml's GLU runs per expert row */
    }
    int32_t down = expert_mm(g, "ffn_moe_down", &L->ffn_down_exps, act, ids, k, rows);
    down = expert_scale(g, "ffn_moe_down_scaled", down, k * E, &L->ffn_down_exps_s, ids, k, rows);
    int32_t out = lw__op_node(g, LW_OP_MOE_SUM, "ffn_moe_out", E, rows, down, wts, &n);
    if (n) n->ip[0] = (int32_t)k;
    return out;
}
