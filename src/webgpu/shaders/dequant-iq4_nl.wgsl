// IQ4_NL (ggml block_iq4_nl, 18 bytes): d (f16), then 16 bytes of nibbles; x = d * IQ4NL_VALUES[q]. Same
// element order as Q4_0: the low nibble of byte j is element j, the high nibble element j + 16. Chunk c
// (0..3) is quant word c: elements 4c..4c+3 and 16+4c..16+4c+3.
#pragma once
#include "weights.wgsl"
#include "iq4nl-values.wgsl"
#define LUT4 IQ4NL_VALUES
#include "dequant-lut4.wgsl"
const DQ_BLOCK: u32 = 32u;
const DQ_BYTES: u32 = 18u;
const DQ_CHUNKS: u32 = 4u;

fn dq_lo_at(c: u32) -> u32 { return 4u * c; }
fn dq_hi_at(c: u32) -> u32 { return 16u + 4u * c; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let d = ftype(w_f16(b));
    let u = w_u32(b + 2u + 4u * c);
    return Dq8(d * dq_lut4(u), d * dq_lut4(u >> 4u));
}
