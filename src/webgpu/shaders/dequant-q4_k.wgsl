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

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let dm = unpack2x16float(w_u32(b));
    let p = vec4<f32>(kscale_pairs(dq_u32x3(b + 4u), c >> 3u));
    let dl = vec2<f32>(dm.x) * p.xy;
    let ml = vec2<f32>(dm.y) * p.zw;
    let u = w_u32(b + 16u + 4u * c);
    return Dq8(ftype(dl.x) * fvec4(dq_field(u, 0u, 0xfu)) - ftype(ml.x),
               ftype(dl.y) * fvec4(dq_field(u, 4u, 0xfu)) - ftype(ml.y));
}
