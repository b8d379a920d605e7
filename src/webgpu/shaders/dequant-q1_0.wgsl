// Q1_0 (block_q1_0, 18 bytes, 128 elements): d (f16), then 16 bytes of sign bits, bit j of byte i being
// element 8i + j; x = bit ? d : -d. Chunk c (0..15) is byte c: elements 8c..8c+3 (its low bits) and
// 8c+4..8c+7 (its high bits).
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 128u;
const DQ_BYTES: u32 = 18u;
const DQ_CHUNKS: u32 = 16u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(w_f16(b));
    let byte = w_u16(b + 2u + (c & 14u)) >> ((c & 1u) * 8u); // one load: the even-aligned pair holding byte c
    let one = vec4<u32>(1u);
    return Dq8(select(fvec4(-d), fvec4(d), dq_bits4(byte, 0u) == one),
               select(fvec4(-d), fvec4(d), dq_bits4(byte, 4u) == one));
}
