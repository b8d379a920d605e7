/* Facts shared by the GGUF reader and writer (src/gguf/). */
#ifndef LW_GGUF_INTERNAL_H
#define LW_GGUF_INTERNAL_H

#include "core/core.h"

#define LW_GGUF_MAGIC             0x46554747u /* "GGUF" read as a little-endian u32              */
#define LW_GGUF_DEFAULT_ALIGNMENT 32          /* when general.alignment is absent                */
#define LW_GGUF_MAX_NAME          64          /* tensor names are < 64 bytes (ggml's GGML_MAX_NAME) */
#define LW_GGUF_MAX_DIMS          4
#define LW_GGUF_MAX_KEY           65535       /* keys longer than this are surely hostile        */
#define LW_GGUF_MAX_DEPTH         8           /* nesting of arrays of arrays                     */
/* Metadata we are willing to hold in memory (tokenizer tables are a few MB; this refuses hostile counts
 * that the file size alone would allow, e.g. in a multi-GB sparse file). */
#define LW_GGUF_MAX_META_BYTES    ((uint64_t)1 << 30)

/* Bytes one element of a scalar value type occupies in the file (0 for STRING and ARRAY). */
size_t lw__gguf_scalar_size(lw_gguf_type t);
/* Bytes one element occupies in memory in lw_gguf_value arrays (packed native form). */
size_t lw__gguf_elem_mem_size(lw_gguf_type t);
/* Smallest number of file bytes one element of type t can take (strings: 8, arrays: 12). */
size_t lw__gguf_min_file_size(lw_gguf_type t);

/* Validates a tensor shape and type as the reader does; on success sets *n_elements and *n_bytes. On failure
 * writes a message naming the tensor into err. */
lw_status lw__gguf_check_tensor(char *err, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                uint64_t *n_elements, uint64_t *n_bytes);

/* FNV-1a over a NUL-terminated string: used for key and tensor-name lookups. */
static inline uint64_t lw__hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

#endif
