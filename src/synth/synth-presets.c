/* Synthetic model presets: real architectures' hyper-parameters and the tensors llama.cpp's loaders create
 * for them (llama.cpp src/models/{llama,qwen2,qwen3,gemma2,gemma3,phi3,qwen3moe,gemma4}.cpp,
 * load_arch_tensors). */
#include "synth/synth.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Presets. Full-size ones copy the published configs (config.json of each model); tiny ones keep each
 * architecture's distinctive tensors and keys at dim 64 so llama.cpp loads them in milliseconds.
 * ------------------------------------------------------------------------------------------------------- */

static const lw__synth_preset presets[] = {
    {.name = "tiny",
     .arch = "llama",
     .n_embd = 64,
     .n_layer = 2,
     .n_head = 4,
     .n_head_kv = 2,
     .n_ff = 192,
     .n_ctx_train = 2048,
     .rope_base = 10000.f,
     .rms_eps = 1e-5f,
     .about = "llama arch, dim 64, 2 layers, 4/2 heads, ffn 192, untied head"},
    {.name = "tiny-256",
     .arch = "llama",
     .n_embd = 256,
     .n_layer = 2,
     .n_head = 8,
     .n_head_kv = 2,
     .n_ff = 768,
     .n_ctx_train = 2048,
     .rope_base = 10000.f,
     .rms_eps = 1e-5f,
     .tied = 1,
     .about = "llama arch, dim 256, 2 layers, 8/2 heads, ffn 768, tied: rows fit 256-blocks (K, IQ types)"},
    {.name = "llama-3.2-1b",
     .arch = "llama",
     .n_embd = 2048,
     .n_layer = 16,
     .n_head = 32,
     .n_head_kv = 8,
     .n_ff = 8192,
     .n_ctx_train = 131072,
     .rope_base = 500000.f,
     .rms_eps = 1e-5f,
     .tied = 1,
     .llama3_factor = 32.f,
     .llama3_low = 1.f,
     .llama3_high = 4.f,
     .llama3_orig_ctx = 8192,
     .about = "Llama 3.2 1B: 2048 dim, 16 layers, 32/8 heads, ffn 8192, tied, llama3 rope (factor 32)"},
    {.name = "llama-3.1-8b",
     .arch = "llama",
     .n_embd = 4096,
     .n_layer = 32,
     .n_head = 32,
     .n_head_kv = 8,
     .n_ff = 14336,
     .n_ctx_train = 131072,
     .rope_base = 500000.f,
     .rms_eps = 1e-5f,
     .llama3_factor = 8.f,
     .llama3_low = 1.f,
     .llama3_high = 4.f,
     .llama3_orig_ctx = 8192,
     .about = "Llama 3.1 8B: 4096 dim, 32 layers, 32/8 heads, ffn 14336, untied, llama3 rope (factor 8)"},
    {.name = "qwen2.5-0.5b",
     .arch = "qwen2",
     .n_embd = 896,
     .n_layer = 24,
     .n_head = 14,
     .n_head_kv = 2,
     .n_ff = 4864,
     .n_ctx_train = 32768,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .qkv_bias = 1,
     .about = "Qwen2.5 0.5B: 896 dim, 24 layers, 14/2 heads, ffn 4864, q/k/v biases, tied"},
    {.name = "qwen3-0.6b",
     .arch = "qwen3",
     .n_embd = 1024,
     .n_layer = 28,
     .n_head = 16,
     .n_head_kv = 8,
     .n_ff = 3072,
     .head_dim = 128,
     .n_ctx_train = 40960,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .qk_norm = 1,
     .about = "Qwen3 0.6B: 1024 dim, 28 layers, 16/8 heads of 128, ffn 3072, q/k norm, tied"},
    {.name = "gemma-3-1b",
     .arch = "gemma3",
     .n_embd = 1152,
     .n_layer = 26,
     .n_head = 4,
     .n_head_kv = 1,
     .n_ff = 6912,
     .head_dim = 256,
     .n_ctx_train = 32768,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .qk_norm = 1,
     .post_norms = 1,
     .sliding_window = 512,
     .rope_base_swa = 10000.f,
     .about = "Gemma 3 1B: 1152 dim, 26 layers (5 SWA 512 : 1 global), 4/1 heads of 256, ffn 6912, tied"},
    {.name = "phi-3-mini",
     .arch = "phi3",
     .n_embd = 3072,
     .n_layer = 32,
     .n_head = 32,
     .n_head_kv = 32,
     .n_ff = 8192,
     .n_ctx_train = 4096,
     .rope_base = 10000.f,
     .rms_eps = 1e-5f,
     .fused_qkv = 1,
     .about = "Phi-3 mini 4k: 3072 dim, 32 layers, 32 heads, ffn 8192, fused qkv, untied"},
    {.name = "tiny-qwen2",
     .arch = "qwen2",
     .n_embd = 64,
     .n_layer = 2,
     .n_head = 4,
     .n_head_kv = 2,
     .n_ff = 192,
     .n_ctx_train = 4096,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .qkv_bias = 1,
     .about = "qwen2 arch, dim 64, 2 layers, 4/2 heads, q/k/v biases, tied"},
    {.name = "tiny-qwen3",
     .arch = "qwen3",
     .n_embd = 64,
     .n_layer = 2,
     .n_head = 4,
     .n_head_kv = 2,
     .n_ff = 192,
     .head_dim = 32,
     .n_ctx_train = 4096,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .qk_norm = 1,
     .about = "qwen3 arch, dim 64, 2 layers, 4/2 heads of 32 (q dim 128 != dim), q/k norm, tied"},
    {.name = "tiny-gemma2",
     .arch = "gemma2",
     .n_embd = 64,
     .n_layer = 2,
     .n_head = 4,
     .n_head_kv = 2,
     .n_ff = 192,
     .head_dim = 32,
     .n_ctx_train = 8192,
     .rope_base = 10000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .post_norms = 1,
     .sliding_window = 16,
     .attn_softcap = 50.f,
     .final_softcap = 30.f,
     .about = "gemma2 arch, dim 64, 2 layers (SWA 16 / global), heads of 32, post norms, soft-capping"},
    {.name = "tiny-gemma3",
     .arch = "gemma3",
     .n_embd = 64,
     .n_layer = 6,
     .n_head = 4,
     .n_head_kv = 1,
     .n_ff = 192,
     .head_dim = 32,
     .n_ctx_train = 32768,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .qk_norm = 1,
     .post_norms = 1,
     .sliding_window = 16,
     .rope_base_swa = 10000.f,
     .about = "gemma3 arch, dim 64, 6 layers (5 SWA 16 + 1 global), 4/1 heads of 32, q/k norm, post norms"},
    {.name = "qwen3-30b-a3b",
     .arch = "qwen3moe",
     .n_embd = 2048,
     .n_layer = 48,
     .n_head = 32,
     .n_head_kv = 4,
     .n_ff = 6144,
     .head_dim = 128,
     .n_ctx_train = 40960,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .qk_norm = 1,
     .n_expert = 128,
     .n_expert_used = 8,
     .n_ff_exp = 768,
     .about =
         "Qwen3 30B-A3B: 2048 dim, 48 layers, 32/4 heads of 128, 128 experts (8 used) of ffn 768, untied"},
    {.name = "tiny-qwen3moe",
     .arch = "qwen3moe",
     .n_embd = 64,
     .n_layer = 2,
     .n_head = 4,
     .n_head_kv = 2,
     .n_ff = 192,
     .head_dim = 32,
     .n_ctx_train = 4096,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .qk_norm = 1,
     .n_expert = 16,
     .n_expert_used = 4,
     .n_ff_exp = 32,
     .about =
         "qwen3moe arch, dim 64, 2 layers, 4/2 heads of 32, q/k norm, 16 experts (4 used) of ffn 32, untied"},
    /* Gemma 4 E2B, text decoder of google/gemma-4-E2B's config.json (text_config). What llama.cpp's code
     * fixes: 35 blocks is its E2B type, shared blocks reuse block n_kv - 2 (sliding) / n_kv - 1 (global),
     * the global blocks' RoPE rotates head_dim_full x partial_rotary_factor dims through rope_freqs. The
     * rest is the published config as its copies show it (not derivable from llama.cpp): width 1536, 8
     * heads / 1 KV head, heads of 256 (sliding) and 512 (global), FFN 6144 doubled on the 20 shared
     * blocks (use_double_wide_mlp), per-layer input 256, window 512, 4 sliding : 1 global, RoPE bases 1e4
     * and 1e6 with partial factor 0.25, final soft-cap 30, tied head. Guesses (documented): shared blocks
     * carry no attn_k/attn_v/attn_k_norm (llama.cpp's loader makes them optional there, and they are never
     * read), every block has layer_output_scale (convert maps HF's layer_scalar to it), attn_v on every
     * block that has its own KV (attention_k_eq_v is false for E2B). */
    {.name = "gemma-4-e2b",
     .arch = "gemma4",
     .n_embd = 1536,
     .n_layer = 35,
     .n_head = 8,
     .n_head_kv = 1,
     .n_ff = 6144,
     .head_dim = 512,
     .n_ctx_train = 131072,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .sliding_window = 512,
     .rope_base_swa = 10000.f,
     .final_softcap = 30.f,
     .head_dim_swa = 256,
     .swa_period = 5,
     .rope_partial = 0.25f,
     .n_kv_shared = 20,
     .n_embd_per_layer = 256,
     .double_wide_mlp = 1,
     .layer_scale = 1,
     .about = "Gemma 4 E2B: 1536 dim, 35 layers (4 SWA 512 : 1 global, last 20 share KV), 8/1 heads of "
              "256/512, ffn 6144 (x2 shared), per-layer input 256, tied"},
    {.name = "tiny-gemma4",
     .arch = "gemma4",
     .n_embd = 64,
     .n_layer = 6,
     .n_head = 4,
     .n_head_kv = 1,
     .n_ff = 96,
     .head_dim = 64,
     .n_ctx_train = 32768,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .sliding_window = 16,
     .rope_base_swa = 10000.f,
     .final_softcap = 30.f,
     .head_dim_swa = 32,
     .swa_period = 3,
     .rope_partial = 0.25f,
     .n_kv_shared = 3,
     .n_embd_per_layer = 16,
     .double_wide_mlp = 1,
     .layer_scale = 1,
     .about = "gemma4 arch (E2B-like), dim 64, 6 layers (2 SWA 16 : 1 global, last 3 share KV), 4/1 heads "
              "of 32/64, ffn 96 (x2 shared), per-layer input 16, tied"},
    /* Gemma 4 26B-A4B, text decoder of google/gemma-4-26B-A4B's config.json (text_config), as its copies
     * show it (not derivable from llama.cpp's code, which fixes only that 30 blocks is its 26B_A4B type and
     * how a block with a router computes): width 2816, 16 heads with 8 KV heads on sliding blocks and 2 on
     * global ones (attention_k_eq_v: no attn_v there), heads of 256/512, window 1024, 5 sliding : 1 global,
     * a dense FFN of 2112 beside 128 experts (8 used) of 704 in every block, no per-layer input, no shared
     * KV, tied head, final soft-cap 30. Guesses (documented): the experts' gate and up fused into
     * ffn_gate_up_exps (HF's experts.gate_up_proj, mapped as such), ffn_down_exps.scale present
     * (router.per_expert_scale), layer_output_scale on every block, context 262144. */
    {.name = "gemma-4-26b-a4b",
     .arch = "gemma4",
     .n_embd = 2816,
     .n_layer = 30,
     .n_head = 16,
     .n_head_kv = 8,
     .n_ff = 2112,
     .head_dim = 512,
     .n_ctx_train = 262144,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .sliding_window = 1024,
     .rope_base_swa = 10000.f,
     .final_softcap = 30.f,
     .n_expert = 128,
     .n_expert_used = 8,
     .n_ff_exp = 704,
     .head_dim_swa = 256,
     .swa_period = 6,
     .n_head_kv_global = 2,
     .rope_partial = 0.25f,
     .k_eq_v = 1,
     .layer_scale = 1,
     .about = "Gemma 4 26B-A4B: 2816 dim, 30 layers (5 SWA 1024 : 1 global), 16 heads (8/2 KV) of 256/512, "
              "ffn 2112 + 128 experts (8 used) of 704, tied"},
    {.name = "tiny-gemma4-moe",
     .arch = "gemma4",
     .n_embd = 64,
     .n_layer = 3,
     .n_head = 4,
     .n_head_kv = 2,
     .n_ff = 96,
     .head_dim = 64,
     .n_ctx_train = 32768,
     .rope_base = 1000000.f,
     .rms_eps = 1e-6f,
     .tied = 1,
     .sliding_window = 16,
     .rope_base_swa = 10000.f,
     .final_softcap = 30.f,
     .n_expert = 16,
     .n_expert_used = 4,
     .n_ff_exp = 32,
     .head_dim_swa = 32,
     .swa_period = 3,
     .n_head_kv_global = 1,
     .rope_partial = 0.25f,
     .k_eq_v = 1,
     .layer_scale = 1,
     .about = "gemma4 arch (26B-A4B-like), dim 64, 3 layers (2 SWA 16 : 1 global), 4 heads (2/1 KV) of "
              "32/64, ffn 96 + 16 experts (4 used) of 32, tied"},
    {.name = "tiny-phi3",
     .arch = "phi3",
     .n_embd = 64,
     .n_layer = 2,
     .n_head = 4,
     .n_head_kv = 4,
     .n_ff = 192,
     .n_ctx_train = 4096,
     .rope_base = 10000.f,
     .rms_eps = 1e-5f,
     .fused_qkv = 1,
     .about = "phi3 arch, dim 64, 2 layers, 4 heads, fused attn_qkv, ffn_up 2*ffn (gate+up), untied"},
};

const lw__synth_preset *lw__synth_preset_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

const lw__synth_preset *lw__synth_preset_at(size_t i) {
    return i < sizeof presets / sizeof presets[0] ? &presets[i] : NULL;
}

uint32_t lw__synth_head_dim(const lw__synth_preset *p) {
    return p->head_dim ? p->head_dim : p->n_embd / p->n_head;
}

int lw__synth_is_swa(const lw__synth_preset *p, uint32_t il) {
    return p->swa_period > 0 && il % p->swa_period < p->swa_period - 1;
}

uint32_t lw__synth_kv_shared(const lw__synth_preset *p, uint32_t n_layer) {
    if (!p->n_kv_shared || p->n_kv_shared >= p->n_layer || !p->swa_period) return 0;
    if (n_layer == p->n_layer) return p->n_kv_shared;
    const uint64_t own_full = p->n_layer - p->n_kv_shared, per = p->swa_period;
    uint64_t own = ((uint64_t)n_layer * own_full + p->n_layer - 1) / p->n_layer; /* same share, rounded up */
    own = (own + per - 1) / per * per;                                           /* whole periods       */
    return own >= n_layer ? 0 : n_layer - (uint32_t)own;
}

/* ---------------------------------------------------------------------------------------------------------
 * Tensor plan
 * ------------------------------------------------------------------------------------------------------- */

/* Appends one tensor (or only counts it when the output array is full / NULL). */
typedef struct plan {
    lw__synth_tensor *out; /* destination, may be NULL */
    size_t max;            /* capacity of out          */
    size_t n;              /* tensors listed so far    */
} plan;

/* A 1-D (ne1 == 0), 2-D or (ne2 > 0) 3-D tensor. */
static void add3(plan *pl, int layer, const char *suffix, lw__synth_kind kind, int64_t ne0, int64_t ne1,
                 int64_t ne2) {
    if (pl->out && pl->n < pl->max) {
        lw__synth_tensor *t = &pl->out[pl->n];
        memset(t, 0, sizeof *t);
        if (layer >= 0)
            snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, suffix);
        else
            snprintf(t->name, sizeof t->name, "%s", suffix);
        t->n_dims = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
        t->ne[0] = ne0;
        t->ne[1] = ne1 > 0 ? ne1 : 1;
        t->ne[2] = ne2 > 0 ? ne2 : 1;
        t->layer = layer;
        t->kind = kind;
        t->type = LW_TYPE_F32;
    }
    pl->n++;
}

static void add(plan *pl, int layer, const char *suffix, lw__synth_kind kind, int64_t ne0, int64_t ne1) {
    add3(pl, layer, suffix, kind, ne0, ne1, 0);
}

/* gemma4 (llama.cpp's llama_model_gemma4::load_arch_tensors): per-block head sizes and FFN widths, the
 * per-layer input tables, one rope_freqs table for the global blocks. */
static size_t plan_gemma4(const lw__synth_preset *p, uint32_t n_layer, int64_t n_vocab, plan *pl) {
    const int64_t d = p->n_embd, PL = p->n_embd_per_layer;
    const uint32_t n_kv = n_layer - lw__synth_kv_shared(p, n_layer);
    int any_global = 0;
    for (uint32_t il = 0; il < n_layer; il++) any_global |= !lw__synth_is_swa(p, il);
    add(pl, -1, "token_embd.weight", LW_SYNTH_MATRIX, d, n_vocab);
    if (PL > 0) {
        add(pl, -1, "per_layer_token_embd.weight", LW_SYNTH_MATRIX, PL * n_layer, n_vocab);
        add(pl, -1, "per_layer_model_proj.weight", LW_SYNTH_MATRIX, d, PL * n_layer);
        add(pl, -1, "per_layer_proj_norm.weight", LW_SYNTH_NORM, PL, 0);
    }
    if (any_global && p->rope_partial > 0.f)
        add(pl, -1, "rope_freqs.weight", LW_SYNTH_ROPE_PROP, p->head_dim / 2, 0);
    for (int il = 0; il < (int)n_layer; il++) {
        const int swa = lw__synth_is_swa(p, (uint32_t)il), own = (uint32_t)il < n_kv;
        const int64_t hd = swa ? p->head_dim_swa : p->head_dim;
        const int64_t nkv = (swa || !p->n_head_kv_global ? p->n_head_kv : p->n_head_kv_global) * hd;
        const int64_t ff = p->double_wide_mlp && !own ? 2 * (int64_t)p->n_ff : p->n_ff;
        add(pl, il, "attn_norm.weight", LW_SYNTH_NORM, d, 0);
        add(pl, il, "attn_q.weight", LW_SYNTH_MATRIX, d, hd * p->n_head);
        if (own) add(pl, il, "attn_k.weight", LW_SYNTH_MATRIX, d, nkv);
        if (lw__synth_has_attn_v(p, n_layer, (uint32_t)il))
            add(pl, il, "attn_v.weight", LW_SYNTH_MATRIX, d, nkv);
        add(pl, il, "attn_output.weight", LW_SYNTH_MATRIX, hd * p->n_head, d);
        add(pl, il, "attn_q_norm.weight", LW_SYNTH_NORM, hd, 0);
        if (own) add(pl, il, "attn_k_norm.weight", LW_SYNTH_NORM, hd, 0);
        add(pl, il, "post_attention_norm.weight", LW_SYNTH_NORM, d, 0);
        add(pl, il, "ffn_norm.weight", LW_SYNTH_NORM, d, 0);
        add(pl, il, "ffn_gate.weight", LW_SYNTH_MATRIX, d, ff);
        add(pl, il, "ffn_up.weight", LW_SYNTH_MATRIX, d, ff);
        add(pl, il, "ffn_down.weight", LW_SYNTH_MATRIX, ff, d);
        add(pl, il, "post_ffw_norm.weight", LW_SYNTH_NORM, d, 0);
        if (PL > 0) {
            add(pl, il, "inp_gate.weight", LW_SYNTH_MATRIX, d, PL);
            add(pl, il, "proj.weight", LW_SYNTH_MATRIX, PL, d);
            add(pl, il, "post_norm.weight", LW_SYNTH_NORM, d, 0);
        }
        if (p->n_expert) { /* the router, the experts' norms, fused gate|up and down stacks, per-expert scales
                            */
            const int64_t ne = p->n_expert, fe = p->n_ff_exp;
            add(pl, il, "ffn_gate_inp.weight", LW_SYNTH_MATRIX, d, ne);
            add(pl, il, "ffn_gate_inp.scale", LW_SYNTH_NORM, d, 0);
            add(pl, il, "pre_ffw_norm_2.weight", LW_SYNTH_NORM, d, 0);
            add(pl, il, "post_ffw_norm_1.weight", LW_SYNTH_NORM, d, 0);
            add(pl, il, "post_ffw_norm_2.weight", LW_SYNTH_NORM, d, 0);
            add3(pl, il, "ffn_gate_up_exps.weight", LW_SYNTH_MATRIX, d, 2 * fe, ne);
            add3(pl, il, "ffn_down_exps.weight", LW_SYNTH_MATRIX, fe, d, ne);
            add(pl, il, "ffn_down_exps.scale", LW_SYNTH_NORM, ne, 0);
        }
        if (p->layer_scale) add(pl, il, "layer_output_scale.weight", LW_SYNTH_NORM, 1, 0);
    }
    add(pl, -1, "output_norm.weight", LW_SYNTH_NORM, d, 0);
    if (!p->tied) add(pl, -1, "output.weight", LW_SYNTH_MATRIX, d, n_vocab);
    return pl->n;
}

int lw__synth_has_attn_v(const lw__synth_preset *p, uint32_t n_layer, uint32_t il) {
    if (strcmp(p->arch, "gemma4")) return !p->fused_qkv;
    return il < n_layer - lw__synth_kv_shared(p, n_layer) && !(p->k_eq_v && !lw__synth_is_swa(p, il));
}

size_t lw__synth_plan(const lw__synth_preset *p, uint32_t n_layer, int64_t n_vocab, lw__synth_tensor *out,
                      size_t max) {
    plan pl = {out, max, 0};
    if (!strcmp(p->arch, "gemma4")) return plan_gemma4(p, n_layer, n_vocab, &pl);
    const int64_t d = p->n_embd, hd = lw__synth_head_dim(p);
    const int64_t nq = hd * p->n_head, nkv = hd * p->n_head_kv, ff = p->n_ff;

    /* Order as convert_hf_to_gguf.py writes them: embeddings, generated rope factors, blocks, head. */
    add(&pl, -1, "token_embd.weight", LW_SYNTH_MATRIX, d, n_vocab);
    if (p->llama3_factor > 0.f) add(&pl, -1, "rope_freqs.weight", LW_SYNTH_ROPE_FREQS, hd / 2, 0);
    for (int il = 0; il < (int)n_layer; il++) {
        add(&pl, il, "attn_norm.weight", LW_SYNTH_NORM, d, 0);
        if (p->fused_qkv) {
            add(&pl, il, "attn_qkv.weight", LW_SYNTH_MATRIX, d, nq + 2 * nkv);
        } else {
            add(&pl, il, "attn_q.weight", LW_SYNTH_MATRIX, d, nq);
            add(&pl, il, "attn_k.weight", LW_SYNTH_MATRIX, d, nkv);
            add(&pl, il, "attn_v.weight", LW_SYNTH_MATRIX, d, nkv);
        }
        if (p->qkv_bias) {
            add(&pl, il, "attn_q.bias", LW_SYNTH_BIAS, nq, 0);
            add(&pl, il, "attn_k.bias", LW_SYNTH_BIAS, nkv, 0);
            add(&pl, il, "attn_v.bias", LW_SYNTH_BIAS, nkv, 0);
        }
        if (p->qk_norm) {
            add(&pl, il, "attn_q_norm.weight", LW_SYNTH_NORM, hd, 0);
            add(&pl, il, "attn_k_norm.weight", LW_SYNTH_NORM, hd, 0);
        }
        add(&pl, il, "attn_output.weight", LW_SYNTH_MATRIX, nq, d);
        if (p->post_norms) add(&pl, il, "post_attention_norm.weight", LW_SYNTH_NORM, d, 0);
        add(&pl, il, "ffn_norm.weight", LW_SYNTH_NORM, d, 0);
        if (p->n_expert) { /* qwen3moe: the router and the experts' stacks, as convert_hf_to_gguf.py orders
                              them */
            const int64_t ne = p->n_expert, fe = p->n_ff_exp;
            add(&pl, il, "ffn_gate_inp.weight", LW_SYNTH_MATRIX, d, ne);
            add3(&pl, il, "ffn_down_exps.weight", LW_SYNTH_MATRIX, fe, d, ne);
            add3(&pl, il, "ffn_gate_exps.weight", LW_SYNTH_MATRIX, d, fe, ne);
            add3(&pl, il, "ffn_up_exps.weight", LW_SYNTH_MATRIX, d, fe, ne);
        } else if (p->fused_qkv) {
            add(&pl, il, "ffn_up.weight", LW_SYNTH_MATRIX, d, 2 * ff); /* phi3: gate and up stacked */
        } else {
            add(&pl, il, "ffn_gate.weight", LW_SYNTH_MATRIX, d, ff);
            add(&pl, il, "ffn_up.weight", LW_SYNTH_MATRIX, d, ff);
        }
        if (!p->n_expert) add(&pl, il, "ffn_down.weight", LW_SYNTH_MATRIX, ff, d);
        if (p->post_norms) add(&pl, il, "post_ffw_norm.weight", LW_SYNTH_NORM, d, 0);
    }
    add(&pl, -1, "output_norm.weight", LW_SYNTH_NORM, d, 0);
    if (!p->tied) add(&pl, -1, "output.weight", LW_SYNTH_MATRIX, d, n_vocab);
    return pl.n;
}
