// IQ1_S (ggml block_iq1_s, 50 bytes, 256 elements): d (f16), qs[32] (low 8 bits of the 11-bit IQ1S_GRID
// index of each group of 8 elements), qh[8] u16 (sub-block ib: bits 3l..3l+2 the high index bits of its
// group l, bits 12..14 a scale s, bit 15 the sign of delta). x = d * (2s + 1) * (grid + delta), grid in
// {-1, 0, 1}, delta = +-1/8 (LW_IQ1S_DELTA). Chunk c (0..31) is group c: elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "dequant-iq1.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 50u;
const DQ_CHUNKS: u32 = 32u;
const IQ1S_DELTA: f32 = 0.125;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let qh = w_u16(b + 34u + 2u * (c >> 2u));
    return iq1_dqx(dq_u8(b + 2u + c) | (((qh >> (3u * (c & 3u))) & 7u) << 8u), (qh & 0x8000u) != 0u,
                   2u * ((qh >> 12u) & 7u) + 1u);
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b), 0.0f);
}

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let qh = w_u16(b + 34u + 2u * (c >> 2u));
    let dl = ftype(w_f16(b) * f32(2u * ((qh >> 12u) & 7u) + 1u));
    let delta = ftype(select(IQ1S_DELTA, -IQ1S_DELTA, (qh & 0x8000u) != 0u));
    let g = iq1_grid(dq_u8(b + 2u + c) | (((qh >> (3u * (c & 3u))) & 7u) << 8u));
    return Dq8(dl * (g.lo + delta), dl * (g.hi + delta));
}
