/* WebGPU attention kernels for the engine's LW_OP_ATTN node (src/graph/graph.h): causal attention of Q over
 * one layer's KV cache, with GQA, a sliding window and score soft-capping (Gemma 2).
 *
 * The KV cache is the CPU engine's layout (src/model/context.c, op_kv_store in src/cpu/engine-ops.c): one K
 * and one V region per layer, cell p at p * kv_row elements, kv_row = KV heads x head dim, each cell
 * [KV head][head dim], elements f16 or f32 (the context's type_k = type_v), V not transposed. Q and the
 * output are f32 rows of heads x head dim per token.
 * A Q8_0 cache has a layout of its own (ggml's 34-byte blocks are not 4-byte aligned): a cell is the
 * row's blocks of 32 elements in order, each 9 words: 8 words of int8 quants (elements 4i .. 4i + 3 in word
 * i, lowest byte first) and the block's scale as an f32 (the f16 scale the CPU's block_q8_0 keeps, widened),
 * so a head of D elements is D / 32 blocks (D a multiple of 32) and every quad of 4 elements one word. The
 * values are the CPU's: quantize_row_q8_0's rounding (kv-store.wgsl), dequantized as q * d.
 * A Q4_0 cache likewise: each block of 32 is 5 words, 4 words of 4-bit quants (element 8i + k in bits 4k ..
 * 4k + 3 of word i: in element order, not ggml's j / j + 16 pairing) and the scale as an f32 (fp16(d)
 * widened). Why this layout: a quad of 4 elements is then one half of one word, read with the block's
 * scale as a Q8_0 quad is (one quant word and one scale word per load, no f16 unpacking) and widened with one
 * vector shift; every block stays word aligned whatever the head size. The cost: 20 bytes per 32 elements
 * (0.31 of f16's) where ggml's blocks take 18; scales packed two to a word would reach 18 only for heads of
 * multiples of 64 and make two blocks share a word the KV store writes. The values are the CPU's:
 * quantize_row_q4_0's rounding (kv-store.wgsl), dequantized as (q - 8) * d.
 *
 * Three kernels (shaders/attn-*.wgsl), all with the same bind group layout (LW_GPU_ATTN_BINDINGS):
 *   - DECODE (attn-decode.wgsl): a few query tokens. The visible cells are split into chunks across
 *     workgroups (flash-decoding); one workgroup takes one chunk of one KV head for all the query heads of
 *     its group, so each K/V cell is loaded once for the group. It writes the chunk's max, sum and
 *     unnormalised V sum per head to the scratch buffer, or the output itself when there is one split.
 *   - REDUCE (attn-reduce.wgsl): merges the splits of each (token, head) into the output.
 *   - PREFILL (attn-prefill.wgsl): flash attention by tiles; a tile's rows are (token, query head) pairs of
 *     one KV head (GQA: each K/V tile is loaded once for the group), Q in workgroup memory, K/V streamed
 *     through workgroup memory a tile of cells at a time, online softmax, causal and sliding-window masks;
 *     each invocation computes a register block of scores (rq rows x rk cells) and of the P V accumulator
 *     (rq rows x a share of the head), so one workgroup load feeds several FMAs.
 * Arithmetic is f32 everywhere; an f16 cache is read with unpack2x16float, so shader-f16 is not needed. No
 * kernel needs subgroups.
 *
 * A runner builds the three pipelines and the bind groups once at load, sizes the scratch buffer with
 * lw__gpu_attn_scratch_bytes(), and per call only fills the 64-byte parameter block and the grids
 * (lw__gpu_attn_plan): nothing is allocated per call. */
#ifndef LW_GPU_KERNELS_ATTN_H
#define LW_GPU_KERNELS_ATTN_H

#include "webgpu/kernels.h"

/* Steps of this many query tokens or more take the CPU engine's tiled kernel (engine-ops.c op_attn_tiled),
 * whose order EXACT does not follow. */
#define LW_GPU_ATTN_EXACT_TOKENS 64u

/* The kernels of the family. */
typedef enum lw__gpu_attn_kernel {
    LW_GPU_ATTN_DECODE = 0,  /* split-KV partials (or the output with one split) */
    LW_GPU_ATTN_REDUCE = 1,  /* merges the partials of the decode kernel         */
    LW_GPU_ATTN_PREFILL = 2, /* tiled flash attention                            */
    LW_GPU_ATTN_EXACT = 3,   /* the CPU engine's order and bits (attn-exact.wgsl) */
    LW_GPU_ATTN_KERNELS = 4
} lw__gpu_attn_kernel;

/* One compiled variant: the model's shape (head dim, group) and the tunables. */
typedef struct lw__gpu_attn_variant {
    uint32_t kv_type;    /* cache elements: LW_TYPE_F16, F32, or Q8_0 / Q4_0 (head dim % 32)       */
    uint32_t head_dim;   /* D: a multiple of 4, 4..256                                               */
    uint32_t group;      /* query heads per KV head (n_head / n_head_kv), 1..16                      */
    uint32_t wg_size;    /* invocations per workgroup: a power of two, at least the group          */
    uint32_t chunk;      /* decode: most cells one workgroup takes (sizes its workgroup memory)     */
    uint32_t splits;     /* decode: splits aimed for when that makes chunks smaller (0: chunk-sized) */
    uint32_t min_chunk;  /* decode: fewest cells per split when aiming for `splits`                  */
    uint32_t decode_max; /* calls of at most this many query tokens use DECODE (+ REDUCE)            */
    uint32_t pwg;        /* prefill: invocations per workgroup (a power of two)                     */
    uint32_t bq;         /* prefill: rows ((token, head) pairs) per tile, divides pwg               */
    uint32_t bk;         /* prefill: cells per K/V tile, a multiple of 4                             */
    uint32_t rq;         /* prefill: rows of an invocation's register block (scores, P V), divides bq */
    uint32_t rk;         /* prefill: cells of its block of scores, divides bk (rq x rk <= 64)        */
    bool exact;          /* calls of fewer than LW_GPU_ATTN_EXACT_TOKENS tokens use EXACT (the CPU's
                            bits; f16 caches need a head dim that is a multiple of 64)                */
    uint32_t q8_out;     /* REDUCE: LW_GPU_ACTQ_Q8_0 also rounds the one-token output to 8 bits into a
                            seventh binding for the integer mat-vec reading it (actq-quant.wgsl's layout;
                            head dims of a multiple of 32 within 4 x wg_size), 0: not; DECODE: the same
                            for calls of one split, into binding 7 (with rope) or 6                     */
    bool rope;           /* DECODE: one-token calls also do the step's RoPE and KV store (ROPE=1 in
                            attn-decode.wgsl): binding 0 is the unrotated Q|K|V row, binding 6 the
                            frequency factors or RoPE table, parameters lw__gpu_attn_rope_params       */
    uint32_t one_max;    /* decode: spans of at most this many cells take one split (no REDUCE; at most
                            chunk), 0: the splits policy alone                                          */
    uint32_t vb;         /* decode: V cells each invocation loads before using them (0: the shader's 8) */
    uint32_t kb;         /* decode: K quads each invocation loads at a time (0: the shader's, by head
                            dim; else it must divide head_dim / 4)                                     */
} lw__gpu_attn_variant;

/* The uniform parameter block of one call, shared by the three kernels (AttnParams in attn-common.wgsl;
 * 64 bytes). Offsets and strides of Q, the output and the scratch are in vec4 units (4 floats), those of
 * the cache in units of 4 elements (8 bytes for f16, 16 for f32) or, Q8_0 / Q4_0, in words (4 bytes). */
typedef struct lw__gpu_attn_params {
    uint32_t n_tokens;  /* query tokens of the call                                               */
    uint32_t pos0;      /* cache position of the first one (cells 0 .. pos0 + t are visible to t) */
    uint32_t n_head;    /* query heads                                                            */
    uint32_t swa;       /* sliding window in cells (0: none)                                      */
    uint32_t q_offset;  /* Q: first row inside its binding                                        */
    uint32_t q_stride;  /* Q: from one token's row to the next                                    */
    uint32_t o_offset;  /* output: first row inside its binding                                   */
    uint32_t o_stride;  /* output: from one token's row to the next                               */
    uint32_t k_offset;  /* K cache of the layer inside its binding                                */
    uint32_t v_offset;  /* V cache of the layer inside its binding                                */
    uint32_t kv_stride; /* from one cell to the next (kv_row / 4)                                 */
    uint32_t n_splits;  /* decode: splits per (token, head); 1: the output is written directly    */
    uint32_t base;      /* decode: first cell of split 0                                          */
    uint32_t chunk;     /* decode: cells per split                                                */
    float scale;        /* scores are dot(q, k) * scale                                           */
    float softcap;      /* then c * tanh(s / c) when c != 0                                       */
} lw__gpu_attn_params;
_Static_assert(sizeof(lw__gpu_attn_params) == 64, "attn params block");

/* The parameter block of a DECODE call with rope (AttnParams with ROPE=1; 128 bytes): the call's, then the
 * step's RoPE (rope-common.wgsl's fields, as lw__gpu_rope_params) and where K and V lie in binding 0. */
typedef struct lw__gpu_attn_rope_params {
    lw__gpu_attn_params a;                  /* the attention call's (q_offset: the unrotated Q row)  */
    uint32_t n_rot, neox, has_ff;           /* rotated elements per head, NEOX pairs, factors/table  */
    uint32_t ff_offset;                     /* first factor / table entry                            */
    float theta_scale, freq_scale;          /* as lw__gpu_rope_params                                */
    float ext_factor, mscale, corr0, corr1; /* YaRN and the magnitude                              */
    float q_scale;                          /* factor of the rotated Q before the score scale (1: none) */
    uint32_t k_src, v_src;                  /* elements of the token's K and V rows in binding 0      */
    uint32_t pad[3];                        /* (size)                                                */
} lw__gpu_attn_rope_params;
_Static_assert(sizeof(lw__gpu_attn_rope_params) == 128, "attn rope params block");

/* Bindings of every attention pipeline: 0 Q, 1 K cache, 2 V cache, 3 output, 4 scratch for the split
 * partials (at least 16 bytes; only DECODE and REDUCE use it), all storage read_write (Q and the caches
 * are only read, but an activation arena or cache buffer may back a writable binding of the same
 * dispatch: WebGPU forbids mixing read-only and writable bindings of one buffer), 5 parameters (uniform,
 * the last binding). One layout for all three, so one bind array serves them. */
#define LW_GPU_ATTN_BINDINGS 6u
/* DECODE with rope: those, 6 the frequency factors or RoPE table (read-only storage), 7 with q8_out the
 * quants (7 storage bindings: within WebGPU's default 8 per stage). */
#define LW_GPU_ATTN_ROPE_BINDINGS 7u

/* One call's shape and where its operands lie. */
typedef struct lw__gpu_attn_shape {
    uint32_t n_head;    /* query heads                                                      */
    uint32_t n_head_kv; /* KV heads (n_head / n_head_kv must be the variant's group)        */
    uint32_t n_tokens;  /* query tokens                                                     */
    uint32_t pos0;      /* cache position of the first query token                          */
    uint32_t swa;       /* sliding window in cells (0: none)                                */
    uint64_t n_ctx;     /* cells of the layer's cache (pos0 + n_tokens must fit)            */
    float scale;        /* score scale (fp[0] of the node)                                  */
    float softcap;      /* score soft-cap (fp[1] of the node, 0: none)                      */
    uint64_t q_offset;  /* Q's first element inside its binding (a multiple of 4)           */
    uint64_t q_stride;  /* elements between Q rows (0: n_head x D)                          */
    uint64_t o_offset;  /* output's first element inside its binding (a multiple of 4)      */
    uint64_t o_stride;  /* elements between output rows (0: n_head x D)                     */
    uint64_t k_offset;  /* bytes of the layer's K cache inside its binding                  */
    uint64_t v_offset;  /* bytes of the layer's V cache inside its binding                  */
} lw__gpu_attn_shape;

/* What to record for one call: n dispatches, in order, with the same bind group per kernel. */
typedef struct lw__gpu_attn_dispatch {
    uint32_t n;          /* 1 or 2                                  */
    uint8_t kernel[2];   /* lw__gpu_attn_kernel of each dispatch    */
    uint32_t grid[2][3]; /* its workgroups                          */
} lw__gpu_attn_dispatch;

/* Words per 32-element block of a quantized cache in the layouts above: 9 for LW_TYPE_Q8_0, 5 for Q4_0; 0
 * for f16 / f32 and for types without kernels (so "is the cache quantized" is a nonzero result). */
uint32_t lw__gpu_kv_block_words(uint32_t kv_type);

/* Bytes of one cache cell of kv_row elements (KV heads x head dim) of type kv_type: 2 or 4 per element,
 * 36 (Q8_0) or 20 (Q4_0) per block of 32 (the layouts above); false for a type without kernels, a quantized
 * row of no whole blocks or a product past 64 bits. */
bool lw__gpu_kv_cell_bytes(uint32_t kv_type, uint64_t kv_row, uint64_t *bytes);

/* Whether a cache type, head dim and group can run at all (before any device limit). */
bool lw__gpu_attn_supported(uint32_t kv_type, uint32_t head_dim, uint32_t group);

/* The default variant for a device and model shape: 64 invocations, chunks
 * of 256 cells aiming at 16 splits of at least 64 cells, decode up to 4 tokens, prefill tiles as large as
 * the workgroup memory allows (GPUs: 128 invocations, larger tiles in register blocks; CPU adapters: 64,
 * 16 x 32, unblocked). Check it with lw__gpu_attn_pipeline(). */
lw__gpu_attn_variant lw__gpu_attn_default(const lw_gpu_info *info, uint32_t kv_type, uint32_t head_dim,
                                          uint32_t group);

/* Bytes of workgroup memory kernel k of variant v declares (what the device limit is checked against). */
uint64_t lw__gpu_attn_wg_bytes(const lw__gpu_attn_variant *v, lw__gpu_attn_kernel k);

/* The pipeline of kernel k of variant v (from cache, or expanded, compiled and cached; cache may be NULL).
 * LW_ERR_UNSUPPORTED / LW_ERR_INVALID_ARG with a message when the variant does not suit the device.
 * err: LW_ERRMSG_SIZE bytes. */
lw_status lw__gpu_attn_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_attn_variant *v, lw__gpu_attn_kernel k, const lw_gpu_info *info,
                                lw_gpu_pipeline *out, char *err);

/* Bytes of scratch the decode kernel needs for calls of up to max_tokens query tokens (capped by the
 * variant's decode_max) of n_head heads over a cache of n_ctx cells: allocate it once at load (never less
 * than 16 bytes). */
lw_status lw__gpu_attn_scratch_bytes(const lw__gpu_attn_variant *v, uint32_t n_head, uint32_t max_tokens,
                                     uint64_t n_ctx, uint64_t *bytes, char *err);

/* Checks the shape and fills the parameter block and the dispatches of one call of variant v. Decode
 * calls (n_tokens <= decode_max) need scratch_bytes of scratch, no more than lw__gpu_attn_scratch_bytes()
 * said for max_tokens >= n_tokens. LW_ERR_INVALID_ARG / LW_ERR_TOO_LARGE with a message on bad shapes. */
lw_status lw__gpu_attn_plan(const lw_gpu_info *info, const lw__gpu_attn_variant *v,
                            const lw__gpu_attn_shape *s, uint64_t scratch_bytes, lw__gpu_attn_params *p,
                            lw__gpu_attn_dispatch *d, char *err);

#endif
