/* Synthetic llama-architecture GGUF models for the engine tests: random weights (fixed seed) of a chosen
 * shape and weight type, with a minimal SentencePiece vocabulary (specials + 256 byte tokens + fillers) so
 * that llama.cpp loads them too. Written with our GGUF writer into $LW_TMP; no shared data needed. */
#ifndef LW_ENGINE_SYNTH_H
#define LW_ENGINE_SYNTH_H

#include "core/core.h"
#include "quant/quant.h"
#include "llamaweb.h"
#include "test.h" /* test_tmp_dir */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The shape of a synthetic model. */
typedef struct synth_spec {
    uint32_t n_vocab;   /* >= 300 (3 specials + 256 bytes + fillers)         */
    uint32_t n_embd;    /* model width                                       */
    uint32_t n_layer;   /* blocks                                            */
    uint32_t n_head;    /* query heads                                       */
    uint32_t n_head_kv; /* KV heads (divides n_head)                         */
    uint32_t n_ff;      /* FFN width                                         */
    uint32_t wtype;     /* type of the 2-D weights (f32, f16 or quantized)  */
    int tied;           /* 1: no output.weight (tied to token_embd)          */
    uint64_t seed;      /* weight values                                     */
    const char *arch;   /* general.architecture; NULL: "llama"              */
    int biases;         /* 1: Q/K/V biases and an output bias (qwen2)         */
    int qk_norm;        /* 1: per-head Q/K RMSNorm weights (qwen3)            */
    int fused;          /* 1: fused attn_qkv and gate|up in ffn_up (phi3)    */
} synth_spec;

/* Optional extra metadata written by the next synth_write calls (NULL: none), e.g. RoPE scaling keys. */
static void (*synth_extra_keys)(lw_gguf_writer *w, const char *arch);

/* Deterministic values in about [-1, 1) (xorshift64*). */
static inline float synth_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t r = *s * 2685821657736338717ull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* One tensor's data: ne1 rows of ne0, values scaled by `scale` (+ `offset`), stored as type (f32, f16, or
 * a quantized type through our quantizer). */
static inline void *synth_tensor(uint64_t *seed, uint32_t type, int64_t ne0, int64_t ne1, float scale, float offset) {
    size_t n = (size_t)(ne0 * ne1);
    float *f = malloc(n * sizeof(float));
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) f[i] = offset + scale * synth_rand(seed);
    if (type == LW_TYPE_F32) return f;
    size_t bytes = type == LW_TYPE_F16 ? 2 * n : lw__row_size(type, ne0, NULL) * (size_t)ne1;
    void *p = bytes ? malloc(bytes) : NULL;
    if (p && type == LW_TYPE_F16) {
        for (size_t i = 0; i < n; i++) ((uint16_t *)p)[i] = lw__fp32_to_fp16(f[i]);
    } else if (p && lw__quantize(type, f, p, ne1, ne0, NULL) != LW_OK) {
        free(p);
        p = NULL;
    }
    free(f);
    return p;
}

/* Writes the model to path. Returns 0 on success. */
static inline int synth_write(const char *path, const synth_spec *sp) {
    lw_gguf_writer *w = NULL;
    if (lw_gguf_writer_new(NULL, &w) != LW_OK) return -1;
    void *bufs[16 * 64 + 8];
    int nb = 0, rc = -1;
    const uint32_t hd = sp->n_embd / sp->n_head, kvd = hd * sp->n_head_kv;
    const char *arch = sp->arch ? sp->arch : "llama";
    char key[128];
#define SYNTH_KEY(k) (snprintf(key, sizeof(key), "%s." k, arch), key)
    lw_gguf_writer_set_str(w, "general.architecture", arch);
    lw_gguf_writer_set_str(w, "general.name", "synthetic");
    lw_gguf_writer_set_u32(w, SYNTH_KEY("context_length"), 2048);
    lw_gguf_writer_set_u32(w, SYNTH_KEY("embedding_length"), sp->n_embd);
    lw_gguf_writer_set_u32(w, SYNTH_KEY("block_count"), sp->n_layer);
    lw_gguf_writer_set_u32(w, SYNTH_KEY("feed_forward_length"), sp->n_ff);
    lw_gguf_writer_set_u32(w, SYNTH_KEY("attention.head_count"), sp->n_head);
    lw_gguf_writer_set_u32(w, SYNTH_KEY("attention.head_count_kv"), sp->n_head_kv);
    lw_gguf_writer_set_u32(w, SYNTH_KEY("rope.dimension_count"), hd);
    lw_gguf_writer_set_f32(w, SYNTH_KEY("rope.freq_base"), 1000000.0f);
    lw_gguf_writer_set_f32(w, SYNTH_KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    const int gemma3 = !strcmp(arch, "gemma3"); /* + sliding window 16, post norms, Q/K norms */
    if (gemma3) {
        lw_gguf_writer_set_u32(w, SYNTH_KEY("attention.key_length"), hd);
        lw_gguf_writer_set_u32(w, SYNTH_KEY("attention.value_length"), hd);
        lw_gguf_writer_set_u32(w, SYNTH_KEY("attention.sliding_window"), 16);
        lw_gguf_writer_set_f32(w, SYNTH_KEY("rope.freq_base_swa"), 10000.0f);
    }
#undef SYNTH_KEY
    if (synth_extra_keys) synth_extra_keys(w, arch);
    lw_gguf_writer_set_u32(w, "general.file_type", sp->wtype == LW_TYPE_F16 ? 1 : sp->wtype == LW_TYPE_F32 ? 0 : 7);

    /* vocabulary: <unk> <s> </s>, the 256 byte tokens, then fillers */
    lw_gguf_str *toks = calloc(sp->n_vocab, sizeof(lw_gguf_str));
    char *text = calloc(sp->n_vocab, 16);
    float *scores = calloc(sp->n_vocab, sizeof(float));
    int32_t *types = calloc(sp->n_vocab, sizeof(int32_t));
    if (!toks || !text || !scores || !types) goto done;
    for (uint32_t i = 0; i < sp->n_vocab; i++) {
        char *t = text + 16 * (size_t)i;
        if (i == 0) strcpy(t, "<unk>"), types[i] = 2;
        else if (i == 1) strcpy(t, "<s>"), types[i] = 3;
        else if (i == 2) strcpy(t, "</s>"), types[i] = 3;
        else if (i < 259) snprintf(t, 16, "<0x%02X>", i - 3), types[i] = 6;
        else snprintf(t, 16, "\xe2\x96\x81t%u", i), types[i] = 1, scores[i] = -(float)i;
        toks[i].s = t;
        toks[i].len = strlen(t);
    }
    lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, sp->n_vocab, toks);
    lw_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LW_GGUF_FLOAT32, sp->n_vocab, scores);
    lw_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LW_GGUF_INT32, sp->n_vocab, types);
    lw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    lw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    lw_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);

    uint64_t seed = sp->seed ? sp->seed : 1;
#define SYNTH_ADD(name, type, ne0, ne1, scale, offset)                                                          \
    do {                                                                                                     \
        int64_t ne_[2] = {(ne0), (ne1)};                                                                     \
        void *d_ = bufs[nb++] = synth_tensor(&seed, (type), ne_[0], ne_[1], (scale), (offset));              \
        if (!d_ || lw_gguf_writer_add_tensor(w, (name), (type), ne_[1] > 1 ? 2 : 1, ne_, d_, NULL, NULL))     \
            goto done;                                                                                       \
    } while (0)
    const float se = 1.0f / sqrtf((float)sp->n_embd), sf = 1.0f / sqrtf((float)sp->n_ff);
    SYNTH_ADD("token_embd.weight", sp->wtype, sp->n_embd, sp->n_vocab, 1.0f, 0.0f);
    SYNTH_ADD("output_norm.weight", LW_TYPE_F32, sp->n_embd, 1, 0.2f, 1.0f);
    if (!sp->tied) SYNTH_ADD("output.weight", sp->wtype, sp->n_embd, sp->n_vocab, se, 0.0f);
    if (sp->biases) SYNTH_ADD("output.bias", LW_TYPE_F32, sp->n_vocab, 1, 0.5f, 0.0f);
    for (uint32_t l = 0; l < sp->n_layer; l++) {
        char n[64];
#define SYNTH_L(suffix, type, ne0, ne1, scale, offset)                                                          \
    snprintf(n, sizeof(n), "blk.%u." suffix, l);                                                             \
    SYNTH_ADD(n, type, ne0, ne1, scale, offset)
        SYNTH_L("attn_norm.weight", LW_TYPE_F32, sp->n_embd, 1, 0.2f, 1.0f);
        if (sp->fused) {
            SYNTH_L("attn_qkv.weight", sp->wtype, sp->n_embd, sp->n_embd + 2 * kvd, se * 2.0f, 0.0f);
        } else {
            SYNTH_L("attn_q.weight", sp->wtype, sp->n_embd, sp->n_embd, se * 2.0f, 0.0f);
            SYNTH_L("attn_k.weight", sp->wtype, sp->n_embd, kvd, se * 2.0f, 0.0f);
            SYNTH_L("attn_v.weight", sp->wtype, sp->n_embd, kvd, se, 0.0f);
        }
        SYNTH_L("attn_output.weight", sp->wtype, sp->n_embd, sp->n_embd, se, 0.0f);
        if (sp->biases) {
            SYNTH_L("attn_q.bias", LW_TYPE_F32, sp->n_embd, 1, 0.3f, 0.0f);
            SYNTH_L("attn_k.bias", LW_TYPE_F32, kvd, 1, 0.3f, 0.0f);
            SYNTH_L("attn_v.bias", LW_TYPE_F32, kvd, 1, 0.3f, 0.0f);
        }
        if (gemma3) {
            SYNTH_L("post_attention_norm.weight", LW_TYPE_F32, sp->n_embd, 1, 0.2f, 1.0f);
            SYNTH_L("post_ffw_norm.weight", LW_TYPE_F32, sp->n_embd, 1, 0.2f, 1.0f);
        }
        if (sp->qk_norm || gemma3) {
            SYNTH_L("attn_q_norm.weight", LW_TYPE_F32, hd, 1, 0.2f, 1.0f);
            SYNTH_L("attn_k_norm.weight", LW_TYPE_F32, hd, 1, 0.2f, 1.0f);
        }
        SYNTH_L("ffn_norm.weight", LW_TYPE_F32, sp->n_embd, 1, 0.2f, 1.0f);
        if (sp->fused) {
            SYNTH_L("ffn_up.weight", sp->wtype, sp->n_embd, 2 * sp->n_ff, se, 0.0f);
        } else {
            SYNTH_L("ffn_gate.weight", sp->wtype, sp->n_embd, sp->n_ff, se, 0.0f);
            SYNTH_L("ffn_up.weight", sp->wtype, sp->n_embd, sp->n_ff, se, 0.0f);
        }
        SYNTH_L("ffn_down.weight", sp->wtype, sp->n_ff, sp->n_embd, sf, 0.0f);
#undef SYNTH_L
    }
#undef SYNTH_ADD
    rc = lw_gguf_writer_write_file(w, path, 0) == LW_OK ? 0 : -1;
    if (rc) fprintf(stderr, "synth_write: %s\n", lw_gguf_writer_error(w));
done:
    for (int i = 0; i < nb; i++) free(bufs[i]);
    free(toks);
    free(text);
    free(scores);
    free(types);
    lw_gguf_writer_free(w);
    return rc;
}

/* $LW_TMP/name, creating $LW_TMP. */
static inline const char *synth_path(char *buf, size_t cap, const char *name) {
    mkdir(test_tmp_dir(), 0777);
    snprintf(buf, cap, "%s/%s", test_tmp_dir(), name);
    return buf;
}

#endif
