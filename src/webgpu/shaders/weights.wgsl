// Byte access to quantized weights stored as a flat array<u32> (invariant 4): blocks of 18 or 34 bytes are
// only 2-byte aligned, so 32-bit loads at any byte offset are assembled from two words. The including
// kernel declares the binding `w: array<u32>`; reads past its end are clamped by WebGPU (robust access),
// and a second word is only ever used when the 4 bytes straddle two words inside the block.
#pragma once

// Word i of the weights: of the binding, or (W_TILE: the mat-vec's staged variant) of the includer's
// workgroup-memory tile `wtile`, where a K step's bytes were copied with coalesced word loads, or (W_PRIV) of
// words the includer loaded into registers ahead of use (its fn w_priv).
fn w_word(i: u32) -> u32 {
#ifdef W_TILE
    return wtile[i];
#elif defined(W_PRIV)
    return w_priv(i); // the includer's registers (matmat-smx.wgsl: a block prefetched a K step ahead)
#else
    return w[i];
#endif
}

// 4 bytes starting at byte offset b (any alignment), little-endian.
fn w_u32(b: u32) -> u32 {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let lo = w_word(i);
    let hi = w_word(i + 1u);
    return select((lo >> s) | (hi << (32u - s)), lo, s == 0u);
}

// 2 bytes at an even byte offset b.
fn w_u16(b: u32) -> u32 {
    return (w_word(b >> 2u) >> ((b & 2u) * 8u)) & 0xffffu;
}

// The IEEE half at an even byte offset b, widened.
fn w_f16(b: u32) -> f32 {
    return unpack2x16float(w_u16(b)).x;
}

// Eight dequantized weights: elements [lo_at, lo_at + 4) and [hi_at, hi_at + 4) of their block.
struct Dq8 {
    lo: fvec4,
    hi: fvec4,
}
