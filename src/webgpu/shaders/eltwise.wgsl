// Element-wise graph ops over rows of f32 activations (one invocation per element):
//   OP_ADD      d = a + b            (b may be one row broadcast over every row: b_rows = 1)
//   OP_SCALE    d = a * f0
//   OP_SOFTCAP  d = tanh(a * f0) * f1 (ggml's scale, tanh, scale)
//   OP_SWIGLU   d = silu(a) * b       (ggml_vec_swiglu_f32: ggml_v_expf on each row's first ne0 & ~15
//                                      elements, exp on the rest, as the CPU reference)
//   OP_GEGLU    d = gelu(a) * b       (ggml's f16-table GELU: a <= -10 -> 0, a >= 10 -> a * b, else
//                                      GELU of f16(a), rounded to f16; GELU_TABLE=1 reads ggml's table from
//                                      binding 4 (exact), GELU_TABLE=0 computes it (see kernels-ops.h))
//   OP_COPY     d = a                 (OUT_ROWS: a range of rows)
// Rows are a_stride / b_stride / d_stride elements apart (n: contiguous).
// Defines: OP (above), WG_SIZE (default 256), GELU_TABLE, B_IN_A (binary ops read b from a's binding).
// Bindings: unary ops (SCALE, SOFTCAP, COPY) and B_IN_A: 0 a, 1 d, 2 params (+ 3 GELU table); binary ops:
// 0 a, 1 b, 2 d, 3 params, 4 GELU table (GEGLU with GELU_TABLE=1: 32768 words, two halves each). a, b, d are read_write so that
// disjoint ranges of one activation buffer can back all of them.
// Dispatch: (groups_x, ceil(groups / groups_x), 1), groups = ceil(n * rows / WG_SIZE).
#include "ops-common.wgsl"
#define OP_ADD 1
#define OP_SCALE 2
#define OP_SOFTCAP 3
#define OP_SWIGLU 4
#define OP_GEGLU 5
#define OP_COPY 6
#ifndef OP
#error eltwise.wgsl needs OP
#endif
#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#ifndef GELU_TABLE
#define GELU_TABLE 0
#endif
#ifndef B_IN_A
#define B_IN_A 0
#endif
#define BINARY (OP == OP_ADD || OP == OP_SWIGLU || OP == OP_GEGLU)
#define B_BINDING (BINARY && !B_IN_A)

struct EltwiseParams {
    n: u32,        // elements per row
    rows: u32,     // rows
    a_offset: u32, // first element of a in its binding
    b_offset: u32, // first element of b in its binding (binary ops)
    d_offset: u32, // first element of d in its binding
    b_rows: u32,   // rows of b: 1 broadcasts b's single row (ADD), else rows
    groups_x: u32, // workgroups along x of the grid
    a_stride: u32, // elements between rows of a (n: contiguous; e.g. 2n for the gate half of a fused
                   // gate|up projection)
    f0: f32,       // SCALE: the factor; SOFTCAP: 1 / cap
    f1: f32,       // SOFTCAP: cap
    b_stride: u32, // elements between rows of b
    d_stride: u32, // elements between rows of d
}

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
#if B_BINDING
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> d: array<f32>;
@group(0) @binding(3) var<uniform> params: EltwiseParams;
#if OP == OP_GEGLU && GELU_TABLE
@group(0) @binding(4) var<storage, read> gelu_table: array<u32>;
#endif
#else
@group(0) @binding(1) var<storage, read_write> d: array<f32>;
@group(0) @binding(2) var<uniform> params: EltwiseParams;
#if OP == OP_GEGLU && GELU_TABLE
@group(0) @binding(3) var<storage, read> gelu_table: array<u32>;
#endif
#endif

#if OP == OP_GEGLU
// GELU of the half h (bits), as ggml_table_gelu_f16 holds it.
fn gelu_f16(h: u32) -> f32 {
#if GELU_TABLE
    return unpack2x16float(gelu_table[h >> 1u] >> ((h & 1u) * 16u)).x;
#else
    let x = unpack2x16float(h).x;
    let inner = 0.79788456080286535587989211986876f * x * fma(0.044715f * x, x, 1.0f);
    // tanh as 1 - 2 / (e^2|u| + 1): saturates to exactly +-1 where libm's tanhf rounds to it (WGSL's
    // tanh need not), which decides GELU's tiny negative tail after 1 + tanh cancels
    let e = exp(2.0f * abs(inner));
    let t = sign(inner) * (1.0f - 2.0f / (e + 1.0f));
    return f16_round(0.5f * x * (1.0f + t));
#endif
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * params.groups_x) * WG_SIZE + lid;
    if (i >= params.n * params.rows) {
        return;
    }
    let row = i / params.n;
    let col = i % params.n;
    let x = a[params.a_offset + row * params.a_stride + col];
#if BINARY
#if B_IN_A
    let g = a[params.b_offset + select(row * params.b_stride, 0u, params.b_rows == 1u) + col];
#else
    let g = b[params.b_offset + select(row * params.b_stride, 0u, params.b_rows == 1u) + col];
#endif
#endif
#if OP == OP_ADD
    let y = x + g;
#elif OP == OP_SCALE
    let y = x * params.f0;
#elif OP == OP_SOFTCAP
    let y = tanh(x * params.f0) * params.f1;
#elif OP == OP_SWIGLU
    let y = swiglu_elem(x, g, col, params.n);
#elif OP == OP_GEGLU
    var y = x * g;
    if (x <= -10.0f) {
        y = 0.0f;
    } else if (x < 10.0f) {
        y = gelu_f16(f16_bits_rne(x)) * g;
    }
#elif OP == OP_COPY
    let y = x;
#else
#error eltwise.wgsl: unknown OP
#endif
    d[params.d_offset + row * params.d_stride + col] = y;
}
