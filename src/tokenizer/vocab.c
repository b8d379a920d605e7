/* Vocabulary loading from GGUF metadata, following llama.cpp's llama_vocab::impl::load (release v0.4.0):
 * the same keys, the same defaults per tokenizer family and pre-tokenizer, and the same text-based fix-ups
 * of token attributes (EOG detection, "unused" tokens, phi-3 RSTRIP ...), since they change token ids. */
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Pre-tokenizer names (tokenizer.ggml.pre) -> regex set and flag changes
 * ------------------------------------------------------------------------------------------------------- */

enum {
    PF_IGNORE_MERGES = 1 << 0, /* whole pre-token looked up first                  */
    PF_ADD_BOS = 1 << 1,       /* add_bos defaults to true                          */
    PF_NO_CLEAN = 1 << 2,      /* clean_spaces = false                              */
    PF_ADD_SEP = 1 << 3,       /* add_sep = true                                    */
    PF_ESCAPE_WS = 1 << 4,     /* SPM-style BPE: spaces as U+2581, raw UTF-8 merges */
    PF_NO_BOS_ID = 1 << 5,     /* no default BOS id                                 */
    PF_NO_LOWER = 1 << 6,      /* normalizer lowercase off                          */
};

static const struct pre_name {
    const char *name;  /* tokenizer.ggml.pre          */
    lw__pre_set set;   /* regex set                   */
    uint8_t flags;     /* PF_*                        */
} pre_names[] = {
    {"default", LW_PRE_DEFAULT, 0},
    {"minicpm5", LW_PRE_MINICPM5, PF_IGNORE_MERGES},
    {"llama3", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"llama-v3", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"llama-bpe", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"falcon3", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"falcon-h1", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"pixtral", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"midm-2.0", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"lfm2", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"jina-v5-nano", LW_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"deepseek-llm", LW_PRE_DEEPSEEK_LLM, PF_NO_CLEAN},
    {"deepseek-coder", LW_PRE_DEEPSEEK_CODER, PF_NO_CLEAN},
    {"deepseek-v3", LW_PRE_DEEPSEEK3, PF_NO_CLEAN},
    {"youtu", LW_PRE_YOUTU, PF_NO_CLEAN | PF_IGNORE_MERGES},
    {"falcon", LW_PRE_FALCON, 0},
    {"mpt", LW_PRE_GPT2, 0},
    {"starcoder", LW_PRE_STARCODER, 0},
    {"gpt-2", LW_PRE_GPT2, 0},
    {"phi-2", LW_PRE_GPT2, 0},
    {"jina-es", LW_PRE_GPT2, 0},
    {"jina-de", LW_PRE_GPT2, 0},
    {"gigachat", LW_PRE_GPT2, 0},
    {"jina-v2-es", LW_PRE_GPT2, 0},
    {"jina-v2-de", LW_PRE_GPT2, 0},
    {"a.x-4.0", LW_PRE_GPT2, 0},
    {"mellum", LW_PRE_GPT2, 0},
    {"modern-bert", LW_PRE_GPT2, 0},
    {"jais-2", LW_PRE_JAIS2, 0},
    {"gemma4", LW_PRE_GEMMA4, PF_ESCAPE_WS},
    {"granite-embed-multi-311m", LW_PRE_GEMMA4, PF_ESCAPE_WS},
    {"sarvam-moe", LW_PRE_GEMMA4, PF_ESCAPE_WS | PF_NO_CLEAN},
    {"jina-v1-en", LW_PRE_GPT2, PF_ADD_SEP},
    {"jina-v2-code", LW_PRE_GPT2, PF_ADD_SEP},
    {"roberta-bpe", LW_PRE_GPT2, PF_ADD_SEP},
    {"refact", LW_PRE_STARCODER, 0},
    {"command-r", LW_PRE_STARCODER, PF_NO_CLEAN},
    {"qwen2", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"deepseek-r1-qwen", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"kormo", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"f2llmv2", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"qwen35", LW_PRE_QWEN35, PF_NO_CLEAN},
    {"stablelm2", LW_PRE_QWEN2, 0},
    {"olmo", LW_PRE_GPT2, 0},
    {"dbrx", LW_PRE_LLAMA3, 0},
    {"smaug-bpe", LW_PRE_LLAMA3, 0},
    {"poro-chat", LW_PRE_PORO, PF_NO_CLEAN},
    {"glm4", LW_PRE_LLAMA3, PF_NO_BOS_ID},
    {"chatglm-bpe", LW_PRE_LLAMA3, PF_NO_BOS_ID},
    {"viking", LW_PRE_VIKING, PF_NO_CLEAN},
    {"jais", LW_PRE_GPT2, 0},
    {"tekken", LW_PRE_TEKKEN, PF_NO_CLEAN | PF_IGNORE_MERGES | PF_ADD_BOS},
    {"smollm", LW_PRE_STARCODER, PF_NO_CLEAN},
    {"codeshell", LW_PRE_STARCODER, 0},
    {"bloom", LW_PRE_PORO, 0},
    {"gpt3-finnish", LW_PRE_PORO, 0},
    {"exaone", LW_PRE_STARCODER, 0},
    {"exaone4", LW_PRE_GPT2, 0},
    {"exaone-moe", LW_PRE_EXAONE_MOE, 0},
    {"chameleon", LW_PRE_CHAMELEON, PF_ADD_BOS | PF_NO_CLEAN},
    {"minerva-7b", LW_PRE_STARCODER, 0},
    {"megrez", LW_PRE_QWEN2, 0},
    {"gpt-4o", LW_PRE_GPT4O, PF_NO_CLEAN},
    {"llama4", LW_PRE_GPT4O, PF_NO_CLEAN},
    {"kanana2", LW_PRE_GPT4O, PF_NO_CLEAN},
    {"talkie", LW_PRE_GPT4O, PF_NO_CLEAN},
    {"granite-embed-multi-97m", LW_PRE_GRANITE_EMB_MULTI, PF_NO_CLEAN | PF_IGNORE_MERGES},
    {"tiny_aya", LW_PRE_TINY_AYA, PF_NO_CLEAN},
    {"cohere2moe", LW_PRE_TINY_AYA, PF_NO_CLEAN},
    {"trillion", LW_PRE_GPT2, PF_NO_CLEAN},
    {"granite-docling", LW_PRE_GPT2, PF_NO_CLEAN},
    {"bailingmoe", LW_PRE_BAILINGMOE, PF_NO_CLEAN},
    {"bailingmoe2", LW_PRE_BAILINGMOE, PF_NO_CLEAN},
    {"llada-moe", LW_PRE_BAILINGMOE, PF_NO_CLEAN},
    {"seed-coder", LW_PRE_SEED_CODER, PF_NO_CLEAN},
    {"hunyuan", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"hunyuan-dense", LW_PRE_DEEPSEEK3, PF_NO_CLEAN},
    {"joyai-llm", LW_PRE_DEEPSEEK3, PF_NO_CLEAN},
    {"grok-2", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"afmoe", LW_PRE_AFMOE, PF_NO_CLEAN},
    {"laguna", LW_PRE_LAGUNA, PF_NO_CLEAN},
    {"minimax-m2", LW_PRE_GPT4O, PF_NO_CLEAN},
    {"solar-open", LW_PRE_QWEN2, PF_NO_CLEAN},
    {"mellum2", LW_PRE_STARCODER, 0},
};

/* ---------------------------------------------------------------------------------------------------------
 * Hash tables (open addressing, linear probing; slots hold index + 1)
 * ------------------------------------------------------------------------------------------------------- */

static uint32_t table_size_for(uint32_t n) {
    uint32_t s = 16;
    while (s < 2 * (uint64_t)n && s < (1u << 31)) s <<= 1;
    return s;
}

int32_t lw__vocab_find(const lw_vocab *v, const char *s, size_t n) {
    if (!v->tok_hash) return -1;
    uint32_t h = lw__hash_bytes(s, n, LW_HASH_SEED) & v->tok_hash_mask;
    for (;;) {
        uint32_t e = v->tok_hash[h];
        if (!e) return -1;
        const lw__token *t = &v->tokens[e - 1];
        if (t->len == n && !memcmp(v->text + t->off, s, n)) return (int32_t)(e - 1);
        h = (h + 1) & v->tok_hash_mask;
    }
}

/* Inserts id, replacing an earlier token with the same text (llama.cpp's token_to_id[word] = i). */
static void tok_hash_insert(lw_vocab *v, uint32_t id) {
    const lw__token *t = &v->tokens[id];
    uint32_t h = lw__hash_bytes(v->text + t->off, t->len, LW_HASH_SEED) & v->tok_hash_mask;
    for (;;) {
        uint32_t e = v->tok_hash[h];
        if (!e) break;
        const lw__token *o = &v->tokens[e - 1];
        if (o->len == t->len && !memcmp(v->text + o->off, v->text + t->off, t->len)) break;
        h = (h + 1) & v->tok_hash_mask;
    }
    v->tok_hash[h] = id + 1;
}

static uint32_t merge_hash(const char *a, size_t an, const char *b, size_t bn) {
    uint32_t h = lw__hash_bytes(a, an, LW_HASH_SEED);
    h = (h ^ 0xFFu) * 16777619u; /* separator so ("ab","c") and ("a","bc") differ */
    return lw__hash_bytes(b, bn, h);
}

int32_t lw__vocab_merge_rank(const lw_vocab *v, const char *a, size_t an, const char *b, size_t bn) {
    if (!v->merge_hash) return -1;
    uint32_t h = merge_hash(a, an, b, bn) & v->merge_hash_mask;
    for (;;) {
        uint32_t e = v->merge_hash[h];
        if (!e) return -1;
        const lw__merge *m = &v->merges[e - 1];
        if (m->a_len == an && m->b_len == bn && !memcmp(v->merge_text + m->a_off, a, an) &&
            !memcmp(v->merge_text + m->b_off, b, bn))
            return (int32_t)(e - 1);
        h = (h + 1) & v->merge_hash_mask;
    }
}

static uint32_t id_pair_hash(int32_t a, int32_t b) {
    uint32_t h = (uint32_t)a * 0x9E3779B1u ^ ((uint32_t)b + 0x7F4A7C15u) * 0x85EBCA77u;
    return h ^ (h >> 15);
}

int32_t lw__vocab_merge_rank_ids(const lw_vocab *v, int32_t a, int32_t b) {
    if (!v->merge_id_hash) return -1;
    uint32_t h = id_pair_hash(a, b) & v->merge_id_hash_mask;
    for (;;) {
        uint32_t e = v->merge_id_hash[h];
        if (!e) return -1;
        const lw__merge *m = &v->merges[e - 1];
        if (m->a_id == a && m->b_id == b) return (int32_t)(e - 1);
        h = (h + 1) & v->merge_id_hash_mask;
    }
}

/* Splits the merges (after the tokens are known) into the id-pair table and a string table for the rest. */
static lw_status index_merges(lw_vocab *v) {
    uint32_t size = table_size_for(v->n_merges);
    uint32_t *by_id = lw__calloc(&v->alloc, size, sizeof(uint32_t));
    uint32_t *by_str = lw__calloc(&v->alloc, size, sizeof(uint32_t));
    if (!by_id || !by_str) {
        lw__free(&v->alloc, by_id);
        lw__free(&v->alloc, by_str);
        return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    }
    for (uint32_t slot = 0; slot <= v->merge_hash_mask; slot++) { /* every first-ranked pair once */
        uint32_t e = v->merge_hash[slot];
        if (!e) continue;
        lw__merge *m = &v->merges[e - 1];
        const char *a = v->merge_text + m->a_off, *b = v->merge_text + m->b_off;
        m->a_id = lw__vocab_find(v, a, m->a_len);
        m->b_id = lw__vocab_find(v, b, m->b_len);
        uint32_t h;
        if (m->a_id >= 0 && m->b_id >= 0) {
            h = id_pair_hash(m->a_id, m->b_id) & (size - 1);
            while (by_id[h]) h = (h + 1) & (size - 1);
            by_id[h] = e;
        } else {
            h = merge_hash(a, m->a_len, b, m->b_len) & (size - 1);
            while (by_str[h]) h = (h + 1) & (size - 1);
            by_str[h] = e;
        }
    }
    lw__free(&v->alloc, v->merge_hash);
    v->merge_hash = by_str;
    v->merge_id_hash = by_id;
    v->merge_id_hash_mask = size - 1;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Loading helpers
 * ------------------------------------------------------------------------------------------------------- */

static int get_bool(lw_gguf *g, const char *key, uint8_t *out) {
    int b;
    if (lw_gguf_get_bool(g, key, &b) != LW_OK) return 0;
    *out = (uint8_t)(b != 0);
    return 1;
}

/* The text of an id as a C string comparison helper. */
static int text_is(const lw_vocab *v, uint32_t id, const char *s) {
    size_t n = strlen(s);
    return v->tokens[id].len == n && !memcmp(v->text + v->tokens[id].off, s, n);
}

static void set_attr(lw_vocab *v, const char *text, uint32_t attr, int on) {
    int32_t id = lw__vocab_find(v, text, strlen(text));
    if (id < 0) return;
    if (on) v->tokens[id].attr |= attr;
    else v->tokens[id].attr &= ~attr;
}

static int has_eog(const lw_vocab *v, int32_t id) {
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return 1;
    return 0;
}

static void add_eog(lw_vocab *v, int32_t id) {
    if (id >= 0 && !has_eog(v, id)) v->eog[v->n_eog++] = id; /* eog has n_tokens + 8 slots */
}

static void remove_eog(lw_vocab *v, int32_t id) {
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) {
            v->eog[i] = v->eog[--v->n_eog];
            return;
        }
}

/* token_to_piece(special = 1), the cached form (see detok.c for the uncached rules). */
lw_status lw__piece_uncached(const lw_vocab *v, int32_t id, char *buf, size_t cap, size_t *n_out);

static int cmp_eog(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Stable sort of the special cache by text length, longest first (insertion into a merge sort would be
 * overkill: the cache is small, but vocabularies with 100k+ added tokens exist, so use a bottom-up merge). */
static lw_status sort_special(lw_vocab *v) {
    uint32_t n = v->n_special_cache;
    if (n < 2) return LW_OK;
    int32_t *tmp = lw__calloc(&v->alloc, n, sizeof(int32_t));
    if (!tmp) return LW_ERR_NOMEM;
    int32_t *a = v->special_cache, *b = tmp;
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                /* take from the right only when strictly longer: keeps id order among equals */
                if (v->tokens[a[j]].len > v->tokens[a[i]].len) b[k++] = a[j++];
                else b[k++] = a[i++];
            }
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
    if (a != v->special_cache) memcpy(v->special_cache, a, n * sizeof(int32_t));
    lw__free(&v->alloc, tmp);
    return LW_OK;
}

static int lower_contains(const char *s, const char *needle) {
    char buf[256];
    size_t n = strlen(s);
    if (n >= sizeof(buf)) n = sizeof(buf) - 1;
    for (size_t i = 0; i < n; i++) buf[i] = (char)tolower((unsigned char)s[i]);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * lw_vocab_load
 * ------------------------------------------------------------------------------------------------------- */

static lw_status load_merges(lw_vocab *v, lw_gguf *g) {
    lw_gguf_type t;
    uint64_t n;
    const void *data;
    if (lw_gguf_get_arr(g, "tokenizer.ggml.merges", &t, &n, &data) != LW_OK)
        return lw__errorf(v->err, LW_ERR_NOT_FOUND, "cannot find tokenizer merges in model file");
    if (t != LW_GGUF_STRING) return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for merges");
    if (n >= (1u << 30)) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "too many merges");
    const lw_gguf_str *m = data;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n; i++)
        if (!lw__add_u64(bytes, m[i].len, &bytes)) return lw__errorf(v->err, LW_ERR_OVERFLOW, "merges size");
    if (bytes >= UINT32_MAX) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "merges too large");
    v->merges = lw__calloc(&v->alloc, n ? n : 1, sizeof(lw__merge));
    v->merge_text = lw__malloc(&v->alloc, bytes + 1);
    uint32_t size = table_size_for((uint32_t)n);
    v->merge_hash = lw__calloc(&v->alloc, size, sizeof(uint32_t));
    if (!v->merges || !v->merge_text || !v->merge_hash) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    v->merge_hash_mask = size - 1;
    uint32_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *w = m[i].s;
        size_t len = m[i].len, sp = 0;
        memcpy(v->merge_text + off, w, len);
        for (size_t j = 1; j < len; j++)
            if (w[j] == ' ') {
                sp = j;
                break;
            }
        lw__merge *e = &v->merges[i];
        if (sp) { /* "first second" split at the first space after position 0 */
            e->a_off = off, e->a_len = (uint32_t)sp;
            e->b_off = off + (uint32_t)sp + 1, e->b_len = (uint32_t)(len - sp - 1);
        } else { /* no space: llama.cpp records ("", "") */
            e->a_off = e->b_off = off, e->a_len = e->b_len = 0;
        }
        off += (uint32_t)len;
        /* insert unless the pair exists (std::unordered_map::emplace keeps the first rank) */
        const char *a = v->merge_text + e->a_off, *b = v->merge_text + e->b_off;
        uint32_t h = merge_hash(a, e->a_len, b, e->b_len) & v->merge_hash_mask;
        int dup = 0;
        while (v->merge_hash[h]) {
            const lw__merge *o = &v->merges[v->merge_hash[h] - 1];
            if (o->a_len == e->a_len && o->b_len == e->b_len && !memcmp(v->merge_text + o->a_off, a, e->a_len) &&
                !memcmp(v->merge_text + o->b_off, b, e->b_len)) {
                dup = 1;
                break;
            }
            h = (h + 1) & v->merge_hash_mask;
        }
        if (!dup) v->merge_hash[h] = (uint32_t)i + 1;
    }
    v->n_merges = (uint32_t)n;
    return LW_OK;
}

static lw_status load_tokens(lw_vocab *v, lw_gguf *g) {
    lw_gguf_type t;
    uint64_t n;
    const void *data;
    if (lw_gguf_get_arr(g, "tokenizer.ggml.tokens", &t, &n, &data) != LW_OK)
        return lw__errorf(v->err, LW_ERR_NOT_FOUND, "cannot find tokenizer vocab in model file");
    if (t != LW_GGUF_STRING) return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for tokens");
    if (n >= (1u << 30)) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "too many tokens");
    const lw_gguf_str *words = data;

    const float *scores = NULL;
    const int32_t *iscores = NULL, *types = NULL;
    lw_gguf_type st;
    uint64_t sn;
    const void *sd;
    if (lw_gguf_get_arr(g, "tokenizer.ggml.scores", &st, &sn, &sd) == LW_OK) {
        if (st != LW_GGUF_FLOAT32 && st != LW_GGUF_INT32)
            return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for scores");
        if (sn < n) return lw__errorf(v->err, LW_ERR_TRUNCATED, "fewer scores (%llu) than tokens", (unsigned long long)sn);
        if (st == LW_GGUF_FLOAT32) scores = sd;
        else iscores = sd;
    } else if (lw_gguf_find_key(g, "tokenizer.ggml.scores") >= 0) {
        return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for scores");
    }
    if (lw_gguf_get_arr(g, "tokenizer.ggml.token_type", &st, &sn, &sd) == LW_OK) {
        if (st != LW_GGUF_INT32) return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for token_type");
        if (sn < n) return lw__errorf(v->err, LW_ERR_TRUNCATED, "fewer token types than tokens");
        types = sd;
    } else if (lw_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for token_type");
    }

    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = words[i].len ? words[i].len : 32; /* room for "[EMPTY_i]" */
        if (!lw__add_u64(bytes, len + 1, &bytes)) return lw__errorf(v->err, LW_ERR_OVERFLOW, "vocab size");
    }
    if (bytes >= UINT32_MAX) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "vocab text too large");
    v->tokens = lw__calloc(&v->alloc, n ? n : 1, sizeof(lw__token));
    v->text = lw__malloc(&v->alloc, bytes + 1);
    uint32_t size = table_size_for((uint32_t)n);
    v->tok_hash = lw__calloc(&v->alloc, size, sizeof(uint32_t));
    if (!v->tokens || !v->text || !v->tok_hash) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    v->tok_hash_mask = size - 1;
    v->n_tokens = (uint32_t)n;
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        lw__token *tk = &v->tokens[i];
        tk->off = off;
        if (words[i].len) {
            memcpy(v->text + off, words[i].s, words[i].len);
            tk->len = (uint32_t)words[i].len;
        } else {
            tk->len = (uint32_t)snprintf(v->text + off, 32, "[EMPTY_%u]", i);
        }
        v->text[off + tk->len] = 0;
        off += tk->len + 1;
        if (tk->len > v->max_token_len) v->max_token_len = tk->len;
        tk->score = scores ? scores[i] : iscores ? (float)iscores[i] : 0.0f;
        tk->attr = LW_TOKEN_ATTR_NORMAL;
        if (types) {
            switch (types[i]) {
            case 2: tk->attr = LW_TOKEN_ATTR_UNKNOWN; break;
            case 5: tk->attr = LW_TOKEN_ATTR_UNUSED; break;
            case 1: tk->attr = LW_TOKEN_ATTR_NORMAL; break;
            case 3: tk->attr = LW_TOKEN_ATTR_CONTROL; break;
            case 4: tk->attr = LW_TOKEN_ATTR_USER_DEFINED; break;
            case 6: tk->attr = LW_TOKEN_ATTR_BYTE; break;
            default: tk->attr = 0; break; /* undefined */
            }
        }
        tok_hash_insert(v, i);
    }
    return LW_OK;
}

/* EOT/EOM/FIM detection by text, EOG set, unused tokens, and the model-specific attribute fix-ups. */
static lw_status fix_special(lw_vocab *v, lw_gguf *g) {
    static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                            "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                            "<end_of_utterance>", NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const pre_names_[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                             "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
                                             "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const suf_names[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
                                            "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const mid_names[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
                                            "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
    static const char *const pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
    static const char *const sep_names[] = {"<|file_sep|>", NULL};
    static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                            "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                                            "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                            "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                                            "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                            "[e~[", NULL};
    const struct {
        lw_special_token which;
        const char *const *names;
    } detect[] = {{LW_TOKEN_EOT, eot_names},     {LW_TOKEN_EOM, eom_names},     {LW_TOKEN_FIM_PRE, pre_names_},
                  {LW_TOKEN_FIM_SUF, suf_names}, {LW_TOKEN_FIM_MID, mid_names}, {LW_TOKEN_FIM_PAD, pad_names},
                  {LW_TOKEN_FIM_REP, rep_names}, {LW_TOKEN_FIM_SEP, sep_names}};
    /* llama.cpp walks a hash map, so which of several candidates wins is unspecified there; we take the
     * candidate listed first, then the lowest id. */
    for (size_t d = 0; d < sizeof(detect) / sizeof(detect[0]); d++) {
        if (v->special[detect[d].which] >= 0) continue;
        for (const char *const *nm = detect[d].names; *nm; nm++) {
            int32_t id = lw__vocab_find(v, *nm, strlen(*nm));
            if (id >= 0) {
                v->special[detect[d].which] = id;
                v->tokens[id].attr |= LW_TOKEN_ATTR_CONTROL;
                break;
            }
        }
    }
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        lw__token *t = &v->tokens[i];
        if ((t->attr & LW_TOKEN_ATTR_CONTROL) && strstr(v->text + t->off, "unused")) t->attr |= LW_TOKEN_ATTR_UNUSED;
    }
    v->eog = lw__calloc(&v->alloc, (size_t)v->n_tokens + 8, sizeof(int32_t));
    if (!v->eog) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    add_eog(v, v->special[LW_TOKEN_FIM_PAD]);
    add_eog(v, v->special[LW_TOKEN_FIM_REP]);
    add_eog(v, v->special[LW_TOKEN_FIM_SEP]);
    for (const char *const *nm = eog_names; *nm; nm++) {
        int32_t id = lw__vocab_find(v, *nm, strlen(*nm));
        if (id >= 0) {
            add_eog(v, id);
            v->tokens[id].attr |= LW_TOKEN_ATTR_CONTROL;
        }
    }
    /* gpt-oss: always render these */
    static const char *const user_names[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (const char *const *nm = user_names; *nm; nm++) {
        int32_t id = lw__vocab_find(v, *nm, strlen(*nm));
        if (id >= 0) v->tokens[id].attr = LW_TOKEN_ATTR_USER_DEFINED;
    }
    add_eog(v, v->special[LW_TOKEN_EOS]);
    add_eog(v, v->special[LW_TOKEN_EOT]);
    add_eog(v, v->special[LW_TOKEN_EOM]);
    /* o200k_harmony / solar-open: <|end|> is not EOG when <|return|>+<|call|> or <|calls|>+<|flush|> exist */
    {
        int has_return = 0, has_call = 0, has_flush = 0;
        int32_t end_id = -1;
        for (uint32_t i = 0; i < v->n_eog; i++) {
            uint32_t id = (uint32_t)v->eog[i];
            if (id >= v->n_tokens) continue;
            if (text_is(v, id, "<|return|>")) has_return = 1;
            else if (text_is(v, id, "<|call|>") || text_is(v, id, "<|calls|>")) has_call = 1;
            else if (text_is(v, id, "<|flush|>")) has_flush = 1;
            else if (text_is(v, id, "<|end|>")) end_id = (int32_t)id;
        }
        if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
            remove_eog(v, end_id);
            v->tokens[end_id].attr = LW_TOKEN_ATTR_USER_DEFINED;
        }
    }
    /* gemma4 / paddleocr: </s> is not EOG when <|tool_response> is */
    {
        int has_tr = 0;
        int32_t s_id = -1;
        for (uint32_t i = 0; i < v->n_eog; i++) {
            uint32_t id = (uint32_t)v->eog[i];
            if (id >= v->n_tokens) continue;
            if (text_is(v, id, "<|tool_response>")) has_tr = 1;
            else if (text_is(v, id, "</s>")) s_id = (int32_t)id;
        }
        if (has_tr && s_id >= 0) {
            remove_eog(v, s_id);
            v->tokens[s_id].attr = LW_TOKEN_ATTR_NORMAL;
        }
    }
    qsort(v->eog, v->n_eog, sizeof(int32_t), cmp_eog);

    /* special tokens cache */
    v->special_cache = lw__calloc(&v->alloc, v->n_tokens ? v->n_tokens : 1, sizeof(int32_t));
    if (!v->special_cache) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].attr & (LW_TOKEN_ATTR_CONTROL | LW_TOKEN_ATTR_USER_DEFINED | LW_TOKEN_ATTR_UNKNOWN))
            v->special_cache[v->n_special_cache++] = (int32_t)i;
    if (sort_special(v) != LW_OK) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");

    /* per-model attributes, by name */
    const char *name = "", *arch = "";
    lw_gguf_get_str(g, "general.name", &name);
    lw_gguf_get_str(g, "general.architecture", &arch);
    if (strstr(v->pre_name, "jina-v2-de") || strstr(v->pre_name, "jina-v2-es") || strstr(v->pre_name, "jina-v2-code") ||
        strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
        set_attr(v, "<mask>", LW_TOKEN_ATTR_LSTRIP, 1);
    } else if (lower_contains(name, "phi-3") || lower_contains(name, "phi3")) {
        for (uint32_t i = 0; i < v->n_special_cache; i++) v->tokens[v->special_cache[i]].attr |= LW_TOKEN_ATTR_RSTRIP;
        set_attr(v, "</s>", LW_TOKEN_ATTR_RSTRIP, 1);
        set_attr(v, "<unk>", LW_TOKEN_ATTR_RSTRIP, 0);
        set_attr(v, "<s>", LW_TOKEN_ATTR_RSTRIP, 0);
        set_attr(v, "<|endoftext|>", LW_TOKEN_ATTR_RSTRIP, 0);
    } else if (lower_contains(name, "modern-bert")) {
        set_attr(v, "[MASK]", LW_TOKEN_ATTR_LSTRIP, 1);
    }
    return LW_OK;
}

/* The token -> piece cache (token_to_piece with special = 1, as llama.cpp caches it). */
static lw_status build_pieces(lw_vocab *v) {
    uint64_t total = 0;
    char tmp[64];
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        size_t len = 0;
        lw__piece_uncached(v, (int32_t)i, tmp, 0, &len);
        if (!lw__add_u64(total, len + 1, &total)) return lw__errorf(v->err, LW_ERR_OVERFLOW, "pieces size");
    }
    if (total >= UINT32_MAX) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "pieces too large");
    v->pieces = lw__malloc(&v->alloc, total + 1);
    if (!v->pieces) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    uint32_t off = 0;
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        size_t len = 0;
        lw__piece_uncached(v, (int32_t)i, v->pieces + off, total - off, &len);
        v->tokens[i].piece_off = off;
        v->tokens[i].piece_len = (uint32_t)len;
        if (len > v->max_piece_len) v->max_piece_len = (uint32_t)len;
        v->pieces[off + len] = 0;
        off += (uint32_t)len + 1;
    }
    return LW_OK;
}

static lw_status load(lw_vocab *v, lw_gguf *g) {
    const char *model = NULL, *pre = "";
    if (lw_gguf_get_str(g, "tokenizer.ggml.model", &model) != LW_OK)
        return lw__errorf(v->err, LW_ERR_NOT_FOUND, "tokenizer.ggml.model is missing");
    lw_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    snprintf(v->pre_name, sizeof(v->pre_name), "%s", pre);
    for (int i = 0; i < LW_TOKEN_SPECIAL_COUNT; i++) v->special[i] = -1;
    for (int i = 0; i < 256; i++) {
        char u8[4];
        v->byte_tokens[i] = -1;
        v->byte_u8_len[i] = (uint8_t)lw__utf8_encode(lw__byte_to_ucp((uint8_t)i), u8); /* < U+0800: 2 bytes */
        memcpy(v->byte_u8[i], u8, v->byte_u8_len[i]);
    }
    v->escape_ws = 1;
    v->lowercase = v->strip_accents = 1;
    uint8_t pflags = 0;

    if (!strcmp(model, "no_vocab") || !strcmp(model, "none")) {
        v->type = LW_VOCAB_NONE;
        return LW_OK;
    } else if (!strcmp(model, "llama")) {
        v->type = LW_VOCAB_SPM;
        v->special[LW_TOKEN_BOS] = 1, v->special[LW_TOKEN_EOS] = 2, v->special[LW_TOKEN_UNK] = 0;
        v->add_space_prefix = 1, v->add_bos = 1;
    } else if (!strcmp(model, "bert")) {
        v->type = LW_VOCAB_WPM;
        v->special[LW_TOKEN_BOS] = 101, v->special[LW_TOKEN_UNK] = 100, v->special[LW_TOKEN_SEP] = 102;
        v->special[LW_TOKEN_PAD] = 0, v->special[LW_TOKEN_MASK] = 103;
        v->add_sep = 1, v->clean_spaces = 1, v->add_bos = 1;
    } else if (!strcmp(model, "rwkv")) {
        v->type = LW_VOCAB_RWKV; /* no special tokens, nothing added */
    } else if (!strcmp(model, "t5")) {
        v->type = LW_VOCAB_UGM;
        v->special[LW_TOKEN_EOS] = 1, v->special[LW_TOKEN_UNK] = 2, v->special[LW_TOKEN_PAD] = 0;
        v->add_eos = 1;
    } else if (!strcmp(model, "gpt2") || !strcmp(model, "gemma4")) {
        v->type = LW_VOCAB_BPE;
        lw_status st = load_merges(v, g);
        if (st != LW_OK) return st;
        if (!strcmp(model, "gpt2")) v->special[LW_TOKEN_BOS] = 11, v->special[LW_TOKEN_EOS] = 11;
        else snprintf(v->pre_name, sizeof(v->pre_name), "gemma4");
        v->escape_ws = 0, v->clean_spaces = 1, v->byte_encode = 1;
        const struct pre_name *pn = NULL;
        if (!v->pre_name[0]) {
            pn = &pre_names[0]; /* llama.cpp warns and uses 'default' */
        } else {
            for (size_t i = 0; i < sizeof(pre_names) / sizeof(pre_names[0]); i++)
                if (!strcmp(v->pre_name, pre_names[i].name)) pn = &pre_names[i];
        }
        if (!pn) return lw__errorf(v->err, LW_ERR_UNSUPPORTED, "unknown pre-tokenizer type: '%s'", v->pre_name);
        v->pre = pn->set;
        pflags = pn->flags;
        if (pflags & PF_IGNORE_MERGES) v->ignore_merges = 1;
        if (pflags & PF_ADD_BOS) v->add_bos = 1;
        if (pflags & PF_NO_CLEAN) v->clean_spaces = 0;
        if (pflags & PF_ADD_SEP) v->add_sep = 1;
        if (pflags & PF_ESCAPE_WS) v->escape_ws = 1, v->byte_encode = 0;
        if (pflags & PF_NO_BOS_ID) v->special[LW_TOKEN_BOS] = -1;
        if (pflags & PF_NO_LOWER) v->lowercase = 0;
        v->is_gemma4 = v->pre == LW_PRE_GEMMA4 && strcmp(v->pre_name, "sarvam-moe") != 0;
        st = lw__pretok_init(&v->pretok, v->pre, &v->alloc, v->err);
        if (st != LW_OK) return st;
    } else {
        return lw__errorf(v->err, LW_ERR_UNSUPPORTED, "tokenizer model '%s' is not supported", model);
    }
    get_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &v->remove_extra_ws);

    lw_status st = load_tokens(v, g);
    if (st != LW_OK) return st;
    if (v->merge_hash && (st = index_merges(v)) != LW_OK) return st;
    if (v->type == LW_VOCAB_UGM) { /* built from the file's token types, before the fix-ups below */
        lw_gguf_type ct = LW_GGUF_UINT8;
        uint64_t cn = 0;
        const void *cd = NULL;
        if (lw_gguf_find_key(g, "tokenizer.ggml.precompiled_charsmap") >= 0 &&
            (lw_gguf_get_arr(g, "tokenizer.ggml.precompiled_charsmap", &ct, &cn, &cd) != LW_OK ||
             (ct != LW_GGUF_UINT8 && ct != LW_GGUF_INT8)))
            return lw__errorf(v->err, LW_ERR_TYPE_MISMATCH, "invalid gguf type for precompiled_charsmap");
        if (cn > SIZE_MAX) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "precompiled_charsmap too large");
        if ((st = lw__ugm_init(v, cd, (size_t)cn)) != LW_OK) return st;
    }

    if (v->type == LW_VOCAB_SPM) {
        v->pair_bits = lw__calloc(&v->alloc, 65536 / 8, 1);
        if (!v->pair_bits) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < v->n_tokens; i++) {
            const uint8_t *s = (const uint8_t *)v->text + v->tokens[i].off;
            for (uint32_t j = 1; j < v->tokens[i].len; j++) {
                uint32_t pair = (uint32_t)s[j - 1] << 8 | s[j];
                v->pair_bits[pair >> 3] |= (uint8_t)(1u << (pair & 7));
            }
        }
    }

    /* byte tokens for SPM fallback: "<0xXX>", else the byte itself as a one-byte token */
    for (int b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof(buf), "<0x%02X>", b);
        int32_t id = lw__vocab_find(v, buf, 6);
        if (id < 0) {
            buf[0] = (char)b;
            id = lw__vocab_find(v, buf, 1);
        }
        v->byte_tokens[b] = id;
    }

    /* special ids from the file (a default out of range is dropped; a bad file id keeps the default) */
    static const struct {
        const char *key;
        lw_special_token which;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", LW_TOKEN_BOS},       {"tokenizer.ggml.eos_token_id", LW_TOKEN_EOS},
        {"tokenizer.ggml.eot_token_id", LW_TOKEN_EOT},       {"tokenizer.ggml.eom_token_id", LW_TOKEN_EOM},
        {"tokenizer.ggml.unknown_token_id", LW_TOKEN_UNK},   {"tokenizer.ggml.seperator_token_id", LW_TOKEN_SEP},
        {"tokenizer.ggml.padding_token_id", LW_TOKEN_PAD},   {"tokenizer.ggml.mask_token_id", LW_TOKEN_MASK},
        {"tokenizer.ggml.fim_pre_token_id", LW_TOKEN_FIM_PRE}, {"tokenizer.ggml.fim_suf_token_id", LW_TOKEN_FIM_SUF},
        {"tokenizer.ggml.fim_mid_token_id", LW_TOKEN_FIM_MID}, {"tokenizer.ggml.fim_pad_token_id", LW_TOKEN_FIM_PAD},
        {"tokenizer.ggml.fim_rep_token_id", LW_TOKEN_FIM_REP}, {"tokenizer.ggml.fim_sep_token_id", LW_TOKEN_FIM_SEP},
        {"tokenizer.ggml.prefix_token_id", LW_TOKEN_FIM_PRE}, {"tokenizer.ggml.suffix_token_id", LW_TOKEN_FIM_SUF},
        {"tokenizer.ggml.middle_token_id", LW_TOKEN_FIM_MID},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int32_t *id = &v->special[keys[i].which];
        if (*id >= 0 && (uint32_t)*id >= v->n_tokens) *id = -1;
        uint32_t nid;
        if (lw_gguf_get_u32(g, keys[i].key, &nid) != LW_OK) continue;
        if (nid < v->n_tokens) *id = (int32_t)nid;
    }
    get_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    get_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    get_bool(g, "tokenizer.ggml.add_sep_token", &v->add_sep);
    if (v->is_gemma4) v->add_bos = 1; /* llama.cpp's Gemma 4 workaround */
    get_bool(g, "tokenizer.ggml.normalizer.lowercase", &v->lowercase);
    v->strip_accents = v->lowercase;
    get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &v->strip_accents);

    st = fix_special(v, g);
    if (st != LW_OK) return st;

    /* RWKV's tokenizer walks the unescaped texts, which are its pieces: build the cache first */
    if (v->type == LW_VOCAB_RWKV && (st = build_pieces(v)) != LW_OK) return st;
    if (v->type == LW_VOCAB_RWKV && (st = lw__rwkv_init(v)) != LW_OK) return st;

    /* newline token */
    if (v->type == LW_VOCAB_SPM) {
        v->special[LW_TOKEN_NL] = v->byte_tokens['\n'] >= 0 ? v->byte_tokens['\n'] : v->special[LW_TOKEN_PAD];
    } else if (v->type == LW_VOCAB_WPM) {
        v->special[LW_TOKEN_NL] = v->special[LW_TOKEN_PAD];
    } else {
        int32_t ids[8];
        size_t n = 0;
        lw_status ts = lw_tokenize(v, "\n", 1, 0, 0, ids, 8, &n);
        if (ts == LW_ERR_NOMEM) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
        v->special[LW_TOKEN_NL] = (ts == LW_OK || ts == LW_ERR_TOO_LARGE) && n > 0 ? ids[0] : v->special[LW_TOKEN_PAD];
    }

    if (v->type != LW_VOCAB_RWKV && (st = build_pieces(v)) != LW_OK) return st;
    return LW_OK;
}

lw_status lw_vocab_load(lw_gguf *g, const lw_allocator *alloc, lw_vocab **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_vocab *v = lw__calloc(&a, 1, sizeof(*v));
    if (!v) return LW_ERR_NOMEM;
    v->alloc = a;
    *out = v;
    if (!g) return lw__errorf(v->err, LW_ERR_INVALID_ARG, "no GGUF file");
    return load(v, g);
}

void lw_vocab_free(lw_vocab *v) {
    if (!v) return;
    lw_allocator a = v->alloc;
    lw__pretok_free(&v->pretok);
    lw__free(&a, v->tokens);
    lw__free(&a, v->text);
    lw__free(&a, v->tok_hash);
    lw__free(&a, v->pieces);
    lw__free(&a, v->merges);
    lw__free(&a, v->merge_text);
    lw__free(&a, v->merge_hash);
    lw__free(&a, v->merge_id_hash);
    lw__free(&a, v->special_cache);
    lw__free(&a, v->eog);
    lw__free(&a, v->pair_bits);
    lw__free(&a, v->ugm_all);
    lw__free(&a, v->ugm_user);
    lw__free(&a, v->ugm_charsmap);
    lw__free(&a, v);
}

/* ---------------------------------------------------------------------------------------------------------
 * Accessors
 * ------------------------------------------------------------------------------------------------------- */

const char *lw_vocab_error(const lw_vocab *v) {
    return v ? v->err : "no vocabulary";
}
lw_vocab_type lw_vocab_get_type(const lw_vocab *v) {
    return v->type;
}
uint32_t lw_vocab_n_tokens(const lw_vocab *v) {
    return v->n_tokens;
}
const char *lw_vocab_pre(const lw_vocab *v) {
    return v->pre_name;
}
const char *lw_vocab_token_text(const lw_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || (uint32_t)id >= v->n_tokens) return NULL;
    if (len) *len = v->tokens[id].len;
    return v->text + v->tokens[id].off;
}
int32_t lw_vocab_find(const lw_vocab *v, const char *text, size_t len) {
    return v && (text || !len) ? lw__vocab_find(v, text, len) : -1;
}
float lw_vocab_token_score(const lw_vocab *v, int32_t id) {
    return id < 0 || (uint32_t)id >= v->n_tokens ? 0.0f : v->tokens[id].score;
}
uint32_t lw_vocab_token_attr(const lw_vocab *v, int32_t id) {
    return id < 0 || (uint32_t)id >= v->n_tokens ? 0 : v->tokens[id].attr;
}
int32_t lw_vocab_special(const lw_vocab *v, lw_special_token which) {
    return (unsigned)which < LW_TOKEN_SPECIAL_COUNT ? v->special[which] : -1;
}
int lw_vocab_is_eog(const lw_vocab *v, int32_t id) {
    return id >= 0 && has_eog(v, id);
}
int lw_vocab_adds_bos(const lw_vocab *v) {
    return v->add_bos;
}
int lw_vocab_adds_eos(const lw_vocab *v) {
    return v->add_eos;
}
size_t lw_vocab_max_piece_len(const lw_vocab *v) {
    return v->max_piece_len;
}
