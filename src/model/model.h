/* Internal model structures: hyper-parameters, bound weights, and the architecture table that plugs a
 * graph builder per architecture. Adding an architecture = an hparams tweak (if any), its tensor names in
 * the binder, and a builder (or flags on the llama builder: biases, q/k norms, NeoX RoPE). */
#ifndef LW_MODEL_H
#define LW_MODEL_H

#include "graph/graph.h"
#include "model/engine.h"

/* ---------------------------------------------------------------------------------------------------------
 * Hyper-parameters (read from "<arch>.*" keys, defaults as llama.cpp's llama-model.cpp)
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__hparams {
    uint32_t n_vocab;       /* rows of token_embd                                           */
    uint32_t n_ctx_train;   /* <arch>.context_length                                        */
    uint32_t n_embd;        /* <arch>.embedding_length                                      */
    uint32_t n_layer;       /* <arch>.block_count                                           */
    uint32_t n_ff;          /* <arch>.feed_forward_length                                   */
    uint32_t n_head;        /* <arch>.attention.head_count                                  */
    uint32_t n_head_kv;     /* <arch>.attention.head_count_kv (default n_head)              */
    uint32_t n_embd_head_k; /* <arch>.attention.key_length (default n_embd / n_head)        */
    uint32_t n_embd_head_v; /* <arch>.attention.value_length (default n_embd / n_head)      */
    uint32_t n_rot;         /* <arch>.rope.dimension_count (default n_embd_head_k)          */
    float rms_eps;          /* <arch>.attention.layer_norm_rms_epsilon                      */
    float rope_freq_base;   /* <arch>.rope.freq_base (default 10000)                        */
    float rope_freq_scale;  /* 1 / <arch>.rope.scaling.factor (linear or YaRN scaling), else 1 */
    float yarn_ext_factor;  /* 1 with YaRN scaling (llama.cpp's default when the type is yarn), else 0 */
    float yarn_attn_factor; /* sin/cos scale: YaRN's mscale correction x rope.scaling.attn_factor */
    float yarn_beta_fast;   /* YaRN ramp ends (llama.cpp's defaults 32 and 1 for these archs)  */
    float yarn_beta_slow;
    uint32_t n_ctx_orig_yarn;  /* <arch>.rope.scaling.original_context_length (default n_ctx_train) */
    int rope_type;             /* LW_ROPE_NORMAL or LW_ROPE_NEOX (per architecture)            */
    uint32_t n_swa;            /* <arch>.attention.sliding_window (0: none)                    */
    uint32_t swa_period;       /* <arch>.attention.sliding_window_pattern: every period-th
                                  block (the last of each period) sees the whole context       */
    float rope_freq_base_swa;  /* <arch>.rope.freq_base_swa for sliding-window blocks        */
    float rope_freq_scale_swa; /* their frequency scale (gemma2: rope_freq_scale; gemma3: 1)   */
    float attn_softcap;        /* scores become c * tanh(s / c) before the softmax (gemma2's
                                  <arch>.attn_logit_softcapping, default 50); 0: none           */
    float final_softcap;       /* the same on the logits (<arch>.final_logit_softcapping; gemma2
                                  default 30, gemma3 default 0); 0: none                        */
    uint32_t n_expert;         /* <arch>.expert_count: experts per MoE layer (0: a dense model) */
    uint32_t n_expert_used;    /* <arch>.expert_used_count: experts each token goes through     */
    uint32_t n_ff_exp;         /* <arch>.expert_feed_forward_length (default n_ff / n_expert_used) */
    /* gemma4 (llama.cpp's models/gemma4.cpp load_arch_hparams); per-block values are in lw_model.lhp */
    uint32_t n_embd_head_swa;  /* <arch>.attention.key_length_swa: head size of sliding blocks       */
    uint32_t n_rot_swa;        /* <arch>.rope.dimension_count_swa (default n_rot)                  */
    uint32_t n_embd_per_layer; /* <arch>.embedding_length_per_layer_input (0: no per-layer input)  */
    uint32_t n_layer_kv;       /* blocks with their own KV cache: n_layer - attention.shared_kv_layers */
} lw__hparams;

/* One block's attention and FFN geometry. Every architecture fills it (uniform blocks copy lw__hparams);
 * gemma4's blocks differ: sliding ones have other head sizes, KV heads, RoPE dimensions and bases than
 * global ones, FFN widths may double on the blocks that share KV, and those blocks read an earlier
 * block's cache. */
typedef struct lw__layer_hp {
    uint32_t n_head;    /* query heads                                                     */
    uint32_t n_head_kv; /* KV heads                                                        */
    uint32_t head_dim;  /* head size (keys and values)                                     */
    uint32_t n_rot;     /* rotated dimensions per head                                     */
    uint32_t n_ff;      /* FFN width                                                       */
    int swa;            /* 1: sliding-window attention                                     */
    int32_t kv_src;     /* the block whose KV cache this one attends over (itself, or for
                           gemma4's shared blocks llama.cpp's reuse: n_layer_kv - 2 for a
                           sliding block, n_layer_kv - 1 for a global one)                  */
} lw__layer_hp;

/* ---------------------------------------------------------------------------------------------------------
 * Weights
 * ------------------------------------------------------------------------------------------------------- */

/* One bound weight: a 1-D or 2-D tensor (ne1 rows of ne0 elements), or a 3-D stack of ne2 experts' matrices
 * held as one 2-D tensor of ne1 = ne2 x (rows per expert) rows. data == NULL: absent (optional). */
typedef struct lw__wt {
    const char *name;  /* GGUF tensor name (owned by the model's lw_gguf)  */
    uint32_t type;     /* lw_type                                         */
    int64_t ne0;       /* elements per row                                */
    int64_t ne1;       /* rows (all experts' rows for a 3-D tensor)       */
    int64_t ne2;       /* experts (1 for 1-D and 2-D tensors)             */
    void *data;        /* in the model's weight allocation; with no_weights a non-NULL token
                          that marks the tensor present and is never dereferenced            */
    uint64_t file_off; /* absolute offset of its bytes in the model file (slices: of their
                          first row): where a GPU backend streams them from                   */
} lw__wt;

/* A transformer block's weights; optional ones stay NULL for architectures without them. */
typedef struct lw__layer {
    lw__wt attn_norm;        /* [n_embd]                                   */
    lw__wt wq, wk, wv, wo;   /* [n_embd -> n_head*hd], [.. kv], [.. kv], [n_head*hd -> n_embd] */
    lw__wt bq, bk, bv;       /* optional biases (qwen2)                    */
    lw__wt q_norm, k_norm;   /* optional per-head RMSNorm weights (qwen3)  */
    lw__wt ffn_norm;         /* [n_embd]                                   */
    lw__wt attn_post_norm;   /* optional norm of the attention output (gemma3) */
    lw__wt ffn_post_norm;    /* optional norm of the FFN output (gemma3)       */
    lw__wt ffn_gate, ffn_up; /* [n_embd -> n_ff]                           */
    lw__wt ffn_down;         /* [n_ff -> n_embd]                           */
    lw__wt wqkv;             /* optional fused Q|K|V rows (phi3); wq/wk/wv are slices of it     */
    lw__wt ffn_gate_up;      /* optional fused gate|up rows (phi3); ffn_gate/up are slices      */
    lw__wt ffn_gate_inp;     /* MoE router [n_embd -> n_expert] (qwen3moe); ffn_gate/up/down absent */
    lw__wt ffn_gate_exps;    /* MoE experts' gate [n_embd -> n_ff_exp] x n_expert               */
    lw__wt ffn_up_exps;      /* MoE experts' up   [n_embd -> n_ff_exp] x n_expert               */
    lw__wt ffn_down_exps;    /* MoE experts' down [n_ff_exp -> n_embd] x n_expert               */
    lw__wt ffn_gate_up_exps; /* MoE experts' fused gate|up [n_embd -> 2 n_ff_exp] x n_expert (gemma4;
                                ffn_gate_exps / ffn_up_exps absent then)                             */
    lw__wt ffn_gate_exps_s;  /* optional per-expert scales of the gate products [n_expert]           */
    lw__wt ffn_up_exps_s;    /* optional per-expert scales of the up products [n_expert]             */
    lw__wt ffn_down_exps_s;  /* optional per-expert scales of the down products [n_expert] (gemma4's
                                router.per_expert_scale)                                             */
    lw__wt ffn_gate_inp_s;   /* gemma4 MoE: the router input's per-column scale [n_embd]             */
    lw__wt ffn_pre_norm_2;   /* gemma4 MoE: norm of the experts' input [n_embd]                     */
    lw__wt ffn_post_norm_1;  /* gemma4 MoE: norm of the dense FFN's output [n_embd]                 */
    lw__wt ffn_post_norm_2;  /* gemma4 MoE: norm of the experts' output [n_embd]                    */
    lw__wt pl_inp_gate;      /* gemma4 per-layer input gate [n_embd -> n_embd_per_layer]        */
    lw__wt pl_proj;          /* gemma4 per-layer projection [n_embd_per_layer -> n_embd]        */
    lw__wt pl_post_norm;     /* gemma4 norm of that projection [n_embd]                         */
    lw__wt out_scale;        /* gemma4 optional layer output scale [1]                          */
} lw__layer;

/* ---------------------------------------------------------------------------------------------------------
 * Architectures
 * ------------------------------------------------------------------------------------------------------- */

/* Builds the decode graph of a context for up to max_tokens tokens per step; sets *logits to the index of
 * the output tensor (n_vocab per output row). */
typedef lw_status (*lw__build_fn)(const lw_model *m, lw__graph *g, int32_t *logits);

typedef struct lw__arch_def {
    const char *name;   /* general.architecture value                                   */
    int rope_type;      /* LW_ROPE_NORMAL / LW_ROPE_NEOX                                 */
    lw__build_fn build; /* graph builder                                                 */
    int q_prescale;     /* 1: Q is scaled by 1/sqrt(head) before attention (phi3)        */
    int moe;            /* 1: every block's FFN is a mixture of experts (qwen3moe)       */
} lw__arch_def;

/* Builders (one file each: arch-<name>.c). */
lw_status lw__build_llama(const lw_model *m, lw__graph *g, int32_t *logits);
lw_status lw__build_gemma(const lw_model *m, lw__graph *g, int32_t *logits); /* gemma2 and gemma3 */
lw_status lw__build_gemma4(const lw_model *m, lw__graph *g, int32_t *logits);

/* Whether block il uses the sliding window (llama.cpp's set_swa_pattern without dense_first). */
static inline int lw__is_swa(const lw__hparams *hp, uint32_t il) {
    return hp->n_swa > 0 && (hp->swa_period == 0 || il % hp->swa_period < hp->swa_period - 1);
}

struct lw_model {
    lw_allocator alloc;             /* for everything the model owns                         */
    char err[LW_ERRMSG_SIZE];       /* last error message                                    */
    lw_source *own_src;             /* opened by lw_model_load_file (else NULL)              */
    lw_gguf *gguf;                  /* parsed header; kept for metadata and tensor names     */
    const lw__arch_def *arch;       /* architecture                                          */
    lw__hparams hp;                 /* hyper-parameters                                      */
    lw__wt tok_embd;                /* [n_vocab rows of n_embd]                              */
    lw__wt output_norm;             /* [n_embd]                                              */
    lw__wt output;                  /* [n_vocab rows of n_embd]; token_embd when tied        */
    lw__wt output_b;                /* optional [n_vocab] bias (qwen2)                       */
    lw__wt rope_freqs;              /* optional [n_rot/2] RoPE frequency factors (llama 3.1+):
                                       theta of dim pair i is divided by rope_freqs[i]          */
    lw__wt pl_tok_embd;             /* gemma4 per_layer_token_embd [n_vocab rows of
                                       n_embd_per_layer x n_layer] (absent: no per-layer input) */
    lw__wt pl_model_proj;           /* gemma4 per_layer_model_proj [n_embd -> that width]    */
    lw__wt pl_proj_norm;            /* gemma4 per_layer_proj_norm [n_embd_per_layer]          */
    lw__layer *layers;              /* n_layer blocks                                        */
    lw__layer_hp *lhp;              /* n_layer blocks' geometry                              */
    void *weights;                  /* the one weight allocation (aligned start)             */
    void *weights_raw;              /* what the allocator returned (freed)                   */
    int no_weights;                 /* header only: weights were bound but not read (GPU path) */
    uint64_t weight_bytes;          /* its size                                              */
    lw_vocab *vocab;                /* the tokenizer; NULL when the file has none we read (or
                                       lw_model_params.no_vocab)                              */
    int no_vocab;                   /* the tokenizer was not asked for                        */
    char vocab_why[LW_ERRMSG_SIZE]; /* why vocab is NULL (for lw_model_tokenize's message) */
    /* row store of token_embd (lw_model_params.rows_embd; src/rows/) */
    struct lw__rowfile *embd_rows;  /* the table's row file when the store serves it; the table
                                       is then not in weights and tok_embd.data is &rows_token  */
    uint32_t rows_embd;             /* rows each context keeps in memory (asked for)          */
    int32_t rows_warm;              /* ids warmed at context creation (0: all slots, < 0: none) */
    const char *rows_dir;           /* directory asked for (caller's string; used at load only) */
    lw_status rows_status;          /* LW_OK, or the first table's failure (its table resident) */
    char rows_msg[LW_ROWS_N_TABLES * LW_ERRMSG_SIZE]; /* the asked tables' messages, "; " between */
    uint8_t rows_token;             /* tok_embd.data's target with the store: marks the weight
                                       present for the graph; never read                       */
    /* row store of per_layer_token_embd (lw_model_params.rows_per_layer), the same way */
    struct lw__rowfile *pl_rows; /* its row file when the store serves it (pl_tok_embd.data is
                                    then &rows_pl_token, the table not in weights)           */
    uint32_t rows_per_layer;     /* rows each context keeps in memory (asked for)          */
    uint8_t rows_pl_token;       /* pl_tok_embd.data's marker with the store; never read   */
    /* row store of the MoE experts (lw_model_params.rows_experts): a row file per layer and expert tensor
     * (index layer * 3 + part: 0 gate or gemma4's gate|up, 1 up, 2 down), one row per expert's slab */
    struct lw__rowfile **exp_rows; /* n_layer * 3 (NULL entries: no such tensor), or NULL */
    uint8_t *exp_tokens;           /* n_layer * 3 markers: a served tensor's data points at its own */
    uint32_t rows_experts;         /* experts of each layer each context keeps in memory (asked for) */
    /* each table's outcome (lw_rows_table) and message ("" unasked) */
    lw_status rows_tab_status[LW_ROWS_N_TABLES];
    char rows_tab_msg[LW_ROWS_N_TABLES][LW_ERRMSG_SIZE];
};

/* The context's message buffer (LW_ERRMSG_SIZE bytes), for API functions outside context.c (generate.c). */
char *lw__context_err(lw_context *c);

#endif
