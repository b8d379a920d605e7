/* Shared between the x86 tiled kernels of quant-gemm-x86.c (AVX-512 VNNI) and quant-gemm-avx2.c (AVX2):
 * the per-block activation data both tile loops start from. Not part of quant-gemm.h's contract. */
#ifndef LW_QUANT_GEMM_INTERNAL_H
#define LW_QUANT_GEMM_INTERNAL_H

#include "cpu/quant-gemm.h"

/* Per block of one token: its activation scale and the integer correction the kernel starts from. */
typedef struct lw__act_aux {
    float d;      /* activation block scale (fp16 widened)                                   */
    int32_t corr; /* added to the block's integer sum (mul * sum of quants: Q4_0 -8, Q8_0 -128) */
} lw__act_aux;

/* aux[t * nb + b] for tokens t < nt (Q8_0 rows as bytes apart) and blocks b < nb. x86 only (AVX2). */
void lw__qgemm_q8_0_aux(int64_t nb, const uint8_t *a, size_t as, int64_t nt, lw__act_aux *aux, int32_t mul);

/* The AVX2 own-order kernels (quant-gemm-avx2.c), or NULL (type, CPU). */
lw__quant_gemm_fn lw__quant_gemm_own_avx2(uint32_t type);

#endif
