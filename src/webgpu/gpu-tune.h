/* Tunables of the weight kernels (mat-vec: workgroup size, rows per workgroup, whole blocks; mat-mat: tile
 * sizes and register blocks; both: f16 arithmetic, subgroups): measured defaults, and run-time overrides
 * held in a plain struct (no global state: the engine keeps one per device and passes it down).
 *
 * Overrides come from per-key setters ("matvec.q4_0.wg" = 128, "matmat.*.tn" = 32) or from a JSON string of
 * the same keys, which is what `node web/tune.mjs` prints for the device it ran on:
 *     {"matvec": {"q4_0": {"wg": 128, "rows": 4, "blocks": 1}, "*": {"sg": 0}},
 *      "matmat": {"q8_0": {"tm": 64, "tn": 32, "tk": 32, "rm": 4, "rn": 4, "f16": 1}}}
 * Format names are ggml's (lw_type_get(type)->name, any case); "*" applies to every format, and a format's
 * own entry wins over "*". A variant is assembled as: measured default -> "*" -> the format's entry, then
 * fitted to the device (f16 / subgroups only where offered; workgroups within the device's limits). */
#ifndef LW_GPU_TUNE_H
#define LW_GPU_TUNE_H

#include "webgpu/kernels-attn.h"
#include "webgpu/kernels-matmat.h"
#include "webgpu/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* Mat-vec keys, in the order of lw__gpu_tune.matvec's second index. */
enum {
    LW_GPU_TUNE_MV_WG,     /* "wg": invocations per workgroup (a power of two, 1..1024) */
    LW_GPU_TUNE_MV_ROWS,   /* "rows": rows per workgroup (1..16)                        */
    LW_GPU_TUNE_MV_BLOCKS, /* "blocks": 1 = an invocation takes whole blocks            */
    LW_GPU_TUNE_MV_F16,    /* "f16": 0 = f32 arithmetic even where shader-f16 exists    */
    LW_GPU_TUNE_MV_SG,     /* "sg": 0 = workgroup-memory reduction even with subgroups  */
    LW_GPU_TUNE_MV_STAGE,  /* "stage": words per row of a staged weight tile (0: off)   */
    LW_GPU_TUNE_MV_EXACT,  /* "exact": 1 = the CPU engine's bits where the format has an
                              exact kernel (lw__gpu_matvec_has_exact), 0 = float sums  */
    LW_GPU_TUNE_MV_IDOT,   /* "idot": 1 = integer products over x quantized once per step
                              (matvec-q8.wgsl) where the format and device have them     */
    LW_GPU_TUNE_MV_OCT,    /* "oct": 1 = Q4_0 / Q8_0 integer products eight blocks a step
                              in 16-byte loads (rows of a multiple of 256), 0 = pairs    */
    LW_GPU_TUNE_MV_NORM,   /* "norm": 0 = the RMS norm before a Q4_0 / Q8_0 integer mat-vec
                              of a one-token step keeps its own dispatch (1: in the mat-vec's
                              prologue, matvec-q8-norm.wgsl)                              */
    LW_GPU_TUNE_MV_GLU,    /* "glu": 1 = a gate|up mat-vec with its norm in the prologue also
                              rounds SwiGLU for the down projection, 0 = the quantizer does
                              (default: rows of at most 2048, longer ones where the GPU
                              takes 512 x 4; Q4_K / Q5_K only when set: lw__gpu_matvec_glu_tuned) */
    LW_GPU_TUNE_MV_ROPE,   /* "rope": 1 = a Q|K|V mat-vec with its norm in the prologue also
                              does rope_qkv's writes (RoPE, KV store) as its epilogue, 0 =
                              rope_qkv keeps its dispatch                                 */
    LW_GPU_TUNE_MV_NWG,    /* "nwg": invocations of a mat-vec with its norm in the prologue
                              (32..1024, 0: its default; the GLU one 256..1024)           */
    LW_GPU_TUNE_MV_NROWS,  /* "nrows": its rows per row group of 32 lanes (1..8, 0: default) */
    LW_GPU_TUNE_MV_NPRE,   /* "npre": 0 = its first weights are not loaded before the prologue */
    LW_GPU_TUNE_MV_QNWG,   /* "qnwg", "qnrows": nwg / nrows for the Q|K|V one alone (with its
                              RoPE epilogue; nrows odd gives the epilogue up); 0: as the others */
    LW_GPU_TUNE_MV_QNROWS,
    LW_GPU_TUNE_MV_NGRID,  /* "ngrid", "qngrid": at most this many workgroups for a mat-vec with
                              its norm in the prologue (the gate|up / plain one; the Q|K|V one),
                              each looping over its rows' tiles after one prologue (0: a
                              workgroup per tile)                                            */
    LW_GPU_TUNE_MV_QNGRID,
    LW_GPU_TUNE_MV_KEYS
};
/* Mat-mat keys, in the order of lw__gpu_tune.matmat's second index. */
enum {
    LW_GPU_TUNE_MM_TM,   /* "tm": rows per tile (1..256)                     */
    LW_GPU_TUNE_MM_TN,   /* "tn": tokens per tile (1..256)                   */
    LW_GPU_TUNE_MM_TK,   /* "tk": K per step, a multiple of 8 (8..256)       */
    LW_GPU_TUNE_MM_RM,   /* "rm": rows per invocation (1..16)                */
    LW_GPU_TUNE_MM_RN,   /* "rn": tokens per invocation (1..16)              */
    LW_GPU_TUNE_MM_F16,  /* "f16": 0 = f32 arithmetic even with shader-f16   */
    LW_GPU_TUNE_MM_IDOT, /* "idot": 1 = integer products (matmat-q8.wgsl)  */
    LW_GPU_TUNE_MM_SMX,  /* "smx": 1 = the matrix units (matmat-smx.wgsl)  */
    LW_GPU_TUNE_MM_PAD,  /* "pad": smx: words after each tile row (0..16,
                            a multiple of 4; 4: a fragment load's rows on
                            distinct banks)                                */
    LW_GPU_TUNE_MM_KEYS
};

/* Attention keys ("attn.<cache type: f16, f32 or *>.<key>"), the prefill kernel's tiles and the decode
 * kernel's split and fold switches, in the order of lw__gpu_tune.attn's second index. */
enum {
    LW_GPU_TUNE_AT_PWG,    /* "pwg": invocations per workgroup (a power of two)           */
    LW_GPU_TUNE_AT_BQ,     /* "bq": rows ((token, head) pairs) per tile, divides pwg      */
    LW_GPU_TUNE_AT_BK,     /* "bk": cells per K/V tile, a multiple of 4                   */
    LW_GPU_TUNE_AT_RQ,     /* "rq": rows per invocation's register block, divides bq      */
    LW_GPU_TUNE_AT_RK,     /* "rk": cells per invocation's block of scores, divides bk    */
    LW_GPU_TUNE_AT_ONE,    /* "one": decode spans of at most this many cells in one split
                              (no reduce; 0: the splits policy alone)                       */
    LW_GPU_TUNE_AT_ROPE,   /* "rope": 1 = one-token steps do RoPE + KV store in the decode
                              kernel's prologue instead of rope_qkv's own dispatch          */
    LW_GPU_TUNE_AT_SPLITS, /* "splits": decode splits aimed for (0: chunk-sized ones)     */
    LW_GPU_TUNE_AT_MCHUNK, /* "mchunk": fewest cells of a split when aiming for them      */
    LW_GPU_TUNE_AT_VB,     /* "vb": V cells loaded at a time per invocation (0: 8)        */
    LW_GPU_TUNE_AT_KB,     /* "kb": K quads loaded at a time per invocation (0: by head dim,
                              up to 16); must divide the head's quads                       */
    LW_GPU_TUNE_AT_WG,     /* "wg": decode invocations per workgroup (a power of two)     */
    LW_GPU_TUNE_AT_CHUNK,  /* "chunk": decode's most cells per workgroup (sizes its memory) */
    LW_GPU_TUNE_AT_KEYS
};
#define LW_GPU_TUNE_FAMILIES 3 /* matvec, matmat, attn */

#define LW_GPU_TUNE_ANY   LW_TYPE_COUNT /* index of the "*" entry (every format)       */
#define LW_GPU_TUNE_UNSET (-1)          /* a key not overridden                        */

/* Overrides per family, format (lw_type id, or LW_GPU_TUNE_ANY) and key; LW_GPU_TUNE_UNSET = not set. */
typedef struct lw__gpu_tune {
    int32_t matvec[LW_TYPE_COUNT + 1][LW_GPU_TUNE_MV_KEYS]; /* mat-vec overrides */
    int32_t matmat[LW_TYPE_COUNT + 1][LW_GPU_TUNE_MM_KEYS]; /* mat-mat overrides */
    int32_t attn[LW_TYPE_COUNT + 1][LW_GPU_TUNE_AT_KEYS];   /* attention overrides (by cache type) */
} lw__gpu_tune;

/* No overrides. */
void lw__gpu_tune_init(lw__gpu_tune *t);

/* Sets one key "family.format.key" (family matvec or matmat, format a ggml type name or "*") to value.
 * LW_ERR_INVALID_ARG with a message for an unknown family/format/key or a value out of the key's range
 * (the device's own limits are applied later, when a variant is assembled). */
lw_status lw__gpu_tune_set(lw__gpu_tune *t, const char *key, int64_t value, char *err);

/* The override of key, or LW_GPU_TUNE_UNSET (also for an unknown key). */
int32_t lw__gpu_tune_get(const lw__gpu_tune *t, const char *key);

/* Applies every key of a JSON object {"matvec": {"<format>": {"<key>": int, ...}, ...}, "matmat": ...}
 * (len bytes of json). All or nothing: on an error (syntax, unknown key, range) t is unchanged and err
 * says where. */
lw_status lw__gpu_tune_json(lw__gpu_tune *t, const char *json, size_t len, char *err);

/* Writes the overrides that are set as JSON (the form lw__gpu_tune_json reads) into dst (cap bytes, NUL
 * included). Returns the length, or -1 when cap is too small. */
int lw__gpu_tune_to_json(const lw__gpu_tune *t, char *dst, size_t cap);

/* Whether the adapter runs on the CPU (llvmpipe, SwiftShader: its names say so): some defaults differ. */
bool lw__gpu_cpu_adapter(const lw_gpu_info *i);

/* The mat-vec variant for type on this device: measured default, overridden by t (may be NULL), fitted to
 * the device. lw__gpu_matvec_default(info, type) is this with t = NULL. */
lw__gpu_matvec_variant lw__gpu_matvec_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t type);

/* Whether tune key "norm" lets the runner put the RMS norm before a one-token mat-vec of type in its prologue
 * (default 1; lw__gpu_matvec_norm_* of kernels.h). */
bool lw__gpu_matvec_norm_tuned(const lw__gpu_tune *t, uint32_t type);
/* Whether such a gate|up mat-vec of type over rows of k elements also rounds SwiGLU for the down projection:
 * tune key "glu" (0 / 1), by default for k <= 2048 and where lw__gpu_matvec_norm_glu_wide (gpu-tune.c). */
bool lw__gpu_matvec_glu_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t type, uint64_t k);
/* Applies tune keys "nwg", "nrows", "npre" for type to the norm mat-vec variant v (the GLU one: "nwg" of 256
 * to 1024 only, its rows 2048 / nwg: 64 a workgroup); for a Q|K|V projection (qkv) "qnwg" / "qnrows" where
 * set. */
void lw__gpu_matvec_norm_tune(const lw__gpu_tune *t, uint32_t type, bool qkv, lw__gpu_matvec_norm_variant *v);
/* Whether tune key "rope" (default 1) lets such a Q|K|V mat-vec of type do the RoPE and the KV store. */
bool lw__gpu_matvec_rope_tuned(const lw__gpu_tune *t, uint32_t type);

/* A mat-vec variant fitted to rows of k elements on this device (the integer kernels of Q4_0 / Q8_0 in block
 * pairs, Q4_K and Q6_K: their invocations per workgroup and rows by row length), unless t sets "wg" or
 * "rows". */
void lw__gpu_matvec_shape(const lw__gpu_tune *t, const lw_gpu_info *info, lw__gpu_matvec_variant *v,
                          uint64_t k);

/* The mat-mat variant for type on this device, likewise (lw__gpu_matmat_default = t NULL). */
lw__gpu_matmat_variant lw__gpu_matmat_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t type);

/* The prefill attention variant for a model shape on this device: lw__gpu_attn_default, then the "attn"
 * keys of t (may be NULL) for the cache type (kv_type's entry, else "*"), taken as given (the pipeline
 * refuses a tile that does not suit the device, with the reason). */
lw__gpu_attn_variant lw__gpu_attn_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t kv_type,
                                        uint32_t head_dim, uint32_t group);

/* Whether one-token steps do their RoPE + KV store in the decode kernel's prologue (key "rope", default off:
 * slower on the H200, see gpu-tune.c; the runner still needs the matching graph shape). */
bool lw__gpu_attn_rope_tuned(const lw__gpu_tune *t, uint32_t kv_type);

#endif
