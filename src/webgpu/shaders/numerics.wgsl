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

// ---- Correctly rounded sqrt and reciprocal, checked in integers ---------------------------------------------
// WGSL lets sqrt and division be off by ulps; where the CPU's sqrtf and 1.0f / x bits matter (the RMS norm's
// scale: one per row) the hardware result is corrected by exact integer comparisons with the midpoints to
// its neighbours, so no compiler freedom with floats (fusing, reassociation) can change the outcome.

// a * b for a, b < 2^32 as (low, high) words.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let mid = a1 * b0 + ((a0 * b1) & 0xffffu) + (p00 >> 16u); // at most 2^32 - 1: a1 * b0 <= 2^32 - 2^17 + 1
    let hi = a1 * b1 + ((a0 * b1) >> 16u) + (mid >> 16u);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), hi);
}

// x << s for a (low, high) value that stays below 2^64 (s < 64).
fn shl_wide(x: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return x;
    }
    if (s >= 32u) {
        return vec2<u32>(0u, x.x << (s - 32u));
    }
    return vec2<u32>(x.x << s, (x.y << s) | (x.x >> (32u - s)));
}

// -1, 0, 1 as a <, =, > b for (low, high) values.
fn cmp_wide(a: vec2<u32>, b: vec2<u32>) -> i32 {
    if (a.y != b.y) {
        return select(-1, 1, a.y > b.y);
    }
    if (a.x != b.x) {
        return select(-1, 1, a.x > b.x);
    }
    return 0;
}

// Integer significand and exponent of a positive finite float: v = s.x * 2^(s.y - 150) (s.y biased, as i32).
fn f32_split(b: u32) -> vec2<i32> {
    let e = i32(b >> 23u);
    let m = b & 0x7fffffu;
    return select(vec2<i32>(i32(m | 0x800000u), e), vec2<i32>(i32(m), 1), e == 0);
}

// The midpoint between the positive floats with bits b - 1 and b, as k * 2^(e - 151): (k, e).
fn f32_mid(b: u32) -> vec2<i32> {
    let hi = f32_split(b);
    let lo = f32_split(b - 1u);
    // lo's exponent is hi's or one less: bring hi to lo's scale
    return vec2<i32>((hi.x << u32(hi.y - lo.y)) + lo.x, lo.y);
}

// Sign of m1 * 2^e1 - m2 * 2^e2 for m1, m2 below 2^64 as (low, high), when the scaled side stays below 2^64.
fn cmp_scaled(m1: vec2<u32>, e1: i32, m2: vec2<u32>, e2: i32) -> i32 {
    if (e1 >= e2) {
        return cmp_wide(shl_wide(m1, u32(e1 - e2)), m2);
    }
    return cmp_wide(m1, shl_wide(m2, u32(e2 - e1)));
}

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

// 1 / y correctly rounded, for y positive and normal with a normal reciprocal (the CPU's 1.0f / y): r is
// right when mid(r-, r) * y <= 1 < mid(r, r+) * y (never equal: a midpoint's odd significand times y's is
// no power of two).
fn rcp_rn(y: f32) -> f32 {
    let ys = f32_split(bitcast<u32>(y));
    var rb = bitcast<u32>(1.0f / y);
    let one = vec2<u32>(1u, 0u);
    for (var it = 0; it < 4; it++) {
        let up = f32_mid(rb + 1u); // mid * y = k * ym * 2^(e - 151 + ye - 150)
        if (cmp_scaled(mul_wide(u32(up.x), u32(ys.x)), up.y + ys.y - 301, one, 0) <= 0) {
            rb += 1u;
            continue;
        }
        let dn = f32_mid(rb);
        if (cmp_scaled(mul_wide(u32(dn.x), u32(ys.x)), dn.y + ys.y - 301, one, 0) > 0) {
            rb -= 1u;
            continue;
        }
        break;
    }
    return bitcast<f32>(rb);
}
