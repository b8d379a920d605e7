/* The ggml type table: name, block size and bytes per block for every type id GGUF files use (read from
 * ggml v0.4.0's type traits; ids ggml removed are absent). Kernels for these types live elsewhere; this is
 * what the GGUF reader needs to size tensors. */
#include "llamaweb.h"

#include <stddef.h>

/* Indexed by type id; entries with name == NULL are removed or never-assigned ids. */
static const lw_type_info type_table[LW_TYPE_COUNT] = {
    [LW_TYPE_F32] = {"f32", 1, 4, 0},
    [LW_TYPE_F16] = {"f16", 1, 2, 0},
    [LW_TYPE_Q4_0] = {"q4_0", 32, 18, 1},
    [LW_TYPE_Q4_1] = {"q4_1", 32, 20, 1},
    [LW_TYPE_Q5_0] = {"q5_0", 32, 22, 1},
    [LW_TYPE_Q5_1] = {"q5_1", 32, 24, 1},
    [LW_TYPE_Q8_0] = {"q8_0", 32, 34, 1},
    [LW_TYPE_Q8_1] = {"q8_1", 32, 36, 1},
    [LW_TYPE_Q2_K] = {"q2_K", 256, 84, 1},
    [LW_TYPE_Q3_K] = {"q3_K", 256, 110, 1},
    [LW_TYPE_Q4_K] = {"q4_K", 256, 144, 1},
    [LW_TYPE_Q5_K] = {"q5_K", 256, 176, 1},
    [LW_TYPE_Q6_K] = {"q6_K", 256, 210, 1},
    [LW_TYPE_Q8_K] = {"q8_K", 256, 292, 1},
    [LW_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, 1},
    [LW_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, 1},
    [LW_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, 1},
    [LW_TYPE_IQ1_S] = {"iq1_s", 256, 50, 1},
    [LW_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, 1},
    [LW_TYPE_IQ3_S] = {"iq3_s", 256, 110, 1},
    [LW_TYPE_IQ2_S] = {"iq2_s", 256, 82, 1},
    [LW_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, 1},
    [LW_TYPE_I8] = {"i8", 1, 1, 0},
    [LW_TYPE_I16] = {"i16", 1, 2, 0},
    [LW_TYPE_I32] = {"i32", 1, 4, 0},
    [LW_TYPE_I64] = {"i64", 1, 8, 0},
    [LW_TYPE_F64] = {"f64", 1, 8, 0},
    [LW_TYPE_IQ1_M] = {"iq1_m", 256, 56, 1},
    [LW_TYPE_BF16] = {"bf16", 1, 2, 0},
    [LW_TYPE_TQ1_0] = {"tq1_0", 256, 54, 1},
    [LW_TYPE_TQ2_0] = {"tq2_0", 256, 66, 1},
    [LW_TYPE_MXFP4] = {"mxfp4", 32, 17, 1},
    [LW_TYPE_NVFP4] = {"nvfp4", 64, 36, 1},
    [LW_TYPE_Q1_0] = {"q1_0", 128, 18, 1},
    [LW_TYPE_Q2_0] = {"q2_0", 64, 18, 1},
};

const lw_type_info *lw_type_get(uint32_t type) {
    if (type >= LW_TYPE_COUNT || !type_table[type].name) return NULL;
    return &type_table[type];
}
