// Mat-vec for decode with integer products, y = W x, for the weight formats whose CPU product sums q_w * q_x
// in integers per (sub-)block (dequant-int.wgsl: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; Q4_K, Q5_K, Q6_K).
// x comes already rounded to 8 bits by actq-quant.wgsl (once per step, not per workgroup), so the inner loop
// is the weights' integer codes times x's bytes with dot4I8Packed — four products and their sum in one
// instruction — then the CPU's block terms in f32: (d_w d_x) sum (+ m_w s_x for Q4_1/Q5_1), and for the K
// formats (d_x d_w) sc sum - (d_x dmin_w) mn sum(q_x). Equal to the CPU's result up to float summation order.
// Work unit: one (block, sub-block) of ROWS rows per invocation per step: consecutive invocations take
// consecutive blocks of a row, so a subgroup reads a contiguous run of weight bytes; x's bytes of the unit
// are loaded once (two vec4 loads for 32 elements) for all ROWS rows.
// Defines: WEIGHT_TYPE (a format with DQ_INT), WG_SIZE (power of two), ROWS (1..16), SUBGROUPS, ACTQ (1 or 2:
// the format's activation kind; only checked here, actq-quant.wgsl applies it), PAIR and OCT (below).
// Bindings: 0 weights (read), 1 x's quants as vec4 words (actq-quant.wgsl's output, read), 2 y (read_write),
// 3 MatvecParams (uniform; x_offset unused: the quants start at 0).
// Dispatch: (groups_x, ceil(groups / groups_x), 1) workgroups with groups = ceil(rows / ROWS).
#include "common.wgsl"
#include "types.wgsl"
#ifndef WEIGHT_TYPE
#error matvec-q8.wgsl needs WEIGHT_TYPE
#endif
#ifndef WG_SIZE
#define WG_SIZE 128
#endif
#if WG_SIZE <= 0 || (WG_SIZE & (WG_SIZE - 1)) != 0
#error matvec-q8.wgsl: WG_SIZE must be a power of two
#endif
#ifndef ROWS
#define ROWS 1
#endif
#if ROWS < 1 || ROWS > 16
#error matvec-q8.wgsl: ROWS must be 1..16
#endif
#if ACTQ != 1 && ACTQ != 2
#error matvec-q8.wgsl: 8-bit activations only (ACTQ 1 or 2)
#endif
#define X_GLU 0

// OCT=1 (with PAIR; rows of a multiple of 256 elements starting on 16 bytes): the unit is eight blocks,
// four pairs, whose 144 / 272 bytes are 9 / 17 whole vec4<u32>s. With PAIR's 4-byte loads the lanes of a
// subgroup, 36 / 68 bytes apart, each touch a different 32-byte sector per load, 9 / 17 loads for one
// sector's worth of bytes each; 16-byte loads ask the memory system for a quarter of those sector reads.
// Measured on the H200 it loses (tests/web/bench-matvec.mjs, best OCT config against the default pair one,
// us per mat-vec): Q4_0 28672x4096 28.5 vs 27.8, 6144x4096 19.0 vs 15.1, 4096x14336 28.5 vs 23.3,
// 16384x2048 26.4 vs 17.3; whole 8B Q4_0 tg128 247 vs 298 t/s. So it is opt-in (tune key "oct"), kept for
// devices whose memory systems the sector count does limit.
#ifndef OCT
#define OCT 0
#endif
#if OCT && !PAIR
#error matvec-q8.wgsl: OCT needs PAIR
#endif
#if OCT
#define W_VEC4 1
#define W_PRIV 1
// (weights.wgsl's word reads, compiled but not called on this path)
fn w_priv(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}
#endif

#include "matvec-common.wgsl"
#if WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K
#define DQI_ALIGNED 1 // whole-word blocks; the plan checks the weights' offset
#endif
#include "dequant-int.wgsl"
#ifndef DQ_INT
#error matvec-q8.wgsl: this weight format has no integer routine (dequant-int.wgsl)
#endif
#include "matvec-reduce.wgsl"

const NSUB: u32 = DQ_BLOCK / DQI_SUBW; // sub-blocks per block (1 for the 32-blocks)
const SW: u32 = DQI_SUBW / 4u;         // words per sub-block (8 or 4)

#include "matvec-pair.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = (wg.x + wg.y * params.groups_x) * ROWS;
    if (row0 >= params.rows) {
        return; // uniform across the workgroup
    }
    let n_units = (params.k / DQ_BLOCK) * NSUB;
    let info0 = params.k / 16u; // first vec4 of the groups' (d_x, s_x or sum) pairs
    var acc: array<f32, ROWS>;
#if OCT
    // an octet's x: 256 quants (16 vec4s) and its four pairs' (d_x, s_x, d_x, s_x)
    for (var t = lid; t < params.k / 256u; t += WG_SIZE) {
        var xv: array<vec4<u32>, 16>;
        for (var v = 0u; v < 16u; v++) {
            xv[v] = bitcast<vec4<u32>>(x[t * 16u + v]);
        }
        var iv: array<vec4<f32>, 4>;
        for (var q = 0u; q < 4u; q++) {
            iv[q] = bitcast<vec4<f32>>(x[info0 + t * 4u + q]);
        }
        for (var r = 0u; r < ROWS; r++) {
            let row = min(row0 + r, params.rows - 1u);
            let wb = (params.w_offset + row * params.row_stride) / 16u + t * PW; // 4 pairs = PW vec4s
            var wv: array<vec4<u32>, PW>;
            for (var j = 0u; j < PW; j++) {
                wv[j] = w[wb + j];
            }
            for (var q = 0u; q < 4u; q++) { // pair q: words q PW .. of the octet, x's vec4s 4 q ..
                var ww: array<u32, PW>;
                for (var j = 0u; j < PW; j++) {
                    let e = q * PW + j;
                    ww[j] = wv[e / 4u][e % 4u];
                }
                var xw: array<u32, 16>;
                for (var j = 0u; j < 16u; j++) {
                    xw[j] = xv[4u * q + j / 4u][j % 4u];
                }
                acc[r] += pair_term(&ww, &xw, iv[q]);
            }
        }
    }
#elif PAIR
    for (var t = lid; t < n_units / 2u; t += WG_SIZE) {
        var xw: array<u32, 16>; // x's quants of the pair's 64 elements
        for (var v = 0u; v < 4u; v++) {
            let p = bitcast<vec4<u32>>(x[t * 4u + v]);
            xw[4u * v] = p.x;
            xw[4u * v + 1u] = p.y;
            xw[4u * v + 2u] = p.z;
            xw[4u * v + 3u] = p.w;
        }
        let iv = bitcast<vec4<f32>>(x[info0 + t]); // (d_x, s_x) of both blocks
        for (var r = 0u; r < ROWS; r++) {
            let row = min(row0 + r, params.rows - 1u);
            let wb = (params.w_offset + row * params.row_stride) / 4u + t * PW;
            var ww: array<u32, PW>;
            for (var j = 0u; j < PW; j++) {
                ww[j] = w[wb + j];
            }
            acc[r] += pair_term(&ww, &xw, iv);
        }
    }
#else
    for (var t = lid; t < n_units; t += WG_SIZE) {
        let blk = t / NSUB;
        let s = t % NSUB;
        let e0 = blk * DQ_BLOCK + s * DQI_SUBW; // first element of the unit
        var xw: array<u32, 8>;
        for (var v = 0u; v < SW / 4u; v++) {
            let p = bitcast<vec4<u32>>(x[e0 / 16u + v]);
            xw[4u * v] = p.x;
            xw[4u * v + 1u] = p.y;
            xw[4u * v + 2u] = p.z;
            xw[4u * v + 3u] = p.w;
        }
        let g = e0 / 32u;
        let iv = bitcast<vec4<u32>>(x[info0 + g / 2u]);
        let xi = select(iv.xy, iv.zw, g % 2u == 1u);
        let dx = bitcast<f32>(xi.x);
        for (var r = 0u; r < ROWS; r++) {
            // rows past the end repeat the last row (never stored) so the loop stays uniform
            let row = min(row0 + r, params.rows - 1u);
            let bb = params.w_offset + row * params.row_stride + blk * DQ_BYTES;
            let sub = dqi_sub(bb, s);
            var isum = 0;
            for (var v = 0u; v < SW; v++) {
                isum += dot4I8Packed(sub.q[v], xw[v]);
            }
            let dw = dqi_scales(bb);
#if DQI_K
            // Q6_K's mn is 0, so the 32-group sum that its 16-element sub-blocks do not match never counts
            acc[r] += (dx * dw.x) * f32(sub.sc * isum) - (dx * dw.y) * f32(sub.mn * bitcast<i32>(xi.y));
#else
            acc[r] += (dw.x * dx) * f32(isum) + dw.y * bitcast<f32>(xi.y);
#endif
        }
    }
#endif
    mv_store(&acc, row0, lid);
}
