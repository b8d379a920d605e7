/* Weight formats the WebGPU kernels read: one row per format that has a WGSL dequantization routine
 * (shaders/dequant-<format>.wgsl, selected in shaders/dequant.wgsl). Adding a format = a routine, a line in
 * dequant.wgsl and types.wgsl, and a row here; mat-vec, mat-mat and row gather then all read it. */
#include "webgpu/kernels.h"

/* type, WEIGHT_TYPE name, elements and bytes per block of the routine (F32/F16 are seen as blocks of 8). */
static const lw__gpu_format formats[] = {
    {LW_TYPE_F32, "TYPE_F32", 8, 32},
    {LW_TYPE_F16, "TYPE_F16", 8, 16},
    {LW_TYPE_Q8_0, "TYPE_Q8_0", 32, 34},
    {LW_TYPE_Q4_0, "TYPE_Q4_0", 32, 18},
};

const lw__gpu_format *lw__gpu_format_of(uint32_t type) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i].type == type) return &formats[i];
    return NULL;
}
