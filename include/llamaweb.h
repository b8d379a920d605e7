/*
 * llamaweb — a C11 inference engine for GGUF language models (WebGPU through WebAssembly, and CPU).
 *
 * Public API. Every handle is opaque. Every function that can fail returns an lw_status and, where an
 * object exists, keeps a human-readable message on that object (lw_*_error()); there is no global error
 * state. Every allocation goes through an lw_allocator (NULL means the C library's malloc family).
 */
#ifndef LLAMAWEB_H
#define LLAMAWEB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LW_VERSION_MAJOR 0
#define LW_VERSION_MINOR 1
#define LW_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------------------------
 * Status codes
 * ---------------------------------------------------------------------------------------------------- */

typedef enum lw_status {
    LW_OK = 0,
    LW_ERR_INVALID_ARG,     /* a NULL or out-of-range argument from the caller                        */
    LW_ERR_NOMEM,           /* the allocator returned NULL                                            */
    LW_ERR_IO,              /* the operating system or host failed a read/write                       */
    LW_ERR_TRUNCATED,       /* the data ends before a structure it announces                          */
    LW_ERR_BAD_MAGIC,       /* not a GGUF file                                                        */
    LW_ERR_BAD_VERSION,     /* a GGUF version we do not read (only 2 and 3)                           */
    LW_ERR_BAD_VALUE_TYPE,  /* a metadata value type id that does not exist                           */
    LW_ERR_TOO_LARGE,       /* a count or length beyond what the file can hold or our limits          */
    LW_ERR_OVERFLOW,        /* a size product overflows 64 bits                                       */
    LW_ERR_BAD_STRING,      /* a string that is not acceptable (too long a tensor name, empty key)    */
    LW_ERR_DUPLICATE_KEY,   /* the same metadata key twice                                            */
    LW_ERR_DUPLICATE_NAME,  /* the same tensor name twice                                             */
    LW_ERR_BAD_DIMS,        /* n_dims outside 1..4, a negative dimension, or a row not whole blocks   */
    LW_ERR_BAD_TENSOR_TYPE, /* a ggml type id that does not exist or is no longer supported           */
    LW_ERR_BAD_ALIGNMENT,   /* general.alignment not a power of two, or tensor data misaligned        */
    LW_ERR_OVERLAP,         /* two tensors' data ranges overlap                                       */
    LW_ERR_OUT_OF_FILE,     /* a tensor's data lies (partly) past the end of the file                 */
    LW_ERR_NOT_FOUND,       /* no such key / tensor                                                   */
    LW_ERR_TYPE_MISMATCH,   /* the key exists with a type the getter cannot convert losslessly        */
    LW_ERR_UNSUPPORTED,     /* valid input this build does not handle                                 */
    LW_STATUS_COUNT
} lw_status;

/* A short constant description of a status, e.g. "truncated". Never NULL. */
const char *lw_status_str(lw_status s);

/* ------------------------------------------------------------------------------------------------------
 * Allocator hooks. All three functions or none (stb's rule). realloc(NULL, n) must act as malloc.
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_allocator {
    void *(*malloc)(void *user, size_t size);             /* returns NULL on failure          */
    void *(*realloc)(void *user, void *ptr, size_t size); /* returns NULL on failure, keeps ptr */
    void (*free)(void *user, void *ptr);                  /* ptr may be NULL                  */
    void *user;                                           /* passed to every call             */
} lw_allocator;

/* ------------------------------------------------------------------------------------------------------
 * Byte sources: everything reads model files by (offset, size) through this interface, never by mmap, so
 * the same code serves a native file, a memory buffer, and reads answered by JavaScript in the browser
 * (OPFS, File, fetch). Offsets are 64-bit everywhere: files over 4 GB work on every host.
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_source lw_source;

/* Host read callback: fill dst with exactly n bytes at offset; return LW_OK or an error status. */
typedef lw_status (*lw_source_read_fn)(void *user, uint64_t offset, void *dst, size_t n);
/* Optional host close callback, called once by lw_source_close. */
typedef void (*lw_source_close_fn)(void *user);

/* Opens a file for positioned reads. On failure *out is NULL and, if err is not NULL, a message is written
 * to err (at most err_size bytes, NUL-terminated). */
lw_status lw_source_open_file(const char *path, const lw_allocator *alloc, lw_source **out, char *err,
                              size_t err_size);
/* Wraps a caller-owned buffer (not copied; must outlive the source). */
lw_status lw_source_from_memory(const void *data, size_t size, const lw_allocator *alloc, lw_source **out);
/* Wraps host callbacks; size is the total byte count the host serves. */
lw_status lw_source_from_callbacks(uint64_t size, lw_source_read_fn read, lw_source_close_fn close,
                                   void *user, const lw_allocator *alloc, lw_source **out);

uint64_t lw_source_size(const lw_source *src);
/* Reads exactly n bytes at offset; LW_ERR_TRUNCATED when the range passes the end of the source. */
lw_status lw_source_read(lw_source *src, uint64_t offset, void *dst, size_t n);
/* Message for the last failed call on this source ("" when none). */
const char *lw_source_error(const lw_source *src);
void lw_source_close(lw_source *src);

/* ------------------------------------------------------------------------------------------------------
 * ggml tensor types (ids as in GGUF files). The table knows every id GGUF files use, even those whose
 * kernels come later; ids that ggml removed are rejected as LW_ERR_BAD_TENSOR_TYPE.
 * ---------------------------------------------------------------------------------------------------- */

typedef enum lw_type {
    LW_TYPE_F32 = 0,
    LW_TYPE_F16 = 1,
    LW_TYPE_Q4_0 = 2,
    LW_TYPE_Q4_1 = 3,
    LW_TYPE_Q5_0 = 6,
    LW_TYPE_Q5_1 = 7,
    LW_TYPE_Q8_0 = 8,
    LW_TYPE_Q8_1 = 9,
    LW_TYPE_Q2_K = 10,
    LW_TYPE_Q3_K = 11,
    LW_TYPE_Q4_K = 12,
    LW_TYPE_Q5_K = 13,
    LW_TYPE_Q6_K = 14,
    LW_TYPE_Q8_K = 15,
    LW_TYPE_IQ2_XXS = 16,
    LW_TYPE_IQ2_XS = 17,
    LW_TYPE_IQ3_XXS = 18,
    LW_TYPE_IQ1_S = 19,
    LW_TYPE_IQ4_NL = 20,
    LW_TYPE_IQ3_S = 21,
    LW_TYPE_IQ2_S = 22,
    LW_TYPE_IQ4_XS = 23,
    LW_TYPE_I8 = 24,
    LW_TYPE_I16 = 25,
    LW_TYPE_I32 = 26,
    LW_TYPE_I64 = 27,
    LW_TYPE_F64 = 28,
    LW_TYPE_IQ1_M = 29,
    LW_TYPE_BF16 = 30,
    LW_TYPE_TQ1_0 = 34,
    LW_TYPE_TQ2_0 = 35,
    LW_TYPE_MXFP4 = 39,
    LW_TYPE_NVFP4 = 40,
    LW_TYPE_Q1_0 = 41,
    LW_TYPE_Q2_0 = 42,
    LW_TYPE_COUNT = 43 /* one past the largest id; not every id below it is valid */
} lw_type;

/* Properties of a type id; returns NULL for ids that are not valid tensor types. */
typedef struct lw_type_info {
    const char *name;       /* ggml's name, e.g. "q4_K"                           */
    uint32_t block_size;    /* elements per block (1 for plain types)             */
    uint32_t type_size;     /* bytes per block                                    */
    int is_quantized;       /* 1 for block-quantized formats                      */
} lw_type_info;
const lw_type_info *lw_type_get(uint32_t type);

/* ------------------------------------------------------------------------------------------------------
 * GGUF files: reader (versions 2 and 3) and writer.
 * ---------------------------------------------------------------------------------------------------- */

typedef enum lw_gguf_type {
    LW_GGUF_UINT8 = 0,
    LW_GGUF_INT8 = 1,
    LW_GGUF_UINT16 = 2,
    LW_GGUF_INT16 = 3,
    LW_GGUF_UINT32 = 4,
    LW_GGUF_INT32 = 5,
    LW_GGUF_FLOAT32 = 6,
    LW_GGUF_BOOL = 7,
    LW_GGUF_STRING = 8,
    LW_GGUF_ARRAY = 9,
    LW_GGUF_UINT64 = 10,
    LW_GGUF_INT64 = 11,
    LW_GGUF_FLOAT64 = 12,
    LW_GGUF_TYPE_COUNT
} lw_gguf_type;

/* Name of a metadata value type ("u32", "str", "arr", ...); "?" for invalid ids. */
const char *lw_gguf_type_name(lw_gguf_type t);

/* A string as stored in the file: may contain NUL bytes; s[len] is always NUL. */
typedef struct lw_gguf_str {
    uint64_t len;  /* bytes, without the terminating NUL */
    const char *s; /* owned by the lw_gguf object        */
} lw_gguf_str;

/* A metadata value. Arrays keep their elements packed in native form: numbers as a C array of the element
 * type (uint8_t, int16_t, float, double, ...; bool as uint8_t), strings as lw_gguf_str[], nested arrays as
 * lw_gguf_value[] (each of type LW_GGUF_ARRAY). */
typedef struct lw_gguf_value {
    lw_gguf_type type; /* which member of v is valid */
    union {
        uint64_t u64;    /* UINT8/16/32/64 and BOOL  */
        int64_t i64;     /* INT8/16/32/64            */
        double f64;      /* FLOAT32 and FLOAT64      */
        lw_gguf_str str; /* STRING                   */
        struct {
            lw_gguf_type type; /* element type          */
            uint64_t n;        /* element count         */
            const void *data;  /* packed elements       */
        } arr;                 /* ARRAY                 */
    } v;
} lw_gguf_value;

/* One tensor's description. */
typedef struct lw_gguf_tensor {
    const char *name;     /* NUL-terminated, < 64 bytes                                    */
    uint32_t type;        /* lw_type id                                                    */
    uint32_t n_dims;      /* 1..4                                                          */
    int64_t ne[4];        /* elements per dimension, ne[0] innermost; unused dims are 1    */
    uint64_t offset;      /* offset of the data relative to the start of the data section */
    uint64_t file_offset; /* absolute offset in the file                                   */
    uint64_t n_bytes;     /* size of the data                                              */
    uint64_t n_elements;  /* ne[0]*ne[1]*ne[2]*ne[3]                                       */
} lw_gguf_tensor;

typedef struct lw_gguf lw_gguf;

/* Parses a GGUF header from src (the source stays owned by the caller and must outlive the object).
 * Like sqlite3_open, *out is set even when parsing fails (unless memory ran out), so the caller can read
 * lw_gguf_error(*out); close it either way. */
lw_status lw_gguf_open(lw_source *src, const lw_allocator *alloc, lw_gguf **out);
void lw_gguf_close(lw_gguf *g);
const char *lw_gguf_error(const lw_gguf *g);

uint32_t lw_gguf_version(const lw_gguf *g);
uint64_t lw_gguf_alignment(const lw_gguf *g);
uint64_t lw_gguf_data_offset(const lw_gguf *g); /* absolute file offset of the tensor data section */

/* Metadata by index and by key. lw_gguf_find_key returns -1 when absent. */
int64_t lw_gguf_n_kv(const lw_gguf *g);
int64_t lw_gguf_find_key(const lw_gguf *g, const char *key);
const char *lw_gguf_key(const lw_gguf *g, int64_t i);
const lw_gguf_value *lw_gguf_value_at(const lw_gguf *g, int64_t i);

/* Typed getters: LW_ERR_NOT_FOUND if the key is absent, LW_ERR_TYPE_MISMATCH if it cannot be converted
 * losslessly (integers of any width convert when the value fits; floats accept any number type). The
 * message is left on the object. */
lw_status lw_gguf_get_u64(lw_gguf *g, const char *key, uint64_t *out);
lw_status lw_gguf_get_u32(lw_gguf *g, const char *key, uint32_t *out);
lw_status lw_gguf_get_i64(lw_gguf *g, const char *key, int64_t *out);
lw_status lw_gguf_get_f64(lw_gguf *g, const char *key, double *out);
lw_status lw_gguf_get_f32(lw_gguf *g, const char *key, float *out);
lw_status lw_gguf_get_bool(lw_gguf *g, const char *key, int *out);
lw_status lw_gguf_get_str(lw_gguf *g, const char *key, const char **out); /* NUL-terminated */
/* Arrays: element type, count and packed data (see lw_gguf_value). */
lw_status lw_gguf_get_arr(lw_gguf *g, const char *key, lw_gguf_type *type, uint64_t *n, const void **data);

/* Tensors by index and by name. lw_gguf_find_tensor returns -1 when absent. */
int64_t lw_gguf_n_tensors(const lw_gguf *g);
int64_t lw_gguf_find_tensor(const lw_gguf *g, const char *name);
const lw_gguf_tensor *lw_gguf_tensor_at(const lw_gguf *g, int64_t i);

/* Reads n bytes at offset off within tensor i's data from the source. */
lw_status lw_gguf_read_tensor(lw_gguf *g, int64_t i, uint64_t off, void *dst, size_t n);

/* Writer: collect metadata and tensor descriptions, then write header and data in one pass. Tensor data
 * comes from a caller buffer or is produced by a callback in chunks (so multi-GB files need no big buffer).
 * Values are copied; data buffers passed to lw_gguf_writer_add_tensor must stay alive until write. */
typedef struct lw_gguf_writer lw_gguf_writer;

/* Produces n bytes of a tensor's data starting at offset off within the tensor. */
typedef lw_status (*lw_tensor_fill_fn)(void *user, uint64_t off, void *dst, size_t n);

lw_status lw_gguf_writer_new(const lw_allocator *alloc, lw_gguf_writer **out);
void lw_gguf_writer_free(lw_gguf_writer *w);
const char *lw_gguf_writer_error(const lw_gguf_writer *w);
/* Sets the alignment of tensor data (also written as general.alignment when not 32). */
lw_status lw_gguf_writer_set_alignment(lw_gguf_writer *w, uint32_t alignment);
/* Adds a key with any value, including nested arrays (deep copy). Duplicate keys are refused. */
lw_status lw_gguf_writer_set(lw_gguf_writer *w, const char *key, const lw_gguf_value *v);
lw_status lw_gguf_writer_set_u32(lw_gguf_writer *w, const char *key, uint32_t v);
lw_status lw_gguf_writer_set_i32(lw_gguf_writer *w, const char *key, int32_t v);
lw_status lw_gguf_writer_set_u64(lw_gguf_writer *w, const char *key, uint64_t v);
lw_status lw_gguf_writer_set_f32(lw_gguf_writer *w, const char *key, float v);
lw_status lw_gguf_writer_set_bool(lw_gguf_writer *w, const char *key, int v);
lw_status lw_gguf_writer_set_str(lw_gguf_writer *w, const char *key, const char *s);
lw_status lw_gguf_writer_set_arr(lw_gguf_writer *w, const char *key, lw_gguf_type type, uint64_t n,
                                 const void *data);
/* Adds a tensor; data may be NULL when fill is given. Shapes are validated as the reader would. */
lw_status lw_gguf_writer_add_tensor(lw_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                    const int64_t *ne, const void *data, lw_tensor_fill_fn fill, void *user);
/* Writes the file. sparse != 0 leaves runs of zero bytes in the data as holes where the OS allows it. */
lw_status lw_gguf_writer_write_file(lw_gguf_writer *w, const char *path, int sparse);

/* ------------------------------------------------------------------------------------------------------
 * Handles
 * Opaque objects of the engine; each is created by one function and freed by its paired one.
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_model lw_model;     /* weights + hyper-parameters + vocabulary (lw_model_load_*) */
typedef struct lw_context lw_context; /* KV cache + activations + threads (lw_context_create)     */
typedef struct lw_sampler lw_sampler; /* a sampler chain (lw_sampler_create)                      */
typedef struct lw_vocab lw_vocab;     /* a tokenizer (lw_model_vocab, lw_vocab_load)              */

/* ------------------------------------------------------------------------------------------------------
 * Models
 * The CPU inference engine API: load a GGUF model, create a context (KV cache + planned activations +
 * threads), decode batches of token ids, read logits. Every function returns lw_status and keeps a message
 * on its object.
 *
 * Architectures: llama (incl. Llama 3.1/3.2 RoPE frequency factors), qwen2, qwen3, phi3, gemma2 (soft-capped
 * scores and logits), gemma3; RoPE scaling none, linear or YaRN. Weights: f32, f16 and the quantized formats
 * with CPU dot products (src/cpu/quant-dot.h). Logits equal llama.cpp's (v0.4.0, AVX-512 build) to the bit
 * for the tested models; see tests/test-oracle-llama.c.
 *
 *     lw_model *m; lw_context *c;
 *     if (lw_model_load_file("stories260K.gguf", NULL, &m) != LW_OK) { puts(lw_model_error(m)); ... }
 *     lw_context_params cp = lw_context_default_params(); cp.n_ctx = 512;
 *     lw_context_create(m, &cp, &c);
 *     int32_t ids[] = {1, 403, 407, 261, 378};
 *     lw_decode(c, ids, 5, 0);                    // appends at position lw_context_n_past(c)
 *     const float *logits = lw_get_logits(c, -1); // n_vocab floats for the last token
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_model_params {
    const lw_allocator *alloc; /* NULL: the C library's malloc family                                       */
    int no_weights;            /* 1: parse the header and bind every tensor (names, shapes, types, file
                                  offsets) without reading weight bytes; such a model cannot make a CPU
                                  context, it feeds a backend that streams the bytes itself (WebGPU) */
    int no_vocab;              /* 1: do not read the tokenizer (token ids only; saves its load time and
                                  memory, e.g. 0.1-0.35 s for a 50k-100k-token BPE vocabulary)           */
    uint32_t rows_embd;        /* > 0: the row store serves the token embedding table: only this many of
                                  its rows are held in memory (per context, an LRU cache), the rest are
                                  read from a row file when used; outputs are identical. 0 (default): the
                                  whole table is resident. When the store cannot be used (tied output
                                  projection, no directory, a write failure) the table is resident and
                                  lw_model_rows_status says why                                           */
    const char *rows_dir;      /* directory of row files (created if missing); NULL: $XDG_CACHE_HOME/
                                  llamaweb/rows, else $HOME/.cache/llamaweb/rows                          */
    int32_t rows_warm;         /* ids loaded into the cache when a context is created, from id 0: 0 (default)
                                  as many as it has slots, < 0 none                                       */
    uint32_t rows_per_layer;   /* > 0: the row store serves Gemma 4's per-layer token embedding table
                                  (per_layer_token_embd, n_vocab rows of n_layer x n_embd_per_layer: ~1.2 GB
                                  for E2B) as rows_embd does token_embd: this many rows per context in
                                  memory, the rest read from a row file when used; identical outputs.
                                  0 (default): resident. rows_warm applies to it too                      */
    uint32_t rows_experts;     /* > 0: the row store serves the MoE experts (ffn_{gate,up,down}_exps and
                                  gemma4's ffn_gate_up_exps): this many experts of each layer in memory
                                  per context, an expert's slab of each tensor read from a row file when
                                  the router picks it; identical outputs. 0 (default): resident.
                                  rows_warm warms experts 0.. of every layer                              */
} lw_model_params;

lw_model_params lw_model_default_params(void);

/* Loads weights from a GGUF file (read into one allocation; no mmap). As lw_gguf_open, *out is set even
 * when loading fails (unless memory ran out) so lw_model_error(*out) can be read: free it either way. */
lw_status lw_model_load_file(const char *path, const lw_model_params *params, lw_model **out);
/* Same from a byte source; the source must outlive the model. */
lw_status lw_model_load_source(lw_source *src, const lw_model_params *params, lw_model **out);
void lw_model_free(lw_model *m);
const char *lw_model_error(const lw_model *m);

const char *lw_model_arch(const lw_model *m); /* e.g. "llama" */
int32_t lw_model_n_vocab(const lw_model *m);
int32_t lw_model_n_embd(const lw_model *m);
int32_t lw_model_n_layer(const lw_model *m);
int32_t lw_model_n_ctx_train(const lw_model *m);
uint64_t lw_model_weight_bytes(const lw_model *m); /* bytes of the weight allocation */
/* The parsed GGUF header (metadata: tokenizer, chat template, ...), owned by the model. */
lw_gguf *lw_model_gguf(const lw_model *m);

/* The row store of the token embedding table (lw_model_params.rows_embd), and of the per-layer table and the
 * experts (rows_per_layer, rows_experts). LW_OK when it serves the tables or was not asked for; otherwise the
 * status of the first that failed, and that table is resident instead. *message (may be NULL) says which,
 * each table's part naming it, joined by "; ": "token_embd: 4096 of 32000 rows in memory, row file ...
 * (reused)", or why it fell back; "" when not asked for. Said once, here: the load itself succeeds either
 * way (see lw_model_rows_table_status for one table). */
lw_status lw_model_rows_status(const lw_model *m, const char **message);

/* The tables the row store can serve (lw_model_params.rows_embd, rows_per_layer, rows_experts). */
typedef enum lw_rows_table {
    LW_ROWS_TOKEN_EMBD = 0, /* token_embd                                                     */
    LW_ROWS_PER_LAYER = 1,  /* per_layer_token_embd (gemma4 E2B/E4B)                           */
    LW_ROWS_EXPERTS = 2,    /* the MoE experts of every layer (one row file per layer and tensor) */
} lw_rows_table;
#define LW_ROWS_N_TABLES 3

/* One table's row store: LW_OK when it serves the table or was not asked for, else the status of what failed
 * (that table is resident instead). *message names the table: "per_layer_token_embd: 32 of 256 rows in
 * memory, ...", "row store not used, experts resident: ...", "" when not asked for. lw_model_rows_status
 * joins the tables' messages ("; ") and returns the first failure. */
lw_status lw_model_rows_table_status(const lw_model *m, lw_rows_table table, const char **message);

/* A context's row cache: counters since its creation (all 0 and active 0 when the store is not in use). */
typedef struct lw_rows_stats {
    int32_t active;      /* 1: this context reads token embeddings through the row store    */
    uint32_t n_rows;     /* rows of the table                                               */
    uint32_t n_slots;    /* rows held in memory                                             */
    uint64_t row_bytes;  /* bytes per row                                                   */
    uint64_t lookups;    /* token ids looked up                                             */
    uint64_t hits;       /* of them already in memory                                       */
    uint64_t misses;     /* of them read from the row file                                  */
    uint64_t warm_loads; /* rows read when the context was created (lw_model_params.rows_warm) */
    uint64_t evictions;  /* reads that replaced a row held before                           */
    uint64_t bytes_read; /* bytes read from the row file                                    */
} lw_rows_stats;

/* ------------------------------------------------------------------------------------------------------
 * Contexts and decoding
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_context_params {
    uint32_t n_ctx;     /* KV cache cells; 0: the model's training context, at most 4096 (default 0)      */
    uint32_t n_batch;   /* most tokens one step computes; longer decodes are split (default 512)          */
    int32_t n_threads;  /* threads for a step; 0: the online processors, at most 8 (default 0)            */
    uint32_t type_k;    /* LW_TYPE_F16 (default, as llama.cpp), LW_TYPE_F32, or LW_TYPE_Q8_0 / LW_TYPE_Q4_0:
                           llama.cpp's quantized caches, 1/2 and ~0.28 of f16's bytes (CPU engine; needs
                           flash attention and head sizes that are multiples of 32)                        */
    uint32_t type_v;    /* must equal type_k for now                                                      */
    int32_t flash_attn; /* 1 (default): attention as llama.cpp's CPU default (flash attention); 0: as
                           llama.cpp with flash attention off (KQ, softmax, KQV; reference speed)          */
    int32_t embeddings; /* 1: an embeddings context: decoding computes the hidden states (the final norm's
                           output, llama.cpp's embeddings) of every output row and skips the output head:
                           lw_get_embeddings / lw_embed read them, lw_get_logits gives NULL (default 0)  */
} lw_context_params;

lw_context_params lw_context_default_params(void);

/* Plans and allocates everything a decode needs (KV cache, activation arena, scratch, threads). As
 * lw_model_load_file, *out is set on failure when possible. The model must outlive the context. */
lw_status lw_context_create(lw_model *m, const lw_context_params *params, lw_context **out);
void lw_context_free(lw_context *c);
const char *lw_context_error(const lw_context *c);
/* The model the context was created for. */
lw_model *lw_context_model(const lw_context *c);

uint32_t lw_context_n_ctx(const lw_context *c);
uint32_t lw_context_n_batch(const lw_context *c);
int32_t lw_context_n_threads(const lw_context *c);
/* Bytes allocated by the context (arena: KV cache + activations + scratch + logits). */
uint64_t lw_context_bytes(const lw_context *c);
/* The row cache's counters (see lw_rows_stats). */
lw_status lw_context_rows_stats(const lw_context *c, lw_rows_stats *out);
/* The counters of one table's row cache. LW_ROWS_EXPERTS sums every layer's caches (one per expert tensor:
 * gate, up, down or gate|up): n_rows and n_slots count experts over all layers and tensors, row_bytes is
 * their mean slab; each tensor's cache sees the same ids, so the hit rate is the experts'. */
lw_status lw_context_rows_table_stats(const lw_context *c, lw_rows_table table, lw_rows_stats *out);

/* Cells of the KV cache in use = position of the next token. */
uint32_t lw_context_n_past(const lw_context *c);
/* Forgets cells from n_past on (n_past <= lw_context_n_past), e.g. 0 to start over. */
lw_status lw_context_set_n_past(lw_context *c, uint32_t n_past);

/* Appends n tokens at position lw_context_n_past and computes them. logits_all != 0 keeps the logits of
 * every token (then n <= n_batch); otherwise only the last token's. Allocates nothing. */
lw_status lw_decode(lw_context *c, const int32_t *tokens, int32_t n, int logits_all);
/* Logits of output row i of the last decode (n_vocab floats), or NULL; i = -1 is the last row. */
const float *lw_get_logits(const lw_context *c, int32_t i);
/* Output rows of the last decode. */
int32_t lw_get_n_outputs(const lw_context *c);

/* Observer of every intermediate result while decoding (for comparing backends or debugging): called on
 * one thread after each graph node with the tensor's name (llama.cpp's names where it has them:
 * "attn_norm", "Qcur", "kqv_out", "ffn_out", "l_out", "result_output", ...), its block (-1 outside
 * blocks), and rows of ne0 floats valid only during the call. NULL removes it. */
typedef void (*lw_eval_fn)(void *user, const char *name, int32_t layer, const float *data, int64_t ne0, int64_t rows);
void lw_context_set_eval_callback(lw_context *c, lw_eval_fn fn, void *user);

/* Samples a token from output row i (-1: the last) with a sampler (see Samplers) and records it for the
 * sampler's penalties; -1 when there is no such row. Allocates nothing. */
int32_t lw_sample(const lw_context *c, lw_sampler *s, int32_t i);

/* ------------------------------------------------------------------------------------------------------
 * Samplers
 * Token samplers: a fixed chain configured by one params struct, in llama.cpp's default order:
 *     penalties (repetition, frequency, presence over the last N accepted tokens)
 *     -> top-k -> top-p -> min-p -> temperature -> draw from the softmax with a seeded RNG.
 * A temperature <= 0 means greedy (argmax after penalties). Buffers are allocated at creation: sampling
 * allocates nothing.
 *
 *     lw_sampler_params sp = lw_sampler_default_params(); sp.seed = 42;
 *     lw_sampler *s; lw_sampler_create(n_vocab, &sp, NULL, &s);
 *     int32_t id = lw_sampler_sample(s, logits); lw_sampler_accept(s, id);
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_sampler_params {
    float temp;             /* softmax temperature; <= 0: greedy (default 0.8)                           */
    int32_t top_k;          /* keep the k most likely; <= 0: off (default 40)                            */
    float top_p;            /* keep the smallest set with probability >= top_p; >= 1: off (default 0.95)*/
    float min_p;            /* keep tokens with p >= min_p * p_max; <= 0: off (default 0.05)             */
    int32_t penalty_last_n; /* accepted tokens the penalties look at; 0: off (default 64)                */
    float penalty_repeat;   /* logit / r if > 0 else logit * r, for seen tokens; 1: off (default 1)      */
    float penalty_freq;     /* minus count * f (default 0)                                               */
    float penalty_present;  /* minus p once a token was seen (default 0)                                 */
    uint64_t seed;          /* RNG seed (default 0x5eed)                                                 */
} lw_sampler_params;

lw_sampler_params lw_sampler_default_params(void);

lw_status lw_sampler_create(int32_t n_vocab, const lw_sampler_params *params, const lw_allocator *alloc,
                            lw_sampler **out);
void lw_sampler_free(lw_sampler *s);
/* Picks a token from n_vocab logits (not modified). Does not record it: call lw_sampler_accept. */
int32_t lw_sampler_sample(lw_sampler *s, const float *logits);
/* Records a token (generated or from the prompt) for the penalties. */
void lw_sampler_accept(lw_sampler *s, int32_t token);
/* Forgets accepted tokens and reseeds the RNG with seed. */
void lw_sampler_reset(lw_sampler *s, uint64_t seed);

/* ------------------------------------------------------------------------------------------------------
 * Grammars (structured output)
 * A grammar constrains generation to a language: llama.cpp's GBNF dialect (rules `name ::= ...`,
 * alternatives |, groups ( ), repetition * + ? {m} {m,} {m,n}, literals "..." with \x \u \U \n \t
 * escapes, classes [a-z] [^...], any character ., # comments; UTF-8 throughout), a JSON Schema (converted to
 * GBNF as llama.cpp's json-schema-to-grammar does, see lw_json_schema_to_gbnf), or any JSON value (schema NULL).
 * Parsing is limited against hostile input (sizes, nesting, left recursion) and fails with a message.
 *
 * Made with a vocabulary, a grammar yields per step the mask of tokens that may come next (a token is
 * allowed when its whole text keeps the output a prefix of the language; end-of-generation tokens when the
 * output is complete; tokens without text never) and advances by the chosen token. Masks are cached per
 * parse state, so most steps cost a copy of n_vocab bits. Attach one to a sampler and it samples only
 * allowed tokens:
 *
 *     lw_grammar *g;
 *     if (lw_grammar_parse("root ::= \"yes\" | \"no\"", 21, NULL, vocab, NULL, &g) != LW_OK)
 *         puts(lw_grammar_error(g));              // g is set even on failure (unless memory ran out)
 *     lw_sampler_set_grammar(sampler, g);         // sample + accept now follow the grammar
 *     ...
 *     lw_sampler_set_grammar(sampler, NULL); lw_grammar_free(g);
 *
 * One grammar serves one generation at a time; lw_grammar_reset starts over. Without a vocabulary (NULL),
 * only lw_grammar_accept_text and the completeness queries work (matching text against a grammar).
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_grammar lw_grammar;

/* Parses GBNF text[0..len) starting at rule root ("root" when NULL) for vocab (may be NULL). */
lw_status lw_grammar_parse(const char *gbnf, size_t len, const char *root, const lw_vocab *vocab,
                           const lw_allocator *alloc, lw_grammar **out);
/* A grammar from a JSON Schema document; schema NULL (len 0) gives JSON mode: any JSON value. */
lw_status lw_grammar_from_json_schema(const char *schema, size_t len, const lw_vocab *vocab,
                                      const lw_allocator *alloc, lw_grammar **out);
/* The GBNF text for a JSON Schema (NULL: any JSON value), NUL-terminated, allocated with alloc: free it with
 * lw_grammar_text_free. On failure a message goes to err (err_size bytes, may be NULL). */
lw_status lw_json_schema_to_gbnf(const char *schema, size_t len, const lw_allocator *alloc, char **out,
                                 size_t *out_len, char *err, size_t err_size);
void lw_grammar_text_free(const lw_allocator *alloc, char *text);
void lw_grammar_free(lw_grammar *g);
/* Message for the last failure ("" when none). */
const char *lw_grammar_error(const lw_grammar *g);
/* Back to the start (nothing generated yet). */
lw_status lw_grammar_reset(lw_grammar *g);
/* The vocabulary size the masks cover (0 without a vocabulary). */
int32_t lw_grammar_n_vocab(const lw_grammar *g);
/* Allowed tokens now: bit t of bits[t / 32] (bits has n_words >= (n_vocab + 31) / 32 words). */
lw_status lw_grammar_mask(lw_grammar *g, uint32_t *bits, size_t n_words);
/* Sets logits of the tokens not allowed now to -INFINITY (n_vocab floats). */
lw_status lw_grammar_apply(lw_grammar *g, float *logits);
/* Advances by a token; LW_ERR_INVALID_ARG (nothing changed) when the grammar does not allow it. */
lw_status lw_grammar_accept_token(lw_grammar *g, int32_t token);
/* Advances by text bytes (a forced prefix, or matching text without a vocabulary); same errors. */
lw_status lw_grammar_accept_text(lw_grammar *g, const char *text, size_t len);
/* 1 when the output so far is a whole sentence of the grammar (generation may end here). */
int lw_grammar_is_complete(const lw_grammar *g);
/* 1 when nothing may follow (complete, and no continuation exists; or an end token was accepted). */
int lw_grammar_is_finished(const lw_grammar *g);

/* Attaches a grammar to the sampler (NULL detaches; the sampler does not own it: keep it alive while
 * attached, or free it after detaching). Then lw_sampler_sample picks only allowed tokens (-1 when none is,
 * with the reason in lw_grammar_error), and lw_sampler_accept advances the grammar by the token that
 * lw_sampler_sample returned last (prompt tokens recorded for penalties do not move it). lw_sampler_reset
 * also resets the grammar. LW_ERR_INVALID_ARG when the grammar has no vocabulary or more tokens than the
 * sampler (tokens past the grammar's vocabulary are never allowed). */
lw_status lw_sampler_set_grammar(lw_sampler *s, lw_grammar *g);

/* ------------------------------------------------------------------------------------------------------
 * Tokenizers
 * Tokenizers compatible with llama.cpp (SPM, byte-level BPE with its pre-tokenizers, WPM, UGM, RWKV).
 *
 * A vocabulary is read from a GGUF file's tokenizer.* keys and is immutable afterwards, so one lw_vocab
 * can serve several threads. Token ids are int32_t as in llama.cpp; -1 means "no token".
 * ---------------------------------------------------------------------------------------------------- */

/* The tokenizer family (tokenizer.ggml.model). */
typedef enum lw_vocab_type {
    LW_VOCAB_NONE = 0, /* "no_vocab": ids only                        */
    LW_VOCAB_SPM = 1,  /* "llama": SentencePiece BPE with byte fallback */
    LW_VOCAB_BPE = 2,  /* "gpt2" (byte-level), "gemma4"               */
    LW_VOCAB_WPM = 3,  /* "bert": WordPiece                           */
    LW_VOCAB_UGM = 4,  /* "t5": unigram with a precompiled char map   */
    LW_VOCAB_RWKV = 5, /* "rwkv": greedy trie over escaped byte strings */
} lw_vocab_type;

/* Token attributes (llama.cpp's llama_token_attr bits). */
enum {
    LW_TOKEN_ATTR_UNKNOWN = 1 << 0,
    LW_TOKEN_ATTR_UNUSED = 1 << 1,
    LW_TOKEN_ATTR_NORMAL = 1 << 2,
    LW_TOKEN_ATTR_CONTROL = 1 << 3,
    LW_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    LW_TOKEN_ATTR_BYTE = 1 << 5,
    LW_TOKEN_ATTR_LSTRIP = 1 << 7,
    LW_TOKEN_ATTR_RSTRIP = 1 << 8,
};

/* Special tokens a vocabulary may name. */
typedef enum lw_special_token {
    LW_TOKEN_BOS, LW_TOKEN_EOS, LW_TOKEN_EOT, LW_TOKEN_EOM, LW_TOKEN_UNK, LW_TOKEN_SEP, LW_TOKEN_PAD,
    LW_TOKEN_MASK, LW_TOKEN_NL, LW_TOKEN_FIM_PRE, LW_TOKEN_FIM_SUF, LW_TOKEN_FIM_MID, LW_TOKEN_FIM_PAD,
    LW_TOKEN_FIM_REP, LW_TOKEN_FIM_SEP, LW_TOKEN_SPECIAL_COUNT
} lw_special_token;

/* Reads the vocabulary from g (which may be closed afterwards: everything is copied). Like lw_gguf_open,
 * *out is set even on failure (unless memory ran out) so lw_vocab_error can say why; free it either way.
 * LW_ERR_UNSUPPORTED for tokenizer models or pre-tokenizers this build does not implement. */
lw_status lw_vocab_load(lw_gguf *g, const lw_allocator *alloc, lw_vocab **out);
void lw_vocab_free(lw_vocab *v);
const char *lw_vocab_error(const lw_vocab *v);

lw_vocab_type lw_vocab_get_type(const lw_vocab *v);
uint32_t lw_vocab_n_tokens(const lw_vocab *v);
/* The pre-tokenizer name from the file ("" when absent). */
const char *lw_vocab_pre(const lw_vocab *v);
/* Token text as stored (NUL-terminated; *len may be NULL); NULL for ids out of range. */
const char *lw_vocab_token_text(const lw_vocab *v, int32_t id, size_t *len);
float lw_vocab_token_score(const lw_vocab *v, int32_t id);
/* Id of the token whose text is exactly text[0..len) (as stored, e.g. "<|im_end|>" or "\u2581the"), or -1. */
int32_t lw_vocab_find(const lw_vocab *v, const char *text, size_t len);
uint32_t lw_vocab_token_attr(const lw_vocab *v, int32_t id);
/* Id of a special token, -1 when the vocabulary has none. */
int32_t lw_vocab_special(const lw_vocab *v, lw_special_token which);
/* End-of-generation tokens (EOS, EOT, <|im_end|>, ... as llama.cpp decides). */
int lw_vocab_is_eog(const lw_vocab *v, int32_t id);
/* Whether tokenizing with add_special prepends BOS / appends EOS. */
int lw_vocab_adds_bos(const lw_vocab *v);
int lw_vocab_adds_eos(const lw_vocab *v);
/* Longest piece lw_token_to_piece can produce (for sizing buffers). */
size_t lw_vocab_max_piece_len(const lw_vocab *v);

/* Tokenizes text[0..len) exactly as llama_tokenize(vocab, text, len, ..., add_special, parse_special).
 * add_special adds BOS/EOS (or CLS/SEP) as the vocabulary asks; parse_special lets control tokens written
 * in the text become their ids (user-defined tokens always do). Writes at most cap ids to out and the full
 * count to *n_out; LW_ERR_TOO_LARGE when cap was too small (call again with *n_out). Arbitrary bytes are
 * accepted, including invalid UTF-8. There are never more than 4 * len + 2 ids (an invalid byte becomes
 * U+FFFD, three byte tokens). Working memory comes from the vocabulary's allocator. */
lw_status lw_tokenize(const lw_vocab *v, const char *text, size_t len, int add_special, int parse_special,
                      int32_t *out, size_t cap, size_t *n_out);

/* The text of one token as llama_token_to_piece: control/unknown tokens give "" unless special; lstrip
 * removes up to that many leading spaces. Writes at most cap bytes (no NUL) and the full length to *n_out;
 * LW_ERR_TOO_LARGE when cap was too small; LW_ERR_INVALID_ARG for an id out of range. */
lw_status lw_token_to_piece(const lw_vocab *v, int32_t id, int special, size_t lstrip, char *buf, size_t cap,
                            size_t *n_out);

/* Text of a token sequence as llama_detokenize (leading-space removal for SPM, optional removal of BOS/EOS,
 * clean-up of spaces before punctuation for vocabularies that ask for it). Same output contract as
 * lw_token_to_piece, except that on LW_ERR_TOO_LARGE *n_out is the length before the space clean-up (an
 * upper bound: enough room for the next call). */
lw_status lw_detokenize(const lw_vocab *v, const int32_t *tokens, size_t n_tokens, int remove_special,
                        int unparse_special, char *buf, size_t cap, size_t *n_out);

/* Streaming detokenizer for generation: feed tokens one at a time; the output is always valid UTF-8 and a
 * character split across tokens (byte tokens, byte-level BPE) is held back until it is complete. Invalid
 * sequences become U+FFFD. The struct is plain data: declare it anywhere, no allocation. */
typedef struct lw_detok_stream {
    const lw_vocab *vocab; /* the vocabulary                                        */
    int special;           /* render control tokens' text                           */
    int strip_space;       /* drop the leading space of the first piece (SPM prompt) */
    uint8_t pending[4];    /* bytes of an incomplete UTF-8 character                */
    uint32_t n_pending;    /* how many                                              */
} lw_detok_stream;

void lw_detok_stream_init(lw_detok_stream *s, const lw_vocab *v, int special, int strip_leading_space);
/* Bytes to reserve for one push: every push fits in this many bytes. */
size_t lw_detok_stream_max_out(const lw_detok_stream *s);
/* Appends the text that token completes; writes *n_out bytes to out. LW_ERR_TOO_LARGE (nothing consumed)
 * when cap < lw_detok_stream_max_out. */
lw_status lw_detok_stream_push(lw_detok_stream *s, int32_t token, char *out, size_t cap, size_t *n_out);
/* Emits what is still held back (as U+FFFD: it never completed). cap >= 3 suffices. */
lw_status lw_detok_stream_flush(lw_detok_stream *s, char *out, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------------------------------------
 * Text through the model
 * The vocabulary is read from the GGUF file with the weights (lw_model_load_*). A file without a usable
 * tokenizer still loads (token ids only): then lw_model_vocab is NULL and these functions return
 * LW_ERR_UNSUPPORTED with the reason in lw_model_error. Messages go to the model, so call these on one thread
 * at a time per model (the vocabulary itself is immutable and may be shared).
 *
 *     size_t n;
 *     int32_t ids[64];
 *     lw_model_tokenize(m, "Once upon a time", 16, 1, 0, ids, 64, &n); // BOS 403 407 261 378 (stories260K)
 * ---------------------------------------------------------------------------------------------------- */

/* The model's vocabulary (owned by the model), or NULL when the file has none this build reads. */
const lw_vocab *lw_model_vocab(const lw_model *m);
/* lw_tokenize with the model's vocabulary. */
lw_status lw_model_tokenize(lw_model *m, const char *text, size_t len, int add_special, int parse_special,
                            int32_t *out, size_t cap, size_t *n_out);
/* lw_detokenize with the model's vocabulary. */
lw_status lw_model_detokenize(lw_model *m, const int32_t *tokens, size_t n, int remove_special,
                              int unparse_special, char *buf, size_t cap, size_t *n_out);
/* lw_token_to_piece with the model's vocabulary (no lstrip). */
lw_status lw_model_token_to_piece(lw_model *m, int32_t id, int special, char *buf, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------------------------------------
 * Generation
 * A prompt is appended to the context at lw_context_n_past (so a conversation can continue in the same KV
 * cache), recorded for the sampler's penalties and decoded; then tokens are sampled one by one, each token's
 * text is handed to a callback as it comes, and each token is decoded in turn. Generation stops at an
 * end-of-generation token, after n_predict tokens, when the callback asks, or when the context is full.
 * After setup (tokenizing a text prompt) nothing is allocated: the loop runs in the context's memory.
 *
 *     lw_generate_params gp = lw_generate_default_params();
 *     gp.n_predict = 64; gp.on_token = print_text; gp.user = stdout;
 *     lw_generate_text(ctx, sampler, "Once upon a time", 16, 1, 0, &gp, NULL);
 *
 * The last token sampled is not decoded (nothing would read its logits): the KV cache ends with the
 * prompt and every generated token but the last (lw_generate_result.last). To continue the same text, pass
 * that token as the first token of the next prompt; a chat whose reply ended with an end-of-generation
 * token continues with the template's own end-of-turn text instead.
 * ---------------------------------------------------------------------------------------------------- */

/* Why generation stopped. */
typedef enum lw_stop_reason {
    LW_STOP_NONE = 0, /* it did not finish: an error (the returned status says which)        */
    LW_STOP_EOG,      /* an end-of-generation token was sampled (EOS, EOT, <|im_end|>, ...)  */
    LW_STOP_LENGTH,   /* n_predict tokens were generated                                     */
    LW_STOP_CALLBACK, /* the token callback returned non-zero                                */
    LW_STOP_CONTEXT,  /* the KV cache is full                                                */
    LW_STOP_STRING    /* a stop string came (lw_gen_params.stop); the text ends before it    */
} lw_stop_reason;

/* Receives each generated token and the text it completes: valid UTF-8, possibly empty (a character
 * continued in the next token, or a control token's text when params.special is 0). After the last token,
 * bytes of a character that never completed come once more with token -1 (as U+FFFD). Return 0 to go on,
 * non-zero to stop after this token. The text is valid only during the call. */
typedef int (*lw_token_fn)(void *user, int32_t token, const char *text, size_t len);

typedef struct lw_generate_params {
    int32_t n_predict;   /* most tokens to generate; < 0: until EOG or a full context (default 128)        */
    int ignore_eog;      /* 1: an end-of-generation token does not stop generation (default 0)            */
    int special;         /* 1: control tokens' text is streamed too (default 0)                           */
    lw_token_fn on_token; /* called for every generated token; NULL: none                                 */
    void *user;          /* passed to on_token                                                            */
    int32_t *tokens;     /* optional: generated ids are stored here, at most tokens_cap of them           */
    size_t tokens_cap;   /* room in tokens                                                                */
    const char *const *stop; /* stop strings (caller's memory; NULL: none, the default): the text ends before
                                the first that comes (LW_STOP_STRING); on_token's texts never hold one    */
    const size_t *stop_len;  /* their lengths in bytes; NULL: NUL-terminated                              */
    size_t n_stop;           /* how many                                                                  */
} lw_generate_params;

lw_generate_params lw_generate_default_params(void);

/* What a generation did. */
typedef struct lw_generate_result {
    int32_t n_prompt;    /* prompt tokens decoded                                                  */
    int32_t n_generated; /* tokens sampled, the one that stopped generation included               */
    int32_t last;        /* the last sampled token, not in the KV cache; -1 when none is pending   */
    lw_stop_reason stop; /* why it stopped                                                         */
} lw_generate_result;

/* Decodes prompt[0..n_prompt) after the context's current cells and generates with sampler s. n_prompt may
 * be 0 to continue from the logits of the context's last decode. res (may be NULL) is written on return, so
 * the prompt may be &res->last of the previous call. Errors (a prompt that
 * does not fit the context, an id outside the vocabulary) return their status with the message on the
 * context; res then tells how far generation got. The model needs no vocabulary (then the callback gets
 * empty texts and no token counts as end of generation). */
lw_status lw_generate(lw_context *c, lw_sampler *s, const int32_t *prompt, size_t n_prompt,
                      const lw_generate_params *params, lw_generate_result *res);
/* The same from text, tokenized with the model's vocabulary (lw_model_tokenize's add_special and
 * parse_special). */
lw_status lw_generate_text(lw_context *c, lw_sampler *s, const char *text, size_t len, int add_special,
                           int parse_special, const lw_generate_params *params, lw_generate_result *res);

/* ------------------------------------------------------------------------------------------------------
 * The generation state machine
 * The rules of a generation, written once and driven by every loop: lw_generate (synchronously), chat
 * sessions, and the browser package's generations on the GPU model and the wasm CPU engine (from JavaScript,
 * awaiting each decode between steps). It decodes and samples nothing itself: each step tells the caller
 * which ids to decode at which cell and whether to sample a token afterwards; the caller pushes that token
 * and gets its text back, already cut for stop strings. It owns: the streaming detokenizer (UTF-8 characters
 * split across tokens are handed on whole), stop strings (the text is held back while it could begin one,
 * so what is handed on never has to be taken back), n_predict, end of generation, and the full-context
 * policy. Stop reasons, in order: end of generation, a stop string, the caller's lw_gen_stop, n_predict,
 * a full context.
 *
 *     lw_gen g; lw_gen_step st; char buf[4096];                  // lw_gen_buffer_size(v, &p) bytes
 *     lw_gen_init(&g, vocab, &p, buf, sizeof buf);
 *     lw_gen_start(&g, prompt, n_prompt, n_past, &st);
 *     for (;;) {
 *         if (st.n_ids) decode(st.ids, st.n_ids, st.pos);        // at cells [pos, pos + n_ids)
 *         if (!st.sample) break;                                 // over: st.stop says why
 *         lw_gen_push(&g, sample(), &st);
 *         hand_on(st.token, st.text, st.text_len);               // then st.tail with token -1 at the end
 *     }
 *
 * Nothing is allocated: the machine works in the caller's buffer, and stop strings stay in the caller's
 * memory until the generation ends. The structure is public so it can live on the stack; its fields are
 * the machine's own (read the step, not them).
 * ---------------------------------------------------------------------------------------------------- */

/* Settings of a generation; start from lw_gen_default_params(). */
typedef struct lw_gen_params {
    int32_t n_predict;          /* most tokens to sample, the one that ends generation included; < 0: no
                                   limit (default -1)                                                       */
    int ignore_eog;             /* 1: an end-of-generation token does not stop generation (default 0)       */
    int special;                /* 1: control tokens' text is part of the text (default 0)                  */
    int decode_last;            /* 1: the token that ends generation by n_predict, a stop string or
                                   lw_gen_stop is decoded too, so the cache holds the whole output (a chat
                                   reply); 0 (default): it stays pending, as lw_generate leaves it          */
    uint32_t n_ctx;             /* cells of the KV cache: a prompt past them is refused, and generation
                                   ends (LW_STOP_CONTEXT) when a sampled token has no cell; 0: no limit    */
    const char *const *stop;    /* stop strings (caller's memory, kept until the generation ends; empty
                                   ones are ignored); NULL: none (default)                                  */
    const size_t *stop_len;     /* their lengths in bytes; NULL: NUL-terminated                             */
    size_t n_stop;              /* how many                                                                 */
} lw_gen_params;

lw_gen_params lw_gen_default_params(void);

/* What the caller does next, and the text of the token just pushed. Pointers are valid until the next call
 * on the machine. */
typedef struct lw_gen_step {
    const int32_t *ids;         /* decode these ids (n_ids of them; 0: nothing to decode) ...             */
    size_t n_ids;               /* ... at cells [pos, pos + n_ids)                                         */
    uint32_t pos;               /* the first cell they go to                                              */
    int sample;                 /* 1: then sample the next token from the last decode's logits and
                                   lw_gen_push it; 0: the generation is over after this decode            */
    lw_stop_reason stop;        /* why it is over; LW_STOP_NONE while it goes on                          */
    int32_t token;              /* the token pushed last (-1: none yet)                                   */
    int32_t n_generated;        /* tokens pushed since lw_gen_start                                       */
    const char *piece;          /* the pushed token's own text as detokenized, before stop strings: what
                                   the output holds (the cache's text); an end-of-generation token's too   */
    size_t piece_len;           /* its bytes                                                              */
    const char *text;           /* the text to hand on now for token: valid UTF-8, never part of a stop
                                   string (may be empty while a character or a stop string is incomplete) */
    size_t text_len;            /* its bytes                                                              */
    const char *tail;           /* when the generation is over: the text still held back (the start of a
                                   stop string that did not come, a character that never completed as
                                   U+FFFD), to hand on after text (as token -1)                           */
    size_t tail_len;            /* its bytes                                                              */
    const char *rest;           /* when it is over: the bytes of a character that never completed, as
                                   U+FFFD (part of the output after the last piece; already in tail)       */
    size_t rest_len;            /* its bytes (0 or 3)                                                     */
} lw_gen_step;

/* A generation in progress (fields are the machine's; see the steps). */
typedef struct lw_gen {
    lw_gen_params p;            /* the settings                                                           */
    const lw_vocab *v;          /* the vocabulary (NULL: ids only: empty texts, no end of generation)     */
    lw_detok_stream ds;         /* text of the tokens pushed, whole characters at a time                  */
    char *piece;                /* buffer of the pushed token's text (piece_cap bytes)                    */
    char *text;                 /* buffer of the text handed on (held + piece: held_cap + piece_cap)      */
    char *held;                 /* the text held back (held_cap bytes): it may begin a stop string        */
    char *tail;                 /* buffer of the end's text (held_cap + 4 bytes), then of the raw rest (4) */
    size_t piece_cap;           /* bytes one push may produce (lw_detok_stream_max_out; 4 without vocab)  */
    size_t held_cap;            /* the longest stop string's bytes (held text is shorter)                 */
    size_t n_held;              /* bytes held back now                                                    */
    uint32_t pos;               /* cells the cache holds once the last step's ids are decoded             */
    int32_t n_generated;        /* tokens pushed                                                          */
    int32_t last;               /* the token pushed last, the ids of a one-token decode (-1: none)        */
    int state;                  /* 0 not started, 1 waiting for a push, 2 over                            */
    lw_gen_step final;          /* the step that ended the generation (lw_gen_stop hands it out again)    */
    char err[256];              /* message of the last failed call                                        */
} lw_gen;

/* Bytes of buffer lw_gen_init needs for vocabulary v (may be NULL) and p's stop strings; 0 on overflow. */
size_t lw_gen_buffer_size(const lw_vocab *v, const lw_gen_params *p);
/* Sets g up over buf (cap >= lw_gen_buffer_size bytes, kept by the caller while g is used). Fails with
 * LW_ERR_INVALID_ARG (NULL arguments) or LW_ERR_TOO_LARGE (a buffer too small); the message is in
 * lw_gen_error(g) when g is not NULL. A machine may run many generations (lw_gen_start each). */
lw_status lw_gen_init(lw_gen *g, const lw_vocab *v, const lw_gen_params *p, char *buf, size_t cap);
/* Message of the last failed call on g ("" when none). */
const char *lw_gen_error(const lw_gen *g);
/* Starts a generation whose prompt[0..n_prompt) goes to cells from pos (the cells before it are the
 * cache's). The step asks to decode the prompt and then sample; n_prompt 0 asks to sample from the logits
 * the caller already has (nothing to decode); with n_predict 0 it asks to decode the prompt only. A prompt
 * past n_ctx cells is LW_ERR_TOO_LARGE (nothing starts). */
lw_status lw_gen_start(lw_gen *g, const int32_t *prompt, size_t n_prompt, uint32_t pos, lw_gen_step *step);
/* Pushes token id, sampled after the last step's decode: its text (cut before a stop string) and the next
 * step: decode it and sample again, or the end (with decode_last, the end may still ask to decode it). An id
 * outside the vocabulary has no text. LW_ERR_INVALID_ARG when no generation waits for a token. */
lw_status lw_gen_push(lw_gen *g, int32_t id, lw_gen_step *step);
/* Ends the generation by the caller's choice (why: LW_STOP_CALLBACK, say) after the last push, in place of
 * that push's step: the end step (text empty; tail, and with decode_last the last token's decode). When the
 * generation is over already, *step is the end step again, its stop relabelled to why when it ended by
 * n_predict or a full context (the caller's choice ranks before those). */
lw_status lw_gen_stop(lw_gen *g, lw_stop_reason why, lw_gen_step *step);

/* ------------------------------------------------------------------------------------------------------
 * Chat templates
 * Chat templates: render the Jinja chat template stored in a GGUF file (`tokenizer.chat_template`) for a
 * conversation, the way Hugging Face transformers' apply_chat_template does (Jinja2 with trim_blocks and
 * lstrip_blocks, transformers' tojson, raise_exception and strftime_now; `tools` as lw_chat_params.tools
 * gives it (none by default), documents are none).
 *
 *   - once:   lw_chat_apply(tmpl, msgs, n, 1, "<s>", "</s>", NULL, &out, &len, err, sizeof err);
 *   - reused: lw_chat_template_parse() once at model load, lw_chat_template_render() per request.
 * Output strings are allocated with the given allocator (libc when NULL) and NUL-terminated; free them with
 * lw_chat_string_free(). Hostile templates cannot hang or exhaust memory: a render is bounded in evaluation
 * steps, output bytes, memory and nesting, and fails with LW_ERR_TOO_LARGE past a limit.
 *
 * The Jinja subset (what chat templates use; src/chat/jinja-*.c):
 *   tags      {{ }} {% %} {# #}, whitespace control {%- -%} {{- -}} {#- -#} {%+ +%}, trim_blocks and
 *             lstrip_blocks on, keep_trailing_newline off, {% raw %}
 *   blocks    if/elif/else, for (else, `if` filter, unpacking `for k, v in d.items()`, loop.index/index0/
 *             revindex/revindex0/first/last/length/previtem/nextitem, break/continue), set (name, ns.attr,
 *             a, b = ..., block set with filters), macro (defaults, keyword arguments), filter blocks, do,
 *             generation blocks (rendered in place)
 *   values    none, bool, int (64-bit, overflow is an error), float, str (UTF-8; indexing, slicing and
 *             length count code points), list, dict (insertion-ordered), namespace()
 *   operators and or not, in / not in, == != < > <= >=, + - * / // % **, ~, a if c else b, [i], [a:b:c],
 *             .attr, calls; Python semantics (1 == 1.0, 'ab' * 2, floor division and modulo signs)
 *   tests     defined undefined none string number integer float boolean mapping iterable sequence
 *             true false odd even divisibleby eq/equalto/== ne lt gt le ge in sameas lower upper callable
 *   filters   abs attr capitalize center count d/default dictsort e/escape first float indent int items
 *             join last length list lower map max min reject rejectattr replace reverse round safe select
 *             selectattr sort string sum title tojson (indent, sort_keys, ensure_ascii) trim unique upper
 *             wordcount, and llama.cpp's from_json; an unknown filter or test is an error only if it runs
 *   methods   str: strip lstrip rstrip startswith endswith split splitlines upper lower title capitalize
 *             replace find rfind index count join format removeprefix removesuffix isdigit isalpha
 *             isspace isalnum; dict: items keys values get; list: append pop index count
 *   globals   range, namespace, dict, raise_exception(msg), strftime_now(fmt) (UTC, C locale)
 * Differences from Jinja2: attribute access on undefined values gives undefined, and iterating none gives
 * no iterations, instead of errors (templates test `tools` loosely); unknown filters fail at render time; case
 * mapping (upper, lower, title, capitalize) is ASCII-only (whitespace handling follows Python, Unicode
 * spaces included); no include/import/extends, call blocks, recursive loops, loop.cycle, or '%' string
 * formatting.
 * ---------------------------------------------------------------------------------------------------- */

/* One message of a conversation. content may be NULL (seen by the template as none). */
typedef struct lw_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* UTF-8 text                               */
} lw_chat_message;

/* What went wrong in the last failed parse or render of a template. */
typedef enum lw_chat_error_kind {
    LW_CHAT_OK = 0,      /* no error                                                    */
    LW_CHAT_ERR_SYNTAX,  /* the template does not parse (LW_ERR_INVALID_ARG)            */
    LW_CHAT_ERR_RENDER,  /* a type error, undefined function, ... (LW_ERR_INVALID_ARG)  */
    LW_CHAT_ERR_RAISED,  /* the template called raise_exception(msg) (LW_ERR_INVALID_ARG) */
    LW_CHAT_ERR_LIMIT,   /* a step/output/memory/nesting limit (LW_ERR_TOO_LARGE)        */
    LW_CHAT_ERR_MEMORY   /* the allocator failed (LW_ERR_NOMEM)                          */
} lw_chat_error_kind;

#define LW_CHAT_NOW_CURRENT INT64_MIN /* lw_chat_params.now: use the current time */

/* Render options; start from lw_chat_params_default(). */
typedef struct lw_chat_params {
    int add_generation_prompt; /* end with the assistant header                              */
    const char *bos_token;     /* bos_token variable (NULL: "")                              */
    const char *eos_token;     /* eos_token variable (NULL: "")                              */
    int enable_thinking;       /* -1: leave undefined (template default), 0: false, 1: true  */
    int64_t now;               /* strftime_now() time, seconds since the epoch, UTC           */
    uint64_t max_steps;        /* evaluation steps (0: default, 5M)                          */
    size_t max_output;         /* output bytes (0: default, 4 MiB)                           */
    size_t max_memory;         /* render memory (0: default, 64 MiB)                         */
    const char *tools;         /* the `tools` variable: OpenAI's tools array as JSON text ([{"type":
                                  "function", "function": {"name", "description", "parameters"}}], as
                                  transformers passes them), NUL-terminated; NULL or "": none (default)  */
} lw_chat_params;

void lw_chat_params_default(lw_chat_params *p);

typedef struct lw_chat_template lw_chat_template;

/* Parses a template (len bytes; NUL not required). On failure *out is NULL and err (if given) says why,
 * e.g. "syntax error, line 3: unclosed 'for' block opened on line 1". */
lw_status lw_chat_template_parse(const char *src, size_t len, const lw_allocator *alloc, lw_chat_template **out,
                                 char *err, size_t err_size);
/* Renders the template for n messages (one render at a time per object: the error and step count of the
 * last render are kept on it; parse once per thread, or serialise renders); *out (NUL-terminated, *out_len bytes without the NUL) is the prompt.
 * On failure *out is NULL and lw_chat_template_error() has the message (for raise_exception: its text). */
lw_status lw_chat_template_render(lw_chat_template *t, const lw_chat_message *msgs, size_t n,
                                  const lw_chat_params *params, char **out, size_t *out_len);
/* The same with the conversation as a JSON array of message objects (OpenAI's shape: role, content (a string
 * or null), and whatever else the template reads: tool_calls, tool_call_id, name, reasoning_content, ...),
 * each object's members as the template's message dict in their order, numbers as int or float, null as
 * none. JSON that does not parse, or is not an array of objects, fails with LW_ERR_INVALID_ARG. */
lw_status lw_chat_template_render_json(lw_chat_template *t, const char *messages, size_t len,
                                       const lw_chat_params *params, char **out, size_t *out_len);
const char *lw_chat_template_error(const lw_chat_template *t);          /* "" when none */
lw_chat_error_kind lw_chat_template_error_kind(const lw_chat_template *t);
uint64_t lw_chat_template_last_steps(const lw_chat_template *t);        /* steps of the last render */
void lw_chat_string_free(lw_chat_template *t, char *s);                 /* frees a rendered string  */
void lw_chat_template_free(lw_chat_template *t);

/* From a GGUF file's metadata: the chat template (tokenizer.chat_template) and the texts of its BOS and
 * EOS tokens (tokenizer.ggml.tokens[tokenizer.ggml.{bos,eos}_token_id]). Pointers are owned by g; a
 * missing item is NULL. Returns LW_ERR_NOT_FOUND when the file has no chat template. */
lw_status lw_chat_from_gguf(lw_gguf *g, const char **tmpl, const char **bos, const char **eos);

/* One-shot: parse + render + free. err (if given) receives the message on failure. Free *out with
 * alloc->free (or libc free() when alloc is NULL). */
lw_status lw_chat_apply(const char *tmpl, const lw_chat_message *msgs, size_t n, int add_generation_prompt,
                        const char *bos, const char *eos, const lw_allocator *alloc, char **out, size_t *out_len,
                        char *err, size_t err_size);

/* ------------------------------------------------------------------------------------------------------
 * Chat sessions
 * A conversation with a model in one context: the messages are rendered with the model's chat template (or
 * one given, or a plain "User:/Assistant:" format when there is none), and the KV cache is kept across turns
 * so each turn decodes only the part of the new rendering after what the cache holds (the previous reply's
 * end marker, the new message, the assistant header). Where a template re-renders earlier text differently
 * (one that trims old replies, say), decoding resumes from the last chunk boundary that still matches. When
 * the context is full the conversation starts over from the system prompt and the new message; a message too
 * long even for that is refused with LW_ERR_TOO_LARGE and the conversation stays as it was.
 *
 * Texts carry their length: message and reply bytes may include NUL (a reply that emits the byte token
 * <0x00> keeps it). The reply is generated token by token with the caller's sampler:
 *
 *     lw_chat_session_params p = lw_chat_session_default_params(); p.system = "Be brief.";
 *     lw_chat_session *cs; lw_chat_session_new(ctx, &p, &cs);
 *     lw_chat_session_user(cs, "Hello", 5, NULL);            // renders + decodes the new part
 *     int32_t tok; const char *piece; size_t n;
 *     while (lw_chat_session_next(cs, sampler, &tok, &piece, &n) == LW_OK && tok >= 0) fwrite(piece, 1, n, stdout);
 *
 * A session uses its context alone (do not decode into it in between) and one thread at a time. Chunks are
 * tokenized one at a time (control tokens written by the template become their ids), so a vocabulary that
 * prefixes a space to every text (SentencePiece add_space_prefix) sees one at the start of each chunk, as
 * llama.cpp's llama-cli conversation mode does; the reply stays in the cache as the tokens generated.
 * ---------------------------------------------------------------------------------------------------- */

typedef struct lw_chat_session lw_chat_session;

/* Which template a session renders with. */
typedef enum lw_chat_template_kind {
    LW_CHAT_TEMPLATE_GIVEN = 0, /* lw_chat_session_params.template_src                                   */
    LW_CHAT_TEMPLATE_MODEL,     /* the model's tokenizer.chat_template                                   */
    LW_CHAT_TEMPLATE_PLAIN      /* none usable: "SYSTEM\n\nUser: MSG\nAssistant:REPLY\nUser: ...Assistant:" */
} lw_chat_template_kind;

#define LW_CHAT_NUL_TERMINATED SIZE_MAX /* a length meaning "up to the first NUL" */

/* Session settings; start from lw_chat_session_default_params(). Strings are copied. */
typedef struct lw_chat_session_params {
    const char *system;       /* system prompt; NULL: none (default)                                      */
    size_t system_len;        /* its bytes; LW_CHAT_NUL_TERMINATED (default): strlen(system)               */
    const char *template_src; /* Jinja chat template (NUL-terminated); NULL: the model's (default)        */
    int fallback;             /* 1 (default): the plain format when there is no template or it does not
                                 parse; 0: lw_chat_session_new fails instead (NOT_FOUND / INVALID_ARG)    */
    int enable_thinking;      /* passed to the template: -1 undefined (default), 0 false, 1 true          */
    int32_t n_predict;        /* most tokens per reply; < 0: until end of generation or a full context
                                 (default -1)                                                             */
    int special;              /* 1: control tokens' text is part of the reply (default 0); an end-of-
                                 generation token's text is handed on but not kept in the reply          */
    const lw_allocator *alloc; /* NULL: the C library's malloc family (the session's own memory and renders) */
    const char *tools;         /* the template's `tools`: OpenAI's tools array as JSON text (NUL-terminated,
                                  as lw_chat_params.tools; checked to be a JSON array); NULL: none (default) */
} lw_chat_session_params;

lw_chat_session_params lw_chat_session_default_params(void);

/* What the last lw_chat_session_user did and how its reply ended. */
typedef struct lw_chat_turn {
    uint32_t n_prompt;      /* new prompt tokens decoded for the message (BOS, template text, message)   */
    uint32_t from_cell;     /* the cell they went to: cells [0, from_cell) were reused from the cache     */
    int restarted;          /* 1: the context was full: the conversation started over from the system prompt */
    int resumed;            /* 1: the template changed earlier text: decoding resumed at an earlier boundary */
    size_t resumed_at;      /* then: bytes of the rendered conversation kept                              */
    int32_t n_generated;    /* reply tokens sampled so far (the one that ended it included)              */
    lw_stop_reason stop;    /* why the reply ended; LW_STOP_NONE while it goes on                         */
} lw_chat_turn;

/* Makes a session over context c (its model needs a vocabulary; the context must outlive the session, which
 * starts by clearing its cache). Like lw_model_load_file, *out is set even on failure (unless memory ran out)
 * so lw_chat_session_error(*out) says why; free it either way. */
lw_status lw_chat_session_new(lw_context *c, const lw_chat_session_params *params, lw_chat_session **out);
void lw_chat_session_free(lw_chat_session *s);
/* Message of the last failed call ("" when none). */
const char *lw_chat_session_error(const lw_chat_session *s);
/* The template in use; *why (may be NULL) says why the plain format is used when the model's template does
 * not parse ("" otherwise). */
lw_chat_template_kind lw_chat_session_template(const lw_chat_session *s, const char **why);

/* Adds a user message of len bytes (NUL bytes allowed) and decodes the new part of the rendering, so the
 * reply can be generated. Ends a reply still open first. turn (may be NULL) receives what was decoded.
 * Errors leave the conversation as before the call: LW_ERR_TOO_LARGE for a message that does not fit the
 * context even after a restart, the template's status when it fails to render (raise_exception: its
 * text in the message), LW_ERR_NOMEM, or a decode error (then the cache is cleared and the next turn decodes
 * the whole conversation). */
lw_status lw_chat_session_user(lw_chat_session *s, const char *msg, size_t len, lw_chat_turn *turn);
/* The same with a message of another role answered: "tool" (a tool's result after a reply that called it, as
 * the template renders tool messages), or "user" (= lw_chat_session_user). */
lw_status lw_chat_session_send(lw_chat_session *s, const char *role, const char *msg, size_t len,
                               lw_chat_turn *turn);

/* Generates the next token of the reply with sampler smp (the first call also records the turn's prompt
 * tokens for the sampler's penalties, as lw_generate does). *token is the id and *piece, *len the text it
 * completes (valid UTF-8, may be empty, valid until the next call; the last token's piece also carries
 * bytes of a character that never completed). When the reply is over (end of generation, n_predict tokens,
 * a full context, lw_chat_session_end_reply) *token is -1 and *len 0. The finished reply joins the
 * conversation as an assistant message and the cache keeps it. piece and len may be NULL. */
lw_status lw_chat_session_next(lw_chat_session *s, lw_sampler *smp, int32_t *token, const char **piece,
                               size_t *len);
/* Ends the open reply here (stop reason LW_STOP_CALLBACK): it joins the conversation as generated so far.
 * Nothing to do when no reply is open. */
lw_status lw_chat_session_end_reply(lw_chat_session *s);
/* Limits of the replies from the next lw_chat_session_user on (ends a reply still open first): n_predict
 * (as lw_chat_session_params.n_predict) and stop strings (n_stop of them, stop_len[i] bytes each or
 * NUL-terminated when stop_len is NULL; copied). A reply ends at the first stop string that comes
 * (LW_STOP_STRING): the pieces handed on stop before it and never hold one, while the reply
 * (lw_chat_session_reply) and the cache keep the tokens generated. On failure the previous limits stay. */
lw_status lw_chat_session_set_limits(lw_chat_session *s, int32_t n_predict, const char *const *stop,
                                     const size_t *stop_len, size_t n_stop);
/* After lw_chat_session_end_reply: the text the reply still held back (the start of a stop string that did
 * not come, a character that never completed), to hand on after the last piece; "" otherwise (replies that
 * end in lw_chat_session_next or _push carry it in their last piece). Valid until the next call. */
const char *lw_chat_session_tail(const lw_chat_session *s, size_t *len);
/* The text of the reply being generated or last generated (len bytes, NUL-terminated as well; *len may be
 * NULL), and what the last turn did. */
const char *lw_chat_session_reply(const lw_chat_session *s, size_t *len);
const lw_chat_turn *lw_chat_session_turn(const lw_chat_session *s);

/* Adds a message without decoding (a conversation restored from storage, say: role "user", "assistant",
 * ...): the next lw_chat_session_user decodes it with the rest. Ends a reply still open first. */
lw_status lw_chat_session_add(lw_chat_session *s, const char *role, const char *content, size_t len);
/* Starts over: the messages but the system prompt are dropped and the cache cleared (the caller reseeds its
 * sampler if it wants the same replies again). */
void lw_chat_session_reset(lw_chat_session *s);

/* The conversation: message count and message i (role, content of *len bytes; NUL-terminated as well). */
size_t lw_chat_session_n_messages(const lw_chat_session *s);
lw_status lw_chat_session_message(const lw_chat_session *s, size_t i, const char **role, const char **content,
                                  size_t *len);
/* The token ids the KV cache holds for the conversation (lw_context_n_past of them; valid until the next
 * call on the session). */
const int32_t *lw_chat_session_tokens(const lw_chat_session *s, size_t *n);

/* Sessions whose KV cache lives elsewhere (the WebGPU model, decoding asynchronously from JavaScript): the
 * session plans and the caller decodes. lw_chat_session_user then decodes nothing: the caller truncates its
 * cache to turn->from_cell cells and decodes the ids of lw_chat_session_prompt there. For the reply the caller
 * samples each token itself and hands it to lw_chat_session_push, which says whether to decode it (*decode;
 * also for the token that ended a reply by length: the cache keeps the whole reply) and whether the reply
 * ended (lw_chat_session_turn(s)->stop). lw_chat_session_next is for sessions with a context. If the
 * caller's decode fails, lw_chat_session_abort_turn undoes the turn.
 *
 *     lw_chat_session_new_model(model, n_ctx, &p, &cs);
 *     lw_chat_session_user(cs, msg, len, &t);            // then: cache to t.from_cell, decode prompt ids
 *     do { id = sample(); lw_chat_session_push(cs, id, &dec, &piece, &n); if (dec) decode(id); }
 *     while (lw_chat_session_turn(cs)->stop == LW_STOP_NONE);
 */
lw_status lw_chat_session_new_model(lw_model *m, uint32_t n_ctx, const lw_chat_session_params *params,
                                    lw_chat_session **out);
/* The ids the last lw_chat_session_user asks to decode at turn->from_cell (valid until the next call). */
const int32_t *lw_chat_session_prompt(const lw_chat_session *s, size_t *n);
/* Records token id of the open reply (external sessions); *decode (may be NULL) is 1 when the caller must
 * decode it now. *piece, *len: the text it completes, as lw_chat_session_next. */
lw_status lw_chat_session_push(lw_chat_session *s, int32_t id, int *decode, const char **piece, size_t *len);
/* Undoes the last turn (its user message, its reply and messages added after them; messages that a restart
 * dropped stay dropped) and forgets the cache: the next turn decodes the whole conversation from cell 0. */
void lw_chat_session_abort_turn(lw_chat_session *s);

/* ------------------------------------------------------------------------------------------------------
 * Embeddings
 * A sequence's vector from the model's hidden states, as llama.cpp's embeddings: the output of the final
 * norm (before the output head) for each token, pooled over the sequence (mean, first token, last token,
 * or none: one vector per token) and optionally normalised (llama.cpp's embd_normalize). Needs a context
 * created with lw_context_params.embeddings = 1. Each input is its own sequence: lw_embed clears the
 * context's cells first, and an input longer than n_batch is decoded in steps of n_batch (attention is
 * causal, so the steps see what one batch would; the mean is accumulated across them).
 *
 *     lw_context_params cp = lw_context_default_params(); cp.embeddings = 1;
 *     lw_context_create(m, &cp, &c);
 *     lw_embed_params ep = lw_embed_default_params(); ep.pooling = LW_POOLING_MEAN; ep.normalize = 2;
 *     float v[n_embd]; size_t n;
 *     lw_embed_text(c, "hello", 5, 1, 1, &ep, v, n_embd, &n, NULL);
 *
 * Architectures: every decoder this engine runs (causal attention). Encoder models (BERT, nomic-bert,
 * jina-bert: bge, e5, nomic-embed) are not loaded yet: they need the BERT graph (token type embeddings,
 * absolute positions, LayerNorm with biases, GELU FFN, bidirectional attention without a KV cache).
 * ---------------------------------------------------------------------------------------------------- */

/* How token vectors become one vector (llama.cpp's llama_pooling_type; the values are its). */
typedef enum lw_pooling {
    LW_POOLING_UNSPECIFIED = -1, /* the model's <arch>.pooling_type; none when the file has no such key */
    LW_POOLING_NONE = 0,         /* no pooling: one vector per token                                     */
    LW_POOLING_MEAN = 1,         /* the mean of the tokens' vectors                                      */
    LW_POOLING_CLS = 2,          /* the first token's vector (BERT's [CLS])                              */
    LW_POOLING_LAST = 3,         /* the last token's vector (decoder embedding models)                   */
    LW_POOLING_RANK = 4          /* a reranker's score: not supported (needs a classification head)       */
} lw_pooling;

/* The pooling a file asks for (<arch>.pooling_type), LW_POOLING_UNSPECIFIED when it has none. */
lw_pooling lw_model_pooling(const lw_model *m);

/* Embedding options; start from lw_embed_default_params(). */
typedef struct lw_embed_params {
    lw_pooling pooling; /* default LW_POOLING_UNSPECIFIED: the model's (none when it has none)           */
    int32_t normalize;  /* llama.cpp's embd_normalize, per output vector: -1 none (default), 0 scaled so
                           the largest |x| is 32760 (int16 range), 1 taxicab, 2 Euclidean (L2), p > 2 the
                           p-norm                                                                       */
} lw_embed_params;

lw_embed_params lw_embed_default_params(void);

/* Hidden state of output row i of the last decode in an embeddings context (n_embd floats), or NULL;
 * i = -1 is the last row. lw_decode with logits_all gives one row per token. */
const float *lw_get_embeddings(const lw_context *c, int32_t i);

/* Embeds one sequence of n tokens into out: n_embd floats, or n * n_embd with LW_POOLING_NONE (token after
 * token). cap is the room in out (floats); *n_out (may be NULL) gets the floats written. Clears the
 * context's cells before and leaves the sequence in them. Errors: LW_ERR_INVALID_ARG (not an embeddings
 * context, no tokens, an id out of range, cap too small), LW_ERR_TOO_LARGE (longer than the context),
 * LW_ERR_UNSUPPORTED (rank pooling, a non-causal model); the message is on the context. */
lw_status lw_embed(lw_context *c, const int32_t *tokens, int32_t n, const lw_embed_params *params, float *out,
                   size_t cap, size_t *n_out);
/* Several sequences, one after another: inputs[i] of lens[i] tokens; out holds their results back to back
 * (n_inputs vectors of n_embd, or with LW_POOLING_NONE one per token of each input in turn). */
lw_status lw_embed_batch(lw_context *c, const int32_t *const *inputs, const int32_t *lens, int32_t n_inputs,
                         const lw_embed_params *params, float *out, size_t cap, size_t *n_out);
/* One text, tokenized with the model's vocabulary (lw_model_tokenize's add_special and parse_special;
 * llama.cpp's llama-embedding uses 1, 1); *n_tokens (may be NULL) gets its token count. */
lw_status lw_embed_text(lw_context *c, const char *text, size_t len, int add_special, int parse_special,
                        const lw_embed_params *params, float *out, size_t cap, size_t *n_out, int32_t *n_tokens);
/* llama.cpp's common_embd_normalize: out = in scaled by the chosen norm (normalize as lw_embed_params). */
void lw_embed_normalize(const float *in, float *out, int32_t n, int32_t normalize);

/* ------------------------------------------------------------------------------------------------------
 * Tool calls
 * Function calling as chat models write it: the reply holds one or more calls in the format their chat
 * template taught them, parsed here into OpenAI-shaped calls (a name and its arguments as JSON text), and a
 * grammar that makes a reply exactly such calls, built from OpenAI `tools` definitions (each function's
 * `parameters` JSON Schema becomes its arguments' grammar through lw_json_schema_to_gbnf's converter):
 *
 *     lw_tool_calls *tc;
 *     lw_tool_calls_parse(reply, len, LW_TOOL_FORMAT_HERMES, NULL, &tc);
 *     for (size_t i = 0; i < lw_tool_calls_count(tc); i++)
 *         printf("%s(%s)\n", lw_tool_calls_get(tc, i)->name, lw_tool_calls_get(tc, i)->arguments);
 *     lw_tool_calls_free(tc);
 *
 *     lw_grammar *g;   // tool_choice "required": the reply is one or more calls of these tools, nothing else
 *     lw_grammar_from_tools(tools_json, n, LW_TOOL_FORMAT_HERMES, NULL, 1, vocab, NULL, &g);
 *
 * tool_choice "auto" is generation without a grammar and parsing afterwards (text without calls is content).
 * ---------------------------------------------------------------------------------------------------- */

/* How a model writes tool calls. */
typedef enum lw_tool_format {
    LW_TOOL_FORMAT_AUTO = 0, /* parse: try them all; grammar: Hermes                                      */
    LW_TOOL_FORMAT_HERMES,   /* <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, repeated
                                (Hermes 2 Pro, Qwen 2.5 / Qwen 3, QwQ, many fine-tunes)                   */
    LW_TOOL_FORMAT_LLAMA3,   /* the reply is {"name": "f", "parameters": {...}} (Llama 3.1-3.3 JSON tool
                                calling; after <|python_tag|> when control tokens are printed)          */
    LW_TOOL_FORMAT_MISTRAL   /* [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] (Mistral Nemo / Small;
                                [TOOL_CALLS] is a control token: a grammar starts at the array)          */
} lw_tool_format;

/* The format a chat template teaches (NULL: none): Hermes when it writes <tool_call>, Mistral for
 * [TOOL_CALLS], Llama 3 for <|python_tag|> / ipython; LW_TOOL_FORMAT_AUTO when it shows none of them. */
lw_tool_format lw_tool_format_detect(const char *chat_template);

/* One call (strings NUL-terminated, owned by the lw_tool_calls). */
typedef struct lw_tool_call {
    const char *name;      /* the function's name                                                     */
    const char *arguments; /* its arguments: a JSON object's text as the model wrote it ("{}" when absent) */
} lw_tool_call;

typedef struct lw_tool_calls lw_tool_calls;

/* Parses a reply. Malformed calls are not calls: their text stays in the content. As lw_model_load_file,
 * *out is set even on failure (unless memory ran out): read lw_tool_calls_error and free it either way. */
lw_status lw_tool_calls_parse(const char *text, size_t len, lw_tool_format format, const lw_allocator *alloc,
                              lw_tool_calls **out);
size_t lw_tool_calls_count(const lw_tool_calls *t);
const lw_tool_call *lw_tool_calls_get(const lw_tool_calls *t, size_t i); /* NULL past the end */
/* The reply without its calls (outside text, spaces at both ends trimmed; NUL-terminated), len may be NULL. */
const char *lw_tool_calls_content(const lw_tool_calls *t, size_t *len);
/* OpenAI's tool_calls array, NUL-terminated, owned by t: [{"id": "call_0", "type": "function",
 * "function": {"name": "f", "arguments": "{\"x\": 1}"}}, ...] ("[]" without calls). */
const char *lw_tool_calls_json(const lw_tool_calls *t, size_t *len);
const char *lw_tool_calls_error(const lw_tool_calls *t);
void lw_tool_calls_free(lw_tool_calls *t);

/* GBNF for replies made of calls of the given tools: tools is OpenAI's array ([{"type": "function",
 * "function": {"name": ..., "parameters": {JSON Schema}}}, ...]; bare function objects too). only: one
 * function's name (tool_choice naming a function), NULL: any of them. parallel: 1 allows several calls
 * (Hermes: blocks one per line; Mistral: array items), 0 exactly one (Llama 3 always one). Names must be
 * OpenAI's [a-zA-Z0-9_-]{1,64}. The text is allocated with alloc (free with lw_grammar_text_free); on
 * failure a message goes to err (err_size bytes, may be NULL). */
lw_status lw_tool_grammar_gbnf(const char *tools, size_t len, lw_tool_format format, const char *only,
                               int parallel, const lw_allocator *alloc, char **out, size_t *out_len, char *err,
                               size_t err_size);
/* The same as a grammar for vocab (lw_grammar_parse of that text; the message is on *out on failure). */
lw_status lw_grammar_from_tools(const char *tools, size_t len, lw_tool_format format, const char *only,
                                int parallel, const lw_vocab *vocab, const lw_allocator *alloc, lw_grammar **out);

#ifdef __cplusplus
}
#endif
#endif /* LLAMAWEB_H */
