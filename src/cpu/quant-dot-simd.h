/* Fast (SIMD) versions of the x86-order quantized dots of quant-dot.h, chosen at run time.
 *
 * Each one returns exactly the float bits of the scalar x86-order reference it replaces (the references add
 * in ggml's AVX2 lane order, so these are the same arithmetic done 8 lanes at a time); tests/
 * test-quant-dot-simd.c checks that on random rows. The references stay the fallback (other CPUs, other
 * architectures, LW_CPU_KERNELS=scalar).
 *
 * AVX2 versions (quant-dot-avx2.c) exist for: Q8_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS
 * (x86 order); the repacked gemv/gemm orders of Q4_0, IQ4_NL, MXFP4, Q4_K, Q2_K; and the generic Q4_0
 * and IQ4_NL dots (lw__vec_dot_*_ref, which the engine keeps for plain/tied tables). Not yet: IQ1/IQ2/IQ3,
 * other generic dots, AVX-512 versions (the AVX2 ones give the same bits there). */
#ifndef LW_QUANT_DOT_SIMD_H
#define LW_QUANT_DOT_SIMD_H

#include "cpu/quant-dot.h"

/* The AVX2 (+FMA, F16C) version of the reference dot `ref` (one of the lw__vec_dot_*_x86* functions), or
 * NULL when this CPU lacks AVX2/FMA/F16C, this build is not x86-64, or there is no such version. Ignores
 * LW_CPU_KERNELS: tests use it to compare against the reference. */
lw__vec_dot_fn lw__quant_dot_avx2(lw__vec_dot_fn ref);

/* The WebAssembly simd128 version of the reference dot `ref` (x86-order or generic references the engine
 * uses; quant-dot-wasm.c), or NULL outside a -msimd128 wasm build or when there is none. Ignores
 * LW_CPU_KERNELS. */
lw__vec_dot_fn lw__quant_dot_wasm(lw__vec_dot_fn ref);

/* The fastest dot that gives the same bits as `ref` on this CPU: its SIMD version where one exists and
 * LW_CPU_KERNELS is not "scalar", else `ref` itself (also NULL for NULL). For the selectors. */
lw__vec_dot_fn lw__quant_dot_fast(lw__vec_dot_fn ref);

/* The AVX2 version of the activation quantizer `ref` (lw__quantize_row_q8_0_x86: the same bytes), or NULL
 * (no AVX2/FMA/F16C, not x86-64, no such version). Ignores LW_CPU_KERNELS. */
lw__from_float_fn lw__quant_act_avx2(lw__from_float_fn ref);

/* lw__quant_act_avx2(ref) where there is one and LW_CPU_KERNELS is not "scalar", else ref. */
lw__from_float_fn lw__quant_act_fast(lw__from_float_fn ref);

#endif
