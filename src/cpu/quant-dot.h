/* Scalar reference dot products of a quantized weight row with a quantized activation row, as ggml-cpu
 * computes them (v0.4.0, the *_generic kernels of ggml-cpu/quants.c): the activation row is first
 * quantized to the weight type's "vec_dot_type" (Q8_0, Q8_1 or Q8_K, see lw__quant_dot), then integer dot
 * products per block are scaled and summed in float in ggml's order, so results equal ggml's generic
 * kernels bit for bit (tests/test-quant-dot.c checks that against libggml-cpu, and checks closeness to
 * dequantize-then-float-dot). SIMD versions elsewhere are tested against these.
 *
 * Signature of every dot (matches lw__cpu_mm.dot in cpu/engine-ops.h): n elements (a multiple of the
 * weight's block size), w one weight row, a one activation row already in vec_dot_type. */
#ifndef LW_QUANT_DOT_H
#define LW_QUANT_DOT_H

#include "quant/quant.h"

typedef float (*lw__vec_dot_fn)(int64_t n, const void *w, const void *a);

/* How a weight type multiplies: the activation format and the two functions. */
typedef struct lw__quant_dot_t {
    uint32_t type;             /* weight type                                               */
    uint32_t vec_dot_type;     /* activation type (ggml-cpu's type_traits_cpu vec_dot_type) */
    lw__from_float_fn act_from_float; /* activation row -> vec_dot_type (the _ref quantizer) */
    lw__vec_dot_fn dot;        /* weight row . activation row                               */
} lw__quant_dot_t;

/* Q8_0 / Q8_1 activation rows exactly as ggml-cpu's x86 AVX/AVX2/AVX-512 builds make them (what llama.cpp
 * runs on x86-64): id = 127 / amax instead of 1 / (amax / 127), and ties rounded to even. The _ref
 * quantizers (act_from_float below) follow ggml's portable code instead; the two differ on every exact tie
 * and on about 1 quant in 65,000 of random data (measured by test-quant-dot). Q8_K has no x86 variant (ggml
 * uses the reference there too). */
void lw__quantize_row_q8_0_x86(const float *x, void *y, int64_t k);
void lw__quantize_row_q8_1_x86(const float *x, void *y, int64_t k);

/* The same dots in ggml-cpu's x86 AVX2/AVX-512 order (bit-identical to those builds' ggml_vec_dot_* for
 * these types, which llama.cpp does not repack on x86; Q4_K is repacked there when rows % 8 == 0, and
 * Q2_K too with AVX-512). Q8_0 and Q5_0 prompts (llamafile tinyBLAS) give the same bits as these dots.
 * Fused multiply-adds: exact on every target, slow where fmaf is emulated. */
float lw__vec_dot_q8_0_q8_0_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q2_K_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q3_K_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q4_K_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q5_K_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q6_K_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q4_1_q8_1_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q5_0_q8_0_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_q5_1_q8_1_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq4_xs_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq2_xxs_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq2_xs_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq2_s_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq3_xxs_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq3_s_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq1_s_q8_K_x86(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq1_m_q8_K_x86(int64_t n, const void *w, const void *a);

/* One row of what ggml-cpu's x86 AVX2 / AVX-512 builds compute for weights they repack (Q4_0, IQ4_NL, MXFP4,
 * Q4_K when the row count is a multiple of 8): its gemv kernels, one activation row (decode). Takes plain
 * (not repacked) blocks. */
float lw__vec_dot_q4_0_q8_0_x86_repack(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq4_nl_q8_0_x86_repack(int64_t n, const void *w, const void *a);
float lw__vec_dot_mxfp4_q8_0_x86_repack(int64_t n, const void *w, const void *a);
float lw__vec_dot_q4_K_q8_K_x86_repack(int64_t n, const void *w, const void *a);
/* Prompts: llama.cpp sends activation rows in groups of 4 through gemm kernels (the remaining n_tokens % 4
 * rows through gemv). For Q4_0/IQ4_NL/MXFP4 the gemm result equals the _x86_repack dot above; Q4_K's gemm
 * accumulates per pair of sub-blocks instead: */
float lw__vec_dot_q4_K_q8_K_x86_repack_gemm(int64_t n, const void *w, const void *a);
/* Q2_K, repacked by AVX-512 builds only (AVX2 builds use lw__vec_dot_q2_K_q8_K_x86): gemv and gemm orders. */
float lw__vec_dot_q2_K_q8_K_x86_repack(int64_t n, const void *w, const void *a);
float lw__vec_dot_q2_K_q8_K_x86_repack_gemm(int64_t n, const void *w, const void *a);

/* The dot that reproduces llama.cpp's x86-64 CPU build (AVX2, or AVX-512 when avx512) for one output of a
 * weight of this type, or NULL where not emulated (Q4_0/IQ4_NL/MXFP4 with rows % 8 != 0, TQ1_0, TQ2_0,
 * NVFP4, Q1_0, Q2_0): rows_mult8 = the weight's row count is a multiple of 8 (llama.cpp repacks then);
 * gemm_row = this activation row is one of the first n_tokens - n_tokens % 4 of the step (llama.cpp runs
 * those through its 4-row gemm kernels, the rest through gemv). Pair it with lw__quant_act_x86. */
lw__vec_dot_fn lw__quant_dot_x86(uint32_t type, bool avx512, bool rows_mult8, bool gemm_row);
/* The activation quantizer llama.cpp's x86 build uses for vec_dot_type (Q8_0, Q8_1: _x86; Q8_K: _ref; its
 * 4-row Q8_K quantizer for gemm rows gives the same bytes except when +max and -max tie in magnitude). */
lw__from_float_fn lw__quant_act_x86(uint32_t vec_dot_type);

/* The entry for a quantized weight type (all 25), or NULL (F32/F16/BF16 are the engine's own). */
const lw__quant_dot_t *lw__quant_dot(uint32_t type);

float lw__vec_dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q1_0_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q2_0_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_mxfp4_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_nvfp4_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q2_K_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q3_K_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_tq1_0_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_tq2_0_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq4_nl_q8_0_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq4_xs_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq2_xxs_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq2_xs_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq2_s_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq3_xxs_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq3_s_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq1_s_q8_K_ref(int64_t n, const void *w, const void *a);
float lw__vec_dot_iq1_m_q8_K_ref(int64_t n, const void *w, const void *a);

/* ---------------------------------------------------------------------------------------------------------
 * Small helpers shared by quant-dot.c and quant-dot-x86.c
 * ------------------------------------------------------------------------------------------------------- */

/* 6-bit scale j and min j of Q4_K/Q5_K's packed 12 bytes (as get_scale_min_k4 in quant-k.c). */
static inline void lw__k4_scale_min(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
/* Byte j of a packed grid entry, unsigned (IQ2/IQ3 magnitudes) or signed (IQ1 values). */
static inline int lw__grid_u8(uint64_t g, int j) { return (int)((g >> (8 * j)) & 0xff); }
static inline int lw__grid_i8(uint64_t g, int j) { return (int)(int8_t)((g >> (8 * j)) & 0xff); }

#endif
