// The activation vector of a mat-vec rounded to 8 bits once per step, in its own pass, as the CPU rounds it
// for the weight format (actq.wgsl): matvec-q8.wgsl then reads signed bytes and multiplies them with
// dot4I8Packed. Without this pass every workgroup of the mat-vec would scan and round all of x again (a
// 4096 x 14336 down projection has ~1,000 workgroups).
// One invocation per 32 elements (a Q8_0 block; an eighth of a Q8_K super-block, whose scale each of its 8
// invocations finds by scanning the 256 elements: 2 KB of cached reads, cheaper than a second pass).
// Output, words of q (k elements):
//   [0, k / 4)                  the quants, four signed bytes to a word in element order
//   k / 4 + 2 g, k / 4 + 2 g + 1 group g of 32 elements: (d_x, s_x) as f32 bits, s_x the CPU's Q8_1 block sum
//                               (ACTQ 1; unused by the symmetric formats), or (ACTQ 2) (d_x of the group's
//                               super-block, the group's sum of quants as i32 bits: the K formats' minimums)
// X_GLU=1 folds the FFN's SwiGLU in: x holds a gate|up row (u at x_up vec4s after g) and the rounded input is
// silu(g) * u (ops-common.wgsl swiglu_elem, as the SWIGLU op), so the down projection of a one-token step needs
// neither a GLU dispatch nor its output.
// Defines: ACTQ (1 or 2), WG_SIZE, X_GLU (0/1). Bindings: 0 x as vec4<f32> (read), 1 q (read_write), 2 params.
// Dispatch: (groups_x, ceil(ceil(k / 32 / WG_SIZE) / groups_x), 1).
#include "common.wgsl"
#ifndef WG_SIZE
#define WG_SIZE 64
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
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
@group(0) @binding(2) var<uniform> params: QuantParams;

fn actq_x(i: u32) -> vec4<f32> {
#if X_GLU
    let gv = x[i];
    let uv = x[i + params.x_up];
    let col0 = (i - params.x_offset) * 4u;
    var r: vec4<f32>;
    for (var j = 0u; j < 4u; j++) {
        r[j] = swiglu_elem(gv[j], uv[j], col0 + j, params.k);
    }
    return r;
#else
    return x[i];
#endif
}
#include "actq.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = (wg.x + wg.y * params.groups_x) * WG_SIZE + lid;
    if (g >= params.k / 32u) {
        return;
    }
    let xb = params.x_offset + g * 8u;
#if ACTQ == 1
    let amax = actq_amax(xb);
    let s = actq_scale_of(amax);
#else
    let s = actq_scale(params.x_offset + (g / 8u) * 64u); // the super-block's (multiplier, d_x)
#endif
    var sum = 0;
    for (var v = 0u; v < 8u; v++) {
        let qi = vec4<i32>(clamp(round(actq_x(xb + v) * s.x), vec4<f32>(-128.0), vec4<f32>(127.0)));
        sum += qi.x + qi.y + qi.z + qi.w;
        q[g * 8u + v] = pack4xI8(qi);
    }
    let info = params.k / 4u + 2u * g;
    q[info] = bitcast<u32>(s.y);
#if ACTQ == 1
    q[info + 1u] = bitcast<u32>(actq_q8_1_sum(amax, f32(sum)));
#else
    q[info + 1u] = bitcast<u32>(sum);
#endif
}
