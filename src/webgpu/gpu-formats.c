/* Weight formats the WebGPU kernels read: one row per format that has a WGSL dequantization routine
 * (shaders/dequant-<format>.wgsl, selected in shaders/dequant.wgsl). Adding a format = a routine, a line in
 * dequant.wgsl and types.wgsl, and a row here; mat-vec, mat-mat and row gather then all read it. */
#include "webgpu/kernels.h"

/* type, WEIGHT_TYPE name, elements and bytes per block of the routine (F32/F16 are seen as blocks of 8), and
 * the activation rounding of ggml-cpu's vec_dot_type for it (src/cpu/quant-dot.c's table). */
static const lw__gpu_format formats[] = {
    {LW_TYPE_F32, "TYPE_F32", 8, 32, LW_GPU_ACTQ_NONE},
    {LW_TYPE_F16, "TYPE_F16", 8, 16, LW_GPU_ACTQ_F16},
    {LW_TYPE_Q8_0, "TYPE_Q8_0", 32, 34, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_Q4_0, "TYPE_Q4_0", 32, 18, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_BF16, "TYPE_BF16", 8, 16, LW_GPU_ACTQ_BF16},
    {LW_TYPE_Q4_1, "TYPE_Q4_1", 32, 20, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_Q5_0, "TYPE_Q5_0", 32, 22, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_Q5_1, "TYPE_Q5_1", 32, 24, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_Q2_K, "TYPE_Q2_K", 256, 84, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_Q3_K, "TYPE_Q3_K", 256, 110, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_Q4_K, "TYPE_Q4_K", 256, 144, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_Q5_K, "TYPE_Q5_K", 256, 176, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_Q6_K, "TYPE_Q6_K", 256, 210, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_TQ1_0, "TYPE_TQ1_0", 256, 54, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_TQ2_0, "TYPE_TQ2_0", 256, 66, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_Q1_0, "TYPE_Q1_0", 128, 18, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_Q2_0, "TYPE_Q2_0", 64, 18, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_IQ4_NL, "TYPE_IQ4_NL", 32, 18, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_IQ4_XS, "TYPE_IQ4_XS", 256, 136, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_MXFP4, "TYPE_MXFP4", 32, 17, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_NVFP4, "TYPE_NVFP4", 64, 36, LW_GPU_ACTQ_Q8_0},
    {LW_TYPE_IQ2_XXS, "TYPE_IQ2_XXS", 256, 66, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_IQ2_XS, "TYPE_IQ2_XS", 256, 74, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_IQ2_S, "TYPE_IQ2_S", 256, 82, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_IQ3_XXS, "TYPE_IQ3_XXS", 256, 98, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_IQ3_S, "TYPE_IQ3_S", 256, 110, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_IQ1_S, "TYPE_IQ1_S", 256, 50, LW_GPU_ACTQ_Q8_K},
    {LW_TYPE_IQ1_M, "TYPE_IQ1_M", 256, 56, LW_GPU_ACTQ_Q8_K},
};

const lw__gpu_format *lw__gpu_format_of(uint32_t type) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i].type == type) return &formats[i];
    return NULL;
}

uint32_t lw__gpu_actq_block(uint32_t actq) {
    return actq == LW_GPU_ACTQ_Q8_0 ? 32 : actq == LW_GPU_ACTQ_Q8_K ? 256 : 0;
}
