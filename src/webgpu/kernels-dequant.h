/* Lookup tables of the quantized weight formats, emitted as WGSL at run time (shader-tables.c) from the one
 * copy of their data, the C tables of src/quant (iq-grids.c, lw__kvalues_fp4), so no number is transcribed
 * twice. Every pipeline is expanded with the embedded shaders plus these generated files, and a format's
 * dequantization routine (shaders/dequant-<format>.wgsl) includes only the tables it reads:
 *
 *   "iq4nl-values.wgsl"   const IQ4NL_VALUES: array<ftype, 16>        IQ4_NL / IQ4_XS levels
 *   "fp4-values.wgsl"     const FP4_VALUES: array<ftype, 16>          MXFP4 / NVFP4 E2M1 codes times 2
 *   "iq-grid-iq2xxs.wgsl" const IQ2XXS_GRID: array<vec4<u32>, 32>     256 entries, 8 values of 2 bits
 *   "iq-grid-iq2xs.wgsl"  const IQ2XS_GRID: array<vec4<u32>, 64>      512 entries, 8 values of 2 bits
 *   "iq-grid-iq2s.wgsl"   const IQ2S_GRID: array<vec4<u32>, 128>      1024 entries, 8 values of 2 bits
 *   "iq-grid-iq3xxs.wgsl" const IQ3XXS_GRID: array<vec4<u32>, 32>     256 entries, 4 values of 3 bits
 *   "iq-grid-iq3s.wgsl"   const IQ3S_GRID: array<vec4<u32>, 64>       512 entries, 4 values of 3 bits
 *   "iq-grid-iq1s.wgsl"   const IQ1S_GRID: array<vec4<u32>, 256>      2048 entries, 8 values of 2 bits
 * Grids are packed: an entry is 16 bits, value j's code at bits 2j (or 3j), a code standing for one of the
 * grid family's few magnitudes (IQ2: 8, 25, 43; IQ3_XXS: 4, 12, .., 52, 62; IQ3_S: 1, 3, .., 15; IQ1: -1,
 * 0, 1; decoded by formula in the shaders); entry i is bits 16 (i % 2).. of component (i / 2) % 4 of
 * element i / 8 (dq_grid16 in dequant-iq.wgsl). Packed tables are 4 to 8 times smaller than the C arrays
 * and have few elements, which is what a dynamically indexed WGSL constant costs to compile (lavapipe:
 * ~2 ms per element and access site). (ftype comes from common.wgsl, included first.) The IQ sign table
 * (ksigns: 7 bits + even parity) is computed in WGSL instead (dequant-iq.wgsl); tests/test-wgsl-dequant.c
 * checks that the rule and every table's decoding give back the C tables. */
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
