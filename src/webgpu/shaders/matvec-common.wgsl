// What the mat-vec kernels (matvec.wgsl, matvec-exact.wgsl) share: the parameter block, the bindings, and
// x_in(i), vec4 number i of the product's input, read from the x binding or, with X_GLU, computed from a
// gate|up row there.
#pragma once
#include "ops-common.wgsl"
#ifndef X_GLU
#define X_GLU 0
#endif

struct MatvecParams {
    k: u32,          // elements per row, a multiple of DQ_BLOCK (f32, f16: of 4)
    rows: u32,       // rows of W (= elements of y)
    row_stride: u32, // bytes from one row of W to the next
    w_offset: u32,   // byte offset of row 0 in w (even)
    x_offset: u32,   // offset of x in the x binding, in vec4 units
    y_offset: u32,   // offset of y in the y binding, in elements
    groups_x: u32,   // workgroups along x in the dispatch grid
    x_up: u32,       // X_GLU: offset of u from g in the x binding, in vec4 units
    order: u32,      // matvec-exact.wgsl, Q2_K / Q4_K: 1 = the repacked gemm order, 0 = gemv
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

#if defined(W_VEC4) // (matvec-q8.wgsl OCT: 16-byte loads; weights.wgsl's words then come through the includer's w_priv)
@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
#else
@group(0) @binding(0) var<storage, read> w: array<u32>;
#endif
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: MatvecParams;
#if X_GLU == 2
@group(0) @binding(4) var<storage, read> gelu_table: array<u32>;
#endif

// Vec4 number i of the product's input: x[i], or (X_GLU) the gated activation of gate|up in x. Element
// col = 4 (i - x_offset) + j of the row: as eltwise.wgsl with n = k (ggml_v_expf on the row's first
// k & ~15 elements, exp on the rest; GELU from ggml's f16 table).
fn x_in(i: u32) -> vec4<f32> {
#if X_GLU
    let gv = x[i];
    let uv = x[i + params.x_up];
    let col0 = (i - params.x_offset) * 4u;
#if X_GLU == 1
    return swiglu4(gv, uv, col0, params.k);
#else
    var r: vec4<f32>;
    for (var j = 0u; j < 4u; j++) {
        let xx = gv[j];
        let g = uv[j];
        var yy = xx * g;
        if (xx <= -10.0f) {
            yy = 0.0f;
        } else if (xx < 10.0f) {
            let h = f16_bits_rne(xx);
            yy = unpack2x16float(gelu_table[h >> 1u] >> ((h & 1u) * 16u)).x * g;
        }
        r[j] = yy;
    }
    return r;
#endif
#else
    return x[i];
#endif
}
