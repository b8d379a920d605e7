// Rotary position embedding (graph op ROPE) as the CPU reference (src/cpu/engine-ops.c op_rope, ggml's
// rope with its sin/cos cache): for row r at position pos0 + r, head h and pair p < n_rot / 2,
//     theta = (pos0 + r) * theta_scale^p           (p successive f32 products, as the cache is built)
//     extrap = theta / ff[p]                        (frequency factors, when has_ff)
//     th = freq_scale * extrap, blended with extrap over YaRN's ramp when ext_factor != 0
//     (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos) * mscale
// NORMAL mode rotates (2p, 2p+1), NEOX (p, p + n_rot/2); dims n_rot .. head_dim are copied.
// sin and cos are computed here (Cody-Waite reduction by pi/2 in three parts + cephes' minimax
// polynomials, ~1 ulp), because WGSL only bounds its built-ins on [-pi, pi] (absolute error 2^-11) and
// angles reach the context length in radians.
// One invocation per (row, head, pair of head_dim / 2); pairs past n_rot / 2 copy their two elements.
// OUT_F16=1 (RoPE fused with KV_STORE into an f16 cache): d is packed halves (array<u32>), each invocation
// writes one word, elements (2q, 2q + 1) of its head, rounded to nearest even as the CPU's cache write;
// d_offset, d_stride and head_dim are then in elements and even.
// Defines: WG_SIZE (default 64), OUT_F16 (0/1).
// Bindings: 0 x (read_write), 1 ff (read, f32 frequency factors, or (has_ff = 2) the host's sin/cos table of the
// rows: rope-common.wgsl; unused when has_ff = 0), 2 d (read_write),
// 3 params. Dispatch: (groups_x, ceil(groups / groups_x), 1), groups = ceil(rows * n_head * head_dim / 2 /
// WG_SIZE).
#include "ops-common.wgsl"
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#ifndef OUT_F16
#define OUT_F16 0
#endif

struct RopeParams {
    n_head: u32,       // heads per row
    head_dim: u32,     // elements per head (even)
    n_rot: u32,        // rotated elements per head (even, <= head_dim)
    neox: u32,         // 1: NEOX pairs (p, p + n_rot/2); 0: NORMAL pairs (2p, 2p + 1)
    rows: u32,         // rows (tokens)
    pos0: u32,         // position of row 0
    x_offset: u32,     // first element of x in its binding
    x_stride: u32,     // elements between rows of x
    d_offset: u32,     // first element of d in its binding
    d_stride: u32,     // elements between rows of d
    ff_offset: u32,    // first element of the frequency factors in their binding
    has_ff: u32,       // 1: divide each pair's angle by ff[p]; 2: ff is the host's sin/cos table
    theta_scale: f32,  // freq_base^(-2 / n_rot), computed on the host with powf as the CPU does
    freq_scale: f32,   // ggml's freq_scale
    ext_factor: f32,   // YaRN extrapolation mix (0: off)
    mscale: f32,       // sin/cos magnitude: attn_factor (times YaRN's 1 + 0.1 ln(1/freq_scale))
    corr0: f32,        // YaRN correction dims (ggml_rope_yarn_corr_dims)
    corr1: f32,
    groups_x: u32,     // workgroups along x of the grid
    pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> ff: array<f32>;
#if OUT_F16
@group(0) @binding(2) var<storage, read_write> d: array<u32>;
#else
@group(0) @binding(2) var<storage, read_write> d: array<f32>;
#endif
@group(0) @binding(3) var<uniform> params: RopeParams;

// Element i of the input (one input here).
fn rope_src(which: u32, i: u32) -> f32 {
    return x[i];
}

#include "rope-common.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let half_dim = params.head_dim / 2u;
    let i = (wg.x + wg.y * params.groups_x) * WG_SIZE + lid;
    if (i >= params.rows * params.n_head * half_dim) {
        return;
    }
    let p = i % half_dim;
    let h = (i / half_dim) % params.n_head;
    let row = i / (half_dim * params.n_head);
    let xb = params.x_offset + row * params.x_stride + h * params.head_dim;
    let db = params.d_offset + row * params.d_stride + h * params.head_dim;
#if OUT_F16
    let pos = params.pos0 + row;
    var v0: f32;
    var v1: f32;
    if (params.neox == 0u && 2u * p < params.n_rot) { // one pair: one angle for both elements
        let cs = rope_cs(pos, p);
        let x0 = x[xb + 2u * p];
        let x1 = x[xb + 2u * p + 1u];
        v0 = rope_rot0(x0, x1, cs);
        v1 = rope_rot1(x0, x1, cs);
    } else {
        v0 = rope_elem(0u, xb, pos, 2u * p);
        v1 = rope_elem(0u, xb, pos, 2u * p + 1u);
    }
    d[db / 2u + p] = f16_bits_rne(v0) | (f16_bits_rne(v1) << 16u);
#else
    if (2u * p >= params.n_rot) {
        d[db + 2u * p] = x[xb + 2u * p];
        d[db + 2u * p + 1u] = x[xb + 2u * p + 1u];
        return;
    }
    let cs = rope_cs(params.pos0 + row, p);
    var ia = 2u * p;
    var ib = ia + 1u;
    if (params.neox != 0u) {
        ia = p;
        ib = p + params.n_rot / 2u;
    }
    let x0 = x[xb + ia];
    let x1 = x[xb + ib];
    d[db + ia] = rope_rot0(x0, x1, cs);
    d[db + ib] = rope_rot1(x0, x1, cs);
#endif
}
