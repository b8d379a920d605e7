// Merges the split partials of attn-decode.wgsl into the output: one workgroup per (query head, token);
// invocations take vec4 lanes of the head. With M the largest split max, the output is
// sum_s V_s * exp(m_s - M) / sum_s l_s * exp(m_s - M) (empty splits have m = NEG, l = 0, V = 0).
// Heads of up to 4 WG_SIZE elements take the splits in one pass (below: a running max and sums, RB splits
// loads in flight per invocation); larger heads a round at a time: the invocations load one split each
// into workgroup memory, then the running max, sum and V sums take the round's terms in split order.
// Defines: attn-common.wgsl's. Dispatch: (n_head, tokens, 1).
#include "attn-common.wgsl"

// Q8_OUT=1 (one-token steps, HEAD_DIM a multiple of 32 within 4 WG_SIZE): the head's output is also rounded to
// Q8_0 blocks into qout in actq-quant.wgsl's layout (x of n_head * HEAD_DIM elements), so the integer mat-vec of
// the output projection needs no quantizer dispatch; a block's largest |x| and quant sum meet in workgroup
// atomics over its 8 lanes.
#ifndef Q8_OUT
#define Q8_OUT 0
#endif
#if Q8_OUT
@group(0) @binding(6) var<storage, read_write> qout: array<u32>;
#define ACTQ 1
fn actq_x(i: u32) -> vec4<f32> {
    return o[i];
}
#include "actq.wgsl"
var<workgroup> qmax: array<atomic<u32>, D4 / 8u>; // per block of the head: bits of its largest |x|
var<workgroup> qsum: array<atomic<i32>, D4 / 8u>; // per block: sum of its quants
#endif

var<workgroup> wm: array<f32, WG_SIZE>; // a round's split maxima, then their weighted sums
#if HEAD_DIM / 4 <= WG_SIZE
const SG: u32 = WG / D4;                  // splits per round of the V sums
var<workgroup> wv: array<vec4<f32>, WG_SIZE>; // split i's term of lane l at i * D4 + l
#endif

// One pass over the partials (HEAD_DIM / 4 <= WG_SIZE): SG groups of D4 invocations, group g takes splits
// g, g + SG, ... RB at a time (their (max, sum) and V quads loaded together, then merged into a running
// max, sum and V sum that rescale as the max grows), then group 0 merges the SG groups' states. The earlier
// three rounds of loads (maxima, sums, then V SG splits at a time) waited on memory ns / SG + 2 times.
#if HEAD_DIM / 4 <= WG_SIZE
const RB: u32 = 4u;
var<workgroup> gm: array<f32, WG_SIZE / D4>; // group g's running max
var<workgroup> gl: array<f32, WG_SIZE / D4>; // its running sum

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let ns = params.n_splits;
    let st = D4 + 1u;
    let pb = (t * params.n_head + h) * ns * st;
    let g = lid / D4;
    let lane = lid % D4;
    var m = NEG;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    if (g < SG) {
        for (var s0 = g; s0 < ns; s0 += RB * SG) {
            var ml: array<vec4<f32>, RB>;
            var pv: array<vec4<f32>, RB>;
            for (var u = 0u; u < RB; u++) {
                let s = min(s0 + u * SG, ns - 1u);
                ml[u] = part[pb + s * st];
                pv[u] = part[pb + s * st + 1u + lane];
            }
            for (var u = 0u; u < RB; u++) {
                if (s0 + u * SG < ns) {
                    let mn = max(m, ml[u].x);
                    let a = ex(m - mn);
                    let b = ex(ml[u].x - mn);
                    l = l * a + ml[u].y * b;
                    acc = acc * a + pv[u] * b;
                    m = mn;
                }
            }
        }
        if (lane == 0u) {
            gm[g] = m;
            gl[g] = l;
        }
        wv[lid] = acc;
    }
    workgroupBarrier();
    if (g == 0u) {
        var mx = NEG;
        for (var i = 0u; i < SG; i++) {
            mx = max(mx, gm[i]);
        }
        var sum = 0.0;
        acc = vec4<f32>(0.0);
        for (var i = 0u; i < SG; i++) {
            let e = ex(gm[i] - mx);
            sum += gl[i] * e;
            acc += wv[i * D4 + lane] * e;
        }
        let inv = select(0.0, 1.0 / sum, sum > 0.0);
        acc = acc * inv;
        o[params.o_offset + t * params.o_stride + h * D4 + lane] = acc;
    }
#if Q8_OUT
    let val = acc;
    let a = abs(val);
    if (g == 0u) {
        atomicMax(&qmax[lane / 8u], bitcast<u32>(max(max(a.x, a.y), max(a.z, a.w))));
    }
    workgroupBarrier();
    let amax = bitcast<f32>(atomicLoad(&qmax[lane / 8u]));
    let sc = actq_scale_of(amax);
    let qi = actq_quant4(val, sc);
    if (g == 0u) {
        atomicAdd(&qsum[lane / 8u], qi.x + qi.y + qi.z + qi.w);
        qout[h * D4 + lane] = pack4xI8(qi);
    }
    workgroupBarrier();
    if (g == 0u && lane % 8u == 0u) {
        let info = params.n_head * D4 + 2u * ((h * D4 + lane) / 8u);
        let gw = actq_group_words(sc, amax, atomicLoad(&qsum[lane / 8u]));
        qout[info] = gw.x;
        qout[info + 1u] = gw.y;
    }
#endif
}
#else
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let ns = params.n_splits;
    let st = D4 + 1u;
    let pb = (t * params.n_head + h) * ns * st;
    var mx = NEG;
    for (var s0 = 0u; s0 < ns; s0 += WG) {
        workgroupBarrier(); // the previous round is read
        wm[lid] = select(NEG, part[pb + min(s0 + lid, ns - 1u) * st].x, s0 + lid < ns);
        workgroupBarrier();
        for (var i = 0u; i < min(WG, ns - s0); i++) {
            mx = max(mx, wm[i]);
        }
    }
    var sum = 0.0;
    for (var s0 = 0u; s0 < ns; s0 += WG) {
        workgroupBarrier();
        if (s0 + lid < ns) {
            let ml = part[pb + (s0 + lid) * st];
            wm[lid] = ml.y * ex(ml.x - mx);
        }
        workgroupBarrier();
        for (var i = 0u; i < min(WG, ns - s0); i++) {
            sum += wm[i];
        }
    }
    let inv = select(0.0, 1.0 / sum, sum > 0.0);
    for (var lane = lid; lane < D4; lane += WG) {
        var acc = vec4<f32>(0.0);
        for (var s = 0u; s < ns; s++) {
            let ps = pb + s * st;
            acc += part[ps + 1u + lane] * ex(part[ps].x - mx);
        }
        o[params.o_offset + t * params.o_stride + h * D4 + lane] = acc * inv;
    }
}
#endif
