/* Internals of the WebGPU model runner shared by gpu-model.c (plan, buffers, submission) and gpu-model-ops.c
 * (what each graph op dispatches). Not a public header. */
#ifndef LW_GPU_MODEL_IMPL_H
#define LW_GPU_MODEL_IMPL_H

#include "webgpu/gpu-model.h"
#include "webgpu/kernels-attn.h"
#include "webgpu/kernels-matmat.h"
#include "webgpu/kernels-ops.h"

#define GM_SLOT      256u /* bytes per parameter slot: WebGPU's largest minUniformBufferOffsetAlignment */
#define GM_MAX_ACT   4    /* activation buffers at most (a node reads at most 3 activations)            */
#define GM_MAX_BINDS 12u  /* bindings per prepared call                                                 */

/* A part of a weight held by one binding: the whole tensor, or a range of rows when the tensor is larger
 * than maxStorageBufferBindingSize. */
typedef struct gm_piece {
    lw_gpu_buffer buf; /* weight buffer                                   */
    uint64_t off;      /* byte offset of the piece in it (binding offset) */
    uint64_t bytes;    /* bytes of its rows                               */
    int64_t row0;      /* first row of the tensor it holds                */
    int64_t rows;      /* rows it holds                                   */
} gm_piece;

/* Where a graph tensor lives on the GPU. */
typedef struct gm_loc {
    lw_gpu_buffer buf; /* activations: their buffer (weights: see pieces)               */
    uint64_t off;      /* activations: offset in it (a multiple of the storage alignment) */
    uint64_t size;     /* activations: bytes reserved                                    */
    int32_t piece0;    /* weights: index of the first piece                              */
    int32_t n_pieces;  /* weights: pieces (1 unless split by rows)                       */
    int8_t colour;     /* activations: which activation buffer (-1: none)                */
    bool joined;       /* weights: the rows of a fused projection's parts, placed side by
                          side (streamed through the parts; no bytes of its own)           */
    int32_t base;      /* activations: the fused projection output whose rows hold this
                          part (-1: none); the part has no range of its own             */
    uint32_t part;     /* its first element in each of base's rows                       */
} gm_loc;

/* A fused projection (gpu-model-fuse.c): MUL_MAT nodes reading one input (Q, K, V; gate, up) done by one
 * mat-vec over their weights placed side by side, into one activation whose rows are [part 0 | part 1 |
 * ...]; the parts' outputs become views of it (gm_loc.base) that their readers address with an offset and
 * a row stride. */
#define GM_MAX_PARTS 3
typedef struct gm_fusion {
    int32_t n_parts;            /* 2 or 3                                                    */
    int32_t node[GM_MAX_PARTS]; /* the MUL_MAT nodes; node[0] runs the fused call            */
    int32_t w[GM_MAX_PARTS];    /* their weights                                            */
    int32_t out[GM_MAX_PARTS];  /* their outputs (now views of act)                         */
    int32_t wt;                 /* the joined weight (rows of every part, one piece)        */
    int32_t act;                /* the joined output                                        */
} gm_fusion;

/* One prepared dispatch target: a pipeline and the bind group of its buffers (made at plan time), with the
 * kernel variant its per-step plan needs. */
typedef struct gm_call {
    lw_gpu_pipeline pipe;    /* compiled variant                              */
    lw_gpu_bind_group group; /* its bindings                                  */
    int32_t aux;             /* op-specific: a weight piece, an attention kernel */
    union {                  /* the variant (by op)                           */
        lw__gpu_matvec_variant mv;
        lw__gpu_matvec_norm_variant mvn; /* (the one-row call with the norm in its prologue) */
        lw__gpu_matmat_variant mm;
        lw__gpu_get_rows_variant gr;
        lw__gpu_norm_variant norm;
        lw__gpu_eltwise_variant elt;
        lw__gpu_rope_variant rope;
        lw__gpu_rope_qkv_variant qkv;
        lw__gpu_kv_store_variant kv;
        lw__gpu_attn_variant attn;
        lw__gpu_topk_variant topk;
    } v;
} gm_call;

/* How a node takes part in a fusion (planned at load by matching consecutive nodes; unmatched nodes keep
 * their own kernels). */
#define GM_FUSE_NONE     0 /* its own dispatches                                                   */
#define GM_FUSE_ROPE_QKV 1 /* ROPE(Q) heading ROPE(K), KV_STORE(K), KV_STORE(V): one rope_qkv call */
#define GM_FUSE_DONE                                                                                         \
    2                      /* folded into another node's call: records nothing (its dst, if any, is          \
                              written later or never: lw__gpu_model_probe refuses it)              */
#define GM_FUSE_ADD_NORM 3 /* RMS_NORM after the residual ADD feeding it: one add_input norm call   */
#define GM_FUSE_GLU                                                                                          \
    4 /* SWIGLU/GEGLU whose consumer mat-vec computes it in its x loads                                      \
         (X_GLU) in one-row steps: records nothing there, runs in the others  */

/* The calls prepared for one graph node. */
/* Steps of up to this many tokens multiply exact-order weights one token at a time (matvec-exact.wgsl), so a
 * short prompt's K/V carry the CPU's bits; longer ones take the mat-mat's speed. */
#define GM_EXACT_TOKENS 32
/* Chained steps (lw__gpu_model_decode_next) that lw__gpu_model_rewind can undo: more than a host keeps in
 * flight (the JS chain keeps 2-4). */
#define GM_CHAIN 16

/* Distinct RoPE configurations the host table serves (models have one; gemma3's local and global layers
 * two); ROPE nodes of further ones compute their angles on the GPU. */
#define GM_ROPE_CONFIGS 4

typedef struct gm_node {
    int32_t call0;    /* first entry in calls[]     */
    int32_t n_calls;  /* entries                    */
    bool batched;     /* MUL_MAT: a mat-mat call follows each mat-vec call (steps of several tokens) */
    bool exact;       /* MUL_MAT: the mat-vec has the CPU's bits (matvec-exact.wgsl): steps of up to
                         GM_EXACT_TOKENS tokens run it per token instead of the mat-mat             */
    uint8_t fuse;     /* GM_FUSE_*                  */
    bool glu;         /* MUL_MAT: X_GLU mat-vec calls (one per piece) follow the others, for one-row
                         steps: they read the GLU node glu_node's inputs instead of its output       */
    int32_t glu_node; /* that node                 */
    bool q8;          /* MUL_MAT: calls[0] rounds x to 8 bits into the shared quant scratch
                         (actq-quant.wgsl) that the mat-vec calls (variant idot) read          */
    bool q8_norm;     /* RMS_NORM: calls[1] is the same norm also rounding its row into the
                         quant scratch (Q8_OUT), recorded instead in one-row steps          */
    bool q8_attn;     /* ATTN: the two calls after the kernels' are REDUCE and DECODE also rounding
                         the one-token output into the quant scratch (Q8_OUT; DECODE for calls of one
                         split), for the output projection's integer mat-vec                          */
    int8_t
        rope_cfg; /* ROPE: its configuration in the host table (rope_node), -1: angles computed on the GPU */
    int32_t qk_norm[2]; /* ROPE of a rope_qkv call with qk_norm: the Q and K RMS_NORM nodes it does (planned
                           at load, so a step does not search the graph) */
    int32_t smx_subs;   /* MUL_MAT on the matrix units: (prep, mat-mat) pairs per piece, each over at most
                           smx_rows rows (a piece's digits with X's must fit one binding); 0 otherwise  */
    uint32_t smx_rows;  /* their rows                                                                   */
    int32_t norm_mv;    /* RMS_NORM: the MUL_MAT node whose one-row mat-vec computes it in its prologue
                           (matvec-q8-norm.wgsl; the norm records nothing in one-row steps), -1: none      */
    int32_t norm_src;   /* MUL_MAT: that RMS_NORM node (its last call is the fused one), -1: none          */
    int32_t glu_down;   /* MUL_MAT with norm_src, gate|up: the down projection whose x (the SWIGLU of this
                           output) that call also rounds into the quant scratch (GLU_OUT), -1: none        */
    int32_t attn_rope;  /* ATTN: the ROPE node of the rope_qkv call that its one-token steps do in the
                           decode kernel's prologue (attn-decode.wgsl ROPE; its last call), -1: none;
                           that ROPE node: this ATTN node (it records nothing in one-token steps)        */
    int32_t mv_rope;    /* MUL_MAT with norm_src, Q|K|V: the ROPE node whose rope_qkv call its one-row
                           call does as its epilogue (matvec-q8-norm.wgsl ROPE_OUT; the last call, the
                           plain one before it), -1: none; that ROPE node: this MUL_MAT node (it records
                           nothing in one-token steps)                                                   */
} gm_node;

/* The token embedding table served from a row store (gpu-model-rows.c; lw__gpu_model_params.rows_embd). */
typedef struct gm_rows {
    struct lw__rowcache *cache; /* the CPU map and LRU (a mirror: no bytes), NULL: the table is resident */
    int32_t table;              /* the graph tensor of the table (token_embd), -1 when not served        */
    lw_gpu_buffer slots;        /* n_slots x row_bytes: the resident rows, in the table's own format     */
    lw_gpu_buffer map;          /* n_rows u32: id -> slot, LW__ROWS_NONE when not resident               */
    uint32_t n_rows;            /* rows of the table (the vocabulary)                                    */
    uint32_t n_slots;           /* rows held on the GPU                                                  */
    uint64_t row_bytes;         /* bytes per row (a multiple of 4)                                       */
    uint64_t src_off;           /* file offset of row 0 in the model's byte source                       */
    uint32_t step;              /* most tokens per step: a step's rows must be resident together         */
    bool warming;               /* loads of the warm range: the map is written whole afterwards          */
    lw_status load_st;          /* the first failed load (the GPU lacks a row the map claims): sticky    */
    uint64_t rewinds;           /* chained steps found to have read a row that was not resident          */
    lw_status status;           /* LW_OK, or why the table is resident although the store was asked for  */
    char msg[LW_ERRMSG_SIZE];   /* what the store does, or why it is not used ("" when not asked for)    */
    uint8_t *row_buf;           /* one row of memory: loads without a host source (native tests)        */
} gm_rows;

struct lw__gpu_model {
    lw_allocator alloc;             /* from the model                                             */
    char err[LW_ERRMSG_SIZE];       /* last error                                                 */
    lw_gpu inner;                   /* the HAL handed over (owned)                                */
    lw_gpu gpu;                     /* the same HAL seen by the kernel families: every pipeline's
                                       uniform binding gets a dynamic offset (gpu-model.c)         */
    lw_gpu_info info;               /* device description                                         */
    lw_model *m;                    /* not owned                                                  */
    lw__gpu_model_params p;         /* resolved parameters                                        */
    bool f16, subgroups;            /* variant switches in use                                    */
    bool glu_fold;                  /* X_GLU down mat-vecs (lw__gpu_model_params.glu_fold)        */
    bool exact_attn;                /* attention in the CPU's bits (lw__gpu_model_params.exact_attn) */
    uint32_t n_ctx, n_batch;        /* KV cells, most tokens per step                             */
    uint32_t n_past;                /* cells in use                                               */
    lw__graph graph;                /* built and planned once                                     */
    int32_t logits;                 /* its output tensor                                          */
    gm_loc *loc;                    /* per graph tensor                                           */
    gm_piece *pieces;               /* weight pieces                                              */
    gm_fusion *fus;                 /* fused projections                                          */
    int32_t n_fus;                  /* how many                                                   */
    int32_t n_pieces;               /* used                                                       */
    lw_gpu_buffer *bufs;            /* every buffer created (destroyed with the model)            */
    uint32_t n_bufs, cap_bufs;      /* used / allocated                                           */
    lw_gpu_buffer act[GM_MAX_ACT];  /* activation buffers                                       */
    uint64_t act_bytes[GM_MAX_ACT]; /* their sizes                                              */
    int n_act;                      /* how many                                                   */
    lw_gpu_buffer *kv;              /* 2 * n_layer: K caches then V caches                        */
    uint64_t kv_layer_bytes;        /* bytes of one of them                                       */
    uint32_t kv_type;               /* element type of the cache (LW_TYPE_F32, F16, Q8_0 or Q4_0) */
    uint64_t weight_bytes;          /* bytes of the weight buffers                                */
    lw_gpu_buffer params;           /* the uniform parameter arena                                */
    lw_gpu_buffer tokens;           /* n_batch token ids of the step (storage)                    */
    lw_gpu_buffer result;           /* the sampled id (storage, read back)                        */
    uint8_t *shadow;                /* host copy of the parameter slots being filled              */
    uint32_t slots;                 /* slots in the arena                                         */
    uint32_t slot;                  /* next free slot (since the last submission)                 */
    uint32_t since_submit;          /* dispatches recorded since the last submission              */
    gm_call *calls;                 /* prepared dispatch targets                                  */
    int32_t n_calls, cap_calls;     /* used / allocated                                           */
    gm_node *nodes;                 /* per graph node                                             */
    gm_call argmax[2];              /* GPU argmax over the logits: the two top-k passes           */
    lw__gpu_topk_plan_out topk;     /* their plan (fixed: the logits never move)                  */
    lw_gpu_buffer topk_scratch;     /* top-k candidates between the passes                        */
    struct gm_sampling *samp;       /* GPU sampling (gpu-model-sample.c)                          */
    lw_gpu_buffer attn_scratch;     /* split-KV partials of the decode attention                  */
    uint64_t attn_scratch_bytes;    /* its size                                                   */
    lw_gpu_buffer gelu;             /* ggml's GELU table (GEGLU), when the graph has GEGLU        */
    lw_gpu_buffer actq_scratch;     /* x of the integer mat-vecs, rounded to 8 bits (one at a time) */
    int32_t q8_tensor;              /* recording: the activation whose 8-bit rounding the quant
                                       scratch holds (-1: none), written by the norms' and reduce's
                                       Q8_OUT and the quantizer; its mat-vecs then skip the quantizer */
    uint32_t q8_kind;               /* its rounding (LW_GPU_ACTQ_Q8_0 / Q8_K)                        */
    lw_gpu_buffer dummy;            /* bound where a kernel's optional input is absent            */
    /* RoPE angles from the host (gpu-model-rope.c): the CPU's sin/cos table of each distinct RoPE
     * configuration for the step's positions, written before each step, so rotations get its bits */
    lw_gpu_buffer rope_tab;             /* n_rope x n_batch x rope_pairs (cos, sin) f32 pairs           */
    float *rope_host;                   /* its host copy (one configuration's rows at a time)          */
    int32_t rope_node[GM_ROPE_CONFIGS]; /* a ROPE node of each configuration                       */
    uint32_t n_rope;                    /* configurations in the table                                 */
    uint32_t rope_pairs;                /* most pairs (n_rot / 2) of one row                           */
    lw__gpu_pipeline_cache cache;       /* pipelines by variant                                      */
    int32_t token_out;                  /* read-back target of LW_GPU_OUT_ARGMAX                      */
    bool result_valid;                  /* the last step recorded an id into `result` (argmax/sample) */
    int32_t chain_ids[GM_CHAIN];        /* read-back targets of chained steps (a ring, by step count) */
    uint32_t chain_past[GM_CHAIN];      /* n_past before each chained step (for the rewind)           */
    uint64_t chain_rng[GM_CHAIN][4];    /* the sampling generator before each chained step            */
    uint32_t n_chain;                   /* chained steps since the last decode from host ids          */
    float *logits_out;                  /* read-back target of LW_GPU_OUT_LOGITS (n_vocab floats)     */
    gm_rows rows;                       /* token_embd from a row store (or not: rows.cache NULL)      */
    lw__gpu_model_counters cnt;         /* what was created and recorded                              */
    uint64_t step_dispatches;           /* dispatches of the last one-token step                      */
};

/* ---------------------------------------------------------------------------------------------------------
 * gpu-model.c services for the op wiring
 * ------------------------------------------------------------------------------------------------------- */

/* Creates the bind group of binds[0..n) for pipeline c->pipe into c->group and, unless out_only, appends
 * *c to the calls of the node being prepared. The parameter binding is lw__gm_params(g). */
lw_status lw__gm_add_call(lw__gpu_model *g, gm_call *c, const lw_gpu_bind *binds, uint32_t n, bool out_only);
/* The binding of the parameter arena (one slot; dispatches pick theirs by dynamic offset). */
lw_gpu_bind lw__gm_params(const lw__gpu_model *g);
/* The largest binding of a weight piece on this device (bytes, a multiple of 4). */
uint64_t lw__gm_bind_max(const lw_gpu_info *i);
/* A whole buffer as a binding. */
lw_gpu_bind lw__gm_whole(lw_gpu_buffer b);
/* Creates a buffer owned by the model (destroyed with it). */
lw_status lw__gm_new_buffer(lw__gpu_model *g, uint64_t size, uint32_t usage, const char *label,
                            lw_gpu_buffer *out);
/* Records one dispatch of call c with parameter block params (bytes <= GM_SLOT) over grid. */
void lw__gm_emit(lw__gpu_model *g, const gm_call *c, const void *params, size_t bytes,
                 const uint32_t grid[3]);
/* The binding of activation tensor t (its whole planned range). */
lw_gpu_bind lw__gm_act(const lw__gpu_model *g, int32_t t);
/* The binding of weight piece i. */
lw_gpu_bind lw__gm_piece(const lw__gpu_model *g, int32_t i);

/* ---------------------------------------------------------------------------------------------------------
 * gpu-model-fuse.c: graph rewrites before planning
 * ------------------------------------------------------------------------------------------------------- */

/* Finds the projections to fuse and rewrites the graph for them (g->fus, g->loc[].base/part/joined; the
 * first part's node then reads the joined weight and writes the joined output, the others are marked
 * GM_FUSE_DONE). Call after the graph is built, g->loc (g->graph.cap_t entries) and g->nodes exist, and
 * before any planning. */
lw_status lw__gm_plan_fusions(lw__gpu_model *g);
/* The GLU node (SWIGLU/GEGLU) whose gated activation MUL_MAT node d can compute in its mat-vec's x loads
 * (X_GLU) instead of reading it: d's input is that node's output, read by d only, and the GLU's inputs
 * are the gate and up parts (in that order) of one fused output; -1 when none. Planning gives d's output
 * another activation buffer than that fused output (it is bound read-only there). */
int32_t lw__gm_glu_source(const lw__gpu_model *g, int32_t d);
/* The same match whatever glu_fold says: the integer mat-vecs' quantizer folds SwiGLU in (actq-quant.wgsl
 * X_GLU) and binds the gate|up output in its own dispatch, so it needs no separate buffers. */
int32_t lw__gm_glu_match(const lw__gpu_model *g, int32_t d);
/* The tensor holding t's rows: t's fused projection output when t is a part of one, else t. */
int32_t lw__gm_base(const lw__gpu_model *g, int32_t t);
/* Where t's elements are in lw__gm_base(t)'s rows: first element of row 0, elements between rows. */
void lw__gm_part(const lw__gpu_model *g, int32_t t, uint64_t *offset, uint64_t *stride);

/* ---------------------------------------------------------------------------------------------------------
 * gpu-model-ops.c: the op wiring
 * ------------------------------------------------------------------------------------------------------- */

/* The binding of tensor t as an op input: a weight's piece, an activation, or the dummy for t < 0. */
lw_gpu_bind lw__gm_bind_of(const lw__gpu_model *g, int32_t t);
/* Whether node i is an ADD of two activations of the same rows (the residual) whose sum node i + 1
 * (RMS_NORM) normalises: one add_input norm dispatch can do both (planning colours the norm's output apart
 * from the ADD's inputs, so that their bindings never overlap). */
bool lw__gm_add_norm_shape(const lw__gpu_model *g, int32_t i);
/* The ROPE node whose rope_qkv call adds the joined Q/K/V biases of ADD node a itself (qkv_bias; the ADD's
 * output is then never written: planning lets it stand for the ADD's input), or -1. */
int32_t lw__gm_bias_fold(const lw__gpu_model *g, int32_t a);
/* The SCALE node that a rope_qkv call from ROPE node i will fold in (its q_out written by that call, at
 * node i: planning places it so), or -1. */
int32_t lw__gm_rope_qkv_scale(const lw__gpu_model *g, int32_t i);
/* Finds the RMS norms that a one-row step can run in the prologue of the integer mat-vec reading them
 * (gm_node.norm_mv / norm_src): a whole-row norm with an f32 weight whose output only that Q4_0 / Q8_0
 * block-pair mat-vec (of one weight piece) reads. Call after the weights are planned, before the
 * activations (plan_acts gives the mat-vec's output another colour than the norm's inputs). */
lw_status lw__gm_plan_norm_mv(lw__gpu_model *g);
/* The q_out (rotated Q, or the folded SCALE's output) of the rope_qkv match at ROPE node i when it is the
 * plain kind the decode attention can take over (q, k, v parts of one fused output; no Q/K norms, no
 * biases), else -1. */
int32_t lw__gm_rope_qkv_plain(const lw__gpu_model *g, int32_t i);
/* The parameter block and grid of the rope_qkv call of ROPE node i (fuse GM_FUSE_ROPE_QKV) for a step. */
lw_status lw__gm_rope_qkv_step(lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0,
                               lw__gpu_rope_qkv_params *p, uint32_t grid[3]);
/* Whether ATTN node i's REDUCE (and DECODE with rope) can round its one-token output for the integer
 * mat-vec reading it (Q8_0: its only reader is a MUL_MAT over all of it). */
bool lw__gm_attn_q8(const lw__gpu_model *g, int32_t i, const lw__gpu_attn_variant *v);
/* Creates the buffers the ops share: attention and top-k scratch, the GELU table, a dummy binding. */
lw_status lw__gm_prepare_shared(lw__gpu_model *g);
/* gpu-model-rope.c: assigns ROPE nodes (without frequency factors) to host-table configurations and creates
 * the table; call before preparing the nodes. */
lw_status lw__gm_plan_rope(lw__gpu_model *g);
/* The binding of ROPE node i's angle input: the table when it has a configuration there, else ff. */
lw_gpu_bind lw__gm_rope_bind(const lw__gpu_model *g, int32_t i, lw_gpu_bind ff);
/* Points a at the table rows of ROPE node i's configuration (no change when it has none). */
void lw__gm_rope_table_args(const lw__gpu_model *g, int32_t i, lw__gpu_rope_args *a);
/* Writes every configuration's table for the positions pos0 .. pos0 + n_tokens - 1 (before recording). */
lw_status lw__gm_write_rope(lw__gpu_model *g, int32_t n_tokens, int32_t pos0);
/* Whether every node of the graph has GPU kernels (LW_ERR_UNSUPPORTED naming the first that has none). */
lw_status lw__gm_check_ops(lw__gpu_model *g);
/* Compiles the pipelines and creates the bind groups of node i (g->nodes[i]). */
lw_status lw__gm_prepare_node(lw__gpu_model *g, int32_t i);
/* Prepares the GPU argmax over the logits (g->argmax). */
lw_status lw__gm_prepare_argmax(lw__gpu_model *g);
/* Records node i for a step of n_tokens tokens at positions pos0.. */
lw_status lw__gm_record_node(lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0);
/* Records the argmax of the last logits row into g->result. */
void lw__gm_record_argmax(lw__gpu_model *g);

/* ---------------------------------------------------------------------------------------------------------
 * gpu-model-attn.c: the ATTN node (its kernels; one-token steps with the RoPE and KV store folded in)
 * ------------------------------------------------------------------------------------------------------- */

/* One ATTN node's variant (the device default, then the tune keys "attn.*"). */
lw__gpu_attn_variant lw__gm_attn_variant(const lw__gpu_model *g, const lw__node *nd);
/* The Q|K|V MUL_MAT node whose one-row call writes node n's output as its RoPE epilogue (n: the ROPE(Q) of
 * a rope_qkv match that call does, or the SCALE folded into it), or -1 (gm_node.mv_rope). */
int32_t lw__gm_mv_rope_writer(const lw__gpu_model *g, int32_t n);
/* The ROPE node whose rope_qkv call ATTN node a can do in its one-token decode calls: a plain match
 * (lw__gm_rope_qkv_plain) of a's layer whose q_out only a reads; -1 when none. Data flow only (planning
 * gives a's output another activation buffer than the Q|K|V it then reads). */
int32_t lw__gm_attn_rope_match(const lw__gpu_model *g, int32_t a);
/* Prepares ATTN node i's calls (c: the node's call template). */
lw_status lw__gm_prepare_attn(lw__gpu_model *g, int32_t i, gm_call *c);
/* Records ATTN node i for a step. */
lw_status lw__gm_record_attn(lw__gpu_model *g, int32_t i, int32_t n_tokens, int32_t pos0);

/* ---------------------------------------------------------------------------------------------------------
 * gpu-model-rows.c: token_embd from a row store
 * ------------------------------------------------------------------------------------------------------- */

/* Decides whether the row store serves token_embd (rows_embd asked for, not tied, whole-word rows) and, if
 * so, creates its map, slots and id -> slot buffers (g->rows); otherwise leaves the table to plan_weights and
 * says why in g->rows.msg. Call after the fusions, before plan_weights. Fails only when memory or a buffer
 * creation does. */
lw_status lw__gm_plan_rows(lw__gpu_model *g);
/* Loads the warm range (lw__gpu_model_params.rows_warm) and writes the whole id -> slot map. */
lw_status lw__gm_rows_warm(lw__gpu_model *g);
void lw__gm_rows_free(lw__gpu_model *g);
/* Before a step of tokens[0..n) is recorded: without a host source, looks them up (loads are synchronous
 * writes); with one, checks that lw__gpu_model_rows_load made them resident (its streams awaited). */
lw_status lw__gm_rows_ready(lw__gpu_model *g, const int32_t *tokens, int32_t n);

/* ---------------------------------------------------------------------------------------------------------
 * gpu-model-sample.c: sampling on the GPU (LW_GPU_OUT_SAMPLE)
 * ------------------------------------------------------------------------------------------------------- */

/* Creates the sampling scratch, pipelines and bind groups (g->samp) and configures the CPU sampler's
 * defaults. Call after lw__gm_prepare_argmax. */
lw_status lw__gm_prepare_sample(lw__gpu_model *g);
/* Records top-k and the draw over the last logits row into g->result (greedy parameters: the argmax). Draws
 * the step's uniform number from the host generator. */
void lw__gm_record_sample(lw__gpu_model *g);
/* Whether lw__gpu_model_set_mask armed a grammar mask for the next step with an id. */
bool lw__gm_mask_armed(const lw__gpu_model *g);
/* Records `out`'s argmax or draw (LW_GPU_OUT_SAMPLE) over the allowed ids of the armed mask into g->result
 * (the masked pass 1, then the unmasked pass 2), and disarms it. */
void lw__gm_record_masked(lw__gpu_model *g, lw__gpu_out out);
/* The sampling generator's state (a chained step's snapshot; zeros without GPU sampling). */
void lw__gm_sample_rng_get(const lw__gpu_model *g, uint64_t st[4]);
void lw__gm_sample_rng_set(lw__gpu_model *g, const uint64_t st[4]);
/* Frees g->samp (host memory only: its GPU objects go with the model's). */
void lw__gm_free_sample(lw__gpu_model *g);

#endif
