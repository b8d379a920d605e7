enable chromium_experimental_subgroup_matrix;
// Matrix-matrix product for prefill on the GPU's matrix units, Y[t] = W X[t], through WebGPU's subgroup
// matrices (Dawn's chromium_experimental_subgroup_matrix) in their i8 x i8 -> i32 16 x 16 x 32 configuration,
// for every weight format with a dequantization routine (dequant.wgsl).
// X and W are 16-bit fixed point split into two signed bytes, both from the prep pass (smx-prep.wgsl says
// why and how) as planes of digits in the weight format's K order, with each token's and row's largest |value|.
// Each fragment of 16 tokens x 16 rows keeps two i32 accumulators over the whole of K,
//   hh += xh wh,   x += xh wl + xl wh
// and only the end converts them: y = ux uw (65536 hh + 256 x). So the matrix units do all the work of the
// K loop; a step's tiles are plain copies of the planes' words, loaded into registers while the products of
// the step before run (their latency under the products), stored to the other buffer after them: one
// barrier a step. (Made from the format here instead, W's digits cost a dequantization per token tile and
// their loads stalled every step: 0.47 ms for 4096 x 4096 x 512 Q4_0 on the H200.)
// Tiling: a workgroup computes TM rows x TN tokens with (TM / (16 RF)) x (TN / (16 TF)) subgroups of SG = 32
// invocations; each subgroup RF x TF fragments. K steps of TK elements. Both operands' fragments load from
// workgroup tiles. The workgroups of one row tile are consecutive in the grid (token tiles vary fastest), so
// they run together and W's tile comes from DRAM once, the other times from L2.
// Loads and stores name their layout as a template argument (Dawn deprecates the boolean form). For 8-bit
// matrices in an array<i32>, offsets and strides count words, four bytes of the matrix to a word along its
// contiguous dimension (Dawn, npm webgpu 0.6.2, measured on the H200).
// The fragments are named variables, not arrays indexed in loops: arrays of subgroup matrices went to local
// memory (measured on the H200: ~17 TFLOP/s, 20x below the same products in registers), so the per-fragment
// code is repeated by including matmat-smx-rf.wgsl / matmat-smx-out.wgsl once per fragment column / fragment
// with the names defined for it (RF 1, 2 or 4; TF 1 or 2).
// Tile rows are TK bytes and PAD words apart in workgroup memory. Unpadded (rows 32 bytes apart at TK 32), a
// fragment load's 8 rows of 16 bytes a phase fall on the same banks two by two; with PAD 4 (48 bytes) they
// fall on distinct banks, and the step's copies are assigned to lanes row first (lane i of a phase takes row
// i's vec4), so 8 lanes' 16-byte stores also take distinct banks.
// Defines: TM, TN, TK, RF, TF, WG_SIZE, PAD (WEIGHT_TYPE unused: the prep pass made the digits).
// Bindings: 0 w (unused: the layout is the other mat-mats'), 1 q (the prep pass's output for params.tokens
// tokens of params.k and params.rows rows), 2 y, 3 params (MatmatParams; w_offset, row_stride, x_offset and
// x_stride unused; pad0 = token tiles).
// Dispatch: (groups_x, ceil(ceil(rows / TM) ceil(tokens / TN) / groups_x), 1) workgroups.
#include "common.wgsl"
#ifndef PAD
#define PAD 0
#endif
#if PAD % 4 != 0
#error matmat-smx.wgsl: PAD a multiple of 4 words (fragment rows 16-byte aligned)
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
    groups_x: u32,   // workgroups along x of the grid (the tiles fold over x and y)
    tok_tiles: u32,  // ceil(tokens / TN): the tile index's fastest part
    pad1: u32,
}

@group(0) @binding(1) var<storage, read> q: array<vec4<i32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: MatmatParams;

#include "smx-digits.wgsl"

const SG: u32 = 32u;                      // invocations per subgroup
const SGR: u32 = TM / (16u * RF);         // subgroups along rows
const NSG: u32 = SGR * (TN / (16u * TF)); // subgroups
const WSW: u32 = TK / 4u;                 // words of digits per row of a tile
const WSP: u32 = WSW + PAD;               // words from one row of a tile to the next
const VPR: u32 = TK / 16u;                // vec4s per row (token) of a K step in one plane
const NWV: u32 = TM * VPR;                // vec4s of one plane of a W tile
const NXV: u32 = TN * VPR;                // vec4s of one plane of an X tile
const LW: u32 = (NWV + WG_SIZE - 1u) / WG_SIZE; // of them per invocation
const LX: u32 = (NXV + WG_SIZE - 1u) / WG_SIZE;

// Two buffers of each tile: step s + 1's words are stored to one while the products of step s read the
// other, so one barrier per step.
const TW: u32 = TM * WSP;                     // words of one W tile
const TX: u32 = TN * WSP;                     // words of one X tile
var<workgroup> xh: array<i32, 2u * TX>;       // X's high digits: buffer p, token n at p TX + n WSP ..
var<workgroup> xl: array<i32, 2u * TX>;       // X's low digits likewise
var<workgroup> wh: array<i32, 2u * TW>;       // W's high digits: buffer p, row m at p TW + m WSP ..
var<workgroup> wl: array<i32, 2u * TW>;       // W's low digits likewise
#if 2 * TN * (TK / 4 + PAD) >= (TM / (16 * RF)) * (TN / (16 * TF)) * 256
#define STAGE xh                              // the end: one 16 x 16 accumulator per subgroup, in X's tiles
#else
var<workgroup> stage: array<i32, NSG * 256u>; // the end: one accumulator per subgroup, row-major 16 x 16
#define STAGE stage
#endif

// Word i of the prep pass's output (the maxima).
fn qword(i: u32) -> i32 {
    return q[i >> 2u][i & 3u];
}

// The row (token) and vec4 of it that copy j of a tile of nt rows takes: row first where the rows are padded
// (lanes of a phase on distinct rows, so distinct banks), else the row's vec4s side by side.
fn tile_rv(j: u32, nt: u32) -> vec2<u32> {
#if PAD > 0
    return vec2<u32>(j % nt, j / nt);
#else
    return vec2<u32>(j / VPR, j % VPR);
#endif
}

// vec4 j of a plane's tile of step k0 (a tile of nt rows or tokens, starting at vec4 base, n0 its first
// row or token, n rows or tokens in all, nkv vec4s each): zeros past the last row or token and past K.
fn tile_load(base: u32, j: u32, k0: u32, n0: u32, n: u32, nkv: u32, nv: u32, nt: u32) -> vec4<i32> {
    let rv = tile_rv(j, nt);
    let v = k0 / 16u + rv.y;
    if (j < nv && n0 + rv.x < n && v < nkv) {
        return q[base + (n0 + rv.x) * nkv + v];
    }
    return vec4<i32>(0);
}

// Stores vec4 j of a W tile's high and low planes into buffer p.
fn put_w(p: u32, j: u32, h: vec4<i32>, l: vec4<i32>) {
    if (j < NWV) {
        let rv = tile_rv(j, TM);
        let o = p * TW + rv.x * WSP + 4u * rv.y;
        wh[o] = h.x;
        wh[o + 1u] = h.y;
        wh[o + 2u] = h.z;
        wh[o + 3u] = h.w;
        wl[o] = l.x;
        wl[o + 1u] = l.y;
        wl[o + 2u] = l.z;
        wl[o + 3u] = l.w;
    }
}

// Stores vec4 j of an X tile's high and low planes into buffer p.
fn put_x(p: u32, j: u32, h: vec4<i32>, l: vec4<i32>) {
    if (j < NXV) {
        let rv = tile_rv(j, TN);
        let o = p * TX + rv.x * WSP + 4u * rv.y;
        xh[o] = h.x;
        xh[o + 1u] = h.y;
        xh[o + 2u] = h.z;
        xh[o + 3u] = h.w;
        xl[o] = l.x;
        xl[o + 1u] = l.y;
        xl[o + 2u] = l.z;
        xl[o + 3u] = l.w;
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sid: u32) {
    let tile = wg.x + wg.y * params.groups_x;
    let row0 = (tile / params.tok_tiles) * TM;
    let tok0 = (tile % params.tok_tiles) * TN;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    let nkw = params.k / 4u;                     // words per token (row) of a digit plane
    let nkv = nkw / 4u;                          // vec4s likewise
    let t16 = (params.tokens + 15u) / 16u * 16u; // tokens of an X plane (smx-prep.wgsl's layout)
    let xl0 = t16 * nkv;                         // X's low digits' plane, in vec4s
    let xmax0 = 2u * t16 * nkw;                  // tokens' max |x|, in words
    let wmax0 = xmax0 + params.tokens;           // rows' max |w|
    let wh0 = (wmax0 + params.rows + 3u) / 4u;   // W's high digits' plane, in vec4s
    let wl0 = wh0 + params.rows * nkv;           // W's low digits'
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
    // the registers of a step's loads, high and low digits of vec4 u at 2 u, 2 u + 1 (step 0's straight to
    // buffer 0); the loops have constant trip counts, unrolled into registers
    var rw: array<vec4<i32>, 2u * LW>;
    var rx: array<vec4<i32>, 2u * LX>;
    for (var u = 0u; u < LW; u++) {
        let j = lid + u * WG_SIZE;
        put_w(0u, j, tile_load(wh0, j, 0u, row0, params.rows, nkv, NWV, TM), tile_load(wl0, j, 0u, row0, params.rows, nkv, NWV, TM));
    }
    for (var u = 0u; u < LX; u++) {
        let j = lid + u * WG_SIZE;
        put_x(0u, j, tile_load(0u, j, 0u, tok0, params.tokens, nkv, NXV, TN), tile_load(xl0, j, 0u, tok0, params.tokens, nkv, NXV, TN));
    }
    workgroupBarrier();
    var p = 0u;
    for (var k0 = 0u; k0 < params.k; k0 += TK) {
        let more = k0 + TK < params.k;
        if (more) { // the next step's words into registers: their latency under this step's products
            for (var u = 0u; u < LW; u++) {
                let j = lid + u * WG_SIZE;
                rw[2u * u] = tile_load(wh0, j, k0 + TK, row0, params.rows, nkv, NWV, TM);
                rw[2u * u + 1u] = tile_load(wl0, j, k0 + TK, row0, params.rows, nkv, NWV, TM);
            }
            for (var u = 0u; u < LX; u++) {
                let j = lid + u * WG_SIZE;
                rx[2u * u] = tile_load(0u, j, k0 + TK, tok0, params.tokens, nkv, NXV, TN);
                rx[2u * u + 1u] = tile_load(xl0, j, k0 + TK, tok0, params.tokens, nkv, NXV, TN);
            }
        }
        for (var kk = 0u; kk < TK / 32u && k0 + 32u * kk < params.k; kk++) { // (a last step may end early)
            // X's fragments from workgroup memory: loads straight from the storage buffer measured ~10x
            // slower on the H200 (tests/web/smx-micro.mjs: 111 against 1,134 TOPS at 4 products a load)
            let xo0 = p * TX + st * TF * 16u * WSP + 8u * kk;
            let xh0 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xh, xo0, WSP);
            let xl0 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xl, xo0, WSP);
#if TF > 1
            let xh1 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xh, xo0 + 16u * WSP, WSP);
            let xl1 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&xl, xo0 + 16u * WSP, WSP);
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
        if (more) { // into the other buffer, which every subgroup finished reading before the last barrier
            for (var u = 0u; u < LW; u++) {
                put_w(p ^ 1u, lid + u * WG_SIZE, rw[2u * u], rw[2u * u + 1u]);
            }
            for (var u = 0u; u < LX; u++) {
                put_x(p ^ 1u, lid + u * WG_SIZE, rx[2u * u], rx[2u * u + 1u]);
            }
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
