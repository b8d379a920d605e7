// RMS normalisation fused with the following weight multiply (graph op RMS_NORM), per group of `group`
// elements of each row (the whole row, or each head for q/k norms):
//     d = (x * (1 / sqrt(mean(x^2) + eps))) * w        (two f32 roundings, as ggml's rms_norm then mul)
// One workgroup per (row, group): its invocations stride over the group's elements, sum the squares, then
// scale. EXACT_SUM=1 (CPU adapters, where tests compare with the CPU engine's bits) sums them exactly (see
// "The sum of squares, exactly" below; SUBGROUPS=1 only finds the largest square with subgroup operations)
// and rounds the scale correctly: the CPU's bits. EXACT_SUM=0 (GPUs) sums them in f32 (strided partial sums,
// then subgroupAdd where SUBGROUPS, else a workgroup tree) and takes inverseSqrt: a few ulp from the CPU's
// scale (relative ~3e-7 on lavapipe), two reads of x instead of three and no integer work (the limbs took
// ~26 us for 4,096 floats on an H200).
// ADD_INPUT=1 fuses the residual ADD before the norm: x = a + b is computed here (the same f32 sum as the
// ADD op), written to `sum` (the residual stream) and normalised.
// Defines: WG_SIZE (power of two, default 64), SUBGROUPS (common.wgsl), ADD_INPUT (0/1), EXACT_SUM (0/1,
// default 1), Q8_OUT (0/1/2, below: one more binding, after the parameters).
// Bindings: 0 x (read_write; a when ADD_INPUT), 1 w (read, f32 weight; unused when has_w = 0), 2 d
// (read_write), 3 params; with ADD_INPUT: 3 b (read_write), 4 sum (read_write), 5 params.
// Dispatch: (groups_x, ceil(rows * groups_per_row / groups_x), 1).
#include "common.wgsl"
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#ifndef ADD_INPUT
#define ADD_INPUT 0
#endif
#ifndef EXACT_SUM
#define EXACT_SUM 1
#endif
#if WG_SIZE <= 0 || (WG_SIZE & (WG_SIZE - 1)) != 0
#error rms-norm.wgsl: WG_SIZE must be a power of two
#endif

struct NormParams {
    n: u32,              // elements per row
    group: u32,          // elements per normalised group (n for the whole row)
    groups_per_row: u32, // n / group
    rows: u32,           // rows
    x_offset: u32,       // first element of x in its binding
    d_offset: u32,       // first element of d in its binding
    w_offset: u32,       // first element of w in its binding
    w_step: u32,         // elements of w between groups: 0 (one weight of `group` shared) or group
    has_w: u32,          // 1: multiply by w
    eps: f32,            // added to the mean square
    groups_x: u32,       // workgroups along x of the grid
    b_offset: u32,       // ADD_INPUT: first element of b in its binding
    sum_offset: u32,     // ADD_INPUT: first element of sum in its binding
    x_stride: u32,       // elements between rows of x (and of b, sum)
    d_stride: u32,       // elements between rows of d
    pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> d: array<f32>;
#if ADD_INPUT
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> sum: array<f32>;
@group(0) @binding(5) var<uniform> params: NormParams;
#else
@group(0) @binding(3) var<uniform> params: NormParams;
#endif

// ---- Q8_OUT: the output also rounded to 8 bits for the integer mat-vecs that read it (matvec-q8.wgsl) ------
// Q8_OUT = 1 (Q8_0 blocks of 32) or 2 (Q8_K super-blocks of 256): after d is written, the workgroup reads it
// back (storageBarrier) and writes actq-quant.wgsl's layout to qout, one invocation per 32 elements — so a
// one-token step needs no quantizer dispatch between the norm and its projections. Whole rows, one row only.
#ifndef Q8_OUT
#define Q8_OUT 0
#endif
#if Q8_OUT
#if ADD_INPUT
@group(0) @binding(6) var<storage, read_write> qout: array<u32>;
#else
@group(0) @binding(4) var<storage, read_write> qout: array<u32>;
#endif
#if Q8_OUT == 1
#define ACTQ 1
#else
#define ACTQ 2
#endif
var<private> q8_base: u32; // first element of the row in d
fn actq_x(i: u32) -> vec4<f32> {
    let e = q8_base + 4u * i;
    return vec4<f32>(d[e], d[e + 1u], d[e + 2u], d[e + 3u]);
}
#include "actq.wgsl"

fn q8_store(db: u32, lid: u32) {
    storageBarrier();
    q8_base = db;
    let n = params.group;
    for (var g = lid; g < n / 32u; g += WG_SIZE) {
#if Q8_OUT == 1
        let amax = actq_amax(g * 8u);
        let s = actq_scale_of(amax);
#else
        let s = actq_scale((g / 8u) * 64u);
        let amax = 0.0f; // (Q8_K keeps no block sum)
#endif
        var total = 0;
        for (var v = 0u; v < 8u; v++) {
            let qi = actq_quant4(actq_x(g * 8u + v), s);
            total += qi.x + qi.y + qi.z + qi.w;
            qout[g * 8u + v] = pack4xI8(qi);
        }
        let gw = actq_group_words(s, amax, total);
        qout[n / 4u + 2u * g] = gw.x;
        qout[n / 4u + 2u * g + 1u] = gw.y;
    }
}
#endif

// Element i of the row group starting at element offset o of x (and of b, sum when ADD_INPUT), written
// through to sum on the first pass.
fn load_x(o: u32, i: u32, store: bool) -> f32 {
#if ADD_INPUT
    let v = x[params.x_offset + o + i] + b[params.b_offset + o + i];
    if (store) {
        sum[params.sum_offset + o + i] = v;
    }
    return v;
#else
    return x[params.x_offset + o + i];
#endif
}

// d = x * scale (* w) for group g of row `row` (x's group at element ob), then (Q8_OUT) its 8-bit rounding.
// GPUs (the f32 sum with subgroups) and Q8_0 rounding: the scaled row and its 8-bit blocks in one pass over x,
// eight consecutive elements per invocation, a block's largest |x| and quant sum from the four invocations that
// hold it (shuffles), so nothing is read back from d after a storage barrier (the H200 profile: that read-back
// by a quarter of the invocations, 64 dependent loads each, made the norm ~20 us for 4096 floats)
#if Q8_OUT == 1 && SUBGROUPS && !EXACT_SUM
#define Q8_QUADS 1
fn store_scaled_q8(ob: u32, row: u32, g: u32, scale: f32, lid: u32) {
    let n = params.group;
    let db = params.d_offset + row * params.d_stride + g * params.group;
    let wb = params.w_offset + g * params.w_step;
    let iters = (n + 8u * WG_SIZE - 1u) / (8u * WG_SIZE); // uniform: every invocation shuffles each time
    for (var it = 0u; it < iters; it++) {
        let e0 = 8u * (lid + it * WG_SIZE);
        let inside = e0 < n;
        let e = select(0u, e0, inside);
        var v: array<f32, 8>;
        var m = 0.0f;
        for (var j = 0u; j < 8u; j++) {
            var t = load_x(ob, e + j, false) * scale;
            if (params.has_w != 0u) {
                t = t * w[wb + e + j];
            }
            v[j] = t;
            m = max(m, abs(t));
        }
        m = max(m, subgroupShuffleXor(m, 1u));
        let amax = max(m, subgroupShuffleXor(m, 2u));
        let sc = actq_scale_of(amax);
        let q0 = actq_quant4(vec4<f32>(v[0], v[1], v[2], v[3]), sc);
        let q1 = actq_quant4(vec4<f32>(v[4], v[5], v[6], v[7]), sc);
        var total = q0.x + q0.y + q0.z + q0.w + q1.x + q1.y + q1.z + q1.w;
        total += subgroupShuffleXor(total, 1u);
        total += subgroupShuffleXor(total, 2u);
        if (inside) {
            for (var j = 0u; j < 8u; j++) {
                d[db + e + j] = v[j];
            }
            qout[e / 4u] = pack4xI8(q0);
            qout[e / 4u + 1u] = pack4xI8(q1);
            if ((lid & 3u) == 0u) {
                let gw = actq_group_words(sc, amax, total);
                qout[n / 4u + 2u * (e / 32u)] = gw.x;
                qout[n / 4u + 2u * (e / 32u) + 1u] = gw.y;
            }
        }
    }
}
#endif

#ifndef Q8_QUADS
#define Q8_QUADS 0
#endif

fn store_scaled(ob: u32, row: u32, g: u32, scale: f32, lid: u32) {
#if Q8_QUADS
    // rows that fill the workgroup (the H200: 8B's 4096 floats at 512 invocations, tg128 227-238 -> 251-255
    // t/s); shorter ones kept the read-back (1B's 2048: 665-694 t/s before, 450-687 through the quads)
    if (params.group >= 8u * WG_SIZE) {
        store_scaled_q8(ob, row, g, scale, lid);
        return;
    }
#endif
    let db = params.d_offset + row * params.d_stride + g * params.group;
    let wb = params.w_offset + g * params.w_step;
    for (var i = lid; i < params.group; i += WG_SIZE) {
        var v = load_x(ob, i, false) * scale;
        if (params.has_w != 0u) {
            v = v * w[wb + i];
        }
        d[db + i] = v;
    }
#if Q8_OUT
    q8_store(db, lid);
#endif
}

// ---- The sum of squares in f32 (GPUs) ---------------------------------------------------------------------
#if !EXACT_SUM
#include "wg-sum.wgsl"

// The group's sum of squares, the same value in every invocation.
fn sum_squares(ob: u32, lid: u32
#if SUBGROUPS
               , sg_lid: u32, sg_size: u32
#endif
) -> f32 {
    var acc = 0.0f;
    for (var i = lid; i < params.group; i += WG_SIZE) {
        let v = load_x(ob, i, true);
        acc = fma(v, v, acc);
    }
#if SUBGROUPS
    return wg_sum(acc, lid, sg_lid, sg_size);
#else
    return wg_sum(acc, lid);
#endif
}

#if SUBGROUPS && (Q8_OUT != 2 || WG_SIZE >= 32)
#define ONE_PASS 1
#if Q8_OUT
var<workgroup> lay_far: atomic<u32>; // 1: some invocation's shuffle partners are not lid ^ 1, lid ^ 2 (main)
var<workgroup> lay_far_u: u32;       // the same, as a value every invocation reads (uniform)
#endif
#if Q8_OUT == 2
// Q8_K super-blocks of 256 elements = 32 invocations: its largest |x|, then the first element of that
// magnitude (255 - its index, so the largest wins) and that element with its sign (actq-quant.wgsl's way)
var<workgroup> kmax: array<atomic<u32>, WG_SIZE / 32u>;
var<workgroup> kfirst: array<atomic<u32>, WG_SIZE / 32u>;
var<workgroup> kval: array<f32, WG_SIZE / 32u>;
#endif
// A group of at most 8 WG_SIZE elements (decode's rows: 2048 and 4096 floats at 512 invocations) in one pass:
// each invocation loads its 8 consecutive elements of x (and b), and of w, once and together, keeps them
// in registers through the sum of squares and scales them from there; Q8_OUT=1 rounds its 8 to the Q8_0
// blocks they are part of (four invocations a block, their largest |x| and quant sum by shuffles), Q8_OUT=2
// to Q8_K (a super-block's scale through workgroup atomics, the 32-groups' quant sums by shuffles). The
// strided loops it replaces waited on one load after another (8 trips to memory for the sum, then more to
// read x again), which made a 4096-float norm cost as much as a 9 MB mat-vec on the H200. The sum adds in
// another order than the strided one: GPUs' norms are within a few ulp of the CPU's anyway (the top).
fn one_pass(ob: u32, row: u32, g: u32, lid: u32, sg_lid: u32, sg_size: u32) {
    let n = params.group;
    let e0 = 8u * lid;
    let inside = e0 < n;
    let e = select(0u, e0, inside);
    let wb = params.w_offset + g * params.w_step;
    var v: array<f32, 8>;
    var wv: array<f32, 8>;
    var acc = 0.0f;
    for (var j = 0u; j < 8u; j++) {
        v[j] = load_x(ob, e + j, inside);
        acc = fma(v[j], v[j], acc);
        wv[j] = 1.0f;
        if (params.has_w != 0u) {
            wv[j] = w[wb + e + j];
        }
    }
    let scale = inverseSqrt(wg_sum(select(0.0f, acc, inside), lid, sg_lid, sg_size) / f32(n) + params.eps);
    var m = 0.0f;
    for (var j = 0u; j < 8u; j++) {
        var x = v[j] * scale;
        if (params.has_w != 0u) {
            x = x * wv[j];
        }
        v[j] = x;
        m = max(m, abs(x));
    }
    let db = params.d_offset + row * params.d_stride + g * params.group;
#if Q8_OUT == 1
    m = max(m, subgroupShuffleXor(m, 1u));
    let amax = max(m, subgroupShuffleXor(m, 2u));
    let sc = actq_scale_of(amax);
#elif Q8_OUT == 2
    // (super-blocks lie wholly inside the row or past it: n is a multiple of 256 for Q8_K)
    let sb = lid / 32u;
    atomicMax(&kmax[sb], bitcast<u32>(m));
    workgroupBarrier();
    let bmax = bitcast<f32>(atomicLoad(&kmax[sb]));
    var first = 8u;
    for (var j = 7; j >= 0; j--) {
        if (abs(v[j]) == bmax) {
            first = u32(j);
        }
    }
    if (inside && first < 8u) {
        atomicMax(&kfirst[sb], 255u - ((lid % 32u) * 8u + first));
    }
    workgroupBarrier();
    let at = 255u - atomicLoad(&kfirst[sb]);
    if (inside && lid % 32u == at / 8u) {
        kval[sb] = v[at % 8u];
    }
    workgroupBarrier();
    var sc = vec2<f32>(0.0);
    if (bmax != 0.0f) {
        let mul = div_rn(-127.0f, kval[sb]);
        sc = vec2<f32>(mul, div_rn(1.0f, mul));
    }
    let amax = 0.0f; // (Q8_K keeps no block sum)
#endif
#if Q8_OUT
    let q0 = actq_quant4(vec4<f32>(v[0], v[1], v[2], v[3]), sc);
    let q1 = actq_quant4(vec4<f32>(v[4], v[5], v[6], v[7]), sc);
    var total = q0.x + q0.y + q0.z + q0.w + q1.x + q1.y + q1.z + q1.w;
    total += subgroupShuffleXor(total, 1u);
    total += subgroupShuffleXor(total, 2u);
#endif
    if (inside) {
        for (var j = 0u; j < 8u; j++) {
            d[db + e + j] = v[j];
        }
#if Q8_OUT
        qout[e / 4u] = pack4xI8(q0);
        qout[e / 4u + 1u] = pack4xI8(q1);
        if ((lid & 3u) == 0u) {
            let gw = actq_group_words(sc, amax, total);
            qout[n / 4u + 2u * (e / 32u)] = gw.x;
            qout[n / 4u + 2u * (e / 32u) + 1u] = gw.y;
        }
#endif
    }
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32
#if SUBGROUPS
        , @builtin(subgroup_invocation_id) sg_lid: u32, @builtin(subgroup_size) sg_size: u32
#endif
) {
    let item = wg.x + wg.y * params.groups_x;
    if (item >= params.rows * params.groups_per_row) {
        return; // uniform across the workgroup
    }
    let row = item / params.groups_per_row;
    let g = item % params.groups_per_row;
    let ob = row * params.x_stride + g * params.group;
#ifdef ONE_PASS
#if Q8_OUT
    // The 8-bit rounding's shuffles take invocation lid ^ 1 and lid ^ 2 as the block's other invocations:
    // WebGPU does not say how a workgroup's invocations are laid out in subgroups (every driver measured so
    // far: consecutive), so the one pass runs only where they are those invocations, else the strided path.
    let p1 = subgroupShuffleXor(lid, 1u); // (both before the test: && would make the second non-uniform)
    let p2 = subgroupShuffleXor(lid, 2u);
    if (p1 != (lid ^ 1u) || p2 != (lid ^ 2u)) {
        atomicStore(&lay_far, 1u);
    }
    workgroupBarrier();
    if (lid == 0u) {
        lay_far_u = atomicLoad(&lay_far);
    }
    let laid = workgroupUniformLoad(&lay_far_u) == 0u;
#else
    let laid = true;
#endif
    if (laid && params.group <= 8u * WG_SIZE && params.group % 8u == 0u) { // uniform
        one_pass(ob, row, g, lid, sg_lid, sg_size);
        return;
    }
#endif
#if SUBGROUPS
    let total = sum_squares(ob, lid, sg_lid, sg_size);
#else
    let total = sum_squares(ob, lid);
#endif
    let scale = inverseSqrt(total / f32(params.group) + params.eps);
    store_scaled(ob, row, g, scale, lid);
}
#else
// ---- The sum of squares, exactly (rms-exact.wgsl) ----------------------------------------------------------
#include "rms-exact.wgsl"
#if WG_SIZE > 512
#error rms-norm.wgsl: WG_SIZE above 512 needs more than 12 KiB of workgroup memory for the limbs
#endif

var<workgroup> emax: atomic<u32>;                        // largest biased exponent among the squares (at least 1)
#if SUBGROUPS
var<workgroup> wsum: array<atomic<u32>, LIMBS>;          // the subgroups' normalised limb sums, added up
#else
var<workgroup> limbs: array<array<u32, LIMBS>, WG_SIZE>; // per invocation, then the tree's partial sums
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32
#if SUBGROUPS
        , @builtin(subgroup_invocation_id) sg_lid: u32
#endif
) {
    let item = wg.x + wg.y * params.groups_x;
    if (item >= params.rows * params.groups_per_row) {
        return; // uniform across the workgroup
    }
    let row = item / params.groups_per_row;
    let g = item % params.groups_per_row;
    let ob = row * params.x_stride + g * params.group;
    // 1. the largest square's exponent (squares as f32 products: the CPU rounds x * x before widening it)
    var e = 1u;
    for (var i = lid; i < params.group; i += WG_SIZE) {
        let v = load_x(ob, i, true);
        e = max(e, bitcast<u32>(v * v) >> 23u);
    }
#if SUBGROUPS
    e = subgroupMax(e);
    if (sg_lid == 0u) {
        atomicMax(&emax, e);
    }
#else
    atomicMax(&emax, e);
#endif
    workgroupBarrier();
    let e_max = atomicLoad(&emax);
    // 2. the squares in fixed point, then a tree over the invocations (integer adds: any order, same sum)
    var acc: array<u32, LIMBS>;
    for (var i = lid; i < params.group; i += WG_SIZE) {
        let v = load_x(ob, i, false);
        limbs_add_square(&acc, bitcast<u32>(v * v), e_max);
    }
    limbs_normalize(&acc);
#if SUBGROUPS
    // subgroup sums, then one atomic add per limb and subgroup: two barriers in all instead of log2(WG_SIZE)
    // + 2 (normalised limbs are below 2^16, so neither a subgroup's sums nor the workgroup's overflow 32 bits
    // for WG_SIZE <= 512, and integer adds give the same bits in any order)
    for (var l = 0u; l < LIMBS; l++) {
        acc[l] = subgroupAdd(acc[l]);
    }
    limbs_normalize(&acc);
    if (sg_lid == 0u) {
        for (var l = 0u; l < LIMBS; l++) {
            atomicAdd(&wsum[l], acc[l]);
        }
    }
    workgroupBarrier();
    var total: array<u32, LIMBS>;
    for (var l = 0u; l < LIMBS; l++) {
        total[l] = atomicLoad(&wsum[l]);
    }
    limbs_normalize(&total);
#else
    limbs[lid] = acc;
    for (var s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if (lid < s) {
            var t = limbs[lid];
            var o = limbs[lid + s];
            for (var l = 0u; l < LIMBS; l++) {
                t[l] += o[l];
            }
            limbs_normalize(&t);
            limbs[lid] = t;
        }
    }
    workgroupBarrier();
    let total = limbs[0];
#endif
    // 3. the CPU's scale: (float)(sum / n), then 1.0f / sqrtf(mean + eps)
    let scale = rms_scale(limbs_mean(total, params.group, e_max) + params.eps);
    store_scaled(ob, row, g, scale, lid);
}
#endif
