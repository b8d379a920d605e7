// Matrix-vector product y = W x for one weight format: W has `rows` rows of `k` elements stored as the raw
// GGUF bytes in a flat array<u32> (dequantized in registers, one chunk of 8 weights at a time), x and y are
// f32. One workgroup per ROWS rows: its invocations stride over the rows' chunks (each x chunk is loaded once
// for all ROWS rows), then reduce their partial sums with subgroup operations (SUBGROUPS=1) or a tree in
// workgroup memory.
//
// Defines: WEIGHT_TYPE (TYPE_F32, TYPE_F16, TYPE_Q8_0, TYPE_Q4_0), WG_SIZE (a power of two, default 64),
// ROWS (rows per workgroup, default 1), BLOCKS (1: an invocation takes whole blocks, so a block's scale
// and words are loaded by one invocation; 0: single chunks of 8 weights), F16 and SUBGROUPS (common.wgsl),
// ACTQ (actq.wgsl: x rounded as the CPU rounds it for this format; the 8-bit kinds need BLOCKS=1, so each
// invocation computes an activation block's scale once for all ROWS rows, and f32 arithmetic),
// X_GLU (the FFN's gated activation folded into the x loads: x holds a gate|up row, u at x_up vec4s after
// g, and the product's input is silu(g) * u (1) or ggml's table GELU(g) * u (2), computed exactly as
// eltwise.wgsl's SWIGLU / GEGLU do, so the bits equal a separate GLU dispatch followed by this mat-vec).
// STAGE (words per row, 0 off): each K step, the workgroup first copies its ROWS rows' bytes of the step into
// workgroup memory with consecutive word loads (each weight byte read once, coalesced), computes the step's
// activation scales once (ACTQ), then invocations dequantize chunks from there (weights.wgsl W_TILE): global
// reads no longer depend on a format's block alignment (2-byte aligned blocks cost two loads per word).
// Bindings: 0 weights (read), 1 x as vec4<f32> (read), 2 y (read_write), 3 MatvecParams (uniform); X_GLU=2:
// 4 ggml's GELU table (read, 32768 words of two halves).
// Dispatch: (groups_x, ceil(groups / groups_x), 1) workgroups with groups = ceil(rows / ROWS) and
// groups_x <= maxComputeWorkgroupsPerDimension.
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matvec.wgsl needs WEIGHT_TYPE
#endif
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#if WG_SIZE <= 0 || (WG_SIZE & (WG_SIZE - 1)) != 0
#error matvec.wgsl: WG_SIZE must be a power of two
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef BLOCKS
#define BLOCKS 0
#endif
#if ROWS < 1 || ROWS > 16
#error matvec.wgsl: ROWS must be 1..16
#endif
#ifndef ACTQ
#define ACTQ 0
#endif
#ifndef STAGE
#define STAGE 0
#endif
#if (ACTQ == 1 || ACTQ == 2) && ((!BLOCKS && !STAGE) || F16)
#error matvec.wgsl: 8-bit activation rounding needs BLOCKS=1 or STAGE, and f32 arithmetic
#endif
#if STAGE
#define W_TILE 1
#endif
#ifndef X_GLU
#define X_GLU 0
#endif

#include "matvec-common.wgsl"

#if STAGE
const TW: u32 = STAGE;                       // tile words per row
var<workgroup> wtile: array<u32, ROWS * TW>; // row r's bytes of the step from word r * TW
#endif
#include "dequant.wgsl"
#if STAGE
const NB: u32 = (TW * 4u - 3u) / DQ_BYTES; // weight blocks per K step (a row may start 3 bytes in)
#endif

#include "ops-common.wgsl"

fn actq_x(i: u32) -> vec4<f32> {
    return x_in(i);
}
#include "actq.wgsl"

#if (ACTQ == 1 || ACTQ == 2) && STAGE
var<workgroup> act_sc: array<vec2<f32>, NB * (DQ_BLOCK / ACT_BLOCK)>; // scales of the step's x blocks
var<private> act_blk0: u32;                                          // first block of the step
#elif ACTQ == 1 || ACTQ == 2
var<private> act_sc: array<vec2<f32>, DQ_BLOCK / ACT_BLOCK>; // scales of the current block's x blocks
const act_blk0: u32 = 0u;
#endif
#if ACT_MIN && STAGE
var<workgroup> act_mc: array<f32, NB>; // actq_min_corr of the step's blocks (Q8_1: one x block per block)
#elif ACT_MIN
var<private> act_mc: f32;              // actq_min_corr of the current block
#endif
#if ACT_MIN
fn act_min_of(blk: u32) -> f32 {
#if STAGE
    return act_mc[blk - act_blk0];
#else
    return act_mc;
#endif
}
#endif

// The 4 elements of x at element `at` of block blk, rounded as the CPU rounds them (ACTQ).
fn x_at(blk: u32, at: u32) -> vec4<f32> {
    let v = x_in(params.x_offset + (blk * DQ_BLOCK + at) / 4u);
#if (ACTQ == 1 || ACTQ == 2) && STAGE
    return actq_apply(v, act_sc[(blk - act_blk0) * (DQ_BLOCK / ACT_BLOCK) + at / ACT_BLOCK]);
#elif ACTQ == 1 || ACTQ == 2
    return actq_apply(v, act_sc[at / ACT_BLOCK]);
#elif ACTQ == 3 || ACTQ == 4
    return actq_round(v);
#else
    return v;
#endif
}

#include "matvec-reduce.wgsl"

// Adds chunk c of block blk, times the matching x, to the sums of rows row0 .. row0 + ROWS - 1 (STAGE: from
// the tile of the step starting at block blk0).
fn add_chunk(blk: u32, c: u32, row0: u32, blk0: u32, acc: ptr<function, array<f32, ROWS>>) {
    var xlo = fvec4(x_at(blk, dq_lo_at(c)));
    var xhi = fvec4(x_at(blk, dq_hi_at(c)));
    // f32/f16 rows may end half-way through a block of 8 (k a multiple of 4): past k, x counts as zero
    if (blk * DQ_BLOCK + dq_lo_at(c) >= params.k) {
        xlo = fvec4(0.0);
    }
    if (blk * DQ_BLOCK + dq_hi_at(c) >= params.k) {
        xhi = fvec4(0.0);
    }
    for (var r = 0u; r < ROWS; r++) {
        // rows past the end repeat the last row (never stored) so the loop stays uniform
        let row = min(row0 + r, params.rows - 1u);
#if STAGE
        let start = params.w_offset + row * params.row_stride + blk0 * DQ_BYTES;
        let bb = r * TW * 4u + (start & 3u) + (blk - blk0) * DQ_BYTES;
#else
        let bb = params.w_offset + row * params.row_stride + blk * DQ_BYTES;
#endif
        let q = dq_chunk(bb, c);
        (*acc)[r] += f32(dot(q.lo, xlo) + dot(q.hi, xhi));
#if ACT_MIN
        if (c == 0u) {
            (*acc)[r] += w_f16(bb + 2u) * act_min_of(blk); // the block's m (after d) times the sum's rounding
        }
#endif
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = (wg.x + wg.y * params.groups_x) * ROWS;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup: every invocation of it has the same rows
    }
    let n_blocks = (params.k + DQ_BLOCK - 1u) / DQ_BLOCK; // a partial last block: f32/f16 rows only
    var acc: array<f32, ROWS>;
#if STAGE
    for (var blk0 = 0u; blk0 < n_blocks; blk0 += NB) {
        let nb = min(NB, n_blocks - blk0);
        for (var i = lid; i < ROWS * TW; i += WG_SIZE) {
            let r = i / TW;
            let j = i % TW;
            let start = params.w_offset + min(row0 + r, params.rows - 1u) * params.row_stride + blk0 * DQ_BYTES;
            if (j < ((start & 3u) + nb * DQ_BYTES + 3u) / 4u) {
                wtile[i] = w[(start >> 2u) + j];
            }
        }
#if ACTQ == 1 || ACTQ == 2
        act_blk0 = blk0;
#if ACT_MIN
        // Q8_1: one activation block per weight block; its amax serves the scale and the sum's correction
        for (var i = lid; i < nb; i += WG_SIZE) {
            let xb = params.x_offset + ((blk0 + i) * DQ_BLOCK) / 4u;
            let amax = actq_amax(xb);
            act_sc[i] = actq_scale_of(amax);
            act_mc[i] = actq_min_corr(xb, amax);
        }
#else
        for (var i = lid; i < nb * (DQ_BLOCK / ACT_BLOCK); i += WG_SIZE) {
            act_sc[i] = actq_scale(params.x_offset + (blk0 * DQ_BLOCK + i * ACT_BLOCK) / 4u);
        }
#endif
#endif
        workgroupBarrier();
        for (var t = lid; t < nb * DQ_CHUNKS; t += WG_SIZE) {
            add_chunk(blk0 + t / DQ_CHUNKS, t % DQ_CHUNKS, row0, blk0, &acc);
        }
        workgroupBarrier();
    }
#elif BLOCKS
    for (var blk = lid; blk < n_blocks; blk += WG_SIZE) {
#if ACTQ == 1 || ACTQ == 2
#if ACT_MIN
        let amax = actq_amax(params.x_offset + (blk * DQ_BLOCK) / 4u);
        act_sc[0] = actq_scale_of(amax);
        act_mc = actq_min_corr(params.x_offset + (blk * DQ_BLOCK) / 4u, amax);
#else
        for (var s = 0u; s < DQ_BLOCK / ACT_BLOCK; s++) {
            act_sc[s] = actq_scale(params.x_offset + (blk * DQ_BLOCK + s * ACT_BLOCK) / 4u);
        }
#endif
#endif
        for (var c = 0u; c < DQ_CHUNKS; c++) {
            add_chunk(blk, c, row0, 0u, &acc);
        }
    }
#else
    for (var t = lid; t < n_blocks * DQ_CHUNKS; t += WG_SIZE) {
        add_chunk(t / DQ_CHUNKS, t % DQ_CHUNKS, row0, 0u, &acc);
    }
#endif
    mv_store(&acc, row0, lid);
}
