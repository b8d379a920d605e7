// Attention for a few query tokens (decode), split over the KV sequence (flash-decoding). One workgroup per
// (split, KV head, token): it takes cells [base + split * chunk, + chunk) of the token's visible range for
// the GROUP query heads sharing that KV head.
//   1. Q of the group's heads (times scale) into workgroup memory.
//   2. Scores: invocation i takes head i % GROUP and cells i / GROUP, + WG / GROUP, ... so the GROUP
//      invocations next to each other read the same K quads at the same time (one load for the group on a
//      GPU); each keeps a running max and sum, and the soft-capped scores go to workgroup memory.
//   3. A tree merges the (max, sum) pairs per head; scores become exp(s - max).
//   4. V: outputs (lane, head) are numbered lane * GROUP + head (again the group's invocations read the
//      same V quad); with fewer outputs than invocations the cells are split into groups whose sums are
//      added in workgroup memory.
//   5. With one split the normalised output is written; else the partial (max, sum, V sum) per head goes
//      to the scratch (attn-reduce.wgsl merges them): partial ((t * n_head + h) * n_splits + split) at
//      vec4 index * (D/4 + 1): (max, sum, 0, 0) then D/4 vec4s of V sum.
// No per-invocation arrays: compiles fast on CPU drivers and keeps registers low on GPUs.
// ROPE=1 (one-token steps): the attention block's RoPE and KV store in the same dispatch, replacing
// rope-qkv.wgsl's (one dispatch less per layer; a dispatch costs ~7-14 us of a decode step on the H200).
// Binding 0 is then the fused Q|K|V projection's row: every workgroup rotates its group's Q heads into qs
// (rope-common.wgsl, the same products as rope-qkv.wgsl: (rotated * q_scale) * scale), and the workgroup whose
// split holds the token's cell rotates K head hk and copies V head hk into the caches (rounded to f16 as
// rope-qkv.wgsl does), then reads them back through the cache like every other cell (storageBarrier: the
// stores are visible to the workgroup). No other workgroup reads that cell: one token per call.
// Binding 6: ff (frequency factors or the host's sin/cos table, read-only).
// Q8_OUT=1 (HEAD_DIM a multiple of 32): a call of one split also rounds its output to Q8_0 blocks into
// binding 7 (ROPE) or 6 in actq-quant.wgsl's layout (attn-reduce.wgsl's Q8_OUT, which more splits go
// through), so the output projection's integer mat-vec needs neither a reduce nor a quantizer dispatch: a
// short context's attention is one dispatch (with a chunk and one_max as large as the span).
// Defines: attn-common.wgsl's, CHUNK (the most cells of a split: sizes the score memory), ROPE, Q8_OUT.
// Dispatch: (n_splits, KV heads, tokens).
#include "attn-common.wgsl"
#ifndef CHUNK
#define CHUNK 256
#endif
#if GROUP > WG_SIZE
#error attn-decode: GROUP must not exceed WG_SIZE
#endif
#ifndef Q8_OUT
#define Q8_OUT 0
#endif
#if Q8_OUT && HEAD_DIM % 32 != 0
#error attn-decode: Q8_OUT needs a head dim of a multiple of 32
#endif
#if ROPE && (KV_Q8 || KV_Q4)
#error attn-decode: ROPE stores f16 / f32 cells (a Q8_0 / Q4_0 cache takes the plain KV store)
#endif
#if ROPE
@group(0) @binding(6) var<storage, read> ff: array<f32>;
// Element i of binding 0 (the unrotated Q|K|V row): rope-common.wgsl's input.
fn rope_src(which: u32, i: u32) -> f32 {
    return q[i >> 2u][i & 3u];
}
#include "rope-common.wgsl"

// Elements 4 l .. 4 l + 3 of the head at element xb of binding 0, rotated for position pos.
fn rope_quad(xb: u32, pos: u32, l: u32) -> vec4<f32> {
    return vec4<f32>(rope_elem(0u, xb, pos, 4u * l), rope_elem(0u, xb, pos, 4u * l + 1u),
                     rope_elem(0u, xb, pos, 4u * l + 2u), rope_elem(0u, xb, pos, 4u * l + 3u));
}

// A quad of 4 elements as the cache holds it (f16: rounded to nearest even, as rope-qkv.wgsl).
fn cache_quad(v: vec4<f32>) -> KvQuad {
#if KV_F16
    return vec2<u32>(f16_bits_rne(v.x) | (f16_bits_rne(v.y) << 16u), f16_bits_rne(v.z) | (f16_bits_rne(v.w) << 16u));
#else
    return v;
#endif
}
#endif
#if Q8_OUT && ROPE
@group(0) @binding(7) var<storage, read_write> qout: array<u32>;
#elif Q8_OUT
@group(0) @binding(6) var<storage, read_write> qout: array<u32>;
#endif
#if Q8_OUT
#define ACTQ 1
fn actq_x(i: u32) -> vec4<f32> {
    return qs[i]; // the normalised outputs of the workgroup's heads (head g at g * D4)
}
#include "actq.wgsl"
#endif

const CH: u32 = CHUNK;
const S: u32 = WG / G;       // invocations (cell slots) per head in the score phase
const GD: u32 = G * D4;      // outputs (head, lane) of the workgroup
#if GROUP * HEAD_DIM / 4 < WG_SIZE
const CG: u32 = WG / GD;     // cell groups of the V sum
#endif

var<workgroup> qs: array<vec4<f32>, GROUP * (HEAD_DIM / 4)>; // Q of head g at g * D4
var<workgroup> ps: array<f32, GROUP * CHUNK>;               // head g, cell j at g * CH + j
var<workgroup> red_m: array<f32, WG_SIZE>;                  // head g, slot i at g * S + i
var<workgroup> red_l: array<f32, WG_SIZE>;
#if GROUP * HEAD_DIM / 4 < WG_SIZE
var<workgroup> red_v: array<vec4<f32>, WG_SIZE>;            // output o of cell group c at c * GD + o
#endif

// Loads in flight per invocation: the score and V loops take VB cells (V) or KB quads (K) at a time, loaded
// before any is used. A GPU waits on each global load it uses, so one load per iteration made a 32-cell
// split 32 dependent trips to memory in each phase (H200 profile, 8B decode after 512 tokens: 27 us per
// layer); batched, a split costs a few. The sums keep their order: the same bits as one at a time.
// (VB and KB: defines, tune keys attn "vb" and "kb"; KB must divide HEAD_DIM / 4.)
#ifndef VB
#define VB 8
#endif
#ifndef KB
#if HEAD_DIM % 64 == 0
#define KB 16
#elif HEAD_DIM % 32 == 0
#define KB 8
#elif HEAD_DIM % 16 == 0
#define KB 4
#else
#define KB 1
#endif
#endif

// Adds the weighted V quads of output oi's lane over cells j0, j0 + step, ... < n for head oi % G.
fn v_sum(oi: u32, j0: u32, step: u32, n: u32, c0: u32, hk: u32) -> vec4<f32> {
    let g = oi % G;
    let lane = oi / G;
    let vb = params.v_offset + hk * HW;
    var acc = vec4<f32>(0.0);
    var j = j0;
    for (; j + (VB - 1u) * step < n; j += VB * step) {
        var vq: array<KvQuad, VB>;
        for (var u = 0u; u < VB; u++) {
            vq[u] = v_raw(vb + (c0 + j + u * step) * params.kv_stride, lane);
        }
        for (var u = 0u; u < VB; u++) {
            acc += ps[g * CH + j + u * step] * quad(vq[u]);
        }
    }
    for (; j < n; j += step) {
        acc += ps[g * CH + j] * quad(v_raw(vb + (c0 + j) * params.kv_stride, lane));
    }
    return acc;
}

// Writes output oi (head oi % G, lane oi / G) of the workgroup's split.
fn store(oi: u32, acc: vec4<f32>, t: u32, hk: u32, split: u32) {
    let g = oi % G;
    let lane = oi / G;
    let h = hk * G + g;
    let mx = red_m[g * S];
    let sum = red_l[g * S];
    if (params.n_splits == 1u) {
        let inv = select(0.0, 1.0 / sum, sum > 0.0);
        o[params.o_offset + t * params.o_stride + h * D4 + lane] = acc * inv;
#if Q8_OUT
        qs[g * D4 + lane] = acc * inv; // for the rounding after the stores (Q is no longer read)
#endif
    } else {
        let pb = ((t * params.n_head + h) * params.n_splits + split) * (D4 + 1u);
        if (lane == 0u) {
            part[pb] = vec4<f32>(mx, sum, 0.0, 0.0);
        }
        part[pb + 1u + lane] = acc;
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let split = wg.x;
    let hk = wg.y;
    let t = wg.z;
    let nv = params.pos0 + t + 1u;
    let c0 = max(params.base + split * params.chunk, first_cell(t));
    let c1 = min(params.base + (split + 1u) * params.chunk, nv);
    let n = select(0u, c1 - c0, c1 > c0); // empty for a split outside this token's range

#if ROPE
    let pos = params.pos0 + t;
    if (pos >= c0 && pos < c1) { // this split holds the token's cell: its K and V head hk into the caches
        let cell = pos * params.kv_stride + hk * D4;
        for (var l = lid; l < D4; l += WG) {
            kc[params.k_offset + cell + l] = cache_quad(rope_quad(params.k_src + hk * HEAD_DIM, pos, l));
            let vb = params.v_src + hk * HEAD_DIM + 4u * l;
            vc[params.v_offset + cell + l] = cache_quad(vec4<f32>(rope_src(0u, vb), rope_src(0u, vb + 1u),
                                                                  rope_src(0u, vb + 2u), rope_src(0u, vb + 3u)));
        }
    }
    storageBarrier();
    let qe = (params.q_offset + t * params.q_stride) * 4u + hk * G * HEAD_DIM; // first element of the group
    for (var i = lid; i < GD; i += WG) {
        qs[i] = (rope_quad(qe + (i / D4) * HEAD_DIM, pos, i % D4) * params.q_scale) * params.scale;
    }
#else
    let qb = params.q_offset + t * params.q_stride + hk * GD;
    for (var i = lid; i < GD; i += WG) {
        qs[i] = q[qb + i] * params.scale;
    }
#endif
    workgroupBarrier();

    // scores, and this invocation's running max and sum
    let g = lid % G;
    let slot = lid / G;
    let d4 = opaque(D4);
    var m = NEG;
    var l = 0.0;
    if (slot < S) {
        for (var j = slot; j < n; j += S) {
            let kb = params.k_offset + (c0 + j) * params.kv_stride + hk * HW;
            var s = 0.0;
            for (var d = 0u; d < d4; d += KB) {
                var kq: array<KvQuad, KB>;
                for (var u = 0u; u < KB; u++) {
                    kq[u] = k_raw(kb, d + u);
                }
                for (var u = 0u; u < KB; u++) {
                    s += dot(qs[g * D4 + d + u], quad(kq[u]));
                }
            }
            let x = capped(s);
            ps[g * CH + j] = x;
            let mn = max(m, x);
            l = l * ex(m - mn) + ex(x - mn);
            m = mn;
        }
        red_m[g * S + slot] = m;
        red_l[g * S + slot] = l;
    }
    // merge the slots of each head (S need not be a power of two)
    var half = 1u;
    while (half < S) {
        half <<= 1u;
    }
    for (var st = opaque(half) / 2u; st > 0u; st >>= 1u) {
        workgroupBarrier();
        if (slot < st && slot + st < S) {
            let ma = red_m[g * S + slot];
            let mb = red_m[g * S + slot + st];
            let mn = max(ma, mb);
            red_l[g * S + slot] = red_l[g * S + slot] * ex(ma - mn) + red_l[g * S + slot + st] * ex(mb - mn);
            red_m[g * S + slot] = mn;
        }
    }
    workgroupBarrier();
    if (slot < S) {
        let mx = red_m[g * S];
        for (var j = slot; j < n; j += S) {
            ps[g * CH + j] = ex(ps[g * CH + j] - mx);
        }
    }
    workgroupBarrier();

#if GROUP * HEAD_DIM / 4 >= WG_SIZE
    for (var oi = lid; oi < GD; oi += WG) {
        store(oi, v_sum(oi, 0u, 1u, n, c0, hk), t, hk, split);
    }
#else
    let cg = lid / GD;
    var acc = vec4<f32>(0.0);
    if (cg < CG) {
        acc = v_sum(lid % GD, cg, CG, n, c0, hk);
    }
    red_v[lid] = acc;
    workgroupBarrier();
    if (lid < GD) {
        for (var c = 1u; c < CG; c++) {
            acc += red_v[c * GD + lid];
        }
        store(lid, acc, t, hk, split);
    }
#endif
#if Q8_OUT
    // one split: the group's normalised outputs (in qs) rounded to Q8_0, a block of 32 per invocation
    workgroupBarrier();
    if (params.n_splits == 1u) {
        const BPH: u32 = D4 / 8u; // blocks per head
        for (var b = lid; b < G * BPH; b += WG) {
            let xb = b * 8u; // its first vec4 in qs: head b / BPH
            let amax = actq_amax(xb);
            let sc = actq_scale_of(amax);
            let hb = (hk * G + b / BPH) * D4 + (b % BPH) * 8u; // its first vec4 in the token's row
            var sum = 0;
            for (var u = 0u; u < 8u; u++) {
                let qi = actq_quant4(qs[xb + u], sc);
                sum += qi.x + qi.y + qi.z + qi.w;
                qout[hb + u] = pack4xI8(qi);
            }
            let gw = actq_group_words(sc, amax, sum);
            let info = params.n_head * D4 + 2u * (hb / 8u);
            qout[info] = gw.x;
            qout[info + 1u] = gw.y;
        }
    }
#endif
}
