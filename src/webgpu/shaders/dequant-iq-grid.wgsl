// The chunk routine of the grid formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, from their integer codes
// (dqx_chunk, dqx_scales and the factor DQX_K of the including dequant-<format>.wgsl), so the float and the
// exact kernels read the same fields.
#pragma once

// The grid formats' chunk from its integer codes (dqx_chunk: signed grid values, one scale sc for the whole
// chunk): x = d * sc * DQX_K * q, with the CPU's factor DQX_K (1/8 for IQ2, 1/4 for IQ3_XXS, 1 for IQ3_S).
fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let q = dqx_chunk(b, c);
    let db = ftype(dqx_scales(b).x * f32(q.sc.x) * DQX_K);
    return Dq8(db * fvec4(q.lo), db * fvec4(q.hi));
}
