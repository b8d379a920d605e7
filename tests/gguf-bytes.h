/* Hand-assembled GGUF bytes for tests: a growable little-endian byte buffer with GGUF field writers, so
 * tests can build exactly the (valid or corrupt) layout they mean, independent of our writer. */
#ifndef LW_TEST_GGUF_BYTES_H
#define LW_TEST_GGUF_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gb {
    uint8_t *p; /* bytes        */
    size_t n;   /* used         */
    size_t cap; /* allocated    */
} gb;

static inline void gb_raw(gb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort(); /* test code: out of memory is fatal */
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static inline void gb_u8(gb *b, uint8_t v) {
    gb_raw(b, &v, 1);
}
static inline void gb_u32(gb *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gb_raw(b, x, 4);
}
static inline void gb_u64(gb *b, uint64_t v) {
    gb_u32(b, (uint32_t)v);
    gb_u32(b, (uint32_t)(v >> 32));
}
static inline void gb_str(gb *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_raw(b, s, strlen(s));
}
/* Header: magic, version, tensor count, kv count. */
static inline void gb_header(gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    gb_raw(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
static inline void gb_kv_u32(gb *b, const char *key, uint32_t v) {
    gb_str(b, key);
    gb_u32(b, 4 /* UINT32 */);
    gb_u32(b, v);
}
static inline void gb_kv_str(gb *b, const char *key, const char *v) {
    gb_str(b, key);
    gb_u32(b, 8 /* STRING */);
    gb_str(b, v);
}
/* A tensor info with n_dims dims from ne. */
static inline void gb_tensor(gb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                             uint64_t offset) {
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) gb_u64(b, ne[i]);
    gb_u32(b, type);
    gb_u64(b, offset);
}
static inline void gb_pad(gb *b, size_t align) {
    while (b->n % align) gb_u8(b, 0);
}
static inline void gb_free(gb *b) {
    free(b->p);
    memset(b, 0, sizeof(*b));
}

#endif
