// Helpers shared by the graph-op kernels (kernels-ops.h): exact f32 -> f16 rounding, and ggml's exp.
//
// f16 rounding is done on the bits, not with pack2x16float or an f16 cast, because WGSL leaves the
// rounding direction of those conversions to the implementation; ggml (and lw__fp32_to_fp16) round to
// nearest even, and KV cache writes and GELU's table index must agree with the CPU to the bit.
#pragma once
#include "exact-arith.wgsl"

// fma where the CPU's bits matter per element: on CPU adapters (EXACT_ARITH=1, set by the pipeline builder:
// lavapipe computes fma unfused at times) decided in integers (exact-arith.wgsl), else the device's own, an
// order of magnitude cheaper (NVIDIA's is fused). Division: div_rn (exact-arith.wgsl) likewise.
fn fma_x(a: f32, b: f32, c: f32) -> f32 {
#if EXACT_ARITH
    return fma_rn(a, b, c);
#else
    return fma(a, b, c);
#endif
}

const F32_INF: u32 = 0x7f800000u;

// The f32 with bits b, at run time: WGSL rejects infinities in constant expressions, and a call to a
// user function is never one.
fn f32_from_bits(b: u32) -> f32 {
    return bitcast<f32>(b);
}

// The IEEE half (low 16 bits) nearest to f, ties to even; NaN -> 0x7e00 with f's sign (as ggml's
// portable conversion), overflow -> infinity.
fn f16_bits_rne(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sign = (x >> 16u) & 0x8000u;
    let a = x & 0x7fffffffu;
    if (a > F32_INF) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) { // 65520 and up round to infinity
        return sign | 0x7c00u;
    }
    if (a >= 0x38800000u) { // normal half: rebias the exponent, round the 13 dropped bits
        var h = (a - 0x38000000u) >> 13u;
        let rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) {
            h += 1u;
        }
        return sign | h;
    }
    if (a <= 0x33000000u) { // at most 2^-25: rounds to zero (2^-25 itself ties to the even 0)
        return sign;
    }
    // subnormal half: round(|f| * 2^24) = m * 2^(e - 126) with m the 24-bit significand
    let e = a >> 23u;
    let m = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - e; // 1..24 here
    var q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        q += 1u;
    }
    return sign | q;
}

// f rounded to the nearest half (ties to even), as f32.
fn f16_round(f: f32) -> f32 {
    return unpack2x16float(f16_bits_rne(f)).x;
}

// exp as ggml's ggml_v_expf (SIMD polynomial within 1.5 ulp of expf), written as the CPU reference's
// v_expf in src/cpu/engine-ops.c. WGSL's ldexp is only defined for exponents up to 128, so large n
// scale in two steps.
fn ggml_v_expf(x: f32) -> f32 {
    // ggml rounds x / ln 2 to an integer by adding 1.5 * 2^23; compilers may fold that add-then-subtract
    // away, so round() says it directly (the same integer but for ties of the rounded product)
    let n = round(x * 0x1.715476p+0f);
    let b = fma_x(-n, 0x1.7f7d1cp-20f, fma_x(-n, 0x1.62e4p-1f, x));
    let u = b * b;
    let j = fma_x(fma_x(fma_x(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma_x(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                  fma_x(0x1.ffffecp-1f, b, 1.0f));
    if (abs(n) > 192.0f) {
        return select(f32_from_bits(F32_INF), 0.0f, n <= 0.0f);
    }
    let ni = i32(n);
    if (ni > 126) {
        return ldexp(ldexp(j, 64), ni - 64);
    }
    if (ni < -126) {
        return ldexp(ldexp(j, -64), ni + 64);
    }
    return ldexp(j, ni);
}

// silu(x) * g as ggml_vec_swiglu_f32 computes it for element col of a row of n: ggml_v_expf on the row's
// first n & ~15 elements, exp on the rest (eltwise.wgsl's SWIGLU, the mat-vec's X_GLU loads, actq-quant.wgsl).
fn swiglu_elem(x: f32, g: f32, col: u32, n: u32) -> f32 {
    let e = select(exp(-x), ggml_v_expf(0.0f - x), col < (n & ~15u));
    return div_rn(x, 1.0f + e) * g;
}

// swiglu_elem of 4 elements from column col0.
fn swiglu4(x: vec4<f32>, g: vec4<f32>, col0: u32, n: u32) -> vec4<f32> {
    var r: vec4<f32>;
    for (var j = 0u; j < 4u; j++) {
        r[j] = swiglu_elem(x[j], g[j], col0 + j, n);
    }
    return r;
}
