enable chromium_experimental_subgroup_matrix;
// Matrix-matrix product for prefill on the GPU's matrix units, Y[t] = W X[t], through WebGPU's subgroup
// matrices (Dawn's chromium_experimental_subgroup_matrix) in their i8 x i8 -> i32 16 x 16 x 32 configuration.
// X arrives rounded to 8 bits as the CPU rounds it, by the quantizer pass (actq-quant.wgsl, T tokens), so its
// quants are copied to workgroup memory and loaded from there as left matrices (16 tokens x 32 elements). W's
// blocks are unpacked to signed bytes in workgroup memory (dequant-int.wgsl, the same routine as matmat-q8.wgsl) and
// loaded as right matrices (32 elements x 16 rows). Each 32-element unit u of K (a block of the 32-block
// formats, a sub-block of Q4_K / Q5_K) gives one integer product per 16 x 16 fragment: the CPU's integer sum
// of that (token, row, unit) exactly. Those sums are stored to workgroup memory and weighted there by the
// unit's scales into f32 accumulators held by the invocations:
//   y += a_w * (d_x * sum) + b_w * s_x
// with (a_w, b_w) = (d_w, m_w) (Q8_0 .. IQ4_NL: m_w = 0 but for Q4_1 / Q5_1, whose s_x is the CPU's Q8_1 block
// sum) or (d * sc, -dmin * mn) (Q4_K / Q5_K, s_x = d_x * the unit's sum of quants). Where the time goes: the
// products are ~1/30 of it; the weighting of every (token, row, unit) sum is most of the rest, so it is
// done with as few loads per sum as the layout allows (a lane takes one row of W and 8 tokens of a fragment,
// so it needs one weight scale per fragment and reads the sums without bank conflicts).
// Loads and stores name their layout as a template argument: Dawn deprecates the older form whose layout is a
// boolean argument (and prints a warning for every module that uses it). For 8-bit matrices in an array<i32>,
// Dawn (npm webgpu 0.6.2, measured on the H200) counts offset and stride in words of the array, four bytes of
// the matrix to a word along its contiguous dimension: byte offsets and strides here are multiples of 4.
//
// Tiling: a workgroup computes TM rows x TN tokens with (TM / (16 RF)) x (TN / (16 TF)) subgroups of SG = 32
// invocations; each subgroup RF x TF fragments of 16 x 16. K steps of TK = 32 NU elements.
// Defines: WEIGHT_TYPE (a format with DQ_INT: DQI_SUBW 32), ACTQ (its kind), TM, TN, TK, RF, TF, WG_SIZE.
// Bindings: 0 w (weights, u32 words), 1 xq (the quantizer's output for params.tokens tokens of params.k), 2 y,
// 3 params (MatmatParams; x_offset / x_stride unused).
// Dispatch: (groups_x, ceil(ceil(rows / TM) / groups_x), ceil(tokens / TN)) workgroups.
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matmat-smx.wgsl needs WEIGHT_TYPE
#endif
#if ACTQ != 1 && ACTQ != 2
#error matmat-smx.wgsl: 8-bit activations only (ACTQ 1 or 2)
#endif
#if TK < 32 || TK % 32 != 0 || TM % (16 * RF) != 0 || TN % (16 * TF) != 0
#error matmat-smx.wgsl: TK a multiple of 32, TM of 16 RF, TN of 16 TF
#endif
#if WG_SIZE != (TM / (16 * RF)) * (TN / (16 * TF)) * 32
#error matmat-smx.wgsl: WG_SIZE must be 32 per subgroup
#endif

struct MatmatParams {
    k: u32,          // elements per row of W and per token of X, a multiple of DQ_BLOCK
    rows: u32,       // rows of W (= elements of each Y[t])
    tokens: u32,     // tokens in X and Y (the quantizer's T)
    row_stride: u32, // bytes from one row of W to the next
    w_offset: u32,   // byte offset of row 0 in w (a multiple of 4 for Q4_K / Q5_K)
    x_offset: u32,   // unused (X is the quantizer's whole output)
    x_stride: u32,   // unused
    y_offset: u32,   // offset of Y[0] in the y binding, in elements
    y_stride: u32,   // elements from Y[t] to Y[t + 1]
    groups_x: u32,   // workgroups along x of the grid (row tiles fold over x and y)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> xq: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: MatmatParams;

// The 32-block formats' blocks are prefetched a K step ahead into registers (W_PRIV: dequant-int.wgsl reads
// them through w_priv), so the loads of the next step run under this step's products and weighting instead
// of stalling before a barrier; the K formats' sub-blocks read the binding directly.
#include "types.wgsl"
#if WEIGHT_TYPE == TYPE_Q8_0 || WEIGHT_TYPE == TYPE_Q4_0 || WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_0 || WEIGHT_TYPE == TYPE_Q5_1 || WEIGHT_TYPE == TYPE_IQ4_NL
#define W_PRIV 1
const WIPL: u32 = (TM * (TK / 32u) + WG_SIZE - 1u) / WG_SIZE; // W items (row, unit) per invocation
const WPW: u32 = 12u;                                          // words that cover a block (34 bytes at most) at any even offset
var<private> wreg: array<u32, WIPL * WPW>; // the prefetched words of this invocation's items
var<private> wsel: u32;                    // first word of the item being unpacked in wreg
var<private> wfirst: u32;                  // its first word's index in w
fn w_priv(i: u32) -> u32 {
    return wreg[wsel + min(i - wfirst, WPW - 1u)];
}
#endif
#include "dequant-int.wgsl"
#ifndef DQ_INT
#error matmat-smx.wgsl: this weight format has no integer routine (dequant-int.wgsl)
#endif
const_assert DQI_SUBW == 32u; // sub-blocks of 32 elements only (Q6_K's are 16)

const SG: u32 = 32u;                  // invocations per subgroup
const SGR: u32 = TM / (16u * RF);     // subgroups along rows
const NSG: u32 = SGR * (TN / (16u * TF)); // subgroups
const NU: u32 = TK / 32u;             // 32-element units per K step
const UB: u32 = DQ_BLOCK / 32u;       // units per block (1, or 8 for the K formats)
const WSB: u32 = TK + 16u;            // bytes per row of the W tile (16 of padding: banks, 16-byte loads)
const NFR: u32 = RF * TF;             // fragments per subgroup
const HAS_B: bool = DQI_K == 1 || WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1;

var<workgroup> wq: array<i32, TM * WSB / 4u>;         // W's signed bytes: row m, byte e of the step at m WSB + e
var<workgroup> xt: array<i32, TN * WSB / 4u>;         // X's quants likewise, token n at n WSB
var<workgroup> wa: array<f32, NU * TM>;               // a_w of unit j, row m at j TM + m
var<workgroup> wb: array<f32, NU * TM>;               // b_w likewise (0 where the format has none)
var<workgroup> xd: array<f32, NU * TN>;               // d_x of unit j, token n at j TN + n
var<workgroup> xs: array<f32, NU * TN>;               // s_x likewise
var<workgroup> stage: array<i32, NSG * NU * NFR * 256u>; // the integer sums: subgroup s, unit j, fragment f

const XPL: u32 = (TN * (TK / 4u) + WG_SIZE - 1u) / WG_SIZE; // X words per invocation per K step
var<private> xreg: array<i32, XPL>; // X's words of the next K step

// Issues the loads of K step u0's X words (and, W_PRIV, W blocks) into registers; zeros past the tokens / K.
fn prefetch(lid: u32, u0: u32, row0: u32, tok0: u32) {
    for (var r = 0u; r < XPL; r++) {
        let i = lid + r * WG_SIZE;
        let n = i / (TK / 4u);
        let v = i % (TK / 4u);
        var q = 0;
        if (i < TN * (TK / 4u) && tok0 + n < params.tokens && u0 * 8u + v < params.k / 4u) {
            q = xq[(tok0 + n) * (params.k / 4u) + u0 * 8u + v];
        }
        xreg[r] = q;
    }
#ifdef W_PRIV
    for (var r = 0u; r < WIPL; r++) {
        let i = lid + r * WG_SIZE;
        let m = i / NU;
        let j = i % NU;
        if (i < TM * NU && u0 + j < params.k / 32u) {
            let b = params.w_offset + min(row0 + m, params.rows - 1u) * params.row_stride + (u0 + j) * DQ_BYTES;
            for (var q = 0u; q < WPW; q++) {
                wreg[r * WPW + q] = w[b / 4u + q];
            }
        }
    }
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sid: u32) {
    let row0 = (wg.x + wg.y * params.groups_x) * TM;
    let tok0 = wg.z * TN;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    let n_units = params.k / 32u;
    let qwords = params.tokens * (params.k / 4u); // the group words follow the quants
    // the fragments this subgroup multiplies
    let sr = sid % SGR;
    let st = sid / SGR;
    // the sums this invocation weights (any invocation may weight any subgroup's: they meet in `stage`)
    let vs = lid / SG;
    let lane = lid % SG;
    let er = lane / 16u; // first of its 8 fragment rows (tokens er, er + 2, .., er + 14)
    let ec = lane % 16u; // its fragment column (row of W): word e of its sums is lane + 32 e, so a
                         // subgroup's loads of the sums are 32 consecutive words (no bank conflicts)
    let vsr = vs % SGR;
    let vst = vs / SGR;
    var acc: array<f32, NFR * 8u>;
    prefetch(lid, 0u, row0, tok0);
    for (var u0 = 0u; u0 < n_units; u0 += NU) {
        // W tile: one (row, unit) per invocation; rows past the end repeat the last row (never stored), units
        // past K are zero
        for (var i = lid; i < TM * NU; i += WG_SIZE) {
            let m = i / NU;
            let j = i % NU;
            var r = DqSub(array<u32, 8>(), 0, 0);
            var ab = vec2<f32>(0.0);
            if (u0 + j < n_units) {
                let u = u0 + j;
                let b = params.w_offset + min(row0 + m, params.rows - 1u) * params.row_stride + (u / UB) * DQ_BYTES;
#ifdef W_PRIV
                wsel = (i / WG_SIZE) * WPW; // this item's prefetched words
                wfirst = b / 4u;
#endif
                r = dqi_sub(b, u % UB);
                let ds = dqi_scales(b);
#if DQI_K
                ab = vec2<f32>(ds.x * f32(r.sc), -ds.y * f32(r.mn));
#else
                ab = ds;
#endif
            }
            for (var v = 0u; v < 8u; v++) {
                wq[(m * WSB + 32u * j) / 4u + v] = bitcast<i32>(r.q[v]);
            }
            wa[j * TM + m] = ab.x;
            wb[j * TM + m] = ab.y;
        }
        // X tile: the quantizer's words, loaded coalesced a step ahead (prefetch)
        for (var r = 0u; r < XPL; r++) {
            let i = lid + r * WG_SIZE;
            if (i < TN * (TK / 4u)) {
                xt[(i / (TK / 4u)) * (WSB / 4u) + i % (TK / 4u)] = xreg[r];
            }
        }
        // X scales: one (token, unit) per invocation, zero past the tokens and K
        for (var i = lid; i < TN * NU; i += WG_SIZE) {
            let n = i / NU;
            let j = i % NU;
            var d = 0.0f;
            var s = 0.0f;
            if (tok0 + n < params.tokens && u0 + j < n_units) {
                let g = qwords + 2u * ((tok0 + n) * n_units + u0 + j);
                d = bitcast<f32>(xq[g]);
#if ACTQ == 1
                s = bitcast<f32>(xq[g + 1u]);
#else
                s = d * f32(xq[g + 1u]);
#endif
            }
            xd[j * TN + n] = d;
            xs[j * TN + n] = s;
        }
        if (u0 + NU < n_units) { // the next step's loads, in flight during this one's products
            prefetch(lid, u0 + NU, row0, tok0);
        }
        workgroupBarrier();
        // the products
        for (var j = 0u; j < NU; j++) {
            if (u0 + j < n_units) {
                for (var tf = 0u; tf < TF; tf++) {
                    let n0 = (st * TF + tf) * 16u;
                    let left = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xt, (n0 * WSB + 32u * j) / 4u, WSB / 4u);
                    for (var rf = 0u; rf < RF; rf++) {
                        let right = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>, col_major>(&wq, ((sr * RF + rf) * 16u * WSB + 32u * j) / 4u, WSB / 4u);
                        let prod = subgroupMatrixMultiply<i32>(left, right);
                        subgroupMatrixStore<row_major>(&stage, ((sid * NU + j) * NFR + tf * RF + rf) * 256u, prod, 16u);
                    }
                }
            }
        }
        workgroupBarrier();
        // the weighting: lane (er, ec) of virtual subgroup vs takes column ec (one row of W: one a_w, b_w) and
        // rows er + 2 e (tokens) of each fragment
        for (var j = 0u; j < NU; j++) {
            if (u0 + j < n_units) {
                for (var tf = 0u; tf < TF; tf++) {
                    var dx: array<f32, 8>;
                    var sx: array<f32, 8>;
                    for (var e = 0u; e < 8u; e++) {
                        let n = (vst * TF + tf) * 16u + er + 2u * e;
                        dx[e] = xd[j * TN + n];
                        if (HAS_B) {
                            sx[e] = xs[j * TN + n];
                        }
                    }
                    for (var rf = 0u; rf < RF; rf++) {
                        let m = (vsr * RF + rf) * 16u + ec;
                        let a = wa[j * TM + m];
                        let b = wb[j * TM + m];
                        let base = ((vs * NU + j) * NFR + tf * RF + rf) * 256u + lane;
                        for (var e = 0u; e < 8u; e++) {
                            var v = acc[(tf * RF + rf) * 8u + e] + (a * dx[e]) * f32(stage[base + 32u * e]);
                            if (HAS_B) {
                                v += b * sx[e];
                            }
                            acc[(tf * RF + rf) * 8u + e] = v;
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }
    for (var tf = 0u; tf < TF; tf++) {
        for (var rf = 0u; rf < RF; rf++) {
            let row = row0 + (vsr * RF + rf) * 16u + ec;
            for (var e = 0u; e < 8u; e++) {
                let tok = tok0 + (vst * TF + tf) * 16u + er + 2u * e;
                if (tok < params.tokens && row < params.rows) {
                    y[params.y_offset + tok * params.y_stride + row] = acc[(tf * RF + rf) * 8u + e];
                }
            }
        }
    }
}
