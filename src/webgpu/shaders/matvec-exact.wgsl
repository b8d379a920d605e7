// Matrix-vector product y = W x with the CPU engine's bits, for the formats whose CPU dot is "exact integer
// sums per super-block of 256, then a short float chain over the super-blocks" (src/cpu/quant-dot*.c):
//   TQ1_0, TQ2_0   sumf += (float)S * (d_w * d_x)                     (generic order)
//   IQ1_S, IQ1_M   sumf += (d_w * d_x) * ((float)S / 8)               (generic order; dequant-iq1.wgsl)
//   Q2_K, Q4_K     acc = fmaf(S, d_w d_x, acc), accm = fmaf(M, dmin_w d_x, accm); acc - accm
//                  (llama.cpp's repacked orders: weights of a multiple of 8 rows, not the tied table; gemv:
//                  S and M of the whole super-block; gemm (params.order 1, tokens in groups of 4 of a
//                  multi-token step): one step per 128 elements (Q2_K) or 64 (Q4_K))
//   IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S
//                  sumf += (d_w * d_x) * (float)S; DQX_K * sumf  (generic order; dequant-iq-grid.wgsl)
//   Q3_K, Q5_K, Q6_K  ggml's x86 order: 8 lanes (lane k: the elements 4k .. 4k + 3 of every 32), each
//                  acc[k] = fmaf(d_x d_w, (float)L_k, acc[k]) per super-block, then hsum8; Q6_K's L_k takes
//                  the -32 offset through the activation sums of 32-chunk k; Q5_K adds its mins in a
//                  separate chain summs = fmaf(-d_x dmin_w, M, summs)
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
#elif WEIGHT_TYPE == TYPE_IQ2_XXS || WEIGHT_TYPE == TYPE_IQ2_XS || WEIGHT_TYPE == TYPE_IQ2_S || WEIGHT_TYPE == TYPE_IQ3_XXS || WEIGHT_TYPE == TYPE_IQ3_S
#define TAIL 4
#elif WEIGHT_TYPE == TYPE_Q3_K || WEIGHT_TYPE == TYPE_Q5_K || WEIGHT_TYPE == TYPE_Q6_K
#define TAIL 5
#else
#error matvec-exact.wgsl: no CPU order for this weight format
#endif

#include "matvec-common.wgsl"
#include "dequant.wgsl"
#include "numerics.wgsl"

var<workgroup> xq: array<vec4<i32>, 64>;          // the super-block's Q8_K codes
var<workgroup> x_amax: atomic<u32>;               // bits of its largest |x| (non-negative floats order as u32)
var<workgroup> x_first: atomic<u32>;              // 256 - index of the first element of that magnitude
#if TAIL == 5
const NS: u32 = 17u; // per row: 8 lane sums, 8 activation sums of 32-chunks (Q6_K), the min sum (Q5_K)
#elif TAIL == 3
const NS: u32 = 8u;  // per row: S and M of up to 4 groups (the gemm order's steps)
#else
const NS: u32 = 2u;  // per row: S, M
#endif
var<workgroup> sums: array<atomic<i32>, ROWS * NS>; // row r's sums from NS * r

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = (wg.x + wg.y * params.groups_x) * ROWS;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    // 0 at run time (the plan keeps k below 2^31), unknown to the compiler: unfused() keeps a product rounded
    // where the CPU rounds it before adding
    let z = params.k >> 31u;
    var acc: array<f32, 9>; // invocation r < ROWS: row r's float chains (TAIL 3: acc, accm; 5: 8 lanes, summs)
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
            let one = vec4<i32>(1);
#if TAIL == 5
#if WEIGHT_TYPE == TYPE_Q6_K
            let off = vec4<i32>(32); // the lanes take the unsigned values; -32 comes in through the chunk sums
            atomicAdd(&sums[NS * r + 8u + dq_lo_at(c) / 32u], q.sc.x * dot(xl, one));
            atomicAdd(&sums[NS * r + 8u + dq_hi_at(c) / 32u], q.sc.y * dot(xh, one));
#else
            let off = vec4<i32>(0);
#endif
            atomicAdd(&sums[NS * r + (dq_lo_at(c) % 32u) / 4u], q.sc.x * dot(q.lo + off, xl));
            atomicAdd(&sums[NS * r + (dq_hi_at(c) % 32u) / 4u], q.sc.y * dot(q.hi + off, xh));
#if WEIGHT_TYPE == TYPE_Q5_K
            atomicAdd(&sums[NS * r + 16u], q.mn.x * dot(xl, one) + q.mn.y * dot(xh, one));
#endif
#else
#if TAIL == 3
            // the gemm order's step of this chunk (both halves lie in one): 128 elements (Q2_K), 64 (Q4_K)
#if WEIGHT_TYPE == TYPE_Q2_K
            let g = select(0u, dq_lo_at(c) / 128u, params.order == 1u);
#else
            let g = select(0u, dq_lo_at(c) / 64u, params.order == 1u);
#endif
            atomicAdd(&sums[NS * r + 2u * g], q.sc.x * dot(q.lo, xl) + q.sc.y * dot(q.hi, xh));
            atomicAdd(&sums[NS * r + 2u * g + 1u], q.mn.x * dot(xl, one) + q.mn.y * dot(xh, one));
#else
            atomicAdd(&sums[NS * r], q.sc.x * dot(q.lo, xl) + q.sc.y * dot(q.hi, xh));
#endif
#endif
        }
        workgroupBarrier();
        // 4. the float chain, in the CPU's order
        if (lid < ROWS) {
            let b = params.w_offset + min(row0 + lid, params.rows - 1u) * params.row_stride + kb * DQ_BYTES;
            let d = dqx_scales(b);
            let si = i32_to_f32_rn(atomicLoad(&sums[NS * lid]));
#if TAIL == 1
            acc[0] = acc[0] + unfused(si * (d.x * dx), z);
#elif TAIL == 2
            acc[0] = acc[0] + unfused((d.x * dx) * (si * 0.125f), z);
#elif TAIL == 3
#if WEIGHT_TYPE == TYPE_Q2_K
            let steps = select(1u, 2u, params.order == 1u);
#else
            let steps = select(1u, 4u, params.order == 1u);
#endif
            for (var g = 0u; g < steps; g++) {
                acc[0] = fma_x(i32_to_f32_rn(atomicLoad(&sums[NS * lid + 2u * g])), d.x * dx, acc[0]);
                acc[1] = fma_x(i32_to_f32_rn(atomicLoad(&sums[NS * lid + 2u * g + 1u])), d.y * dx, acc[1]);
            }
#elif TAIL == 4
            acc[0] = acc[0] + unfused((d.x * dx) * si, z);
#else
            for (var k = 0u; k < 8u; k++) {
                var l = atomicLoad(&sums[NS * lid + k]);
#if WEIGHT_TYPE == TYPE_Q6_K
                l -= 32 * atomicLoad(&sums[NS * lid + 8u + k]);
#endif
                acc[k] = fma_x(dx * d.x, i32_to_f32_rn(l), acc[k]);
            }
#if WEIGHT_TYPE == TYPE_Q5_K
            acc[8] = fma_x(-dx * d.y, i32_to_f32_rn(atomicLoad(&sums[NS * lid + 16u])), acc[8]);
#endif
#endif
            for (var k = 0u; k < NS; k++) {
                atomicStore(&sums[NS * lid + k], 0);
            }
        }
        if (lid == 0u) {
            atomicStore(&x_amax, 0u);
            atomicStore(&x_first, 0u);
        }
        workgroupBarrier();
    }
    if (lid < ROWS && row0 + lid < params.rows) {
#if TAIL == 4
        y[params.y_offset + row0 + lid] = DQX_K * acc[0];
#elif TAIL == 5
        // hsum8: lanes 4..7 onto 0..3, then (r0 + r2) + (r1 + r3); Q5_K adds its mins after
        let r = vec4<f32>(acc[4] + acc[0], acc[5] + acc[1], acc[6] + acc[2], acc[7] + acc[3]);
#if WEIGHT_TYPE == TYPE_Q5_K
        y[params.y_offset + row0 + lid] = ((r[0] + r[2]) + (r[1] + r[3])) + acc[8];
#else
        y[params.y_offset + row0 + lid] = (r[0] + r[2]) + (r[1] + r[3]);
#endif
#else
        y[params.y_offset + row0 + lid] = acc[0] - acc[1];
#endif
    }
}
