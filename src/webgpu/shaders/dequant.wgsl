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
#else
#error dequant.wgsl: no dequantization routine for this WEIGHT_TYPE
#endif
