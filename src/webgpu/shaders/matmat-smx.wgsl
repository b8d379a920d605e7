enable chromium_experimental_subgroup_matrix;
// Matrix-matrix product for prefill on the GPU's matrix units, Y[t] = W X[t], through WebGPU's subgroup
// matrices (Dawn's chromium_experimental_subgroup_matrix) in their i8 x i8 -> i32 16 x 16 x 32 configuration,
// for every weight format with a dequantization routine (dequant.wgsl).
// X and W are 16-bit fixed point split into two signed bytes (smx-prep.wgsl says why and how): X's digits
// come from the prep pass, W's are made here, a K step at a time, from the format's dequantized values and
// the row's largest |w| (also from the prep pass) into workgroup memory. Each fragment of 16 tokens x 16 rows
// keeps two i32 accumulators over the whole of K,
//   hh += xh wh,   x += xh wl + xl wh
// and only the end converts them: y = ux uw (65536 hh + 256 x). So the matrix units do all the work of the
// K loop; what else a step costs is W's dequantization into digits (one dq_chunk per 8 weights) and two
// barriers.
// Tiling: a workgroup computes TM rows x TN tokens with (TM / (16 RF)) x (TN / (16 TF)) subgroups of SG = 32
// invocations; each subgroup RF x TF fragments. K steps of TK elements (TK / 8 chunks of the format, in its
// (block, chunk) order, which the prep pass wrote X in). Both operands' fragments load from workgroup tiles
// (X's words copied there coalesced, W's made there).
// Loads and stores name their layout as a template argument (Dawn deprecates the boolean form). For 8-bit
// matrices in an array<i32>, offsets and strides count words, four bytes of the matrix to a word along its
// contiguous dimension (Dawn, npm webgpu 0.6.2, measured on the H200).
// The fragments are named variables, not arrays indexed in loops: arrays of subgroup matrices went to local
// memory (measured on the H200: ~17 TFLOP/s, 20x below the same products in registers), so the per-fragment
// code is repeated by including matmat-smx-rf.wgsl / matmat-smx-out.wgsl once per fragment column / fragment
// with the names defined for it (RF 1, 2 or 4; TF 1 or 2).
// Defines: WEIGHT_TYPE, TM, TN, TK, RF, TF, WG_SIZE.
// Bindings: 0 w (weights, u32 words), 1 xq (the prep pass's output for params.tokens tokens of params.k),
// 2 y, 3 params (MatmatParams; x_offset / x_stride unused).
// Dispatch: (groups_x, ceil(ceil(rows / TM) / groups_x), ceil(tokens / TN)) workgroups.
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matmat-smx.wgsl needs WEIGHT_TYPE
#endif
#if TK < 32 || TK % 32 != 0 || TM % (16 * RF) != 0 || TN % (16 * TF) != 0
#error matmat-smx.wgsl: TK a multiple of 32, TM of 16 RF, TN of 16 TF
#endif
#if WG_SIZE != (TM / (16 * RF)) * (TN / (16 * TF)) * 32
#error matmat-smx.wgsl: WG_SIZE must be 32 per subgroup
#endif
#if (RF != 1 && RF != 2 && RF != 4) || (TF != 1 && TF != 2)
#error matmat-smx.wgsl: RF 1, 2 or 4 fragments along rows, TF 1 or 2 along tokens
#endif

struct MatmatParams {
    k: u32,          // elements per row of W and per token of X, a multiple of 32 and of DQ_BLOCK
    rows: u32,       // rows of W (= elements of each Y[t])
    tokens: u32,     // tokens in X and Y (the prep pass's T)
    row_stride: u32, // bytes from one row of W to the next
    w_offset: u32,   // byte offset of row 0 in w
    x_offset: u32,   // unused (X is the prep pass's whole output)
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

#include "dequant.wgsl"
#include "smx-digits.wgsl"

const SG: u32 = 32u;                      // invocations per subgroup
const SGR: u32 = TM / (16u * RF);         // subgroups along rows
const NSG: u32 = SGR * (TN / (16u * TF)); // subgroups
const CK: u32 = TK / 8u;                  // chunks per K step
const WSW: u32 = TK / 4u;                 // words per row of a tile (a 16 x 32 fragment: 512 contiguous bytes at TK 32)

// Two buffers of each tile: the fill of step s + 1 (global loads, dequantization) runs while the products of
// step s read the other, so one barrier per step and the loads' latency hides under other subgroups' products
// (with one barrier before and one after the products the whole workgroup waited on every step's loads:
// ~4 us a step on the H200, 10x its products)
const TW: u32 = TM * WSW;                     // words of one W tile
const TX: u32 = TN * WSW;                     // words of one X tile
var<workgroup> xh: array<i32, 2u * TX>;       // X's high digits: buffer p, token n at p TX + n WSW ..
var<workgroup> xl: array<i32, 2u * TX>;       // X's low digits likewise
var<workgroup> wh: array<i32, 2u * TW>;       // W's high digits: buffer p, row m, chunk s at p TW + m WSW + 2 s, + 1
var<workgroup> wl: array<i32, 2u * TW>;       // W's low digits likewise
var<workgroup> rinv: array<f32, TM>;          // FULL / (row's max |w|), 0 for a zero row or one past the end
#if 2 * TN * (TK / 4) >= (TM / (16 * RF)) * (TN / (16 * TF)) * 256
#define STAGE xh                              // the end: one 16 x 16 accumulator per subgroup, in X's tiles
#else
var<workgroup> stage: array<i32, NSG * 256u>; // the end: one accumulator per subgroup, row-major 16 x 16
#define STAGE stage
#endif

// Fills buffer p with K step k0's digits: W's (one (row, chunk) per invocation; rows past the end and chunks
// past K are zeros) and X's words of both planes (coalesced along K; tokens past the end and words past K
// are zeros).
fn fill(p: u32, k0: u32, lid: u32, row0: u32, tok0: u32, nkw: u32, plane: u32) {
    for (var i = lid; i < TM * CK; i += WG_SIZE) {
        let m = i / CK;
        let s = i % CK;
        let c = k0 / 8u + s;
        var d = vec4<i32>(0);
        if (c < params.k / 8u && row0 + m < params.rows) {
            let b = params.w_offset + (row0 + m) * params.row_stride + (c / DQ_CHUNKS) * DQ_BYTES;
            let v = dq_chunk(b, c % DQ_CHUNKS);
            let lo = split4(vec4<f32>(v.lo) * rinv[m]);
            let hi = split4(vec4<f32>(v.hi) * rinv[m]);
            d = bitcast<vec4<i32>>(vec4<u32>(lo.x, hi.x, lo.y, hi.y));
        }
        let o = p * TW + m * WSW + 2u * s;
        wh[o] = d.x;
        wh[o + 1u] = d.y;
        wl[o] = d.z;
        wl[o + 1u] = d.w;
    }
    for (var i = lid; i < TN * (TK / 4u); i += WG_SIZE) {
        let n = i / (TK / 4u);
        let v = i % (TK / 4u);
        var a = 0;
        var b = 0;
        if (tok0 + n < params.tokens && k0 / 4u + v < nkw) {
            let at = (tok0 + n) * nkw + k0 / 4u + v;
            a = xq[at];
            b = xq[plane + at];
        }
        xh[p * TX + n * WSW + v] = a;
        xl[p * TX + n * WSW + v] = b;
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sid: u32) {
    let row0 = (wg.x + wg.y * params.groups_x) * TM;
    let tok0 = wg.z * TN;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    let nkw = params.k / 4u;                  // words per token of a digit plane
    let t16 = (params.tokens + 15u) / 16u * 16u; // tokens of a plane (smx-prep.wgsl's layout)
    let plane = t16 * nkw;                    // the low digits' plane
    let xmax0 = 2u * plane;                   // tokens' max |x|
    let wmax0 = xmax0 + params.tokens;        // rows' max |w|
    for (var i = lid; i < TM; i += WG_SIZE) {
        var inv = 0.0f;
        if (row0 + i < params.rows) {
            let m = bitcast<f32>(xq[wmax0 + row0 + i]);
            inv = select(0.0, FULL / m, m > 0.0);
        }
        rinv[i] = inv;
    }
    let sr = sid % SGR; // this subgroup's fragments: rows (sr RF + rf) 16 .., tokens (st TF + tf) 16 ..
    let st = sid / SGR;
    // the accumulators a<tf><rf>h (high x high) and a<tf><rf>x (the two cross products)
    var a00h: subgroup_matrix_result<i32, 16, 16>;
    var a00x: subgroup_matrix_result<i32, 16, 16>;
    var a10h: subgroup_matrix_result<i32, 16, 16>;
    var a10x: subgroup_matrix_result<i32, 16, 16>;
#if RF > 1
    var a01h: subgroup_matrix_result<i32, 16, 16>;
    var a01x: subgroup_matrix_result<i32, 16, 16>;
    var a11h: subgroup_matrix_result<i32, 16, 16>;
    var a11x: subgroup_matrix_result<i32, 16, 16>;
#endif
#if RF > 2
    var a02h: subgroup_matrix_result<i32, 16, 16>;
    var a02x: subgroup_matrix_result<i32, 16, 16>;
    var a12h: subgroup_matrix_result<i32, 16, 16>;
    var a12x: subgroup_matrix_result<i32, 16, 16>;
    var a03h: subgroup_matrix_result<i32, 16, 16>;
    var a03x: subgroup_matrix_result<i32, 16, 16>;
    var a13h: subgroup_matrix_result<i32, 16, 16>;
    var a13x: subgroup_matrix_result<i32, 16, 16>;
#endif
    workgroupBarrier(); // rinv
    fill(0u, 0u, lid, row0, tok0, nkw, plane);
    workgroupBarrier();
    var p = 0u;
    for (var k0 = 0u; k0 < params.k; k0 += TK) {
        if (k0 + TK < params.k) { // the next step's tiles into the other buffers, under this step's products
            fill(p ^ 1u, k0 + TK, lid, row0, tok0, nkw, plane);
        }
        for (var kk = 0u; kk < TK / 32u && k0 + 32u * kk < params.k; kk++) { // (a last step may end early)
            // X's fragments from workgroup memory: loads straight from the storage buffer measured ~10x
            // slower on the H200 (tests/web/smx-micro.mjs: 111 against 1,134 TOPS at 4 products a load)
            let xo0 = p * TX + st * TF * 16u * WSW + 8u * kk;
            let xh0 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xh, xo0, WSW);
            let xl0 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xl, xo0, WSW);
#if TF > 1
            let xh1 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xh, xo0 + 16u * WSW, WSW);
            let xl1 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xl, xo0 + 16u * WSW, WSW);
#endif
#define RFI 0u
#define A0H a00h
#define A0X a00x
#define A1H a10h
#define A1X a10x
#include "matmat-smx-rf.wgsl"
#undef RFI
#undef A0H
#undef A0X
#undef A1H
#undef A1X
#if RF > 1
#define RFI 1u
#define A0H a01h
#define A0X a01x
#define A1H a11h
#define A1X a11x
#include "matmat-smx-rf.wgsl"
#undef RFI
#undef A0H
#undef A0X
#undef A1H
#undef A1X
#endif
#if RF > 2
#define RFI 2u
#define A0H a02h
#define A0X a02x
#define A1H a12h
#define A1X a12x
#include "matmat-smx-rf.wgsl"
#undef RFI
#undef A0H
#undef A0X
#undef A1H
#undef A1X
#define RFI 3u
#define A0H a03h
#define A0X a03x
#define A1H a13h
#define A1X a13x
#include "matmat-smx-rf.wgsl"
#undef RFI
#undef A0H
#undef A0X
#undef A1H
#undef A1X
#endif
        }
        workgroupBarrier();
        p ^= 1u;
    }
    // the end: each fragment's two accumulators through workgroup memory, weighted by the scales; lane
    // (r, c) = (lane / 16, lane % 16) takes elements r + 2 e (tokens), c (row), e = 0 .. 7
    let lane = lid % SG;
    let ec = lane % 16u;
    let er = lane / 16u;
#define TFI 0u
#define RFI 0u
#define AH a00h
#define AX a00x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#if TF > 1
#define TFI 1u
#define RFI 0u
#define AH a10h
#define AX a10x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#endif
#if RF > 1
#define TFI 0u
#define RFI 1u
#define AH a01h
#define AX a01x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#if TF > 1
#define TFI 1u
#define RFI 1u
#define AH a11h
#define AX a11x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#endif
#endif
#if RF > 2
#define TFI 0u
#define RFI 2u
#define AH a02h
#define AX a02x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#define TFI 0u
#define RFI 3u
#define AH a03h
#define AX a03x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#if TF > 1
#define TFI 1u
#define RFI 2u
#define AH a12h
#define AX a12x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#define TFI 1u
#define RFI 3u
#define AH a13h
#define AX a13x
#include "matmat-smx-out.wgsl"
#undef TFI
#undef RFI
#undef AH
#undef AX
#endif
#endif
}
