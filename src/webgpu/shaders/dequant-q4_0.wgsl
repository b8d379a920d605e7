// Q4_0 (ggml block_q4_0, 18 bytes): d (f16), then 16 bytes of nibbles; x = d * (q - 8). The low nibble of
// byte j is element j, the high nibble element j + 16. Chunk c (0..3) is quant word c: elements 4c..4c+3
// from its low nibbles and 16+4c..16+4c+3 from its high nibbles.
#pragma once
#include "weights.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 18u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 16u + 4u * c; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(w_f16(b));
    let u = w_u32(b + 2u + 4u * c);
    let bytes = vec4<u32>(u, u >> 8u, u >> 16u, u >> 24u);
    let lo = vec4<f32>(bytes & vec4<u32>(0xfu)) - vec4<f32>(8.0);
    let hi = vec4<f32>((bytes >> vec4<u32>(4u)) & vec4<u32>(0xfu)) - vec4<f32>(8.0);
    return Dq8(d * fvec4(lo), d * fvec4(hi));
}
