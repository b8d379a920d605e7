// The block-pair step of the integer mat-vecs (matvec-q8.wgsl, matvec-q8-norm.wgsl): two Q4_0 / Q8_0 blocks
// as whole words, multiplied with x's 8-bit quants by dot4I8Packed. The includer has included dequant-int.wgsl
// (DQ_BYTES, dqi_sub_bytes) and defines WEIGHT_TYPE and PAIR.
#pragma once
// PAIR=1 (Q4_0, Q8_0; rows of an even number of blocks, 4-byte aligned): the unit is two blocks, whose 36 /
// 68 bytes are 9 / 17 whole words, loaded once each, where a single block is only 2-byte aligned and every
// 32-bit read of it costs two loads and a funnel shift (weights.wgsl w_u32).
#ifndef PAIR
#define PAIR 0
#endif
#if PAIR && WEIGHT_TYPE != TYPE_Q4_0 && WEIGHT_TYPE != TYPE_Q8_0
#error matvec-q8.wgsl: PAIR is for Q4_0 and Q8_0
#endif
#if PAIR
const PW: u32 = DQ_BYTES / 2u; // words per pair of blocks
#if WEIGHT_TYPE == TYPE_Q4_0
const QW: u32 = 4u; // quant words per block (two nibbles a byte)
#else
const QW: u32 = 8u;
#endif

// q_w . q_x of a pair's two blocks: the first at bytes 0.. of ww (d in the low half of word 0, quants from
// byte 2), the second at byte DQ_BYTES (d in the high half of word QW, quants word-aligned from QW + 1).
fn pair_dots(ww: ptr<function, array<u32, PW>>, xw: ptr<function, array<u32, 16>>) -> vec2<i32> {
    var s = vec2<i32>(0);
    for (var i = 0u; i < QW; i++) {
        let a = ((*ww)[i] >> 16u) | ((*ww)[i + 1u] << 16u);
        let b = (*ww)[QW + 1u + i];
#if WEIGHT_TYPE == TYPE_Q4_0
        s.x += dot4I8Packed(dqi_sub_bytes(a & 0x0f0f0f0fu, 8u), (*xw)[i]) +
               dot4I8Packed(dqi_sub_bytes((a >> 4u) & 0x0f0f0f0fu, 8u), (*xw)[4u + i]);
        s.y += dot4I8Packed(dqi_sub_bytes(b & 0x0f0f0f0fu, 8u), (*xw)[8u + i]) +
               dot4I8Packed(dqi_sub_bytes((b >> 4u) & 0x0f0f0f0fu, 8u), (*xw)[12u + i]);
#else
        s.x += dot4I8Packed(a, (*xw)[i]);
        s.y += dot4I8Packed(b, (*xw)[8u + i]);
#endif
    }
    return s;
}

// The pair's contribution to a row's sum: (d_w d_x) q_w . q_x of each block, iv = (d_x, s_x) of both blocks.
fn pair_term(ww: ptr<function, array<u32, PW>>, xw: ptr<function, array<u32, 16>>, iv: vec4<f32>) -> f32 {
    let s = pair_dots(ww, xw);
    let d0 = unpack2x16float((*ww)[0]).x;
    let d1 = unpack2x16float((*ww)[QW]).y;
    return (d0 * iv.x) * f32(s.x) + (d1 * iv.z) * f32(s.y);
}
#endif
