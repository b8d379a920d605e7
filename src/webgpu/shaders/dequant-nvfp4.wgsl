// NVFP4 (ggml block_nvfp4, 36 bytes, 64 elements): 4 UE4M3 scale bytes (one per sub-block of 16), then 32
// bytes of E2M1 nibbles, 8 per sub-block in Q4_0's order (low nibble of byte j: element j of the sub-block,
// high nibble: element j + 8); x = FP4_VALUES[q] * ue4m3(scale) / 2 (the table holds doubled E2M1 values).
// Chunk c (0..7): sub-block s = c / 2, quant word c % 2 of it: elements 16s + 4(c%2) + 0..3 and
// 16s + 8 + 4(c%2) + 0..3.
#pragma once
#include "weights.wgsl"
#include "fp4-values.wgsl"
#define LUT4 FP4_VALUES
#include "dequant-lut4.wgsl"
const DQ_BLOCK: u32 = 64u;
const DQ_BYTES: u32 = 36u;
const DQ_CHUNKS: u32 = 8u;

fn dq_lo_at(c: u32) -> u32 { return 16u * (c >> 1u) + 4u * (c & 1u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 8u; }

// A UE4M3 scale, halved, as lw__ue4m3_to_fp32: codes 0 and 0x7f (NaN) are 0; exponent 0 is subnormal
// (m * 2^-9, halved); else (1 + m/8) * 2^(e-7), halved: the f32 with biased exponent e + 119.
fn nvfp4_scale(x: u32) -> f32 {
    let e = (x >> 3u) & 0xfu;
    let m = x & 7u;
    let normal = bitcast<f32>(((e + 119u) << 23u) | (m << 20u));
    let v = select(normal, f32(m) * (1.0 / 1024.0), e == 0u);
    return select(v, 0.0, x == 0u || x == 0x7fu);
}

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(nvfp4_scale((w_u32(b) >> (8u * (c >> 1u))) & 0xffu));
    let u = w_u32(b + 4u + 4u * c);
    return Dq8(d * dq_lut4(u), d * dq_lut4(u >> 4u));
}
