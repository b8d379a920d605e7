// Shared by the attention kernels (attn-decode.wgsl, attn-reduce.wgsl, attn-prefill.wgsl): the variant's
// constants, the parameter block (lw__gpu_attn_params in src/webgpu/kernels-attn.h), the common bindings
// and the KV cache readers.
//
// Defines: HEAD_DIM (D, a multiple of 4), GROUP (query heads per KV head), KV_F16 (1: the cache holds f16,
// read with unpack2x16float, no shader-f16 needed; 0: f32), KV_Q8 (1: the GPU's Q8_0 blocks of
// kernels-attn.h, 9 words per 32 elements; D a multiple of 32), KV_Q4 (1: the GPU's Q4_0 blocks, 5 words per 32
// elements; D a multiple of 32), WG_SIZE (invocations per workgroup).
// ROPE (attn-decode.wgsl only, 0 by default): binding 0 is the unrotated Q|K|V row of a one-token step and
// AttnParams carries that step's RoPE.
// Bindings (one layout for the three kernels, all storage read_write but the last): 0 Q (vec4<f32> rows),
// 1 K cache, 2 V cache, 3 output
// (vec4<f32> rows), 4 scratch for the split partials (vec4<f32>), 5 AttnParams (uniform).
// Cache layout (as the CPU engine's): cell p of a layer at k_offset + p * kv_stride quads (4 elements),
// KV head hk at + hk * HW in it (HW = D/4; Q8_0 / Q4_0: offsets in words, HW = D/32 blocks of 9 / 5 words). The
// kernels read quads through k_raw / v_raw and widen them with quad().

#pragma once
#include "common.wgsl"
#ifndef HEAD_DIM
#error attn: HEAD_DIM needed
#endif
#if HEAD_DIM <= 0 || HEAD_DIM % 4 != 0 || HEAD_DIM > 256
#error attn: HEAD_DIM must be a multiple of 4 up to 256
#endif
#ifndef GROUP
#error attn: GROUP needed
#endif
#ifndef KV_F16
#define KV_F16 1
#endif
#ifndef KV_Q8
#define KV_Q8 0
#endif
#ifndef KV_Q4
#define KV_Q4 0
#endif
#if (KV_Q8 || KV_Q4) && (KV_F16 || (KV_Q8 && KV_Q4) || HEAD_DIM % 32 != 0)
#error attn: a Q8_0 / Q4_0 cache is one type, not f16, and of head dims of multiples of 32
#endif
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#ifndef ROPE
#define ROPE 0
#endif
#if WG_SIZE <= 0 || (WG_SIZE & (WG_SIZE - 1)) != 0
#error attn: WG_SIZE must be a power of two
#endif

const D4: u32 = HEAD_DIM / 4;  // vec4s per head
const G: u32 = GROUP;          // query heads per KV head
const WG: u32 = WG_SIZE;       // invocations per workgroup
const NEG: f32 = -3.0e38;      // score of a masked cell / max of no cell
const SEEN: f32 = -1.0e38;     // scores above this are real

struct AttnParams {
    n_tokens: u32,  // query tokens of the call
    pos0: u32,      // cache position of the first (token t sees cells lo(t) .. pos0 + t)
    n_head: u32,    // query heads
    swa: u32,       // sliding window in cells (0: none)
    q_offset: u32,  // Q's first row in its binding, vec4 units
    q_stride: u32,  // from one token's Q row to the next, vec4 units
    o_offset: u32,  // output's first row, vec4 units
    o_stride: u32,  // from one token's output row to the next, vec4 units
    k_offset: u32,  // K cache of the layer, quads
    v_offset: u32,  // V cache of the layer, quads
    kv_stride: u32, // quads per cell
    n_splits: u32,  // decode: splits per (token, head); 1: output written directly
    base: u32,      // decode: first cell of split 0
    chunk: u32,     // decode: cells per split
    scale: f32,     // score scale
    softcap: f32,   // soft-cap c (0: none)
#if ROPE
    // attn-decode.wgsl ROPE=1: the step's RoPE (rope-common.wgsl's names; pos0 above is the step's)
    n_rot: u32,       // rotated elements per head
    neox: u32,        // 1: NEOX pairs (p, p + n_rot / 2); 0: NORMAL (2p, 2p + 1)
    has_ff: u32,      // 1: frequency factors in ff; 2: ff is the host's sin/cos table
    ff_offset: u32,   // first factor / table entry of the step
    theta_scale: f32, // freq_base^(-2 / n_rot)
    freq_scale: f32,
    ext_factor: f32,  // YaRN mix (0: off)
    mscale: f32,      // sin/cos magnitude
    corr0: f32,       // YaRN correction dims
    corr1: f32,
    q_scale: f32,     // the rotated Q times this (a folded SCALE node; 1: none), then times scale
    k_src: u32,       // element of the token's K row in binding 0 (Q's row at q_offset)
    v_src: u32,       // element of its V row
    pad0: u32,
    pad1: u32,
    pad2: u32,
#endif
}

#if KV_Q8
alias KvWord = u32;        // the cache's element: a word of 4 quants or a block's scale
alias KvQuad = vec2<u32>;  // 4 quants and their block's scale bits, as loaded
const HW: u32 = HEAD_DIM / 32 * 9; // words per head in a cell
fn quad(w: vec2<u32>) -> vec4<f32> {
    // the bytes sign-extended by shifts (no packed-integer feature needed), times the scale (the CPU's q * d)
    let b = vec4<i32>(bitcast<i32>(w.x)) << vec4<u32>(24u, 16u, 8u, 0u);
    return vec4<f32>(b >> vec4<u32>(24u)) * bitcast<f32>(w.y);
}
#elif KV_Q4
alias KvWord = u32;        // the cache's element: a word of 8 quants or a block's scale
alias KvQuad = vec2<u32>;  // 4 quants in the low 16 bits and their block's scale bits (k_raw shifts them down)
const HW: u32 = HEAD_DIM / 32 * 5; // words per head in a cell
fn quad(w: vec2<u32>) -> vec4<f32> {
    // the nibbles by one vector shift, (q - 8) exact in f32, times the scale (the CPU's (q - 8) * d)
    let n = (vec4<u32>(w.x) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    return (vec4<f32>(n) - vec4<f32>(8.0)) * bitcast<f32>(w.y);
}
#elif KV_F16
alias KvWord = vec2<u32>;
alias KvQuad = vec2<u32>; // 4 halves
const HW: u32 = HEAD_DIM / 4;
fn quad(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
#else
alias KvWord = vec4<f32>;
alias KvQuad = vec4<f32>;
const HW: u32 = HEAD_DIM / 4;
fn quad(w: vec4<f32>) -> vec4<f32> {
    return w;
}
#endif

// Q and the caches are only read, but bound read_write like every activation and cache binding of the
// kernel library (kernels-ops.h): WebGPU forbids one buffer bound read-only and writable in one dispatch,
// and the runner's activation arena backs Q and the output alike.
@group(0) @binding(0) var<storage, read_write> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> kc: array<KvWord>;
@group(0) @binding(2) var<storage, read_write> vc: array<KvWord>;
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> part: array<vec4<f32>>;
@group(0) @binding(5) var<uniform> params: AttnParams;

// Quad d (elements 4d .. 4d + 3) of the K or V head whose first unit is at (k_offset or v_offset + cell *
// kv_stride + hk * HW), as loaded (widen with quad()).
fn k_raw(at: u32, d: u32) -> KvQuad {
#if KV_Q8
    let b = at + (d >> 3u) * 9u; // its block
    return vec2<u32>(kc[b + (d & 7u)], kc[b + 8u]);
#elif KV_Q4
    let b = at + (d >> 3u) * 5u; // its block; the quad is half (d & 1) of quant word (d & 7) / 2
    return vec2<u32>(kc[b + ((d & 7u) >> 1u)] >> ((d & 1u) << 4u), kc[b + 4u]);
#else
    return kc[at + d];
#endif
}
fn v_raw(at: u32, d: u32) -> KvQuad {
#if KV_Q8
    let b = at + (d >> 3u) * 9u;
    return vec2<u32>(vc[b + (d & 7u)], vc[b + 8u]);
#elif KV_Q4
    let b = at + (d >> 3u) * 5u;
    return vec2<u32>(vc[b + ((d & 7u) >> 1u)] >> ((d & 1u) << 4u), vc[b + 4u]);
#else
    return vc[at + d];
#endif
}

// exp that never sees an argument below -80 (masked scores and the first max are near -3e38; some
// implementations are not exact that far out). exp(-80) = 1.8e-35 adds nothing to a real sum.
fn ex(x: f32) -> f32 {
    return exp(max(x, -80.0));
}

// The soft-capped score of a scaled dot product (tanh's argument clamped: tanh(15) is 1 in f32, and some
// implementations overflow on exp(2x) further out).
fn capped(s: f32) -> f32 {
    if (params.softcap != 0.0) {
        return params.softcap * tanh(clamp(s / params.softcap, -15.0, 15.0));
    }
    return s;
}

// n, read at run time: loops bounded by it are not unrolled in full. CPU drivers (llvmpipe) take seconds to
// compile a fully unrolled head-dim or tile loop; GPU compilers still unroll such loops partly.
fn opaque(n: u32) -> u32 {
    return select(n, 0u, params.n_tokens == 0u); // n_tokens is never 0
}

// First cell token t sees (the sliding window), and one past its last.
fn first_cell(t: u32) -> u32 {
    let nv = params.pos0 + t + 1u;
    return select(0u, nv - params.swa, params.swa > 0u && nv > params.swa);
}
