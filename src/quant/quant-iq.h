/* IQ formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS): dequantization, the
 * IQ4 quantizers and the random-block generator are in quant-iq.c, the grid-search quantizers of the other
 * seven formats in quant-iq-search.c, the lookup tables in iq-grids.c / iq-grids.h. All are bit- or
 * byte-exact with ggml v0.4.0 (tests/test-quant-iq.c). Block structs live in quant.h; the traits table
 * (quant.c) points at these.
 *
 * Naming, per format <fmt>:
 *   void   lw__dequantize_row_<fmt>(const void *x, float *y, int64_t k);        ggml dequantize_row_<fmt>
 *   size_t lw__quantize_<fmt>(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
 *                             const float *imatrix);                             ggml quantize_<fmt>
 *          (IQ2_XXS, IQ2_XS, IQ1_S need an imatrix, as in ggml: without one they write nothing, return 0)
 *   void   lw__quantize_row_<fmt>_ref(const float *x, void *y, int64_t k);      where ggml has a _ref
 *
 * LW_QUANT_IQ_HAVE_<FMT> says which of them are provided (0: the traits entry stays NULL, so the build
 * works before an implementation lands). Set a flag to 1 in the same commit that implements it. */
#ifndef LW_QUANT_IQ_H
#define LW_QUANT_IQ_H

#include "quant/quant.h"

#include <string.h>

/* 1 when dequantize_row is implemented for the format. */
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ2_XXS 1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ2_XS  1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ2_S   1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ3_XXS 1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ3_S   1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ1_S   1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ1_M   1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ4_NL  1
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ4_XS  1
/* 1 when lw__quantize_<fmt> (the ggml_quantize_chunk path) is implemented. */
#define LW_QUANT_IQ_HAVE_QUANT_IQ2_XXS 1
#define LW_QUANT_IQ_HAVE_QUANT_IQ2_XS  1
#define LW_QUANT_IQ_HAVE_QUANT_IQ2_S   1
#define LW_QUANT_IQ_HAVE_QUANT_IQ3_XXS 1
#define LW_QUANT_IQ_HAVE_QUANT_IQ3_S   1
#define LW_QUANT_IQ_HAVE_QUANT_IQ1_S   1
#define LW_QUANT_IQ_HAVE_QUANT_IQ1_M   1
#define LW_QUANT_IQ_HAVE_QUANT_IQ4_NL  1
#define LW_QUANT_IQ_HAVE_QUANT_IQ4_XS  1
/* 1 when lw__quantize_row_<fmt>_ref is implemented (ggml has these five). */
#define LW_QUANT_IQ_HAVE_REF_IQ2_S   1
#define LW_QUANT_IQ_HAVE_REF_IQ3_XXS 1
#define LW_QUANT_IQ_HAVE_REF_IQ3_S   1
#define LW_QUANT_IQ_HAVE_REF_IQ4_NL  1
#define LW_QUANT_IQ_HAVE_REF_IQ4_XS  1

#define LW__QUANT_IQ_DECL(fmt)                                                                               \
    void lw__dequantize_row_##fmt(const void *x, float *y, int64_t k);                                       \
    size_t lw__quantize_##fmt(const float *src, void *dst, int64_t nrows, int64_t n_per_row,                 \
                              const float *imatrix);

LW__QUANT_IQ_DECL(iq2_xxs)
LW__QUANT_IQ_DECL(iq2_xs)
LW__QUANT_IQ_DECL(iq2_s)
LW__QUANT_IQ_DECL(iq3_xxs)
LW__QUANT_IQ_DECL(iq3_s)
LW__QUANT_IQ_DECL(iq1_s)
LW__QUANT_IQ_DECL(iq1_m)
LW__QUANT_IQ_DECL(iq4_nl)
LW__QUANT_IQ_DECL(iq4_xs)

void lw__quantize_row_iq2_s_ref(const float *x, void *y, int64_t k);
void lw__quantize_row_iq3_xxs_ref(const float *x, void *y, int64_t k);
void lw__quantize_row_iq3_s_ref(const float *x, void *y, int64_t k);
void lw__quantize_row_iq4_nl_ref(const float *x, void *y, int64_t k);
void lw__quantize_row_iq4_xs_ref(const float *x, void *y, int64_t k);

/* Random but valid blocks, for tests and synthetic models (IQ2_XXS, IQ2_XS and IQ1_S cannot be quantized
 * without an importance matrix, and random blocks cover every code). Every grid index is in range, sign
 * fields are drawn in their stored width (7 bits + implied parity for IQ2_XXS/IQ2_XS/IQ3_XXS, full bytes for
 * IQ2_S/IQ3_S), sub-block scales are uniform over their codes, and the fp16 super-block scale d is finite and
 * positive, chosen so that every decoded |value| <= amax (d = amax / (largest value per unit d) * u,
 * u uniform in [0.5, 0.99]). Works for all nine IQ types.
 * lw__iq_random_block: one block; *rng is the generator state (any value; advanced). LW_ERR_INVALID_ARG for
 * a non-IQ type, NULL pointers, or an amax that is not finite and positive or whose d is outside fp16.
 * lw__iq_random_blocks: n_blocks consecutive blocks with amax = 1, seeded; writes nothing for bad input. */
#define LW_QUANT_IQ_HAVE_RANDOM_BLOCKS 1
lw_status lw__iq_random_block(uint32_t type, uint64_t *rng, float amax, void *block);
void lw__iq_random_blocks(uint32_t type, void *dst, int64_t n_blocks, uint64_t seed);

#endif
