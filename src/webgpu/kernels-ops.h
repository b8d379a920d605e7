/* WebGPU kernels of the engine graph's ops (src/graph/graph.h lw__op) other than MUL_MAT and ATTN, and GPU
 * sampling: what a GPU runner needs to execute the CPU engine's node list. Same pattern as kernels.h: per
 * family a variant struct, a *_pipeline() that expands the family's WGSL template (src/webgpu/shaders)
 * through lw__gpu_build_pipeline (cached by variant), and a *_plan() that checks shapes and fills a small
 * uniform parameter block + dispatch grid. Planning allocates nothing, so a runner plans every node at load
 * and only rewrites the blocks whose contents change per step (rows, positions).
 *
 * Conventions shared by every family here (the runner can rely on them):
 *  - Parameters: every *_params struct is a multiple of 16 bytes and at most LW_GPU_OPS_PARAMS_MAX bytes;
 *    its binding is LW_GPU_BIND_UNIFORM_DYNAMIC, so all blocks can live in one uniform arena of
 *    LW_GPU_OPS_PARAM_SLOT-byte slots: bind the arena with size = the slot (or sizeof the block) and pass
 *    the slot's offset as dispatch()'s dyn_offset. The params binding is always the LAST binding.
 *  - Activations (f32 rows), token ids, KV cache and sampling buffers are bound read_write, weights and
 *    tables read-only. WebGPU forbids one buffer bound read-only and writable in the same dispatch, and
 *    Dawn refuses overlapping writable bindings: so one activation arena can back every activation
 *    binding of a node as long as each binding covers its own tensor's range (disjoint ranges, offsets a
 *    multiple of minStorageBufferOffsetAlignment: plan the graph with that alignment). No kernel here
 *    works in place. Offsets in the parameter blocks (elements, from the start of the binding) allow
 *    binding whole buffers instead.
 *  - Grids: (grid[0], grid[1], grid[2]) workgroups; work items are numbered wg.x + wg.y * groups_x (the
 *    block's groups_x), so any count fits under maxComputeWorkgroupsPerDimension.
 *  - Indices are u32 inside the kernels: plans refuse shapes whose element indices reach 2^32.
 *  - Every kernel has an f32 path and none needs subgroups or shader-f16 (variants that use them are
 *    refused on devices without them).
 *
 * Node -> kernel (a runner walking the graph's node list):
 *   GET_ROWS        get_rows (one dispatch per table part; lw__gpu_get_rows_split at load)
 *   RMS_NORM        norm (add_input when src0 is the dst of the ADD just before it: the residual ADD and
 *                   the next block's norm in one dispatch; a final norm feeding OUT_ROWS can be planned for
 *                   the output rows only: x_offset = first * n, rows = count, then OUT_ROWS is a no-op)
 *   ADD             eltwise ADD (unless fused into the next norm)
 *   ROPE + ROPE + KV_STORE(K) + KV_STORE(V) of one attention block: rope_qkv, one dispatch; else ROPE
 *                   (out_f16 to write K straight into an f16 cache) and KV_STORE
 *   KV_STORE        kv_store
 *   SWIGLU, GEGLU   eltwise (b_in_a when gate and up come from one fused projection; GEGLU: upload
 *                   lw__gpu_gelu_table once and use gelu_table for the CPU's exact bits)
 *   SCALE, SOFTCAP  eltwise
 *   OUT_ROWS        eltwise COPY via lw__gpu_out_rows_plan (or a HAL copy(), or folded into the norm)
 *   sampling        topk (k = 1: greedy, read back 4 bytes); sampled: topk pass 1 + the sampling pass
 *                   (topk.wgsl SAMPLE=1, also 4 bytes read back)
 * With mat-vec and attention, a llama block's decode step is then: norm(+add), Q/K/V mat-vec(s), rope_qkv,
 * attention, O mat-vec, norm(+add), gate/up mat-vec(s), SWIGLU, down mat-vec: 9 dispatches with separate
 * projections, 7 with fused QKV and gate|up ones (the last block's residual ADD goes into the final norm).
 *
 * Tests: tests/web/ops.test.mjs (end to end against src/cpu/engine-ops.c through web/lw-wasm-ops.c) and
 * tests/test-wgsl-ops.c (expansion + planning, no GPU). */
#ifndef LW_GPU_KERNELS_OPS_H
#define LW_GPU_KERNELS_OPS_H

#include "graph/graph.h"
#include "webgpu/kernels.h"

#define LW_GPU_OPS_PARAMS_MAX 128u /* bytes of the largest parameter block below          */
#define LW_GPU_OPS_PARAM_SLOT 256u /* uniform arena slot (WebGPU's usual dynamic-offset alignment) */

/* Helpers of the families below: splits `groups` work items into a grid (sets *groups_x); checks a
 * workgroup size against the device (pow2: must be a power of two). what names the family in messages. */
lw_status lw__gpu_ops_grid(const lw_gpu_info *info, uint64_t groups, uint32_t grid[3], uint32_t *groups_x,
                           const char *what, char *err);
lw_status lw__gpu_ops_check_wg(const lw_gpu_info *info, uint32_t wg, bool pow2, const char *what, char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Element-wise ops: ADD, SCALE, SOFTCAP, SWIGLU, GEGLU, and OUT_ROWS as a row-range COPY
 * (shaders/eltwise.wgsl). One invocation per element.
 *   Bindings, unary ops (SCALE, SOFTCAP, COPY):  0 a (rw f32), 1 d (rw f32), 2 params
 *   Bindings, binary ops (ADD, SWIGLU, GEGLU):   0 a (rw f32), 1 b (rw f32), 2 d (rw f32), 3 params,
 *                                                4 GELU table (read; GEGLU with gelu_table only)
 * Node mapping: ADD a = src0, b = src1 (b_rows = 1 when src1 has one row: broadcast); SCALE f0 = fp[0];
 * SOFTCAP f0 = fp[0] (1/c), f1 = fp[1] (c); SWIGLU/GEGLU a = src0 (gate input), b = src1.
 * Numerics against the CPU reference (engine-ops.c): ADD/SCALE/COPY exact; SWIGLU uses ggml_v_expf's
 * polynomial on each row's first ne0 & ~15 elements as the CPU does (a few ulp: WGSL's fma may round
 * twice, its division is 2.5 ulp); SOFTCAP uses WGSL's tanh (within a few ulp). GEGLU: with gelu_table
 * the CPU's table (lw__gpu_gelu_table) is looked up with an exact round-to-nearest-even f16 index: bit
 * for bit the CPU's result; without it GELU is computed in f32 and rounded to f16, so an element differs
 * from the CPU by at most one f16 ulp of GELU(x) (relative 2^-10), on the few inputs where WGSL's tanh
 * falls on the other side of an f16 rounding boundary (tests/web/ops.test.mjs measures how many).
 * ------------------------------------------------------------------------------------------------------- */

typedef enum lw__gpu_eltwise_op {
    LW_GPU_ELT_ADD = 1,     /* d = a + b (b one row: broadcast)            */
    LW_GPU_ELT_SCALE = 2,   /* d = a * f0                                  */
    LW_GPU_ELT_SOFTCAP = 3, /* d = tanh(a * f0) * f1                       */
    LW_GPU_ELT_SWIGLU = 4,  /* d = silu(a) * b                             */
    LW_GPU_ELT_GEGLU = 5,   /* d = gelu(a) * b (ggml's f16-table GELU)     */
    LW_GPU_ELT_COPY = 6,    /* d = a (OUT_ROWS)                            */
} lw__gpu_eltwise_op;

typedef struct lw__gpu_eltwise_variant {
    uint32_t op;      /* lw__gpu_eltwise_op                                         */
    bool gelu_table;  /* GEGLU: read ggml's table from binding 4 (exact) vs compute */
    uint32_t wg_size; /* invocations per workgroup                                  */
    bool b_in_a;      /* binary ops: b is read from a's binding (b_offset, b_stride
                         into it), e.g. the up half of a fused gate|up projection:
                         bindings a, d, params (+ table). One binding, because two
                         writable bindings of one range are refused                 */
} lw__gpu_eltwise_variant;

/* EltwiseParams in eltwise.wgsl (48 bytes). */
typedef struct lw__gpu_eltwise_params {
    uint32_t n;        /* elements per row                                  */
    uint32_t rows;     /* rows                                              */
    uint32_t a_offset; /* first element of a in its binding                 */
    uint32_t b_offset; /* first element of b (binary ops)                   */
    uint32_t d_offset; /* first element of d                                */
    uint32_t b_rows;   /* 1: b's single row is broadcast; else rows         */
    uint32_t groups_x; /* workgroups along x of the grid                    */
    uint32_t a_stride; /* elements between rows of a (plan: n)              */
    float f0;          /* SCALE factor; SOFTCAP 1/c                         */
    float f1;          /* SOFTCAP c                                         */
    uint32_t b_stride; /* elements between rows of b (plan: n)              */
    uint32_t d_stride; /* elements between rows of d (plan: n)              */
} lw__gpu_eltwise_params;
_Static_assert(sizeof(lw__gpu_eltwise_params) == 48, "eltwise params block");

/* Default variant: 256 invocations (capped by the device), the exact GELU table for GEGLU. */
lw__gpu_eltwise_variant lw__gpu_eltwise_default(const lw_gpu_info *info, uint32_t op);
/* Binding kinds of variant v into kinds (LW_GPU_MAX_BINDINGS entries); returns how many (0: bad op). */
uint32_t lw__gpu_eltwise_layout(const lw__gpu_eltwise_variant *v, lw_gpu_binding_kind *kinds);
lw_status lw__gpu_eltwise_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                   const lw_allocator *alloc, const lw__gpu_eltwise_variant *v,
                                   const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* rows x n elements; b_rows must be 1 or rows (binary ops; ignored by unary ones). */
lw_status lw__gpu_eltwise_plan(const lw_gpu_info *info, const lw__gpu_eltwise_variant *v, uint64_t n,
                               uint64_t rows, uint64_t a_offset, uint64_t b_offset, uint64_t b_rows,
                               uint64_t d_offset, float f0, float f1, lw__gpu_eltwise_params *p,
                               uint32_t grid[3], char *err);
/* Rows further apart than n (0: n): e.g. SWIGLU on a fused gate|up projection, a = gate at offset 0 and
 * b = up at offset n, both with stride 2n. Call after a successful plan; LW_ERR_TOO_LARGE past 32 bits. */
lw_status lw__gpu_eltwise_strides(lw__gpu_eltwise_params *p, uint64_t a_stride, uint64_t b_stride,
                                  uint64_t d_stride, char *err);
/* OUT_ROWS: rows [first, first + count) of src (rows of n elements at src_offset) to d at d_offset; the graph
 * uses first = n_tokens - 1, count = 1 (last row) or first = 0, count = n_tokens (all). Variant op COPY. */
lw_status lw__gpu_out_rows_plan(const lw_gpu_info *info, const lw__gpu_eltwise_variant *v, uint64_t n,
                                uint64_t first, uint64_t count, uint64_t src_offset, uint64_t d_offset,
                                lw__gpu_eltwise_params *p, uint32_t grid[3], char *err);

#define LW_GPU_GELU_TABLE_WORDS 32768u /* the GELU table: 65536 halves, two per u32 (128 KiB) */
/* Fills words[LW_GPU_GELU_TABLE_WORDS] with ggml's GELU table (lw__cpu_gelu_f16 of every half, low half
 * = even index): upload once at load into a read-only storage buffer for GEGLU's binding 4. */
void lw__gpu_gelu_table(uint32_t *words);

/* ---------------------------------------------------------------------------------------------------------
 * RMS_NORM fused with its weight multiply (shaders/rms-norm.wgsl): d = (x / sqrt(mean(x^2) + eps)) * w
 * per group of `group` elements (node: group = ip[0] or ne0 when 0, eps = fp[0], w = src1 or none; the
 * weight has `group` elements (shared by the groups: q/k norms) or n (one slice per group)).
 * Variant add_input also fuses the residual ADD that feeds the norm (an ADD node whose dst is the
 * RMS_NORM's src0): x = a + b is computed, stored to `sum` (the residual stream the next ADD reads) and
 * normalised: one dispatch instead of two, the same bits as ADD then RMS_NORM (sum always; d where exact).
 * One workgroup per (row, group). Bindings: 0 x (rw f32; a with add_input), 1 w (read f32; when there is
 * no weight bind any small buffer not bound writable in the same dispatch), 2 d (rw f32), 3 params; with
 * add_input: 3 b (rw f32), 4 sum (rw f32), 5 params.
 * Numerics: exact (the default on CPU adapters only) sums the squares in integer limbs and rounds the
 * scale correctly: the CPU's bits (it sums in double); else (GPUs) the sum is f32 (strided partials, then
 * subgroupAdd or a tree) and the scale inverseSqrt: within a few ulp of the CPU (relative ~3e-7 on
 * lavapipe), without the exact sum's integer work (H200, 4,096 floats: ~26 us exact).
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_norm_variant {
    bool subgroups;   /* subgroup reduction (needs subgroups)                       */
    uint32_t wg_size; /* invocations per workgroup (power of two; exact: <= 512)    */
    bool add_input;   /* fused residual ADD (x = a + b, stored to sum)              */
    bool exact;       /* EXACT_SUM: the CPU's bits (integer limbs); false: f32 sum  */
    uint32_t q8_out;  /* Q8_OUT: 0, or LW_GPU_ACTQ_Q8_0 / Q8_K: the row also rounded
                         to 8 bits into one more binding (after the parameters), in
                         the integer mat-vec's layout (actq-quant.wgsl); one row     */
} lw__gpu_norm_variant;

/* NormParams in rms-norm.wgsl (64 bytes). */
typedef struct lw__gpu_norm_params {
    uint32_t n;              /* elements per row                                   */
    uint32_t group;          /* elements per normalised group                      */
    uint32_t groups_per_row; /* n / group                                          */
    uint32_t rows;           /* rows                                               */
    uint32_t x_offset;       /* first element of x (a)                             */
    uint32_t d_offset;       /* first element of d                                 */
    uint32_t w_offset;       /* first element of w                                 */
    uint32_t w_step;         /* 0: one weight of `group` for all groups; group     */
    uint32_t has_w;          /* multiply by w                                      */
    float eps;               /* added to the mean square                           */
    uint32_t groups_x;       /* workgroups along x                                 */
    uint32_t b_offset;       /* add_input: first element of b                      */
    uint32_t sum_offset;     /* add_input: first element of sum                    */
    uint32_t x_stride;       /* elements between rows of x, b, sum (plan: n)       */
    uint32_t d_stride;       /* elements between rows of d (plan: n)               */
    uint32_t pad;            /* (size)                                             */
} lw__gpu_norm_params;
_Static_assert(sizeof(lw__gpu_norm_params) == 64, "norm params block");

lw__gpu_norm_variant lw__gpu_norm_default(const lw_gpu_info *info);
#define LW_GPU_NORM_BINDINGS     4u /* x, w, d, params              */
#define LW_GPU_NORM_ADD_BINDINGS 6u /* a, w, d, b, sum, params      */
lw_status lw__gpu_norm_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_norm_variant *v, const lw_gpu_info *info, lw_gpu_pipeline *out,
                                char *err);
/* group: 0 = the whole row; w_len: elements of the weight (0: none; group or n). */
lw_status lw__gpu_norm_plan(const lw_gpu_info *info, const lw__gpu_norm_variant *v, uint64_t n,
                            uint64_t group, uint64_t rows, uint64_t x_offset, uint64_t w_offset,
                            uint64_t w_len, uint64_t d_offset, float eps, lw__gpu_norm_params *p,
                            uint32_t grid[3], char *err);
/* Rows of x (and b, sum) and of d further apart than n (0: n), e.g. per-head q/k norms reading the q or k
 * part of a fused QKV projection. Call after a successful plan. */
lw_status lw__gpu_norm_strides(lw__gpu_norm_params *p, uint64_t x_stride, uint64_t d_stride, char *err);
/* The add_input variant: as lw__gpu_norm_plan with a at x_offset, plus b and sum (rows x n each). */
lw_status lw__gpu_norm_add_plan(const lw_gpu_info *info, const lw__gpu_norm_variant *v, uint64_t n,
                                uint64_t group, uint64_t rows, uint64_t a_offset, uint64_t b_offset,
                                uint64_t sum_offset, uint64_t w_offset, uint64_t w_len, uint64_t d_offset,
                                float eps, lw__gpu_norm_params *p, uint32_t grid[3], char *err);

/* ---------------------------------------------------------------------------------------------------------
 * ROPE (shaders/rope.wgsl), NORMAL and NEOX, rotated dims < head dim, frequency factors and YaRN as the
 * CPU reference op_rope. Row r is at position pos0 + r. One invocation per (row, head, pair).
 * Bindings: 0 x (rw f32), 1 ff (read f32 frequency factors, n_rot/2 of them; when absent bind any small
 * buffer not bound writable in the dispatch), 2 d (rw f32), 3 params.
 * Variant out_f16 fuses the KV_STORE of K into an f16 cache: point d at the cache binding, d_offset =
 * cache_offset + pos0 * row_len (the CPU stores row r at cell pos0 + r), d_stride = row_len (KV heads x
 * head dim); values are rounded to nearest even as the CPU's cache write. d_offset, d_stride even. (An f32
 * cache needs no variant: the plain kernel writes f32 rows wherever d points.)
 * Numerics: the angle is built with the CPU's successive products (same bits); sin/cos are computed in
 * the kernel to ~1 ulp (not WGSL's built-ins, which are only bounded on [-pi, pi]); the rotation may round
 * its fma twice. Results within a few ulp of the CPU, except that at position P an angle is only defined
 * to an ulp (P 2^-24 rad) and the YaRN blend / frequency-factor division may round it differently
 * (tests/web/ops.test.mjs bounds the NMSE accordingly).
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_rope_variant {
    uint32_t wg_size; /* invocations per workgroup                                      */
    bool out_f16;     /* d is an f16 cache (packed halves): RoPE fused with KV_STORE     */
} lw__gpu_rope_variant;

/* One ROPE call: the node's parameters plus where the rows are. */
typedef struct lw__gpu_rope_args {
    uint32_t n_head;    /* ip[0]                                     */
    uint32_t head_dim;  /* ip[1]                                     */
    uint32_t n_rot;     /* ip[2]                                     */
    uint32_t mode;      /* ip[3]: LW_ROPE_NORMAL or LW_ROPE_NEOX     */
    float freq_base;    /* fp[0]                                     */
    float freq_scale;   /* fp[1]                                     */
    float ext_factor;   /* fp[2] (0: no YaRN)                        */
    float attn_factor;  /* fp[3]                                     */
    float corr0;        /* fp[4]                                     */
    float corr1;        /* fp[5]                                     */
    bool has_ff;        /* src1 present: frequency factors           */
    uint64_t rows;      /* tokens of this step                       */
    uint64_t pos0;      /* position of the first                     */
    uint64_t x_offset;  /* first element of x; rows x_stride apart   */
    uint64_t x_stride;  /* 0: n_head * head_dim                      */
    uint64_t d_offset;  /* first element of d                        */
    uint64_t d_stride;  /* 0: n_head * head_dim                      */
    uint64_t ff_offset; /* first frequency factor, or (table) the first entry of the table  */
    bool table;         /* binding 1 holds the host's sin/cos table (lw__rope_cache) of the
                           rows' positions from ff_offset: rows x n_rot / 2 (cos, sin) pairs;
                           the CPU's angles to the bit (the kernel's own are within an ulp) */
} lw__gpu_rope_args;

/* RopeParams in rope.wgsl (80 bytes). */
typedef struct lw__gpu_rope_params {
    uint32_t n_head, head_dim, n_rot, neox; /* shape and mode                                      */
    uint32_t rows, pos0;                    /* tokens, first position                              */
    uint32_t x_offset, x_stride;            /* x: first element, elements between rows             */
    uint32_t d_offset, d_stride;            /* d: the same                                         */
    uint32_t ff_offset, has_ff;             /* frequency factors (1) or the host's table (2)        */
    float theta_scale;                      /* freq_base^(-2/n_rot) by powf, as the CPU            */
    float freq_scale, ext_factor;           /* as the node                                         */
    float mscale;                           /* attn_factor (x YaRN's magnitude correction)         */
    float corr0, corr1;                     /* YaRN correction dims                                */
    uint32_t groups_x, pad;                 /* workgroups along x; (size)                          */
} lw__gpu_rope_params;
_Static_assert(sizeof(lw__gpu_rope_params) == 80, "rope params block");

lw__gpu_rope_variant lw__gpu_rope_default(const lw_gpu_info *info);
#define LW_GPU_ROPE_BINDINGS 4u
lw_status lw__gpu_rope_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_rope_variant *v, const lw_gpu_info *info, lw_gpu_pipeline *out,
                                char *err);
/* Fills a's node fields from a ROPE node (the rest are left as they are). */
void lw__gpu_rope_args_from_node(const lw__node *nd, lw__gpu_rope_args *a);
lw_status lw__gpu_rope_plan(const lw_gpu_info *info, const lw__gpu_rope_variant *v,
                            const lw__gpu_rope_args *a, lw__gpu_rope_params *p, uint32_t grid[3], char *err);

/* ---------------------------------------------------------------------------------------------------------
 * The attention block's epilogue in one dispatch (shaders/rope-qkv.wgsl): ROPE(Q) -> q_out, ROPE(K) ->
 * K cache, V -> V cache, replacing four nodes (two ROPE, two KV_STORE) of the same step: Q and K share the
 * ROPE node parameters (the graph's two ROPE nodes differ only in ip[0], the head count) and head_dim.
 * Cache destinations as KV_STORE: row r goes to cell pos0 + r, i.e. kc_offset/vc_offset = cache offset +
 * pos0 * (n_head_kv * head_dim), strides n_head_kv * head_dim. Same bits as the separate kernels.
 * Bindings: 0 q (rw f32), 1 ff (read f32; a dummy when absent), 2 q_out (rw f32), 3 k (rw f32), 4 K cache
 * (rw), 5 v (rw f32), 6 V cache (rw), 7 params (8 bindings, 7 storage: within WebGPU's default limit of 8
 * storage buffers per stage).
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_rope_qkv_variant {
    uint32_t wg_size;  /* invocations per workgroup                                             */
    bool kv_f16;       /* f16 caches (else f32)                                                 */
    bool qkv_one;      /* q, k, v all read from binding 0 (a fused QKV projection whose rows
                          interleave them; k/v offsets and strides locate k and v in it):
                          bindings 0 qkv, 1 ff, 2 q_out, 3 K cache, 4 V cache, 5 params        */
    bool qk_norm;      /* qkv_one only: q and k are first RMS-normalised per head with weights of
                          head_dim elements (qwen3, gemma3: the RMS_NORM nodes before the ROPEs;
                          1/sqrt(mean of squares + qk_eps), then the weight, as rms-norm.wgsl,
                          serially per head): bindings 6 q_norm, 7 k_norm (read f32)           */
    bool qkv_bias;     /* qkv_one only, not with qk_norm: q, k and v get their biases added first
                          (qwen2), binding 6 (read f32, [bq | bk | bv] laid out as one row of
                          binding 0, rows x_stride apart)                                      */
    bool exact_norm;   /* qk_norm: EXACT_NORM, the CPU's bits (integer limbs, as the norm's exact;
                          default on CPU adapters only); false: f32 sums, within a few ulp     */
    uint32_t kv_quant; /* LW_TYPE_Q8_0 / LW_TYPE_Q4_0: the caches hold the GPU's blocks of that
                          type (kernels-attn.h), one work item per 32-element block of K or V,
                          quantized as KV_STORE does; 0: f16 / f32 (kv_f16)                    */
} lw__gpu_rope_qkv_variant;

/* Where K and V come from and go (elements; strides 0: n_head_kv * head_dim). */
typedef struct lw__gpu_kv_dest {
    uint32_t n_head_kv; /* K/V heads                                   */
    uint64_t k_offset;  /* first element of k                          */
    uint64_t k_stride;  /* elements between rows of k                  */
    uint64_t kc_offset; /* element of cell pos0 in the K cache binding  */
    uint64_t kc_stride; /* elements between cache cells                */
    uint64_t v_offset;  /* first element of v                          */
    uint64_t v_stride;  /* elements between rows of v                  */
    uint64_t vc_offset; /* element of cell pos0 in the V cache binding  */
    uint64_t vc_stride; /* elements between cache cells                */
} lw__gpu_kv_dest;

/* QkvParams in rope-qkv.wgsl (128 bytes): RopeParams' fields, then K/V's. */
typedef struct lw__gpu_rope_qkv_params {
    lw__gpu_rope_params rope;      /* Q's RoPE block (x = q, d = q_out); rope.pad = n_head_kv */
    uint32_t k_offset, k_stride;   /* k                                                       */
    uint32_t kc_offset, kc_stride; /* K cache                                                 */
    uint32_t v_offset, v_stride;   /* v                                                       */
    uint32_t vc_offset, vc_stride; /* V cache                                                 */
    float q_scale;                 /* q_out = rotated q * q_scale (plan: 1; a SCALE node of the
                                      rotated Q folded in: its factor, the same bits)           */
    float qk_eps;                  /* qk_norm: the norms' epsilon                             */
    uint32_t zero;                 /* 0 (the Q4_0 quantizer's operand the compiler cannot know) */
    uint32_t pad;                  /* (size)                                                  */
} lw__gpu_rope_qkv_params;
_Static_assert(sizeof(lw__gpu_rope_qkv_params) == 128, "rope qkv params block");

/* The uniform block of the mat-vec with the norm in its prologue and rope_qkv's writes as its epilogue
 * (matvec-q8-norm.wgsl ROPE_OUT; lw__gpu_matvec_norm_variant.rope): the mat-vec's block, then the
 * rope_qkv call's of the same one-token step (its q_out is the mat-vec's y). */
typedef struct lw__gpu_matvec_norm_rope_params {
    lw__gpu_matvec_norm_params mv; /* the mat-vec's (y_offset = q.rope.d_offset) */
    lw__gpu_rope_qkv_params q;     /* the RoPE and the caches' cells            */
} lw__gpu_matvec_norm_rope_params;
_Static_assert(sizeof(lw__gpu_matvec_norm_rope_params) == 176, "matvec-norm rope params block");

lw__gpu_rope_qkv_variant lw__gpu_rope_qkv_default(const lw_gpu_info *info, uint32_t kv_type);
#define LW_GPU_ROPE_QKV_BINDINGS      8u /* separate q, k, v */
#define LW_GPU_ROPE_QKV_ONE_BINDINGS  6u /* qkv_one          */
#define LW_GPU_ROPE_QKV_NORM_BINDINGS 8u /* qkv_one + qk_norm */
lw_status lw__gpu_rope_qkv_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, const lw__gpu_rope_qkv_variant *v,
                                    const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* q: Q's ROPE call (node fields, rows, pos0, q at x_offset/x_stride, q_out at d_offset/d_stride). */
lw_status lw__gpu_rope_qkv_plan(const lw_gpu_info *info, const lw__gpu_rope_qkv_variant *v,
                                const lw__gpu_rope_args *q, const lw__gpu_kv_dest *kv,
                                lw__gpu_rope_qkv_params *p, uint32_t grid[3], char *err);

/* ---------------------------------------------------------------------------------------------------------
 * KV_STORE (shaders/kv-store.wgsl): rows of x into cache cells cell0, cell0 + 1, ... (the CPU stores row r
 * at cell pos0 + r), f16 (rounded to nearest even: the CPU's bits), f32, or Q8_0 / Q4_0 in the GPU's block
 * layouts (kernels-attn.h; rounded as the CPU's quantize_row_q8_0 / quantize_row_q4_0). One invocation per
 * cache word (Q8_0 / Q4_0: per block).
 * Bindings: 0 x (rw f32), 1 cache (rw; f16: packed halves as u32, f32, Q8_0 / Q4_0: u32 words), 2 params.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_kv_store_variant {
    bool f16_cache;   /* LW_TYPE_F16 cache                                */
    uint32_t wg_size; /* invocations per workgroup                        */
    bool q8_cache;    /* LW_TYPE_Q8_0 cache                               */
    bool q4_cache;    /* LW_TYPE_Q4_0 cache (none of the three: F32)      */
} lw__gpu_kv_store_variant;

/* KvStoreParams in kv-store.wgsl (32 bytes). */
typedef struct lw__gpu_kv_store_params {
    uint32_t row_len;      /* elements per cache row (KV heads x head dim)   */
    uint32_t rows;         /* rows to store                                  */
    uint32_t x_offset;     /* first element of x                             */
    uint32_t x_stride;     /* elements between rows of x                     */
    uint32_t cache_offset; /* element of cell 0 in the cache binding         */
    uint32_t cell0;        /* cell of the first row                          */
    uint32_t groups_x;     /* workgroups along x                             */
    uint32_t zero;         /* 0 (memset): Q4_0's unfused() operand, and size */
} lw__gpu_kv_store_params;
_Static_assert(sizeof(lw__gpu_kv_store_params) == 32, "kv store params block");

lw__gpu_kv_store_variant lw__gpu_kv_store_default(const lw_gpu_info *info, uint32_t kv_type);
#define LW_GPU_KV_STORE_BINDINGS 3u
lw_status lw__gpu_kv_store_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, const lw__gpu_kv_store_variant *v,
                                    const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* n_cells: cells of the cache binding from cache_offset (cell0 + rows must fit). x_stride 0: row_len.
 * f16: row_len and cache_offset even; Q8_0 / Q4_0: both multiples of 32 (cache_offset counts elements as if
 * unquantized: block cache_offset / 32 is the first). */
lw_status lw__gpu_kv_store_plan(const lw_gpu_info *info, const lw__gpu_kv_store_variant *v, uint64_t row_len,
                                uint64_t rows, uint64_t x_offset, uint64_t x_stride, uint64_t cache_offset,
                                uint64_t cell0, uint64_t n_cells, lw__gpu_kv_store_params *p,
                                uint32_t grid[3], char *err);

/* ---------------------------------------------------------------------------------------------------------
 * GET_ROWS (shaders/get-rows.wgsl): d[t] = dequantized row ids[t] of a weight table in any format of the
 * WGSL table (gpu-formats.c). A table is split into parts of whole rows so that no binding exceeds
 * maxStorageBufferBindingSize (lw__gpu_get_rows_split); one dispatch per part handles the tokens whose id
 * lies in the part and leaves the others: dispatch every part of the table for a complete lookup (ids
 * outside the table are written by no part). One workgroup per token.
 * Bindings: 0 w (read, the part), 1 ids (rw u32), 2 d (rw f32), 3 params. Exact (the dequantization in
 * f32 is the CPU's to_float for every format with a WGSL routine).
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__gpu_get_rows_variant {
    uint32_t type;    /* weight format (lw__gpu_format_of must know it) */
    uint32_t wg_size; /* invocations per workgroup                      */
    bool row_map;     /* ROW_MAP: w holds a row store's slots, binding 4 maps ids to them
                         (LW_GPU_GET_ROWS_MAP_BINDINGS bindings)          */
} lw__gpu_get_rows_variant;

/* GetRowsParams in get-rows.wgsl (48 bytes). */
typedef struct lw__gpu_get_rows_params {
    uint32_t n;          /* elements per row                                    */
    uint32_t n_tokens;   /* ids to look up                                      */
    uint32_t row_stride; /* bytes between rows                                  */
    uint32_t w_offset;   /* byte offset of row row_base in the w binding        */
    uint32_t row_base;   /* first row held by the part                          */
    uint32_t row_count;  /* rows held by the part                               */
    uint32_t ids_offset; /* first id in the ids binding                         */
    uint32_t d_offset;   /* first element of d                                  */
    uint32_t d_stride;   /* elements between rows of d                          */
    uint32_t groups_x;   /* workgroups along x                                  */
    uint32_t pad[2];     /* (size)                                              */
} lw__gpu_get_rows_params;
_Static_assert(sizeof(lw__gpu_get_rows_params) == 48, "get_rows params block");

lw__gpu_get_rows_variant lw__gpu_get_rows_default(const lw_gpu_info *info, uint32_t type);
#define LW_GPU_GET_ROWS_BINDINGS     4u
#define LW_GPU_GET_ROWS_MAP_BINDINGS 5u /* with row_map: 4 the id -> slot map (read, u32) */
lw_status lw__gpu_get_rows_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                    const lw_allocator *alloc, const lw__gpu_get_rows_variant *v,
                                    const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* Rows per part for a table of n_rows rows of row_bytes: as many as fit one binding, rounded down so
 * that a part's byte size is a multiple of minStorageBufferOffsetAlignment (parts may then be ranges of one
 * buffer); *n_parts parts. */
lw_status lw__gpu_get_rows_split(const lw_gpu_info *info, uint64_t n_rows, uint64_t row_bytes,
                                 uint64_t *rows_per_part, uint64_t *n_parts, char *err);
/* One part's dispatch: rows [row_base, row_base + row_count) of n elements, row row_base at byte w_offset
 * of the part's binding; n_tokens ids at ids_offset; d rows at d_offset, d_stride elements apart (0: n). */
lw_status lw__gpu_get_rows_plan(const lw_gpu_info *info, const lw__gpu_get_rows_variant *v, uint64_t n,
                                uint64_t n_tokens, uint64_t row_base, uint64_t row_count, uint64_t w_offset,
                                uint64_t ids_offset, uint64_t d_offset, uint64_t d_stride,
                                lw__gpu_get_rows_params *p, uint32_t grid[3], char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Sampling on the GPU (shaders/topk.wgsl): the k best logits (k = 1: greedy argmax) as (id, value) pairs,
 * best first, ties to the lower id (the CPU sampler's order), NaN never chosen. Two dispatches:
 *   pass 1 (pipeline pairs=false): bindings 0 logits (rw f32), 1 scratch (rw u32 pairs), 2 params1;
 *   pass 2 (pipeline pairs=true):  bindings 0 scratch, 1 result (rw u32 pairs), 2 params2.
 * The scratch holds scratch_pairs pairs (8 bytes each) from scratch_offset; the result k pairs from
 * out_offset: read back 4 bytes (the id) for greedy decoding, 8k for a CPU-side sampler over the
 * candidates (logits of the others are below the k-th: top-k keeps exactly these).
 * ------------------------------------------------------------------------------------------------------- */

#define LW_GPU_TOPK_MAX 256u /* largest k a plan accepts */

typedef struct lw__gpu_topk_variant {
    uint32_t wg_size; /* invocations per workgroup (power of two)           */
    uint32_t per;     /* inputs each invocation holds in registers (1..32)  */
} lw__gpu_topk_variant;

/* TopkParams in topk.wgsl (32 bytes). */
typedef struct lw__gpu_topk_params {
    uint32_t n;          /* inputs of the pass                          */
    uint32_t k;          /* candidates kept                             */
    uint32_t in_offset;  /* first input (element or pair)               */
    uint32_t out_offset; /* first output pair                           */
    uint32_t chunk;      /* inputs per workgroup                        */
    uint32_t groups;     /* workgroups of the pass                      */
    uint32_t groups_x;   /* workgroups along x                          */
    uint32_t pad;        /* (size)                                      */
} lw__gpu_topk_params;
_Static_assert(sizeof(lw__gpu_topk_params) == 32, "topk params block");

/* A whole top-k: both passes. */
typedef struct lw__gpu_topk_plan_out {
    lw__gpu_topk_params pass1, pass2; /* parameter blocks       */
    uint32_t grid1[3], grid2[3];      /* their grids            */
    uint32_t scratch_pairs;           /* pairs of scratch used  */
} lw__gpu_topk_plan_out;

lw__gpu_topk_variant lw__gpu_topk_default(const lw_gpu_info *info);
#define LW_GPU_TOPK_BINDINGS 3u
lw_status lw__gpu_topk_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                const lw__gpu_topk_variant *v, bool pairs, const lw_gpu_info *info,
                                lw_gpu_pipeline *out, char *err);
/* Pass 1 limited to a grammar's allowed ids (topk.wgsl MASK=1): bindings 0 logits, 1 scratch, 2 params1 (the
 * plan's pass1 block, as the unmasked pass 1), 3 the mask (storage read, ceil(n / 32) u32 words, bit i of
 * word i / 32: id i allowed). Disallowed ids are absent (not candidates), so pass 2 (argmax or draw) picks
 * among the allowed ids only; a step where none is allowed (or all allowed are NaN) yields the padding id
 * 0xffffffff. */
#define LW_GPU_TOPK_MASK_BINDINGS 4u
lw_status lw__gpu_topk_mask_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache,
                                     const lw_allocator *alloc, const lw__gpu_topk_variant *v,
                                     const lw_gpu_info *info, lw_gpu_pipeline *out, char *err);
/* n logits at logits_offset (elements), k <= min(n, LW_GPU_TOPK_MAX); LW_ERR_TOO_LARGE when n needs more
 * workgroups than pass 2 can merge (n > (wg*per)^2 / k: 262144 logits with k = 64 and the default). */
lw_status lw__gpu_topk_plan(const lw_gpu_info *info, const lw__gpu_topk_variant *v, uint64_t n, uint64_t k,
                            uint64_t logits_offset, uint64_t scratch_offset, uint64_t out_offset,
                            lw__gpu_topk_plan_out *out, char *err);
/* The largest k a plan over n logits takes with variant v (pass 2 merges at most wg * per candidates):
 * min(LW_GPU_TOPK_MAX, n, (wg * per) / groups). */
uint32_t lw__gpu_topk_max_k(const lw__gpu_topk_variant *v, uint64_t n);

/* ---------------------------------------------------------------------------------------------------------
 * Sampling on the GPU (shaders/topk.wgsl with SAMPLE=1): pass 2 of a top-k that, instead of writing its k
 * pairs, draws one of them by the CPU sampler's chain (lw_sampler_sample after its top-k: top-p on the
 * softmax of the logits, min-p, temperature, draw) with a uniform number u from the host, and writes that
 * one pair (id, value) at out_offset. So a sampled decode step reads back 4 bytes, as a greedy one.
 *   pass 1: lw__gpu_topk_pipeline(pairs=false) with the plan's pass1 block (unchanged);
 *   pass 2: lw__gpu_sample_pipeline, bindings 0 scratch, 1 result (rw u32), 2 params (lw__gpu_sample_params
 *           = the plan's pass2 block + the sampler's fields; only u changes between draws).
 * k (the top-k) is the plan's: at most lw__gpu_topk_max_k (LW_GPU_TOPK_MAX = 256 with a vocabulary of up to
 * 16384 and the default variant, 64 at 262144), so a sampler's top_k of 0 ("off") or larger than that is
 * capped there: candidates beyond the 256th carry little mass after top-p/min-p, and none with top_k <= 256.
 * The draw is serial in f32 (sums in candidate order); lw__gpu_sample_ref is its scalar reference. Penalties
 * (repeat/frequency/presence) are not applied: the GPU sampler refuses parameters that ask for them.
 * ------------------------------------------------------------------------------------------------------- */

#define LW_GPU_SAMPLE_GREEDY 1u /* flags: the best candidate (temperature <= 0)  */
#define LW_GPU_SAMPLE_TOP_P  2u /* flags: top-p applies (top_p < 1)              */
#define LW_GPU_SAMPLE_MIN_P  4u /* flags: min-p applies (min_p > 0)              */

/* TopkParams in topk.wgsl with SAMPLE=1 (64 bytes). */
typedef struct lw__gpu_sample_params {
    lw__gpu_topk_params topk; /* pass 2's block from lw__gpu_topk_plan                          */
    float inv_temp;           /* 1 / temperature (finite)                                      */
    float top_p;              /* nucleus mass                                                  */
    float min_p_log;          /* logf(min_p), computed on the host (the CPU sampler's bits)    */
    float u;                  /* this draw's uniform number in [0, 1) (lw__gpu_sample_u)       */
    uint32_t flags;           /* LW_GPU_SAMPLE_*                                               */
    uint32_t pad[3];          /* (size)                                                        */
} lw__gpu_sample_params;
_Static_assert(sizeof(lw__gpu_sample_params) == 64, "sample params block");

/* The variant of the sampling pass for at most `pairs` input pairs: v's per, and the smallest power-of-two
 * workgroup (16 at least, v's at most) that holds them. Pass 2 is one workgroup whose k rounds each cost two
 * barriers and a walk up the tournament tree: a vocabulary of 512 (pairs = k <= 256) takes 16 invocations
 * instead of 256 (on CPU drivers, where a barrier costs per invocation, 6x faster draws). */
lw__gpu_topk_variant lw__gpu_sample_variant(const lw__gpu_topk_variant *v, uint64_t pairs);
lw_status lw__gpu_sample_pipeline(const lw_gpu *gpu, lw__gpu_pipeline_cache *cache, const lw_allocator *alloc,
                                  const lw__gpu_topk_variant *v, const lw_gpu_info *info,
                                  lw_gpu_pipeline *out, char *err);
/* Fills p from pass 2 of a top-k plan and the sampler parameters sp (temp, top_p, min_p; top_k is the plan's
 * k; u = 0 until lw__gpu_sample_u). LW_ERR_UNSUPPORTED for penalties (penalty_repeat != 1, penalty_freq or
 * penalty_present != 0 with penalty_last_n > 0), LW_ERR_INVALID_ARG for NaN parameters. */
lw_status lw__gpu_sample_setup(const lw__gpu_topk_params *pass2, const lw_sampler_params *sp,
                               lw__gpu_sample_params *p, char *err);
/* u (e.g. lw__sampler_rng_uniform's) as the f32 the kernel takes: rounded down to a multiple of 2^-24, so it
 * stays below 1 (the draw differs from the CPU's 53-bit one only where a boundary lies within 2^-24). */
float lw__gpu_sample_u(double u);
/* Scalar reference of pass 2 with SAMPLE=1: the k best of n (id, value) pairs (value descending, ties to
 * the lower id, NaN never), then the kernel's draw step by step in f32. Returns the drawn pair's index among
 * the k best (*id: its id); *margin (may be NULL): distance of u from the nearest boundary of the drawn
 * interval, in units of u (a GPU's exp may differ from expf by a few ulp: only draws with a margin above
 * ~1e-5 must agree exactly). */
uint32_t lw__gpu_sample_ref(const uint32_t *ids, const float *values, uint32_t n,
                            const lw__gpu_sample_params *p, uint32_t *id, double *margin);
/* Its two halves: the k best of n pairs, best first (top_ids/top_values: k entries; (-inf, 0xffffffff) when
 * fewer than k are left), and the draw's index among k sorted candidate values cv (margin as above). */
void lw__gpu_sample_ref_topk(const uint32_t *ids, const float *values, uint32_t n, uint32_t k,
                             uint32_t *top_ids, float *top_values);
uint32_t lw__gpu_sample_ref_draw(const float *cv, uint32_t k, const lw__gpu_sample_params *p, double *margin);

#endif
