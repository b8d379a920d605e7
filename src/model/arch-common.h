/* Small graph-building helpers shared by the architecture builders (arch-*.c): each adds one node and its
 * output activation, so a builder reads like llama.cpp's graph code. Errors stay in g->status. */
#ifndef LW_ARCH_COMMON_H
#define LW_ARCH_COMMON_H

#include "model/model.h"

/* The graph tensor of a bound weight (-1 when absent). */
int32_t lw__W(lw__graph *g, const lw__wt *w);
/* dst = op(s0, s1) into a new activation of ne0 columns; *out (optional) is the node, for parameters. */
int32_t lw__op_node(lw__graph *g, lw__op op, const char *name, int64_t ne0, lw__rows rows, int32_t s0,
                    int32_t s1, lw__node **out);
/* RMSNorm of x (per group of `group` elements, 0: whole rows) times weight w (-1: none). */
int32_t lw__rms_norm(lw__graph *g, const char *name, int32_t x, int32_t w, int64_t ne0, int64_t group,
                     float eps, lw__rows rows);
/* w . x for every row of x. */
int32_t lw__mul_mat(lw__graph *g, const char *name, const lw__wt *w, int32_t x, lw__rows rows);
/* x + bias when the bias is bound, else x. */
int32_t lw__add_bias(lw__graph *g, const char *name, int32_t x, const lw__wt *b, int64_t ne0);
/* Block L's Q, K and V projections of x (with their biases where bound): out[0..2] (q_dim, kv_dim wide). */
void lw__qkv(lw__graph *g, const lw__layer *L, int32_t x, int64_t q_dim, int64_t kv_dim, int32_t out[3]);
/* RoPE of n_head heads of x with the given base and scale; freq_factors (optional: NULL or unbound) divides
 * the angle of each rotated pair (ggml_rope_ext's third source, llama 3's rope_freqs.weight). */
int32_t lw__rope(lw__graph *g, const lw__hparams *hp, const char *name, int32_t x, int64_t n_head,
                 float freq_base, float freq_scale, const lw__wt *freq_factors);
/* The same for heads of head_dim values of which the first n_rot are rotated (blocks whose geometry differs
 * from the model's: gemma4's sliding and global blocks). */
int32_t lw__rope_dims(lw__graph *g, const lw__hparams *hp, const char *name, int32_t x, int64_t n_head,
                      int64_t head_dim, int64_t n_rot, float freq_base, float freq_scale,
                      const lw__wt *freq_factors);
/* x * v */
int32_t lw__scale(lw__graph *g, const char *name, int32_t x, int64_t ne0, lw__rows rows, float v);
/* Gemma's FFN of block L on x between its norms (llama.cpp's ffn_norm, build_ffn with LLM_FFN_GELU and
 * LLM_FFN_PAR, then `post`: post_ffw_norm, or gemma4's post_ffw_norm_1 in MoE blocks): RMSNorm, gate and up,
 * GEGLU of n_ff, down, RMSNorm (n_embd per row). */
int32_t lw__gemma_ffn(lw__graph *g, const lw__hparams *hp, const lw__layer *L, int32_t x, int64_t n_ff,
                      const lw__wt *post, lw__rows rows);
/* The mixture-of-experts FFN of block L on x (llama.cpp's build_moe_ffn with softmax routing): router logits
 * (`logits`, or -1 for ffn_gate_inp . x), softmax, the top n_expert_used experts, their probabilities
 * (divided by their sum when norm_w; times w_scale unless it is 0 or 1), each chosen expert's gate/up
 * (separate stacks, or gemma4's fused ffn_gate_up_exps), SiLU- or (gelu) GELU-gated, down, the per-expert
 * scales where the file has them, and the weighted sum. Returns the FFN output (n_embd per row). */
int32_t lw__moe_ffn(lw__graph *g, const lw_model *m, const lw__layer *L, int32_t x, int32_t logits,
                    lw__rows rows, int norm_w, float w_scale, int gelu);

#endif
