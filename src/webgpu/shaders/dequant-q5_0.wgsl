// Q5_0 (ggml block_q5_0, 22 bytes): d (f16), qh (32 fifth bits, bit j = element j), 16 bytes of low nibbles
// in Q4_0's order; x = d * (q - 16). Chunk c (0..3): quant word c, elements 4c..4c+3 and 16+4c..16+4c+3.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 22u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 16u + 4u * c; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(w_f16(b));
    let qh = w_u32(b + 2u);
    let u = w_u32(b + 6u + 4u * c);
    let lo = dq_field(u, 0u, 0xfu) | (dq_bits4(qh, 4u * c) << vec4<u32>(4u));
    let hi = dq_field(u, 4u, 0xfu) | (dq_bits4(qh, 16u + 4u * c) << vec4<u32>(4u));
    return Dq8(d * (fvec4(lo) - fvec4(16.0)), d * (fvec4(hi) - fvec4(16.0)));
}
