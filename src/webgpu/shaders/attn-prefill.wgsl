// Flash attention for a batch of query tokens (prefill). The rows of the problem are (token, query head)
// pairs of one KV head, token-major (row R: token R / GROUP, head hk * GROUP + R % GROUP), so the GROUP
// heads that share a KV head share every K/V tile load (GQA). One workgroup per tile of TILE_Q rows of one
// KV head:
//   - Q rows of the tile (times scale) stay in workgroup memory;
//   - the cells the tile sees (from the first token's window start to the last token's position) stream
//     through workgroup memory TILE_K at a time: K tile -> TILE_Q x TILE_K scores (causal and sliding-window
//     masks, soft-cap) -> V tile over the K tile -> online softmax update of each row's max, sum and
//     V accumulator.
// Invocation i owns row i / (WG / TILE_Q) and the vec4 lanes i % (WG / TILE_Q) + k * (WG / TILE_Q) of its
// accumulator; the row's max and sum are kept (identically) by each of the row's invocations.
// Defines: attn-common.wgsl's, TILE_Q (divides WG_SIZE), TILE_K. Dispatch: (ceil(tokens * GROUP / TILE_Q),
// KV heads, 1).
#include "attn-common.wgsl"
#ifndef TILE_Q
#define TILE_Q 16
#endif
#ifndef TILE_K
#define TILE_K 32
#endif
#if TILE_Q <= 0 || WG_SIZE % TILE_Q != 0 || TILE_K <= 0
#error attn-prefill: TILE_Q must divide WG_SIZE, TILE_K positive
#endif

const TQ: u32 = TILE_Q;
const TK: u32 = TILE_K;
const TPR: u32 = WG / TQ;                  // invocations per row
const NACC: u32 = (D4 + TPR - 1u) / TPR;   // accumulator vec4s per invocation
const KS: u32 = D4 + 1u;                   // stride of a cell in kvs (padded against bank conflicts)

var<workgroup> qs: array<vec4<f32>, TILE_Q * (HEAD_DIM / 4)>;      // row r at r * D4
var<workgroup> kvs: array<vec4<f32>, TILE_K * (HEAD_DIM / 4 + 1)>; // cell j at j * KS: K, then V
var<workgroup> ss: array<f32, TILE_Q * TILE_K>;                    // score of row r, cell j at r * TK + j

// Loads cells c .. c + TK of one KV head from cache (K or V) into kvs; cells from c_end on are zeros.
fn load_tile(kv_k: bool, base: u32, c: u32, c_end: u32, lid: u32) {
    for (var i = lid; i < TK * D4; i += WG) {
        let j = i / D4;
        let d = i % D4;
        var v = vec4<f32>(0.0);
        if (c + j < c_end) {
            let at = base + (c + j) * params.kv_stride + d;
            if (kv_k) {
                v = quad(kc[at]);
            } else {
                v = quad(vc[at]);
            }
        }
        kvs[j * KS + d] = v;
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let hk = wg.y;
    let rows = params.n_tokens * G;
    let r0 = wg.x * TQ;
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

    let r = lid / TPR;
    let sub = lid % TPR;
    let d4 = opaque(D4);
    let tk = opaque(TK);
    var m = NEG;
    var l = 0.0;
    var acc: array<vec4<f32>, NACC>;
    for (var c = c_start; c < c_end; c += TK) {
        workgroupBarrier(); // the previous tile's V readers are done (and Q is stored)
        load_tile(true, params.k_offset + hk * D4, c, c_end, lid);
        workgroupBarrier();
        for (var i = lid; i < TQ * TK; i += WG) {
            let rr = i / TK;
            let j = i % TK;
            var x = NEG;
            if (r0 + rr < rows) {
                let t = (r0 + rr) / G;
                if (c + j >= first_cell(t) && c + j <= params.pos0 + t) {
                    var s = 0.0;
                    for (var d = 0u; d < d4; d++) {
                        s += dot(qs[rr * D4 + d], kvs[j * KS + d]);
                    }
                    x = capped(s);
                }
            }
            ss[i] = x;
        }
        workgroupBarrier();
        load_tile(false, params.v_offset + hk * D4, c, c_end, lid);
        var tmax = NEG;
        for (var j = 0u; j < tk; j++) {
            tmax = max(tmax, ss[r * TK + j]);
        }
        let mn = max(m, tmax);
        let alpha = ex(m - mn);
        l *= alpha;
        for (var k = 0u; k < NACC; k++) {
            acc[k] *= alpha;
        }
        m = mn;
        workgroupBarrier();
        for (var j = 0u; j < tk; j++) {
            let x = ss[r * TK + j];
            let p = select(0.0, ex(x - m), x > SEEN);
            l += p;
            for (var k = 0u; k < NACC; k++) {
                let d = sub + k * TPR;
                if (d < D4) {
                    acc[k] += p * kvs[j * KS + d];
                }
            }
        }
    }

    let rr = r0 + r;
    if (rr < rows) {
        let ob = params.o_offset + (rr / G) * params.o_stride + (hk * G + rr % G) * D4;
        let inv = select(0.0, 1.0 / l, l > 0.0);
        for (var k = 0u; k < NACC; k++) {
            let d = sub + k * TPR;
            if (d < D4) {
                o[ob + d] = acc[k] * inv;
            }
        }
    }
}
