// The dequantization routine of WEIGHT_TYPE (one file per format, dequant-<format>.wgsl), shared by every
// kernel that reads weights (mat-vec, mat-mat, row gather). Each defines, for blocks of DQ_BLOCK elements
// stored in DQ_BYTES bytes, made of DQ_CHUNKS chunks of 8 elements:
//   dq_chunk(b, c) -> Dq8   chunk c of the block at byte b: elements [dq_lo_at(c), +4) and [dq_hi_at(c), +4)
// The includer declares `w: array<u32>` (weights.wgsl) and includes common.wgsl (ftype, fvec4) first.
#pragma once
#include "types.wgsl"
#include "weights.wgsl"
#ifndef WEIGHT_TYPE
#error dequant.wgsl needs WEIGHT_TYPE
#endif
#if WEIGHT_TYPE == TYPE_F32
#include "dequant-f32.wgsl"
#elif WEIGHT_TYPE == TYPE_F16
#include "dequant-f16.wgsl"
#elif WEIGHT_TYPE == TYPE_Q8_0
#include "dequant-q8_0.wgsl"
#elif WEIGHT_TYPE == TYPE_Q4_0
#include "dequant-q4_0.wgsl"
#elif WEIGHT_TYPE == TYPE_BF16
#include "dequant-bf16.wgsl"
#elif WEIGHT_TYPE == TYPE_Q4_1
#include "dequant-q4_1.wgsl"
#elif WEIGHT_TYPE == TYPE_Q5_0
#include "dequant-q5_0.wgsl"
#elif WEIGHT_TYPE == TYPE_Q5_1
#include "dequant-q5_1.wgsl"
#elif WEIGHT_TYPE == TYPE_Q2_K
#include "dequant-q2_k.wgsl"
#elif WEIGHT_TYPE == TYPE_Q3_K
#include "dequant-q3_k.wgsl"
#elif WEIGHT_TYPE == TYPE_Q4_K
#include "dequant-q4_k.wgsl"
#elif WEIGHT_TYPE == TYPE_Q5_K
#include "dequant-q5_k.wgsl"
#elif WEIGHT_TYPE == TYPE_Q6_K
#include "dequant-q6_k.wgsl"
#elif WEIGHT_TYPE == TYPE_TQ1_0
#include "dequant-tq1_0.wgsl"
#elif WEIGHT_TYPE == TYPE_TQ2_0
#include "dequant-tq2_0.wgsl"
#elif WEIGHT_TYPE == TYPE_Q1_0
#include "dequant-q1_0.wgsl"
#elif WEIGHT_TYPE == TYPE_Q2_0
#include "dequant-q2_0.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ4_NL
#include "dequant-iq4_nl.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ4_XS
#include "dequant-iq4_xs.wgsl"
#elif WEIGHT_TYPE == TYPE_MXFP4
#include "dequant-mxfp4.wgsl"
#elif WEIGHT_TYPE == TYPE_NVFP4
#include "dequant-nvfp4.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ2_XXS
#include "dequant-iq2_xxs.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ2_XS
#include "dequant-iq2_xs.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ2_S
#include "dequant-iq2_s.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ3_XXS
#include "dequant-iq3_xxs.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ3_S
#include "dequant-iq3_s.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ1_S
#include "dequant-iq1_s.wgsl"
#elif WEIGHT_TYPE == TYPE_IQ1_M
#include "dequant-iq1_m.wgsl"
#else
#error dequant.wgsl: no dequantization routine for this WEIGHT_TYPE
#endif
