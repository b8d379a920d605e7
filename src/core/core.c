/* Core helpers: allocator plumbing, status strings, messages, half/bfloat conversions. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Status strings
 * ------------------------------------------------------------------------------------------------------- */

static const char *const status_names[LW_STATUS_COUNT] = {
    [LW_OK] = "ok",
    [LW_ERR_INVALID_ARG] = "invalid argument",
    [LW_ERR_NOMEM] = "out of memory",
    [LW_ERR_IO] = "i/o error",
    [LW_ERR_TRUNCATED] = "truncated",
    [LW_ERR_BAD_MAGIC] = "bad magic",
    [LW_ERR_BAD_VERSION] = "unsupported version",
    [LW_ERR_BAD_VALUE_TYPE] = "bad value type",
    [LW_ERR_TOO_LARGE] = "too large",
    [LW_ERR_OVERFLOW] = "size overflow",
    [LW_ERR_BAD_STRING] = "bad string",
    [LW_ERR_DUPLICATE_KEY] = "duplicate key",
    [LW_ERR_DUPLICATE_NAME] = "duplicate tensor name",
    [LW_ERR_BAD_DIMS] = "bad dimensions",
    [LW_ERR_BAD_TENSOR_TYPE] = "bad tensor type",
    [LW_ERR_BAD_ALIGNMENT] = "bad alignment",
    [LW_ERR_OVERLAP] = "overlapping tensor data",
    [LW_ERR_OUT_OF_FILE] = "tensor data out of file",
    [LW_ERR_NOT_FOUND] = "not found",
    [LW_ERR_TYPE_MISMATCH] = "type mismatch",
    [LW_ERR_UNSUPPORTED] = "unsupported",
};

const char *lw_status_str(lw_status s) {
    if ((unsigned)s >= LW_STATUS_COUNT || !status_names[s]) return "unknown status";
    return status_names[s];
}

lw_status lw__errorf(char *buf, lw_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, LW_ERRMSG_SIZE, fmt, ap);
    va_end(ap);
    return s;
}

/* ---------------------------------------------------------------------------------------------------------
 * Allocator
 * ------------------------------------------------------------------------------------------------------- */

static void *libc_malloc(void *user, size_t n) {
    (void)user;
    return malloc(n ? n : 1);
}
static void *libc_realloc(void *user, void *p, size_t n) {
    (void)user;
    return realloc(p, n ? n : 1);
}
static void libc_free(void *user, void *p) {
    (void)user;
    free(p);
}

lw_allocator lw__allocator_or_default(const lw_allocator *a) {
    if (a && a->malloc && a->realloc && a->free) return *a;
    return (lw_allocator){libc_malloc, libc_realloc, libc_free, NULL};
}

void *lw__malloc(const lw_allocator *a, size_t n) {
    return a->malloc(a->user, n ? n : 1);
}

void *lw__calloc(const lw_allocator *a, size_t count, size_t size) {
    size_t n;
    if (!lw__mul_size(count, size, &n)) return NULL;
    void *p = a->malloc(a->user, n ? n : 1);
    if (p) memset(p, 0, n);
    return p;
}

void *lw__realloc(const lw_allocator *a, void *p, size_t n) {
    return a->realloc(a->user, p, n ? n : 1);
}

void lw__free(const lw_allocator *a, void *p) {
    if (p) a->free(a->user, p);
}

char *lw__strdup(const lw_allocator *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = lw__malloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---------------------------------------------------------------------------------------------------------
 * Half and bfloat16 (bit manipulation, no hardware dependence: the CPU reference must be the same
 * everywhere, including wasm).
 * ------------------------------------------------------------------------------------------------------- */

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float lw__fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24 */
        float v = (float)man * f32_from_bits(0x33800000u); /* 2^-24 */
        return sign ? -v : v;
    }
    /* Inf stays inf; a NaN comes out quiet, as the hardware conversions ggml uses (F16C, NEON) give it. */
    if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0));
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t lw__fp32_to_fp16(float f) {
    /* Same algorithm as ggml's portable fp32->fp16 (Maratyszcza's FP16): rounds to nearest even. */
    const float scale_to_inf = f32_from_bits(0x77800000u);  /* 2^112 */
    const float scale_to_zero = f32_from_bits(0x08800000u); /* 2^-110 */
    uint32_t w = f32_bits(f);
    uint32_t shl1_w = w + w;
    uint32_t sign = w & 0x80000000u;
    float absf = f32_from_bits(w & 0x7fffffffu);
    float b = (absf * scale_to_inf) * scale_to_zero;
    uint32_t bias = shl1_w & 0xff000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    b = f32_from_bits((bias >> 1) + 0x07800000u) + b;
    uint32_t bits = f32_bits(b);
    uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
    uint32_t mantissa_bits = bits & 0x00000fffu;
    uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

float lw__bf16_to_fp32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t lw__fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* NaN: force quiet */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
