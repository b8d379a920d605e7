/* Lookup tables of the IQ quantization family, defined once in iq-grids.c (facts of the format, transcribed
 * from ggml v0.4.0's ggml-common.h). Shared by the scalar reference (quant-iq.c), faster CPU kernels and the
 * WebGPU backend, which emits them into WGSL. Names follow ggml's with an lw__ prefix:
 *   ggml kmask_iq2xs -> lw__iq_kmask, ksigns_iq2xs -> lw__iq_ksigns, kvalues_iq4nl -> lw__iq4nl_values,
 *   iqNxx_grid -> lw__iqNxx_grid. */
#ifndef LW_QUANT_IQ_GRIDS_H
#define LW_QUANT_IQ_GRIDS_H

#include <stdint.h>

/* Table sizes (entries). */
#define LW_IQ_KMASK_N    8
#define LW_IQ_KSIGNS_N   128
#define LW_IQ4NL_NVALUES 16
#define LW_IQ2XXS_GRID_N 256
#define LW_IQ2XS_GRID_N  512
#define LW_IQ2S_GRID_N   1024
#define LW_IQ3XXS_GRID_N 256
#define LW_IQ3S_GRID_N   512
#define LW_IQ1S_GRID_N   2048

/* The constant offset IQ1_S and IQ1_M add to every grid value before scaling: +delta, or -delta when the
 * group's sign bit is set (ggml's IQ1S_DELTA and IQ1M_DELTA, both 0.125). */
#define LW_IQ1S_DELTA 0.125f
#define LW_IQ1M_DELTA 0.125f

extern const uint8_t lw__iq_kmask[LW_IQ_KMASK_N];        /* 1 << j                                        */
extern const uint8_t lw__iq_ksigns[LW_IQ_KSIGNS_N];      /* 7 sign bits -> 8 with even parity               */
extern const int8_t lw__iq4nl_values[LW_IQ4NL_NVALUES];  /* IQ4_NL / IQ4_XS levels, ascending            */
extern const uint64_t lw__iq2xxs_grid[LW_IQ2XXS_GRID_N]; /* 8 x u8 magnitudes in {8, 25, 43}            */
extern const uint64_t lw__iq2xs_grid[LW_IQ2XS_GRID_N];   /* 8 x u8 magnitudes in {8, 25, 43}            */
extern const uint64_t lw__iq2s_grid[LW_IQ2S_GRID_N];     /* 8 x u8 magnitudes in {8, 25, 43}            */
extern const uint32_t lw__iq3xxs_grid[LW_IQ3XXS_GRID_N]; /* 4 x u8 magnitudes in {4, 12, ..., 62}       */
extern const uint32_t lw__iq3s_grid[LW_IQ3S_GRID_N];     /* 4 x u8 magnitudes in {1, 3, ..., 15}        */
extern const uint64_t lw__iq1s_grid[LW_IQ1S_GRID_N];     /* 8 x i8 values in {-1, 0, +1}                */

#endif
