/* The engine's compute graph: tensors (weights bound at load, activations planned into one arena) and a
 * list of nodes in execution order. A graph is built once per context for the largest batch; a decode step
 * runs it with the step's actual token count. The planner gives every activation an offset in one arena
 * from tensor lifetimes, so running a graph never allocates. Backend-neutral: the CPU runs it today
 * (src/cpu/engine-ops.c), the WebGPU backend can run the same node list. */
#ifndef LW_GRAPH_H
#define LW_GRAPH_H

#include "core/core.h"

/* ---------------------------------------------------------------------------------------------------------
 * Ops (what each node computes; "rows" are tokens, ne0 is the row length)
 * ------------------------------------------------------------------------------------------------------- */

typedef enum lw__op {
    LW_OP_GET_ROWS, /* dst[t] = src0 row tokens[t] (embedding lookup, dequantized to f32)            */
    LW_OP_RMS_NORM, /* dst = x / sqrt(mean(x^2) + fp[0]) * src1, per group of ip[0] (0: whole row)  */
    LW_OP_MUL_MAT,  /* dst[t] = src0 (weight, ne1 x ne0) . src1[t]                                  */
    LW_OP_ADD,      /* dst = src0 + src1 (src1 may be a single row: broadcast bias)                 */
    LW_OP_ROPE,     /* rotate src0 per head: ip[0] heads, ip[1] head dim, ip[2] rotated dims,
                       ip[3] mode (LW_ROPE_*); fp[0] freq base, fp[1] freq scale; src1 (optional,
                       f32 weight of ip[2]/2): frequency factors dividing each pair's angle;
                       YaRN: fp[2] ext_factor (0: off), fp[3] attn_factor (sin/cos scale),
                       fp[4], fp[5] correction dims (ggml_rope_yarn_corr_dims)                        */
    LW_OP_KV_STORE, /* copy src0 rows into the KV cache of layer ip[0] (ip[1]: 0 = K, 1 = V)       */
    LW_OP_ATTN,     /* causal attention of src0 (Q) over layer ip[0]'s cache: ip[1] heads,
                       ip[2] KV heads, ip[3] head dim; fp[0] scale; fp[1] score soft-cap c (scores
                       become c * tanh(s / c); 0: none)                                             */
    LW_OP_SWIGLU,   /* dst = silu(src0) * src1, ggml's vector blocks restarting every ip[0] elements
                       (0: whole rows; MoE rows hold one sub-row per expert slot)                   */
    LW_OP_OUT_ROWS, /* dst = the rows of src0 that produce outputs (all, or the last)                */
    LW_OP_SCALE,    /* dst = src0 * fp[0]                                                            */
    LW_OP_GEGLU,    /* dst = gelu(src0) * src1 (ggml's f16-table GELU), per sub-row of ip[0] (0: whole
                       rows); ip[1] = 1: src0 holds each sub-row's gate then up half (fused experts)   */
    LW_OP_SOFTCAP,  /* dst = tanh(src0 * fp[0]) * fp[1] (ggml's scale, tanh, scale: soft-capping)      */
    /* mixture of experts (llama.cpp's build_moe_ffn); a token's row holds ip-given sub-rows per slot */
    LW_OP_SOFTMAX,     /* dst = softmax of each row of src0 (ggml_soft_max: no mask, scale 1)           */
    LW_OP_TOPK,        /* dst (I32, ip[0] per row) = indices of each row's ip[0] largest src0 values,
                          largest first, ties to the lower index (ggml_argsort_top_k)                   */
    LW_OP_MOE_WEIGHTS, /* dst[j] = src0[src1[j]] per row (src1: TOPK's ids; src0 a weight: its one row of
                          per-expert values for every token); ip[0] 1: divided by their sum (clamped to
                          >= 2^-14, llama.cpp's norm_w); fp[0] not 0 or 1: times fp[0]                     */
    LW_OP_MUL_MAT_ID,  /* dst[t] = for each slot j of src2[t] (I32 expert ids): src0's expert
                          src2[t][j] . sub-row j of src1[t] (sub-row 0 when src1 holds one row per token),
                          the slots' outputs side by side; src0 stacks ip[0] experts of ne1 / ip[0] rows
                          (ggml's MUL_MAT_ID)                                                            */
    LW_OP_MOE_SUM,     /* dst = sum over the ip[0] slots j of sub-row j of src0 times src1[j], rounded
                          as ggml's mul then adds in slot order                                          */
    /* gemma4 (llama.cpp's models/gemma4.cpp): the per-layer embedding gate and the layer scalar */
    LW_OP_GELU, /* dst = gelu(src0) (ggml_gelu: the f16 table of LW_OP_GEGLU, no product)              */
    LW_OP_MUL,  /* dst[i] = src0[i] * src1[ip[0] + i] of the same row of src1 (row 0 when src1 has one
                   row; src1 may be wider than dst: ip[0] picks its columns), or * src1's only value
                   when src1 has one element (ggml_mul of a view, and of a broadcast scalar); ip[1] =
                   k > 0: sub-row j of the k in a row times src1[j] (per-expert scales per slot)     */
    LW_OP_COUNT
} lw__op;

/* RoPE modes, as ggml's: NORMAL rotates adjacent pairs (llama), NEOX rotates (i, i + n_rot/2). */
enum { LW_ROPE_NORMAL = 0, LW_ROPE_NEOX = 2 };

const char *lw__op_name(lw__op op);

/* ---------------------------------------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------------------------------------- */

typedef enum lw__tkind {
    LW_T_WEIGHT, /* bound to model memory; never planned                                         */
    LW_T_ACT,    /* an intermediate in the arena, reusable once its last reader has run          */
    LW_T_OUTPUT, /* in the arena and kept for the whole step (logits): never reused              */
} lw__tkind;

/* How many rows an activation has in a step. */
typedef enum lw__rows {
    LW_ROWS_TOKENS,  /* one per token of the batch        */
    LW_ROWS_OUTPUTS, /* one per output row (all or last)  */
} lw__rows;

typedef struct lw__tensor {
    const char *name; /* for messages and debugging (static string or owned by the model)      */
    uint32_t type;    /* lw_type; activations are f32 but for expert ids (I32)                  */
    uint8_t kind;     /* lw__tkind                                                              */
    uint8_t rows;     /* lw__rows (activations only)                                            */
    uint8_t plain;    /* weights: never repacked by llama.cpp (the tied embedding table)        */
    int64_t ne0;      /* elements per row                                                       */
    int64_t ne1;      /* rows: a weight's rows; an activation's maximum rows (set by planning)  */
    size_t row_bytes; /* bytes per row                                                          */
    void *data;       /* weights: model memory; activations: arena + offset once bound         */
    uint64_t offset;  /* activations: offset in the arena (planned); weights: absolute offset of
                         their bytes in the model file (lw__wt.file_off), for backends that
                         stream weights from the file                                            */
    uint64_t size;    /* activations: bytes reserved (planned, for the largest step)            */
    int32_t layer;    /* block index for activations made inside a block, else -1               */
    int32_t first;    /* index of the producing node (-1 if none)                               */
    int32_t last;     /* index of the last node reading it (-1 if none)                         */
} lw__tensor;

typedef struct lw__node {
    uint8_t op;     /* lw__op                                   */
    int32_t dst;    /* tensor index written (-1 for KV_STORE)    */
    int32_t src[3]; /* tensor indices read (-1 when unused)      */
    int32_t ip[4];  /* integer parameters (see lw__op)           */
    int32_t swa;    /* ATTN: sliding window in cells (0: none)   */
    float fp[6];    /* float parameters (see lw__op)             */
} lw__node;

typedef struct lw__graph {
    lw_allocator alloc;  /* for the tensor and node arrays                                 */
    lw__tensor *t;       /* tensors                                                        */
    int32_t n_t, cap_t;  /* used / allocated                                               */
    lw__node *nodes;     /* nodes in execution order                                       */
    int32_t n_nodes;     /* used                                                           */
    int32_t cap_nodes;   /* allocated                                                      */
    lw_status status;    /* first build error (capacity), checked once at the end          */
    int32_t cur_layer;   /* builders set this; new tensors record it (-1: outside blocks)  */
    uint64_t arena_size; /* bytes the plan needs (after lw__graph_plan)                    */
} lw__graph;

/* ---------------------------------------------------------------------------------------------------------
 * Building (errors are sticky in g->status so builders can chain calls and check once)
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__graph_init(lw__graph *g, const lw_allocator *alloc, int32_t cap_tensors, int32_t cap_nodes);
void lw__graph_free(lw__graph *g);
/* A weight tensor of ne1 rows of ne0 elements of type, at data. Returns its index (-1 on error). */
int32_t lw__graph_weight(lw__graph *g, const char *name, uint32_t type, int64_t ne0, int64_t ne1, void *data);
/* An f32 activation with rows of ne0 elements. */
int32_t lw__graph_act(lw__graph *g, const char *name, int64_t ne0, lw__rows rows);
/* The same of another element type (LW_TYPE_I32: expert ids). */
int32_t lw__graph_act_typed(lw__graph *g, const char *name, uint32_t type, int64_t ne0, lw__rows rows);
/* Appends a node; returns a pointer to it so the builder can set parameters (NULL on error). */
lw__node *lw__graph_node(lw__graph *g, lw__op op, int32_t dst, int32_t s0, int32_t s1, int32_t s2);

/* ---------------------------------------------------------------------------------------------------------
 * Static memory planning
 * ------------------------------------------------------------------------------------------------------- */

/* Computes lifetimes and arena offsets for the largest step (max_tokens rows, max_outputs output rows).
 * Offsets are multiples of align (a power of two). A tensor's memory is reused only after its last reader;
 * a node's output never shares memory with its inputs. Sets g->arena_size. Allocates temporary memory. */
lw_status lw__graph_plan(lw__graph *g, int64_t max_tokens, int64_t max_outputs, uint64_t align);
/* Points every planned tensor at base + offset (base: at least arena_size bytes). */
void lw__graph_bind(lw__graph *g, void *base);

#endif
