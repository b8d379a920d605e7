// Bit-field helpers shared by the dequantization routines (dequant-<format>.wgsl): quants are packed in bytes,
// and a chunk's 4 contiguous elements usually sit in the 4 bytes of one little-endian word, one per byte.
#pragma once

// A chunk's integer codes, for the formats whose CPU dot sums q_w * q_x in integers per super-block before any
// float step (dqx_chunk in their dequant-<format>.wgsl; matvec-exact.wgsl): the element value is
// d * sc * q - dmin * mn for the half's sub-block (d, dmin from dqx_scales).
struct DqX {
    lo: vec4<i32>, // codes of elements dq_lo_at(c) .. + 3
    hi: vec4<i32>, // codes of elements dq_hi_at(c) .. + 3
    sc: vec2<i32>, // integer scales of lo's and hi's sub-blocks
    mn: vec2<i32>, // integer mins of them (Q2_K, Q4_K, Q5_K), else 0
}

// Field (mask) at bit s of each of the 4 bytes of u, one byte per lane: s = 0 / 4 with mask 0xf gives low /
// high nibbles, s = 2k with mask 3 the k-th 2-bit quant, mask 1 a single bit.
fn dq_field(u: u32, s: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(u) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(s))) & vec4<u32>(mask);
}

// Bits s .. s + 3 of u, one per lane.
fn dq_bits4(u: u32, s: u32) -> vec4<u32> {
    return (vec4<u32>(u) >> (vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>(s))) & vec4<u32>(1u);
}

// 12 bytes starting at the even byte offset b (any alignment) as three words, from 4 word loads (w_u32 three
// times would issue 6).
fn dq_u32x3(b: u32) -> vec3<u32> {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let a = vec4<u32>(w_word(i), w_word(i + 1u), w_word(i + 2u), w_word(i + 3u));
    let lo = a.xyz;
    let hi = a.yzw;
    return select((lo >> vec3<u32>(s)) | (hi << vec3<u32>(32u - s)), lo, s == 0u);
}
