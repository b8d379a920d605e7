// 4-bit codes through a table of 16 levels, for IQ4_NL, IQ4_XS, MXFP4 and NVFP4: the includer defines LUT4
// as the table's name (IQ4NL_VALUES or FP4_VALUES, generated from the C tables: kernels-dequant.h).
#pragma once
#ifndef LUT4
#error dequant-lut4.wgsl needs LUT4
#endif

// The levels of the nibbles at bits 0, 8, 16, 24 of u (the low nibbles of its four bytes; pass u >> 4 for
// the high nibbles).
fn dq_lut4(u: u32) -> fvec4 {
    return fvec4(LUT4[u & 0xfu], LUT4[(u >> 8u) & 0xfu], LUT4[(u >> 16u) & 0xfu], LUT4[(u >> 24u) & 0xfu]);
}
