// IQ3_XXS (ggml block_iq3_xxs, 98 bytes, 256 elements): d (f16), 64 bytes of IQ3XXS_GRID indices (two per
// group of 8 elements, 4 magnitudes each), then per sub-block of 32 a word of four 7-bit sign indices and a
// 4-bit scale s (bits 28..31), as IQ2_XXS. x = d * (0.5 + s) / 2 * grid * sign. Chunk c (0..31) is group c:
// elements 8c..8c+3 from its first index, 8c+4..8c+7 from its second.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq3xxs.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 98u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

// The 4 magnitudes of grid entry i: codes c are 4 + 8c, except 62 for c = 7.
// The 4 magnitudes of IQ3XXS_GRID entry i: codes 0..7 are 4, 12, .., 52, 62.
fn iq3xxs_mag4(i: u32) -> vec4<i32> {
    let c = dq_codes3(dq_grid16(IQ3XXS_GRID[i >> 3u], i));
    return vec4<i32>(vec4<u32>(4u) + 8u * c + 2u * (c / vec4<u32>(7u)));
}

const DQX_K: f32 = 0.25;

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let aux = w_u32(b + 66u + 4u * (c >> 2u));
    let idx = w_u16(b + 2u + 2u * c);
    let s = dq_ksigns((aux >> (7u * (c & 3u))) & 127u);
    return DqX(iq3xxs_mag4(idx & 0xffu) * dqx_signs4(s), iq3xxs_mag4(idx >> 8u) * dqx_signs4(s >> 4u),
               vec2<i32>(i32(2u * (aux >> 28u) + 1u)), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b), 0.0f);
}

#include "dequant-iq-grid.wgsl"
