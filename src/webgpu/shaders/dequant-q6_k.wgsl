// Q6_K (ggml block_q6_K, 210 bytes, 256 elements): ql (128 bytes of low nibbles), qh (64 bytes of high
// 2-bit pairs), 16 int8 sub-block scales, d (f16); x = d * sc * (q - 32). In half n (128 elements), byte l
// (0..31) of qh holds the high bits of elements l, l + 32, l + 64, l + 96 (bits 0-1, 2-3, 4-5, 6-7), whose low
// nibbles are ql[64n + l] low, ql[64n + 32 + l] low, ql[64n + l] high, ql[64n + 32 + l] high.
// Chunk c reads qh word v = c % 16 (half n = v / 8, l = 4 (v % 8)) and, with p = c / 16, ql word 64n + 32p + l:
// its low nibbles are elements 128n + 32p + l.., its high nibbles 64 further.
#pragma once
#include "weights.wgsl"
#include "dequant-bits.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 210u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 128u * ((c & 15u) >> 3u) + 32u * (c >> 4u) + 4u * (c & 7u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 64u; }

// The int8 scale at byte offset a (one half-word load).
fn q6k_scale(a: u32) -> i32 {
    return extractBits(bitcast<i32>(w_u16(a & ~1u) >> ((a & 1u) * 8u)), 0u, 8u);
}

fn dqx_chunk(b: u32, c: u32) -> DqX {
    let lo_at = dq_lo_at(c);
    let p = c >> 4u;
    let ql = w_u32(b + 64u * ((c & 15u) >> 3u) + 32u * p + 4u * (c & 7u));
    let qh = w_u32(b + 128u + 4u * (c & 15u));
    let j = lo_at >> 4u;                                    // sub-block of the low half; + 4 for the high half
    let q_lo = vec4<i32>(dq_field(ql, 0u, 0xfu) | (dq_field(qh, 2u * p, 3u) << vec4<u32>(4u))) - vec4<i32>(32);
    let q_hi = vec4<i32>(dq_field(ql, 4u, 0xfu) | (dq_field(qh, 2u * p + 4u, 3u) << vec4<u32>(4u))) - vec4<i32>(32);
    return DqX(q_lo, q_hi, vec2<i32>(q6k_scale(b + 192u + j), q6k_scale(b + 196u + j)), vec2<i32>(0));
}

fn dqx_scales(b: u32) -> vec2<f32> {
    return vec2<f32>(w_f16(b + 208u), 0.0f);
}

#include "dequant-dqx.wgsl"
