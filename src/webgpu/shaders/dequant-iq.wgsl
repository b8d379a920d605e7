// Helpers shared by the dequantization routines of the IQ and FP4 formats (dequant-iq*.wgsl,
// dequant-mxfp4.wgsl, dequant-nvfp4.wgsl): byte access, sign bytes, and decoding packed grid entries.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"

// The byte at byte offset b (any alignment).
fn dq_u8(b: u32) -> u32 {
    return (w_word(b >> 2u) >> ((b & 3u) * 8u)) & 0xffu;
}

// +1 or -1 per element from bits 0..3 of s (bit j set negates element j).
fn dq_signs4(s: u32) -> fvec4 {
    let neg = (vec4<u32>(s) & vec4<u32>(1u, 2u, 4u, 8u)) != vec4<u32>(0u);
    return select(fvec4(1.0), fvec4(-1.0), neg);
}

// The 8-bit sign byte of a 7-bit sign index of IQ2_XXS / IQ2_XS / IQ3_XXS: bit 7 makes the count of
// negated elements even (ggml's ksigns_iq2xs table, lw__iq_ksigns; test-wgsl-kernels checks the rule).
fn dq_ksigns(s7: u32) -> u32 {
    return s7 | ((countOneBits(s7) & 1u) << 7u);
}

// Entry idx of a packed grid (kernels-dequant.h: 16 bits per entry, 8 entries per vec4<u32> element), given
// the grid's element idx >> 3: one table access per entry, so the shader compiler sees few, small loads.
fn dq_grid16(v: vec4<u32>, idx: u32) -> u32 {
    return (v[(idx >> 1u) & 3u] >> (16u * (idx & 1u))) & 0xffffu;
}

// The four 2-bit codes at bits shift, shift + 2, shift + 4, shift + 6 of e.
fn dq_codes2(e: u32, shift: u32) -> vec4<u32> {
    return (vec4<u32>(e >> shift) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
}

// The four 3-bit codes at bits 0, 3, 6, 9 of e.
fn dq_codes3(e: u32) -> vec4<u32> {
    return (vec4<u32>(e) >> vec4<u32>(0u, 3u, 6u, 9u)) & vec4<u32>(7u);
}

// Magnitudes 4 .. 7 (shift 8) or 0 .. 3 (shift 0) of an IQ2 grid entry (IQ2XXS_GRID, IQ2XS_GRID, IQ2S_GRID):
// codes 0, 1, 2 are 8, 25, 43.
fn dq_iq2_mag4(e: u32, shift: u32) -> vec4<i32> {
    let c = dq_codes2(e, shift);
    return vec4<i32>(vec4<u32>(8u) + 17u * c + (c >> vec4<u32>(1u)));
}

// +1 or -1 per element from bits 0..3 of s, as integers (dq_signs4).
fn dqx_signs4(s: u32) -> vec4<i32> {
    return select(vec4<i32>(1), vec4<i32>(-1), (vec4<u32>(s) & vec4<u32>(1u, 2u, 4u, 8u)) != vec4<u32>(0u));
}
