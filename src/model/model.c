/* Model loading: architecture lookup, hyper-parameters from GGUF keys, weight binding by tensor name, and
 * reading every bound tensor from the byte source into one allocation (no mmap: the same path serves files,
 * memory and host callbacks in the browser). */
#include "model/model.h"

#include "cpu/engine-ops.h"
#include "rows/rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Architectures this build runs
 * ------------------------------------------------------------------------------------------------------- */

static const lw__arch_def arch_table[] = {
    /* name, RoPE, builder, Q prescaled, mixture of experts */
    {"llama", LW_ROPE_NORMAL, lw__build_llama, 0, 0},
    {"qwen2", LW_ROPE_NEOX, lw__build_llama, 0, 0},    /* + Q/K/V biases, optional output bias       */
    {"qwen3", LW_ROPE_NEOX, lw__build_llama, 0, 0},    /* + per-head Q/K RMSNorm before RoPE         */
    {"phi3", LW_ROPE_NEOX, lw__build_llama, 1, 0},     /* fused QKV and gate|up tensors, Q prescaled */
    {"gemma2", LW_ROPE_NEOX, lw__build_gemma, 1, 0},   /* GELU, post norms, SWA, soft-capping        */
    {"gemma3", LW_ROPE_NEOX, lw__build_gemma, 1, 0},   /* the same with per-head Q/K norms           */
    {"qwen3moe", LW_ROPE_NEOX, lw__build_llama, 0, 1}, /* qwen3 with a mixture of experts per block  */
    {"gemma4", LW_ROPE_NEOX, lw__build_gemma4, 0, 0},  /* per-block geometry, shared KV, per-layer input */
};

#define WEIGHT_ALIGN 64 /* every tensor starts on a cache line (and a SIMD load boundary) */

lw_model_params lw_model_default_params(void) {
    lw_model_params p = {0};
    return p;
}

/* ---------------------------------------------------------------------------------------------------------
 * Hyper-parameters
 * ------------------------------------------------------------------------------------------------------- */

/* Reads <arch>.<key> as u32: required, or def when absent. */
static lw_status hp_u32(lw_model *m, const char *key, int required, uint32_t def, uint32_t *out) {
    char full[128];
    snprintf(full, sizeof(full), "%s.%s", m->arch->name, key);
    lw_status st = lw_gguf_get_u32(m->gguf, full, out);
    if (st == LW_ERR_NOT_FOUND && !required) {
        *out = def;
        return LW_OK;
    }
    if (st == LW_ERR_NOT_FOUND) return lw__errorf(m->err, st, "missing key %s", full);
    if (st != LW_OK) return lw__errorf(m->err, st, "key %s: %s", full, lw_gguf_error(m->gguf));
    return LW_OK;
}

static lw_status hp_f32(lw_model *m, const char *key, int required, float def, float *out) {
    char full[128];
    snprintf(full, sizeof(full), "%s.%s", m->arch->name, key);
    lw_status st = lw_gguf_get_f32(m->gguf, full, out);
    if (st == LW_ERR_NOT_FOUND && !required) {
        *out = def;
        return LW_OK;
    }
    if (st == LW_ERR_NOT_FOUND) return lw__errorf(m->err, st, "missing key %s", full);
    if (st != LW_OK) return lw__errorf(m->err, st, "key %s: %s", full, lw_gguf_error(m->gguf));
    return LW_OK;
}

/* Reads <arch>.<key> as llama.cpp's get_key_or_arr does: one u32 for every block, or an array of exactly
 * n_layer integers (booleans count as 0/1), into out[il]; absent and not required: def for every block. */
static lw_status hp_u32_layers(lw_model *m, const char *key, int required, uint32_t def, uint32_t *out) {
    const uint32_t n = m->hp.n_layer;
    char full[128];
    snprintf(full, sizeof(full), "%s.%s", m->arch->name, key);
    const int64_t ki = lw_gguf_find_key(m->gguf, full);
    const lw_gguf_value *v = ki >= 0 ? lw_gguf_value_at(m->gguf, ki) : NULL;
    if (!v || v->type != LW_GGUF_ARRAY) {
        uint32_t one;
        lw_status st = hp_u32(m, key, required, def, &one);
        if (st != LW_OK) return st;
        for (uint32_t il = 0; il < n; il++) out[il] = one;
        return LW_OK;
    }
    if (v->v.arr.n != n)
        return lw__errorf(m->err, LW_ERR_BAD_DIMS, "key %s has %llu values for %u blocks", full,
                          (unsigned long long)v->v.arr.n, n);
    for (uint32_t il = 0; il < n; il++) {
        const void *d = v->v.arr.data;
        int64_t x;
        switch (v->v.arr.type) {
        case LW_GGUF_BOOL:
        case LW_GGUF_UINT8:
            x = ((const uint8_t *)d)[il];
            break;
        case LW_GGUF_INT8:
            x = ((const int8_t *)d)[il];
            break;
        case LW_GGUF_UINT16:
            x = ((const uint16_t *)d)[il];
            break;
        case LW_GGUF_INT16:
            x = ((const int16_t *)d)[il];
            break;
        case LW_GGUF_UINT32:
            x = ((const uint32_t *)d)[il];
            break;
        case LW_GGUF_INT32:
            x = ((const int32_t *)d)[il];
            break;
        case LW_GGUF_INT64:
            x = ((const int64_t *)d)[il];
            break;
        case LW_GGUF_UINT64:
            x = ((const uint64_t *)d)[il] > UINT32_MAX ? -1 : (int64_t)((const uint64_t *)d)[il];
            break;
        default:
            return lw__errorf(m->err, LW_ERR_TYPE_MISMATCH, "key %s: an array of %s, not of integers", full,
                              lw_gguf_type_name(v->v.arr.type));
        }
        if (x < 0 || x > UINT32_MAX)
            return lw__errorf(m->err, LW_ERR_TYPE_MISMATCH, "key %s: value %lld at %u is not a u32", full,
                              (long long)x, il);
        out[il] = (uint32_t)x;
    }
    return LW_OK;
}

/* Experts: count, how many each token uses and their FFN width, as llama.cpp's loader reads them (the
 * counts for every architecture, the width in each MoE architecture's load_arch_hparams). A file of an
 * architecture we run dense that has experts (a Mixtral-style llama) is refused rather than misread. */
static lw_status load_moe_hparams(lw_model *m) {
    lw__hparams *hp = &m->hp;
    lw_status st;
    if ((st = hp_u32(m, "expert_count", 0, 0, &hp->n_expert)) ||
        (st = hp_u32(m, "expert_used_count", 0, 0, &hp->n_expert_used)))
        return st;
    const int gemma4 =
        !strcmp(m->arch->name, "gemma4"); /* experts optional: blocks with a router have them */
    if (gemma4 && hp->n_expert == 0) hp->n_expert_used = 0;
    if (!m->arch->moe && !(gemma4 && hp->n_expert > 0)) {
        if (hp->n_expert > 0)
            return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                              "%s with %u experts (a mixture of experts) is not supported yet", m->arch->name,
                              hp->n_expert);
        hp->n_expert_used = 0;
        return LW_OK;
    }
    if (hp->n_expert == 0 || hp->n_expert > 512 || hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                          "bad expert counts: %u experts, %u used (%s needs 1 <= used <= experts <= 512)",
                          hp->n_expert, hp->n_expert_used, m->arch->name);
    if (gemma4) { /* one value or one per block (llama.cpp's get_key_or_arr); required, all blocks alike */
        uint32_t *fe = lw__calloc(&m->alloc, hp->n_layer, sizeof(*fe));
        if (!fe) return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
        st = hp_u32_layers(m, "expert_feed_forward_length", 1, 0, fe);
        hp->n_ff_exp = fe[0];
        for (uint32_t il = 1; st == LW_OK && il < hp->n_layer; il++)
            if (fe[il] != fe[0])
                st = lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                                "expert FFN widths that differ per block (%u, %u)", fe[0], fe[il]);
        lw__free(&m->alloc, fe);
        if (st != LW_OK) return st;
    } else if ((st = hp_u32(m, "expert_feed_forward_length", 0, hp->n_ff / hp->n_expert_used,
                            &hp->n_ff_exp))) {
        return st;
    }
    if (hp->n_ff_exp == 0 || hp->n_ff_exp > (1u << 20))
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "bad expert feed-forward length %u", hp->n_ff_exp);
    return LW_OK;
}

/* gemma4's per-block FFN widths and head counts (feed_forward_length, attention.head_count[_kv]: one value or
 * one per block, as llama.cpp's loader reads them); the model-wide values are block 0's (llama.cpp's
 * n_head() and n_head_kv()), n_ff the widest block's. */
static lw_status load_gemma4_layer_arrays(lw_model *m) {
    lw__hparams *hp = &m->hp;
    const uint32_t n = hp->n_layer;
    uint32_t *ff = lw__calloc(&m->alloc, 3 * (size_t)n, sizeof(*ff));
    if (!ff) return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
    uint32_t *nh = ff + n, *nkv = ff + 2 * (size_t)n; /* after the check: an offset from NULL is undefined */
    char kv[128];
    snprintf(kv, sizeof(kv), "%s.attention.head_count_kv", m->arch->name);
    const int has_kv = lw_gguf_find_key(m->gguf, kv) >= 0;
    lw_status st;
    if ((st = hp_u32_layers(m, "feed_forward_length", 1, 0, ff)) == LW_OK &&
        (st = hp_u32_layers(m, "attention.head_count", 1, 0, nh)) == LW_OK && has_kv)
        st = hp_u32_layers(m, "attention.head_count_kv", 1, 0, nkv);
    hp->n_ff = 0;
    for (uint32_t il = 0; st == LW_OK && il < n; il++) {
        lw__layer_hp *l = &m->lhp[il];
        l->n_ff = ff[il];
        l->n_head = nh[il];
        l->n_head_kv = has_kv ? nkv[il] : nh[il];
        if (l->n_ff == 0 || l->n_ff > (1u << 20) || l->n_head == 0 || l->n_head > 4096 || l->n_head_kv == 0 ||
            l->n_head % l->n_head_kv)
            st = lw__errorf(m->err, LW_ERR_UNSUPPORTED, "block %u: bad n_ff %u n_head %u n_head_kv %u", il,
                            l->n_ff, l->n_head, l->n_head_kv);
        hp->n_ff = l->n_ff > hp->n_ff ? l->n_ff : hp->n_ff;
    }
    hp->n_head = m->lhp[0].n_head;
    hp->n_head_kv = m->lhp[0].n_head_kv;
    lw__free(&m->alloc, ff);
    return st;
}

/* The rest of gemma4's hyper-parameters (llama.cpp's llama_model_gemma4::load_arch_hparams and the generic
 * loader's _swa keys): which blocks slide (one flag per block), the sliding blocks' head size and RoPE
 * dimensions, the per-layer input width, and the blocks at the end that share earlier blocks' KV caches.
 * Refuses what llama.cpp cannot run (no sliding block, fewer than 2 blocks with their own cache, a shared
 * block whose cache llama.cpp's reuse rule would take from a block of the other kind). */
static lw_status load_gemma4_hparams(lw_model *m) {
    lw__hparams *hp = &m->hp;
    const uint32_t n = hp->n_layer;
    uint32_t v_swa = 0, shared = 0;
    lw_status st;
    if ((st = hp_u32(m, "attention.key_length_swa", 1, 0, &hp->n_embd_head_swa)) ||
        (st = hp_u32(m, "attention.value_length_swa", 1, 0, &v_swa)) ||
        (st = hp_u32(m, "rope.dimension_count_swa", 0, hp->n_rot, &hp->n_rot_swa)) ||
        (st = hp_u32(m, "embedding_length_per_layer_input", 1, 0, &hp->n_embd_per_layer)) ||
        (st = hp_u32(m, "attention.shared_kv_layers", 0, 0, &shared)))
        return st;
    if (hp->n_embd_head_swa == 0 || hp->n_embd_head_swa != v_swa || hp->n_rot_swa > hp->n_embd_head_swa ||
        hp->n_rot_swa % 2 || hp->n_embd_head_swa > 4096)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "unsupported sliding head sizes: k %u v %u rot %u",
                          hp->n_embd_head_swa, v_swa, hp->n_rot_swa);
    if (hp->n_embd_per_layer > 65536)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "per-layer input width %u is too large",
                          hp->n_embd_per_layer);
    if (shared > n || n - shared < 2)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                          "%u of %u blocks share KV: llama.cpp needs at least 2 with their own cache", shared,
                          n);
    hp->n_layer_kv = n - shared;
    uint32_t *flags = lw__calloc(&m->alloc, n, sizeof(*flags));
    if (!flags) return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
    st = hp_u32_layers(m, "attention.sliding_window_pattern", 1, 0, flags);
    int any_swa = 0;
    for (uint32_t il = 0; st == LW_OK && il < n; il++) {
        lw__layer_hp *l = &m->lhp[il];
        l->swa = flags[il] != 0;
        any_swa |= l->swa;
        l->head_dim = l->swa ? hp->n_embd_head_swa : hp->n_embd_head_k;
        l->n_rot = l->swa ? hp->n_rot_swa : hp->n_rot;
        l->kv_src = il < hp->n_layer_kv ? (int32_t)il : (int32_t)hp->n_layer_kv - (l->swa ? 2 : 1);
    }
    lw__free(&m->alloc, flags);
    if (st != LW_OK) return st;
    if (!any_swa) return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "gemma4 without a sliding-window block");
    for (uint32_t il = hp->n_layer_kv; il < n; il++) {
        const lw__layer_hp *l = &m->lhp[il], *src = &m->lhp[l->kv_src];
        if (src->swa != l->swa || src->head_dim != l->head_dim || src->n_head_kv != l->n_head_kv)
            return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                              "block %u would share the KV cache of block %d, which has another geometry", il,
                              l->kv_src);
    }
    return LW_OK;
}

static lw_status load_hparams(lw_model *m) {
    lw__hparams *hp = &m->hp;
    lw_status st;
    const int moe = m->arch->moe, gemma4 = !strcmp(m->arch->name, "gemma4");
    if ((st = hp_u32(m, "context_length", 1, 0, &hp->n_ctx_train)) ||
        (st = hp_u32(m, "embedding_length", 1, 0, &hp->n_embd)) ||
        (st = hp_u32(m, "block_count", 1, 0, &hp->n_layer)))
        return st;
    if (hp->n_layer == 0 || hp->n_layer > 4096)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "bad block count %u", hp->n_layer);
    m->lhp = lw__calloc(&m->alloc, hp->n_layer, sizeof(*m->lhp));
    if (!m->lhp) return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
    if (gemma4) { /* per-block values (arrays or one value for all) */
        if ((st = load_gemma4_layer_arrays(m)) != LW_OK) return st;
    } else if ((st = hp_u32(m, "feed_forward_length", !moe, 0, &hp->n_ff)) ||
               (st = hp_u32(m, "attention.head_count", 1, 0, &hp->n_head)) ||
               (st = hp_u32(m, "attention.head_count_kv", 0, hp->n_head, &hp->n_head_kv))) {
        return st;
    }
    if ((st = load_moe_hparams(m)) != LW_OK) return st;
    if (hp->n_embd == 0 || hp->n_head == 0 || hp->n_layer == 0 || (hp->n_ff == 0 && !moe) ||
        hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv || hp->n_layer > 4096 || hp->n_head > 4096)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                          "bad hyper-parameters: n_embd %u n_layer %u n_ff %u n_head %u n_head_kv %u",
                          hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head, hp->n_head_kv);
    uint32_t hd = hp->n_embd / hp->n_head;
    char kl[128];
    snprintf(kl, sizeof(kl), "%s.attention.key_length", m->arch->name);
    if (hp->n_embd % hp->n_head && lw_gguf_find_key(m->gguf, kl) < 0)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                          "n_embd %u is not a multiple of n_head %u and %s is absent", hp->n_embd, hp->n_head,
                          kl);
    if ((st = hp_u32(m, "attention.key_length", 0, hd, &hp->n_embd_head_k)) ||
        (st = hp_u32(m, "attention.value_length", 0, hd, &hp->n_embd_head_v)) ||
        (st = hp_u32(m, "rope.dimension_count", 0, hp->n_embd_head_k, &hp->n_rot)))
        return st;
    if (hp->n_embd_head_k == 0 || hp->n_embd_head_k != hp->n_embd_head_v || hp->n_rot > hp->n_embd_head_k ||
        hp->n_rot % 2 || hp->n_embd_head_k > 4096)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "unsupported head sizes: k %u v %u rot %u",
                          hp->n_embd_head_k, hp->n_embd_head_v, hp->n_rot);
    if ((st = hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &hp->rms_eps)) ||
        (st = hp_f32(m, "rope.freq_base", 0, 10000.0f, &hp->rope_freq_base)))
        return st;
    /* RoPE scaling as llama.cpp's loader and context set it up: none, linear (freq_scale = 1/factor) and
     * YaRN (the same scale, ext_factor 1, the ramp between correction dims, and an attention factor);
     * others (longrope) change the table in other ways and are refused. */
    hp->rope_freq_scale = 1.0f;
    char key[128];
    const char *stype = NULL;
    snprintf(key, sizeof(key), "%s.rope.scaling.type", m->arch->name);
    if (lw_gguf_get_str(m->gguf, key, &stype) == LW_OK && strcmp(stype, "none") && strcmp(stype, "linear") &&
        strcmp(stype, "yarn"))
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "rope scaling '%s' is not supported yet", stype);
    const int yarn = stype && !strcmp(stype, "yarn");
    float factor = 0.0f;
    snprintf(key, sizeof(key), "%s.rope.scaling.factor", m->arch->name);
    if (lw_gguf_get_f32(m->gguf, key, &factor) != LW_OK) {
        snprintf(key, sizeof(key), "%s.rope.scale_linear", m->arch->name);
        if (lw_gguf_get_f32(m->gguf, key, &factor) != LW_OK) factor = 0.0f;
    }
    if (factor != 0.0f && (!stype || strcmp(stype, "none"))) hp->rope_freq_scale = 1.0f / factor;
    if (!isfinite(hp->rope_freq_scale) || hp->rope_freq_scale <= 0.0f)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "bad rope scaling factor %g", (double)factor);
    if ((st = hp_u32(m, "rope.scaling.original_context_length", 0, hp->n_ctx_train, &hp->n_ctx_orig_yarn)))
        return st;
    float rope_attn_factor;
    if ((st = hp_f32(m, "rope.scaling.attn_factor", 0, 1.0f, &rope_attn_factor))) return st;
    hp->yarn_ext_factor = yarn ? 1.0f : 0.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_attn_factor = 1.0f;
    if (yarn) { /* llama_context's set-up: get_mscale(factor, 1), then cancel ggml's own mscale factor */
        const float f = 1.0f / hp->rope_freq_scale;
        float a = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
        const float d = 1.0f + 0.1f * logf(f);
        a *= 1.0f / d;
        hp->yarn_attn_factor = a;
    }
    hp->yarn_attn_factor *= rope_attn_factor;
    hp->rope_type = m->arch->rope_type;
    /* sliding-window attention (gemma2, gemma3): window, period of full-context blocks, their own RoPE
     * base and scale, with each architecture's defaults as llama.cpp's load_arch_hparams */
    const int gemma2 = !strcmp(m->arch->name, "gemma2"), gemma3 = !strcmp(m->arch->name, "gemma3");
    if ((st = hp_u32(m, "attention.sliding_window", gemma4, gemma2 ? 4096 : 0, &hp->n_swa))) return st;
    /* gemma4's pattern is one flag per block (read with its other per-block keys below) */
    if (!gemma4 && (st = hp_u32(m, "attention.sliding_window_pattern", 0, gemma2 ? 2 : 6, &hp->swa_period)))
        return st;
    hp->rope_freq_base_swa = gemma2 ? hp->rope_freq_base : 10000.0f;
    hp->rope_freq_scale_swa = gemma2 ? hp->rope_freq_scale : 1.0f;
    if (hp->n_swa &&
        (st = hp_f32(m, "rope.freq_base_swa", 0, hp->rope_freq_base_swa, &hp->rope_freq_base_swa)))
        return st;
    if (hp->n_swa && !gemma2 && !gemma3 && !gemma4)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                          "sliding-window attention is only wired for gemma2, gemma3 and gemma4");
    /* soft-capping: gemma2 always caps scores and logits; gemma3 caps logits when the key says so; gemma4
     * keeps llama.cpp's default of 30 when the key is absent */
    hp->attn_softcap = 0.0f;
    if (gemma2 && (st = hp_f32(m, "attn_logit_softcapping", 0, 50.0f, &hp->attn_softcap))) return st;
    if ((st = hp_f32(m, "final_logit_softcapping", 0, gemma2 || gemma4 ? 30.0f : 0.0f, &hp->final_softcap)))
        return st;
    if (hp->final_softcap != 0.0f && !gemma2 && !gemma3 && !gemma4)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                          "final logit soft-capping is only wired for gemma2, gemma3 and gemma4");
    if ((gemma2 && hp->attn_softcap == 0.0f) || !isfinite(hp->attn_softcap) || !isfinite(hp->final_softcap))
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "bad soft-capping values %g, %g",
                          (double)hp->attn_softcap, (double)hp->final_softcap);
    if (gemma4) return load_gemma4_hparams(m);
    /* uniform blocks */
    hp->n_layer_kv = hp->n_layer;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->lhp[il] = (lw__layer_hp){hp->n_head, hp->n_head_kv,      hp->n_embd_head_k, hp->n_rot,
                                    hp->n_ff,   lw__is_swa(hp, il), (int32_t)il};
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Weight binding: two passes over the same list of wanted tensors. The first checks names, shapes and
 * types and sums the sizes; the second reads each tensor into its place in the one allocation.
 * ------------------------------------------------------------------------------------------------------- */

/* The binder's state. */
static uint8_t *rows_marker(lw_model *m, const lw__wt *w); /* the row store's weights (below) */

typedef struct binder {
    lw_model *m;     /* model being loaded                                          */
    int pass;        /* 0: check and size; 1: read                                  */
    uint64_t offset; /* running offset in the weight allocation                     */
    uintptr_t token; /* no_weights: the last presence token handed out              */
} binder;

/* Binds tensor `name` into *w: ne0 elements per row, ne1 rows (ne1 == 0: a 1-D tensor of ne0), ne2 experts
 * of such matrices (0: a 2-D tensor). Optional tensors that are absent leave w->data NULL. `role` says how it
 * is used: 'e' embedding table (row lookup), 'm' matmul weight, 'v' f32 vector (norm weights, biases). */
static lw_status bind3(binder *b, lw__wt *w, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                       char role, int required) {
    lw_model *m = b->m;
    int64_t ti = lw_gguf_find_tensor(m->gguf, name);
    if (ti < 0) {
        if (required) return lw__errorf(m->err, LW_ERR_NOT_FOUND, "missing tensor %s", name);
        memset(w, 0, sizeof(*w));
        return LW_OK;
    }
    const lw_gguf_tensor *t = lw_gguf_tensor_at(m->gguf, ti);
    if (b->pass == 0) {
        int64_t want1 = ne1 ? ne1 : 1, want2 = ne2 ? ne2 : 1;
        if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != want2 || t->ne[3] != 1)
            return lw__errorf(m->err, LW_ERR_BAD_DIMS,
                              "tensor %s: shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                              (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                              (long long)t->ne[3], (long long)ne0, (long long)want1, (long long)want2);
        const lw_type_info *info = lw_type_get(t->type);
        int ok = role == 'v'   ? t->type == LW_TYPE_F32
                 : role == 'm' ? lw__cpu_mm_get(t->type) != NULL
                               : lw__cpu_get_rows_supported(t->type);
        if (!ok)
            return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "tensor %s: type %s is not supported here yet",
                              name, info ? info->name : "?");
        w->name = t->name;
        w->type = t->type;
        w->ne0 = ne0;
        w->ne1 = want1 * want2; /* experts' rows one after another: one 2-D tensor for the graph */
        w->ne2 = want2;
        w->data = (void *)(uintptr_t)b->offset; /* an offset until the allocation exists */
        w->file_off = t->file_offset;
        if (rows_marker(m, w)) return LW_OK; /* served by the row store: no room here */
        uint64_t end;
        if (!lw__add_u64(b->offset, t->n_bytes, &end) || !lw__align_up_u64(end, WEIGHT_ALIGN, &b->offset))
            return lw__errorf(m->err, LW_ERR_OVERFLOW, "weights too large");
        return LW_OK;
    }
    /* pass 1: read into place */
    uint8_t *marker = rows_marker(m, w);
    if (marker) { /* the row store's rows, read a few at a time by contexts */
        w->data = marker;
        return LW_OK;
    }
    if (m->no_weights) { /* header only: a distinct non-NULL token says "present" (never dereferenced) */
        w->data = (void *)++b->token;
        return LW_OK;
    }
    uint64_t off = (uint64_t)(uintptr_t)w->data;
    w->data = (uint8_t *)m->weights + off;
    if (t->n_bytes > SIZE_MAX) return lw__errorf(m->err, LW_ERR_TOO_LARGE, "tensor %s too large", name);
    lw_status st = lw_gguf_read_tensor(m->gguf, ti, 0, w->data, (size_t)t->n_bytes);
    if (st != LW_OK) return lw__errorf(m->err, st, "reading %s: %s", name, lw_gguf_error(m->gguf));
    return LW_OK;
}

static lw_status bind(binder *b, lw__wt *w, const char *name, int64_t ne0, int64_t ne1, char role,
                      int required) {
    return bind3(b, w, name, ne0, ne1, 0, role, required);
}

/* dst = rows [row0, row0 + rows) of a bound 2-D weight (no_weights: the model holds no bytes). */
static void slice(lw__wt *dst, const lw__wt *src, int64_t row0, int64_t rows, int no_weights) {
    const lw_type_info *ti = lw_type_get(src->type);
    const uint64_t skip = (uint64_t)row0 * (uint64_t)(src->ne0 / ti->block_size) * ti->type_size;
    *dst = *src;
    dst->ne1 = rows;
    dst->file_off = src->file_off + skip;
    if (!no_weights) dst->data = (uint8_t *)src->data + (size_t)skip; /* else: the fused tensor's token */
}

/* The tensors of a llama-family model (names as llama.cpp's llama-arch.cpp). */
static lw_status bind_all(binder *b) {
    lw_model *m = b->m;
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    const int64_t QD = (int64_t)hp->n_head * hp->n_embd_head_k,
                  KD = (int64_t)hp->n_head_kv * hp->n_embd_head_k;
    lw_status st;
    if ((st = bind(b, &m->tok_embd, "token_embd.weight", E, V, 'e', 1)) ||
        (st = bind(b, &m->output_norm, "output_norm.weight", E, 0, 'v', 1)) ||
        (st = bind(b, &m->output, "output.weight", E, V, 'm', 0)) ||
        (st = bind(b, &m->output_b, "output.bias", V, 0, 'v', 0)) ||
        (st = bind(b, &m->rope_freqs, "rope_freqs.weight", hp->n_rot / 2, 0, 'v', 0)))
        return st;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        lw__layer *L = &m->layers[il];
        char n[16][64];
        static const char *const suffix[16] = {"attn_norm.weight",
                                               "attn_q.weight",
                                               "attn_k.weight",
                                               "attn_v.weight",
                                               "attn_output.weight",
                                               "attn_q.bias",
                                               "attn_k.bias",
                                               "attn_v.bias",
                                               "attn_q_norm.weight",
                                               "attn_k_norm.weight",
                                               "ffn_norm.weight",
                                               "ffn_gate.weight",
                                               "ffn_up.weight",
                                               "ffn_down.weight",
                                               "",
                                               ""};
        for (int k = 0; k < 14; k++) snprintf(n[k], sizeof(n[k]), "blk.%u.%s", il, suffix[k]);
        const int64_t HD = hp->n_embd_head_k;
        char fq[64], fr[64];
        snprintf(fq, sizeof(fq), "blk.%u.attn_qkv.weight", il);
        snprintf(fr, sizeof(fr), "blk.%u.rope_factors_long.weight", il);
        if (lw_gguf_find_tensor(m->gguf, fr) >= 0)
            return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "RoPE frequency factors (%s) are not supported yet",
                              fr);
        const int fused_qkv = lw_gguf_find_tensor(m->gguf, fq) >= 0;
        const int moe = m->arch->moe;
        const int fused_ffn =
            !moe && lw_gguf_find_tensor(m->gguf, n[11]) < 0; /* no ffn_gate: ffn_up holds gate|up */
        if ((st = bind(b, &L->attn_norm, n[0], E, 0, 'v', 1))) return st;
        if (fused_qkv) {
            if ((st = bind(b, &L->wqkv, fq, E, QD + 2 * KD, 'm', 1))) return st;
        } else if ((st = bind(b, &L->wq, n[1], E, QD, 'm', 1)) ||
                   (st = bind(b, &L->wk, n[2], E, KD, 'm', 1)) ||
                   (st = bind(b, &L->wv, n[3], E, KD, 'm', 1))) {
            return st;
        }
        char pa[64], pf[64];
        snprintf(pa, sizeof(pa), "blk.%u.post_attention_norm.weight", il);
        snprintf(pf, sizeof(pf), "blk.%u.post_ffw_norm.weight", il);
        if ((st = bind(b, &L->attn_post_norm, pa, E, 0, 'v', 0)) ||
            (st = bind(b, &L->ffn_post_norm, pf, E, 0, 'v', 0)))
            return st;
        if ((st = bind(b, &L->wo, n[4], QD, E, 'm', 1)) || (st = bind(b, &L->bq, n[5], QD, 0, 'v', 0)) ||
            (st = bind(b, &L->bk, n[6], KD, 0, 'v', 0)) || (st = bind(b, &L->bv, n[7], KD, 0, 'v', 0)) ||
            (st = bind(b, &L->q_norm, n[8], HD, 0, 'v', 0)) ||
            (st = bind(b, &L->k_norm, n[9], HD, 0, 'v', 0)) ||
            (st = bind(b, &L->ffn_norm, n[10], E, 0, 'v', 1)))
            return st;
        if (moe) { /* llama.cpp's qwen3moe load_arch_tensors: router and 3-D expert stacks, no dense FFN */
            const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
            char ri[64], ge[64], ue[64], de[64];
            snprintf(ri, sizeof(ri), "blk.%u.ffn_gate_inp.weight", il);
            snprintf(ge, sizeof(ge), "blk.%u.ffn_gate_exps.weight", il);
            snprintf(ue, sizeof(ue), "blk.%u.ffn_up_exps.weight", il);
            snprintf(de, sizeof(de), "blk.%u.ffn_down_exps.weight", il);
            if ((st = bind(b, &L->ffn_gate_inp, ri, E, NE, 'm', 1)) ||
                (st = bind3(b, &L->ffn_gate_exps, ge, E, FE, NE, 'm', 1)) ||
                (st = bind3(b, &L->ffn_up_exps, ue, E, FE, NE, 'm', 1)) ||
                (st = bind3(b, &L->ffn_down_exps, de, FE, E, NE, 'm', 1)))
                return st;
        } else if ((st = bind(b, &L->ffn_down, n[13], F, E, 'm', 1))) {
            return st;
        } else if (fused_ffn) {
            if ((st = bind(b, &L->ffn_gate_up, n[12], E, 2 * F, 'm', 1))) return st;
        } else if ((st = bind(b, &L->ffn_gate, n[11], E, F, 'm', 1)) ||
                   (st = bind(b, &L->ffn_up, n[12], E, F, 'm', 1))) {
            return st;
        }
        if (b->pass == 1) { /* fused tensors: the parts are row ranges (each output row is its own dot) */
            if (fused_qkv) {
                slice(&L->wq, &L->wqkv, 0, QD, m->no_weights);
                slice(&L->wk, &L->wqkv, QD, KD, m->no_weights);
                slice(&L->wv, &L->wqkv, QD + KD, KD, m->no_weights);
            }
            if (fused_ffn) {
                slice(&L->ffn_gate, &L->ffn_gate_up, 0, F, m->no_weights);
                slice(&L->ffn_up, &L->ffn_gate_up, F, F, m->no_weights);
            }
        }
    }
    return LW_OK;
}

/* A gemma4 block's mixture of experts (its router `router` is in the file): the router and its input scale,
 * the extra norms, the experts' fused gate|up stack (else separate gate and up stacks), the down stack and
 * the optional per-expert scales (llama.cpp's generic *_exps.scale tensors). */
static lw_status bind_gemma4_moe(binder *b, lw__layer *L, uint32_t il, const char *router) {
    lw_model *m = b->m;
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, NE = hp->n_expert, FE = hp->n_ff_exp;
    if (NE == 0) return lw__errorf(m->err, LW_ERR_BAD_DIMS, "%s: a router without expert_count", router);
    static const char *const sfx[] = {
        "ffn_gate_inp.scale",     "pre_ffw_norm_2.weight",   "post_ffw_norm_1.weight",
        "post_ffw_norm_2.weight", "ffn_gate_up_exps.weight", "ffn_gate_exps.weight",
        "ffn_up_exps.weight",     "ffn_down_exps.weight",    "ffn_gate_exps.scale",
        "ffn_up_exps.scale",      "ffn_down_exps.scale"};
    enum { N_SFX = sizeof sfx / sizeof sfx[0] };
    char n[N_SFX][64];
    for (int k = 0; k < N_SFX; k++) snprintf(n[k], sizeof(n[k]), "blk.%u.%s", il, sfx[k]);
    lw_status st;
    if ((st = bind(b, &L->ffn_gate_inp, router, E, NE, 'm', 1)) ||
        (st = bind(b, &L->ffn_gate_inp_s, n[0], E, 0, 'v', 1)) ||
        (st = bind(b, &L->ffn_pre_norm_2, n[1], E, 0, 'v', 1)) ||
        (st = bind(b, &L->ffn_post_norm_1, n[2], E, 0, 'v', 1)) ||
        (st = bind(b, &L->ffn_post_norm_2, n[3], E, 0, 'v', 1)) ||
        (st = bind3(b, &L->ffn_gate_up_exps, n[4], E, 2 * FE, NE, 'm', 0)) ||
        (st = bind3(b, &L->ffn_down_exps, n[7], FE, E, NE, 'm', 1)) ||
        (st = bind(b, &L->ffn_down_exps_s, n[10], NE, 0, 'v', 0)))
        return st;
    if (!L->ffn_gate_up_exps.data && ((st = bind3(b, &L->ffn_gate_exps, n[5], E, FE, NE, 'm', 1)) ||
                                      (st = bind3(b, &L->ffn_up_exps, n[6], E, FE, NE, 'm', 1)) ||
                                      (st = bind(b, &L->ffn_gate_exps_s, n[8], NE, 0, 'v', 0)) ||
                                      (st = bind(b, &L->ffn_up_exps_s, n[9], NE, 0, 'v', 0))))
        return st;
    return LW_OK;
}

/* The tensors of a gemma4 model (llama.cpp's llama_model_gemma4::load_arch_tensors): per-block shapes; the
 * per-layer input tables when embedding_length_per_layer_input > 0; a block that shares KV may lack (and
 * never uses) attn_k, attn_v and attn_k_norm; a block without attn_v uses its K projection as V (the
 * larger models' global blocks); one rope_freqs table serves every global block. */
static lw_status bind_gemma4(binder *b) {
    lw_model *m = b->m;
    const lw__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab, PL = hp->n_embd_per_layer;
    lw_status st;
    int any_global = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) any_global |= !m->lhp[il].swa;
    if ((st = bind(b, &m->tok_embd, "token_embd.weight", E, V, 'e', 1)) ||
        (st = bind(b, &m->output_norm, "output_norm.weight", E, 0, 'v', 1)) ||
        (st = bind(b, &m->output, "output.weight", E, V, 'm', 0)) ||
        (st = bind(b, &m->rope_freqs, "rope_freqs.weight", hp->n_embd_head_k / 2, 0, 'v', any_global)))
        return st;
    if (PL > 0 &&
        ((st = bind(b, &m->pl_tok_embd, "per_layer_token_embd.weight", PL * hp->n_layer, V, 'e', 1)) ||
         (st = bind(b, &m->pl_model_proj, "per_layer_model_proj.weight", E, PL * hp->n_layer, 'm', 1)) ||
         (st = bind(b, &m->pl_proj_norm, "per_layer_proj_norm.weight", PL, 0, 'v', 1))))
        return st;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        lw__layer *L = &m->layers[il];
        const lw__layer_hp *lh = &m->lhp[il];
        const int64_t HD = lh->head_dim, QD = (int64_t)lh->n_head * HD, KD = (int64_t)lh->n_head_kv * HD;
        const int own_kv = lh->kv_src == (int32_t)il;
        static const char *const sfx[] = {"attn_norm.weight",
                                          "attn_q.weight",
                                          "attn_k.weight",
                                          "attn_v.weight",
                                          "attn_output.weight",
                                          "attn_q_norm.weight",
                                          "attn_k_norm.weight",
                                          "post_attention_norm.weight",
                                          "layer_output_scale.weight",
                                          "ffn_norm.weight",
                                          "ffn_gate.weight",
                                          "ffn_up.weight",
                                          "ffn_down.weight",
                                          "post_ffw_norm.weight",
                                          "inp_gate.weight",
                                          "proj.weight",
                                          "post_norm.weight",
                                          "ffn_gate_inp.weight"};
        enum { N_SFX = sizeof sfx / sizeof sfx[0] };
        char n[N_SFX][64];
        for (int k = 0; k < N_SFX; k++) snprintf(n[k], sizeof(n[k]), "blk.%u.%s", il, sfx[k]);
        if (lw_gguf_find_tensor(m->gguf, n[17]) >= 0 && (st = bind_gemma4_moe(b, L, il, n[17])) != LW_OK)
            return st;
        if ((st = bind(b, &L->attn_norm, n[0], E, 0, 'v', 1)) ||
            (st = bind(b, &L->wq, n[1], E, QD, 'm', 1)) || (st = bind(b, &L->wo, n[4], QD, E, 'm', 1)) ||
            (st = bind(b, &L->q_norm, n[5], HD, 0, 'v', 1)) ||
            (st = bind(b, &L->attn_post_norm, n[7], E, 0, 'v', 1)) ||
            (st = bind(b, &L->out_scale, n[8], 1, 0, 'v', 0)) ||
            (st = bind(b, &L->ffn_norm, n[9], E, 0, 'v', 1)) ||
            (st = bind(b, &L->ffn_gate, n[10], E, lh->n_ff, 'm', 1)) ||
            (st = bind(b, &L->ffn_up, n[11], E, lh->n_ff, 'm', 1)) ||
            (st = bind(b, &L->ffn_down, n[12], lh->n_ff, E, 'm', 1)) ||
            (st = bind(b, &L->ffn_post_norm, n[13], E, 0, 'v', 1)))
            return st;
        if (own_kv &&
            ((st = bind(b, &L->wk, n[2], E, KD, 'm', 1)) || (st = bind(b, &L->wv, n[3], E, KD, 'm', 0)) ||
             (st = bind(b, &L->k_norm, n[6], HD, 0, 'v', 1))))
            return st;
        if (PL > 0 && ((st = bind(b, &L->pl_inp_gate, n[14], E, PL, 'm', 1)) ||
                       (st = bind(b, &L->pl_proj, n[15], PL, E, 'm', 1)) ||
                       (st = bind(b, &L->pl_post_norm, n[16], E, 0, 'v', 1))))
            return st;
    }
    return LW_OK;
}

static lw_status bind_model(binder *b) {
    return !strcmp(b->m->arch->name, "gemma4") ? bind_gemma4(b) : bind_all(b);
}

/* ---------------------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------------------- */

/* The tokenizer, when the file has one this build reads. A model without one still loads (token ids only)
 * and keeps the reason for the message of lw_model_tokenize; only running out of memory fails the load. */
static lw_status load_vocab(lw_model *m) {
    if (m->no_vocab) {
        snprintf(m->vocab_why, sizeof m->vocab_why, "not loaded: lw_model_params.no_vocab");
        return LW_OK;
    }
    lw_vocab *v = NULL;
    lw_status st = lw_vocab_load(m->gguf, &m->alloc, &v);
    if (st == LW_OK && lw_vocab_get_type(v) != LW_VOCAB_NONE) {
        m->vocab = v;
        return LW_OK;
    }
    snprintf(m->vocab_why, sizeof m->vocab_why, "%s",
             st == LW_OK ? "the file's tokenizer model is no_vocab"
             : v         ? lw_vocab_error(v)
                         : lw_status_str(st));
    lw_vocab_free(v);
    return st == LW_ERR_NOMEM ? lw__errorf(m->err, st, "out of memory for the vocabulary") : LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Row store (src/rows/) of token_embd and per_layer_token_embd: decided before the weights are sized, so a
 * served table takes no room in the weight allocation. Whatever fails here leaves that table resident and
 * says why in its message (rows_tab_msg), joined into rows_msg.
 * ------------------------------------------------------------------------------------------------------- */

/* The row file's path: dir/<tensor>-<key>.rows, key a hash of what identifies the tensor in its file (the
 * source's size, the tensor's offset, size, type and name, the model's name), not of its bytes: a changed
 * byte keeps the name and finds the file stale, so it is rewritten in place instead of piling up. */
static lw_status rows_path(lw_model *m, const lw_gguf_tensor *t, lw_source *src, char *path, size_t cap,
                           char *err) {
    const char *dir = m->rows_dir, *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char def[1024];
    if (!dir || !*dir) {
        if (xdg && *xdg) snprintf(def, sizeof def, "%s/llamaweb/rows", xdg);
        else if (home && *home) snprintf(def, sizeof def, "%s/.cache/llamaweb/rows", home);
        else
            return lw__errorf(
                err, LW_ERR_NOT_FOUND,
                "no directory for row files (lw_model_params.rows_dir, $XDG_CACHE_HOME, $HOME)");
        dir = def;
    }
    lw_status st = lw__rows_mkdirs(dir, err);
    if (st != LW_OK) return st;
    const char *gname = NULL;
    lw_gguf_get_str(m->gguf, "general.name", &gname);
    const uint64_t id[4] = {lw_source_size(src), t->file_offset, t->n_bytes, t->type};
    lw__rows_hash h;
    lw__rows_hash_init(&h);
    lw__rows_hash_update(&h, id, sizeof id);
    lw__rows_hash_update(&h, t->name, strlen(t->name) + 1);
    if (gname) lw__rows_hash_update(&h, gname, strlen(gname));
    if ((size_t)snprintf(path, cap, "%s/%s-%016llx.rows", dir, t->name,
                         (unsigned long long)lw__rows_hash_final(&h)) >= cap)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "row file path too long (%s)", dir);
    return LW_OK;
}

/* Opens (writing it when needed) the row file of tensor ti: its rows along dimension 1 (a table of ne[1]
 * rows; ne[2] must be 1) or 2 (experts: one row per expert's contiguous slab). */
static lw_status open_table(lw_model *m, lw_source *src, int64_t ti, int axis, lw__rowfile **out, char *path,
                            size_t cap, char *err) {
    const lw_gguf_tensor *t = lw_gguf_tensor_at(m->gguf, ti);
    const int64_t n = t->ne[axis];
    if (n <= 0 || t->ne[3] != 1 || (axis == 1 && t->ne[2] != 1) || t->n_bytes % (uint64_t)n)
        return lw__errorf(err, LW_ERR_BAD_DIMS, "%s is not a table of whole rows", t->name);
    lw_status st = rows_path(m, t, src, path, cap, err);
    if (st != LW_OK) return st;
    lw__rows_spec sp = {src, t->file_offset, t->n_bytes / (uint64_t)n, (uint64_t)n, t->type, t->name, 0};
    return lw__rowfile_open(&m->alloc, &sp, path, out, err);
}

static const char *const rows_how[] = {"reused", "written", "stale, rewritten"}; /* lw__rows_outcome */
static const char *const rows_names[LW_ROWS_N_TABLES] = {"token_embd", "per_layer_token_embd", "experts"};

/* A table gathered by token id (token_embd, per_layer_token_embd): its row file, or why not. *final: msg is
 * complete as it stands (nothing to store), not a failure to wrap into "row store not used". */
static lw_status setup_gathered(lw_model *m, lw_source *src, int table, uint32_t asked, lw__rowfile **rf,
                                char *msg, int *final) {
    const char *name = rows_names[table];
    char tname[64];
    snprintf(tname, sizeof tname, "%s.weight", name);
    const int64_t ti = lw_gguf_find_tensor(m->gguf, tname);
    *final = 1;
    if (ti < 0) /* token_embd is never absent here (load checked it) */
        return lw__errorf(msg, LW_ERR_NOT_FOUND, "%s: this model has no such table, nothing to store", name);
    if (asked >= m->hp.n_vocab) {
        snprintf(msg, LW_ERRMSG_SIZE,
                 "%s: %u rows asked for hold the whole table of %u: resident, no row file", name, asked,
                 m->hp.n_vocab);
        return LW_OK;
    }
    *final = 0;
    if (m->no_weights)
        return lw__errorf(msg, LW_ERR_UNSUPPORTED,
                          "not used with no_weights (a GPU backend streams its own weights)");
    if (table == LW_ROWS_TOKEN_EMBD && lw_gguf_find_tensor(m->gguf, "output.weight") < 0)
        return lw__errorf(
            msg, LW_ERR_UNSUPPORTED,
            "token_embd is also the output projection (tied embeddings), which reads every row");
    char path[1200];
    lw_status st = open_table(m, src, ti, 1, rf, path, sizeof path, msg);
    if (st != LW_OK) return st;
    snprintf(msg, LW_ERRMSG_SIZE, "%s: %u of %u rows in memory, row file %.120s (%s%s%.60s)", name, asked,
             m->hp.n_vocab, path, rows_how[lw__rowfile_outcome(*rf)], *lw__rowfile_why(*rf) ? ": " : "",
             lw__rowfile_why(*rf));
    return LW_OK;
}

/* Closes the experts' row files and frees their arrays (the experts are resident then). */
static void close_experts(lw_model *m) {
    for (uint32_t i = 0; m->exp_rows && i < m->hp.n_layer * 3u; i++) lw__rowfile_close(m->exp_rows[i]);
    lw__free(&m->alloc, m->exp_rows);
    lw__free(&m->alloc, m->exp_tokens);
    m->exp_rows = NULL;
    m->exp_tokens = NULL;
}

/* The experts: a row file for each layer's expert tensor (gate, or gemma4's fused gate|up, then up and down),
 * one row per expert's slab: a tensor per file because the three can differ in type (llama.cpp's Q4_K_M
 * keeps some down experts in Q6_K) and are not adjacent in the GGUF, so they stay plain row files. The
 * caches a context keeps of them see the same expert ids in the same order, so they act as one row group.
 * Any failure leaves every expert resident. *final as setup_gathered's. */
static lw_status setup_experts(lw_model *m, lw_source *src, uint32_t asked, char *msg, int *final) {
    const uint32_t NE = m->hp.n_expert, NL = m->hp.n_layer;
    *final = 1;
    if (NE == 0) return lw__errorf(msg, LW_ERR_NOT_FOUND, "experts: this model has none, nothing to store");
    if (asked >= NE) {
        snprintf(msg, LW_ERRMSG_SIZE,
                 "experts: %u asked for hold all %u of each layer: resident, no row files", asked, NE);
        return LW_OK;
    }
    *final = 0;
    if (m->no_weights)
        return lw__errorf(msg, LW_ERR_UNSUPPORTED,
                          "not used with no_weights (a GPU backend streams its own weights)");
    m->exp_rows = lw__calloc(&m->alloc, (size_t)NL * 3, sizeof(*m->exp_rows));
    m->exp_tokens = lw__calloc(&m->alloc, (size_t)NL * 3, 1);
    if (!m->exp_rows || !m->exp_tokens) {
        close_experts(m);
        return lw__errorf(msg, LW_ERR_NOMEM, "out of memory");
    }
    static const char *const parts[4] = {"ffn_gate_up_exps", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    uint32_t n_files = 0, how[3] = {0, 0, 0};
    char path[1200], name[96];
    path[0] = 0;
    for (uint32_t il = 0; il < NL; il++)
        for (int p = 0; p < 4; p++) {
            const int part = p == 0 ? 0 : p - 1;
            if (p == 1 && m->exp_rows[il * 3]) continue; /* fused gate|up found: no separate gate */
            snprintf(name, sizeof name, "blk.%u.%s.weight", il, parts[p]);
            const int64_t ti = lw_gguf_find_tensor(m->gguf, name);
            if (ti < 0) continue; /* a dense block, or the other gate form */
            lw_status st = open_table(m, src, ti, 2, &m->exp_rows[il * 3 + part], path, sizeof path, msg);
            if (st != LW_OK) {
                close_experts(m);
                return st;
            }
            n_files++;
            how[lw__rowfile_outcome(m->exp_rows[il * 3 + part])]++;
        }
    if (n_files == 0) {
        close_experts(m);
        *final = 1;
        return lw__errorf(msg, LW_ERR_NOT_FOUND, "experts: no expert tensors found, nothing to store");
    }
    char *slash = strrchr(path, '/');
    if (slash) *slash = 0;
    snprintf(msg, LW_ERRMSG_SIZE,
             "experts: %u of %u per layer in memory, %u row files in %.120s (%u reused, "
             "%u written, %u rewritten)",
             asked, NE, n_files, path, how[0], how[1], how[2]);
    return LW_OK;
}

/* Sets up the row store of every table asked for; never fails the load (only the allocator can, later, for
 * the tables that stay resident). */
static void setup_rows(lw_model *m, lw_source *src) {
    const uint32_t asked[LW_ROWS_N_TABLES] = {m->rows_embd, m->rows_per_layer, m->rows_experts};
    lw__rowfile **files[2] = {&m->embd_rows, &m->pl_rows};
    m->rows_status = LW_OK;
    m->rows_msg[0] = 0;
    for (int t = 0; t < LW_ROWS_N_TABLES; t++) {
        char *msg = m->rows_tab_msg[t];
        m->rows_tab_status[t] = LW_OK;
        msg[0] = 0;
        if (!asked[t]) continue;
        int final = 0;
        lw_status st = t == LW_ROWS_EXPERTS ? setup_experts(m, src, asked[t], msg, &final)
                                            : setup_gathered(m, src, t, asked[t], files[t], msg, &final);
        if (st != LW_OK && !final) {
            char why[LW_ERRMSG_SIZE];
            snprintf(why, sizeof why, "%s", msg);
            snprintf(msg, LW_ERRMSG_SIZE, "row store not used, %s resident: %.190s", rows_names[t], why);
        }
        m->rows_tab_status[t] = st;
        if (m->rows_status == LW_OK) m->rows_status = st;
        const size_t len = strlen(m->rows_msg);
        snprintf(m->rows_msg + len, sizeof m->rows_msg - len, "%s%s", len ? "; " : "", msg);
    }
}

lw_status lw_model_rows_status(const lw_model *m, const char **message) {
    if (message) *message = m ? m->rows_msg : "no model";
    return m ? m->rows_status : LW_ERR_INVALID_ARG;
}

lw_status lw_model_rows_table_status(const lw_model *m, lw_rows_table table, const char **message) {
    if (!m || (unsigned)table >= LW_ROWS_N_TABLES) {
        if (message) *message = m ? "no such table" : "no model";
        return LW_ERR_INVALID_ARG;
    }
    if (message) *message = m->rows_tab_msg[table];
    return m->rows_tab_status[table];
}

/* The marker a weight served by the row store points at instead of its bytes, or NULL when it is resident. */
static uint8_t *rows_marker(lw_model *m, const lw__wt *w) {
    if (w == &m->tok_embd && m->embd_rows) return &m->rows_token;
    if (w == &m->pl_tok_embd && m->pl_rows) return &m->rows_pl_token;
    const uintptr_t at = (uintptr_t)w, l0 = (uintptr_t)m->layers; /* unrelated objects: compare addresses */
    if (m->exp_rows && at >= l0 && at < l0 + (uintptr_t)m->hp.n_layer * sizeof(lw__layer)) {
        const size_t il = (size_t)(at - l0) / sizeof(lw__layer);
        const lw__layer *L = &m->layers[il];
        const int part = w == &L->ffn_gate_exps || w == &L->ffn_gate_up_exps ? 0
                         : w == &L->ffn_up_exps                              ? 1
                         : w == &L->ffn_down_exps                            ? 2
                                                                             : -1;
        const lw__rowfile *rf = part >= 0 ? m->exp_rows[il * 3 + (size_t)part] : NULL;
        /* the file must be of the tensor bound here (the binder's gate|up or gate choice) */
        if (rf && w->name && !strcmp(lw__rowfile_manifest(rf)->name, w->name))
            return &m->exp_tokens[il * 3 + (size_t)part];
    }
    return NULL;
}

static lw_status load(lw_model *m, lw_source *src) {
    lw_status st = lw_gguf_open(src, &m->alloc, &m->gguf);
    if (st != LW_OK)
        return lw__errorf(m->err, st, "%s", m->gguf ? lw_gguf_error(m->gguf) : lw_status_str(st));

    const char *arch = NULL;
    if (lw_gguf_get_str(m->gguf, "general.architecture", &arch) != LW_OK)
        return lw__errorf(m->err, LW_ERR_NOT_FOUND, "missing key general.architecture");
    for (size_t i = 0; i < sizeof(arch_table) / sizeof(arch_table[0]); i++)
        if (!strcmp(arch, arch_table[i].name)) m->arch = &arch_table[i];
    if (!m->arch)
        return lw__errorf(m->err, LW_ERR_UNSUPPORTED, "architecture '%s' is not supported yet", arch);

    if ((st = load_hparams(m)) != LW_OK) return st;
    /* vocabulary size: rows of token_embd (llama.cpp takes it from the tokenizer; they agree in valid files)
     */
    int64_t te = lw_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (te < 0) return lw__errorf(m->err, LW_ERR_NOT_FOUND, "missing tensor token_embd.weight");
    const lw_gguf_tensor *tt = lw_gguf_tensor_at(m->gguf, te);
    if (tt->ne[1] <= 0 || tt->ne[1] > INT32_MAX)
        return lw__errorf(m->err, LW_ERR_BAD_DIMS, "bad token_embd shape");
    m->hp.n_vocab = (uint32_t)tt->ne[1];
    if ((st = load_vocab(m)) != LW_OK) return st;

    m->layers = lw__calloc(&m->alloc, m->hp.n_layer, sizeof(lw__layer));
    if (!m->layers) return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory");
    setup_rows(m, src);
    binder b = {m, 0, 0, 0};
    if ((st = bind_model(&b)) != LW_OK) return st;
    m->weight_bytes = b.offset;
    if (m->no_weights) { /* header only: bind (tokens, file offsets) and stop; any size (64-bit offsets) */
        b.pass = 1;
        if ((st = bind_model(&b)) != LW_OK) return st;
        if (!m->output.data) m->output = m->tok_embd;
        return LW_OK;
    }
    /* the CPU path holds every weight in one allocation of this address space */
    if (b.offset > SIZE_MAX - WEIGHT_ALIGN)
        return lw__errorf(
            m->err, LW_ERR_TOO_LARGE,
            "%llu bytes of weights do not fit this build's %zu-byte address space on the CPU path; "
            "the GPU path (weights streamed to GPU buffers, lw_model_params.no_weights) takes any size",
            (unsigned long long)b.offset, (size_t)SIZE_MAX);
    /* over-allocate by the alignment and align the base by hand (the allocator hook promises no alignment) */
    m->weights = lw__malloc(&m->alloc, (size_t)b.offset + WEIGHT_ALIGN);
    if (!m->weights)
        return lw__errorf(m->err, LW_ERR_NOMEM, "out of memory for %llu bytes of weights",
                          (unsigned long long)b.offset);
    void *base = m->weights;
    m->weights = (void *)(((uintptr_t)base + WEIGHT_ALIGN - 1) & ~(uintptr_t)(WEIGHT_ALIGN - 1));
    b.pass = 1;
    st = bind_model(&b);
    m->weights_raw = base;
    if (st != LW_OK) return st;
    if (!m->output.data) { /* tied embeddings: the table is also the output projection */
        m->output = m->tok_embd;
        if (!lw__cpu_mm_get(m->output.type))
            return lw__errorf(m->err, LW_ERR_UNSUPPORTED,
                              "tied output: type %s cannot be multiplied here yet",
                              lw_type_get(m->output.type)->name);
    }
    return LW_OK;
}

static lw_status new_model(const lw_model_params *params, lw_model **out) {
    lw_allocator a = lw__allocator_or_default(params ? params->alloc : NULL);
    lw_model *m = lw__calloc(&a, 1, sizeof(*m));
    *out = m;
    if (!m) return LW_ERR_NOMEM;
    m->alloc = a;
    m->no_weights = params && params->no_weights;
    m->no_vocab = params && params->no_vocab;
    if (params) {
        m->rows_embd = params->rows_embd;
        m->rows_dir = params->rows_dir;
        m->rows_warm = params->rows_warm;
        m->rows_per_layer = params->rows_per_layer;
        m->rows_experts = params->rows_experts;
    }
    return LW_OK;
}

lw_status lw_model_load_source(lw_source *src, const lw_model_params *params, lw_model **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    lw_status st = new_model(params, out);
    if (st != LW_OK) return st;
    if (!src) return lw__errorf((*out)->err, LW_ERR_INVALID_ARG, "no source");
    return load(*out, src);
}

lw_status lw_model_load_file(const char *path, const lw_model_params *params, lw_model **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    lw_status st = new_model(params, out);
    if (st != LW_OK) return st;
    lw_model *m = *out;
    st = lw_source_open_file(path, &m->alloc, &m->own_src, m->err, sizeof(m->err));
    if (st != LW_OK) return st;
    return load(m, m->own_src);
}

void lw_model_free(lw_model *m) {
    if (!m) return;
    lw_allocator a = m->alloc;
    lw__free(&a, m->weights_raw);
    lw__free(&a, m->layers);
    lw__free(&a, m->lhp);
    lw_vocab_free(m->vocab);
    lw__rowfile_close(m->embd_rows);
    lw__rowfile_close(m->pl_rows);
    close_experts(m);
    lw_gguf_close(m->gguf);
    lw_source_close(m->own_src);
    lw__free(&a, m);
}

const char *lw_model_error(const lw_model *m) {
    return m ? m->err : "out of memory";
}
const char *lw_model_arch(const lw_model *m) {
    return m->arch ? m->arch->name : "";
}
int32_t lw_model_n_vocab(const lw_model *m) {
    return (int32_t)m->hp.n_vocab;
}
int32_t lw_model_n_embd(const lw_model *m) {
    return (int32_t)m->hp.n_embd;
}
int32_t lw_model_n_layer(const lw_model *m) {
    return (int32_t)m->hp.n_layer;
}
int32_t lw_model_n_ctx_train(const lw_model *m) {
    return (int32_t)m->hp.n_ctx_train;
}
uint64_t lw_model_weight_bytes(const lw_model *m) {
    return m->weight_bytes;
}
lw_gguf *lw_model_gguf(const lw_model *m) {
    return m->gguf;
}
