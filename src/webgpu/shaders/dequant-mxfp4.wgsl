// MXFP4 (ggml block_mxfp4, 17 bytes): e (an E8M0 exponent byte), then 16 bytes of E2M1 nibbles in Q4_0's
// order; x = FP4_VALUES[q] * 2^(e - 128) (the table holds doubled E2M1 values, so the scale is halved).
// Blocks are byte-aligned (17 bytes), so every access goes through byte-offset loads. The scale spans
// 2^-128..2^127: the product is formed in f32 and only the weight is narrowed in the f16 variant.
// Chunk c (0..3) is quant word c: elements 4c..4c+3 and 16+4c..16+4c+3.
#pragma once
#include "dequant-iq.wgsl"
#include "fp4-values.wgsl"
#define LUT4 FP4_VALUES
#include "dequant-lut4.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 17u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 16u + 4u * c; }

// 2^(e - 128) as ggml_e8m0_to_fp32_half (lw__e8m0_to_fp32_half): f32 subnormals below e = 2.
fn mxfp4_scale(e: u32) -> f32 {
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = mxfp4_scale(dq_u8(b));
    let u = w_u32(b + 1u + 4u * c);
    return Dq8(fvec4(d * vec4<f32>(dq_lut4(u))), fvec4(d * vec4<f32>(dq_lut4(u >> 4u))));
}
