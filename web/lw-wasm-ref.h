/* CPU reference shared by the wasm test entry points of the weight kernels (lw-wasm-api.c: mat-vec,
 * lw-wasm-matmat.c: mat-mat): deterministic random weights quantized by our C quantizers, dequantized back,
 * dot products in double, and the normalised MSE of a GPU result against them. */
#ifndef LW_WASM_REF_H
#define LW_WASM_REF_H

#include "core/core.h"

#include <stddef.h>
#include <stdint.h>

/* Deterministic uniform numbers in [-1, 1) (xorshift32; *s must not be 0). */
float lw_wasm_rnd(uint32_t *s);

/* Random rows x k weights (row r scaled by 0.25 + (r % 7) / 4, so rows differ in magnitude), drawn from *s,
 * quantized to type into *wq (malloc, *wq_bytes bytes) and dequantized back into *deq (malloc, rows * k
 * floats). On failure both are NULL and err says why (LW_ERR_INVALID_ARG for a bad shape, LW_ERR_NOMEM). */
lw_status lw_wasm_ref_weights(uint32_t type, int rows, int k, uint32_t *s, uint8_t **wq, size_t *wq_bytes,
                              float **deq, char *err);

/* y[r] = sum_i deq[r * k + i] * x[i] in double, for r < rows. */
void lw_wasm_ref_matvec(const float *deq, int rows, int k, const float *x, double *y);

/* y[r] = what the CPU engine computes for weight row r of wq (rows x k of type) times x: x converted to the
 * format's vec_dot_type (8-bit blocks, f16, bf16) and the format's dot (lw__cpu_mm), in the engine's bits. */
lw_status lw_wasm_cpu_product(uint32_t type, int rows, int k, const uint8_t *wq, const float *x, double *y,
                              char *err);

/* The same in the order the engine uses for a repacked weight (repacked 1: llama.cpp's gemv order, 2: its
 * gemm order, for types it repacks; LW_ERR_UNSUPPORTED for the others) or a plain one (0, as
 * lw_wasm_cpu_product). */
lw_status lw_wasm_cpu_product_order(uint32_t type, int rows, int k, const uint8_t *wq, const float *x,
                                    int repacked, double *y, char *err);

/* sum((y - ref)^2) / sum(ref^2) over n values (plain sum of squares when ref is all zero), or -1 with the
 * index of the first non-finite y in err. */
double lw_wasm_nmse(const float *y, const double *ref, size_t n, char *err);

#endif
