// The activation vector of a mat-vec rounded to 8 bits once per step, in its own pass, as the CPU rounds it
// for the weight format (actq.wgsl): matvec-q8.wgsl then reads signed bytes and multiplies them with
// dot4I8Packed. Without this pass every workgroup of the mat-vec would scan and round all of x again (a
// 4096 x 14336 down projection has ~1,000 workgroups).
// One invocation per 4 elements (one vec4 load; with X_GLU the SwiGLU of each element is computed once), 256
// per workgroup (32 groups of 32, 4 Q8_K super-blocks): a group's largest |x| and its sum of quants meet in
// workgroup atomics (non-negative floats order as their bits), so a 14336-wide x is 14 workgroups of short
// threads instead of 448 threads that each scan 32 (or 256) elements.
// Several tokens (a prompt's rows for the subgroup-matrix mat-mat, matmat-smx.wgsl) run as the z of the grid,
// T = params.tokens of them, x of token t at x_stride vec4s from token t - 1. Output, words of q (k elements
// per token; T = 1 for a mat-vec):
//   t k / 4 + [0, k / 4)        token t's quants, four signed bytes to a word in element order
//   T k / 4 + 2 G, .. + 1       group G = t k / 32 + g (group g of token t) of 32 elements: (d_x, s_x) as f32
//                               bits, s_x the CPU's Q8_1 block sum
//                               (ACTQ 1; unused by the symmetric formats), or (ACTQ 2) (d_x of the group's
//                               super-block, the group's sum of quants as i32 bits: the K formats' minimums)
// X_GLU=1 folds the FFN's SwiGLU in: x holds a gate|up row (u at x_up vec4s after g) and the rounded input is
// silu(g) * u (ops-common.wgsl swiglu_elem, as the SWIGLU op), so the down projection of a one-token step needs
// neither a GLU dispatch nor its output.
// Defines: ACTQ (1 or 2), WG_SIZE, X_GLU (0/1). Bindings: 0 x as vec4<f32> (read), 1 q (read_write), 2 params.
// Dispatch: (groups_x, ceil(ceil(k / 4 / WG_SIZE) / groups_x), tokens).
#include "common.wgsl"
#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#if WG_SIZE % 64 != 0
#error actq-quant.wgsl: WG_SIZE must be a multiple of 64 (whole Q8_K super-blocks)
#endif
#if ACTQ != 1 && ACTQ != 2
#error actq-quant.wgsl: 8-bit activations only (ACTQ 1 or 2)
#endif
#ifndef X_GLU
#define X_GLU 0
#endif
#include "ops-common.wgsl"

struct QuantParams {
    k: u32,        // elements (a multiple of 32; of 256 for ACTQ 2)
    x_offset: u32, // first vec4 of x in its binding
    groups_x: u32, // workgroups along x of the grid
    x_up: u32,     // X_GLU: offset of u from g in x, vec4 units
    x_stride: u32, // vec4s from token t's x to token t + 1's
    tokens: u32,   // tokens T (the z of the grid): the group words follow all T tokens' quants
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
@group(0) @binding(2) var<uniform> params: QuantParams;

fn actq_x(i: u32) -> vec4<f32> {
#if X_GLU
    return swiglu4(x[i], x[i + params.x_up], (i - params.x_offset) * 4u, params.k);
#else
    return x[i];
#endif
}
#include "actq.wgsl"

var<workgroup> gmax: array<atomic<u32>, WG_SIZE / 8u>; // per 32-group: bits of its largest |x|
var<workgroup> gsum: array<atomic<i32>, WG_SIZE / 8u>; // per 32-group: sum of its quants
#if ACTQ == 2
var<workgroup> smax: array<atomic<u32>, WG_SIZE / 64u>; // per super-block: bits of its largest |x|
var<workgroup> sfirst: array<atomic<u32>, WG_SIZE / 64u>; // 255 - the first element of that magnitude
var<workgroup> sval: array<f32, WG_SIZE / 64u>;          // that element, with its sign
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * params.groups_x) * WG_SIZE + lid; // vec4 of token wg.z's x (from its start)
    let live = i < params.k / 4u;                            // whole groups are live or not (k % 32 == 0)
    var v = vec4<f32>(0.0);
    if (live) {
        v = actq_x(params.x_offset + wg.z * params.x_stride + i);
    }
    let a = abs(v);
    let m = max(max(a.x, a.y), max(a.z, a.w));
#if ACTQ == 1
    atomicMax(&gmax[lid / 8u], bitcast<u32>(m));
    workgroupBarrier();
    let amax = bitcast<f32>(atomicLoad(&gmax[lid / 8u]));
    let s = actq_scale_of(amax);
#else
    // Q8_K: the scale comes from the first element of largest |x| in the super-block, with its sign
    let sb = lid / 64u;
    atomicMax(&smax[sb], bitcast<u32>(m));
    workgroupBarrier();
    let amax = bitcast<f32>(atomicLoad(&smax[sb]));
    var first = 4u;
    for (var j = 3; j >= 0; j--) {
        if (a[j] == amax) {
            first = u32(j);
        }
    }
    if (first < 4u) {
        atomicMax(&sfirst[sb], 255u - ((lid % 64u) * 4u + first));
    }
    workgroupBarrier();
    let at = 255u - atomicLoad(&sfirst[sb]);
    if ((lid % 64u) == at / 4u) {
        sval[sb] = v[at % 4u];
    }
    workgroupBarrier();
    var s = vec2<f32>(0.0);
    if (amax != 0.0f) {
        let mul = div_rn(-127.0f, sval[sb]);
        s = vec2<f32>(mul, div_rn(1.0f, mul));
    }
#endif
    let qi = actq_quant4(v, s);
    atomicAdd(&gsum[lid / 8u], qi.x + qi.y + qi.z + qi.w);
    workgroupBarrier();
    if (!live) {
        return;
    }
    q[wg.z * (params.k / 4u) + i] = pack4xI8(qi);
    if (lid % 8u == 0u) { // the group's first invocation writes its (d_x, s_x or sum)
        let g = wg.z * (params.k / 32u) + i / 8u;
        let gw = actq_group_words(s, amax, atomicLoad(&gsum[lid / 8u]));
        q[params.tokens * (params.k / 4u) + 2u * g] = gw.x;
        q[params.tokens * (params.k / 4u) + 2u * g + 1u] = gw.y;
    }
}
