// The mean of squares of f32 values as the CPU computes it for an RMS norm (ggml: the f32 squares summed in
// double, the quotient rounded to f32), exactly, and the norm's scale 1.0f / sqrtf(mean + eps), for
// rms-norm.wgsl (a workgroup per row) and rope-qkv.wgsl (per-head Q/K norms, serially).
//
// The CPU sums the f32 squares in double (as ggml) and rounds the mean to f32: with 2^-53 per add against the
// mean's 2^-24 that is, but for ~n * 2^-29 of rows, the exactly rounded mean. A float sum here (any order)
// would differ from it by an ulp in about a third of rows, and that ulp moves activations across the 8-bit
// rounding of the next product now and then. So each square is added as an integer: its 24-bit significand
// shifted to a fixed point set by the group's largest square (FRAC bits below that one's last bit; smaller
// squares lose bits below 2^-FRAC of it), in 16-bit limbs, which sum in any order to the same bits. The mean
// is then the integer quotient by the group size, rounded to nearest even, and the scale 1 / sqrt(mean + eps)
// comes from the correctly rounded sqrt_rn and rcp_rn (numerics.wgsl): the CPU's bits, deterministically.
#pragma once
#include "numerics.wgsl"

const LIMBS: u32 = 6u; // 16-bit limbs (the top one also keeps the carries out of the others)
const FRAC: i32 = 40;  // fixed-point bits below the largest square's last significand bit

// Carries out of each 16-bit limb into the next.
fn limbs_normalize(a: ptr<function, array<u32, LIMBS>>) {
    for (var l = 0u; l + 1u < LIMBS; l++) {
        (*a)[l + 1u] += (*a)[l] >> 16u;
        (*a)[l] &= 0xffffu;
    }
}

// Adds the square with bits b, scaled to the fixed point of exponent e_max.
fn limbs_add_square(a: ptr<function, array<u32, LIMBS>>, b: u32, e_max: u32) {
    let sp = f32_split(b);
    let m = u32(sp.x);
    let k = sp.y - i32(e_max) + FRAC; // m * 2^k in fixed-point units, k <= FRAC
    if (k >= 0) {
        let li = u32(k) / 16u;
        let sh = u32(k) % 16u;
        (*a)[li] += (m << sh) & 0xffffu;
        (*a)[li + 1u] += (m >> (16u - sh)) & 0xffffu;
        (*a)[li + 2u] += select(0u, m >> (32u - sh), sh > 0u);
    } else if (k > -24) {
        let t = m >> u32(-k);
        (*a)[0] += t & 0xffffu;
        (*a)[1] += t >> 16u;
    }
}

// The fixed-point sum s (normalized limbs) divided by n (< 2^24), rounded to the nearest f32 (ties to even);
// the fixed point's unit is 2^(e_max - 150 - FRAC).
fn limbs_mean(sum: array<u32, LIMBS>, n: u32, e_max: u32) -> f32 {
    var s = sum; // indexed at run time below: a variable, not a value
    // long division in 8-bit digits (the remainder stays below n < 2^24), quotient in 16-bit limbs
    var q: array<u32, 8>;
    var rem = 0u;
    for (var l = 7; l >= 0; l--) {
        var word = 0u;
        if (l == 6) {
            word = s[LIMBS - 1u] >> 16u;
        } else if (l < 6) {
            word = s[l];
            if (l == 5) {
                word = s[5] & 0xffffu;
            }
        }
        let d1 = (rem << 8u) | (word >> 8u);
        rem = d1 % n;
        let d0 = (rem << 8u) | (word & 0xffu);
        rem = d0 % n;
        q[l] = ((d1 / n) << 8u) | (d0 / n);
    }
    var h = -1;
    for (var l = 7; l >= 0; l--) {
        if (q[l] != 0u) {
            h = l;
            break;
        }
    }
    if (h < 0) {
        return 0.0f;
    }
    // a 64-bit window of limbs h .. h-3; the leading bit sits at 48 + p in it
    var w: array<u32, 4>;
    for (var j = 0; j < 4; j++) {
        w[j] = select(0u, q[max(h - j, 0)], h - j >= 0);
    }
    let hi = (w[0] << 16u) | w[1];
    let lo = (w[2] << 16u) | w[3];
    let sa = 25u + firstLeadingBit(w[0]); // the window shifted right by sa leaves 24 bits
    var mant = select(hi >> (sa - 32u), (hi << (32u - sa)) | (lo >> sa), sa < 32u);
    var half: u32;
    var below: bool;
    if (sa - 1u < 32u) {
        half = (lo >> (sa - 1u)) & 1u;
        below = (lo & ((1u << (sa - 1u)) - 1u)) != 0u;
    } else {
        half = (hi >> (sa - 33u)) & 1u;
        below = lo != 0u || (hi & ((1u << (sa - 33u)) - 1u)) != 0u;
    }
    for (var l = 0; l < h - 3; l++) {
        below = below || q[l] != 0u;
    }
    below = below || rem != 0u;
    var b = 16 * h - 48 + i32(sa) + i32(e_max) - FRAC; // biased exponent of mant * 2^(b - 150)
    if (half == 1u && (below || (mant & 1u) == 1u)) {
        mant += 1u;
        if (mant == 0x1000000u) {
            mant = 0x800000u;
            b += 1;
        }
    }
    if (b <= 0) {
        return 0.0f; // below the normal range: far from any real activations' mean square
    }
    // (b >= 255, an infinite mean, is out of reach: the squares are finite and n >= 1; a run-time bitcast
    // keeps it well-defined anyway, where a constant infinity would not compile)
    return bitcast<f32>((u32(min(b, 255)) << 23u) | select(mant & 0x7fffffu, 0u, b >= 255));
}

// The CPU's scale for a mean of squares ms (mean + eps): 1.0f / sqrtf(ms), correctly rounded twice.
fn rms_scale(ms: f32) -> f32 {
    let me = bitcast<u32>(ms) >> 23u;
    return select(1.0f / sqrt(ms), rcp_rn(sqrt_rn(ms)), me > 0u && me < 255u);
}
