/* Tiled quantized matrix products for steps of many tokens (prompts): many weight rows times many activation
 * rows at once, each output bit-identical to one of the x86-order dots of quant-dot.h.
 *
 * Why they can be fast and exact at once: every dot they replace is a chain, per (weight row, token), of
 * exact integer block sums each turned into float and fused-multiply-added with a float scale. Integer sums
 * may be formed in any order, so a kernel is free to lay weights out as it likes (here: a panel of 16 rows
 * interleaved 4 bytes at a time, rebuilt per call in thread scratch, so one VNNI instruction forms 16 rows'
 * partial sums for one token) as long as each (row, token) keeps its float steps in the reference's order. */
#ifndef LW_QUANT_GEMM_H
#define LW_QUANT_GEMM_H

#include "cpu/quant-dot.h"

/* c[t * cs + r] = ref(k, w row r, a row t) for r < m, t < nt, with rows of w ws bytes apart and rows of a
 * (already in the activation type) as bytes apart; scratch: lw__quant_gemm_scratch(k, nt) bytes, 64-byte
 * aligned, private to the calling thread. */
typedef void (*lw__quant_gemm_fn)(int64_t k, const void *w, size_t ws, int64_t m, const void *a, size_t as,
                                  int64_t nt, float *c, size_t cs, void *scratch);

/* The tiled kernel that gives ref's bits on this CPU, or NULL (no such kernel, CPU lacks the instructions,
 * LW_CPU_KERNELS=scalar). ref is one of the lw__vec_dot_*_x86* functions of quant-dot.h. */
lw__quant_gemm_fn lw__quant_gemm_fast(lw__vec_dot_fn ref);
/* The same without looking at LW_CPU_KERNELS (tests). */
lw__quant_gemm_fn lw__quant_gemm_x86(lw__vec_dot_fn ref);

/* Many-token kernels in the engine's own float order (as the fast decode kernels of quant-gemv.h): the exact
 * integer block sums, then per (row, token) one fma per block (Q4_0, Q8_0: acc = fma(float(sum_b), dw_b *
 * da_b, acc)) or per super-block (Q4_K: that chain plus one for the mins, result acc - acc_min; Q6_K: the
 * -32 offset inside the integer sum), in block order from 0 (tests/test-quant-gemm.c recomputes those bits
 * in scalar C), where ggml's x86 order keeps several float lanes or sub-block steps per (row, token). Same
 * contract and scratch as lw__quant_gemm_fn, for any layout llama.cpp would give the weights (the order is
 * the kernel's, not ggml's). AVX2: Q4_0, Q8_0, Q4_K, Q6_K; AVX-512 VNNI: Q4_0 (the own order is llama.cpp's
 * repacked one there, so the kernel is also the exact one) and Q8_0; VNNI CPUs keep their exact tiles for
 * the others. Activations in -127..127 (the engine's quantizers). */
typedef enum lw__qgemm_isa {
    LW_QGEMM_BEST = 0,    /* the fastest this CPU runs                       */
    LW_QGEMM_AVX2 = 1,    /* AVX2 + FMA + F16C (quant-gemm-avx2.c)            */
    LW_QGEMM_VNNI512 = 2, /* AVX-512 VNNI on 512-bit registers (quant-gemm-x86.c) */
    LW_QGEMM_SIMD128 = 3  /* wasm simd128: the decode kernels' bits per token (quant-gemv-wasm.c) */
} lw__qgemm_isa;
/* The kernel for this type on isa, or NULL (none, CPU lacks the instructions); ignores LW_CPU_KERNELS. */
lw__quant_gemm_fn lw__quant_gemm_own_isa(uint32_t type, lw__qgemm_isa isa);
/* What the engine uses: NULL under LW_CPU_KERNELS=exact|scalar, the AVX2 kernel under =avx2, else BEST. */
lw__quant_gemm_fn lw__quant_gemm_own(uint32_t type);

/* Bytes of per-thread scratch a kernel needs for rows of k elements and up to nt tokens. */
size_t lw__quant_gemm_scratch(int64_t k, int64_t nt);

/* Weight rows a kernel takes at a time: give each thread a multiple of it. */
#define LW_QUANT_GEMM_ROWS 16

#endif
