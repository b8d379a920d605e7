// Q8_0 (ggml block_q8_0, 34 bytes): d (f16), then 32 int8 quants; x = d * q.
// Chunk c (0..3) holds elements 8c..8c+7 (two words of quants).
#pragma once
#include "weights.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 34u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

// Four signed bytes of a word, sign-extended.
fn q8_unpack(u: u32) -> vec4<f32> {
    let v = bitcast<i32>(u);
    return vec4<f32>(vec4<i32>(extractBits(v, 0u, 8u), extractBits(v, 8u, 8u), extractBits(v, 16u, 8u),
                               extractBits(v, 24u, 8u)));
}

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(w_f16(b));
    let q = b + 2u + 8u * c;
    return Dq8(d * fvec4(q8_unpack(w_u32(q))), d * fvec4(q8_unpack(w_u32(q + 4u))));
}
