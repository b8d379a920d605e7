// The 16-bit fixed point of the subgroup-matrix mat-mat (smx-prep.wgsl says why): a value scaled so the row's
// or token's largest |value| is FULL, rounded, split into a high and a low signed byte, x = 256 h + l.
#pragma once

const FULL: f32 = 32512.0; // 127 * 256: the largest |value| maps here, so the high digit stays in [-127, 127]

// The two digits of four values already scaled to [-FULL, FULL]: (high bytes, low bytes), four to a word.
fn split4(v: vec4<f32>) -> vec2<u32> {
    let n = clamp(vec4<i32>(round(v)), vec4<i32>(-32512), vec4<i32>(32512));
    let h = (n + vec4<i32>(128)) >> vec4<u32>(8u);
    let l = n - (h << vec4<u32>(8u));
    let hb = bitcast<vec4<u32>>(h) & vec4<u32>(0xffu);
    let lb = bitcast<vec4<u32>>(l) & vec4<u32>(0xffu);
    return vec2<u32>(hb.x | (hb.y << 8u) | (hb.z << 16u) | (hb.w << 24u),
                     lb.x | (lb.y << 8u) | (lb.z << 16u) | (lb.w << 24u));
}
