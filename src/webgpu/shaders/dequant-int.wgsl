// Integer quants of one weight block, for kernels that multiply with dot4I8Packed (matmat-q8.wgsl): the 32
// quants of a block of the formats whose CPU product pairs them with Q8_0/Q8_1 activations, as signed bytes
// in element order (word w holds elements 4w .. 4w + 3, element 4w in the low byte), with the block's scale
// d and minimum m (0 for the symmetric formats): x_e = d * q_e + m. The CPU's dot products sum q_w * q_x in
// integers per block before any float arithmetic, and so does a kernel built on this.
//   dq_int(b) -> DqInt   the block at byte b
// DQ_INT is defined (1) for the formats that have it: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL.
#pragma once
#include "dequant.wgsl"

struct DqInt {
    q: array<u32, 8>, // 32 signed bytes, element order
    d: f32,           // scale
    m: f32,           // minimum (Q4_1, Q5_1), else 0
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

#if WEIGHT_TYPE == TYPE_Q8_0
#define DQ_INT 1
fn dq_int(b: u32) -> DqInt {
    var r: DqInt;
    for (var w = 0u; w < 8u; w++) {
        r.q[w] = w_u32(b + 2u + 4u * w);
    }
    r.d = w_f16(b);
    r.m = 0.0f;
    return r;
}
#elif WEIGHT_TYPE == TYPE_Q4_0 || WEIGHT_TYPE == TYPE_Q4_1
#define DQ_INT 1
fn dq_int(b: u32) -> DqInt {
    var r: DqInt;
#if WEIGHT_TYPE == TYPE_Q4_0
    for (var w = 0u; w < 8u; w++) {
        r.q[w] = dqi_sub_bytes(dqi_nibbles(b + 2u, w), 8u); // q - 8
    }
    r.d = w_f16(b);
    r.m = 0.0f;
#else
    for (var w = 0u; w < 8u; w++) {
        r.q[w] = dqi_nibbles(b + 4u, w); // 0 .. 15
    }
    let dm = unpack2x16float(w_u32(b));
    r.d = dm.x;
    r.m = dm.y;
#endif
    return r;
}
#elif WEIGHT_TYPE == TYPE_Q5_0 || WEIGHT_TYPE == TYPE_Q5_1
#define DQ_INT 1
fn dq_int(b: u32) -> DqInt {
    var r: DqInt;
#if WEIGHT_TYPE == TYPE_Q5_0
    let qh = w_u32(b + 2u);
    for (var w = 0u; w < 8u; w++) {
        r.q[w] = dqi_sub_bytes(dqi_nibbles(b + 6u, w) | dqi_fifth(qh, 4u * w), 16u); // q - 16
    }
    r.d = w_f16(b);
    r.m = 0.0f;
#else
    let qh = w_u32(b + 4u);
    for (var w = 0u; w < 8u; w++) {
        r.q[w] = dqi_nibbles(b + 8u, w) | dqi_fifth(qh, 4u * w); // 0 .. 31
    }
    let dm = unpack2x16float(w_u32(b));
    r.d = dm.x;
    r.m = dm.y;
#endif
    return r;
}
#elif WEIGHT_TYPE == TYPE_IQ4_NL
#define DQ_INT 1
fn dq_int(b: u32) -> DqInt {
    var r: DqInt;
    for (var w = 0u; w < 8u; w++) {
        let n = dqi_nibbles(b + 2u, w);
        var p = 0u;
        for (var j = 0u; j < 4u; j++) {
            p |= (u32(i32(IQ4NL_VALUES[(n >> (8u * j)) & 0xfu])) & 0xffu) << (8u * j);
        }
        r.q[w] = p;
    }
    r.d = w_f16(b);
    r.m = 0.0f;
    return r;
}
#endif
