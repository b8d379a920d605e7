/* IQ formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS): the functions
 * quant-iq.c implements. Block structs live in quant.h; the traits table (quant.c) points at these.
 *
 * Naming, per format <fmt>:
 *   void   lw__dequantize_row_<fmt>(const void *x, float *y, int64_t k);        ggml dequantize_row_<fmt>
 *   size_t lw__quantize_<fmt>(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
 *                             const float *imatrix);                             ggml quantize_<fmt>
 *   void   lw__quantize_row_<fmt>_ref(const float *x, void *y, int64_t k);      where ggml has a _ref
 *
 * LW_QUANT_IQ_HAVE_<FMT> says which of them quant-iq.c provides (0: the traits entry stays NULL, so the
 * build works before the implementation lands). Set a flag to 1 in the same commit that implements it. */
#ifndef LW_QUANT_IQ_H
#define LW_QUANT_IQ_H

#include "quant/quant.h"

/* 1 when quant-iq.c implements dequantize_row for the format. */
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ2_XXS 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ2_XS 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ2_S 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ3_XXS 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ3_S 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ1_S 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ1_M 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ4_NL 0
#define LW_QUANT_IQ_HAVE_DEQUANT_IQ4_XS 0
/* 1 when quant-iq.c implements lw__quantize_<fmt> (the ggml_quantize_chunk path). */
#define LW_QUANT_IQ_HAVE_QUANT_IQ2_XXS 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ2_XS 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ2_S 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ3_XXS 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ3_S 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ1_S 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ1_M 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ4_NL 0
#define LW_QUANT_IQ_HAVE_QUANT_IQ4_XS 0
/* 1 when quant-iq.c implements lw__quantize_row_<fmt>_ref (ggml has these five). */
#define LW_QUANT_IQ_HAVE_REF_IQ2_S 0
#define LW_QUANT_IQ_HAVE_REF_IQ3_XXS 0
#define LW_QUANT_IQ_HAVE_REF_IQ3_S 0
#define LW_QUANT_IQ_HAVE_REF_IQ4_NL 0
#define LW_QUANT_IQ_HAVE_REF_IQ4_XS 0

#define LW__QUANT_IQ_DECL(fmt)                                                                               \
    void lw__dequantize_row_##fmt(const void *x, float *y, int64_t k);                                      \
    size_t lw__quantize_##fmt(const float *src, void *dst, int64_t nrows, int64_t n_per_row,                \
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

/* Optional, for tests: fills n_blocks random but valid blocks of type (seeded), e.g. with grid indices in
 * range. Declared here so tests can find it; provided when LW_QUANT_IQ_HAVE_RANDOM_BLOCKS is 1. */
#define LW_QUANT_IQ_HAVE_RANDOM_BLOCKS 0
void lw__iq_random_blocks(uint32_t type, void *dst, int64_t n_blocks, uint64_t seed);

#endif
