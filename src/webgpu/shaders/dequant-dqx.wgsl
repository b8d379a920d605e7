// The chunk routine of the formats whose elements are d * sc * q (- dmin * mn with DQX_MIN), built from their
// integer codes (dqx_chunk, dqx_scales of the including dequant-<format>.wgsl: Q2_K-Q6_K, TQ1_0, TQ2_0), so
// the float kernels and the exact one (matvec-exact.wgsl) read the same fields. The IQ grids have their own
// (dequant-iq-grid.wgsl: a constant factor besides sc).
#pragma once
#ifndef DQX_MIN
#define DQX_MIN 0
#endif

fn dq_chunk(b: u32, c: u32) -> Dq8 {
    let s = dqx_scales(b); // (d, dmin)
    let q = dqx_chunk(b, c);
    let dl = s.x * vec2<f32>(q.sc);
#if DQX_MIN
    let ml = s.y * vec2<f32>(q.mn);
    return Dq8(ftype(dl.x) * fvec4(q.lo) - ftype(ml.x), ftype(dl.y) * fvec4(q.hi) - ftype(ml.y));
#else
    return Dq8(ftype(dl.x) * fvec4(q.lo), ftype(dl.y) * fvec4(q.hi));
#endif
}
