/* Mat-mat kernel family (shaders/matmat.wgsl): Y[t] = W X[t] for a batch of tokens (prefill), tiles of W
 * dequantized into workgroup memory by the formats' shared routine, tiles of X beside them, and a register
 * block of RM x RN outputs per invocation. Same shape as the mat-vec family in kernels.h: variant ->
 * pipeline (lw__gpu_build_pipeline, cached by label) -> per-call plan (uniform parameter block + grid). */
#ifndef LW_GPU_KERNELS_MATMAT_H
#define LW_GPU_KERNELS_MATMAT_H

#include "webgpu/kernels.h"

#include <stdbool.h>
#include <stdint.h>

/* One compiled variant of the mat-mat template. Invocations per workgroup: (tm / rm) * (tn / rn). */
typedef struct lw__gpu_matmat_variant {
    uint32_t type; /* weight format: any entry of the format table (gpu-formats.c)          */
    bool f16;      /* f16 tiles and products, f32 accumulation (needs shader-f16)           */
    uint32_t tm;   /* rows of W per workgroup tile (1..256)                                 */
    uint32_t tn;   /* tokens per workgroup tile (1..256)                                    */
    uint32_t tk;   /* elements of K per step, a multiple of 8 (8..256)                      */
    uint32_t rm;   /* rows per invocation (1..16, divides tm)                               */
    uint32_t rn;   /* tokens per invocation (1..16, divides tn)                             */
    uint32_t actq; /* LW_GPU_ACTQ_*: X rounded as the CPU does (8-bit kinds: f32 tiles)     */
    bool idot;     /* integer products (matmat-q8.wgsl): 8-bit tiles and dot4I8Packed, for the
                      formats lw__gpu_matmat_has_idot lists, with actq Q8_0 and tk % 32 == 0 */
    bool smx;      /* the matrix units (matmat-smx.wgsl, needs the device's i8 16 x 16 x 32 subgroup
                      matrices and 32-wide subgroups): X and W as 16-bit fixed point in two 8-bit digits,
                      both from the prep pass (lw__gpu_smx_prep_plan) that runs before it; rm x rn fragments
                      of 16 x 16 per subgroup of 32 (rows x tokens), tm a multiple of 16 rm, tn of 16 rn,
                      tk of 32; every quantized format; actq and idot unused (idot must be off) */
    uint32_t pad;  /* smx: words of padding after each row of a workgroup tile (0..16, a multiple of 4),
                      and with it the lanes' copies assigned row-first, so that a fragment load's rows
                      and a copy's stores fall on distinct banks; 0 for the other kernels */
} lw__gpu_matmat_variant;

/* Whether format type has a subgroup-matrix kernel (every quantized format: blocks of a multiple of 32). */
bool lw__gpu_matmat_has_smx(uint32_t type);
/* Whether the device offers what the subgroup-matrix kernel needs. */
bool lw__gpu_smx_available(const lw_gpu_info *info);

/* Whether format type has integer quants for the idot kernel (dequant-int.wgsl: Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL). */
bool lw__gpu_matmat_has_idot(uint32_t type);

/* The uniform parameter block of one mat-mat call (MatmatParams in matmat.wgsl; 48 bytes). */
typedef struct lw__gpu_matmat_params {
    uint32_t k;          /* elements per row of W and per token of X          */
    uint32_t rows;       /* rows of W                                         */
    uint32_t tokens;     /* tokens in X and Y                                 */
    uint32_t row_stride; /* bytes between rows of W                           */
    uint32_t w_offset;   /* byte offset of row 0 inside the W binding         */
    uint32_t x_offset;   /* offset of X[0] inside its binding, vec4 units     */
    uint32_t x_stride;   /* vec4s from X[t] to X[t + 1]                       */
    uint32_t y_offset;   /* offset of Y[0] inside its binding, elements       */
    uint32_t y_stride;   /* elements from Y[t] to Y[t + 1]                    */
    uint32_t groups_x;   /* workgroups along x of the grid                    */
    uint32_t pad[2];     /* smx: pad[0] = token tiles (the grid folds them with the row tiles); then
                            keeps the block a multiple of 16 bytes */
} lw__gpu_matmat_params;
_Static_assert(sizeof(lw__gpu_matmat_params) == 48, "matmat params block");

/* The shape of one call: where W, X and Y lie in their bindings. */
typedef struct lw__gpu_matmat_shape {
    uint64_t rows;     /* rows of W = elements of each Y[t]                             */
    uint64_t k;        /* elements per row of W and per X[t], a multiple of the block    */
    uint64_t tokens;   /* tokens (columns of X and Y)                                    */
    uint64_t w_offset; /* byte offset of row 0 of W in its binding (even)                */
    uint64_t x_offset; /* element offset of X[0] in its binding (a multiple of 4)        */
    uint64_t x_stride; /* elements from X[t] to X[t + 1] (>= k, a multiple of 4; 0 = k)  */
    uint64_t y_offset; /* element offset of Y[0] in its binding                          */
    uint64_t y_stride; /* elements from Y[t] to Y[t + 1] (>= rows; 0 = rows)             */
} lw__gpu_matmat_shape;

/* Binding kinds of the mat-mat pipeline: weights, X, Y, params (as mat-vec). */
#define LW_GPU_MATMAT_BINDINGS 4u

/* Invocations per workgroup of v: (tm / rm) * (tn / rn) (0 when rm or rn is 0). */
uint32_t lw__gpu_matmat_wg_size(const lw__gpu_matmat_variant *v);

/* Bytes of workgroup memory v uses (both tiles). */
uint64_t lw__gpu_matmat_wg_bytes(const lw__gpu_matmat_variant *v);

/* Checks v against the template's rules and the device's limits and features: LW_OK, or
 * LW_ERR_UNSUPPORTED (format or feature missing) / LW_ERR_INVALID_ARG with a message. */
lw_status lw__gpu_matmat_check(const lw_gpu_info *info, const lw__gpu_matmat_variant *v, char *err);

/* The default variant for a device: the measured defaults of gpu-tune.c (lw__gpu_matmat_tuned with no
 * overrides). */
lw__gpu_matmat_variant lw__gpu_matmat_default(const lw_gpu_info *info, uint32_t type);

/* Turns on the CPU's activation rounding for v's format (as lw__gpu_matvec_round_acts). */
void lw__gpu_matmat_round_acts(lw__gpu_matmat_variant *v);

/* The pipeline of variant v (checked first), from cache when it holds it (cache may be NULL: always
 * compile). err: LW_ERRMSG_SIZE bytes. */
lw_status lw__gpu_matmat_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                  const lw__gpu_matmat_variant *v, const lw_gpu_info *info,
                                  lw_gpu_pipeline *out, char *err);

/* Checks the shape and fills the parameter block and dispatch grid of one call of variant v.
 * LW_ERR_INVALID_ARG / LW_ERR_TOO_LARGE with a message on bad or oversized shapes (the weights must lie
 * below maxStorageBufferBindingSize and 4 GiB of their binding; X and Y likewise). */
lw_status lw__gpu_matmat_plan(const lw_gpu_info *info, const lw__gpu_matmat_variant *v,
                              const lw__gpu_matmat_shape *s, lw__gpu_matmat_params *p, uint32_t grid[3],
                              char *err);

/* The subgroup-matrix kernel's prep pass (shaders/smx-prep.wgsl), run before each smx mat-mat of a weight
 * piece: X's tokens and the piece's rows of W as 16-bit fixed point in two 8-bit digit planes each (in the
 * format's chunk order) with each token's max |x| and each row's max |w|, into one buffer the mat-mat reads
 * (binding 1). */
typedef struct lw__gpu_smx_prep_params {
    uint32_t k;          /* elements per token and row (a multiple of 32)                          */
    uint32_t rows;       /* rows of the piece                                                      */
    uint32_t tokens;     /* tokens whose digits this dispatch writes (0: only the row maxima)      */
    uint32_t t_total;    /* tokens the buffer's layout is for (the mat-mat's)                      */
    uint32_t row_stride; /* bytes between rows of W                                                */
    uint32_t w_offset;   /* byte offset of row 0 of W in its binding                               */
    uint32_t x_offset;   /* vec4 of token 0 of X                                                   */
    uint32_t x_stride;   /* vec4s between tokens of X                                              */
    uint32_t groups_x;   /* workgroups along x of the grid                                         */
    uint32_t pad[3];     /* a multiple of 16 bytes                                                 */
} lw__gpu_smx_prep_params;
_Static_assert(sizeof(lw__gpu_smx_prep_params) == 48, "smx prep params block");

/* Binding kinds of the prep pipeline: weights, X (f32), the digits buffer (read_write), params. */
#define LW_GPU_SMX_PREP_BINDINGS 4u

/* Bytes of the prep buffer for tokens x k and rows x k digits and their maxima; LW_ERR_TOO_LARGE on
 * overflow. */
lw_status lw__gpu_smx_prep_bytes(uint64_t k, uint64_t tokens, uint64_t rows, uint64_t *bytes);

/* The prep pipeline of weight format type. err: LW_ERRMSG_SIZE bytes. */
lw_status lw__gpu_smx_prep_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, uint32_t type, const lw_gpu_info *info,
                                    lw_gpu_pipeline *out, char *err);

/* Plans the prep of the mat-mat of shape s (its rows, k, tokens, w_offset, and X's x_offset / x_stride in
 * elements): the digits of the first `tokens` tokens (s->tokens or 0, for the pieces after the first) and
 * every row's maximum. */
lw_status lw__gpu_smx_prep_plan(const lw_gpu_info *info, uint32_t type, const lw__gpu_matmat_shape *s,
                                uint64_t tokens, lw__gpu_smx_prep_params *p, uint32_t grid[3], char *err);

#endif
