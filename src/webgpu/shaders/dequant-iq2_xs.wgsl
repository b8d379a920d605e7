// IQ2_XS (ggml block_iq2_xs, 74 bytes, 256 elements): d (f16), 32 u16 (one per group of 8 elements: a 9-bit
// IQ2XS_GRID index and a 7-bit sign index), then 8 scale bytes (sub-block of 32 ib: low nibble for groups
// 0-1, high nibble for groups 2-3). x = d * (0.5 + s) / 4 * grid * sign. Chunk c (0..31) is group c:
// elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq2xs.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 74u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let v = w_u16(b + 2u + 2u * c);
    let s = (dq_u8(b + 66u + (c >> 2u)) >> (2u * (c & 2u))) & 0xfu; // nibble (c % 4) / 2
    let db = ftype(w_f16(b) * (0.5 + f32(s)) * 0.25);
    let idx = v & 511u;
    let g = dq_iq2_grid(dq_grid16(IQ2XS_GRID[idx >> 3u], idx));
    let signs = dq_ksigns(v >> 9u);
    return Dq8(db * g.lo * dq_signs4(signs), db * g.hi * dq_signs4(signs >> 4u));
}
