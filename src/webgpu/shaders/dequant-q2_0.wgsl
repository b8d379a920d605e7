// Q2_0 (block_q2_0, 18 bytes, 64 elements): d (f16), then 16 bytes of 2-bit codes, element j at bits
// 2 (j % 4) of byte j / 4; x = d * (q - 1). Chunk c (0..7) is bytes 2c (elements 8c..8c+3) and 2c + 1
// (elements 8c+4..8c+7), one aligned half-word.
#pragma once
#include "weights.wgsl"
const DQ_BLOCK: u32 = 64u;
const DQ_BYTES: u32 = 18u;
const DQ_CHUNKS: u32 = 8u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(w_f16(b));
    let u = w_u16(b + 2u + 2u * c);
    let lo = (vec4<u32>(u) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
    let hi = (vec4<u32>(u) >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u);
    return Dq8(d * (fvec4(lo) - fvec4(1.0)), d * (fvec4(hi) - fvec4(1.0)));
}
