// RMS normalisation fused with the following weight multiply (graph op RMS_NORM), per group of `group`
// elements of each row (the whole row, or each head for q/k norms):
//     d = (x * (1 / sqrt(mean(x^2) + eps))) * w        (two f32 roundings, as ggml's rms_norm then mul)
// One workgroup per (row, group): its invocations stride over the group's elements, sum the squares exactly
// (see "The sum of squares, exactly" below; SUBGROUPS=1 only finds the largest square with subgroup
// operations), then scale.
// ADD_INPUT=1 fuses the residual ADD before the norm: x = a + b is computed here (the same f32 sum as the
// ADD op), written to `sum` (the residual stream) and normalised.
// Defines: WG_SIZE (power of two, default 64), SUBGROUPS (common.wgsl), ADD_INPUT (0/1).
// Bindings: 0 x (read_write; a when ADD_INPUT), 1 w (read, f32 weight; unused when has_w = 0), 2 d
// (read_write), 3 params; with ADD_INPUT: 3 b (read_write), 4 sum (read_write), 5 params.
// Dispatch: (groups_x, ceil(rows * groups_per_row / groups_x), 1).
#include "common.wgsl"
#include "numerics.wgsl"
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#ifndef ADD_INPUT
#define ADD_INPUT 0
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

// ---- The sum of squares, exactly --------------------------------------------------------------------------
// The CPU sums the f32 squares in double (as ggml) and rounds the mean to f32: with 2^-53 per add against the
// mean's 2^-24 that is, but for ~n * 2^-29 of rows, the exactly rounded mean. A float sum here (any order)
// would differ from it by an ulp in about a third of rows, and that ulp moves activations across the 8-bit
// rounding of the next product now and then. So each square is added as an integer: its 24-bit significand
// shifted to a fixed point set by the group's largest square (FRAC bits below that one's last bit; smaller
// squares lose bits below 2^-FRAC of it), in 16-bit limbs, which sum in any order to the same bits. The mean
// is then the integer quotient by the group size, rounded to nearest even, and the scale 1 / sqrt(mean + eps)
// comes from the correctly rounded sqrt_rn and rcp_rn (numerics.wgsl): the CPU's bits, deterministically.
const LIMBS: u32 = 6u; // 16-bit limbs (the top one also keeps the carries out of the others)
#if WG_SIZE > 512
#error rms-norm.wgsl: WG_SIZE above 512 needs more than 12 KiB of workgroup memory for the limbs
#endif
const FRAC: i32 = 40;  // fixed-point bits below the largest square's last significand bit

var<workgroup> emax: atomic<u32>;                        // largest biased exponent among the squares (at least 1)
#if SUBGROUPS
var<workgroup> wsum: array<atomic<u32>, LIMBS>;          // the subgroups' normalised limb sums, added up
#else
var<workgroup> limbs: array<array<u32, LIMBS>, WG_SIZE>; // per invocation, then the tree's partial sums
#endif

// Carries out of each 16-bit limb into the next.
fn limbs_normalize(a: ptr<function, array<u32, LIMBS>>) {
    for (var l = 0u; l + 1u < LIMBS; l++) {
        (*a)[l + 1u] += (*a)[l] >> 16u;
        (*a)[l] &= 0xffffu;
    }
}

// Adds the square with bits b, scaled to the fixed point of exponent e_max.
fn limbs_add_square(a: ptr<function, array<u32, LIMBS>>, b: u32, e_max: u32) {
    let sp = f32_split(b);
    let m = u32(sp.x);
    let k = sp.y - i32(e_max) + FRAC; // m * 2^k in fixed-point units, k <= FRAC
    if (k >= 0) {
        let li = u32(k) / 16u;
        let sh = u32(k) % 16u;
        (*a)[li] += (m << sh) & 0xffffu;
        (*a)[li + 1u] += (m >> (16u - sh)) & 0xffffu;
        (*a)[li + 2u] += select(0u, m >> (32u - sh), sh > 0u);
    } else if (k > -24) {
        let t = m >> u32(-k);
        (*a)[0] += t & 0xffffu;
        (*a)[1] += t >> 16u;
    }
}

// The fixed-point sum s (normalized limbs) divided by n (< 2^24), rounded to the nearest f32 (ties to even);
// the fixed point's unit is 2^(e_max - 150 - FRAC).
fn limbs_mean(sum: array<u32, LIMBS>, n: u32, e_max: u32) -> f32 {
    var s = sum; // indexed at run time below: a variable, not a value
    // long division in 8-bit digits (the remainder stays below n < 2^24), quotient in 16-bit limbs
    var q: array<u32, 8>;
    var rem = 0u;
    for (var l = 7; l >= 0; l--) {
        var word = 0u;
        if (l == 6) {
            word = s[LIMBS - 1u] >> 16u;
        } else if (l < 6) {
            word = s[l];
            if (l == 5) {
                word = s[5] & 0xffffu;
            }
        }
        let d1 = (rem << 8u) | (word >> 8u);
        rem = d1 % n;
        let d0 = (rem << 8u) | (word & 0xffu);
        rem = d0 % n;
        q[l] = ((d1 / n) << 8u) | (d0 / n);
    }
    var h = -1;
    for (var l = 7; l >= 0; l--) {
        if (q[l] != 0u) {
            h = l;
            break;
        }
    }
    if (h < 0) {
        return 0.0f;
    }
    // a 64-bit window of limbs h .. h-3; the leading bit sits at 48 + p in it
    var w: array<u32, 4>;
    for (var j = 0; j < 4; j++) {
        w[j] = select(0u, q[max(h - j, 0)], h - j >= 0);
    }
    let hi = (w[0] << 16u) | w[1];
    let lo = (w[2] << 16u) | w[3];
    let sa = 25u + firstLeadingBit(w[0]); // the window shifted right by sa leaves 24 bits
    var mant = select(hi >> (sa - 32u), (hi << (32u - sa)) | (lo >> sa), sa < 32u);
    var half: u32;
    var below: bool;
    if (sa - 1u < 32u) {
        half = (lo >> (sa - 1u)) & 1u;
        below = (lo & ((1u << (sa - 1u)) - 1u)) != 0u;
    } else {
        half = (hi >> (sa - 33u)) & 1u;
        below = lo != 0u || (hi & ((1u << (sa - 33u)) - 1u)) != 0u;
    }
    for (var l = 0; l < h - 3; l++) {
        below = below || q[l] != 0u;
    }
    below = below || rem != 0u;
    var b = 16 * h - 48 + i32(sa) + i32(e_max) - FRAC; // biased exponent of mant * 2^(b - 150)
    if (half == 1u && (below || (mant & 1u) == 1u)) {
        mant += 1u;
        if (mant == 0x1000000u) {
            mant = 0x800000u;
            b += 1;
        }
    }
    if (b <= 0) {
        return 0.0f; // below the normal range: far from any real activations' mean square
    }
    // (b >= 255, an infinite mean, is out of reach: the squares are finite and n >= 1; a run-time bitcast
    // keeps it well-defined anyway, where a constant infinity would not compile)
    return bitcast<f32>((u32(min(b, 255)) << 23u) | select(mant & 0x7fffffu, 0u, b >= 255));
}

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
    let ms = limbs_mean(total, params.group, e_max) + params.eps;
    let me = bitcast<u32>(ms) >> 23u;
    let scale = select(1.0f / sqrt(ms), rcp_rn(sqrt_rn(ms)), me > 0u && me < 255u);
    let db = params.d_offset + row * params.d_stride + g * params.group;
    let wb = params.w_offset + g * params.w_step;
    for (var i = lid; i < params.group; i += WG_SIZE) {
        var v = load_x(ob, i, false) * scale;
        if (params.has_w != 0u) {
            v = v * w[wb + i];
        }
        d[db + i] = v;
    }
}
