// BF16 weights (the top 16 bits of an f32), seen as blocks of 8 elements (one chunk). In f16 arithmetic the
// values are rounded to f16 (bf16 magnitudes beyond f16's range, |x| > 65504, do not occur in weights).
#pragma once
#include "weights.wgsl"
const DQ_BLOCK: u32 = 8u;
const DQ_BYTES: u32 = 16u;
const DQ_CHUNKS: u32 = 1u;

fn dq_lo_at(c: u32) -> u32 { return 0u; }
fn dq_hi_at(c: u32) -> u32 { return 4u; }

// The two bf16 values of a word, widened.
fn bf16x2(u: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(u << 16u), bitcast<f32>(u & 0xffff0000u));
}

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let lo = vec4<f32>(bf16x2(w_u32(b)), bf16x2(w_u32(b + 4u)));
    let hi = vec4<f32>(bf16x2(w_u32(b + 8u)), bf16x2(w_u32(b + 12u)));
    return Dq8(fvec4(lo), fvec4(hi));
}
