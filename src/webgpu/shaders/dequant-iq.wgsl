// Helpers shared by the dequantization routines of the IQ and FP4 formats (dequant-iq*.wgsl,
// dequant-mxfp4.wgsl, dequant-nvfp4.wgsl): byte access, the grid bytes of a word, and sign bytes.
#pragma once
#include "weights.wgsl"

// The byte at byte offset b (any alignment).
fn dq_u8(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// The four bytes of a word, byte 0 first.
fn dq_u8x4(u: u32) -> vec4<u32> {
    return (vec4<u32>(u) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
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
