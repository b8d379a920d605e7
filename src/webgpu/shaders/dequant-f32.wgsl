// F32 weights, seen as blocks of 8 elements (one chunk) so every format shares the mat-vec loop.
#pragma once
#include "weights.wgsl"
const DQ_BLOCK: u32 = 8u;   // elements per block
const DQ_BYTES: u32 = 32u;  // bytes per block
const DQ_CHUNKS: u32 = 1u;  // chunks of 8 elements per block

fn dq_lo_at(c: u32) -> u32 { return 0u; }
fn dq_hi_at(c: u32) -> u32 { return 4u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let lo = vec4<f32>(bitcast<f32>(w_u32(b)), bitcast<f32>(w_u32(b + 4u)), bitcast<f32>(w_u32(b + 8u)),
                       bitcast<f32>(w_u32(b + 12u)));
    let hi = vec4<f32>(bitcast<f32>(w_u32(b + 16u)), bitcast<f32>(w_u32(b + 20u)),
                       bitcast<f32>(w_u32(b + 24u)), bitcast<f32>(w_u32(b + 28u)));
    return Dq8(fvec4(lo), fvec4(hi));
}
