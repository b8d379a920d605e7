// Matrix-vector product y = W x with the CPU engine's bits, for the formats whose CPU dot is "exact integer
// sums per super-block of 256, then a short float chain over the super-blocks" (src/cpu/quant-dot*.c):
//   TQ1_0, TQ2_0   sumf += (float)S * (d_w * d_x)                     (generic order)
//   IQ1_S, IQ1_M   sumf += (d_w * d_x) * ((float)S / 8)               (generic order; dequant-iq1.wgsl)
//   Q2_K, Q4_K     acc = fmaf(S, d_w d_x, acc), accm = fmaf(M, dmin_w d_x, accm); acc - accm
//                  (llama.cpp's repacked gemv order: weights of a multiple of 8 rows, not the tied table)
// with S = sum over the block of sc * q_w * q_x and M = sum of mn * q_x (dqx_chunk). The float-summing
// kernel (matvec.wgsl) adds the same products in another order, so its outputs differ from the CPU's by an
// ulp now and then; in a model such a difference can flip a later 8-bit activation rounding and then stay in
// the KV cache. Here integer sums are exact in any order, so the invocations share them freely (workgroup
// atomics), and one invocation per row runs the float chain in the CPU's order.
//
// Per super-block the workgroup first rounds x to Q8_K as the CPU does (m = the first element of largest
// |x|, s = -127 / m, q = min(127, round(s x)), d_x = 1 / s) into workgroup memory, once for all ROWS rows.
// Where time goes: four barriers per super-block; fine for K of a few thousand (tiny rows here), not tuned
// for speed.
//
// Defines: WEIGHT_TYPE (one of the formats above), WG_SIZE (a power of two), ROWS (rows per workgroup,
// 1..16), X_GLU (matvec-common.wgsl). Bindings, parameters and dispatch: those of matvec.wgsl.
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matvec-exact.wgsl needs WEIGHT_TYPE
#endif
#ifndef WG_SIZE
#define WG_SIZE 64
#endif
#ifndef ROWS
#define ROWS 1
#endif
#if F16
#error matvec-exact.wgsl: f32 only
#endif
#if WEIGHT_TYPE == TYPE_TQ1_0 || WEIGHT_TYPE == TYPE_TQ2_0
#define TAIL 1
#elif WEIGHT_TYPE == TYPE_IQ1_S || WEIGHT_TYPE == TYPE_IQ1_M
#define TAIL 2
#elif WEIGHT_TYPE == TYPE_Q2_K || WEIGHT_TYPE == TYPE_Q4_K
#define TAIL 3
#else
#error matvec-exact.wgsl: no CPU order for this weight format
#endif

#include "matvec-common.wgsl"
#include "dequant.wgsl"
#include "numerics.wgsl"

var<workgroup> xq: array<vec4<i32>, 64>;          // the super-block's Q8_K codes
var<workgroup> x_amax: atomic<u32>;               // bits of its largest |x| (non-negative floats order as u32)
var<workgroup> x_first: atomic<u32>;              // 256 - index of the first element of that magnitude
var<workgroup> sums: array<atomic<i32>, ROWS * 2>; // row r's S at 2r, M at 2r + 1

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = (wg.x + wg.y * params.groups_x) * ROWS;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    // 0 at run time (the plan keeps k below 2^31), unknown to the compiler: unfused() keeps a product rounded
    // where the CPU rounds it before adding
    let z = params.k >> 31u;
    var acc = vec2<f32>(0.0); // invocation r < ROWS: row r's float chain (TAIL 3: acc, accm)
    for (var kb = 0u; kb < params.k / DQ_BLOCK; kb++) {
        let xb = params.x_offset + kb * (DQ_BLOCK / 4u);
        // 1. the super-block's largest |x|, then the first element that has it
        var m = 0.0f;
        for (var i = lid; i < DQ_BLOCK / 4u; i += WG_SIZE) {
            let v = abs(x_in(xb + i));
            m = max(m, max(max(v.x, v.y), max(v.z, v.w)));
        }
        atomicMax(&x_amax, bitcast<u32>(m));
        workgroupBarrier();
        let amax = bitcast<f32>(atomicLoad(&x_amax));
        for (var i = lid; i < DQ_BLOCK / 4u; i += WG_SIZE) {
            let v = abs(x_in(xb + i));
            for (var j = 0u; j < 4u; j++) {
                if (v[j] == amax) {
                    atomicMax(&x_first, 256u - (4u * i + j));
                }
            }
        }
        workgroupBarrier();
        // 2. the codes (all 0 for an all-zero block, whose d_x is 0 too)
        var s = 0.0f;
        var dx = 0.0f;
        if (amax != 0.0f) {
            let f = 256u - atomicLoad(&x_first);
            s = div_rn(-127.0f, x_in(xb + f / 4u)[f % 4u]);
            dx = div_rn(1.0f, s);
        }
        for (var i = lid; i < DQ_BLOCK / 4u; i += WG_SIZE) {
            xq[i] = vec4<i32>(min(round(x_in(xb + i) * s), vec4<f32>(127.0)));
        }
        workgroupBarrier();
        // 3. integer sums of chunks (row r, chunk c)
        for (var t = lid; t < ROWS * DQ_CHUNKS; t += WG_SIZE) {
            let r = t / DQ_CHUNKS;
            let c = t % DQ_CHUNKS;
            let b = params.w_offset + min(row0 + r, params.rows - 1u) * params.row_stride + kb * DQ_BYTES;
            let q = dqx_chunk(b, c);
            let xl = xq[dq_lo_at(c) / 4u];
            let xh = xq[dq_hi_at(c) / 4u];
            atomicAdd(&sums[2u * r], q.sc.x * dot(q.lo, xl) + q.sc.y * dot(q.hi, xh));
#if TAIL == 3
            atomicAdd(&sums[2u * r + 1u], q.mn.x * dot(xl, vec4<i32>(1)) + q.mn.y * dot(xh, vec4<i32>(1)));
#endif
        }
        workgroupBarrier();
        // 4. the float chain, in the CPU's order
        if (lid < ROWS) {
            let b = params.w_offset + min(row0 + lid, params.rows - 1u) * params.row_stride + kb * DQ_BYTES;
            let d = dqx_scales(b);
            let si = f32(atomicLoad(&sums[2u * lid])); // |S| < 2^24: exact
#if TAIL == 1
            acc.x = acc.x + unfused(si * (d.x * dx), z);
#elif TAIL == 2
            acc.x = acc.x + unfused((d.x * dx) * (si * 0.125f), z);
#else
            acc.x = fma_rn(si, d.x * dx, acc.x);
            acc.y = fma_rn(f32(atomicLoad(&sums[2u * lid + 1u])), d.y * dx, acc.y);
#endif
            atomicStore(&sums[2u * lid], 0);
            atomicStore(&sums[2u * lid + 1u], 0);
        }
        if (lid == 0u) {
            atomicStore(&x_amax, 0u);
            atomicStore(&x_first, 0u);
        }
        workgroupBarrier();
    }
    if (lid < ROWS && row0 + lid < params.rows) {
        y[params.y_offset + row0 + lid] = acc.x - acc.y;
    }
}
