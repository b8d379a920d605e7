// Q3_K (ggml block_q3_K, 110 bytes, 256 elements): hmask (32 bytes: bit e / 32 of byte e % 32 is element e's
// high bit), 64 bytes of low 2-bit quants (laid out as Q2_K's), 12 bytes of 16 packed 6-bit scales, d (f16);
// x = d * (sc - 32) * (q - (high bit ? 0 : 4)). Chunks as Q2_K: quant word v = c % 16 at shifts s = 4 (c / 16)
// and s + 2; the two sub-blocks j = lo / 16 and j + 2 share their scale bytes' words.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 110u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 128u * ((c & 15u) >> 3u) + 64u * (c >> 4u) + 4u * (c & 7u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 32u; }

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let lo_at = dq_lo_at(c);
    let j = lo_at >> 4u; // j % 4 is 0 or 1, so j and j + 2 have the same j / 4 and j / 8
    // scale j = low 4 bits (byte j % 8, low nibble for j < 8, high for j >= 8) | 2 high bits (byte 8 + j % 4,
    // bits 2 (j / 4)) << 4; bytes j % 8 and j % 8 + 2 lie in word (j % 8) / 4 of the scales
    let sl = w_u32(b + 96u + (j & 4u)) >> ((j & 3u) * 8u + (j >> 3u) * 4u);
    let sh = w_u32(b + 104u) >> ((j & 3u) * 8u + (j >> 2u) * 2u);
    let sc_lo = i32((sl & 0xfu) | ((sh & 3u) << 4u)) - 32;
    let sc_hi = i32(((sl >> 16u) & 0xfu) | (((sh >> 16u) & 3u) << 4u)) - 32;
    // quants with their high bits: q + 4 h - 4
    let u = w_u32(b + 32u + 4u * (c & 15u));
    let hm = w_u32(b + 4u * (c & 7u));
    let s = 4u * (c >> 4u);
    let hb = lo_at >> 5u; // high-bit index of the low half; + 1 for the high half
    let q_lo = vec4<i32>(dq_field(u, s, 3u) | (dq_field(hm, hb, 1u) << vec4<u32>(2u))) - vec4<i32>(4);
    let q_hi = vec4<i32>(dq_field(u, s + 2u, 3u) | (dq_field(hm, hb + 1u, 1u) << vec4<u32>(2u))) - vec4<i32>(4);
    return DqX(q_lo, q_hi, vec2<i32>(sc_lo, sc_hi), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b + 108u), 0.0f);
}

#include "dequant-dqx.wgsl"
