/* Lookup tables of the quantized weight formats, emitted as WGSL at run time (shader-tables.c) from the one
 * copy of their data, the C tables of src/quant (iq-grids.c, lw__kvalues_fp4), so no number is transcribed
 * twice. Every pipeline is expanded with the embedded shaders plus these generated files, and a format's
 * dequantization routine (shaders/dequant-<format>.wgsl) includes only the tables it reads:
 *
 *   "iq4nl-values.wgsl"   const IQ4NL_VALUES: array<ftype, 16>   IQ4_NL / IQ4_XS levels
 *   "fp4-values.wgsl"     const FP4_VALUES: array<ftype, 16>     MXFP4 / NVFP4 E2M1 codes times 2
 *   "iq-grid-iq2xxs.wgsl" const IQ2XXS_GRID: array<u32, 512>     entry i: words 2i (bytes 0-3), 2i+1 (4-7)
 *   "iq-grid-iq2xs.wgsl"  const IQ2XS_GRID: array<u32, 1024>     as IQ2XXS_GRID
 *   "iq-grid-iq2s.wgsl"   const IQ2S_GRID: array<u32, 2048>      as IQ2XXS_GRID
 *   "iq-grid-iq3xxs.wgsl" const IQ3XXS_GRID: array<u32, 256>     entry i: word i (4 bytes)
 *   "iq-grid-iq3s.wgsl"   const IQ3S_GRID: array<u32, 512>       as IQ3XXS_GRID
 *   "iq-grid-iq1s.wgsl"   const IQ1S_GRID: array<u32, 1024>      entry i: bits 16(i%2).. of word i/2, value j
 *                                                                 (-1, 0, 1) stored as j's 2 bits + 1
 * (ftype comes from common.wgsl, included first.) The IQ sign table (ksigns: 7 bits + even parity) is
 * computed in WGSL instead (dequant-iq.wgsl); tests/test-wgsl-kernels.c checks that the rule matches it. */
#ifndef LW_GPU_KERNELS_DEQUANT_H
#define LW_GPU_KERNELS_DEQUANT_H

#include "core/core.h"
#include "webgpu/wgsl-pp.h"

/* The include table of one expansion: the embedded shaders followed by the generated table files. */
typedef struct lw__gpu_shader_files {
    lw__wgsl_file *files; /* lw__wgsl_builtin() entries, then the generated ones    */
    size_t n;             /* entries in files                                      */
    char *text;           /* the generated files' text, one allocation             */
} lw__gpu_shader_files;

/* Fills *out (alloc NULL: libc; free it with lw__gpu_shader_files_free and the same allocator).
 * LW_ERR_NOMEM. */
lw_status lw__gpu_shader_files_make(const lw_allocator *alloc, lw__gpu_shader_files *out);
void lw__gpu_shader_files_free(const lw_allocator *alloc, lw__gpu_shader_files *f);

#endif
