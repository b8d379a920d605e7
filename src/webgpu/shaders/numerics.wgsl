// Float helpers for kernels that must round exactly as the CPU engine does: WGSL allows `/` to be off by 2.5
// ulp (NVIDIA under Dawn is), so it is not used bare where the CPU's bits matter. f16 rounding on the bits
// (f16_round) lives in ops-common.wgsl.
#pragma once
#include "ops-common.wgsl"

// a / b correctly rounded (as the CPU's division) in nearly every case. One residual step: r = a - q b is
// exact by fma, q + r / b lands on the rounded quotient.
fn div_rn(a: f32, b: f32) -> f32 {
    let q = a / b;
    return fma(fma(-q, b, a), 1.0f / b, q);
}

// v rounded to bf16 as ggml's fp32 -> bf16 (ties to even; NaN made quiet), as f32.
fn bf16_round(v: f32) -> f32 {
    let u = bitcast<u32>(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return bitcast<f32>((u | 0x00400000u) & 0xffff0000u);
    }
    return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);
}

// x, through an operation the compiler cannot see through (zero must be 0 at run time, from a uniform the
// compiler does not know): stops it from fusing the product that made x into a later add, where the CPU
// rounded that product on its own. WGSL and SPIR-V let implementations contract a * b + c (and even
// implement fma unfused), so where the CPU's C code has fmaf(a, b, c * d) the GPU must keep c * d rounded.
fn unfused(x: f32, zero: u32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | zero);
}
