// IQ2_S (ggml block_iq2_s, 82 bytes, 256 elements): d (f16), qs[64] (bytes 0..31: low 8 bits of the 10-bit
// IQ2S_GRID index of each group of 8 elements; bytes 32..63: a full sign byte per group), qh[8] (sub-block
// ib: bits 2l..2l+1 are the index's high bits for its group l), scales[8] (as IQ2_XS).
// x = d * (0.5 + s) / 4 * grid * sign. Chunk c (0..31) is group c: elements 8c..8c+7.
#pragma once
#include "dequant-iq.wgsl"
#include "iq-grid-iq2s.wgsl"
const DQ_BLOCK: u32 = 256u;
const DQ_BYTES: u32 = 82u;
const DQ_CHUNKS: u32 = 32u;

fn dq_lo_at(c: u32) -> u32 { return 8u * c; }
fn dq_hi_at(c: u32) -> u32 { return 8u * c + 4u; }

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let ib = c >> 2u;
    let l = c & 3u;
    let s = (dq_u8(b + 74u + ib) >> (2u * (c & 2u))) & 0xfu;
    let db = ftype(w_f16(b) * (0.5 + f32(s)) * 0.25);
    let idx = dq_u8(b + 2u + c) | (((dq_u8(b + 66u + ib) >> (2u * l)) & 3u) << 8u);
    let g = dq_iq2_grid(dq_grid16(IQ2S_GRID[idx >> 3u], idx));
    let signs = dq_u8(b + 34u + c);
    return Dq8(db * g.lo * dq_signs4(signs), db * g.hi * dq_signs4(signs >> 4u));
}
