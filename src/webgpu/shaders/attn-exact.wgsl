// Attention with the CPU engine's bits (src/cpu/engine-ops.c op_attn, ggml's flash_attn_ext_f16_one_chunk):
// for each (query token, head), over the cells it sees in order,
//     s = dot(k, q) * scale              (f32 cache: lw__cpu_dot_f32's 4 x 16 FMA lanes and its tail;
//                                         f16 cache: q rounded to f16, lw__cpu_dot_f16's lanes, D % 64 == 0)
//     s > M:  M = s, ms = expf(Mold - M), V *= ms, vs = 1      else:  vs = expf(s - M)
//     V = fmaf(v, vs, V)                 (f16 cache: V held in f16, rounded after each step)
//     S = S * ms + vs                    (not fused)
// and y = V * (1 / S). expf is musl's (expf-musl.wgsl), the libm of the wasm build.
// The recurrence is sequential per row, but only its cheap parts need to be: per chunk of CH cells the scores
// are computed in parallel (one cell per invocation), invocation 0 runs the running maximum (a compare per
// cell), the exps run in parallel from it, then invocation 0 chains S while every invocation chains V for
// its own dimensions (one FMA per cell). Where time goes: the exps (software double arithmetic) and the
// per-cell FMA chains; much slower than attn-decode.wgsl's split-KV sums, so runners use it where the CPU's
// bits are wanted (CPU adapters by default).
// Defines (attn-common.wgsl): HEAD_DIM, GROUP, KV_F16, WG_SIZE (FMAs through ops-common.wgsl's fma_x: in
// integers on CPU adapters). Bindings and parameters: those of the family (binding 4, the split scratch,
// unused). Dispatch: (n_head, n_tokens, 1) workgroups.
#include "attn-common.wgsl"
// (not for a Q8_0 / Q4_0 cache: the CPU reads one in its flash-attention order, which this kernel does not
// follow; runners take DECODE / PREFILL there, kernel-attn.c refuses the variant)
#if KV_Q8 || KV_Q4
#error attn-exact: no Q8_0 / Q4_0 cache
#endif
#include "numerics.wgsl"
#include "expf-musl.wgsl"
#if KV_F16 && HEAD_DIM % 64 != 0
#error attn-exact.wgsl: an f16 cache needs a head dim that is a multiple of 64 (the CPU's tail sums in double)
#endif

const CH: u32 = 256u;                     // cells per chunk
const QPI: u32 = (D4 + WG - 1u) / WG;       // quads of dimensions per invocation

var<workgroup> qv: array<f32, HEAD_DIM>; // q (f16 cache: rounded to f16)
var<workgroup> sc: array<f32, CH>;       // the chunk's scores
var<workgroup> mprev: array<f32, CH>;    // the running maximum before each cell
var<workgroup> ems: array<f32, CH>;      // ms of a cell that raised the maximum, else -1
var<workgroup> evs: array<f32, CH>;      // vs of each cell
var<workgroup> s_final: f32;             // S after the last cell

// Element e of cell `cell`'s K row of KV head hk.
fn k_at(cell: u32, hk: u32, e: u32) -> f32 {
    return quad(kc[params.k_offset + cell * params.kv_stride + hk * D4 + e / 4u])[e % 4u];
}

// The CPU's dot of K row (cell, hk) with q: 4 x 16 lanes of fmaf over blocks of 64 elements, reduced as
// ggml's GGML_F32x16_REDUCE; then (f32) the compiled tail: blocks of 16 and 8 products rounded and added in
// order, fmaf for the last < 8 (no tail for f16: D % 64 == 0).
fn score(cell: u32, hk: u32, z: u32) -> f32 {
    let np = HEAD_DIM & ~63u;
    var t: array<f32, 16>; // lane l of (s0 + s2) + (s1 + s3)
    for (var l = 0u; l < 16u; l++) {
        var s = vec4<f32>(0.0);
        for (var i = 0u; i < np; i += 64u) {
            for (var j = 0u; j < 4u; j++) {
                let e = i + 16u * j + l;
                s[j] = fma_x(k_at(cell, hk, e), qv[e], s[j]);
            }
        }
        t[l] = (s[0] + s[2]) + (s[1] + s[3]);
    }
    var b: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        b[i] = t[i] + t[i + 8u];
    }
    let c = vec4<f32>(b[0] + b[4], b[1] + b[5], b[2] + b[6], b[3] + b[7]);
    var sum = (c[0] + c[2]) + (c[1] + c[3]);
    var i = np;
    if (HEAD_DIM - np >= 16u) {
        for (; HEAD_DIM - i >= 16u; i += 16u) {
            for (var l = 0u; l < 16u; l++) {
                sum = sum + unfused(k_at(cell, hk, i + l) * qv[i + l], z);
            }
        }
    }
    if (HEAD_DIM - i >= 8u) {
        for (var l = 0u; l < 8u; l++) {
            sum = sum + unfused(k_at(cell, hk, i + l) * qv[i + l], z);
        }
        i += 8u;
    }
    for (; i < HEAD_DIM; i++) {
        sum = fma_x(k_at(cell, hk, i), qv[i], sum);
    }
    return sum;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let hk = h / G;
    let z = select(0u, 1u, params.n_tokens == 0u); // 0 at run time (n_tokens > 0), unknown to the compiler
    let qb = params.q_offset + t * params.q_stride + h * D4;
    for (var e = lid; e < HEAD_DIM; e += WG) {
        let v = q[qb + e / 4u][e % 4u];
#if KV_F16
        qv[e] = f16_round(v); // the CPU rounds q to f16 for its f16 dot
#else
        qv[e] = v;
#endif
    }
    // the CPU folds a soft-cap's divisor into the scale: s = c * tanh(s * (scale / c)) (tanh: WGSL's)
    let scale = select(params.scale, div_rn(params.scale, params.softcap), params.softcap != 0.0f);
    let lo = first_cell(t);
    let n_kv = params.pos0 + t + 1u;
    var vacc: array<vec4<f32>, QPI>; // V of quads lid, lid + WG, .. of the head
    var m = f32_from_bits(0xff800000u); // -inf: invocation 0's running maximum
    var s_sum = 0.0f;                   // invocation 0's S
    workgroupBarrier();
    for (var c0 = lo; c0 < n_kv; c0 += CH) {
        let n = min(CH, n_kv - c0);
        for (var j = lid; j < n; j += WG) {
            var s = score(c0 + j, hk, z) * scale;
            if (params.softcap != 0.0f) {
                s = params.softcap * tanh(clamp(s, -15.0, 15.0));
            }
            sc[j] = s;
        }
        workgroupBarrier();
        if (lid == 0u) {
            for (var j = 0u; j < n; j++) {
                mprev[j] = m;
                m = max(m, sc[j]);
            }
        }
        workgroupBarrier();
        for (var j = lid; j < n; j += WG) {
            let s = sc[j];
            let mp = mprev[j];
            if (s > mp) {
                ems[j] = expf_musl(mp - s); // -inf - s = -inf for the first cell: 0
                evs[j] = 1.0f;
            } else {
                ems[j] = -1.0f;
                evs[j] = expf_musl(s - mp);
            }
        }
        workgroupBarrier();
        if (lid == 0u) {
            for (var j = 0u; j < n; j++) {
                s_sum = unfused(s_sum * select(1.0f, ems[j], ems[j] >= 0.0f), z) + evs[j];
            }
        }
        for (var k = 0u; k < QPI; k++) {
            let d4 = lid + k * WG;
            if (d4 < D4) {
                var v = vacc[k];
                for (var j = 0u; j < n; j++) {
                    let vr = quad(vc[params.v_offset + (c0 + j) * params.kv_stride + hk * D4 + d4]);
                    for (var e = 0u; e < 4u; e++) {
                        var a = v[e];
                        if (ems[j] >= 0.0f) {
                            a = a * ems[j];
#if KV_F16
                            a = f16_round(a);
#endif
                        }
                        a = fma_x(vr[e], evs[j], a);
#if KV_F16
                        a = f16_round(a);
#endif
                        v[e] = a;
                    }
                }
                vacc[k] = v;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        s_final = s_sum;
    }
    workgroupBarrier();
    let s_inv = select(div_rn(1.0f, s_final), 0.0f, s_final == 0.0f);
    let ob = params.o_offset + t * params.o_stride + h * D4;
    for (var k = 0u; k < QPI; k++) {
        let d4 = lid + k * WG;
        if (d4 < D4) {
            o[ob + d4] = vacc[k] * s_inv;
        }
    }
}
