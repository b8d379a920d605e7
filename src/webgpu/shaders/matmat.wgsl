// Matrix-matrix product for prefill, Y[t] = W X[t] for a batch of tokens t: W has `rows` rows of `k`
// elements stored as the raw GGUF bytes in a flat array<u32>, X and Y are f32, token-major (X[t] is k
// elements, Y[t] is `rows` elements). One workgroup computes a TM x TN tile of Y (TM rows of W times TN
// tokens); each invocation owns RM x RN of it in registers. The K dimension is walked TK elements at a time:
// the workgroup dequantizes a TM x TK tile of W into workgroup memory with the format's shared routine
// (dequant.wgsl dq_chunk, one chunk of 8 weights per call) and loads the matching TN x TK tile of X, then
// every invocation accumulates its RM x RN dot products from the two tiles.
//
// Format independence: a tile's K range is TK/8 consecutive chunks in the (block, chunk) order of the
// format, not TK consecutive elements. Chunk c of a block holds elements [dq_lo_at(c), +4) and
// [dq_hi_at(c), +4); the X tile takes the same elements for the same chunk, and a dot product does not care
// about the order of its terms. So TK needs no relation to the format's block size, and every format with a
// dq_chunk routine works unchanged.
//
// Defines: WEIGHT_TYPE (types.wgsl), TM, TN (tile rows / tokens), TK (elements of K per step, a multiple of
// 8), RM, RN (rows / tokens per invocation; TM % RM == TN % RN == 0), WG_SIZE (must equal
// (TM / RM) * (TN / RN); given by C so @workgroup_size is a literal), F16 (common.wgsl: tiles and products in
// f16, accumulation in f32), ACTQ (actq.wgsl: X rounded as the CPU rounds it for this format; for the 8-bit
// kinds each K step first computes the scales of the activation blocks it touches, per token, into
// workgroup memory, reusing them while the step stays in the same blocks; needs f32 tiles; Q4_1/Q5_1 also
// add each block's minimum times the CPU's Q8_1 block-sum rounding, actq_min_corr).
// Bindings: 0 weights (read), 1 X as vec4<f32> (read), 2 Y (read_write), 3 MatmatParams (uniform).
// Dispatch: (groups_x, ceil(ceil(rows / TM) / groups_x), ceil(tokens / TN)) workgroups.
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matmat.wgsl needs WEIGHT_TYPE
#endif
#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 32
#endif
#ifndef RM
#define RM 4
#endif
#ifndef RN
#define RN 4
#endif
#ifndef WG_SIZE
#define WG_SIZE ((TM / RM) * (TN / RN))
#endif
#if TK < 8 || TK % 8 != 0
#error matmat.wgsl: TK must be a positive multiple of 8
#endif
#if RM < 1 || RN < 1 || TM % RM != 0 || TN % RN != 0
#error matmat.wgsl: RM and RN must divide TM and TN
#endif
#if WG_SIZE != (TM / RM) * (TN / RN)
#error matmat.wgsl: WG_SIZE must be (TM / RM) * (TN / RN)
#endif
#ifndef ACTQ
#define ACTQ 0
#endif
#if (ACTQ == 1 || ACTQ == 2) && F16
#error matmat.wgsl: 8-bit activation rounding needs f32 tiles
#endif

#include "matmat-common.wgsl"

#include "dequant.wgsl"

fn actq_x(i: u32) -> vec4<f32> {
    return x[i];
}
#include "actq.wgsl"

const CK: u32 = TK / 8u;      // chunks (of 8 elements) per tile row in one K step
const WS: u32 = TK / 4u + 1u; // vec4s per tile row: TK / 4, plus one of padding against bank conflicts

var<workgroup> wt: array<fvec4, TM * WS>; // W tile: row m, chunk s at [m * WS + 2s] (lo) and [+1] (hi)
var<workgroup> xt: array<fvec4, TN * WS>; // X tile, same layout per token
#if ACTQ == 1 || ACTQ == 2
const NSUB: u32 = DQ_BLOCK / ACT_BLOCK;                 // activation blocks per weight block
const SB: u32 = (CK + DQ_CHUNKS - 1u) / DQ_CHUNKS + 1u; // weight blocks one K step can touch
var<workgroup> xs: array<vec2<f32>, TN * SB * NSUB>;    // token n, block b0 + j, sub s at (n * SB + j) * NSUB + s
#endif
#if ACT_MIN
var<workgroup> xm: array<f32, TN * SB>; // actq_min_corr of token n, block b0 + j at n * SB + j (NSUB = 1)
#endif

// Element `at` (a multiple of 4) of weight block blk of token tok, rounded as the CPU rounds it (ACTQ).
fn x_tile_at(tok: u32, blk: u32, at: u32, b0: u32, n: u32) -> vec4<f32> {
    let v = x[params.x_offset + tok * params.x_stride + (blk * DQ_BLOCK + at) / 4u];
#if ACTQ == 1 || ACTQ == 2
    return actq_apply(v, xs[(n * SB + blk - b0) * NSUB + at / ACT_BLOCK]);
#elif ACTQ == 3 || ACTQ == 4
    return actq_round(v);
#else
    return v;
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = mm_row0(wg);
    let tok0 = wg.z * TN;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup: the folded grid may have a few groups past the last tile
    }
    let n_chunks = (params.k / DQ_BLOCK) * DQ_CHUNKS;
    // invocation (tm, tn) owns rows row0 + tm + i * TMT and tokens tok0 + tn + j * TNT: consecutive
    // invocations take consecutive rows, so the stores of Y are contiguous
    let tm = lid % TMT;
    let tn = lid / TMT;
    var acc: array<f32, RM * RN>;
    var scaled = 0xffffffffu; // first weight block whose activation scales xs holds (uniform)
    for (var t0 = 0u; t0 < n_chunks; t0 += CK) {
        let b0 = t0 / DQ_CHUNKS;
#if ACTQ == 1 || ACTQ == 2
        // scales of the activation blocks this step touches, unless the last step computed them (a K step
        // smaller than a weight block stays in it); the previous step's closing barrier protects xs
        let nb = (min(t0 + CK, n_chunks) - 1u) / DQ_CHUNKS - b0 + 1u;
        if (b0 != scaled || nb > 1u) {
            for (var i = lid; i < TN * nb * NSUB; i += WG_SIZE) {
                let n = i / (nb * NSUB);
                let r = i % (nb * NSUB);
                if (tok0 + n < params.tokens) {
                    let xb = params.x_offset + (tok0 + n) * params.x_stride +
                             ((b0 + r / NSUB) * DQ_BLOCK + (r % NSUB) * ACT_BLOCK) / 4u;
#if ACT_MIN
                    let amax = actq_amax(xb);
                    xs[n * SB + r] = actq_scale_of(amax);
                    xm[n * SB + r] = actq_min_corr(xb, amax);
#else
                    xs[(n * SB + r / NSUB) * NSUB + r % NSUB] = actq_scale(xb);
#endif
                }
            }
            scaled = b0;
            workgroupBarrier();
        }
#endif
        // W tile: consecutive invocations take consecutive chunks of a row (contiguous bytes). Chunks past
        // the end of K are zero in both tiles; rows past the end repeat the last row (never stored).
        for (var i = lid; i < TM * CK; i += WG_SIZE) {
            let m = i / CK;
            let s = i % CK;
            let t = t0 + s;
            // explicit zeros: a bare `var q: Dq8;` in a loop body kept the last iteration's value on lavapipe
            var q = Dq8(fvec4(0.0), fvec4(0.0));
            if (t < n_chunks) {
                let row = min(row0 + m, params.rows - 1u);
                q = dq_chunk(params.w_offset + row * params.row_stride + (t / DQ_CHUNKS) * DQ_BYTES,
                             t % DQ_CHUNKS);
            }
            wt[m * WS + 2u * s] = q.lo;
            wt[m * WS + 2u * s + 1u] = q.hi;
        }
        // X tile: the elements of the same chunks, for tokens past the end zero
        for (var i = lid; i < TN * CK; i += WG_SIZE) {
            let n = i / CK;
            let s = i % CK;
            let t = t0 + s;
            var lo = fvec4(0.0);
            var hi = fvec4(0.0);
            if (t < n_chunks && tok0 + n < params.tokens) {
                let c = t % DQ_CHUNKS;
                lo = fvec4(x_tile_at(tok0 + n, t / DQ_CHUNKS, dq_lo_at(c), b0, n));
                hi = fvec4(x_tile_at(tok0 + n, t / DQ_CHUNKS, dq_hi_at(c), b0, n));
            }
            xt[n * WS + 2u * s] = lo;
            xt[n * WS + 2u * s + 1u] = hi;
        }
        workgroupBarrier();
        for (var kq = 0u; kq < 2u * CK; kq++) {
            var a: array<fvec4, RM>;
            var b: array<fvec4, RN>;
            for (var i = 0u; i < RM; i++) {
                a[i] = wt[(tm + i * TMT) * WS + kq];
            }
            for (var j = 0u; j < RN; j++) {
                b[j] = xt[(tn + j * TNT) * WS + kq];
            }
            for (var i = 0u; i < RM; i++) {
                for (var j = 0u; j < RN; j++) {
                    acc[i * RN + j] += f32(dot(a[i], b[j]));
                }
            }
        }
#if ACT_MIN
        // Q4_1/Q5_1: each block starting in this step adds its minimum times the CPU's block-sum rounding
        for (var t = t0 + (DQ_CHUNKS - t0 % DQ_CHUNKS) % DQ_CHUNKS; t < min(t0 + CK, n_chunks); t += DQ_CHUNKS) {
            let blk = t / DQ_CHUNKS;
            for (var i = 0u; i < RM; i++) {
                let row = min(row0 + tm + i * TMT, params.rows - 1u);
                let m = w_f16(params.w_offset + row * params.row_stride + blk * DQ_BYTES + 2u);
                for (var j = 0u; j < RN; j++) {
                    acc[i * RN + j] += m * xm[(tn + j * TNT) * SB + blk - b0];
                }
            }
        }
#endif
        workgroupBarrier();
    }
    mm_store(&acc, row0, tok0, tm, tn);
}
