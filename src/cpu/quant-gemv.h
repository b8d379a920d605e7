/* Fast decode products in their own summation order (not llama.cpp's): one activation row times many weight
 * rows, for steps of one token, where every weight byte is read once per step and the speed is set by how
 * fast the rows stream from memory.
 *
 * Why a second set next to the exact ones (quant-dot-simd.h, quant-gemm.h): reproducing llama.cpp's float
 * order per block (its repacked gemv for Q4_0/Q4_K is one scalar FMA chain per row) serialises the float
 * work. These kernels keep the exact integer block sums but add the scaled block results in vector lanes
 * (AVX-512: two blocks per register), with the activation's per-block share prepared once per call, and sum
 * the lanes once per row: results differ from the exact kernels by float rounding only (~1e-7 of the row's
 * magnitude; tests/test-quant-gemv.c bounds it against the scalar references). Rows are read one at a time,
 * front to back, so a thread's contiguous share of rows is one sequential stream.
 * The engine uses them unless LW_CPU_KERNELS asks for exact orders ("exact", "scalar"). */
#ifndef LW_QUANT_GEMV_H
#define LW_QUANT_GEMV_H

#include "cpu/quant-dot.h"

/* c[r] = dot(k, w row r, a) for r < m, w rows ws bytes apart, a one activation row in the weight type's
 * vec_dot_type (as lw__quant_dot(type)->act_from_float makes it). */
typedef void (*lw__quant_gemv_fn)(int64_t k, const void *w, size_t ws, int64_t m, const void *a, float *c);

/* Instruction sets a kernel may be asked for (tests force each one the CPU has). */
typedef enum lw__gemv_isa {
    LW_GEMV_BEST = 0,    /* the fastest this CPU runs                                          */
    LW_GEMV_AVX2 = 1,    /* AVX2 + FMA + F16C (x86-64)                                          */
    LW_GEMV_VNNI = 2,    /* AVX2 plus AVX-512 VNNI on 256-bit registers (Zen 4, Ice Lake and up) */
    LW_GEMV_SIMD128 = 3, /* WebAssembly simd128                                                */
    LW_GEMV_AVX512 = 4   /* 512-bit registers with VNNI (two blocks per step: Q4_0, Q8_0)       */
} lw__gemv_isa;

/* The kernel for weights of this type on isa, or NULL (no such kernel, the CPU lacks the instructions,
 * another architecture). Ignores LW_CPU_KERNELS. Types: Q4_0, Q8_0, Q4_K, Q6_K. */
lw__quant_gemv_fn lw__quant_gemv_isa(uint32_t type, lw__gemv_isa isa);

/* What the engine uses: lw__quant_gemv_isa(type, LW_GEMV_BEST) unless LW_CPU_KERNELS is "exact" or
 * "scalar" (llama.cpp's orders), else NULL. */
lw__quant_gemv_fn lw__quant_gemv_own(uint32_t type);

/* Unit of the engine's thread shares (each thread streams one contiguous range of whole units). */
#define LW_QUANT_GEMV_ROWS 4

#endif
