// Q5_K (ggml block_q5_K, 176 bytes, 256 elements): d and dmin (f16), 12 bytes of 6-bit scales and mins
// (dequant-kscale.wgsl), qh (32 bytes: bit e / 32 of byte e % 32 is element e's fifth bit), 128 bytes of
// low nibbles laid out as Q4_K's; x = d * sc * q - dmin * m. Chunk c (0..31) is quant word c as in Q4_K.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
#include "dequant-kscale.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 176u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 64u * (c >> 3u) + 4u * (c & 7u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 32u; }

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let g = c >> 3u;
    let p = vec4<i32>(kscale_pairs(dq_u32x3(b + 4u), g)); // (sc 2g, sc 2g + 1, m 2g, m 2g + 1)
    let u = w_u32(b + 48u + 4u * c);
    let h = w_u32(b + 16u + 4u * (c & 7u));
    let lo = dq_field(u, 0u, 0xfu) | (dq_field(h, 2u * g, 1u) << vec4<u32>(4u));
    let hi = dq_field(u, 4u, 0xfu) | (dq_field(h, 2u * g + 1u, 1u) << vec4<u32>(4u));
    return DqX(vec4<i32>(lo), vec4<i32>(hi), p.xy, p.zw);
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return unpack2x16float(w_u32(b)); // (d, dmin)
}

#define DQX_MIN 1
#include "dequant-dqx.wgsl"
