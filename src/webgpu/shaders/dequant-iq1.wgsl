// The IQ1S_GRID lookup shared by IQ1_S and IQ1_M (the grid is generated from lw__iq1s_grid, packed:
// kernels-dequant.h; code c of a value is c - 1).
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq1s.wgsl"
#include "dequant-bits.wgsl"

// Chunk codes 8 (grid + delta) of grid entry idx (values -1, 0, 1) with delta = +-1/8 negative when neg, at
// integer sub-block scale ls: the CPU sums ls * (grid * q_x) and ls * (+-1 * q_x) exactly and adds them as
// sumi + sumi1 / 8, the same float as (8 sumi + sumi1) / 8.
fn iq1_dqx(idx: u32, neg: bool, ls: u32) -> DqX {
    let e = dq_grid16(IQ1S_GRID[idx >> 3u], idx);
    let dl = select(vec4<i32>(-7), vec4<i32>(-9), neg); // 8 (code - 1) + delta: 8 code - 8 +- 1
    return DqX(8 * vec4<i32>(dq_codes2(e, 0u)) + dl, 8 * vec4<i32>(dq_codes2(e, 8u)) + dl, vec2<i32>(i32(ls)), vec2<i32>(0));
}

// Grid entry idx: its 8 values -1, 0, 1 (elements 0..3, 4..7).
fn iq1_grid(idx: u32) -> Dq8 {
    let e = dq_grid16(IQ1S_GRID[idx >> 3u], idx);
    return Dq8(fvec4(vec4<f32>(dq_codes2(e, 0u)) - vec4<f32>(1.0)),
               fvec4(vec4<f32>(dq_codes2(e, 8u)) - vec4<f32>(1.0)));
}
