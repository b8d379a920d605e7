// Q2_K (ggml block_q2_K, 84 bytes, 256 elements): 16 scale bytes (low nibble: scale, high nibble: min of a
// sub-block of 16), 64 bytes of 2-bit quants, d and dmin (f16); x = d * sc * q - dmin * m.
// Quant layout as TQ2_0: byte i of each 32-byte half h holds elements 128h + 32s + i % 32 at bits 2s. Chunk c
// reads quant word v = c % 16 at shifts s = 4 (c / 16) and s + 2 (elements lo = 128 (v / 8) + 64 (c / 16) +
// 4 (v % 8) and lo + 32), whose sub-blocks lo / 16 and lo / 16 + 2 have their scale bytes in one word.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 84u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 128u * ((c & 15u) >> 3u) + 64u * (c >> 4u) + 4u * (c & 7u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 32u; }

// Chunk c's 2-bit codes, with the scale (low nibble) and min (high nibble) of the sub-blocks lo / 16 and
// lo / 16 + 2, whose scale bytes share one word.
fn dqx_chunk(b: u32, c: u32) -> DqX {
    let j = dq_lo_at(c) >> 4u;                        // sub-block of the low half; + 2 for the high
    let sc = w_u32(b + (j & 14u)) >> ((j & 1u) * 8u); // its scale byte in bits 0..7, the other's 16..23
    let u = w_u32(b + 16u + 4u * (c & 15u));
    let s = 4u * (c >> 4u);
    return DqX(vec4<i32>(dq_field(u, s, 3u)), vec4<i32>(dq_field(u, s + 2u, 3u)),
               vec2<i32>(i32(sc & 0xfu), i32((sc >> 16u) & 0xfu)), vec2<i32>(i32((sc >> 4u) & 0xfu), i32((sc >> 20u) & 0xfu)));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return unpack2x16float(w_u32(b + 80u)); // (d, dmin)
}

#define DQX_MIN 1
#include "dequant-dqx.wgsl"
