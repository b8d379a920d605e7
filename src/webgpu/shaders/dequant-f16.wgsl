// F16 weights, seen as blocks of 8 elements (one chunk).
#pragma once
#include "weights.wgsl"
const DQ_BLOCK: u32 = 8u;
const DQ_BYTES: u32 = 16u;
const DQ_CHUNKS: u32 = 1u;

fn dq_lo_at(c: u32) -> u32 { return 0u; }
fn dq_hi_at(c: u32) -> u32 { return 4u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
#if F16
    let lo = vec4<f16>(bitcast<vec2<f16>>(w_u32(b)), bitcast<vec2<f16>>(w_u32(b + 4u)));
    let hi = vec4<f16>(bitcast<vec2<f16>>(w_u32(b + 8u)), bitcast<vec2<f16>>(w_u32(b + 12u)));
    return Dq8(lo, hi);
#else
    let lo = vec4<f32>(unpack2x16float(w_u32(b)), unpack2x16float(w_u32(b + 4u)));
    let hi = vec4<f32>(unpack2x16float(w_u32(b + 8u)), unpack2x16float(w_u32(b + 12u)));
    return Dq8(lo, hi);
#endif
}
