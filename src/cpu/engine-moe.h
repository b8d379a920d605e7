/* CPU kernels of the mixture-of-experts ops (graph.h: LW_OP_TOPK, LW_OP_MOE_WEIGHTS, LW_OP_MUL_MAT_ID,
 * LW_OP_MOE_SUM), with the numerics of ggml-cpu v0.4.0 as llama.cpp's build_moe_ffn runs them. Called
 * through engine-ops.c's op table; each runs on every thread (ith of nth) and takes its share. */
#ifndef LW_ENGINE_MOE_H
#define LW_ENGINE_MOE_H

#include "cpu/engine-ops.h"

/* Most experts a MoE layer may have (llama.cpp's LLAMA_MAX_EXPERTS). */
#define LW_MOE_MAX_EXPERTS 512

void lw__cpu_op_topk(const lw__exec *ex, const lw__node *nd, int ith, int nth);
void lw__cpu_op_moe_weights(const lw__exec *ex, const lw__node *nd, int ith, int nth);
void lw__cpu_op_mul_mat_id(const lw__exec *ex, const lw__node *nd, int ith, int nth);
void lw__cpu_op_moe_sum(const lw__exec *ex, const lw__node *nd, int ith, int nth);

/* Shared scratch bytes and per-thread scratch floats a MUL_MAT_ID node needs for steps of up to max_tokens;
 * LW_ERR_INVALID_ARG when its shapes do not fit together, LW_ERR_UNSUPPORTED for a weight type without a
 * CPU product. */
lw_status lw__cpu_moe_scratch(const lw__graph *g, const lw__node *nd, int64_t max_tokens,
                              uint64_t *shared_bytes, uint64_t *thread_floats);

#endif
