// Shared preamble of every kernel: default variant switches, extensions, and the arithmetic type.
//   F16=1        do dequantization and products in f16 (needs the shader-f16 feature), accumulate in f32
//   SUBGROUPS=1  reduce with subgroup operations (needs the subgroups feature) instead of workgroup memory
#pragma once
#ifndef F16
#define F16 0
#endif
#ifndef SUBGROUPS
#define SUBGROUPS 0
#endif
#if F16
enable f16;
#endif
#if SUBGROUPS
enable subgroups;
#endif

#if F16
alias ftype = f16;
alias fvec4 = vec4<f16>;
#else
alias ftype = f32;
alias fvec4 = vec4<f32>;
#endif
