// Top-k selection on the GPU for sampling (k = 1: greedy argmax), so decode reads back a token id (or k
// candidates) instead of n_vocab logits. Order: larger value first, ties to the lower id (as the CPU
// sampler's sort); NaN values are never chosen. Two passes of this template:
//   pass 1 (PAIRS=0): workgroup g takes `chunk` logits starting at g * chunk and writes its k best as
//                     (id, value) pairs at out_offset + g * k;
//   pass 2 (PAIRS=1): one workgroup takes the n = groups * k pairs of pass 1 and writes the final k pairs,
//                     best first, at out_offset (for k = 1 the first word is the token id).
// Each invocation holds PER inputs in registers; k rounds each pick the best input not taken yet from a
// tournament tree in workgroup memory (only the winner's path is recomputed per round). A workgroup with fewer than k inputs pads with (0xffffffff, -inf).
// With SAMPLE=1 (pass 2 only) the k winners stay in workgroup memory and invocation 0 draws one of them by
// the CPU sampler's chain (src/sample/sample.c: top-p on the softmax of the logits, min-p, temperature, then
// the draw with the uniform number u the host passes), writing the single pair (id, value) at out_offset:
// decode still reads back 4 bytes. The draw is serial (k <= SAMPLE_MAX_K candidates, sums in candidate
// order), so kernel-ops-sample.c's scalar reference follows it step by step.
// With MASK=1 (pass 1 only) a grammar's allowed-token bitmask (bit i of word i / 32: id i allowed) limits
// pass 1 to the allowed ids: a disallowed id is absent, as the padding, rather than -inf, so it can never
// tie with an allowed -inf logit and be taken for the lower id (the CPU sampler with a grammar sees only the
// allowed ids as candidates). Only the allowed ids' pairs reach pass 2 (argmax or draw): a constrained step
// reads back the 4-byte id as a free one. The mask is written by the host per step into a buffer made at load.
// Defines: PAIRS (0/1), WG_SIZE (power of two, default 256), PER (inputs per invocation, 1..32, default
// 16), SAMPLE (0/1, needs PAIRS), MASK (0/1, needs PAIRS=0); chunk <= WG_SIZE * PER.
// Bindings: 0 input (read_write: f32 logits as u32 bits, or pairs), 1 output pairs (read_write, u32),
// 2 params, 3 the mask (MASK=1: read, ceil(n / 32) words). Dispatch: (groups_x, ceil(groups / groups_x), 1).
#include "ops-common.wgsl"
#ifndef PAIRS
#define PAIRS 0
#endif
#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#ifndef PER
#define PER 16
#endif
#if WG_SIZE <= 0 || (WG_SIZE & (WG_SIZE - 1)) != 0
#error topk.wgsl: WG_SIZE must be a power of two
#endif
#if PER < 1 || PER > 32
#error topk.wgsl: PER must be 1..32
#endif
#ifndef SAMPLE
#define SAMPLE 0
#endif
#if SAMPLE && !PAIRS
#error topk.wgsl: SAMPLE draws in pass 2 (PAIRS=1)
#endif
#ifndef MASK
#define MASK 0
#endif
#if MASK && PAIRS
#error topk.wgsl: MASK filters the logits of pass 1 (PAIRS=0)
#endif

struct TopkParams {
    n: u32,          // inputs (logits, or pairs for pass 2)
    k: u32,          // candidates to keep (1..)
    in_offset: u32,  // first input (element or pair) in the input binding
    out_offset: u32, // first output pair in the output binding
    chunk: u32,      // inputs per workgroup
    groups: u32,     // workgroups of this pass
    groups_x: u32,   // workgroups along x of the grid
    pad: u32,
#if SAMPLE
    inv_temp: f32,   // 1 / temperature
    top_p: f32,      // nucleus mass (used when flags has SAMPLE_TOP_P)
    min_p_log: f32,  // log(min_p) (used when flags has SAMPLE_MIN_P)
    u: f32,          // the uniform random number in [0, 1) of this draw
    flags: u32,      // SAMPLE_GREEDY | SAMPLE_TOP_P | SAMPLE_MIN_P
    pad1: u32,
    pad2: u32,
    pad3: u32,
#endif
}

@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> params: TopkParams;
#if MASK
@group(0) @binding(3) var<storage, read> mask: array<u32>;
#endif

var<workgroup> leaf_v: array<f32, WG_SIZE>;       // each invocation's best input not taken: value
var<workgroup> leaf_i: array<u32, WG_SIZE>;       // and id
var<workgroup> tree: array<u32, 2 * WG_SIZE>;     // tournament tree of leaf indices (node 1: the root)

const NONE: u32 = 0xffffffffu;

#if SAMPLE
const SAMPLE_MAX_K: u32 = 256u;   // LW_GPU_TOPK_MAX
const SAMPLE_GREEDY: u32 = 1u;    // take the best candidate (temperature <= 0)
const SAMPLE_TOP_P: u32 = 2u;     // top-p applies (top_p < 1)
const SAMPLE_MIN_P: u32 = 4u;     // min-p applies (min_p > 0)
var<workgroup> cand_v: array<f32, SAMPLE_MAX_K>; // the k winners, best first: values
var<workgroup> cand_i: array<u32, SAMPLE_MAX_K>; // and ids

// Weight of candidate r at inverse temperature s, relative to the best: exp((v_r - v_0) * s), exactly 1 for
// a tie with the best (so a temperature near 0 splits the draw evenly between tied best candidates instead
// of computing 0 * inf).
fn weight(r: u32, s: f32) -> f32 {
    let d = cand_v[r] - cand_v[0];
    return select(exp(d * s), 1.0, d == 0.0);
}

// Index of the candidate drawn among the first k (sorted best first), as lw_sampler_sample after its top-k:
// top-p keeps the shortest prefix whose softmax mass (temperature 1) reaches top_p, min-p the candidates
// within log(min_p) of the best, then the draw from the softmax at the temperature: the first candidate
// whose cumulative weight exceeds u * total.
fn draw(k: u32) -> u32 {
    if ((params.flags & SAMPLE_GREEDY) != 0u || k <= 1u) {
        return 0u;
    }
    var n = k;
    if ((params.flags & SAMPLE_TOP_P) != 0u) {
        var total = 0.0;
        for (var r = 0u; r < n; r++) {
            total += weight(r, 1.0);
        }
        let goal = params.top_p * total;
        var cum = 0.0;
        for (var r = 0u; r < k; r++) {
            cum += weight(r, 1.0);
            if (cum >= goal) {
                n = r + 1u;
                break;
            }
        }
    }
    if ((params.flags & SAMPLE_MIN_P) != 0u) {
        let cut = cand_v[0] + params.min_p_log;
        var keep = 1u;
        while (keep < n && cand_v[keep] >= cut) {
            keep++;
        }
        n = keep;
    }
    var total = 0.0;
    for (var r = 0u; r < n; r++) {
        total += weight(r, params.inv_temp);
    }
    let goal = params.u * total;
    var cum = 0.0;
    for (var r = 0u; r < n; r++) {
        cum += weight(r, params.inv_temp);
        if (goal < cum) {
            return r;
        }
    }
    return n - 1u; // rounding left u * total at the total
}
#endif

// Whether (va, ia) comes before (vb, ib): larger value, then lower id.
fn better(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    return va > vb || (va == vb && ia < ib);
}

// The better of two leaves (by index).
fn pick(a: u32, b: u32) -> u32 {
    return select(a, b, better(leaf_v[b], leaf_i[b], leaf_v[a], leaf_i[a]));
}

// Stores invocation lid's best input not taken (or (-inf, NONE)) as its leaf.
fn local_best(lid: u32, vals: ptr<function, array<f32, PER>>, ids: ptr<function, array<u32, PER>>, taken: u32) {
    var bv = f32_from_bits(0xff800000u);
    var bi = NONE;
    for (var j = 0u; j < PER; j++) {
        if ((taken & (1u << j)) == 0u && better((*vals)[j], (*ids)[j], bv, bi)) {
            bv = (*vals)[j];
            bi = (*ids)[j];
        }
    }
    leaf_v[lid] = bv;
    leaf_i[lid] = bi;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wg.x + wg.y * params.groups_x;
    if (g >= params.groups) {
        return; // uniform across the workgroup
    }
    let neg_inf = f32_from_bits(0xff800000u);
    let base = g * params.chunk;
    let end = min(params.n, base + params.chunk);
    var vals: array<f32, PER>;
    var ids: array<u32, PER>;
    var taken = 0u; // bit j: input j taken (or absent)
    for (var j = 0u; j < PER; j++) {
        let idx = base + j * WG_SIZE + lid;
        vals[j] = neg_inf;
        ids[j] = NONE;
        var present = idx < end && j * WG_SIZE + lid < params.chunk;
#if MASK
        if (present) {
            present = ((mask[idx >> 5u] >> (idx & 31u)) & 1u) != 0u;
        }
#endif
        if (present) {
#if PAIRS
            let p = 2u * (params.in_offset + idx);
            ids[j] = src[p];
            vals[j] = bitcast<f32>(src[p + 1u]);
#else
            ids[j] = idx;
            vals[j] = bitcast<f32>(src[params.in_offset + idx]);
#endif
        } else {
            taken |= 1u << j;
        }
    }
    // Each invocation's best input not taken yet is a leaf of a tournament tree in workgroup memory
    // (node n's winner is the leaf index tree[n]; leaves WG_SIZE + lid). A round reads the root, and only
    // the winning leaf's invocation refreshes its leaf and the log2(WG_SIZE) nodes above it: two barriers
    // per round instead of a full reduction.
    local_best(lid, &vals, &ids, taken);
    tree[WG_SIZE + lid] = lid;
    for (var s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if (lid < s) {
            let n = s + lid;
            tree[n] = pick(tree[2u * n], tree[2u * n + 1u]);
        }
    }
    for (var r = 0u; r < params.k; r++) {
        workgroupBarrier();
        let w = tree[1];
        let wv = leaf_v[w];
        let wi = leaf_i[w];
        workgroupBarrier(); // everyone has the winner before its invocation updates the tree
        if (lid == 0u) {
#if SAMPLE
            cand_v[r] = wv;
            cand_i[r] = wi;
#else
            let o = 2u * (params.out_offset + g * params.k + r);
            dst[o] = wi;
            dst[o + 1u] = bitcast<u32>(wv);
#endif
        }
        if (lid == w && wi != NONE) {
            for (var j = 0u; j < PER; j++) {
                if (ids[j] == wi) {
                    taken |= 1u << j;
                }
            }
            local_best(lid, &vals, &ids, taken);
            var n = (WG_SIZE + lid) >> 1u;
            while (n >= 1u) {
                tree[n] = pick(tree[2u * n], tree[2u * n + 1u]);
                n >>= 1u;
            }
        }
    }
#if SAMPLE
    if (lid == 0u) { // only invocation 0 wrote the candidates: no barrier needed
        let r = draw(min(params.k, SAMPLE_MAX_K));
        dst[2u * params.out_offset] = cand_i[r];
        dst[2u * params.out_offset + 1u] = bitcast<u32>(cand_v[r]);
    }
#endif
}
