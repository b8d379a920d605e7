// IQ4_XS (ggml block_iq4_xs, 136 bytes, 256 elements): d (f16), scales_h (u16: 2 high bits per sub-block),
// scales_l (4 bytes: a 4-bit low part per sub-block), then 128 bytes of nibbles, 16 per sub-block of 32 in
// IQ4_NL's order. Sub-block ib has scale ls = low | high << 4 (6 bits); x = d * (ls - 32) * IQ4NL_VALUES[q].
// Chunk c (0..31): sub-block ib = c / 4, its quant word c % 4: elements 32ib + 4(c%4) + 0..3 (low
// nibbles) and 32ib + 16 + 4(c%4) + 0..3 (high nibbles).
#pragma once
#include "weights.wgsl"
#include "iq4nl-values.wgsl"
#define LUT4 IQ4NL_VALUES
#include "dequant-lut4.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 136u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * (c & ~3u) + 4u * (c & 3u); }
fn dq_hi_at(c: u32) -> u32 { return dq_lo_at(c) + 16u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let ib = c >> 2u;
    let low = (w_u32(b + 4u) >> (4u * ib)) & 0xfu;   // byte ib/2, nibble ib%2 of scales_l
    let high = (w_u16(b + 2u) >> (2u * ib)) & 3u;
    let dl = ftype(w_f16(b) * f32(i32(low | (high << 4u)) - 32));
    let u = w_u32(b + 8u + 4u * c);                  // byte 16ib + 4(c%4) of the quants
    return Dq8(dl * dq_lut4(u), dl * dq_lut4(u >> 4u));
}
