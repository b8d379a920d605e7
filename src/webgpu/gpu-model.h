/* Whole models on WebGPU: the CPU engine's graph (src/model builds it, src/graph plans it) run node for node
 * on the GPU through the HAL (gpu.h) and the kernel families (kernels*.h), from one static plan made when
 * the GPU model is created (invariant 2):
 *   - weights: the header-only model (lw_model_params.no_weights) gives every weight's file offset; each is
 *     placed in a weight buffer no larger than maxStorageBufferBindingSize (a tensor never straddles two
 *     bindings; one larger than a binding, e.g. a 128k-token embedding table, is split by rows) and its
 *     bytes are streamed from the host byte source straight into it (buffer_write_host: invariant 1);
 *   - the KV cache: two buffers per block;
 *   - activations: the graph's own planner (lw__graph_plan, the device's storage offset alignment), once per
 *     activation buffer: a dispatch may not bind one buffer both read-only and writable, so activations are
 *     coloured so that no node's output shares a buffer with its inputs (at most 4 buffers, usually 2-3);
 *   - one uniform parameter arena of 256-byte slots: every dispatch takes the next slot (dynamic offset);
 *     the used slots are written once before each submission;
 *   - every pipeline and bind group, created here; a step only records dispatches, writes the token ids
 *     and the parameter slots, submits every `submit_every` dispatches, and reads back the sampled id.
 *
 *     lw__gpu_model *g;
 *     lw__gpu_model_params p = lw__gpu_model_default_params();
 *     p.host_source = id;                          // JS: lwGpu.addSource(...) of the GGUF file
 *     lw__gpu_model_create(gpu, model, &p, &g);    // plans, creates, starts streaming; await settle()
 *     lw__gpu_model_decode(g, ids, n, LW_GPU_OUT_ARGMAX);   // then await settle()
 *     int32_t next = lw__gpu_model_token(g);
 */
#ifndef LW_GPU_MODEL_H
#define LW_GPU_MODEL_H

#include "graph/graph.h"
#include "model/model.h"
#include "webgpu/gpu.h"
#include "webgpu/kernels.h"

/* ---------------------------------------------------------------------------------------------------------
 * Parameters and counters
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_model_params {
    uint32_t n_ctx;        /* KV cells; 0: the model's training context, at most 4096                    */
    uint32_t n_batch;      /* most tokens one step computes (the arena is planned for it); 0: 128        */
    uint32_t submit_every; /* dispatches per command buffer (one compute pass each); 0: 32               */
    uint32_t host_source;  /* host byte source holding the GGUF file (0: read through the model's
                              source and buffer_write: native tests only, passes through memory)        */
    int f16;               /* f16 kernel variants: -1 when the device has shader-f16, 0 no, 1 yes        */
    int subgroups;         /* subgroup reductions: -1 when the device has them, 0 no, 1 yes             */
    uint32_t kv_type;      /* KV cache elements: LW_TYPE_F16 (default, as the CPU context), F32, Q8_0 or
                              Q4_0 (the quantized two in kernels-attn.h's layouts, heads of 32 x k)     */
    const struct lw__gpu_tune *tune; /* kernel overrides (gpu-tune.h), read during creation only;
                              NULL: the measured defaults                                            */
    int raw_acts;   /* 1: mat-vecs take f32 activations; 0 (default): rounded as the CPU engine
                       rounds them for each weight format (shaders/actq.wgsl), for its results  */
    int glu_fold;   /* the FFN's GLU in the down mat-vec's x loads (X_GLU, one dispatch less per
                       block in one-token steps, every workgroup recomputing it): 1 on, 0 off,
                       -1 (default) on but for CPU adapters (llvmpipe, SwiftShader), where the
                       recomputation costs more than the dispatch (lavapipe: 17 -> 11 tokens/s)  */
    int exact_attn; /* attention in the CPU engine's order with its bits (attn-exact.wgsl: musl's expf
                       in software, sequential chains per row) for steps of < 64 tokens: 1 on, 0 off,
                       -1 (default) on for CPU adapters only (GPUs keep the split-KV kernel's speed) */
    int exact_norm; /* RMS norms sum their squares exactly (integer limbs: the CPU engine's bits): 1 on,
                       0 off (the f32 sum GPUs run, and its fused 8-bit output; tests on CPU adapters),
                       -1 (default) on for CPU adapters only */
    uint32_t rows_embd; /* > 0: a row store serves the token embedding table: only this many of its rows
                           are on the GPU (an LRU cache with a GPU id -> slot map), the rest read from the
                           model's byte source when used; tokens are identical. 0 (default): resident.
                           Where the store cannot serve it (tied output projection, rows not whole words)
                           the table is resident and lw__gpu_model_rows_status says why */
    int32_t rows_warm;  /* ids loaded at creation, from 0: 0 (default) as many as there are slots, < 0
                           none */
} lw__gpu_model_params;

lw__gpu_model_params lw__gpu_model_default_params(void);

/* What one decode returns to the host. */
typedef enum lw__gpu_out {
    LW_GPU_OUT_NONE = 0,   /* nothing (prompt chunks whose output is not wanted)                      */
    LW_GPU_OUT_ARGMAX = 1, /* the greedy token id (4 bytes read back)                                 */
    LW_GPU_OUT_LOGITS = 2, /* the greedy id and the last row's logits (n_vocab floats: tests, samplers
                              on the host)                                                           */
    LW_GPU_OUT_SAMPLE = 3, /* a token drawn on the GPU by lw__gpu_model_set_sampling's parameters (4
                              bytes read back; greedy parameters: the argmax)                         */
} lw__gpu_out;

/* GPU objects created, and work recorded: tests check that decoding creates nothing. */
typedef struct lw__gpu_model_counters {
    uint64_t buffers;     /* buffers created by the plan               */
    uint64_t pipelines;   /* pipelines compiled (cache misses)         */
    uint64_t bind_groups; /* bind groups created                       */
    uint64_t dispatches;  /* dispatches recorded since creation        */
    uint64_t submits;     /* command buffers submitted since creation  */
    uint64_t steps;       /* graph executions since creation           */
    uint64_t masked;      /* ids picked under a grammar mask on the GPU */
} lw__gpu_model_counters;

/* ---------------------------------------------------------------------------------------------------------
 * API
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_model lw__gpu_model;

/* Builds the model's graph, plans and creates every GPU object, and starts streaming the weights (host
 * source) or writes them (no host source). Takes ownership of gpu (destroyed with the GPU model, also on
 * failure). m must be a header-only or a full model and outlive the GPU model. *out is set even on failure
 * (unless memory ran out) so lw__gpu_model_error can say why; free it either way. Asynchronous errors
 * (streaming, compilation) surface through the HAL's error() after the host awaited the writes. */
lw_status lw__gpu_model_create(lw_gpu gpu, lw_model *m, const lw__gpu_model_params *p, lw__gpu_model **out);
void lw__gpu_model_free(lw__gpu_model *g);
const char *lw__gpu_model_error(const lw__gpu_model *g);

/* Appends n tokens at position n_past and computes them (steps of at most n_batch tokens; each step's
 * output rows are only its last token's); schedules the read of `out` for the last token. Creates no GPU
 * object. The result is valid once the HAL has no pending work (wasm: after the host awaited settle()). */
lw_status lw__gpu_model_decode(lw__gpu_model *g, const int32_t *tokens, int32_t n, lw__gpu_out out);
/* A chained one-token step (the GPU-resident decode loop): its input id is the previous step's output id
 * (argmax or draw), copied on the GPU, so the host records and submits it without waiting for that id; its
 * own id is read back into lw__gpu_model_chain_ids()[*slot] (valid once that read settled). out is
 * LW_GPU_OUT_ARGMAX or LW_GPU_OUT_SAMPLE; the previous step must have had one of them too. */
lw_status lw__gpu_model_decode_next(lw__gpu_model *g, lw__gpu_out out, int32_t *slot);
/* The ring of chained steps' ids (GM_CHAIN entries). */
const int32_t *lw__gpu_model_chain_ids(const lw__gpu_model *g);
/* Undoes the last k chained steps (the speculative ones after a stop): n_past and the sampling generator
 * as before them, so what follows equals a run that never made them. k <= the chained steps since the last
 * lw__gpu_model_decode, and at most 16. */
lw_status lw__gpu_model_rewind(lw__gpu_model *g, uint32_t k);
/* Debugging and tests: computes a step of n tokens at position n_past up to graph node `node` (inclusive),
 * without advancing n_past, and schedules the read of that node's output (its step rows) into dst (cap
 * floats). The node's name and block come from lw__gpu_model_node. LW_ERR_UNSUPPORTED for a node fused
 * into an earlier one's dispatch whose output is never written (the rotated K: written to the cache). */
lw_status lw__gpu_model_probe(lw__gpu_model *g, const int32_t *tokens, int32_t n, int32_t node, float *dst,
                              uint64_t cap);
/* Graph node i: its output's name and block (-1 outside blocks) and elements per row; the node count. */
int32_t lw__gpu_model_node(const lw__gpu_model *g, int32_t i, const char **name, int32_t *layer,
                           int64_t *ne0);
/* The token id read by the last LW_GPU_OUT_ARGMAX, LW_GPU_OUT_LOGITS or LW_GPU_OUT_SAMPLE decode. */
int32_t lw__gpu_model_token(const lw__gpu_model *g);
/* Sampling parameters of LW_GPU_OUT_SAMPLE decodes (the CPU sampler's, lw_sampler_params; default:
 * lw_sampler_default_params()), and reseeds the host generator with sp->seed: the same seed and parameters
 * draw the same tokens (and, but for f32 rounding at interval boundaries, the tokens lw_sampler_sample draws
 * from the same logits). top_k <= 0 or above the kernel's cap (lw__gpu_topk_max_k: 256 for vocabularies up to
 * 16384) takes the cap; penalties are refused (LW_ERR_UNSUPPORTED). Creates nothing; *k_used (may be NULL):
 * the top-k in effect. */
lw_status lw__gpu_model_set_sampling(lw__gpu_model *g, const lw_sampler_params *sp, uint32_t *k_used);
/* A grammar's allowed tokens for the next step that picks an id (decode's last step with LW_GPU_OUT_ARGMAX,
 * LW_GPU_OUT_LOGITS or LW_GPU_OUT_SAMPLE, or a chained step): bit i of bits[i / 32] set = token i allowed,
 * n_words = ceil(n_vocab / 32). Written into a buffer made at load (queue order puts it before that step), so
 * the argmax / draw runs over the allowed ids on the GPU and the step still reads back 4 bytes; the mask
 * applies to that one step. The id is 0xffffffff (-1) when no allowed id has a non-NaN logit. Creates
 * nothing. */
lw_status lw__gpu_model_set_mask(lw__gpu_model *g, const uint32_t *bits, size_t n_words);
/* The kernel variants the plan uses, as JSON: {"matvec": {"<format>": "wg64 rows4 blocks1 f16 0 sg 1 stage 0
 * actq 0 exact 0"}, "matmat": {"<format>": "tm64 tn64 tk32 rm8 rn8 f16 0"}} (the first mat-vec / mat-mat call
 * of each weight format; tests check that tune overrides reach the plan). Returns the length, -1 when cap is
 * too small. */
int lw__gpu_model_variants_json(const lw__gpu_model *g, char *dst, size_t cap);
/* The logits read by the last LW_GPU_OUT_LOGITS decode (n_vocab floats). */
const float *lw__gpu_model_logits(const lw__gpu_model *g);
/* Forgets cells from n_past on (n_past <= the cells in use). */
lw_status lw__gpu_model_set_n_past(lw__gpu_model *g, uint32_t n_past);
uint32_t lw__gpu_model_n_past(const lw__gpu_model *g);
uint32_t lw__gpu_model_n_ctx(const lw__gpu_model *g);
/* The KV cache's element type (LW_TYPE_F16, F32, Q8_0 or Q4_0). */
uint32_t lw__gpu_model_kv_type(const lw__gpu_model *g);
lw__gpu_model_counters lw__gpu_model_get_counters(const lw__gpu_model *g);
/* The HAL the model runs on (for error() and pending()). */
const lw_gpu *lw__gpu_model_gpu(const lw__gpu_model *g);
/* Bytes of GPU memory the plan created: weights, KV cache, activations, parameters. */
void lw__gpu_model_bytes(const lw__gpu_model *g, uint64_t *weights, uint64_t *kv, uint64_t *acts);
/* The row store of token_embd (lw__gpu_model_params.rows_embd). With a host source its rows stream in
 * asynchronously, so a host decodes at most lw__gpu_model_rows_step() tokens per call and, before each
 * call, lw__gpu_model_rows_load()s them and awaits the HAL's pending writes when *loads > 0 (decode refuses
 * ids whose rows are not resident); without one, decode looks rows up itself. Chained steps gather an id
 * the host has not seen: lw__gpu_model_rows_check(id) afterwards, 1 when its row was resident (the step
 * was right: counted as a hit), 0 when not (the host undoes that step and those after it, then decodes
 * the id from the host). rows_step is 0 when the store is not in use (and check always 1). */
uint32_t lw__gpu_model_rows_step(const lw__gpu_model *g);
lw_status lw__gpu_model_rows_load(lw__gpu_model *g, const int32_t *tokens, int32_t n, uint32_t *loads);
int lw__gpu_model_rows_check(lw__gpu_model *g, int32_t id);
/* LW_OK when the store serves the table or was not asked for, else why it is resident; *message says which
 * ("" when not asked for). Said once, here: creation succeeds either way. */
lw_status lw__gpu_model_rows_status(const lw__gpu_model *g, const char **message);
/* The row cache's counters (lw_rows_stats; all 0 when not in use) and the chained steps undone. */
lw_status lw__gpu_model_rows_stats(const lw__gpu_model *g, lw_rows_stats *out, uint64_t *rewinds);
/* Dispatches one decode step (1 token) records, and blocks of the model (for dispatches per token per
 * layer). */
uint64_t lw__gpu_model_step_dispatches(const lw__gpu_model *g);

#endif
