// Activation rounding as the CPU engine (and llama.cpp's CPU backend) does it before a dot product with a
// weight row: each weight format has a "vec_dot_type" the activations are converted to first (ggml-cpu's
// type traits; src/cpu/quant-dot.h). Kernels that apply the same rounding to x (ACTQ != 0) compute
// sum(w_i * xr_i) where the CPU computes d_w * d_x * sum(q_w,i * q_x,i): equal up to float summation order,
// where the unrounded x would differ by the activation quantization error (~0.5 % per element for 8-bit).
//   ACTQ 0  none (f32 weights)
//   ACTQ 1  Q8_0 / Q8_1 in blocks of 32, rounded as llama.cpp's x86 build: d = fp16(amax / 127),
//           q = round-to-even(x * (127 / amax)); xr = q * d
//   ACTQ 2  Q8_K in blocks of 256 (ggml's reference quantizer): m = the first element of largest |x|,
//           s = -127 / m, q = min(127, round-to-even(s * x)), xr = q * (1 / s)
//   ACTQ 3  f16 (F16 weights), ACTQ 4  bf16 (BF16 weights): element-wise rounding
// The includer defines ACTQ and provides fn actq_x(i: u32) -> vec4<f32>, vec4 number i of its x binding.
#pragma once
#include "numerics.wgsl"
#ifndef ACTQ
#define ACTQ 0
#endif

#if ACTQ == 1
const ACT_BLOCK: u32 = 32u;
#elif ACTQ == 2
const ACT_BLOCK: u32 = 256u;
#endif

#if ACTQ == 1 && defined(WEIGHT_TYPE)
// Q4_1 / Q5_1 with Q8_1 activations: the kernels also add the weight minimum times the CPU's rounded block
// sum (actq_min_corr)
#if WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1
#define ACT_MIN 1
#endif
#endif
#ifndef ACT_MIN
#define ACT_MIN 0
#endif

#if ACTQ == 1 || ACTQ == 2
#if ACTQ == 1
// Largest |x| of the activation block whose first vec4 is number xb.
fn actq_amax(xb: u32) -> f32 {
    var m = vec4<f32>(0.0);
    for (var i = 0u; i < ACT_BLOCK / 4u; i++) {
        m = max(m, abs(actq_x(xb + i)));
    }
    return max(max(m.x, m.y), max(m.z, m.w));
}

// (multiplier, scale) of a block whose largest |x| is amax: xr = round(x * s.x) * s.y
fn actq_scale_of(amax: f32) -> vec2<f32> {
    if (amax == 0.0f) {
        return vec2<f32>(0.0);
    }
    return vec2<f32>(div_rn(127.0f, amax), f16_round(div_rn(amax, 127.0f)));
}

// The block sum the CPU keeps in a Q8_1 block of largest |x| amax whose quants add up to sum:
// fp16(d * sum) with d = amax / 127 unrounded (0 for an all-zero block).
fn actq_q8_1_sum(amax: f32, sum: f32) -> f32 {
    return select(0.0f, f16_round(div_rn(amax, 127.0f) * sum), amax != 0.0f);
}
#endif

// (multiplier, scale) of the activation block whose first vec4 is number xb: xr = round(x * s.x) * s.y
fn actq_scale(xb: u32) -> vec2<f32> {
#if ACTQ == 1
    return actq_scale_of(actq_amax(xb));
#else
    var amax = 0.0f;
    var mx = 0.0f;
    for (var i = 0u; i < ACT_BLOCK / 4u; i++) {
        let v = actq_x(xb + i);
        for (var j = 0u; j < 4u; j++) {
            if (abs(v[j]) > amax) { // strictly greater: the first of equal magnitudes wins, as on the CPU
                amax = abs(v[j]);
                mx = v[j];
            }
        }
    }
    if (amax == 0.0f) {
        return vec2<f32>(0.0);
    }
    let s = div_rn(-127.0f, mx);
    return vec2<f32>(s, div_rn(1.0f, s));
#endif
}

#if ACT_MIN
// Q8_1 (the activations of Q4_1 and Q5_1) of the block at xb with largest |x| amax: the CPU multiplies each
// weight block's minimum m by the block sum it stores, s = fp16(d * sum(q)) with d = amax / 127 unrounded,
// where sum over the rounded x gives fp16(d) * sum(q). Returns the difference, which the kernel adds times m
// to match the CPU.
fn actq_min_corr(xb: u32, amax: f32) -> f32 {
    if (amax == 0.0f) {
        return 0.0f;
    }
    let id = div_rn(127.0f, amax);
    var sum = 0.0f;
    for (var i = 0u; i < ACT_BLOCK / 4u; i++) {
        sum += dot(clamp(round(actq_x(xb + i) * id), vec4<f32>(-128.0), vec4<f32>(127.0)), vec4<f32>(1.0));
    }
    return actq_q8_1_sum(amax, sum) - f16_round(div_rn(amax, 127.0f)) * sum;
}
#endif

// The 8-bit quants of 4 elements at (multiplier, scale) s.
fn actq_quant4(v: vec4<f32>, s: vec2<f32>) -> vec4<i32> {
    return vec4<i32>(clamp(round(v * s.x), vec4<f32>(-128.0), vec4<f32>(127.0)));
}

// The two words the integer mat-vec's x layout (actq-quant.wgsl) keeps per 32 elements after the quants, for
// a group of scale s, largest |x| amax and quant sum sum: (d_x, the CPU's Q8_1 block sum) for Q8_0 / Q8_1,
// (d_x of the super-block, sum) for Q8_K (the K formats' minimums).
fn actq_group_words(s: vec2<f32>, amax: f32, sum: i32) -> vec2<u32> {
#if ACTQ == 1
    return vec2<u32>(bitcast<u32>(s.y), bitcast<u32>(actq_q8_1_sum(amax, f32(sum))));
#else
    return vec2<u32>(bitcast<u32>(s.y), bitcast<u32>(sum));
#endif
}

fn actq_apply(v: vec4<f32>, s: vec2<f32>) -> vec4<f32> {
    return clamp(round(v * s.x), vec4<f32>(-128.0), vec4<f32>(127.0)) * s.y;
}
#endif

#if ACTQ == 3
fn actq_round(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(f16_round(v.x), f16_round(v.y), f16_round(v.z), f16_round(v.w));
}
#elif ACTQ == 4
fn actq_round(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(bf16_round(v.x), bf16_round(v.y), bf16_round(v.z), bf16_round(v.w));
}
#endif
