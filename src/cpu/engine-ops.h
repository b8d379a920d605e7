/* CPU execution of an engine graph (src/graph/graph.h): the scalar reference kernels of every op, with
 * numerics chosen to follow ggml-cpu (v0.4.0) as llama.cpp runs it, and the row-parallel driver. */
#ifndef LW_ENGINE_OPS_H
#define LW_ENGINE_OPS_H

#include "cpu/engine-threads.h"
#include "cpu/quant-gemm.h"
#include "cpu/quant-gemv.h"
#include "graph/graph.h"

/* ---------------------------------------------------------------------------------------------------------
 * Matrix-vector dot products per weight type. Like ggml, a weight type names the type its activations are
 * converted to before the dot ("vec_dot_type"): f32 weights use f32 activations, f16 weights use f16
 * activations (rounded: this is what llama.cpp does and it is visible in the logits). Quantized types add
 * an entry here (from_float quantizes the activation row, dot takes a weight row and a converted row).
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__cpu_mm {
    uint32_t vec_dot_type;                                      /* type activations are converted to        */
    void (*from_float)(const float *x, void *y, int64_t n);     /* NULL when vec_dot_type is f32            */
    float (*dot)(int64_t n, const void *w, const void *a);      /* one weight row . one converted row       */
    float (*dot_gemm)(int64_t n, const void *w, const void *a); /* the same in ggml's batched order, for
                                                                   steps of 2+ tokens, n % 16 == 0; or NULL */
    /* c[t * c_stride + r] = dot_gemm(w row r, a row t) for r < m, t < nt: the batched product, blocked
     * for registers and cache (NULL: mul_mat loops over dot_gemm). Strides in bytes except c's (floats). */
    void (*gemm)(int64_t k, const void *w, size_t w_stride, int64_t m, const void *a, size_t a_stride,
                 int64_t nt, float *c, size_t c_stride);
    /* llama.cpp on x86 repacks some quantized types (weights with a multiple of 8 rows, not the tied
     * embedding table) and multiplies them with other kernels: their order for one token (gemv) and for
     * groups of 4 tokens (gemm; NULL: the same as gemv). NULL when the type is not repacked. */
    float (*dot_repack)(int64_t n, const void *w, const void *a);
    float (*dot_repack_gemm)(int64_t n, const void *w, const void *a);
    /* tiled kernels (cpu/quant-gemm.h) giving the bits of dot (plain weights) and of the repacked gemm order
     * (dot_repack_gemm, or dot_repack when that is NULL) for many tokens at once; NULL where none */
    lw__quant_gemm_fn qgemm;
    lw__quant_gemm_fn qgemm_repack;
    /* the tiled kernel with dot_repack's bits for many tokens (llama.cpp's repacked MUL_MAT_ID runs its gemv
     * on every row, whatever the step), or NULL */
    lw__quant_gemm_fn qgemm_repack_gemv;
    /* decode (steps of fewer than LW_QGEMM_MIN_TOKENS tokens) in the kernels' own summation order
     * (cpu/quant-gemv.h), plain and repacked weights alike; NULL: the exact orders above (the format has
     * none, or LW_CPU_KERNELS asks for exact orders) */
    lw__quant_gemv_fn gemv;
} lw__cpu_mm;

/* Whether llama.cpp repacks a weight of this type with `rows` rows (per expert for MUL_MAT_ID) on x86:
 * the type has a repacked order and rows is a multiple of 8. The tied embedding table never is. */
static inline int lw__cpu_mm_repacked(const lw__cpu_mm *mm, int64_t rows) {
    return mm->dot_repack && rows % 8 == 0;
}

/* The entry for a weight type (with the fastest kernels), or NULL when this build cannot multiply by it. */
const lw__cpu_mm *lw__cpu_mm_get(uint32_t type);
/* Whether a tensor of this type can be an embedding table (row lookup with dequantization). */
int lw__cpu_get_rows_supported(uint32_t type);

/* The sin/cos table of ROPE node nd at position pos, as ggml_rope_cache_init and rope_yarn build it:
 * cache[2i], cache[2i + 1] = cos, sin of pair i's angle times mscale, for pairs i < n_pairs; ff: the node's
 * frequency factors (n_rot / 2 floats) or NULL. The CPU op and the WebGPU plan (which uploads it for the
 * step's positions: shaders/rope-common.wgsl) both use it, so their angles have the same bits. */
void lw__rope_cache(const lw__node *nd, const float *ff, int64_t pos, int64_t n_pairs, float *cache);

/* GELU of an f16 value as ggml's ggml_table_gelu_f16 holds it (also used by tests). */
float lw__cpu_gelu_f16(uint16_t h);

/* Reference dot products (also used by tests); the _gemm ones need n % 16 == 0. */
float lw__cpu_dot_f32(int64_t n, const void *w, const void *a);
float lw__cpu_dot_f16(int64_t n, const void *w, const void *a);
float lw__cpu_dot_f32_gemm(int64_t n, const void *w, const void *a);
float lw__cpu_dot_f16_gemm(int64_t n, const void *w, const void *a);

/* ---------------------------------------------------------------------------------------------------------
 * Named kernels with faster versions per instruction set. Every version gives the scalar reference's bits
 * (the references add in SIMD lane order), so picking one never changes results.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__cpu_kernels {
    const char *name;                                               /* "scalar", "avx512"          */
    float (*dot_f32)(int64_t n, const void *w, const void *a);      /* ggml vec_dot order          */
    float (*dot_f32_gemm)(int64_t n, const void *w, const void *a); /* tinyBLAS order, n % 16 == 0 */
    float (*dot_f16)(int64_t n, const void *w, const void *a);
    float (*dot_f16_gemm)(int64_t n, const void *w, const void *a);
    void (*f32_to_f16)(const float *x, void *y, int64_t n); /* round to nearest even       */
    void (*f16_to_f32)(const void *x, float *y, int64_t n);
    void (*scale_f16)(uint16_t *y, float v, int64_t n);                  /* y = f16(y * v)              */
    void (*mad_f16)(uint16_t *y, const uint16_t *x, float v, int64_t n); /* y = f16(fma(x, v, y))     */
    /* blocked dot_*_gemm over many rows and tokens (see lw__cpu_mm.gemm); NULL when not faster */
    void (*gemm_f32)(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,
                     float *c, size_t cs);
    void (*gemm_f16)(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as, int64_t nt,
                     float *c, size_t cs);
    /* tiled flash attention, 64 cells at a time: scores (Kt is D x 64), ggml_v_expf softmax (returns the
     * sum), and the V accumulation over the first m cells (V is m x D) */
    void (*fa_kq)(int64_t D, const float *Kt, const float *q, float *kq);
    double (*fa_softmax)(float *kq, float M);
    void (*fa_vacc)(int64_t D, int64_t m, const float *V, const float *kq, float *vkq);
    /* SwiGLU's blocks of 16: z = x / (1 + ggml_v_expf(-x)) * g for n a multiple of 16 */
    void (*swiglu16)(float *z, const float *x, const float *g, int64_t n);
} lw__cpu_kernels;

/* The scalar references. */
const lw__cpu_kernels *lw__cpu_kernels_ref(void);
/* The fastest set this CPU runs (LW_CPU_KERNELS=scalar forces the references, =avx2 the AVX2 set). */
const lw__cpu_kernels *lw__cpu_kernels_best(void);
/* The best x86 set this CPU has (AVX-512, else AVX2), or NULL (engine-x86.c); the AVX2 set alone. */
const lw__cpu_kernels *lw__cpu_kernels_x86(void);
const lw__cpu_kernels *lw__cpu_kernels_x86_avx2(void);
/* The wasm simd128 set (engine-wasm.c), or NULL outside a -msimd128 wasm build. */
const lw__cpu_kernels *lw__cpu_kernels_wasm(void);

/* ---------------------------------------------------------------------------------------------------------
 * Running a graph
 * ------------------------------------------------------------------------------------------------------- */

/* Everything a step needs besides the graph: the batch, the KV cache, scratch memory and the threads. */
typedef struct lw__exec {
    const lw__graph *g;          /* planned and bound graph                                              */
    const lw__cpu_kernels *kern; /* kernel set (lw__cpu_kernels_best)                                 */
    lw__pool *pool;              /* threads (1 thread: no workers)                                       */
    int32_t n_tokens;            /* rows this step (<= the planned maximum)                              */
    int32_t n_outputs;           /* output rows this step                                                */
    const int32_t *tokens;       /* n_tokens token ids                                                   */
    const int32_t *out_rows;     /* n_outputs row indices (ascending) that produce outputs               */
    int32_t pos0;                /* position of the first token = cache cells already filled            */
    int32_t flash_attn;          /* 1: ggml's flash attention (llama.cpp's CPU default); 0: its KQ,
                                    softmax, KQV path (llama.cpp with flash attention off)               */
    int64_t n_ctx;               /* cache cells (the classic path pads rows as llama.cpp's KV view)      */
    uint32_t kv_type;            /* LW_TYPE_F16, LW_TYPE_F32, LW_TYPE_Q8_0 or LW_TYPE_Q4_0 (flash only)  */
    int64_t kv_row;              /* elements per cache row (KV heads x head dim)                         */
    const int64_t *kv_rows;      /* per layer: that layer's cache row when the blocks' geometries differ
                                    (gemma4: sliding and global heads of other sizes), or NULL: kv_row   */
    void *const *k;              /* per layer: K cache, cell p at k[l] + p * kv_row elements             */
    void *const *v;              /* per layer: V cache, same layout (not transposed, as flash attention) */
    uint8_t *scratch;            /* shared: activations converted for a matmul                           */
    float *thread_scratch;       /* per thread: thread_floats floats each                                */
    size_t thread_floats;        /* floats of thread scratch per thread                                  */
    const void *rows_table[2];   /* get_rows weights served by the row store (token_embd, gemma4's
                                    per_layer_token_embd: their data pointers, markers never read), or NULL */
    const uint8_t *rows_stage[2]; /* their rows for this step, gathered from the row caches: token r's row
                                    at r * row_bytes (the tables' rows are not in memory)                */
    const uint8_t *exp_marker;    /* MoE experts served by the row store: a MUL_MAT_ID weight whose data is
                                     exp_marker + i reads its experts through exp_caches[i]; NULL: none   */
    uint32_t exp_n;               /* markers (and caches) from exp_marker                                 */
    struct lw__rowcache *const *exp_caches; /* exp_n caches (rows/rows.h; NULL entries: resident)      */
    lw_status *rows_error; /* a failed expert lookup's status (set on thread 0, read by the caller
                              after the step: the step's outputs are then not valid)               */
    char *rows_error_msg;  /* its message (LW_ERRMSG_SIZE bytes)                                   */
    /* optional observer, called on thread 0 after each node with an output (see lw_eval_fn) */
    void (*on_node)(void *user, const char *name, int32_t layer, const float *data, int64_t ne0,
                    int64_t rows);
    void *on_node_user; /* its argument                                                         */
} lw__exec;

/* ---------------------------------------------------------------------------------------------------------
 * Helpers shared by the op files (engine-ops.c, engine-moe.c)
 * ------------------------------------------------------------------------------------------------------- */

/* Rows of a tensor in this step (weights: all of them). */
static inline int64_t lw__cpu_rows(const lw__exec *ex, const lw__tensor *t) {
    if (t->kind == LW_T_WEIGHT) return t->ne1;
    return t->rows == LW_ROWS_OUTPUTS ? ex->n_outputs : ex->n_tokens;
}

/* Contiguous share [*r0, *r1) of n items for thread ith of nth. */
static inline void lw__cpu_split(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t per = (n + nth - 1) / nth;
    *r0 = per * ith < n ? per * ith : n;
    *r1 = *r0 + per < n ? *r0 + per : n;
}

/* Elements of one cache row of layer l. */
static inline int64_t lw__cpu_kv_row(const lw__exec *ex, int32_t l) {
    return ex->kv_rows ? ex->kv_rows[l] : ex->kv_row;
}

/* Row r of a tensor (any element type). */
static inline void *lw__cpu_row(const lw__tensor *t, int64_t r) {
    return (uint8_t *)t->data + (size_t)r * t->row_bytes;
}

/* Bytes of one row of n elements of type (n a whole number of blocks; checked when tensors are made). */
size_t lw__cpu_row_size(uint32_t type, int64_t n);

/* ggml_vec_soft_max_f32 as its AVX-512 build runs it: y[i] = exp(x[i] - max) (ggml_v_expf on blocks of 16,
 * expf on the tail); returns their sum, the blocks' lane sums added in double. y may be x. */
double lw__cpu_softmax_exp(float *y, const float *x, int64_t n, float max);

/* Fewest tokens for which the tiled kernels beat row-by-row dots (they rebuild each weight panel per call).
 */
#define LW_QGEMM_MIN_TOKENS 2

/* Bytes of shared scratch and floats of per-thread scratch a graph needs for steps of up to max_tokens. */
lw_status lw__cpu_scratch_needs(const lw__graph *g, int64_t max_tokens, int64_t n_ctx, size_t *shared_bytes,
                                size_t *thread_floats);
/* Runs every node of ex->g on ex->pool. Allocates nothing. */
void lw__cpu_exec(lw__exec *ex);

#endif
