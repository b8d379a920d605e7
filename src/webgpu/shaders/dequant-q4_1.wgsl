// Q4_1 (ggml block_q4_1, 20 bytes): d and m (f16), then 16 bytes of nibbles; x = d * q + m. Nibble order as
// Q4_0: chunk c (0..3) is quant word c, elements 4c..4c+3 (low nibbles) and 16+4c..16+4c+3 (high nibbles).
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 20u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 16u + 4u * c; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let dm = unpack2x16float(w_u32(b));
    let d = ftype(dm.x);
    let m = ftype(dm.y);
    let u = w_u32(b + 4u + 4u * c);
    return Dq8(d * fvec4(dq_field(u, 0u, 0xfu)) + m, d * fvec4(dq_field(u, 4u, 0xfu)) + m);
}
