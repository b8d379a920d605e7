// IQ2_S (ggml block_iq2_s, 82 bytes, 256 elements): d (f16), qs[64] (bytes 0..31: low 8 bits of the 10-bit
// IQ2S_GRID index of each group of 8 elements; bytes 32..63: a full sign byte per group), qh[8] (sub-block
// ib: bits 2l..2l+1 are the index's high bits for its group l), scales[8] (as IQ2_XS).
// x = d * (0.5 + s) / 4 * grid * sign. Chunk c (0..31) is group c: elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq2s.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 82u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

const DQX_K: f32 = 0.125;

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let ib = c >> 2u;
    let l = c & 3u;
    let s = (dq_u8(b + 74u + ib) >> (2u * (c & 2u))) & 0xfu;
    let idx = dq_u8(b + 2u + c) | (((dq_u8(b + 66u + ib) >> (2u * l)) & 3u) << 8u);
    let e = dq_grid16(IQ2S_GRID[idx >> 3u], idx);
    let signs = dq_u8(b + 34u + c);
    return DqX(dq_iq2_mag4(e, 0u) * dqx_signs4(signs), dq_iq2_mag4(e, 8u) * dqx_signs4(signs >> 4u),
               vec2<i32>(i32(2u * s + 1u)), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b), 0.0f);
}

#include "dequant-iq-grid.wgsl"
