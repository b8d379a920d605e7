/* fp16 -> f32 in WebAssembly simd128 lanes, for the wasm kernels (engine-wasm.c, quant-gemv-wasm.c). wasm has
 * no conversion instruction, and the scalar one (core.c lw__fp16_to_fp32) is a call with branches: in a
 * decode mat-vec that was one call per 32 weights. */
#ifndef LW_F16_WASM_H
#define LW_F16_WASM_H

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

/* The fp16 bits in the low halves of h's four 32-bit lanes (high halves zero) as f32: exact for every input
 * (subnormals through a multiply by 2^112, inf and NaN kept; a NaN's payload may differ from the scalar
 * conversion's, its value does not). */
static inline v128_t lw__wasm_h2f4(v128_t h) {
    const v128_t mag = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
    v128_t f = wasm_f32x4_mul(mag, wasm_f32x4_splat(0x1p112f));
    const v128_t infnan = wasm_i32x4_eq(wasm_v128_and(h, wasm_i32x4_splat(0x7c00)), wasm_i32x4_splat(0x7c00));
    f = wasm_v128_bitselect(wasm_v128_or(mag, wasm_i32x4_splat(0x7f800000)), f, infnan);
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

#endif
#endif
