/* Internal core helpers shared by every module: allocation through the injectable allocator, checked size
 * arithmetic, error messages kept on objects, half/bfloat conversions. Internal names are lw__*. */
#ifndef LW_CORE_H
#define LW_CORE_H

#include "llamaweb.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------------------
 * Allocation: every module takes an lw_allocator and calls these (a NULL allocator means libc).
 * ------------------------------------------------------------------------------------------------------- */

/* The allocator to store on an object: *a when given (must have all three functions), else libc's. */
lw_allocator lw__allocator_or_default(const lw_allocator *a);
void *lw__malloc(const lw_allocator *a, size_t n);
void *lw__calloc(const lw_allocator *a, size_t count, size_t size); /* zeroed, overflow-checked */
void *lw__realloc(const lw_allocator *a, void *p, size_t n);
void lw__free(const lw_allocator *a, void *p);
char *lw__strdup(const lw_allocator *a, const char *s);

/* ---------------------------------------------------------------------------------------------------------
 * Checked arithmetic: every size product in the project goes through these (stb's rule). They return false
 * on overflow and leave *out unspecified.
 * ------------------------------------------------------------------------------------------------------- */

static inline bool lw__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool lw__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool lw__mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool lw__add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
/* Rounds x up to a multiple of the power of two a; false on overflow. */
static inline bool lw__align_up_u64(uint64_t x, uint64_t a, uint64_t *out) {
    uint64_t t;
    if (!lw__add_u64(x, a - 1, &t)) return false;
    *out = t & ~(a - 1);
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * Error messages kept on objects: a fixed buffer inside each object, so setting one never allocates.
 * ------------------------------------------------------------------------------------------------------- */

#define LW_ERRMSG_SIZE 256

/* Formats a message into buf (LW_ERRMSG_SIZE bytes) and returns s, so callers write
 * `return lw__errorf(g->err, LW_ERR_TRUNCATED, "key '%s': ...", key);`. */
lw_status lw__errorf(char *buf, lw_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---------------------------------------------------------------------------------------------------------
 * Number formats
 * ------------------------------------------------------------------------------------------------------- */

float lw__fp16_to_fp32(uint16_t h);
uint16_t lw__fp32_to_fp16(float f); /* round to nearest even, as ggml's scalar path */
float lw__bf16_to_fp32(uint16_t h);
uint16_t lw__fp32_to_bf16(float f); /* round to nearest even, NaN kept quiet, as ggml */

/* Little-endian loads from unaligned bytes (GGUF is little-endian; so are all our targets). */
static inline uint16_t lw__rd_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t lw__rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t lw__rd_u64(const uint8_t *p) {
    return (uint64_t)lw__rd_u32(p) | ((uint64_t)lw__rd_u32(p + 4) << 32);
}

#endif
