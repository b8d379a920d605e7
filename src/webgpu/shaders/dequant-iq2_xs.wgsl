// IQ2_XS (ggml block_iq2_xs, 74 bytes, 256 elements): d (f16), 32 u16 (one per group of 8 elements: a 9-bit
// IQ2XS_GRID index and a 7-bit sign index), then 8 scale bytes (sub-block of 32 ib: low nibble for groups
// 0-1, high nibble for groups 2-3). x = d * (0.5 + s) / 4 * grid * sign. Chunk c (0..31) is group c:
// elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq2xs.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 74u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

const DQX_K: f32 = 0.125;

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let v = w_u16(b + 2u + 2u * c);
    let s = (dq_u8(b + 66u + (c >> 2u)) >> (2u * (c & 2u))) & 0xfu; // nibble (c % 4) / 2
    let idx = v & 511u;
    let e = dq_grid16(IQ2XS_GRID[idx >> 3u], idx);
    let signs = dq_ksigns(v >> 9u);
    return DqX(dq_iq2_mag4(e, 0u) * dqx_signs4(signs), dq_iq2_mag4(e, 8u) * dqx_signs4(signs >> 4u),
               vec2<i32>(i32(2u * s + 1u)), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b), 0.0f);
}

#include "dequant-iq-grid.wgsl"
