// The inputs of the subgroup-matrix mat-mat (matmat-smx.wgsl) for one weight piece: every token of X and
// every row of W as 16-bit fixed point split into two signed bytes, with each token's and row's largest |value|.
// Why 16 bits in two int8 digits: the device's matrix units multiply i8 x i8 into i32, and a product of the
// quantized formats' natural integers would need its per-block scales applied every 32 elements, outside
// the matrix units (a fragment store and a weighting per block: that was 95 % of the time). A fixed point
// per token (X) and per row (W) instead makes the whole K sum one integer product:
//   x = ux (256 xh + xl),  w = uw (256 wh + wl),  xh, wh in [-127, 127], xl, wl in [-128, 127]
//   sum_k w x = ux uw (65536 sum wh xh + 256 (sum wh xl + sum wl xh) + sum wl xl)
// where the last term (< 2^-15 of the first's scale) is dropped: three i8 products per fragment and K step,
// scales once at the end. The precision is that of a 15-bit mantissa against the row's (the token's) largest
// value: finer than an f16 and than the CPU's 8-bit activation blocks wherever a block's largest |x| is more
// than 1/128 of the token's, and the weights' rounding stays far below their own quantization steps.
// Why W's digits are written here, once per piece and prompt step, and not made by the mat-mat from the
// format: there every K step's tile was dequantized again by each of the T / TN token tiles, and its loads
// could not be issued ahead of the products (they fed the dequantization at once), so the matrix units
// waited on memory latency every step; from planes of digits the mat-mat's tiles are plain word copies,
// loaded into registers a step ahead. The price is 2 bytes per weight written and read back per step
// (an 8B model: ~30 GB at ~4 TB/s, ~8 ms of a 512-token step).
//
// Workgroups [0, tokens) take one token each: the token's max |x|, then its digits, written in the chunk
// order of WEIGHT_TYPE (dequant.wgsl: chunk c of a block holds elements dq_lo_at(c) .. +4 and
// dq_hi_at(c) .. +4), so X's and W's K orders match and the mat-mat reads both as contiguous words. The
// workgroups after them take RPW rows of W each (WG_SIZE / RPW invocations per row, striding its chunks):
// the row's max |w|, then its digits in the same order.
// Output (words of q; nkw = k / 4, T16 = T rounded up to a multiple of 16, R the piece's rows; every plane
// starts at a multiple of 4 words, so the mat-mat reads them as vec4s; lw__gpu_smx_prep_bytes sizes it):
//   [0, T16 nkw)             X's high digits, token t at t nkw, chunk g of K at words 2 g (lo half), 2 g + 1 (hi)
//   [T16 nkw, 2 T16 nkw)     X's low digits likewise
//   2 T16 nkw + t            token t's max |x| (f32 bits)
//   2 T16 nkw + T + r        row r's max |w| (f32 bits; row r of this piece)
//   wh0 = (2 T16 nkw + T + R) rounded up to 4, [wh0, wh0 + R nkw): W's high digits, row r at wh0 + r nkw
//   [wh0 + R nkw, wh0 + 2 R nkw): W's low digits likewise
// Defines: WEIGHT_TYPE, ACTQ (the CPU's activation rounding for it: 0, 1 or 2), WG_SIZE (a power of two >= 64),
// RPW (rows per workgroup, divides WG_SIZE).
// Bindings: 0 w (weights, u32 words), 1 x as vec4<f32>, 2 q (read_write), 3 params.
// Dispatch: (groups_x, ceil((tokens + ceil(rows / RPW)) / groups_x), 1).
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error smx-prep.wgsl needs WEIGHT_TYPE
#endif
#if WG_SIZE % RPW != 0 || WG_SIZE < 64
#error smx-prep.wgsl: WG_SIZE a multiple of RPW, at least 64
#endif

struct PrepParams {
    k: u32,          // elements per token and per row (a multiple of 32)
    rows: u32,       // rows of this piece of W
    tokens: u32,     // tokens T whose digits this dispatch writes (0: only the rows' maxima)
    t_total: u32,    // tokens the layout is sized for (the mat-mat's params.tokens)
    row_stride: u32, // bytes between rows of W
    w_offset: u32,   // byte offset of row 0 in w
    x_offset: u32,   // first vec4 of token 0 in x
    x_stride: u32,   // vec4s from token t to t + 1
    groups_x: u32,   // workgroups along x of the grid
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> q: array<u32>;
@group(0) @binding(3) var<uniform> params: PrepParams;

#include "dequant.wgsl"

// X rounded first as the CPU engine rounds it for this format (ACTQ 1: Q8_0 blocks of 32, 2: Q8_K blocks of
// 256; actq.wgsl), so the product is the CPU's up to the digits' 15-bit rounding (~1e-9 of its square
// norm) instead of differing from it by the 8-bit rounding (~1e-5): the greedy agreement with the CPU engine
// stays that of the integer kernels
fn actq_x(i: u32) -> vec4<f32> {
    return x[i];
}
#include "actq.wgsl"
#if ACTQ == 1 || ACTQ == 2
const MAXB: u32 = 65536u / ACT_BLOCK;      // activation blocks of the longest row the mat-mat takes
var<workgroup> bsc: array<vec2<f32>, MAXB>; // (multiplier, scale) of each block of the token
#endif
// Element values of the token as the product sees them: vec4 number i of x, in activation block b.
fn xr4(i: u32, b: u32) -> vec4<f32> {
#if ACTQ == 1 || ACTQ == 2
    return actq_apply(x[i], bsc[b]);
#else
    return x[i];
#endif
}

#include "smx-digits.wgsl"
const LPR: u32 = WG_SIZE / RPW; // invocations per row of W
var<workgroup> red: array<f32, WG_SIZE>;

fn absmax4(v: vec4<f32>) -> f32 {
    let a = abs(v);
    return max(max(a.x, a.y), max(a.z, a.w));
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wg.x + wg.y * params.groups_x;
    let nkw = params.k / 4u;
    let plane = (params.t_total + 15u) / 16u * 16u * nkw; // planes of whole 16-token fragments
    if (g < params.tokens) { // uniform across the workgroup
        let x0 = params.x_offset + g * params.x_stride;
#if ACTQ == 1 || ACTQ == 2
        for (var b = lid; b < params.k / ACT_BLOCK; b += WG_SIZE) {
            bsc[b] = actq_scale(x0 + b * (ACT_BLOCK / 4u));
        }
        workgroupBarrier();
        let bv = ACT_BLOCK / 4u; // vec4s per activation block
#else
        let bv = 1u;
#endif
        var m = 0.0f;
        for (var i = lid; i < nkw; i += WG_SIZE) {
            m = max(m, absmax4(xr4(x0 + i, i / bv)));
        }
        red[lid] = m;
        workgroupBarrier();
        for (var s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
            if (lid < s) {
                red[lid] = max(red[lid], red[lid + s]);
            }
            workgroupBarrier();
        }
        let mx = red[0];
        let inv = select(0.0, FULL / mx, mx > 0.0);
        for (var c = lid; c < params.k / 8u; c += WG_SIZE) { // chunk c of K in (block, chunk) order
            let e0 = (c / DQ_CHUNKS) * DQ_BLOCK;
            let il = (e0 + dq_lo_at(c % DQ_CHUNKS)) / 4u;
            let ih = (e0 + dq_hi_at(c % DQ_CHUNKS)) / 4u;
            let lo = split4(xr4(x0 + il, il / bv) * inv);
            let hi = split4(xr4(x0 + ih, ih / bv) * inv);
            let o = g * nkw + 2u * c;
            q[o] = lo.x;
            q[o + 1u] = hi.x;
            q[plane + o] = lo.y;
            q[plane + o + 1u] = hi.y;
        }
        if (lid == 0u) {
            q[2u * plane + g] = bitcast<u32>(mx);
        }
        return;
    }
    let r = (g - params.tokens) * RPW + lid / LPR; // this invocation's row
    let lane = lid % LPR;
    let b0 = params.w_offset + r * params.row_stride;
    var m = 0.0f;
    if (r < params.rows) {
        for (var c = lane; c < params.k / 8u; c += LPR) {
            let d = dq_chunk(b0 + (c / DQ_CHUNKS) * DQ_BYTES, c % DQ_CHUNKS);
            m = max(m, max(absmax4(vec4<f32>(d.lo)), absmax4(vec4<f32>(d.hi))));
        }
    }
    red[lid] = m;
    workgroupBarrier();
    for (var s = LPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    if (r < params.rows) {
        let mx = red[lid - lane]; // the row's max (the reduction's last barrier made it visible)
        if (lane == 0u) {
            q[2u * plane + params.t_total + r] = bitcast<u32>(mx);
        }
        // the row's digits: a second pass over its blocks (from the cache the first pass filled)
        let inv = select(0.0, FULL / mx, mx > 0.0);
        let wh0 = (2u * plane + params.t_total + params.rows + 3u) / 4u * 4u;
        let wl0 = wh0 + params.rows * nkw;
        for (var c = lane; c < params.k / 8u; c += LPR) {
            let d = dq_chunk(b0 + (c / DQ_CHUNKS) * DQ_BYTES, c % DQ_CHUNKS);
            let lo = split4(vec4<f32>(d.lo) * inv);
            let hi = split4(vec4<f32>(d.hi) * inv);
            let o = r * nkw + 2u * c;
            q[wh0 + o] = lo.x;
            q[wh0 + o + 1u] = hi.x;
            q[wl0 + o] = lo.y;
            q[wl0 + o + 1u] = hi.y;
        }
    }
}
