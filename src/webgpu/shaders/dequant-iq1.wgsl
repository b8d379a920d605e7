// The IQ1S_GRID lookup shared by IQ1_S and IQ1_M (the grid is generated from lw__iq1s_grid with 2 bits per
// value: kernels-dequant.h).
#pragma once
#include "iq-grid-iq1s.wgsl"

// Grid entry idx: its 8 values -1, 0, 1 as two vectors (elements 0..3, 4..7).
fn iq1_grid(idx: u32) -> array<vec4<f32>, 2> {
    let h = IQ1S_GRID[idx >> 1u] >> (16u * (idx & 1u));
    let lo = vec4<f32>((vec4<u32>(h) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u));
    let hi = vec4<f32>((vec4<u32>(h) >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u));
    return array<vec4<f32>, 2>(lo - vec4<f32>(1.0), hi - vec4<f32>(1.0));
}
