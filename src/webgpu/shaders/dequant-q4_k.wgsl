// Q4_K (ggml block_q4_K, 144 bytes, 256 elements): d and dmin (f16), 12 bytes of 6-bit scales and mins
// (dequant-kscale.wgsl), 128 bytes of nibbles; x = d * sc * q - dmin * m. Byte i of 32-byte group g holds
// element 64g + i % 32 (low nibble, sub-block 2g) and 64g + 32 + i % 32 (high nibble, sub-block 2g + 1).
// Chunk c (0..31) is quant word c: group g = c / 8, elements 64g + 4 (c % 8) and 32 further.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
#include "dequant-kscale.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 144u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 64u * (c >> 3u) + 4u * (c & 7u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 32u; }

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let p = vec4<i32>(kscale_pairs(dq_u32x3(b + 4u), c >> 3u)); // (sc 2g, sc 2g + 1, m 2g, m 2g + 1)
    let u = w_u32(b + 16u + 4u * c);
    return DqX(vec4<i32>(dq_field(u, 0u, 0xfu)), vec4<i32>(dq_field(u, 4u, 0xfu)), p.xy, p.zw);
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return unpack2x16float(w_u32(b)); // (d, dmin)
}

#define DQX_MIN 1
#include "dequant-dqx.wgsl"
