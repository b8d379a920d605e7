/* Quantized weight formats: ggml-exact block layouts, the per-type traits table, and the scalar reference
 * (de)quantizers. Every format's bytes are identical to ggml's (v0.4.0), so GGUF tensor data is used as is
 * and tests/test-quant-oracle.c compares us to libggml-base bit for bit.
 *
 * Half-precision fields are stored as uint16_t bit patterns (lw__fp16_to_fp32 converts them). Each struct is
 * followed by a static size assertion; tests/test-quant.c also checks sizeof == lw_type_get()->type_size. */
#ifndef LW_QUANT_H
#define LW_QUANT_H

#include "llamaweb.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Block sizes (elements per block)
 * ------------------------------------------------------------------------------------------------------- */

#define LW_QK_K 256      /* super-block size of the K-quants, ternary and most IQ formats */
#define LW_K_SCALE_SIZE 12 /* bytes of packed 6-bit scales/mins in Q4_K and Q5_K          */
#define LW_QK1_0 128
#define LW_QK2_0 64
#define LW_QK4_0 32
#define LW_QK4_1 32
#define LW_QK5_0 32
#define LW_QK5_1 32
#define LW_QK8_0 32
#define LW_QK8_1 32
#define LW_QK_MXFP4 32
#define LW_QK_NVFP4 64
#define LW_QK_NVFP4_SUB 16 /* NVFP4 elements sharing one UE4M3 scale */
#define LW_QK4_NL 32

/* ---------------------------------------------------------------------------------------------------------
 * Simple block formats: x = d * q (+ m)
 * ------------------------------------------------------------------------------------------------------- */

/* Q1_0: 1 bit per weight, x = d * (bit ? +1 : -1). */
typedef struct {
    uint16_t d;                /* scale (fp16)                          */
    uint8_t qs[LW_QK1_0 / 8];  /* bit j of byte i is element 8*i + j    */
} lw__block_q1_0;
_Static_assert(sizeof(lw__block_q1_0) == 18, "q1_0 block size");

/* Q2_0: 2 bits per weight. */
typedef struct {
    uint16_t d;               /* scale (fp16)              */
    uint8_t qs[LW_QK2_0 / 4]; /* 4 quants per byte         */
} lw__block_q2_0;
_Static_assert(sizeof(lw__block_q2_0) == 18, "q2_0 block size");

/* Q4_0: x = d * (q - 8), q in 0..15. */
typedef struct {
    uint16_t d;               /* scale (fp16)                                              */
    uint8_t qs[LW_QK4_0 / 2]; /* low nibble of byte j = element j, high nibble = j + 16     */
} lw__block_q4_0;
_Static_assert(sizeof(lw__block_q4_0) == 18, "q4_0 block size");

/* Q4_1: x = d * q + m, q in 0..15. */
typedef struct {
    uint16_t d;               /* scale (fp16)                  */
    uint16_t m;               /* minimum (fp16)                */
    uint8_t qs[LW_QK4_1 / 2]; /* nibbles, same order as Q4_0   */
} lw__block_q4_1;
_Static_assert(sizeof(lw__block_q4_1) == 20, "q4_1 block size");

/* Q5_0: x = d * (q - 16), q in 0..31. */
typedef struct {
    uint16_t d;               /* scale (fp16)                                      */
    uint8_t qh[4];            /* 5th bit of each quant, bit j = element j (LE u32)  */
    uint8_t qs[LW_QK5_0 / 2]; /* low 4 bits, same order as Q4_0                     */
} lw__block_q5_0;
_Static_assert(sizeof(lw__block_q5_0) == 22, "q5_0 block size");

/* Q5_1: x = d * q + m, q in 0..31. */
typedef struct {
    uint16_t d;               /* scale (fp16)                    */
    uint16_t m;               /* minimum (fp16)                  */
    uint8_t qh[4];            /* 5th bits, as Q5_0               */
    uint8_t qs[LW_QK5_1 / 2]; /* low 4 bits                      */
} lw__block_q5_1;
_Static_assert(sizeof(lw__block_q5_1) == 24, "q5_1 block size");

/* Q8_0: x = d * q, q in -127..127. */
typedef struct {
    uint16_t d;            /* scale (fp16) */
    int8_t qs[LW_QK8_0];   /* quants       */
} lw__block_q8_0;
_Static_assert(sizeof(lw__block_q8_0) == 34, "q8_0 block size");

/* Q8_1: Q8_0 plus s = d * sum(q), used for activations paired with Q4_1/Q5_1 dot products. */
typedef struct {
    uint16_t d;            /* scale (fp16)           */
    uint16_t s;            /* d * sum(qs) (fp16)     */
    int8_t qs[LW_QK8_1];   /* quants                 */
} lw__block_q8_1;
_Static_assert(sizeof(lw__block_q8_1) == 36, "q8_1 block size");

/* ---------------------------------------------------------------------------------------------------------
 * Microscaling FP4 formats: 4-bit E2M1 values with a shared exponent/scale
 * ------------------------------------------------------------------------------------------------------- */

/* MXFP4: x = 2^(e-127) * e2m1(q); stored values are 2 * e2m1 so the scale is halved. */
typedef struct {
    uint8_t e;                    /* E8M0 shared exponent                          */
    uint8_t qs[LW_QK_MXFP4 / 2];  /* nibbles, same order as Q4_0                   */
} lw__block_mxfp4;
_Static_assert(sizeof(lw__block_mxfp4) == 17, "mxfp4 block size");

/* NVFP4: four sub-blocks of 16 values, each with an unsigned E4M3 scale. */
typedef struct {
    uint8_t d[LW_QK_NVFP4 / LW_QK_NVFP4_SUB]; /* UE4M3 scales, one per 16 elements           */
    uint8_t qs[LW_QK_NVFP4 / 2];              /* E2M1 nibbles, per sub-block as Q4_0 order   */
} lw__block_nvfp4;
_Static_assert(sizeof(lw__block_nvfp4) == 36, "nvfp4 block size");

/* ---------------------------------------------------------------------------------------------------------
 * Ternary formats (values -1, 0, +1 times d)
 * ------------------------------------------------------------------------------------------------------- */

/* TQ1_0: 1.6875 bpw; 5 trits per byte in qs (base-3, scaled to 0..255), 4 per byte in qh. */
typedef struct {
    uint8_t qs[(LW_QK_K - 4 * LW_QK_K / 64) / 5]; /* 240 elements, 5 per byte */
    uint8_t qh[LW_QK_K / 64];                     /* 16 elements, 4 per byte  */
    uint16_t d;                                   /* scale (fp16)             */
} lw__block_tq1_0;
_Static_assert(sizeof(lw__block_tq1_0) == 54, "tq1_0 block size");

/* TQ2_0: 2.0625 bpw; 2 bits per element, q in 0..2 meaning q - 1. */
typedef struct {
    uint8_t qs[LW_QK_K / 4]; /* 4 elements per byte */
    uint16_t d;              /* scale (fp16)        */
} lw__block_tq2_0;
_Static_assert(sizeof(lw__block_tq2_0) == 66, "tq2_0 block size");

/* ---------------------------------------------------------------------------------------------------------
 * K-quants: 256-element super-blocks of 16 or 8 sub-blocks with quantized sub-block scales
 * ------------------------------------------------------------------------------------------------------- */

/* Q2_K: x = d * sc * q - dmin * m, 16 sub-blocks of 16; 2.625 bpw. */
typedef struct {
    uint8_t scales[LW_QK_K / 16]; /* low nibble: scale, high nibble: min (4 bits each) */
    uint8_t qs[LW_QK_K / 4];      /* 2-bit quants                                      */
    uint16_t d;                   /* super-block scale for scales (fp16)               */
    uint16_t dmin;                /* super-block scale for mins (fp16)                 */
} lw__block_q2_K;
_Static_assert(sizeof(lw__block_q2_K) == 84, "q2_K block size");

/* Q3_K: x = d * (sc - 32) * q, q in -4..3; 16 sub-blocks of 16; 3.4375 bpw. */
typedef struct {
    uint8_t hmask[LW_QK_K / 8]; /* high bit of each quant (set = no offset)  */
    uint8_t qs[LW_QK_K / 4];    /* low 2 bits                                */
    uint8_t scales[12];         /* 16 6-bit scales, packed                   */
    uint16_t d;                 /* super-block scale (fp16)                  */
} lw__block_q3_K;
_Static_assert(sizeof(lw__block_q3_K) == 110, "q3_K block size");

/* Q4_K: x = d * sc * q - dmin * m; 8 sub-blocks of 32; 4.5 bpw. */
typedef struct {
    uint16_t d;                         /* super-block scale for scales (fp16) */
    uint16_t dmin;                      /* super-block scale for mins (fp16)   */
    uint8_t scales[LW_K_SCALE_SIZE];    /* 8 6-bit scales + 8 6-bit mins       */
    uint8_t qs[LW_QK_K / 2];            /* 4-bit quants                        */
} lw__block_q4_K;
_Static_assert(sizeof(lw__block_q4_K) == 144, "q4_K block size");

/* Q5_K: as Q4_K with a 5th bit per quant; 5.5 bpw. */
typedef struct {
    uint16_t d;                         /* super-block scale for scales (fp16) */
    uint16_t dmin;                      /* super-block scale for mins (fp16)   */
    uint8_t scales[LW_K_SCALE_SIZE];    /* 8 6-bit scales + 8 6-bit mins       */
    uint8_t qh[LW_QK_K / 8];            /* 5th bit of each quant               */
    uint8_t qs[LW_QK_K / 2];            /* low 4 bits                          */
} lw__block_q5_K;
_Static_assert(sizeof(lw__block_q5_K) == 176, "q5_K block size");

/* Q6_K: x = d * sc * (q - 32); 16 sub-blocks of 16 with int8 scales; 6.5625 bpw. */
typedef struct {
    uint8_t ql[LW_QK_K / 2];      /* low 4 bits of each quant   */
    uint8_t qh[LW_QK_K / 4];      /* high 2 bits                */
    int8_t scales[LW_QK_K / 16];  /* sub-block scales           */
    uint16_t d;                   /* super-block scale (fp16)   */
} lw__block_q6_K;
_Static_assert(sizeof(lw__block_q6_K) == 210, "q6_K block size");

/* Q8_K: activations for K-quant dot products (float scale, and sums of 16 quants). */
typedef struct {
    float d;                        /* scale                          */
    int8_t qs[LW_QK_K];             /* quants                         */
    int16_t bsums[LW_QK_K / 16];    /* sum of each group of 16 quants */
} lw__block_q8_K;
_Static_assert(sizeof(lw__block_q8_K) == 292, "q8_K block size");

/* ---------------------------------------------------------------------------------------------------------
 * IQ formats (lattice/grid codebooks; implemented in quant-iq.c)
 * ------------------------------------------------------------------------------------------------------- */

/* IQ2_XXS: 2.0625 bpw. */
typedef struct {
    uint16_t d;                   /* scale (fp16)                                          */
    uint16_t qs[LW_QK_K / 8];     /* per 32: 4 grid indices (8 bit) + 4x7 sign bits + scale */
} lw__block_iq2_xxs;
_Static_assert(sizeof(lw__block_iq2_xxs) == 66, "iq2_xxs block size");

/* IQ2_XS: 2.3125 bpw. */
typedef struct {
    uint16_t d;                   /* scale (fp16)                            */
    uint16_t qs[LW_QK_K / 8];     /* 9-bit grid index + 7-bit sign index     */
    uint8_t scales[LW_QK_K / 32]; /* two 4-bit scales per 32                 */
} lw__block_iq2_xs;
_Static_assert(sizeof(lw__block_iq2_xs) == 74, "iq2_xs block size");

/* IQ2_S: 2.5625 bpw. */
typedef struct {
    uint16_t d;                   /* scale (fp16)                                  */
    uint8_t qs[LW_QK_K / 4];      /* low 8 bits of grid indices, then sign bytes   */
    uint8_t qh[LW_QK_K / 32];     /* high 2 bits of grid indices                   */
    uint8_t scales[LW_QK_K / 32]; /* two 4-bit scales per 32                       */
} lw__block_iq2_s;
_Static_assert(sizeof(lw__block_iq2_s) == 82, "iq2_s block size");

/* IQ3_XXS: 3.0625 bpw. */
typedef struct {
    uint16_t d;                     /* scale (fp16)                                    */
    uint8_t qs[3 * LW_QK_K / 8];    /* grid indices, then scales + signs (u32 per 32)  */
} lw__block_iq3_xxs;
_Static_assert(sizeof(lw__block_iq3_xxs) == 98, "iq3_xxs block size");

/* IQ3_S: 3.4375 bpw. */
typedef struct {
    uint16_t d;                   /* scale (fp16)                   */
    uint8_t qs[LW_QK_K / 4];      /* low 8 bits of grid indices     */
    uint8_t qh[LW_QK_K / 32];     /* 9th bit of grid indices        */
    uint8_t signs[LW_QK_K / 8];   /* sign bits                      */
    uint8_t scales[LW_QK_K / 64]; /* two 4-bit scales per 64        */
} lw__block_iq3_s;
_Static_assert(sizeof(lw__block_iq3_s) == 110, "iq3_s block size");

/* IQ1_S: 1.5625 bpw. */
typedef struct {
    uint16_t d;                   /* scale (fp16)                                          */
    uint8_t qs[LW_QK_K / 8];      /* low 8 bits of grid indices                            */
    uint16_t qh[LW_QK_K / 32];    /* 3 high index bits x4, 3-bit scale, delta sign bit      */
} lw__block_iq1_s;
_Static_assert(sizeof(lw__block_iq1_s) == 50, "iq1_s block size");

/* IQ1_M: 1.75 bpw; the fp16 super-block scale is spread over the top nibbles of the scales words. */
typedef struct {
    uint8_t qs[LW_QK_K / 8];      /* grid index, low 8 bits                                  */
    uint8_t qh[LW_QK_K / 16];     /* grid index high 3 bits + delta sign bit, two per byte    */
    uint8_t scales[LW_QK_K / 32]; /* 3-bit block scales; top nibbles of the u16s form d       */
} lw__block_iq1_m;
_Static_assert(sizeof(lw__block_iq1_m) == 56, "iq1_m block size");

/* IQ4_NL: 4-bit indices into a fixed non-linear table, blocks of 32. */
typedef struct {
    uint16_t d;                /* scale (fp16)                   */
    uint8_t qs[LW_QK4_NL / 2]; /* nibbles, same order as Q4_0    */
} lw__block_iq4_nl;
_Static_assert(sizeof(lw__block_iq4_nl) == 18, "iq4_nl block size");

/* IQ4_XS: IQ4_NL in super-blocks of 256 with 6-bit sub-block scales. */
typedef struct {
    uint16_t d;                     /* super-block scale (fp16)            */
    uint16_t scales_h;              /* high 2 bits of the 8 scales         */
    uint8_t scales_l[LW_QK_K / 64]; /* low 4 bits of the 8 scales          */
    uint8_t qs[LW_QK_K / 2];        /* nibbles                             */
} lw__block_iq4_xs;
_Static_assert(sizeof(lw__block_iq4_xs) == 136, "iq4_xs block size");

/* ---------------------------------------------------------------------------------------------------------
 * Traits table
 * ------------------------------------------------------------------------------------------------------- */

/* Dequantizes k elements (a whole number of blocks) from x into y. */
typedef void (*lw__to_float_fn)(const void *x, float *y, int64_t k);
/* Quantizes k elements (a whole number of blocks): ggml's quantize_row_<fmt>_ref. */
typedef void (*lw__from_float_fn)(const float *x, void *y, int64_t k);
/* Quantizes nrows rows of n_per_row elements as ggml_quantize_chunk does (imatrix: n_per_row importance
 * weights, or NULL); returns bytes written. n_per_row must be a whole number of blocks. */
typedef size_t (*lw__quantize_fn)(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                  const float *imatrix);

/* What the rest of the engine needs to know about one weight format. */
typedef struct lw__quant_traits_t {
    uint32_t type;                  /* lw_type id                                                      */
    const char *name;               /* ggml's name                                                     */
    uint32_t block_size;            /* elements per block                                              */
    uint32_t type_size;             /* bytes per block (sizeof the block struct)                       */
    lw__to_float_fn to_float;       /* dequantize_row; NULL only while a format is not implemented yet */
    lw__from_float_fn from_float_ref; /* quantize_row_*_ref; NULL when ggml has none                   */
    lw__quantize_fn quantize;       /* ggml_quantize_chunk's path; NULL when not implemented           */
    bool requires_imatrix;          /* ggml_quantize_requires_imatrix                                  */
    bool imatrix_supported;         /* quantize uses an imatrix when given one (else it is refused)    */
} lw__quant_traits_t;

/* Traits of a weight format (the 28 ids F32..Q2_0 the engine stores weights in); NULL for other ids. */
const lw__quant_traits_t *lw__quant_traits(uint32_t type);

/* Checked wrappers: validate type, lengths (whole blocks) and sizes, and never touch memory past
 * nrows * row bytes. dst must hold nrows * (n_per_row / block_size) * type_size bytes.
 * LW_ERR_INVALID_ARG for NULL pointers, negative counts or partial blocks; LW_ERR_BAD_TENSOR_TYPE for ids
 * without traits; LW_ERR_UNSUPPORTED when the format cannot be (de)quantized this way (e.g. needs an
 * imatrix); LW_ERR_OVERFLOW when sizes overflow. */
lw_status lw__quantize(uint32_t type, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                       const float *imatrix);
lw_status lw__dequantize(uint32_t type, const void *src, float *dst, int64_t n);
/* Bytes of one row of n elements of type (0 with LW_ERR_* on error via *st when st != NULL). */
size_t lw__row_size(uint32_t type, int64_t n, lw_status *st);

/* Rounds to the nearest integer, ties to even, for |f| <= 2^22: adding 1.5 * 2^23 leaves the rounded value in
 * the low mantissa bits. ggml uses this trick (not lrintf) throughout its quantizers, so we must too. */
static inline int lw__nearest_int(float f) {
    const float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ggml's make_qp_quants: non-negative x (n values) quantized to 0..nmax with a weighted least-squares scale
 * (9 candidate scales, then passes moving single levels while the fit improves); returns the scale. Shared by
 * the K-quants' scale quantization (quant-k.c) and IQ3_XXS/IQ2 searches (quant-iq-search.c). */
float lw__make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights);

/* ---------------------------------------------------------------------------------------------------------
 * Scalar references (quant.c, quant-k.c, quant-misc.c)
 * ------------------------------------------------------------------------------------------------------- */

/* Per format: dequantize_row, quantize_row_*_ref, and the whole-rows quantizer of ggml_quantize_chunk
 * (lw__quantize_<fmt>, with an optional imatrix; F16/BF16/Q8_1/Q8_K have none of the latter in ggml's
 * chunk API but ours convert rows the same way). */
#define LW__QUANT_DECL(fmt)                                                                                  \
    void lw__dequantize_row_##fmt(const void *x, float *y, int64_t k);                                      \
    void lw__quantize_row_##fmt##_ref(const float *x, void *y, int64_t k);                                  \
    size_t lw__quantize_##fmt(const float *src, void *dst, int64_t nrows, int64_t n_per_row,                \
                              const float *imatrix);

LW__QUANT_DECL(f16)
LW__QUANT_DECL(bf16)
LW__QUANT_DECL(q4_0)
LW__QUANT_DECL(q4_1)
LW__QUANT_DECL(q5_0)
LW__QUANT_DECL(q5_1)
LW__QUANT_DECL(q8_0)
LW__QUANT_DECL(q8_1)
LW__QUANT_DECL(q2_K)
LW__QUANT_DECL(q3_K)
LW__QUANT_DECL(q4_K)
LW__QUANT_DECL(q5_K)
LW__QUANT_DECL(q6_K)
LW__QUANT_DECL(q8_K)
LW__QUANT_DECL(tq1_0)
LW__QUANT_DECL(tq2_0)
LW__QUANT_DECL(mxfp4)
LW__QUANT_DECL(nvfp4)
LW__QUANT_DECL(q1_0)
LW__QUANT_DECL(q2_0)

/* float -> int32 the way x86's cvttss2si converts (what ggml's C casts compile to on x86-64): truncation
 * toward zero, INT32_MIN for NaN and values outside int32. The reference quantizers use it wherever ggml
 * casts a float that extreme inputs (NaN, infinities, subnormal blocks whose 1/d overflows) can push out of
 * range: the result matches ggml on x86 and is the same on every target, without C's undefined behaviour. */
static inline int32_t lw__f2i_trunc(float f) {
    if (!(f > -0x1.000002p31f && f < 0x1p31f)) return INT32_MIN;
    return (int32_t)f;
}

/* (int)lroundf(f) as glibc computes it on x86-64: LONG_MIN (whose low 32 bits are 0) for NaN and values
 * outside long. */
static inline int lw__lroundf_int(float f) {
    if (!(f >= -0x1p63f && f < 0x1p63f)) return 0;
    return (int)(uint32_t)(uint64_t)(int64_t)roundf(f);
}

/* Small shared helpers (quant.c). */
float lw__e8m0_to_fp32_half(uint8_t e); /* 2^(e-128): the MXFP4 scale for values stored as 2 * e2m1 */
float lw__ue4m3_to_fp32(uint8_t x);     /* UE4M3 scale, halved as ggml does (values are 2 * e2m1)    */
extern const int8_t lw__kvalues_fp4[16]; /* E2M1 codes times 2: 0,1,2,3,4,6,8,12 and negatives      */

#endif
