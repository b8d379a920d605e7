// Q5_1 (ggml block_q5_1, 24 bytes): d and m (f16), qh (32 fifth bits, bit j = element j), 16 bytes of low
// nibbles in Q4_0's order; x = d * q + m. Chunk c (0..3): quant word c, elements 4c.. and 16+4c..
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 24u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 16u + 4u * c; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let dm = unpack2x16float(w_u32(b));
    let d = ftype(dm.x);
    let m = ftype(dm.y);
    let qh = w_u32(b + 4u);
    let u = w_u32(b + 8u + 4u * c);
    let lo = dq_field(u, 0u, 0xfu) | (dq_bits4(qh, 4u * c) << vec4<u32>(4u));
    let hi = dq_field(u, 4u, 0xfu) | (dq_bits4(qh, 16u + 4u * c) << vec4<u32>(4u));
    return Dq8(d * fvec4(lo) + m, d * fvec4(hi) + m);
}
