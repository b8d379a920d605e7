// Matrix-matrix product for prefill with integer dot products, Y[t] = W X[t], for the weight formats whose CPU
// product sums q_w * q_x in integers per (sub-)block (dequant-int.wgsl: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL with 8-bit activation blocks of 32; Q4_K, Q5_K, Q6_K with Q8_K super-blocks of 256). X is rounded
// as the CPU rounds it (actq.wgsl); both tiles hold signed bytes, four to a word, and each invocation sums
// q_w * q_x of a sub-block with dot4I8Packed (four products and their sum in one instruction where the GPU
// has it), weights the sub-blocks' sums with their integer scales, and adds d_w * d_x * sum to its f32
// outputs: plus m_w * s_x (Q4_1/Q5_1: the CPU's Q8_1 block sum s_x) or -dmin_w * d_x * sum(mn_s * bsum_s)
// (Q4_K/Q5_K: the activations' sub-block sums). So a block's integer sums are the CPU's exactly, and the
// tiles in workgroup memory are a quarter of f32 ones. Same tiling as matmat.wgsl otherwise: a workgroup
// computes TM rows x TN tokens, RM x RN per invocation; K steps of TK elements (whole blocks).
//
// Defines: WEIGHT_TYPE (a format with DQ_INT), TM, TN, TK (a multiple of the block: 32 or 256), RM, RN,
// WG_SIZE ((TM / RM) * (TN / RN)), ACTQ (the format's kind: 1 or 2). Bindings and parameters: those of
// matmat.wgsl (MatmatParams).
// Dispatch: (groups_x, ceil(ceil(rows / TM) / groups_x), ceil(tokens / TN)) workgroups.
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matmat-q8.wgsl needs WEIGHT_TYPE
#endif
#if ACTQ != 1 && ACTQ != 2
#error matmat-q8.wgsl: 8-bit activations only (ACTQ 1 or 2)
#endif
#if TK < 32 || TK % 32 != 0
#error matmat-q8.wgsl: TK must be a positive multiple of the block
#endif
#if RM < 1 || RN < 1 || TM % RM != 0 || TN % RN != 0 || WG_SIZE != (TM / RM) * (TN / RN)
#error matmat-q8.wgsl: RM and RN must divide TM and TN, WG_SIZE be (TM / RM) * (TN / RN)
#endif

#include "matmat-common.wgsl"

#include "dequant-int.wgsl"
#ifndef DQ_INT
#error matmat-q8.wgsl: this weight format has no integer routine (dequant-int.wgsl)
#endif

fn actq_x(i: u32) -> vec4<f32> {
    return x[i];
}
#include "actq.wgsl"

const SB: u32 = DQ_BLOCK / 4u;         // words per block
const NSUB: u32 = DQ_BLOCK / DQI_SUBW; // sub-blocks per block (1 for the 32-blocks)
const SW: u32 = DQI_SUBW / 4u;         // words per sub-block
const NBK: u32 = TK / DQ_BLOCK;        // blocks per K step
const KW: u32 = TK / 4u + 1u;          // words per tile row: TK / 4 quant words, plus one of padding (banks)

var<workgroup> wq: array<u32, TM * KW>;               // W quants: row m, word v of the step at m * KW + v
var<workgroup> wsc: array<vec2<i32>, TM * NBK * NSUB>; // (scale, min) of row m, block j, sub s: (m NBK + j) NSUB + s
var<workgroup> wd: array<vec2<f32>, TM * NBK>;        // (d, m or dmin) of row m, block j at m * NBK + j
var<workgroup> xq: array<u32, TN * KW>;               // X quants, same layout per token
var<workgroup> xd: array<vec2<f32>, TN * NBK>;        // ACTQ 1: (d_x, the CPU's Q8_1 block sum s_x); ACTQ 2:
                                                      // (multiplier, d_x) per token, block
#if DQI_K
var<workgroup> xbs: array<i32, TN * NBK * NSUB>;      // sum of the quants of token n, block j, sub-block s
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = mm_row0(wg);
    let tok0 = wg.z * TN;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    let n_blocks = params.k / DQ_BLOCK;
    let tm = lid % TMT;
    let tn = lid / TMT;
    var acc: array<f32, RM * RN>;
    for (var b0 = 0u; b0 < n_blocks; b0 += NBK) {
        // W tile: one (row, block, sub-block) per invocation; rows past the end repeat the last row (never
        // stored), blocks past the end of K are zero
        for (var i = lid; i < TM * NBK * NSUB; i += WG_SIZE) {
            let m = i / (NBK * NSUB);
            let j = (i / NSUB) % NBK;
            let s = i % NSUB;
            // explicit zeros: lavapipe kept a loop-body `var`'s previous value without an initialiser
            var r = DqSub(array<u32, 8>(), 0, 0);
            var ds = vec2<f32>(0.0);
            if (b0 + j < n_blocks) {
                let b = params.w_offset + min(row0 + m, params.rows - 1u) * params.row_stride + (b0 + j) * DQ_BYTES;
                r = dqi_sub(b, s);
                ds = dqi_scales(b);
            }
            for (var v = 0u; v < SW; v++) {
                wq[m * KW + SB * j + SW * s + v] = r.q[v];
            }
            wsc[i] = vec2<i32>(r.sc, r.mn);
            if (s == 0u) {
                wd[m * NBK + j] = ds;
            }
        }
#if ACTQ == 1
        // X tile: one (token, block) per invocation, rounded to 8 bits as the CPU does; tokens past the end
        // and blocks past K are zero
        for (var i = lid; i < TN * NBK; i += WG_SIZE) {
            let n = i / NBK;
            let j = i % NBK;
            var q = array<u32, 8>();
            var ds = vec2<f32>(0.0);
            if (tok0 + n < params.tokens && b0 + j < n_blocks) {
                let xb = params.x_offset + (tok0 + n) * params.x_stride + (b0 + j) * 8u;
                let amax = actq_amax(xb);
                let s = actq_scale_of(amax);
                var sum = 0;
                for (var v = 0u; v < 8u; v++) {
                    let qi = vec4<i32>(clamp(round(x[xb + v] * s.x), vec4<f32>(-128.0), vec4<f32>(127.0)));
                    sum += qi.x + qi.y + qi.z + qi.w;
                    q[v] = pack4xI8(qi);
                }
                ds = vec2<f32>(s.y, actq_q8_1_sum(amax, f32(sum))); // (s_x: unused by symmetric formats)
            }
            for (var v = 0u; v < 8u; v++) {
                xq[n * KW + 8u * j + v] = q[v];
            }
            xd[i] = ds;
        }
#else
        // X tile, Q8_K: the scale of each (token, super-block) first (a scan of its 256 elements), then the
        // quants and sums of each (token, block, sub-block); tokens past the end and blocks past K are zero
        for (var i = lid; i < TN * NBK; i += WG_SIZE) {
            let n = i / NBK;
            let j = i % NBK;
            var s = vec2<f32>(0.0);
            if (tok0 + n < params.tokens && b0 + j < n_blocks) {
                s = actq_scale(params.x_offset + (tok0 + n) * params.x_stride + (b0 + j) * SB);
            }
            xd[i] = s;
        }
        workgroupBarrier();
        for (var i = lid; i < TN * NBK * NSUB; i += WG_SIZE) {
            let n = i / (NBK * NSUB);
            let j = (i / NSUB) % NBK;
            let sb = i % NSUB;
            let s = xd[n * NBK + j];
            var sum = 0;
            for (var v = 0u; v < SW; v++) {
                var qi = vec4<i32>(0);
                if (tok0 + n < params.tokens && b0 + j < n_blocks) {
                    let xv = x[params.x_offset + (tok0 + n) * params.x_stride + (b0 + j) * SB + SW * sb + v];
                    qi = vec4<i32>(clamp(round(xv * s.x), vec4<f32>(-128.0), vec4<f32>(127.0)));
                }
                sum += qi.x + qi.y + qi.z + qi.w;
                xq[n * KW + SB * j + SW * sb + v] = pack4xI8(qi);
            }
            xbs[i] = sum;
        }
#endif
        workgroupBarrier();
        for (var j = 0u; j < NBK; j++) {
            var isum = array<i32, RM * RN>(); // sum over sub-blocks of scale * (q_w . q_x)
#if DQI_K
            var msum = array<i32, RM * RN>(); // sum over sub-blocks of min * sum(q_x)
#endif
            for (var sb = 0u; sb < NSUB; sb++) {
                var ssum = array<i32, RM * RN>();
                for (var v = SB * j + SW * sb; v < SB * j + SW * sb + SW; v++) {
                    var a: array<u32, RM>;
                    var b: array<u32, RN>;
                    for (var i = 0u; i < RM; i++) {
                        a[i] = wq[(tm + i * TMT) * KW + v];
                    }
                    for (var jn = 0u; jn < RN; jn++) {
                        b[jn] = xq[(tn + jn * TNT) * KW + v];
                    }
                    for (var i = 0u; i < RM; i++) {
                        for (var jn = 0u; jn < RN; jn++) {
                            ssum[i * RN + jn] += dot4I8Packed(a[i], b[jn]);
                        }
                    }
                }
                for (var i = 0u; i < RM; i++) {
                    let scm = wsc[((tm + i * TMT) * NBK + j) * NSUB + sb];
                    for (var jn = 0u; jn < RN; jn++) {
                        isum[i * RN + jn] += scm.x * ssum[i * RN + jn];
#if DQI_K
                        msum[i * RN + jn] += scm.y * xbs[((tn + jn * TNT) * NBK + j) * NSUB + sb];
#endif
                    }
                }
            }
            for (var i = 0u; i < RM; i++) {
                let dw = wd[(tm + i * TMT) * NBK + j];
                for (var jn = 0u; jn < RN; jn++) {
                    let dx = xd[(tn + jn * TNT) * NBK + j];
#if DQI_K
                    // the CPU's block terms: (d_x * d_w) * sum and (-d_x * dmin_w) * min sum
                    acc[i * RN + jn] += (dx.y * dw.x) * f32(isum[i * RN + jn]) + (-dx.y * dw.y) * f32(msum[i * RN + jn]);
#else
                    // the CPU's block term: (d_w * d_x) * sum, plus m_w * s_x for the formats with a minimum
                    acc[i * RN + jn] += (dw.x * dx.x) * f32(isum[i * RN + jn]) + dw.y * dx.y;
#endif
                }
            }
        }
        workgroupBarrier();
    }
    mm_store(&acc, row0, tok0, tm, tn);
}
