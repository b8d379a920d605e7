// RoPE helpers shared by rope.wgsl and rope-qkv.wgsl: sin/cos, the CPU's angle for (position, pair), and
// one rotated element. The includer declares `params` (the RoPE fields of RopeParams), `ff` (frequency
// factors) and fn rope_src(which: u32, i: u32) -> f32 (element i of input `which`) before including.
#pragma once
#include "numerics.wgsl"

// (sin v, cos v) for |v| up to ~1e6.
fn sincos(v: f32) -> vec2<f32> {
    let k = round(v * 0.636619772367581343f); // nearest multiple of pi/2
    // pi/2 = A + B + C + D with A, B, C of at most 8 significant bits, so that k * A, k * B, k * C are
    // exact for |k| < 2^16 (|v| up to ~1e5 reduced exactly, larger angles within a few ulp)
    var r = v - k * 1.5703125f;
    r = r - k * 0.000484466552734375f;
    r = r - k * -6.4074993133544921875e-07f;
    r = r - k * 9.920935796805404e-10f;
    let z = r * r;
    let s = fma(fma(fma(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f) * z, r, r);
    let c = fma(fma(fma(2.443315711809948e-5f, z, -1.388731625493765e-3f), z, 4.166664568298827e-2f) * z, z,
                fma(-0.5f, z, 1.0f));
    let q = u32(i32(k) & 3);
    if (q == 0u) {
        return vec2<f32>(s, c);
    } else if (q == 1u) {
        return vec2<f32>(c, -s);
    } else if (q == 2u) {
        return vec2<f32>(-s, -c);
    }
    return vec2<f32>(-c, s);
}

// (cos, sin) * mscale of pair p at position pos: the CPU's sin/cos cache entry. has_ff = 2: read from the
// host's table (lw__rope_cache, the CPU's cosf/sinf to the bit) of the call's rows, n_rot / 2 pairs each;
// else computed here (sincos: within an ulp of the CPU's libm, not always its bits).
fn rope_cs(pos: u32, p: u32) -> vec2<f32> {
    if (params.has_ff == 2u) {
        return rope_cs_at(pos, 0.0f, p);
    }
    return rope_cs_at(pos, rope_theta0(pos, p), p);
}

// pos * theta_scale^p as the CPU's cache builds it, one product per pair (so theta of pair p + 1 is this
// times theta_scale, the same bits: rope-qkv.wgsl's block items walk their pairs that way).
fn rope_theta0(pos: u32, p: u32) -> f32 {
    var theta = f32(pos);
    for (var j = 0u; j < p; j++) {
        theta = theta * params.theta_scale;
    }
    return theta;
}

// rope_cs of pair p with its theta0 given (rope_theta0; unused with the host's table).
fn rope_cs_at(pos: u32, theta: f32, p: u32) -> vec2<f32> {
    if (params.has_ff == 2u) {
        let i = params.ff_offset + 2u * ((pos - params.pos0) * (params.n_rot / 2u) + p);
        return vec2<f32>(ff[i], ff[i + 1u]);
    }
    var extrap = theta;
    if (params.has_ff == 1u) {
        extrap = div_rn(theta, ff[params.ff_offset + p]);
    }
    var th = params.freq_scale * extrap;
    if (params.ext_factor != 0.0f) {
        let y = div_rn(f32(p) - params.corr0, max(0.001f, params.corr1 - params.corr0));
        // the CPU rounds ramp and extrap * ramp on their own and fuses only th * (1 - ramp) (as ggml's
        // compiled code): keep the GPU's compiler from fusing the others (seen on NVIDIA under Dawn: YaRN
        // angles an ulp off at far positions)
        let zero = params.n_rot >> 31u; // n_rot < 2^31: 0, unknown to the compiler
        let ramp = unfused((1.0f - min(1.0f, max(0.0f, y))) * params.ext_factor, zero);
        th = fma_x(th, 1.0f - ramp, unfused(extrap * ramp, zero));
    }
    let sc = sincos(th);
    return vec2<f32>(sc.y * params.mscale, sc.x * params.mscale);
}

// Element e of a head starting at element xb of input `which` (rope_src), rotated (or copied past n_rot):
// for destinations written a word (two elements) at a time.
fn rope_elem(which: u32, xb: u32, pos: u32, e: u32) -> f32 {
    if (e >= params.n_rot) {
        return rope_src(which, xb + e);
    }
    var p = e / 2u;
    var ia = e & ~1u;
    var ib = ia + 1u;
    let half_rot = params.n_rot / 2u;
    if (params.neox != 0u) {
        p = select(e - half_rot, e, e < half_rot);
        ia = p;
        ib = p + half_rot;
    }
    let cs = rope_cs(pos, p);
    let x0 = rope_src(which, xb + ia);
    let x1 = rope_src(which, xb + ib);
    if (e == ia) {
        return rope_rot0(x0, x1, cs);
    }
    return rope_rot1(x0, x1, cs);
}

// The rotated pair as the CPU computes it, fmaf(x0, cos, -(x1 sin)) and fmaf(x0, sin, x1 cos) (ggml's
// contraction of x0*cos - x1*sin): fma_x (ops-common.wgsl).
fn rope_rot0(x0: f32, x1: f32, cs: vec2<f32>) -> f32 {
    return fma_x(x0, cs.x, -(x1 * cs.y));
}

fn rope_rot1(x0: f32, x1: f32, cs: vec2<f32>) -> f32 {
    return fma_x(x0, cs.y, x1 * cs.x);
}

