// What the two mat-mat kernels share (matmat.wgsl: f32/f16 tiles of dequantized weights; matmat-q8.wgsl:
// 8-bit tiles and integer products): the parameter block, the bindings, how a workgroup finds its tile and
// how invocations store their register block of Y. The includer defines TM, TN, RM, RN first.
#pragma once

struct MatmatParams {
    k: u32,          // elements per row of W and per token of X, a multiple of DQ_BLOCK
    rows: u32,       // rows of W (= elements of each Y[t])
    tokens: u32,     // tokens in X and Y
    row_stride: u32, // bytes from one row of W to the next
    w_offset: u32,   // byte offset of row 0 in w (even)
    x_offset: u32,   // offset of X[0] in the x binding, in vec4 units
    x_stride: u32,   // vec4s from X[t] to X[t + 1]
    y_offset: u32,   // offset of Y[0] in the y binding, in elements
    y_stride: u32,   // elements from Y[t] to Y[t + 1]
    groups_x: u32,   // workgroups along x of the grid (row tiles fold over x and y)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: MatmatParams;

const TMT: u32 = TM / RM; // invocations along rows
const TNT: u32 = TN / RN; // invocations along tokens

// First row of the workgroup's tile (row tiles fold over x and y of the grid); past params.rows for the few
// groups beyond the last tile, which return at once (uniformly).
fn mm_row0(wg: vec3<u32>) -> u32 {
    return (wg.x + wg.y * params.groups_x) * TM;
}

// Stores invocation (tm, tn)'s outputs: rows row0 + tm + i * TMT, tokens tok0 + tn + j * TNT (consecutive
// invocations take consecutive rows, so the stores of Y are contiguous), inside Y only.
fn mm_store(acc: ptr<function, array<f32, RM * RN>>, row0: u32, tok0: u32, tm: u32, tn: u32) {
    for (var i = 0u; i < RM; i++) {
        let row = row0 + tm + i * TMT;
        for (var j = 0u; j < RN; j++) {
            let tok = tok0 + tn + j * TNT;
            if (row < params.rows && tok < params.tokens) {
                y[params.y_offset + tok * params.y_stride + row] = (*acc)[i * RN + j];
            }
        }
    }
}
