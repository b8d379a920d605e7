// Flash attention for a batch of query tokens (prefill). The rows of the problem are (token, query head)
// pairs of one KV head, token-major (row R: token R / GROUP, head hk * GROUP + R % GROUP), so the GROUP
// heads that share a KV head share every K/V tile load (GQA). One workgroup per tile of TILE_Q rows of one
// KV head; the cells the tile sees (from the first token's window start to the last token's position)
// stream through workgroup memory TILE_K at a time. Per K/V tile, five phases between barriers:
//   1. K tile -> workgroup memory (transposed: dim quad d of cell j at d * (TK + 1) + j, padded so the
//      coalesced cache reads store across banks), from registers: each tile's cache reads are issued one
//      phase earlier (K during the previous tile's P V, V during the scores) and stored after the barrier;
//   2. scores: invocation b takes a block of ROW_BLOCK rows x CELL_BLOCK cells (rows rb * RQ + i, cells
//      cb + k * NBK: neighbouring invocations read neighbouring cells), so every workgroup load of a Q or K
//      quad feeds RK or RQ dot products (the time goes here and in 5: 2 loads per 4 MACs with 1 x 1
//      blocks, (RQ + RK) per 4 RQ RK with blocks); masks (causal, sliding window) and soft-cap applied,
//      scores to workgroup memory;
//   3. V tile (fetched during 2) -> workgroup memory (cell j at j * D4), and the row maxima: WG / TILE_Q
//      invocations per row, each a strided part of the row (quads of 4 cells);
//   4. the online softmax step of each row: new max, the old sums' scale alpha, the probabilities written
//      over the scores (each exp once per score), partial sums per invocation;
//   5. P V: invocation (row group, sub) owns ROW_BLOCK rows x NACC quads of the head (quads sub + k * TPR)
//      of the accumulator in registers; per 4 cells it loads RQ quads of P and 4 NACC quads of V for
//      16 RQ NACC MACs, after scaling its rows by their alpha.
// The output is the accumulator over the row's sum (the partial sums of phase 4 added at the end).
// Workgroups are taken last tile first: the causal tiles late in the prompt see the most cells, and start
// first.
// Defines: attn-common.wgsl's, TILE_Q (divides WG_SIZE), TILE_K (a multiple of 4), ROW_BLOCK (divides
// TILE_Q), CELL_BLOCK (divides TILE_K). Dispatch: (ceil(tokens * GROUP / TILE_Q), KV heads, 1).
#include "attn-common.wgsl"
#ifndef TILE_Q
#define TILE_Q 16
#endif
#ifndef TILE_K
#define TILE_K 32
#endif
#ifndef ROW_BLOCK
#define ROW_BLOCK 1
#endif
#ifndef CELL_BLOCK
#define CELL_BLOCK 1
#endif
#if TILE_Q <= 0 || WG_SIZE % TILE_Q != 0 || TILE_K <= 0 || TILE_K % 4 != 0
#error attn-prefill: TILE_Q must divide WG_SIZE, TILE_K a positive multiple of 4
#endif
#if ROW_BLOCK <= 0 || TILE_Q % ROW_BLOCK != 0 || CELL_BLOCK <= 0 || TILE_K % CELL_BLOCK != 0
#error attn-prefill: ROW_BLOCK must divide TILE_Q, CELL_BLOCK TILE_K
#endif

const TQ: u32 = TILE_Q;
const TK: u32 = TILE_K;
const RQ: u32 = ROW_BLOCK;                // rows per invocation (scores and P V)
const RK: u32 = CELL_BLOCK;               // cells per invocation (scores)
const NBK: u32 = TK / RK;                 // cell blocks per tile
const NB: u32 = (TQ / RQ) * NBK;          // score blocks per tile
const SPR: u32 = WG / TQ;                 // softmax: invocations per row
const TPR: u32 = WG / (TQ / RQ);          // P V: invocations per row group
const NACC: u32 = (D4 + TPR - 1u) / TPR;  // P V: accumulator quads per row of an invocation
const TK4: u32 = TK / 4u;                 // quads of scores per row
const KT: u32 = TK + 1u;                  // stride of a K dim quad in kvs (padded against bank conflicts)
const SS: u32 = TK4 + 1u;                 // stride of a row in ss, quads (padded likewise)

var<workgroup> qs: array<vec4<f32>, TILE_Q * (HEAD_DIM / 4)>;        // Q (times scale): row r at r * D4
var<workgroup> kvs: array<vec4<f32>, (TILE_K + 1) * (HEAD_DIM / 4)>; // K (d * KT + j), then V (j * D4 + d)
var<workgroup> ss: array<vec4<f32>, TILE_Q * (TILE_K / 4 + 1)>;      // scores, then P: row r at r * SS
var<workgroup> red: array<f32, WG_SIZE>;                             // row maxima / sums: row r's at r * SPR
var<workgroup> als: array<f32, TILE_Q>;                              // alpha of each row for the tile

// An invocation's share of a K or V tile in registers: quad n is element lid + n * WG of the tile (cell
// (lid + n * WG) / D4, quad % D4 of the head: global reads coalesced along the head).
const NL: u32 = (TK * D4 + WG - 1u) / WG;
alias TileRegs = array<vec4<f32>, NL>;

// Reads this invocation's share of cells c .. c + TK of one KV head from cache (K or V); cells from c_end on
// are zeros. Issued a phase before they are stored (put_tile), so the cache reads' latency overlaps the
// score or P V arithmetic instead of stalling the workgroup between two barriers.
fn fetch_tile(kv_k: bool, base: u32, c: u32, c_end: u32, lid: u32) -> TileRegs {
    var r: TileRegs;
    for (var n = 0u; n < NL; n++) {
        let i = lid + n * WG;
        let j = i / D4;
        var v = vec4<f32>(0.0);
        if (i < TK * D4 && c + j < c_end) {
            let at = base + (c + j) * params.kv_stride;
            if (kv_k) {
                v = quad(k_raw(at, i % D4));
            } else {
                v = quad(v_raw(at, i % D4));
            }
        }
        r[n] = v;
    }
    return r;
}

// Stores a fetched share into kvs: K transposed (d * KT + j), V by cell (j * D4 + d).
fn put_tile(kv_k: bool, r: TileRegs, lid: u32) {
    for (var n = 0u; n < NL; n++) {
        let i = lid + n * WG;
        let j = i / D4;
        let d = i % D4;
        if (i < TK * D4) {
            kvs[select(j * D4 + d, d * KT + j, kv_k)] = r[n];
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let hk = wg.y;
    let rows = params.n_tokens * G;
    let r0 = (nwg.x - 1u - wg.x) * TQ;
    let c_start = first_cell(r0 / G);
    let c_end = params.pos0 + (min(r0 + TQ, rows) - 1u) / G + 1u;

    for (var i = lid; i < TQ * D4; i += WG) {
        let rr = r0 + i / D4;
        var v = vec4<f32>(0.0);
        if (rr < rows) {
            v = q[params.q_offset + (rr / G) * params.q_stride + (hk * G + rr % G) * D4 + i % D4] * params.scale;
        }
        qs[i] = v;
    }

    // softmax role: row sr, part ssub; P V role: row group pg (rows pg * RQ + i), quads psub + k * TPR
    let sr = lid / SPR;
    let ssub = lid % SPR;
    let pg = lid / TPR;
    let psub = lid % TPR;
    let d4 = opaque(D4);
    let tk4 = opaque(TK4);
    var m = NEG;   // row sr's running max (the same in each of its SPR invocations)
    var l = 0.0;   // this invocation's part of row sr's running sum
    var acc: array<vec4<f32>, RQ * NACC>;
    let kb = params.k_offset + hk * HW;
    let vb = params.v_offset + hk * HW;
    var kr = fetch_tile(true, kb, c_start, c_end, lid);
    for (var c = c_start; c < c_end; c += TK) {
        workgroupBarrier(); // the previous tile's P V readers are done (and Q is stored)
        put_tile(true, kr, lid);
        workgroupBarrier();
        let vr = fetch_tile(false, vb, c, c_end, lid); // in flight during the scores
        for (var b = lid; b < NB; b += WG) {
            let rb = b / NBK;
            let cb = b % NBK;
            // (initialised explicitly: Dawn on lavapipe kept a loop-local var's values from the previous
            // iteration when it had no initialiser)
            var s = array<f32, RQ * RK>();
            for (var d = 0u; d < d4; d++) {
                var kq: array<vec4<f32>, RK>;
                for (var k = 0u; k < RK; k++) {
                    kq[k] = kvs[d * KT + cb + k * NBK];
                }
                for (var i = 0u; i < RQ; i++) {
                    let qq = qs[(rb * RQ + i) * D4 + d];
                    for (var k = 0u; k < RK; k++) {
                        s[i * RK + k] += dot(qq, kq[k]);
                    }
                }
            }
            for (var i = 0u; i < RQ; i++) {
                let rr = rb * RQ + i;
                let t = (r0 + rr) / G;
                let lo = first_cell(t);
                for (var k = 0u; k < RK; k++) {
                    let j = cb + k * NBK;
                    var x = NEG;
                    if (r0 + rr < rows && c + j >= lo && c + j <= params.pos0 + t) {
                        x = capped(s[i * RK + k]);
                    }
                    ss[rr * SS + j / 4u][j % 4u] = x;
                }
            }
        }
        workgroupBarrier(); // scores stored, K no longer read
        put_tile(false, vr, lid);
        var tmax = NEG;
        for (var j4 = ssub; j4 < TK4; j4 += SPR) {
            let x = ss[sr * SS + j4];
            tmax = max(tmax, max(max(x.x, x.y), max(x.z, x.w)));
        }
        red[lid] = tmax;
        workgroupBarrier(); // row maxima parts stored
        for (var k = 0u; k < SPR; k++) {
            tmax = max(tmax, red[sr * SPR + k]);
        }
        let mn = max(m, tmax);
        let alpha = ex(m - mn);
        m = mn;
        l *= alpha;
        for (var j4 = ssub; j4 < TK4; j4 += SPR) {
            let x = ss[sr * SS + j4];
            let p = select(vec4<f32>(0.0), exp(max(x - m, vec4<f32>(-80.0))), x > vec4<f32>(SEEN));
            l += p.x + p.y + p.z + p.w;
            ss[sr * SS + j4] = p;
        }
        if (ssub == 0u) {
            als[sr] = alpha;
        }
        workgroupBarrier(); // P, alpha and V stored
        kr = fetch_tile(true, kb, c + TK, c_end, lid); // the next K tile (zeros past the end), during P V
        for (var i = 0u; i < RQ; i++) {
            let a = als[pg * RQ + i];
            for (var k = 0u; k < NACC; k++) {
                acc[i * NACC + k] *= a;
            }
        }
        for (var j4 = 0u; j4 < tk4; j4++) {
            var pq: array<vec4<f32>, RQ>;
            for (var i = 0u; i < RQ; i++) {
                pq[i] = ss[(pg * RQ + i) * SS + j4];
            }
            for (var e = 0u; e < 4u; e++) {
                for (var k = 0u; k < NACC; k++) {
                    // quads past the head (when TPR does not divide D4) read a valid one; never stored
                    let v = kvs[(j4 * 4u + e) * D4 + min(psub + k * TPR, D4 - 1u)];
                    for (var i = 0u; i < RQ; i++) {
                        acc[i * NACC + k] += pq[i][e] * v;
                    }
                }
            }
        }
    }

    // each row's sum from the parts of its SPR softmax invocations
    workgroupBarrier();
    red[lid] = l;
    workgroupBarrier();
    for (var i = 0u; i < RQ; i++) {
        let rr = pg * RQ + i;
        if (r0 + rr < rows) {
            var sum = 0.0;
            for (var k = 0u; k < SPR; k++) {
                sum += red[rr * SPR + k];
            }
            let ob = params.o_offset + ((r0 + rr) / G) * params.o_stride + (hk * G + (r0 + rr) % G) * D4;
            let inv = select(0.0, 1.0 / sum, sum > 0.0);
            for (var k = 0u; k < NACC; k++) {
                let d = psub + k * TPR;
                if (d < D4) {
                    o[ob + d] = acc[i * NACC + k] * inv;
                }
            }
        }
    }
}
