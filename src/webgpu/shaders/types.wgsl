// Weight format ids for WEIGHT_TYPE defines (the ggml / GGUF type ids, as lw_type in llamaweb.h), so a
// template says `#if WEIGHT_TYPE == TYPE_Q4_0` and a typo in a variant name is an error, not a silent 0.
#pragma once
#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_Q4_0 2
#define TYPE_Q4_1 3
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q8_0 8
#define TYPE_Q2_K 10
#define TYPE_Q3_K 11
#define TYPE_Q4_K 12
#define TYPE_Q5_K 13
#define TYPE_Q6_K 14
#define TYPE_BF16 30
#define TYPE_TQ1_0 34
#define TYPE_TQ2_0 35
#define TYPE_Q1_0 41
#define TYPE_Q2_0 42
#define TYPE_IQ2_XXS 16
#define TYPE_IQ2_XS 17
#define TYPE_IQ3_XXS 18
#define TYPE_IQ1_S 19
#define TYPE_IQ4_NL 20
#define TYPE_IQ3_S 21
#define TYPE_IQ2_S 22
#define TYPE_IQ4_XS 23
#define TYPE_IQ1_M 29
#define TYPE_MXFP4 39
#define TYPE_NVFP4 40
