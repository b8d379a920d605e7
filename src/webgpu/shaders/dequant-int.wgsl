// Integer quants of weight blocks, for kernels that multiply with dot4I8Packed (matmat-q8.wgsl): the formats
// whose CPU product sums q_w * q_x in integers per (sub-)block before any float arithmetic, as the CPU pairs
// them with 8-bit activations:
//   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL   blocks of 32, Q8_0 / Q8_1 activations (ACTQ 1); one sub-block
//   Q4_K, Q5_K                             super-blocks of 256, Q8_K activations (ACTQ 2); 8 sub-blocks of 32
//   Q6_K                                   the same with 16 sub-blocks of 16
// A block's value is x_e = d * sc_s * q_e - dmin * mn_s for the K formats (s the sub-block of e), x_e = d * q_e
// + m for the others (sc = 1, mn = 0). The routines:
//   dqi_sub(b, s) -> DqSub     sub-block s of the block at byte b: its quants as signed bytes in element
//                              order (word v holds elements 4v .. 4v + 3 of the sub-block, the first in the
//                              low byte) and its integer scale and min
//   dqi_scales(b) -> vec2<f32> (d, m) or, K formats, (d, dmin)
// Constants: DQI_SUBW elements per sub-block (32 or 16); DQI_K 1 for the K formats. DQ_INT is defined (1) for
// the formats that have these routines.
#pragma once
#include "dequant.wgsl"
#ifndef DQI_ALIGNED
#define DQI_ALIGNED 0
#endif

// 4 bytes at byte b of a block; DQI_ALIGNED (the includer's promise that blocks start on whole words: Q4_K and
// Q5_K, of 144 and 176 bytes, at a 4-byte aligned offset) reads one word instead of two and a funnel shift.
fn dqi_w(b: u32) -> u32 {
#if DQI_ALIGNED
    return w_word(b >> 2u);
#else
    return w_u32(b);
#endif
}

struct DqSub {
    q: array<u32, 8>, // signed bytes of the sub-block (DQI_SUBW / 4 words used)
    sc: i32,          // integer scale (1 for the 32-blocks)
    mn: i32,          // integer min (K formats with mins), else 0
}

// Four bytes of unsigned v (each below 128) minus `off` each (off below 128 too), as signed bytes: the
// subtraction runs on bytes raised by 128, so no byte borrows from the next, and the top bit is then flipped
// back.
fn dqi_sub_bytes(v: u32, off: u32) -> u32 {
    return ((v | 0x80808080u) - off * 0x01010101u) ^ 0x80808080u;
}

// Bits s .. s + 3 of h moved to bit 4 of each byte (the fifth bits of Q5_0 / Q5_1).
fn dqi_fifth(h: u32, s: u32) -> u32 {
    let t = h >> s;
    return ((t & 1u) << 4u) | ((t & 2u) << 11u) | ((t & 4u) << 18u) | ((t & 8u) << 25u);
}

// Q4_0-order nibbles: word w < 4 is the low nibbles of quant word w, w >= 4 the high nibbles of word w - 4.
fn dqi_nibbles(qs: u32, w: u32) -> u32 {
    return (w_u32(qs + 4u * (w % 4u)) >> (4u * (w / 4u))) & 0x0f0f0f0fu;
}

#if WEIGHT_TYPE == TYPE_Q8_0 || WEIGHT_TYPE == TYPE_Q4_0 || WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_0 || WEIGHT_TYPE == TYPE_Q5_1 || WEIGHT_TYPE == TYPE_IQ4_NL
#define DQ_INT 1
#define DQI_K 0
const DQI_SUBW: u32 = 32u;

fn dqi_sub(b: u32, s: u32) -> DqSub {
    var r = DqSub(array<u32, 8>(), 1, 0);
#if WEIGHT_TYPE == TYPE_Q5_0
    let qh = w_u32(b + 2u);
#elif WEIGHT_TYPE == TYPE_Q5_1
    let qh = w_u32(b + 4u);
#endif
    for (var w = 0u; w < 8u; w++) {
#if WEIGHT_TYPE == TYPE_Q8_0
        r.q[w] = w_u32(b + 2u + 4u * w);
#elif WEIGHT_TYPE == TYPE_Q4_0
        r.q[w] = dqi_sub_bytes(dqi_nibbles(b + 2u, w), 8u); // q - 8
#elif WEIGHT_TYPE == TYPE_Q4_1
        r.q[w] = dqi_nibbles(b + 4u, w); // 0 .. 15
#elif WEIGHT_TYPE == TYPE_Q5_0
        r.q[w] = dqi_sub_bytes(dqi_nibbles(b + 6u, w) | dqi_fifth(qh, 4u * w), 16u); // q - 16
#elif WEIGHT_TYPE == TYPE_Q5_1
        r.q[w] = dqi_nibbles(b + 8u, w) | dqi_fifth(qh, 4u * w); // 0 .. 31
#else
        let n = dqi_nibbles(b + 2u, w); // IQ4_NL: codes through the table of levels
        var p = 0u;
        for (var j = 0u; j < 4u; j++) {
            p |= (u32(i32(IQ4NL_VALUES[(n >> (8u * j)) & 0xfu])) & 0xffu) << (8u * j);
        }
        r.q[w] = p;
#endif
    }
    return r;
}

fn dqi_scales(b: u32) -> vec2<f32> {
#if WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1
    return unpack2x16float(w_u32(b)); // (d, m)
#else
    return vec2<f32>(w_f16(b), 0.0f);
#endif
}
#elif WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K
#define DQ_INT 1
#define DQI_K 1
const DQI_SUBW: u32 = 32u;

// Sub-block s = 2g + h (64-element group g, h = 0 low nibbles, 1 high) of a Q4_K / Q5_K block: word v of it
// is quant word 32g + 4v shifted by 4h; Q5_K adds bit 2g + h of qh byte 4v .. as the fifth bit.
fn dqi_sub(b: u32, s: u32) -> DqSub {
    var r = DqSub(array<u32, 8>(), 0, 0);
    let g = s / 2u;
    let h = s % 2u;
    for (var v = 0u; v < 8u; v++) {
#if WEIGHT_TYPE == TYPE_Q4_K
        r.q[v] = (dqi_w(b + 16u + 32u * g + 4u * v) >> (4u * h)) & 0x0f0f0f0fu;
#else
        let hb = (dqi_w(b + 16u + 4u * v) >> (2u * g + h)) & 0x01010101u;
        r.q[v] = ((dqi_w(b + 48u + 32u * g + 4u * v) >> (4u * h)) & 0x0f0f0f0fu) | (hb << 4u);
#endif
    }
#if DQI_ALIGNED
    let p = kscale_pairs(vec3<u32>(dqi_w(b + 4u), dqi_w(b + 8u), dqi_w(b + 12u)), g);
#else
    let p = kscale_pairs(dq_u32x3(b + 4u), g); // (sc 2g, sc 2g + 1, m 2g, m 2g + 1)
#endif
    r.sc = i32(select(p.x, p.y, h == 1u));
    r.mn = i32(select(p.z, p.w, h == 1u));
    return r;
}

fn dqi_scales(b: u32) -> vec2<f32> {
    return unpack2x16float(dqi_w(b)); // (d, dmin)
}
#elif WEIGHT_TYPE == TYPE_Q6_K
#define DQ_INT 1
#define DQI_K 1
const DQI_SUBW: u32 = 16u;

// Sub-block s (elements 16s ..): half n = s / 8 and quarter k = (s % 8) / 2 of it, bytes l = 16 (s % 2) ..:
// low nibbles of ql (64n + 32 (k % 2) + l) shifted by 4 (k / 2), bits 2k of qh (32n + l) above them, minus 32.
fn dqi_sub(b: u32, s: u32) -> DqSub {
    var r = DqSub(array<u32, 8>(), 0, 0);
    let n = s / 8u;
    let k = (s % 8u) / 2u;
    let l = 16u * (s % 2u);
    for (var v = 0u; v < 4u; v++) {
        let lo = (w_u32(b + 64u * n + 32u * (k % 2u) + l + 4u * v) >> (4u * (k / 2u))) & 0x0f0f0f0fu;
        let hi = (w_u32(b + 128u + 32u * n + l + 4u * v) >> (2u * k)) & 0x03030303u;
        r.q[v] = dqi_sub_bytes(lo | (hi << 4u), 32u);
    }
    r.sc = q6k_scale(b + 192u + s);
    return r;
}

fn dqi_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b + 208u), 0.0f);
}
#endif
