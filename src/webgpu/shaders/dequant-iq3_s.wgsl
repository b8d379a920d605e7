// IQ3_S (ggml block_iq3_s, 110 bytes, 256 elements): d (f16), qs[64] (low 8 bits of the 9-bit IQ3S_GRID
// indices, two per group of 8 elements), qh[8] (sub-block ib: bit m is the 9th bit of its index m),
// signs[32] (a full sign byte per group), scales[4] (a 4-bit s per sub-block, low nibble first).
// x = d * (1 + 2s) * grid * sign. Chunk c (0..31) is group c: elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq3s.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 110u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

// The 4 magnitudes of grid entry i: codes c are 1 + 2c.
// The 4 magnitudes of IQ3S_GRID entry i: 1 + 2 code.
fn iq3s_mag4(i: u32) -> vec4<i32> {
    return vec4<i32>(vec4<u32>(1u) + 2u * dq_codes3(dq_grid16(IQ3S_GRID[i >> 3u], i)));
}

const DQX_K: f32 = 1.0;

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let ib = c >> 2u;
    let s = (dq_u8(b + 106u + (ib >> 1u)) >> (4u * (ib & 1u))) & 0xfu;
    let q = w_u16(b + 2u + 2u * c);
    let h = dq_u8(b + 66u + ib) >> (2u * (c & 3u)); // 9th bits of this group's two indices at bits 0, 1
    let signs = dq_u8(b + 74u + c);
    return DqX(iq3s_mag4((q & 0xffu) | ((h & 1u) << 8u)) * dqx_signs4(signs),
               iq3s_mag4((q >> 8u) | ((h & 2u) << 7u)) * dqx_signs4(signs >> 4u), vec2<i32>(i32(1u + 2u * s)), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b), 0.0f);
}

#include "dequant-iq-grid.wgsl"
