/* WebGPU kernel library: for each op family, the variant choice for a device, the pipeline built from the
 * family's WGSL template (wgsl-pp.h) through the HAL (gpu.h), and the per-call parameter block + grid. */
#ifndef LW_GPU_KERNELS_H
#define LW_GPU_KERNELS_H

#include "core/core.h"
#include "webgpu/gpu.h"
#include "webgpu/wgsl-pp.h"

#include <stdbool.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------------------
 * Pipeline cache (pipeline-cache.c): variant key -> pipeline handle
 * ------------------------------------------------------------------------------------------------------- */

#define LW_GPU_CACHE_KEY 64 /* bytes of a variant key, with its NUL */

/* Compiled pipelines by variant key; every kernel family's *_pipeline() looks here first. */
typedef struct lw__gpu_pipeline_cache {
    lw_allocator alloc;                  /* for the entry array            */
    struct lw__gpu_cache_entry *entries; /* key + handle pairs             */
    size_t n;                            /* entries used                   */
    size_t cap;                          /* entries allocated              */
    uint64_t hits;                       /* lookups answered from the cache */
    uint64_t misses;                     /* lookups that had to compile    */
} lw__gpu_pipeline_cache;

void lw__gpu_cache_init(lw__gpu_pipeline_cache *c, const lw_allocator *alloc);
/* Frees the cache's memory (the pipelines belong to the HAL and go with it). */
void lw__gpu_cache_free(lw__gpu_pipeline_cache *c);
/* The pipeline cached under key, or 0 (counted as a hit or a miss). */
lw_gpu_pipeline lw__gpu_cache_find(lw__gpu_pipeline_cache *c, const char *key);
/* Adds key -> p (LW_ERR_INVALID_ARG for a key of LW_GPU_CACHE_KEY bytes or more, LW_ERR_NOMEM). */
lw_status lw__gpu_cache_add(lw__gpu_pipeline_cache *c, const char *key, lw_gpu_pipeline p);

/* Expands template (a file of shaders/) with defs, creates the pipeline with bindings kinds[0..n_kinds) and
 * caches it under label (also its debug label; cache may be NULL: always compile). Every kernel family's
 * *_pipeline() ends here. err: LW_ERRMSG_SIZE bytes. */
lw_status lw__gpu_build_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                 const char *label, const char *template_name, const lw__wgsl_define *defs,
                                 size_t n_defs, const lw_gpu_binding_kind *kinds, uint32_t n_kinds,
                                 lw_gpu_pipeline *out, char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Weight formats (gpu-formats.c): which formats have a WGSL dequantization routine (shaders/dequant.wgsl)
 * ------------------------------------------------------------------------------------------------------- */

/* A weight format the kernels can read: its WEIGHT_TYPE name and the routine's block (elements, bytes). */
typedef struct lw__gpu_format {
    uint32_t type;        /* lw_type id                                             */
    const char *define;   /* value of WEIGHT_TYPE (types.wgsl)                      */
    uint32_t block;       /* elements per block of the routine (DQ_BLOCK)           */
    uint32_t block_bytes; /* bytes per such block (DQ_BYTES)                        */
    uint32_t actq;        /* LW_GPU_ACTQ_*: how the CPU rounds activations for it   */
} lw__gpu_format;

/* Activation rounding before the dot (shaders/actq.wgsl ACTQ): what the CPU engine, as llama.cpp's CPU
 * backend, converts x to for a weight format (its vec_dot_type). Kernels that round x the same way agree
 * with the CPU to float summation order instead of to the activation quantization error. */
enum {
    LW_GPU_ACTQ_NONE = 0, /* f32                                                */
    LW_GPU_ACTQ_Q8_0 = 1, /* 8-bit blocks of 32 (Q8_0 / Q8_1), x86 rounding     */
    LW_GPU_ACTQ_Q8_K = 2, /* 8-bit blocks of 256 (Q8_K)                         */
    LW_GPU_ACTQ_F16 = 3,  /* f16                                                */
    LW_GPU_ACTQ_BF16 = 4, /* bf16                                               */
};

/* Elements per activation block of the 8-bit kinds (32 for Q8_0, 256 for Q8_K), 0 for the others. */
uint32_t lw__gpu_actq_block(uint32_t actq);

/* The format entry of type, or NULL when no WGSL routine reads it. */
const lw__gpu_format *lw__gpu_format_of(uint32_t type);

/* ---------------------------------------------------------------------------------------------------------
 * Mat-vec: y = W x (shaders/matvec.wgsl)
 * ------------------------------------------------------------------------------------------------------- */

/* One compiled variant of the mat-vec template. */
typedef struct lw__gpu_matvec_variant {
    uint32_t type;    /* weight format: LW_TYPE_F32, F16, Q8_0 or Q4_0             */
    bool f16;         /* f16 dequantization and products (needs shader-f16)        */
    bool subgroups;   /* subgroup reduction (needs subgroups), else workgroup tree */
    uint32_t wg_size; /* invocations per workgroup, a power of two                 */
    uint32_t rows;    /* rows per workgroup (1..16; x chunks are shared by them)   */
    bool blocks;      /* an invocation takes whole blocks, not chunks of 8 weights */
    uint32_t actq;    /* LW_GPU_ACTQ_*: x rounded as the CPU does (8-bit: needs
                         blocks or stage, and f32 arithmetic)                      */
    uint32_t stage;   /* 0, or words per row of a workgroup-memory weight tile that
                         each K step fills with coalesced loads (matvec.wgsl STAGE) */
    bool exact;       /* the CPU engine's bits (matvec-exact.wgsl; formats with
                         lw__gpu_matvec_has_exact; wg_size and rows kept, the rest
                         ignored)                                                  */
    bool idot;        /* integer products (matvec-q8.wgsl) over x rounded to 8 bits
                         once per step by the quantizer pass (actq-quant.wgsl);
                         formats with lw__gpu_matmat_has_idot, a device with dot4;
                         wg_size, rows and subgroups kept, the rest ignored        */
    bool pair;        /* idot, Q4_0 / Q8_0: two blocks per step, whole-word loads
                         (rows of an even number of blocks, 4-byte aligned)        */
    bool oct;         /* pair: eight blocks per step in 16-byte loads (rows of a
                         multiple of 256 elements, 16-byte aligned)                */
} lw__gpu_matvec_variant;

/* The uniform parameter block of one mat-vec call (MatvecParams in matvec-common.wgsl; 48 bytes). */
typedef struct lw__gpu_matvec_params {
    uint32_t k;          /* elements per row                            */
    uint32_t rows;       /* rows of W                                   */
    uint32_t row_stride; /* bytes between rows of W                     */
    uint32_t w_offset;   /* byte offset of row 0 inside the W binding   */
    uint32_t x_offset;   /* offset of x inside its binding, vec4 units  */
    uint32_t y_offset;   /* offset of y inside its binding, elements    */
    uint32_t groups_x;   /* workgroups along x of the grid              */
    uint32_t x_up;       /* X_GLU: u's offset from g in x, vec4 units    */
    uint32_t order;      /* exact kernel, Q2_K / Q4_K: 1 = llama.cpp's
                            repacked gemm order (tokens in groups of 4
                            of a multi-token step), 0 = its gemv order  */
    uint32_t pad[3];     /* (a uniform block is a multiple of 16 bytes)  */
} lw__gpu_matvec_params;
_Static_assert(sizeof(lw__gpu_matvec_params) == 48, "matvec params block");

/* Binding kinds of the mat-vec pipeline: weights, x, y, params. */
#define LW_GPU_MATVEC_BINDINGS 4u

/* The activation quantizer of the integer mat-vec (actq-quant.wgsl): x (k elements) rounded to 8 bits as the
 * CPU rounds it for the format (actq LW_GPU_ACTQ_Q8_0 or Q8_K), written to a scratch buffer that the mat-vec
 * (variant idot) binds as its x. Parameter block: QuantParams (32 bytes). */
typedef struct lw__gpu_actq_quant_params {
    uint32_t k;        /* elements                                   */
    uint32_t x_offset; /* first vec4 of x in its binding             */
    uint32_t groups_x; /* workgroups along x of the grid             */
    uint32_t x_up;     /* glu: u's offset from g in x, vec4 units     */
    uint32_t x_stride; /* vec4s from one token's x to the next's      */
    uint32_t tokens;   /* tokens (the grid's z): group words after all */
    uint32_t pad[2];   /* keeps the block a multiple of 16 bytes       */
} lw__gpu_actq_quant_params;
#define LW_GPU_ACTQ_QUANT_BINDINGS 3u /* x (read), quants (read_write), params */
/* Bytes of the quantizer's output for k elements: k quants and two words per 32 elements. */
uint64_t lw__gpu_actq_quant_bytes(uint64_t k);
/* glu = LW_GPU_GLU_SILU: x is a gate|up row and the rounded input silu(g) * u (SwiGLU folded in). */
lw_status lw__gpu_actq_quant_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                      const lw_allocator *alloc, uint32_t actq, uint32_t glu,
                                      const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* k elements from element x_offset (a multiple of 4) of x: k a multiple of the kind's block; with a GLU, g
 * there and u from element u_offset (a multiple of 4 at or after g's end; 0 without). */
lw_status lw__gpu_actq_quant_plan(const lw_gpu_info *info, uint32_t actq, uint64_t k, uint64_t x_offset,
                                  uint64_t u_offset, lw__gpu_actq_quant_params *p, uint32_t grid[3],
                                  char *err);

/* Bytes of the quantizer's output for tokens rows of k elements (lw__gpu_actq_quant_plan_rows). */
uint64_t lw__gpu_actq_rows_bytes(uint64_t k, uint64_t tokens);
/* tokens rows of k elements, row t from element x_offset + t * x_stride (multiples of 4), no GLU. */
lw_status lw__gpu_actq_quant_plan_rows(const lw_gpu_info *info, uint32_t actq, uint64_t k, uint64_t x_offset,
                                       uint64_t x_stride, uint64_t tokens, lw__gpu_actq_quant_params *p,
                                       uint32_t grid[3], char *err);

/* Weight formats the mat-vec template has a dequantization routine for. */
bool lw__gpu_matvec_supported(uint32_t type);
/* Elements per block of the template's loop for type (k must be a multiple); 0 when unsupported. */
uint32_t lw__gpu_matvec_block(uint32_t type);
/* Whether type has a mat-vec in the CPU engine's exact order (matvec-exact.wgsl): TQ1_0, TQ2_0, IQ1_S, IQ1_M
 * the IQ2 / IQ3 grid formats, Q3_K, Q5_K and Q6_K always; Q2_K and Q4_K in llama.cpp's repacked order only,
 * which the CPU uses for weights of a multiple of 8 rows that are not the tied embedding table (repacked). */
bool lw__gpu_matvec_has_exact(uint32_t type, bool repacked);

/* The default variant for a device: the measured defaults of gpu-tune.c (lw__gpu_matvec_tuned with no
 * overrides): subgroups where the device has them, f16 only when a tune override asks for it. */
lw__gpu_matvec_variant lw__gpu_matvec_default(const lw_gpu_info *info, uint32_t type);

/* Turns on the CPU's activation rounding for v's format (lw__gpu_format.actq), with what it needs: whole
 * blocks per invocation and f32 arithmetic for the 8-bit kinds. */
void lw__gpu_matvec_round_acts(lw__gpu_matvec_variant *v);

/* The pipeline of variant v: from cache when it holds it, else the template is expanded, compiled and
 * added to cache (cache may be NULL: always compile). err: LW_ERRMSG_SIZE bytes. */
lw_status lw__gpu_matvec_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                  const lw__gpu_matvec_variant *v, const lw_gpu_info *info,
                                  lw_gpu_pipeline *out, char *err);

/* The FFN's gated activation folded into the mat-vec's x loads (matvec.wgsl X_GLU), so that the down
 * projection reads the gate|up projection's output directly, one dispatch instead of GLU + mat-vec with
 * the same bits: the product's input is silu(g) * u (LW_GPU_GLU_SILU, as SWIGLU) or ggml's table GELU(g) * u
 * (LW_GPU_GLU_GELU, as GEGLU with its table; a fifth binding, read-only: lw__gpu_gelu_table's words).
 * Bindings otherwise as the plain pipeline, x being the gate|up activation. */
#define LW_GPU_GLU_SILU 1u
#define LW_GPU_GLU_GELU 2u
lw_status lw__gpu_matvec_glu_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                      const lw_allocator *alloc, const lw__gpu_matvec_variant *v,
                                      uint32_t glu, const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* As lw__gpu_matvec_plan with g (k elements) at element g_offset of x and u at u_offset (a multiple of 4,
 * at or after g's end). */
lw_status lw__gpu_matvec_glu_plan(const lw_gpu_info *info, const lw__gpu_matvec_variant *v, uint64_t rows,
                                  uint64_t k, uint64_t w_offset, uint64_t g_offset, uint64_t u_offset,
                                  uint64_t y_offset, lw__gpu_matvec_params *p, uint32_t grid[3], char *err);

/* Checks the shapes and fills the parameter block and dispatch grid of one call of variant v: rows x k
 * weights starting at byte w_offset of their binding, x at element x_offset (a multiple of 4), y at element
 * y_offset. LW_ERR_INVALID_ARG / LW_ERR_TOO_LARGE with a message on bad or oversized shapes. */
lw_status lw__gpu_matvec_plan(const lw_gpu_info *info, const lw__gpu_matvec_variant *v, uint64_t rows,
                              uint64_t k, uint64_t w_offset, uint64_t x_offset, uint64_t y_offset,
                              lw__gpu_matvec_params *p, uint32_t grid[3], char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Mat-vec with the RMS norm of x in its prologue (kernel-matvec-norm.c, shaders/matvec-q8-norm.wgsl):
 *   y = W q8(rms_norm(a (+ b)) * nw)   for a one-token step, Q4_0 / Q8_0 weights in block pairs
 * so the norm (and the residual add before it) needs no dispatch of its own; every workgroup re-reads x
 * (k floats) and rounds it as actq-quant.wgsl does, workgroup 0 also writes h = a + b.
 * ------------------------------------------------------------------------------------------------------- */

/* One compiled variant. */
typedef struct lw__gpu_matvec_norm_variant {
    uint32_t type;    /* weight format: LW_TYPE_Q4_0 or LW_TYPE_Q8_0                      */
    uint32_t k;       /* elements per row (a multiple of 64; sizes the workgroup memory) */
    uint32_t wg_size; /* invocations: row groups of 32 lanes (a power of two, 32..256)   */
    uint32_t rows;    /* rows per row group (1..8)                                       */
    bool add;         /* the residual add before the norm: bindings a, b, h              */
    bool subgroups;   /* a row's 32 partial sums by subgroupAdd where the layout allows  */
    bool glu;         /* rows [gate | up] of F each: silu(gate) * up rounded to Q8_0 into
                         binding qo (actq-quant.wgsl's layout, k = F); needs wg_size 256,
                         rows 8, F a multiple of 32                                      */
    bool rope;        /* rows [q | k | v]: rope-qkv.wgsl's one-token writes instead of y
                         (Q rotated into y, K rotated and V into the caches; NORMAL pairs,
                         even rows): bindings K cache, V cache, ff after y; params
                         lw__gpu_matvec_norm_rope_params (kernels-ops.h)                   */
    bool kv_f16;      /* rope: the caches hold f16 pairs (else f32)                        */
    bool prefetch;    /* the first block pair's weights loaded before the prologue          */
    uint32_t tiles;   /* 0: a workgroup per tile of rows; else at most this many workgroups,
                         each taking tiles wg, wg + grid, ... after one prologue (so the
                         prologue's re-reads and barriers are paid per workgroup, not per
                         tile); no prefetch                                               */
} lw__gpu_matvec_norm_variant;

/* Its uniform parameter block (NormMatvecParams in the shader; 48 bytes). */
typedef struct lw__gpu_matvec_norm_params {
    uint32_t rows;       /* rows of W                                  */
    uint32_t row_stride; /* bytes between rows of W                    */
    uint32_t w_offset;   /* byte offset of row 0 in the W binding      */
    uint32_t groups_x;   /* workgroups along x of the grid             */
    uint32_t a_offset;   /* first vec4 of a in its binding             */
    uint32_t b_offset;   /* add: first vec4 of b                       */
    uint32_t h_offset;   /* add: first vec4 of h = a + b               */
    uint32_t nw_offset;  /* first vec4 of the norm weight              */
    uint32_t y_offset;   /* first element of y                         */
    float eps;           /* added to the mean square                   */
    uint32_t tile_step;  /* TILES: the grid's workgroups (the step
                            between a workgroup's tiles)               */
    uint32_t pad;        /* (a multiple of 16 bytes)                   */
} lw__gpu_matvec_norm_params;
_Static_assert(sizeof(lw__gpu_matvec_norm_params) == 48, "matvec-norm params block");

/* Bindings: weights, a, (add: b, h,) norm weight, y, (glu: qo,) (rope: K cache, V cache, ff,) params. */
#define LW_GPU_MATVEC_NORM_BINDINGS     5u
#define LW_GPU_MATVEC_NORM_ADD_BINDINGS 7u

/* Bindings of variant v. */
uint32_t lw__gpu_matvec_norm_bindings(const lw__gpu_matvec_norm_variant *v);

/* Whether the GLU variant takes 512 x 4 on this device (a GPU allowing 512 invocations; rows of 2048 and 4096
 * measured), not 256 x 8 (and so runs by default for rows over 2048 too: lw__gpu_matvec_glu_tuned). */
bool lw__gpu_matvec_norm_glu_wide(const lw_gpu_info *info);
/* The default variant for rows of k elements of type on this device (the shape of the H200's measurements;
 * tune keys do not reach it); glu fixes the shape it needs. */
lw__gpu_matvec_norm_variant lw__gpu_matvec_norm_default(const lw_gpu_info *info, uint32_t type, uint32_t k,
                                                        bool add, bool subgroups, bool glu);
/* Whether v suits the device (workgroup size and memory, dot4, the format): LW_OK, else why in err. */
lw_status lw__gpu_matvec_norm_check(const lw_gpu_info *info, const lw__gpu_matvec_norm_variant *v, char *err);
/* The pipeline of variant v (cached as the other families). */
lw_status lw__gpu_matvec_norm_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                       const lw_allocator *alloc, const lw__gpu_matvec_norm_variant *v,
                                       const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* One call over `rows` rows of v->k elements from byte w_offset, element offsets of a, b, h, the norm weight
 * (multiples of 4) and y. */
lw_status lw__gpu_matvec_norm_plan(const lw_gpu_info *info, const lw__gpu_matvec_norm_variant *v,
                                   uint64_t rows, uint64_t w_offset, uint64_t a_offset, uint64_t b_offset,
                                   uint64_t h_offset, uint64_t nw_offset, uint64_t y_offset, float eps,
                                   lw__gpu_matvec_norm_params *p, uint32_t grid[3], char *err);

#endif
