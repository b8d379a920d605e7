// Float helpers for kernels that must round exactly as the CPU engine does: WGSL allows `/` to be off by 2.5
// ulp (NVIDIA under Dawn is), so it is not used bare where the CPU's bits matter. f16 rounding on the bits
// (f16_round) lives in ops-common.wgsl.
#pragma once
#include "ops-common.wgsl"
#include "exact-arith.wgsl"

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

// ---- Correctly rounded sqrt and reciprocal (exact-arith.wgsl checks them in integers) --------------------

// sqrt(v) correctly rounded, for v positive and normal (the CPU's sqrtf): y is right when
// mid(y-, y)^2 <= v < mid(y, y+)^2 (sqrt never lands on a midpoint).
fn sqrt_rn(v: f32) -> f32 {
    let vs = f32_split(bitcast<u32>(v));
    var yb = bitcast<u32>(sqrt(v));
    for (var it = 0; it < 4; it++) {
        let up = f32_mid(yb + 1u); // mid(y, y+) = k * 2^(e - 151); squared: k^2 * 2^(2e - 302)
        if (cmp_scaled(mul_wide(u32(up.x), u32(up.x)), 2 * up.y - 302, vec2<u32>(u32(vs.x), 0u), vs.y - 150) <= 0) {
            yb += 1u;
            continue;
        }
        let dn = f32_mid(yb);
        if (cmp_scaled(mul_wide(u32(dn.x), u32(dn.x)), 2 * dn.y - 302, vec2<u32>(u32(vs.x), 0u), vs.y - 150) > 0) {
            yb -= 1u;
            continue;
        }
        break;
    }
    return bitcast<f32>(yb);
}

// 1 / y correctly rounded, for y positive and normal with a normal reciprocal (the CPU's 1.0f / y).
fn rcp_rn(y: f32) -> f32 {
    return div_checked(1.0f, y); // once per row: the integer check on every device
}
