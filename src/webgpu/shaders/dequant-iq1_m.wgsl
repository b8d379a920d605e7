// IQ1_M (ggml block_iq1_m, 56 bytes, 256 elements): qs[32] (low 8 bits of the 11-bit IQ1S_GRID index of
// each group of 8 elements), qh[16] (a nibble per group, low nibble first: the index's high 3 bits and, in
// bit 3, the sign of delta), scales[8] read as four u16: bits 0..11 of u16 m are four 3-bit scales s (sub-
// block 2m: groups 0-1 then 2-3, sub-block 2m+1: bits 6..11), and the top nibbles of the four form the f16
// super-block scale d. x = d * (2s + 1) * (grid + delta), delta = +-1/8 (LW_IQ1M_DELTA).
// Chunk c (0..31) is group c: elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "dequant-iq1.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 56u;
const DQ_CHUNKS: u32 = 32u;
const IQ1M_DELTA: f32 = 0.125;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

// Group c's 3-bit scale s, its qh nibble (bit 3: delta's sign) and the super-block scale d.
struct Iq1mGroup {
    s: u32,
    hn: u32,
    d: f32,
}

fn iq1m_group(b: u32, c: u32) -> Iq1mGroup {
    let ib = c >> 2u;
    let sc01 = w_u32(b + 48u);
    let sc23 = w_u32(b + 52u);
    // d: bits 12..15 of the four u16 (two per word), as nibbles 0..3
    let dbits = ((sc01 >> 12u) & 0xfu) | ((sc01 >> 24u) & 0xf0u) | ((sc23 >> 4u) & 0xf00u) | ((sc23 >> 16u) & 0xf000u);
    let sc = select(sc01, sc23, ib >= 4u) >> (16u * ((ib >> 1u) & 1u)); // u16 ib / 2
    let s = (sc >> (6u * (ib & 1u) + 3u * ((c >> 1u) & 1u))) & 7u;
    let hn = dq_u8(b + 32u + (c >> 1u)) >> (4u * (c & 1u)); // this group's nibble of qh
    return Iq1mGroup(s, hn, unpack2x16float(dbits).x);
}

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let g = iq1m_group(b, c);
    return iq1_dqx(dq_u8(b + c) | ((g.hn & 7u) << 8u), (g.hn & 8u) != 0u, 2u * g.s + 1u);
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(iq1m_group(b, 0u).d, 0.0f);
}

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let gr = iq1m_group(b, c);
    let dl = ftype(gr.d * f32(2u * gr.s + 1u));
    let delta = ftype(select(IQ1M_DELTA, -IQ1M_DELTA, (gr.hn & 8u) != 0u));
    let g = iq1_grid(dq_u8(b + c) | ((gr.hn & 7u) << 8u));
    return Dq8(dl * (g.lo + delta), dl * (g.hi + delta));
}
