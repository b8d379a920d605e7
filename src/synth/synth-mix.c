/* File types and which tensor gets which type: a transcription of llama.cpp's quantizer rules
 * (src/llama-quant.cpp of v0.4.0: llama_ftype_get_default_type, tensor_allows_quantization,
 * tensor_get_category, llama_tensor_get_type_impl, tensor_type_fallback), for files made without an
 * importance matrix and the architectures synth knows (none is Falcon or 70B), dense or with experts
 * (qwen3moe: the n_expert rules, 3-D expert stacks, MXFP4_MOE's expert-only MXFP4).
 *
 * llama.cpp keeps counters (i_attention_wv, i_ffn_down) that it increments per tensor while walking the
 * tensors sorted by block index (llama_model_loader::weight_name_comparer); with one attn_v (or attn_qkv) and
 * one ffn_down per block, each counter equals the tensor's block index, which is what is used here (with
 * experts llama.cpp reads the block from the name, which is the same), except where blocks differ: gemma4's
 * attn_v is absent on shared-KV and K=V blocks (counted where present, n_attention_wv the tensors there
 * are), and its MoE blocks hold two ffn_down tensors (the raw counter of the IQ1/IQ2 branch counts both). */
#include "synth/synth.h"

#include <string.h>

/* llama_ftype values (include/llama.h). */
/* clang-format off */
enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_Q2_K_S = 21,
    FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24, FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27,
    FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30, FT_IQ1_M = 31, FT_BF16 = 32, FT_TQ1_0 = 36, FT_TQ2_0 = 37,
    FT_MXFP4_MOE = 38, FT_NVFP4 = 39, FT_Q1_0 = 40, FT_Q2_0 = 41
};
/* clang-format on */

/* ---------------------------------------------------------------------------------------------------------
 * --type values: llama.cpp's file types (their per-tensor rules apply), then tensor types that are no file
 * type of their own (every 2-D weight gets that type; general.file_type is the one llama.cpp's loader
 * guesses for a file whose most common type it is).
 * ------------------------------------------------------------------------------------------------------- */

/* clang-format off */
static const lw__synth_ftype ftypes[] = {
    {"f32", FT_ALL_F32, LW_TYPE_F32, 1},        {"f16", FT_F16, LW_TYPE_F16, 1},
    {"bf16", FT_BF16, LW_TYPE_BF16, 1},         {"q4_0", FT_Q4_0, LW_TYPE_Q4_0, 1},
    {"q4_1", FT_Q4_1, LW_TYPE_Q4_1, 1},         {"q5_0", FT_Q5_0, LW_TYPE_Q5_0, 1},
    {"q5_1", FT_Q5_1, LW_TYPE_Q5_1, 1},         {"q8_0", FT_Q8_0, LW_TYPE_Q8_0, 1},
    {"q2_k", FT_Q2_K, LW_TYPE_Q2_K, 1},         {"q2_k_s", FT_Q2_K_S, LW_TYPE_Q2_K, 1},
    {"q3_k_s", FT_Q3_K_S, LW_TYPE_Q3_K, 1},     {"q3_k_m", FT_Q3_K_M, LW_TYPE_Q3_K, 1},
    {"q3_k_l", FT_Q3_K_L, LW_TYPE_Q3_K, 1},     {"q4_k_s", FT_Q4_K_S, LW_TYPE_Q4_K, 1},
    {"q4_k_m", FT_Q4_K_M, LW_TYPE_Q4_K, 1},     {"q5_k_s", FT_Q5_K_S, LW_TYPE_Q5_K, 1},
    {"q5_k_m", FT_Q5_K_M, LW_TYPE_Q5_K, 1},     {"q6_k", FT_Q6_K, LW_TYPE_Q6_K, 1},
    {"iq2_xxs", FT_IQ2_XXS, LW_TYPE_IQ2_XXS, 1}, {"iq2_xs", FT_IQ2_XS, LW_TYPE_IQ2_XS, 1},
    {"iq2_s", FT_IQ2_S, LW_TYPE_IQ2_XS, 1},     {"iq2_m", FT_IQ2_M, LW_TYPE_IQ2_S, 1},
    {"iq3_xxs", FT_IQ3_XXS, LW_TYPE_IQ3_XXS, 1}, {"iq3_xs", FT_IQ3_XS, LW_TYPE_IQ3_S, 1},
    {"iq3_s", FT_IQ3_S, LW_TYPE_IQ3_S, 1},      {"iq3_m", FT_IQ3_M, LW_TYPE_IQ3_S, 1},
    {"iq1_s", FT_IQ1_S, LW_TYPE_IQ1_S, 1},      {"iq1_m", FT_IQ1_M, LW_TYPE_IQ1_M, 1},
    {"iq4_nl", FT_IQ4_NL, LW_TYPE_IQ4_NL, 1},   {"iq4_xs", FT_IQ4_XS, LW_TYPE_IQ4_XS, 1},
    {"tq1_0", FT_TQ1_0, LW_TYPE_TQ1_0, 1},      {"tq2_0", FT_TQ2_0, LW_TYPE_TQ2_0, 1},
    {"mxfp4_moe", FT_MXFP4_MOE, LW_TYPE_MXFP4, 1}, {"q1_0", FT_Q1_0, LW_TYPE_Q1_0, 1},
    {"q2_0", FT_Q2_0, LW_TYPE_Q2_0, 1},
    /* pure tensor types */
    {"q3_k", FT_Q3_K_M, LW_TYPE_Q3_K, 0},       {"q4_k", FT_Q4_K_M, LW_TYPE_Q4_K, 0},
    {"q5_k", FT_Q5_K_M, LW_TYPE_Q5_K, 0},       {"mxfp4", FT_MXFP4_MOE, LW_TYPE_MXFP4, 0},
    {"nvfp4", FT_NVFP4, LW_TYPE_NVFP4, 0},
};
/* clang-format on */

const lw__synth_ftype *lw__synth_ftype_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++) {
        const char *a = ftypes[i].name, *b = name;
        while (*a && (*b == *a || (*b >= 'A' && *b <= 'Z' && *b - 'A' + 'a' == *a))) a++, b++;
        if (!*a && !*b) return &ftypes[i];
    }
    return NULL;
}

const lw__synth_ftype *lw__synth_ftype_at(size_t i) {
    return i < sizeof ftypes / sizeof ftypes[0] ? &ftypes[i] : NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * Tensor categories (tensor_get_category)
 * ------------------------------------------------------------------------------------------------------- */

typedef enum cat {
    C_TOKEN_EMBD,
    C_Q,
    C_V,
    C_K,
    C_QKV,
    C_KV_B,
    C_OUT,
    C_UP,
    C_GATE,
    C_DOWN,
    C_OUTPUT,
    C_OTHER
} cat;

static cat category(const char *name) {
    if (!strcmp(name, "output.weight")) return C_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return C_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight")) return C_QKV;
    if (strstr(name, "attn_kv_b.weight")) return C_KV_B;
    if (strstr(name, "attn_v.weight")) return C_V;
    if (strstr(name, "attn_k.weight")) return C_K;
    if (strstr(name, "attn_q.weight")) return C_Q;
    if (strstr(name, "attn_output.weight")) return C_OUT;
    if (strstr(name, "ffn_up")) return C_UP;
    if (strstr(name, "ffn_gate")) return C_GATE;
    if (strstr(name, "ffn_down")) return C_DOWN;
    return C_OTHER;
}

static int is_attn_v(cat c) {
    return c == C_V || c == C_QKV || c == C_KV_B;
}

static int use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static int64_t block_size(uint32_t type) {
    const lw_type_info *ti = lw_type_get(type);
    return ti ? ti->block_size : 1;
}

/* tensor_type_fallback: a row length that is not whole blocks of the chosen type gets a compatible one. */
static uint32_t fallback(int64_t ncols, uint32_t t) {
    if (ncols % block_size(t) == 0) return t;
    uint32_t r = t;
    switch (t) {
    case LW_TYPE_IQ1_S:
    case LW_TYPE_IQ1_M:
    case LW_TYPE_IQ2_XXS:
    case LW_TYPE_IQ2_XS:
    case LW_TYPE_IQ2_S:
    case LW_TYPE_IQ3_XXS:
    case LW_TYPE_IQ3_S:
    case LW_TYPE_IQ4_XS:
        r = LW_TYPE_IQ4_NL;
        break;
    case LW_TYPE_Q2_0:
    case LW_TYPE_Q2_K:
    case LW_TYPE_Q3_K:
    case LW_TYPE_TQ1_0:
    case LW_TYPE_TQ2_0:
        r = LW_TYPE_Q4_0;
        break;
    case LW_TYPE_Q4_K:
        r = LW_TYPE_Q5_0;
        break;
    case LW_TYPE_Q5_K:
        r = LW_TYPE_Q5_1;
        break;
    case LW_TYPE_Q6_K:
        r = LW_TYPE_Q8_0;
        break;
    default:
        /* llama.cpp keeps 32-blocks here (they end as F16 below) and throws for larger ones: no such file */
        if (block_size(t) > 32) return LW_TYPE_COUNT;
        break;
    }
    return ncols % block_size(r) == 0 ? r : LW_TYPE_F16;
}

/* ---------------------------------------------------------------------------------------------------------
 * llama_tensor_get_type_impl, branch for branch (Falcon and 70B branches dropped: no preset has them)
 * ------------------------------------------------------------------------------------------------------- */

static uint32_t get_type_impl(uint32_t ft, uint32_t nt, const lw__synth_tensor *t, cat c, int n_layer,
                              int n_gqa, int tied, int n_expert, int i_wv, int n_wv, int i_down) {
    const int i = t->layer;         /* = i_ffn_down / i_ffn_gate / i_ffn_up, see the file comment */
    const int moe8 = n_expert == 8; /* llama.cpp's Mixtral-8x rules */
    const int iq_low = ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ2_S ||
                       ft == FT_IQ2_M || ft == FT_IQ1_M;
    if (c == C_OUTPUT || (tied && c == C_TOKEN_EMBD)) {
        if (ft == FT_MXFP4_MOE)
            nt = LW_TYPE_Q8_0;
        else if (t->ne[0] % block_size(nt) != 0)
            nt = LW_TYPE_Q8_0;
        else if (iq_low || ft == FT_IQ3_XXS)
            nt = LW_TYPE_Q5_K;
        else if (nt != LW_TYPE_Q8_0)
            nt = LW_TYPE_Q6_K;
    } else if (ft == FT_MXFP4_MOE) {
        nt = t->ne[2] > 1 ? LW_TYPE_MXFP4 : LW_TYPE_Q8_0; /* experts' stacks MXFP4, the rest Q8_0 */
    } else if (c == C_TOKEN_EMBD) {
        if (ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ1_M)
            nt = LW_TYPE_Q2_K;
        else if (ft == FT_IQ2_S || ft == FT_IQ2_M)
            nt = LW_TYPE_IQ3_S;
        else if (ft == FT_IQ3_XXS)
            nt = LW_TYPE_IQ3_S;
        else if (ft == FT_TQ1_0 || ft == FT_TQ2_0 || ft == FT_Q2_0)
            nt = LW_TYPE_Q4_K;
    } else if (iq_low) {
        const int iq2sm = ft == FT_IQ2_S || ft == FT_IQ2_M;
        if (is_attn_v(c)) {
            nt = n_gqa >= 4 || n_expert >= 4 ? LW_TYPE_Q4_K : iq2sm ? LW_TYPE_IQ3_S : LW_TYPE_Q2_K;
        } else if (moe8 && c == C_K) {
            nt = LW_TYPE_Q4_K;
        } else if (c == C_DOWN) { /* the raw counter here, not the block from the name */
            if (i_down < n_layer / 8) nt = iq2sm ? LW_TYPE_IQ3_S : LW_TYPE_Q2_K;
        } else if (c == C_OUT) {
            if (moe8)
                nt = LW_TYPE_Q5_K;
            else if (ft == FT_IQ1_S || ft == FT_IQ1_M)
                nt = LW_TYPE_IQ2_XXS;
            else if (iq2sm)
                nt = LW_TYPE_IQ3_S;
        }
    } else if (is_attn_v(c)) {
        if (ft == FT_Q2_K)
            nt = n_gqa >= 4 ? LW_TYPE_Q4_K : LW_TYPE_Q3_K;
        else if (ft == FT_Q2_K_S && n_gqa >= 4)
            nt = LW_TYPE_Q4_K;
        else if (ft == FT_IQ3_XXS)
            nt = n_gqa >= 4 ? LW_TYPE_Q4_K : LW_TYPE_IQ3_S; /* no imatrix */
        else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && n_gqa >= 4)
            nt = LW_TYPE_Q4_K;
        else if (ft == FT_IQ3_M)
            nt = LW_TYPE_Q4_K;
        else if (ft == FT_Q3_K_M)
            nt = i_wv < 2 ? LW_TYPE_Q5_K : LW_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L)
            nt = LW_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && n_gqa >= 4)
            nt = LW_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i_wv, n_wv))
            nt = LW_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && i_wv < 4)
            nt = LW_TYPE_Q5_K;
        if (moe8) nt = LW_TYPE_Q8_0;
    } else if (c == C_K || c == C_Q) {
        if (moe8 && c == C_K)
            nt = LW_TYPE_Q8_0;
        else if (ft == FT_IQ3_XS)
            nt = LW_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS)
            nt = LW_TYPE_IQ2_S;
    } else if (c == C_DOWN) {
        const int n = n_layer;
        if (ft == FT_Q2_K)
            nt = LW_TYPE_Q3_K;
        else if (ft == FT_Q2_K_S) {
            if (i < n / 8) nt = LW_TYPE_Q4_K;
        } else if (ft == FT_IQ3_XXS)
            nt = i < n / 8 ? LW_TYPE_Q4_K : LW_TYPE_Q3_K; /* no imatrix */
        else if (ft == FT_Q3_K_M)
            nt = i < n / 16 ? LW_TYPE_Q5_K : LW_TYPE_Q4_K; /* not Falcon  */
        else if (ft == FT_IQ3_M && (i < n / 8 || (moe8 && use_more_bits(i, n))))
            nt = LW_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L)
            nt = LW_TYPE_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (use_more_bits(i, n)) nt = LW_TYPE_Q6_K;
        } else if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS))
            nt = LW_TYPE_Q5_K; /* no imatrix */
        else if (ft == FT_Q5_K_M && use_more_bits(i, n))
            nt = LW_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && i < n / 8)
            nt = LW_TYPE_Q5_K;
    } else if (c == C_OUT && moe8) {
        if (ft == FT_Q2_K || ft == FT_IQ3_XS || ft == FT_IQ3_XXS || ft == FT_Q3_K_S || ft == FT_Q3_K_M ||
            ft == FT_IQ4_NL || ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ3_S || ft == FT_IQ3_M ||
            ft == FT_IQ4_XS)
            nt = LW_TYPE_Q5_K;
    } else if (c == C_OUT) {
        if (ft == FT_Q2_K)
            nt = LW_TYPE_Q3_K;
        else if (ft == FT_IQ3_XXS)
            nt = LW_TYPE_IQ3_S;
        else if (ft == FT_Q3_K_M)
            nt = LW_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L)
            nt = LW_TYPE_Q5_K;
        else if (ft == FT_IQ3_M)
            nt = LW_TYPE_Q4_K;
    } else if (c == C_GATE || c == C_UP) {
        if (ft == FT_IQ3_XS && i >= n_layer / 8 && i < 7 * n_layer / 8) nt = LW_TYPE_IQ3_XXS;
    }
    return nt;
}

uint32_t lw__synth_tensor_type(const lw__synth_ftype *ft, int pure, const lw__synth_preset *p,
                               uint32_t n_layer, int tied, const lw__synth_tensor *t) {
    /* tensor_allows_quantization: 2-D or 3-D, named *weight, not a norm, not a MoE router, not gemma4's
     * per_layer_model_proj ("not too big"); everything else keeps its F32 source (convert_hf_to_gguf.py
     * writes routers in F32 whatever the file type; the projection stays as llama-quantize found it). */
    size_t len = strlen(t->name);
    if (t->n_dims < 2 || len < 6 || strcmp(t->name + len - 6, "weight") || strstr(t->name, "_norm.weight") ||
        strstr(t->name, "ffn_gate_inp.weight") || strstr(t->name, "per_layer_model_proj"))
        return LW_TYPE_F32;
    const lw_type_info *ti = lw_type_get(ft->type);
    if (!ti || !ti->is_quantized) return ft->type; /* f32/f16/bf16: every 2-D weight converted */
    uint32_t nt = ft->type;
    const cat c = category(t->name);
    if (ft->mix && !pure) {
        /* i_attention_wv counts the attn_v tensors before this one, n_attention_wv all of them: the block
         * index and the block count, but where blocks lack attn_v (gemma4's shared and K=V blocks) */
        int i_wv = t->layer, n_wv = (int)n_layer;
        if (is_attn_v(c) && !strcmp(p->arch, "gemma4")) {
            i_wv = n_wv = 0;
            for (uint32_t l = 0; l < n_layer; l++)
                if (lw__synth_has_attn_v(p, n_layer, l)) i_wv += (int)l < t->layer, n_wv++;
        }
        /* i_ffn_down counts the ffn_down tensors before this one: gemma4's MoE blocks have two (the dense
         * ffn_down, then ffn_down_exps) */
        const int i_down = p->n_expert && !strcmp(p->arch, "gemma4")
                               ? 2 * t->layer + (strstr(t->name, "ffn_down_exps") != NULL)
                               : t->layer;
        nt = get_type_impl(ft->ftype, nt, t, c, (int)n_layer, (int)(p->n_head / p->n_head_kv), tied,
                           (int)p->n_expert, i_wv, n_wv, i_down);
    }
    return fallback(t->ne[0], nt);
}
