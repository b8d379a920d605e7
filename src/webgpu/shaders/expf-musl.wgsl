// musl's expf, bit for bit: the libm of the wasm build (Emscripten's musl), which the CPU engine's attention
// (online softmax: expf(Mold - M), expf(s - M)) and SwiGLU tail call. WGSL's exp() is inexact, and musl's
// result cannot be had from f32 arithmetic: its algorithm (ARM optimized-routines, musl src/math/expf.c with
// the table of exp2f_data.c) runs in DOUBLE, every operation rounded on its own (wasm has no fma, so nothing
// is contracted):
//     z = InvLn2N * x;  k = round(z) (ties to even, via + 0x1.8p52);  r = z - k;  s = 2^(k/32) (table)
//     y = (C0 * r + C1) * (r * r) + (C2 * r + 1);  return (float)(y * s)
// Here each of those double operations is carried out on integers (u32 pairs, round to nearest even), so no
// compiler freedom with floats (fusing, reassociation, flushing) and no missing f64 can change a bit; the
// final (float) rounding gives subnormal floats as the CPU does (results of x in about [-103.97, -87.34]).
//
// Where the time goes (per call on the main path, counted roughly from the source): 5 double products of
// 53-bit significands, each 4 mul_wide (16 u32 multiplies) plus a 128-bit sum and its rounding, ~125 integer
// operations each; z = InvLn2N * x with x's 24-bit significand, 2 mul_wide, ~65; 3 double sums (alignment
// with a sticky bit, add, rounding) ~85 each; k, r, the table and the final rounding ~100: about 1,050
// integer operations, 88 of them multiplies, branch-free but for the early exits below. Measured (a kernel
// of 2^22 calls on [-80, 0], 2 CPU cores): 27 ns per call on lavapipe (WGSL exp(): 0.45), 390 ns on
// SwiftShader (exp(): 4.6): about 60 to 85 times exp().
// Inputs with |x| < 2^-30 (the result is 1.0f whatever the rounding inside), |x| >= 88.72 / <= -103.97,
// infinities and NaN take the early exits musl takes.
//
// Double values inside are unpacked (struct Dbl): sign, a 53-bit integer significand with its top bit set,
// and a binary exponent. Every value the algorithm meets is a normal double well inside the exponent range
// (|r| >= 2^-53 unless 0, r * r >= 2^-106, s >= 2^-150, 2^-151 < y * s < 2^128), and r = 0 (z an integer)
// is taken apart before the polynomial, so no zero, subnormal or overflow handling is needed between steps.
#pragma once
#include "exact-arith.wgsl"

// ---- Unpacked doubles --------------------------------------------------------------------------------------

// A nonzero double: (-1)^neg * m * 2^e, m = (low, high) with 2^52 <= m < 2^53.
struct Dbl {
    m: vec2<u32>, // significand, bit 52 set
    e: i32,       // exponent of its bit 0
    neg: u32,     // 1 for a negative value
}

// A positive normal double from its IEEE bits (low word, high word): the constants below.
fn dbl_const(lo: u32, hi: u32) -> Dbl {
    return Dbl(vec2<u32>(lo, (hi & 0xfffffu) | 0x100000u), i32(hi >> 20u) - 1075, 0u);
}

// musl's table (exp2f_data.c, EXP2F_TABLE_BITS = 5): tab[i] = bits(2^(i/32)) - (i << 47), as (low, high)
// words, so that 2^(k/32) = asdouble(tab[k % 32] + (k << 47)).
const EXPF_T = array<u32, 64>(
    0x00000000u, 0x3ff00000u, 0xd3158574u, 0x3fefd9b0u, 0x6cf9890fu, 0x3fefb558u, 0xd0125b51u, 0x3fef9301u,
    0x3c7d517bu, 0x3fef72b8u, 0x3168b9aau, 0x3fef5487u, 0x6e756238u, 0x3fef387au, 0xf51fdee1u, 0x3fef1e9du,
    0x0a31b715u, 0x3fef06feu, 0x373aa9cbu, 0x3feef1a7u, 0x4c123422u, 0x3feedea6u, 0x6061892du, 0x3feece08u,
    0xd5362a27u, 0x3feebfdau, 0x569d4f82u, 0x3feeb42bu, 0xdd485429u, 0x3feeab07u, 0xb03a5585u, 0x3feea47eu,
    0x667f3bcdu, 0x3feea09eu, 0xe8ec5f74u, 0x3fee9f75u, 0x73eb0187u, 0x3feea114u, 0x994cce13u, 0x3feea589u,
    0x422aa0dbu, 0x3feeace5u, 0xb0cdc5e5u, 0x3feeb737u, 0x82a3f090u, 0x3feec491u, 0xb23e255du, 0x3feed503u,
    0x995ad3adu, 0x3feee89fu, 0xf2fb5e47u, 0x3feeff76u, 0xdd85529cu, 0x3fef199bu, 0xdcef9069u, 0x3fef3720u,
    0xdcfba487u, 0x3fef5818u, 0x337b9b5fu, 0x3fef7c97u, 0xa2a490dau, 0x3fefa4afu, 0x5b6e4540u, 0x3fefd076u);

// x >> s and x << s for a (low, high) value and any 0 <= s < 64, without branches (exact-arith.wgsl's
// shr_wide / shl_wide branch on s, which costs both paths where lanes disagree). The word crossing is shifted
// in two steps so that s = 0 moves nothing across.
fn dbl_shr(x: vec2<u32>, s: u32) -> vec2<u32> {
    let t = s & 31u;
    let lo = (x.x >> t) | ((x.y << 1u) << (31u - t));
    let hi = x.y >> t;
    return select(vec2<u32>(lo, hi), vec2<u32>(hi, 0u), s >= 32u);
}

fn dbl_shl(x: vec2<u32>, s: u32) -> vec2<u32> {
    let t = s & 31u;
    let hi = (x.y << t) | ((x.x >> 1u) >> (31u - t));
    let lo = x.x << t;
    return select(vec2<u32>(lo, hi), vec2<u32>(0u, lo), s >= 32u);
}

// m >> sh rounded to nearest, ties to even, for 0 < sh < 64 and m + 2^(sh-1) < 2^64 (the result may carry
// into the next bit): (m + 2^(sh-1) - 1 + lsb) >> sh, lsb the last bit kept.
fn dbl_rne_shr(m: vec2<u32>, sh: u32) -> vec2<u32> {
    let lsb = dbl_shr(m, sh).x & 1u;
    let bias = sub_wide(dbl_shl(vec2<u32>(1u, 0u), sh - 1u), vec2<u32>(1u - lsb, 0u));
    return dbl_shr(add_wide(m, bias), sh);
}

// A significand just rounded (2^52 <= m <= 2^53) back into [2^52, 2^53).
fn dbl_make(m: vec2<u32>, e: i32, neg: u32) -> Dbl {
    let carry = m.y == 0x200000u;
    return Dbl(select(m, vec2<u32>(0u, 0x100000u), carry), e + select(0, 1, carry), neg);
}

// The 128-bit value (w0, w1, w2, w3) >> sh rounded to 53 bits, for a value in [2^(sh+52), 2^(sh+53)) and
// 32 < sh < 64: the kept bits come from w1..w3, w0 and w1's low bits decide the rounding.
fn dbl_round128(w0: u32, w1: u32, w23: vec2<u32>, sh: u32) -> vec2<u32> {
    let t = sh - 32u;
    let m = vec2<u32>((w1 >> t) | (w23.x << (32u - t)), (w23.x >> t) | (w23.y << (32u - t)));
    let half = 1u << (t - 1u);
    let below = w1 & ((half << 1u) - 1u);
    let up = below > half || (below == half && (w0 != 0u || (m.x & 1u) == 1u));
    return add_wide(m, vec2<u32>(select(0u, 1u, up), 0u));
}

// a * b rounded to a double. The exact product of the 53-bit significands has 105 or 106 bits, summed from
// four 64-bit partial products (16 u32 multiplies: most of this file's time) into words w0..w3; its top 53
// bits are kept and the rest decides the rounding.
fn dbl_mul(a: Dbl, b: Dbl) -> Dbl {
    let p00 = mul_wide(a.m.x, b.m.x);
    let p01 = mul_wide(a.m.x, b.m.y);
    let p10 = mul_wide(a.m.y, b.m.x);
    let p11 = mul_wide(a.m.y, b.m.y);
    let mid = add_wide(add_wide(vec2<u32>(p00.y, 0u), vec2<u32>(p01.x, 0u)), vec2<u32>(p10.x, 0u)); // w1 + carry
    let hi = add_wide(add_wide(add_wide(vec2<u32>(p01.y, 0u), vec2<u32>(p10.y, 0u)), p11), vec2<u32>(mid.y, 0u));
    let top = (hi.y >> 9u) & 1u; // bit 105 of the product
    let m = dbl_round128(p00.x, mid.x, hi, 52u + top);
    return dbl_make(m, a.e + b.e + 52 + i32(top), a.neg ^ b.neg);
}

// a + b rounded to a double, for |a| > 40 |b| (so the sum loses at most its top bit to cancellation and is
// never 0; every sum of the algorithm is such: C1 + C0 r, 1 + C2 r, y + zp r^2). a's significand sits at bits
// 62..10 of a 64-bit word, b is shifted down to its scale with the bits shifted out ORed into bit 0: ten guard
// bits and a sticky bit round sums and differences correctly; the sum has its top bit at 63, 62 or 61.
fn dbl_add(a: Dbl, b: Dbl) -> Dbl {
    let am = dbl_shl(a.m, 10u);
    let bw = dbl_shl(b.m, 10u);
    let d = min(u32(a.e - b.e), 63u); // b's top bit at 62 - d: all of b is shifted out when d = 63
    let bs = dbl_shr(bw, d);
    let back = dbl_shl(bs, d);
    let bm = vec2<u32>(bs.x | select(0u, 1u, back.x != bw.x || back.y != bw.y), bs.y);
    let s = select(sub_wide(am, bm), add_wide(am, bm), a.neg == b.neg);
    // bits below the 53 kept: 9, 10 or 11 (2^61 < 2^62 * 39/40 < s < 2^63 * 41/40: the rounding's bias fits)
    let r = 11u - clz_wide(s);
    return dbl_make(dbl_rne_shr(s, r), a.e - 10 + i32(r), a.neg);
}

// (float)d: rounded to nearest even, to a normal float, a subnormal one (below 2^-126), 0 or infinity.
fn dbl_to_f32_bits(d: Dbl) -> u32 {
    let ex = d.e + 52; // d in [2^ex, 2^(ex+1))
    var bits: u32;
    if (ex >= -126) {
        var q = dbl_rne_shr(d.m, 29u).x; // 2^23 <= q <= 2^24
        var eb = ex + 127;
        if (q == 0x1000000u) {
            q = 0x800000u;
            eb += 1;
        }
        bits = select((u32(eb) << 23u) | (q & 0x7fffffu), 0x7f800000u, eb >= 255);
    } else {
        // subnormal: q * 2^-149; q == 2^23 (rounded up) is the smallest normal's encoding as it stands
        let sh = u32(-97 - ex);
        bits = select(dbl_rne_shr(d.m, sh).x, 0u, sh >= 64u);
    }
    return bits | (d.neg << 31u);
}

// ---- expf -----------------------------------------------------------------------------------------------

// musl's expf on bits: expf_musl_bits(bits of x) = bits of expf(x), for every input (NaN in, a quiet NaN
// out). Works on bits throughout, so that the infinities it returns are no constant-folded f32 (an error).
fn expf_musl_bits(xb: u32) -> u32 {
    let ax = xb & 0x7fffffffu;
    // musl's early exits (its |x| >= 88 branch): NaN -> x + x, -inf -> 0, x > 0x1.62e42ep6 -> overflow to
    // inf (+inf included), x < -0x1.9fe368p6 -> underflow to 0
    if (ax > 0x7f800000u) {
        return xb | 0x400000u;
    }
    if (i32(xb) > 0x42b17217) {
        return 0x7f800000u;
    }
    if (xb > 0xc2cff1b4u) {
        return 0u; // -inf too
    }
    // |x| < 2^-30 (0 and subnormals too): y stays within 2^-28 of 1, far from 1.0f's rounding boundaries
    // (1 - 2^-25, 1 + 2^-24), so the result is 1.0f, and no zero reaches the arithmetic below
    if (ax < 0x30800000u) {
        return 0x3f800000u;
    }

    // z = InvLn2N * x with InvLn2N = 0x1.71547652b82fep+0 * 32: x is normal here, and its 24-bit significand mx
    // times InvLn2N's 53 bits is a 77-bit product in [2^75, 2^77) from 2 partial products, rounded to 53 bits
    let mx = (xb & 0x7fffffu) | 0x800000u;
    let inv = dbl_const(0x652b82feu, 0x40471547u);
    let p0 = mul_wide(inv.m.x, mx);
    let p12 = add_wide(mul_wide(inv.m.y, mx), vec2<u32>(p0.y, 0u)); // words 1, 2
    let ztop = (p12.y >> 12u) & 1u; // bit 76
    let z = dbl_make(dbl_round128(0u, p0.x, p12, 55u + ztop), inv.e + i32(ax >> 23u) - 150 + 23 + i32(ztop),
                     xb >> 31u);

    // k = z rounded to an integer, ties to even (musl: kd = z + 0x1.8p52, a double whose ulp is 1), and
    // r = z - k, exact (musl's r = z - kd loses nothing). |z| < 4803, so z's bit 0 is 2^-40 or finer:
    // sh = -z.e >= 40 bits of z lie below the binary point. |z| < 1/2 (sh > 53) gives k = 0, r = z, and so
    // does sh capped at 54 (then the integer part is 0 and the fraction below one half): no branch.
    let sh = min(u32(-z.e), 54u);
    let ip = dbl_shr(z.m, sh);
    let frac = sub_wide(z.m, dbl_shl(ip, sh));
    let half = dbl_shl(vec2<u32>(1u, 0u), sh - 1u);
    let o = cmp_wide(frac, half);
    let up = o > 0 || (o == 0 && (ip.x & 1u) == 1u);
    let k = ip.x + select(0u, 1u, up);
    let rm = select(frac, sub_wide(dbl_shl(half, 1u), frac), up);
    let rneg = z.neg ^ select(0u, 1u, up);
    let ks = select(i32(k), -i32(k), z.neg == 1u);

    // s = 2^(k/32): musl's asdouble(T[k % 32] + (k << 47)), i.e. 2^((k & 31)/32) (in [1, 2)) times
    // 2^(k >> 5) (an exponent in [-150, 128], well inside the doubles)
    let i = u32(ks) & 31u;
    let s = Dbl(vec2<u32>(EXPF_T[2u * i], ((EXPF_T[2u * i + 1u] + (i << 15u)) & 0xfffffu) | 0x100000u),
                (ks >> 5u) - 52, 0u);

    // r = 0 (z an integer): C0 * 0 + C1, 0 * 0, C2 * 0 + 1 = 1, C1 * 0 + 1 = 1, y = s
    if (rm.x == 0u && rm.y == 0u) {
        return dbl_to_f32_bits(s);
    }
    let n = clz_wide(rm) - 11u; // rm < 2^53: normalize (exactly)
    let r = Dbl(dbl_shl(rm, n), z.e - i32(n), rneg);

    // y = (C0 * r + C1) * (r * r) + (C2 * r + 1), in musl's order; C = musl's poly_scaled (the coefficients
    // divided by 32^3, 32^2, 32: exact), as IEEE bits
    let c0 = dbl_const(0x4b912394u, 0x3ebc6af8u); // 0x1.c6af84b912394p-20
    let c1 = dbl_const(0x50fac4f3u, 0x3f2ebfceu); // 0x1.ebfce50fac4f3p-13
    let c2 = dbl_const(0xff0c52d6u, 0x3f962e42u); // 0x1.62e42ff0c52d6p-6
    let one = Dbl(vec2<u32>(0u, 0x100000u), -52, 0u);
    let zp = dbl_add(c1, dbl_mul(c0, r)); // (a sum rounds the same in either order)
    let r2 = dbl_mul(r, r);
    let y1 = dbl_add(one, dbl_mul(c2, r));
    let y = dbl_add(y1, dbl_mul(zp, r2));
    return dbl_to_f32_bits(dbl_mul(y, s));
}

// musl's expf(x), bit for bit (see expf_musl_bits).
fn expf_musl(x: f32) -> f32 {
    return bitcast<f32>(expf_musl_bits(bitcast<u32>(x)));
}
