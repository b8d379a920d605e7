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

#ifdef __cplusplus
}
#endif
#endif /* LLAMAWEB_H */
