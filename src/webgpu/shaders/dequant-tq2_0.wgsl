// TQ2_0 (ggml block_tq2_0, 66 bytes, 256 elements): 64 bytes of 2-bit codes, then d (f16); x = d * (q - 1).
// Byte i of each 32-byte half h holds elements 128h + 32s + i % 32 at bits 2s (s = 0..3), so the 4 bytes of
// quant word v (0..15) hold 4 contiguous elements per shift. Chunk c reads word v = c % 16 (neighbouring
// chunks read neighbouring words) at shifts s = 4 (c / 16) and s + 2: elements 128 (v / 8) + 64 (c / 16) +
// 4 (v % 8) and 32 further.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 66u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 128u * ((c & 15u) >> 3u) + 64u * (c >> 4u) + 4u * (c & 7u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 32u; }

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let u = w_u32(b + 4u * (c & 15u));
    let s = 4u * (c >> 4u);
    let one = vec4<i32>(1);
    return DqX(vec4<i32>(dq_field(u, s, 3u)) - one, vec4<i32>(dq_field(u, s + 2u, 3u)) - one, vec2<i32>(1), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b + 64u), 0.0f);
}

#include "dequant-dqx.wgsl"
