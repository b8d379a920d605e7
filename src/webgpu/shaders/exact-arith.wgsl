// Float arithmetic with the CPU's rounding, checked or carried out in integers: WGSL lets `/` be off by 2.5 ulp
// and lets an implementation compute fma() unfused (lavapipe does, now and then) or fuse a * b + c where the
// CPU did not, so where the CPU's bits matter (8-bit activation scales, RoPE rotations, ggml's exp polynomial,
// the repacked K-quant chains) these helpers decide the result with exact integer comparisons, out of the
// reach of any compiler freedom with floats. Included by ops-common.wgsl, so every kernel has them.
#pragma once
#ifndef EXACT_ARITH
#define EXACT_ARITH 1
#endif

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

// x >> s for a (low, high) value (s < 64).
fn shr_wide(x: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return x;
    }
    if (s >= 32u) {
        return vec2<u32>(x.y >> (s - 32u), 0u);
    }
    return vec2<u32>((x.x >> s) | (x.y << (32u - s)), x.y >> s);
}

// x >> s with every bit shifted out ORed into bit 0 (sticky), for any s.
fn shr_sticky(x: vec2<u32>, s: u32) -> vec2<u32> {
    if (s >= 64u) {
        return vec2<u32>(select(0u, 1u, x.x != 0u || x.y != 0u), 0u);
    }
    let r = shr_wide(x, s);
    let back = shl_wide(r, s);
    return vec2<u32>(r.x | select(0u, 1u, back.x != x.x || back.y != x.y), r.y);
}

fn add_wide(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

// a - b for a >= b.
fn sub_wide(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

// Leading zero bits of a (low, high) value (64 for 0).
fn clz_wide(x: vec2<u32>) -> u32 {
    return select(32u + countLeadingZeros(x.x), countLeadingZeros(x.y), x.y != 0u);
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

// a / b as the CPU divides: checked in integers (div_checked) on CPU adapters (EXACT_ARITH), whose fma is not
// always fused (lavapipe: the Q8_K scale -127 / 0.988973498 came out an ulp off through the fma residual).
fn div_rn(a: f32, b: f32) -> f32 {
#if EXACT_ARITH
    return div_checked(a, b);
#else
    // where fma is fused (GPUs): one residual step, r = a - q b exact by fma, q + r / b lands on the rounded
    // quotient in nearly every case, for a fraction of the integer check's cost (the 8-bit activation scales
    // of every mat-vec and mat-mat workgroup go through here)
    let q = a / b;
    return fma(fma(-q, b, a), 1.0f / b, q);
#endif
}

// a / b correctly rounded, for finite a and b != 0 with a normal quotient: |q| is right when
// mid(q-, q) * |b| <= |a| < mid(q, q+) * |b| (never equal: a midpoint's odd 25-bit significand times b's is
// no 24-bit significand). The hardware quotient (WGSL lets `/` be off by 2.5 ulp) is only a first guess.
fn div_checked(a: f32, b: f32) -> f32 {
    let guess = a / b;
    let gb = bitcast<u32>(guess) & 0x7fffffffu;
    if (a == 0.0f || gb == 0u || gb >= 0x7f800000u) {
        return guess; // 0, or a quotient beyond the floats
    }
    let an = f32_split(bitcast<u32>(a) & 0x7fffffffu);
    let bs = f32_split(bitcast<u32>(b) & 0x7fffffffu);
    let am = vec2<u32>(u32(an.x), 0u);
    var qb = gb;
    for (var it = 0; it < 4; it++) {
        let up = f32_mid(qb + 1u); // mid * |b| = k * bm * 2^(e - 151 + be - 150)
        if (cmp_scaled(mul_wide(u32(up.x), u32(bs.x)), up.y + bs.y - 301, am, an.y - 150) <= 0) {
            qb += 1u;
            continue;
        }
        let dn = f32_mid(qb);
        if (cmp_scaled(mul_wide(u32(dn.x), u32(bs.x)), dn.y + bs.y - 301, am, an.y - 150) > 0) {
            qb -= 1u;
            continue;
        }
        break;
    }
    return bitcast<f32>(qb | (bitcast<u32>(guess) & 0x80000000u));
}

// fmaf(a, b, c): a * b + c with one rounding, for finite a, b, c whose result is a normal float, in integers.
// WGSL's fma may be computed unfused (lavapipe's is, now and then), and the CPU's fmaf chains (llama.cpp's
// repacked K-quant orders) need the fused bits. a * b is exact as a 48-bit product; both terms are placed in
// 64 bits with the larger one's top bit at bit 62 and the smaller one's lost bits ORed into bit 0 (enough
// guard bits below the 24 kept for round-to-nearest-even to come out right, sums and differences alike).
fn fma_rn(a: f32, b: f32, c: f32) -> f32 {
    if (a == 0.0f || b == 0.0f || c == 0.0f) {
        return c + a * b; // one of the terms is exactly 0: a single rounding already
    }
    let sa = f32_split(bitcast<u32>(a) & 0x7fffffffu);
    let sb = f32_split(bitcast<u32>(b) & 0x7fffffffu);
    let sc = f32_split(bitcast<u32>(c) & 0x7fffffffu);
    let p = mul_wide(u32(sa.x), u32(sb.x)); // |a b| = p * 2^ep
    let ep = sa.y + sb.y - 300;
    let q = vec2<u32>(u32(sc.x), 0u); // |c| = q * 2^eq
    let eq = sc.y - 150;
    let top = max(ep + 64 - i32(clz_wide(p)), eq + 64 - i32(clz_wide(q))); // bits above the binary point's 2^0
    let eu = top - 63;                                                      // exponent of bit 0
    let px = select(shr_sticky(p, u32(eu - ep)), shl_wide(p, u32(ep - eu)), ep >= eu);
    let qx = select(shr_sticky(q, u32(eu - eq)), shl_wide(q, u32(eq - eu)), eq >= eu);
    let neg_p = ((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) != 0u;
    let neg_q = (bitcast<u32>(c) & 0x80000000u) != 0u;
    var sum: vec2<u32>;
    var neg = neg_p;
    if (neg_p == neg_q) {
        sum = add_wide(px, qx);
    } else {
        let o = cmp_wide(px, qx);
        if (o == 0) {
            return 0.0f;
        }
        sum = select(sub_wide(qx, px), sub_wide(px, qx), o > 0);
        neg = select(neg_q, neg_p, o > 0);
    }
    // keep 24 bits, rounding to nearest even on the rest
    let r = 40 - i32(clz_wide(sum)); // bits below the 24 kept
    var m: u32;
    if (r <= 0) {
        m = shl_wide(sum, u32(-r)).x; // exact
    } else {
        let kept = shr_wide(sum, u32(r));
        let rest = sub_wide(sum, shl_wide(kept, u32(r)));
        let o = cmp_wide(rest, shl_wide(vec2<u32>(1u, 0u), u32(r - 1)));
        m = kept.x + select(0u, 1u, o > 0 || (o == 0 && (kept.x & 1u) == 1u));
    }
    var e = eu + r + 150; // |result| = m * 2^(e - 150), m in [2^23, 2^24]
    if (m == 0x1000000u) {
        m = 0x800000u;
        e += 1;
    }
    return bitcast<f32>((u32(e) << 23u) | (m & 0x7fffffu) | select(0u, 0x80000000u, neg));
}

// (float)v rounded to nearest even, as C converts (WGSL leaves the rounding of f32(i32) beyond 2^24 to the
// implementation; integer sums of a super-block reach 2^25 and more for some formats).
fn i32_to_f32_rn(v: i32) -> f32 {
    let a = select(u32(v), 0u - u32(v), v < 0);
    if (a < 0x1000000u) {
        return f32(v);
    }
    let shift = 8u - countLeadingZeros(a); // bits below the 24 kept (1..8)
    var m = a >> shift;
    let rest = a & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    m += select(0u, 1u, rest > half || (rest == half && (m & 1u) == 1u));
    let r = ldexp(f32(m), i32(shift)); // m <= 2^24: exact
    return select(r, -r, v < 0);
}
