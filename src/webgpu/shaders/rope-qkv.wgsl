// The attention block's epilogue after the Q/K/V projections in ONE dispatch (instead of ROPE(Q), ROPE(K),
// KV_STORE(K), KV_STORE(V)): Q rotated into q_out (f32), K rotated straight into the K cache and V copied
// into the V cache, both caches f16 (KV_F16=1: rounded to nearest even, packed two per word) or f32. Row
// r is at position pos0 + r and goes to cache row r of kc/vc (kc_offset, vc_offset: the element of cell
// pos0, as the CPU stores row r at cell pos0 + r). Q and K share the RoPE parameters (rope-common.wgsl)
// and head_dim; K and V have n_head_kv heads.
// Work items: per row, n_head * head_dim / 2 Q pairs, then n_head_kv * head_dim / 2 K items, then as many
// V items (two adjacent elements each).
// QKV_ONE=1 reads q, k and v from binding 0 (a fused QKV projection: rows [q | k | v], k_offset/v_offset
// and the strides locate them), for steps where their ranges interleave.
// q_out is the rotated q times q_scale (1: as ROPE; else also the SCALE node some models apply to the
// rotated Q, e.g. phi3 and gemma: one f32 product of the rotated value, the bits of the two ops).
// QK_NORM=1 (with QKV_ONE) first RMS-normalises q and k per head (qwen3, gemma3: x / sqrt(mean(x^2) + qk_eps)
// times the head_dim weights qn / kn, serially per head; EXACT_NORM=1, CPU adapters: the CPU's bits as
// rms-norm.wgsl, rms-exact.wgsl; EXACT_NORM=0, GPUs: an f32 sum and inverseSqrt, within a few ulp).
// Q8_CACHE=1 / Q4_CACHE=1: the caches hold the GPU's Q8_0 / Q4_0 blocks (kernels-attn.h), quantized as
// kv-store.wgsl does (kv-quant.wgsl: the CPU's quantize_row_q8_0 / q4_0 of the rotated K and of V): one
// work item per 32-element block of K or V instead of per pair, rotating (K) or reading (V) its 32 values
// first; kc_offset / kc_stride stay elements (multiples of 32).
// QKV_BIAS=1 (with QKV_ONE) adds the biases qkvb (laid out as one row of binding 0: [bq | bk | bv]) to q, k
// and v first (qwen2: the ADD node before the ROPEs; one f32 add each, the same bits).
// Defines: WG_SIZE (default 64), KV_F16 (0/1), Q8_CACHE (0/1), Q4_CACHE (0/1), QKV_ONE (0/1), QK_NORM (0/1), EXACT_NORM (0/1, default 1),
// QKV_BIAS (0/1).
// Bindings: 0 q (rw f32), 1 ff (read f32), 2 q_out (rw f32), 3 k (rw f32), 4 kc (rw: u32 halves or f32),
// 5 v (rw f32), 6 vc (rw, as kc), 7 params; QKV_ONE: 0 qkv, 1 ff, 2 q_out, 3 kc, 4 vc, 5 params. Dispatch: (groups_x, ceil(groups / groups_x), 1), groups =
// ceil(rows * (n_head + 2 n_head_kv) * head_dim / 2 / WG_SIZE) (quantized caches: ceil(rows * (n_head *
// head_dim / 2 + 2 n_head_kv * head_dim / 32) / WG_SIZE)).
#include "ops-common.wgsl"
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#ifndef KV_F16
#define KV_F16 0
#endif
#ifndef QKV_ONE
#define QKV_ONE 0
#endif
#include "kv-quant.wgsl"
#define KV_QUANT (Q8_CACHE || Q4_CACHE)
#if KV_QUANT && (KV_F16 || (Q8_CACHE && Q4_CACHE))
#error rope-qkv.wgsl: one cache type
#endif
#ifndef QK_NORM
#define QK_NORM 0
#endif
#if QK_NORM && !QKV_ONE
#error rope-qkv.wgsl: QK_NORM needs QKV_ONE
#endif
#ifndef EXACT_NORM
#define EXACT_NORM 1
#endif
#ifndef QKV_BIAS
#define QKV_BIAS 0
#endif
#if QKV_BIAS && (!QKV_ONE || QK_NORM)
#error rope-qkv.wgsl: QKV_BIAS needs QKV_ONE and no QK_NORM
#endif

struct QkvParams {
    n_head: u32,       // Q heads per row
    head_dim: u32,     // elements per head (even)
    n_rot: u32,        // rotated elements per head (even, <= head_dim)
    neox: u32,         // 1: NEOX pairs; 0: NORMAL pairs
    rows: u32,         // rows (tokens)
    pos0: u32,         // position of row 0
    x_offset: u32,     // Q: first element of q
    x_stride: u32,     // Q: elements between rows of q
    d_offset: u32,     // Q: first element of q_out
    d_stride: u32,     // Q: elements between rows of q_out
    ff_offset: u32,    // first frequency factor
    has_ff: u32,       // 1: divide each pair's angle by ff[p]; 2: ff is the host's sin/cos table
    theta_scale: f32,  // freq_base^(-2 / n_rot) (host powf, as the CPU)
    freq_scale: f32,   // ggml's freq_scale
    ext_factor: f32,   // YaRN mix (0: off)
    mscale: f32,       // sin/cos magnitude
    corr0: f32,        // YaRN correction dims
    corr1: f32,
    groups_x: u32,     // workgroups along x of the grid
    n_head_kv: u32,    // K and V heads per row
    k_offset: u32,     // first element of k
    k_stride: u32,     // elements between rows of k
    kc_offset: u32,    // element of row 0's cell in kc (even for f16)
    kc_stride: u32,    // elements between cache rows (n_head_kv * head_dim)
    v_offset: u32,     // first element of v
    v_stride: u32,     // elements between rows of v
    vc_offset: u32,    // element of row 0's cell in vc (even for f16)
    vc_stride: u32,    // elements between cache rows
    q_scale: f32,      // factor of q_out (1: plain ROPE)
    qk_eps: f32,       // QK_NORM: the norms' epsilon
    zero: u32,         // 0 (the Q4_0 quantizer's unfused() operand: a value the compiler cannot know)
    pad3: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> ff: array<f32>;
@group(0) @binding(2) var<storage, read_write> q_out: array<f32>;
#if KV_F16 || KV_QUANT
alias CacheWord = u32;
#else
alias CacheWord = f32;
#endif
#if QKV_ONE
@group(0) @binding(3) var<storage, read_write> kc: array<CacheWord>;
@group(0) @binding(4) var<storage, read_write> vc: array<CacheWord>;
@group(0) @binding(5) var<uniform> params: QkvParams;
#if QK_NORM
@group(0) @binding(6) var<storage, read> qn: array<f32>;
@group(0) @binding(7) var<storage, read> kn: array<f32>;
#endif
#if QKV_BIAS
@group(0) @binding(6) var<storage, read> qkvb: array<f32>;
var<private> row_base: u32; // element of this invocation's row start in binding 0 (row * x_stride)
#endif
#else
@group(0) @binding(3) var<storage, read_write> kx: array<f32>;
@group(0) @binding(4) var<storage, read_write> kc: array<CacheWord>;
@group(0) @binding(5) var<storage, read_write> vx: array<f32>;
@group(0) @binding(6) var<storage, read_write> vc: array<CacheWord>;
@group(0) @binding(7) var<uniform> params: QkvParams;
#endif

// K and V inputs: their own bindings, or binding 0.
fn k_in(i: u32) -> f32 {
#if QKV_ONE
    return x[i];
#else
    return kx[i];
#endif
}
fn v_in(i: u32) -> f32 {
#if QKV_BIAS
    return x[i] + qkvb[i - row_base];
#elif QKV_ONE
    return x[i];
#else
    return vx[i];
#endif
}

#if QK_NORM
var<private> nrm_base: u32;  // first element of this invocation's head
var<private> nrm_scale: f32; // 1 / sqrt(mean of its squares + eps)
#if EXACT_NORM
#include "rms-exact.wgsl"

// Sets the norm of the head of input `which` at element xb: the CPU's bits (rms-exact.wgsl), serially.
fn head_norm(which: u32, xb: u32) {
    var e_max = 1u;
    for (var e = 0u; e < params.head_dim; e++) {
        let v = x[xb + e];
        e_max = max(e_max, bitcast<u32>(v * v) >> 23u);
    }
    var acc = array<u32, LIMBS>();
    for (var e = 0u; e < params.head_dim; e++) {
        let v = x[xb + e];
        limbs_add_square(&acc, bitcast<u32>(v * v), e_max);
    }
    limbs_normalize(&acc);
    nrm_base = xb;
    nrm_scale = rms_scale(limbs_mean(acc, params.head_dim, e_max) + params.qk_eps);
}
#else
// Sets the norm of the head of input `which` at element xb: f32 sums of squares in two interleaved chains
// (head_dim is even), inverseSqrt.
fn head_norm(which: u32, xb: u32) {
    var acc = vec2<f32>(0.0f);
    for (var e = 0u; e < params.head_dim; e += 2u) {
        let v = vec2<f32>(x[xb + e], x[xb + e + 1u]);
        acc = fma(v, v, acc);
    }
    nrm_base = xb;
    nrm_scale = inverseSqrt((acc.x + acc.y) / f32(params.head_dim) + params.qk_eps);
}
#endif
#endif

// Element i of input `which`: 0 = q, 1 = k (QK_NORM: normalised, times the weight).
fn rope_src(which: u32, i: u32) -> f32 {
#if QK_NORM
    let v = x[i] * nrm_scale;
    if (which == 0u) {
        return v * qn[i - nrm_base];
    }
    return v * kn[i - nrm_base];
#elif QKV_BIAS
    return x[i] + qkvb[i - row_base];
#else
    if (which == 0u) {
        return x[i];
    }
    return k_in(i);
#endif
}

#include "rope-common.wgsl"

#if KV_QUANT
var<private> kvq_to_v: bool; // kvq_put's cache: V (else K)
fn kvq_put(w: u32, word: u32) {
    if (kvq_to_v) {
        vc[w] = word;
    } else {
        kc[w] = word;
    }
}
fn kvq_zero() -> u32 {
    return params.zero;
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let half_dim = params.head_dim / 2u;
    let q_items = params.n_head * half_dim;
#if KV_QUANT
    let kv_items = params.n_head_kv * (params.head_dim / 32u); // blocks
#else
    let kv_items = params.n_head_kv * half_dim;
#endif
    let per_row = q_items + 2u * kv_items;
    let i = (wg.x + wg.y * params.groups_x) * WG_SIZE + lid;
    if (i >= params.rows * per_row) {
        return;
    }
    let row = i / per_row;
#if QKV_BIAS
    row_base = row * params.x_stride;
#endif
    var j = i % per_row;
    let pos = params.pos0 + row;
    if (j < q_items) { // Q: one pair, f32 out
        let p = j % half_dim;
        let h = j / half_dim;
        let xb = params.x_offset + row * params.x_stride + h * params.head_dim;
        let db = params.d_offset + row * params.d_stride + h * params.head_dim;
#if QK_NORM
        head_norm(0u, xb);
#endif
        if (2u * p >= params.n_rot) {
            q_out[db + 2u * p] = rope_src(0u, xb + 2u * p) * params.q_scale;
            q_out[db + 2u * p + 1u] = rope_src(0u, xb + 2u * p + 1u) * params.q_scale;
            return;
        }
        let cs = rope_cs(pos, p);
        var ia = 2u * p;
        var ib = ia + 1u;
        if (params.neox != 0u) {
            ia = p;
            ib = p + params.n_rot / 2u;
        }
        let x0 = rope_src(0u, xb + ia);
        let x1 = rope_src(0u, xb + ib);
        let r0 = rope_rot0(x0, x1, cs);
        let r1 = rope_rot1(x0, x1, cs);
        q_out[db + ia] = r0 * params.q_scale;
        q_out[db + ib] = r1 * params.q_scale;
        return;
    }
    j -= q_items;
#if KV_QUANT
    let hb = params.head_dim / 32u; // blocks per head
    if (j < kv_items) { // K: a block rotated, then quantized into the cache
        let h = j / hb;
        let e0 = 32u * (j % hb);
        let xb = params.k_offset + row * params.k_stride + h * params.head_dim;
#if QK_NORM
        head_norm(1u, xb);
#endif
        // the block's elements in order; their pairs' angles walk p upwards (NORMAL: one per two elements,
        // NEOX: one per element, restarting at n_rot / 2), so theta is one product on from the last pair's
        // (rope_theta0) instead of p products and each pair's sin/cos is computed once
        var have = false;
        var pp = 0u;
        var theta = 0.0f;
        var cs = vec2<f32>(0.0f);
        let half_rot = params.n_rot / 2u;
        for (var e = 0u; e < 32u; e++) {
            let ee = e0 + e;
            if (ee >= params.n_rot) {
                kvq[e] = rope_src(1u, xb + ee);
                continue;
            }
            var p = ee / 2u;
            var ia = ee & ~1u;
            var ib = ia + 1u;
            if (params.neox != 0u) {
                p = select(ee - half_rot, ee, ee < half_rot);
                ia = p;
                ib = p + half_rot;
            }
            if (!have || p != pp) {
                if (have && p == pp + 1u) {
                    theta = theta * params.theta_scale;
                } else {
                    theta = rope_theta0(pos, p);
                }
                cs = rope_cs_at(pos, theta, p);
                have = true;
                pp = p;
            }
            let x0 = rope_src(1u, xb + ia);
            let x1 = rope_src(1u, xb + ib);
            kvq[e] = select(rope_rot1(x0, x1, cs), rope_rot0(x0, x1, cs), ee == ia);
        }
        kvq_to_v = false;
        kvq_store((params.kc_offset / 32u + row * (params.kc_stride / 32u) + j) * BLOCK_WORDS);
        return;
    }
    j -= kv_items; // V: a block quantized into the cache
    let src = params.v_offset + row * params.v_stride + 32u * j;
    for (var e = 0u; e < 32u; e++) {
        kvq[e] = v_in(src + e);
    }
    kvq_to_v = true;
    kvq_store((params.vc_offset / 32u + row * (params.vc_stride / 32u) + j) * BLOCK_WORDS);
}
#else
    if (j < kv_items) { // K: rotated into the cache
        let p = j % half_dim;
        let h = j / half_dim;
        let xb = params.k_offset + row * params.k_stride + h * params.head_dim;
        let cb = params.kc_offset + row * params.kc_stride + h * params.head_dim;
#if QK_NORM
        head_norm(1u, xb);
#endif
#if KV_F16
        var v0: f32;
        var v1: f32;
        if (params.neox == 0u && 2u * p < params.n_rot) { // one pair: one angle for both elements
            let cs = rope_cs(pos, p);
            let x0 = rope_src(1u, xb + 2u * p);
            let x1 = rope_src(1u, xb + 2u * p + 1u);
            v0 = rope_rot0(x0, x1, cs);
            v1 = rope_rot1(x0, x1, cs);
        } else {
            v0 = rope_elem(1u, xb, pos, 2u * p);
            v1 = rope_elem(1u, xb, pos, 2u * p + 1u);
        }
        kc[cb / 2u + p] = f16_bits_rne(v0) | (f16_bits_rne(v1) << 16u);
#else
        if (2u * p >= params.n_rot) {
            kc[cb + 2u * p] = rope_src(1u, xb + 2u * p);
            kc[cb + 2u * p + 1u] = rope_src(1u, xb + 2u * p + 1u);
            return;
        }
        let cs = rope_cs(pos, p);
        var ia = 2u * p;
        var ib = ia + 1u;
        if (params.neox != 0u) {
            ia = p;
            ib = p + params.n_rot / 2u;
        }
        let x0 = rope_src(1u, xb + ia);
        let x1 = rope_src(1u, xb + ib);
        kc[cb + ia] = rope_rot0(x0, x1, cs);
        kc[cb + ib] = rope_rot1(x0, x1, cs);
#endif
        return;
    }
    j -= kv_items; // V: two adjacent elements copied into the cache
    let e = 2u * j;
    let src = params.v_offset + row * params.v_stride + e;
    let dst = params.vc_offset + row * params.vc_stride + e;
#if KV_F16
    vc[dst / 2u] = f16_bits_rne(v_in(src)) | (f16_bits_rne(v_in(src + 1u)) << 16u);
#else
    vc[dst] = v_in(src);
    vc[dst + 1u] = v_in(src + 1u);
#endif
}
#endif
