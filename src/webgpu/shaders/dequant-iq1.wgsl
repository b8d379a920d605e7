// The IQ1S_GRID lookup shared by IQ1_S and IQ1_M (the grid is generated from lw__iq1s_grid, packed:
// kernels-dequant.h; code c of a value is c - 1).
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq1s.wgsl"

// Grid entry idx: its 8 values -1, 0, 1 (elements 0..3, 4..7).
fn iq1_grid(idx: u32) -> Dq8 {
    let e = dq_grid16(IQ1S_GRID[idx >> 3u], idx);
    return Dq8(fvec4(vec4<f32>(dq_codes2(e, 0u)) - vec4<f32>(1.0)),
               fvec4(vec4<f32>(dq_codes2(e, 8u)) - vec4<f32>(1.0)));
}
