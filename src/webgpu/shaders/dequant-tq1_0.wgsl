// TQ1_0 (ggml block_tq1_0, 54 bytes, 256 elements): qs (48 bytes), qh (4 bytes), d (f16); x = d * (t - 1)
// with t a base-3 digit: digit n of byte q is ((q * 3^n) mod 256) * 3 >> 8 (the bytes hold 5 or 4 trits
// scaled to 0..255). Element order (ggml's dequantize_row_tq1_0):
//   0..159    digit n = e / 32 of qs[e % 32]
//   160..239  digit n = (e - 160) / 16 of qs[32 + e % 16]
//   240..255  digit n = (e - 240) / 4 of qh[e % 4]
// so every 4 contiguous elements (4-aligned) are one digit of 4 consecutive bytes. Chunk c (0..31) takes
// elements 4c.. (all in the first range: digit c / 8 of qs word c % 8) and 128 + 4c.. (first, second or
// third range by c).
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 54u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 128u + 4u * c; }

// Digit n (0..4) of the 4 bytes of u, minus 1.
fn tq1_trits(u: u32, n: u32) -> vec4<i32> {
    let p = select((0x1b090301u >> (8u * n)) & 0xffu, 81u, n >= 4u); // 3^n
    let q = ((vec4<u32>(u) >> vec4<u32>(0u, 8u, 16u, 24u)) * vec4<u32>(p)) & vec4<u32>(0xffu);
    return vec4<i32>((q * vec4<u32>(3u)) >> vec4<u32>(8u)) - vec4<i32>(1);
}

// Chunk c's integer codes (t - 1): 4 elements of qs word c % 8 at digit c / 8, and at element 128 + 4c: qs
// word c, digit 4 (c < 8); qs[32 + 4 (c % 4)], digit (c - 8) / 4 (c < 28); qh, digit c - 28.
fn dqx_chunk(b: u32, c: u32) -> DqX {
    let off = select(select(32u + 4u * (c & 3u), 48u, c >= 28u), 4u * c, c < 8u);
    let n = select(select((c - 8u) >> 2u, c - 28u, c >= 28u), 4u, c < 8u);
    return DqX(tq1_trits(w_u32(b + 4u * (c & 7u)), c >> 3u), tq1_trits(w_u32(b + off), n), vec2<i32>(1), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b + 52u), 0.0f);
}

#include "dequant-dqx.wgsl"
