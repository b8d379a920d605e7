// IQ2_XXS (ggml block_iq2_xxs, 66 bytes, 256 elements): d (f16), then 8 bytes per sub-block of 32: four
// grid indices (bytes 0..3; one IQ2XXS_GRID entry of 8 magnitudes per group of 8 elements) and a word of
// four 7-bit sign indices (bits 7l..7l+6) and a 4-bit scale s (bits 28..31).
// x = d * (0.5 + s) / 4 * grid * sign. Chunk c (0..31) is group c: elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq2xxs.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 66u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

const DQX_K: f32 = 0.125;

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let q = b + 2u + 8u * (c >> 2u);
    let l = c & 3u;
    let aux = w_u32(q + 4u);
    let idx = (w_u32(q) >> (8u * l)) & 0xffu;
    let e = dq_grid16(IQ2XXS_GRID[idx >> 3u], idx);
    let s = dq_ksigns((aux >> (7u * l)) & 127u);
    return DqX(dq_iq2_mag4(e, 0u) * dqx_signs4(s), dq_iq2_mag4(e, 8u) * dqx_signs4(s >> 4u),
               vec2<i32>(i32(2u * (aux >> 28u) + 1u)), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b), 0.0f);
}

#include "dequant-iq-grid.wgsl"
