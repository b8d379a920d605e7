/* Differential test against llama.cpp itself: loads libllama (node-llama-cpp's prebuilt v0.4.0, found under
 * node_modules/ relative to the repo root) with dlopen and compares, on generated text (random mixes of
 * words, digits, punctuation, whitespace runs, many scripts, combining marks, special-token texts and
 * invalid UTF-8):
 *   - lw_tokenize vs llama_tokenize for every ../shared/vocab file, with and without add/parse special;
 *   - the same for variants of the gpt-2 vocabulary re-labelled with each pre-tokenizer name, so that
 *     every regex set (hand-written splitters and the regex engine) meets llama.cpp's std::regex;
 *   - lw_token_to_piece vs llama_token_to_piece for every token, and lw_detokenize vs llama_detokenize on
 *     random id sequences.
 * Skips (77) when the library or the vocab files are absent. */
#include "test.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------------------
 * The slice of llama.h (v0.4.0) we call; struct layout transcribed from that header.
 * ------------------------------------------------------------------------------------------------------- */

struct llama_model_params {
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int split_mode;
    int load_mode;
    int lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    bool (*progress_callback)(float, void *);
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
};

static struct {
    void (*backend_init)(void);
    struct llama_model_params (*default_params)(void);
    void *(*load)(const char *, struct llama_model_params);
    void (*model_free)(void *);
    const void *(*get_vocab)(const void *);
    int32_t (*tokenize)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool);
    int32_t (*piece)(const void *, int32_t, char *, int32_t, int32_t, bool);
    int32_t (*detokenize)(const void *, const int32_t *, int32_t, char *, int32_t, bool, bool);
    void (*log_set)(void (*)(int, const char *, void *), void *);
} L;

static void quiet_log(int level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static int load_llama(void) {
    const char *path = "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.4.0.so";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
#define SYM(field, name)                                                                                     \
    if (!(*(void **)&L.field = dlsym(h, name))) return 0;
    SYM(backend_init, "llama_backend_init");
    SYM(default_params, "llama_model_default_params");
    SYM(load, "llama_model_load_from_file");
    SYM(model_free, "llama_model_free");
    SYM(get_vocab, "llama_model_get_vocab");
    SYM(tokenize, "llama_tokenize");
    SYM(piece, "llama_token_to_piece");
    SYM(detokenize, "llama_detokenize");
    SYM(log_set, "llama_log_set");
#undef SYM
    L.log_set(quiet_log, NULL);
    L.backend_init();
    return 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Generated text
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static const char *const pieces[] = {
    "Hello", "world", "the", "I", "a", "DON'T", "it's", "we'll", "you're", "I'VE", "'m", "'d", "'S", "'t",
    "llama.cpp", "tokenization", "AbcDEFghi", "camelCase", "snake_case", "x", "Q",
    "0", "7", "42", "1234567", "3.14", "2024-11-30", "1,000,000", "00", "9999999999",
    "!", "?", ".", ",", ";", ":", "(", ")", "[", "]", "{", "}", "<", ">", "-", "_", "=", "+", "*", "/", "\\",
    "|", "@", "#", "$", "%", "^", "&", "~", "`", "\"", "'", "...", "!!", "?!", "->", "==", "//",
    " ", " ", " ", "  ", "   ", "    ", "\t", "\n", "\n", "\n\n", "\r\n", "\r", " \n ", "\t\t", "\n \n",
    "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x89", "\xe2\x80\xa8", "\xc2\x85", "\x0b", "\x0c",
    "\xc3\xa9", "\xc3\x9f", "\xc3\x84pfel", "\xce\xa9", "na\xc3\xafve", "\xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac",
    "\xd1\x80\xd1\x83\xd1\x81\xd1\x81\xd0\xba\xd0\xb8\xd0\xb9", "\xe4\xb8\xad\xe6\x96\x87", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
    "\xe3\x81\x8b\xe3\x82\xab", "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", "\xe0\xb8\x81\xe0\xb8\xb2\xe0\xb8\xa3",
    "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82\xe0\xa4\xa6\xe0\xa5\x80", "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9",
    "\xd9\xa1\xd9\xa2\xd9\xa3", "\xc2\xbd", "\xe2\x85\xab", "\xef\xac\x81", "\xc7\x85", "\xc2\xb5", "\xef\xbc\x84",
    "\xef\xbc\x81", "\xe2\x80\x9c", "\xe2\x80\x94", "\xe2\x80\xa6", "\xe3\x80\x82", "\xef\xbc\x8c",
    "e\xcc\x81", "\xcc\x81", "\xe2\x80\x8b", "\xf0\x9f\xa6\x99", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", "\xe2\x96\x81",
    "\xc4\xa0", "\xe2\x82\xac", "\xc2\xa9", "\xe2\x88\x91", "\xf0\x9d\x90\x80", "\xf0\xae\xaf\xb0\xf0\xae\xaf\xb1",
    "\xe3\x87\xaf",
    "\xff", "\xc3", "\x80", "\xe2\x96", "\xf0\x9f\xa6", "\xc0\x80", "\xed\xa0\x80", "\x01", "\x7f",
    "<s>", "</s>", "<unk>", "<|endoftext|>", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "<|assistant|>", "<|end|>",
    "<fim_prefix>", "<|user|>",
};

static size_t gen_text(char *buf, size_t cap) {
    size_t n = 0, parts = 1 + rnd(14);
    for (size_t i = 0; i < parts; i++) {
        const char *p = pieces[rnd(sizeof(pieces) / sizeof(pieces[0]))];
        size_t l = strlen(p);
        if (n + l + 2 >= cap) break;
        memcpy(buf + n, p, l);
        n += l;
        uint32_t r = rnd(10);
        if (r < 4) buf[n++] = ' ';
        else if (r == 4) buf[n++] = '\0'; /* NUL bytes inside the text */
    }
    return n;
}

/* ---------------------------------------------------------------------------------------------------------
 * Comparisons
 * ------------------------------------------------------------------------------------------------------- */

typedef struct tally {
    unsigned tok_ok, tok_n, piece_ok, piece_n, detok_ok, detok_n;
} tally;

static int shown = 0;

static void compare_tokenize(const void *lv, const lw_vocab *v, const char *name, const char *text, size_t len,
                             int add_special, int parse_special, tally *t) {
    enum { MAX = 4096 };
    int32_t a[MAX], b[MAX];
    int32_t na = L.tokenize(lv, text, (int32_t)len, a, MAX, add_special, parse_special);
    size_t nb = 0;
    lw_status st = lw_tokenize(v, text, len, add_special, parse_special, b, MAX, &nb);
    int same = na >= 0 && st == LW_OK && (size_t)na == nb && !memcmp(a, b, nb * sizeof(int32_t));
    t->tok_n++;
    t->tok_ok += same;
    if (!same && shown < 12) {
        shown++;
        fprintf(stderr, "  %s (add %d parse %d) MISMATCH on \"", name, add_special, parse_special);
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c >= 32 && c < 127 && c != '\\') fputc(c, stderr);
            else fprintf(stderr, "\\x%02x", c);
        }
        fprintf(stderr, "\"\n    llama:");
        for (int32_t i = 0; i < na && i < 60; i++) fprintf(stderr, " %d", a[i]);
        fprintf(stderr, "\n    ours: ");
        for (size_t i = 0; i < nb && i < 60; i++) fprintf(stderr, " %d", b[i]);
        fprintf(stderr, "\n");
    }
}

static void compare_pieces(const void *lv, const lw_vocab *v, tally *t) {
    char a[512], b[512];
    uint32_t n = lw_vocab_n_tokens(v);
    for (uint32_t id = 0; id < n; id++) {
        for (int mode = 0; mode < 4; mode++) {
            int special = mode & 1, lstrip = mode >> 1;
            int32_t na = L.piece(lv, (int32_t)id, a, sizeof(a), lstrip, special);
            size_t nb = 0;
            lw_status st = lw_token_to_piece(v, (int32_t)id, special, (size_t)lstrip, b, sizeof(b), &nb);
            int same = na >= 0 && st == LW_OK && (size_t)na == nb && !memcmp(a, b, nb);
            t->piece_n++;
            t->piece_ok += same;
            if (!same && shown < 12) {
                shown++;
                fprintf(stderr, "  piece mismatch id %u mode %d: llama %d bytes, ours %zu\n", id, mode, na, nb);
            }
        }
    }
}

static void compare_detokenize(const void *lv, const lw_vocab *v, const char *name, tally *t, int rounds) {
    static char a[1 << 16], b[1 << 16];
    int32_t ids[32];
    uint32_t n_vocab = lw_vocab_n_tokens(v);
    for (int r = 0; r < rounds; r++) {
        int n = 1 + (int)rnd(24);
        for (int i = 0; i < n; i++) {
            /* bias towards low ids (bytes, specials) and the BOS/EOS ids */
            uint32_t k = rnd(8);
            ids[i] = k == 0 ? (int32_t)rnd(300 < n_vocab ? 300 : n_vocab)
                     : k == 1 ? lw_vocab_special(v, LW_TOKEN_BOS)
                     : k == 2 ? lw_vocab_special(v, LW_TOKEN_EOS)
                              : (int32_t)rnd(n_vocab);
            if (ids[i] < 0) ids[i] = 0;
        }
        for (int mode = 0; mode < 4; mode++) {
            int rm = mode & 1, unparse = mode >> 1;
            int32_t na = L.detokenize(lv, ids, n, a, sizeof(a), rm, unparse);
            size_t nb = 0;
            lw_status st = lw_detokenize(v, ids, (size_t)n, rm, unparse, b, sizeof(b), &nb);
            int same = na >= 0 && st == LW_OK && (size_t)na == nb && !memcmp(a, b, nb);
            t->detok_n++;
            t->detok_ok += same;
            if (!same && shown < 12) {
                shown++;
                fprintf(stderr, "  %s detokenize mismatch (mode %d): llama '%.*s' ours '%.*s'\n", name, mode,
                        na > 0 ? (int)na : 0, a, (int)nb, b);
            }
        }
    }
}

static lw_vocab *open_ours(const char *path, lw_source **src, lw_gguf **g) {
    lw_vocab *v = NULL;
    char err[256];
    if (lw_source_open_file(path, NULL, src, err, sizeof(err)) != LW_OK) return NULL;
    if (lw_gguf_open(*src, NULL, g) != LW_OK) return NULL;
    lw_status st = lw_vocab_load(*g, NULL, &v);
    CHECK_MSG(st == LW_OK, "%s: %s", path, lw_vocab_error(v));
    if (st != LW_OK) {
        lw_vocab_free(v);
        return NULL;
    }
    return v;
}

/* Runs n_texts generated texts through both tokenizers with add/parse special off; full >= 1 adds the
 * special-token modes and detokenize, full >= 2 every token's piece. */
static int run_vocab(const char *path, const char *label, int n_texts, int full) {
    struct llama_model_params mp = L.default_params();
    mp.vocab_only = true;
    void *model = L.load(path, mp);
    if (!model) {
        printf("%-28s llama.cpp cannot load it: skipped\n", label);
        return 1;
    }
    const void *lv = L.get_vocab(model);
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_vocab *v = open_ours(path, &src, &g);
    tally t = {0};
    int ok = 1;
    if (v) {
        static char text[8192];
        for (int i = 0; i < n_texts; i++) {
            size_t len = gen_text(text, sizeof(text));
            compare_tokenize(lv, v, label, text, len, 0, 0, &t);
            if (full) {
                compare_tokenize(lv, v, label, text, len, 1, 1, &t);
                compare_tokenize(lv, v, label, text, len, 1, 0, &t);
            }
        }
        if (full) {
            if (full > 1) compare_pieces(lv, v, &t);
            compare_detokenize(lv, v, label, &t, full > 1 ? 300 : 60);
        }
        printf("%-28s tokenize %u/%u", label, t.tok_ok, t.tok_n);
        if (full > 1) printf(", pieces %u/%u", t.piece_ok, t.piece_n);
        if (full) printf(", detokenize %u/%u", t.detok_ok, t.detok_n);
        printf("\n");
        ok = t.tok_ok == t.tok_n && t.piece_ok == t.piece_n && t.detok_ok == t.detok_n;
    } else {
        ok = 0;
    }
    lw_vocab_free(v);
    lw_gguf_close(g);
    lw_source_close(src);
    L.model_free(model);
    return ok;
}

/* Copies a vocab file with tokenizer.ggml.pre (and, when model is given, tokenizer.ggml.model) replaced;
 * flags >= 0 set add_space_prefix (bit 0) and remove_extra_whitespaces (bit 1); bit 2 adds a character map. */
static int write_variant_ex(const char *from, const char *pre, const char *model, int flags, const char *to);
static int write_variant(const char *from, const char *pre, const char *to) {
    return write_variant_ex(from, pre, NULL, -1, to);
}
static int write_variant_ex(const char *from, const char *pre, const char *model, int flags, const char *to) {
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_gguf_writer *w = NULL;
    char err[256];
    int ok = lw_source_open_file(from, NULL, &src, err, sizeof(err)) == LW_OK && lw_gguf_open(src, NULL, &g) == LW_OK &&
             lw_gguf_writer_new(NULL, &w) == LW_OK;
    for (int64_t i = 0; ok && i < lw_gguf_n_kv(g); i++) {
        const char *key = lw_gguf_key(g, i);
        if (!strcmp(key, "tokenizer.ggml.pre")) continue;
        if (model && !strcmp(key, "tokenizer.ggml.model")) continue;
        ok = lw_gguf_writer_set(w, key, lw_gguf_value_at(g, i)) == LW_OK;
    }
    ok = ok && lw_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre) == LW_OK;
    if (model) ok = ok && lw_gguf_writer_set_str(w, "tokenizer.ggml.model", model) == LW_OK;
    if (flags >= 0) {
        ok = ok && lw_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", flags & 1) == LW_OK;
        ok = ok && lw_gguf_writer_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", (flags >> 1) & 1) == LW_OK;
    }
    if (flags >= 4) { /* a tiny SentencePiece character map: "A" -> "a", "B" -> "bb" (XCDA built by hand) */
        static uint8_t cmap[4 + 324 * 4 + 5];
        uint32_t xcda[324] = {0};
        xcda[0] = 1u << 10;                                /* root: BASE 1                          */
        xcda[1 ^ 'A'] = (0x80u << 10) | (1u << 8) | 'A';   /* child 'A': leaf, BASE 0x80            */
        xcda[(1 ^ 'A') ^ 0x80] = (1u << 31) | 0;           /* its value: replacement at offset 0    */
        xcda[1 ^ 'B'] = (0x100u << 10) | (1u << 8) | 'B';  /* child 'B': leaf, BASE 0x100           */
        xcda[(1 ^ 'B') ^ 0x100] = (1u << 31) | 2;          /* replacement at offset 2               */
        uint32_t blob = sizeof(xcda);
        memcpy(cmap, &blob, 4); /* little-endian hosts only, like the GGUF files themselves */
        memcpy(cmap + 4, xcda, sizeof(xcda));
        memcpy(cmap + 4 + sizeof(xcda), "a\0bb\0", 5);
        ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.precompiled_charsmap", LW_GGUF_UINT8, sizeof(cmap), cmap) == LW_OK;
    }
    ok = ok && lw_gguf_writer_write_file(w, to, 0) == LW_OK;
    lw_gguf_writer_free(w);
    lw_gguf_close(g);
    lw_source_close(src);
    return ok;
}

/* Turns the llama-spm vocabulary into a Gemma-4-style one (tokenizer.ggml.model "gemma4": BPE over raw
 * UTF-8 with U+2581 for spaces and <0xXX> byte tokens): merges are made up from the vocabulary itself,
 * each normal token split into its longest token prefix and a token rest, ranked by id. Any merge list
 * serves, since both implementations get the same file. */
static int write_gemma4_variant(const char *from, const char *to) {
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_gguf_writer *w = NULL;
    lw_vocab *v = NULL;
    char err[256];
    int ok = lw_source_open_file(from, NULL, &src, err, sizeof(err)) == LW_OK && lw_gguf_open(src, NULL, &g) == LW_OK &&
             lw_vocab_load(g, NULL, &v) == LW_OK && lw_gguf_writer_new(NULL, &w) == LW_OK;
    uint32_t n = ok ? lw_vocab_n_tokens(v) : 0, nm = 0;
    lw_gguf_str *merges = calloc(n + 1, sizeof(lw_gguf_str));
    char *pool = malloc((size_t)n * 64 + 1), *pp = pool;
    ok = ok && merges && pool;
    for (uint32_t id = 0; ok && id < n; id++) {
        size_t len;
        const char *t = lw_vocab_token_text(v, (int32_t)id, &len);
        if (!(lw_vocab_token_attr(v, (int32_t)id) & LW_TOKEN_ATTR_NORMAL) || len < 2 || len > 60 || memchr(t, ' ', len))
            continue;
        for (size_t k = len - 1; k > 0; k--) {
            if (((unsigned char)t[k] & 0xC0) == 0x80) continue; /* split on character boundaries */
            char a[64], b[64];
            memcpy(a, t, k), a[k] = 0;
            memcpy(b, t + k, len - k), b[len - k] = 0;
            if (lw__vocab_find(v, a, k) < 0 || lw__vocab_find(v, b, len - k) < 0) continue;
            memcpy(pp, a, k), pp[k] = ' ', memcpy(pp + k + 1, b, len - k);
            merges[nm++] = (lw_gguf_str){len + 1, pp};
            pp += len + 1;
            break;
        }
    }
    for (int64_t i = 0; ok && i < lw_gguf_n_kv(g); i++) {
        const char *key = lw_gguf_key(g, i);
        if (!strcmp(key, "tokenizer.ggml.model") || !strcmp(key, "tokenizer.ggml.pre")) continue;
        ok = lw_gguf_writer_set(w, key, lw_gguf_value_at(g, i)) == LW_OK;
    }
    ok = ok && nm > 20000; /* most of the 32000 tokens get a merge */
    ok = ok && lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4") == LW_OK;
    ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.merges", LW_GGUF_STRING, nm, merges) == LW_OK;
    ok = ok && lw_gguf_writer_write_file(w, to, 0) == LW_OK;
    free(merges);
    free(pool);
    lw_gguf_writer_free(w);
    lw_vocab_free(v);
    lw_gguf_close(g);
    lw_source_close(src);
    return ok;
}

/* Turns the llama-spm vocabulary into an RWKV-style one: "\u2581" becomes a space and <0xXX> byte tokens
 * become the escaped form "\xhh" that RWKV vocabularies use. */
static int write_rwkv_variant(const char *from, const char *to) {
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_gguf_writer *w = NULL;
    char err[256];
    int ok = lw_source_open_file(from, NULL, &src, err, sizeof(err)) == LW_OK && lw_gguf_open(src, NULL, &g) == LW_OK &&
             lw_gguf_writer_new(NULL, &w) == LW_OK;
    lw_gguf_type t;
    uint64_t n = 0;
    const void *data = NULL;
    ok = ok && lw_gguf_get_arr(g, "tokenizer.ggml.tokens", &t, &n, &data) == LW_OK && t == LW_GGUF_STRING;
    const lw_gguf_str *in = data;
    lw_gguf_str *toks = calloc(n + 1, sizeof(lw_gguf_str));
    char *pool = malloc((size_t)n * 80 + 1), *pp = pool;
    ok = ok && toks && pool;
    for (uint64_t i = 0; ok && i < n; i++) {
        const char *x = in[i].s;
        size_t len = in[i].len, k = 0;
        unsigned b;
        char *start = pp;
        if (len == 6 && sscanf(x, "<0x%2X>", &b) == 1) {
            k = (size_t)sprintf(pp, "\\x%02x", b);
        } else {
            for (size_t j = 0; j < len && k < 76; j++) {
                if (j + 3 <= len && !memcmp(x + j, "\xe2\x96\x81", 3)) pp[k++] = ' ', j += 2;
                else pp[k++] = x[j];
            }
        }
        toks[i] = (lw_gguf_str){k, start};
        pp += k + 1;
    }
    for (int64_t i = 0; ok && i < lw_gguf_n_kv(g); i++) {
        const char *key = lw_gguf_key(g, i);
        if (!strcmp(key, "tokenizer.ggml.model") || !strcmp(key, "tokenizer.ggml.tokens")) continue;
        ok = lw_gguf_writer_set(w, key, lw_gguf_value_at(g, i)) == LW_OK;
    }
    ok = ok && lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "rwkv") == LW_OK;
    ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, n, toks) == LW_OK;
    ok = ok && lw_gguf_writer_write_file(w, to, 0) == LW_OK;
    free(toks);
    free(pool);
    lw_gguf_writer_free(w);
    lw_gguf_close(g);
    lw_source_close(src);
    return ok;
}

/* AddressSanitizer cannot intercept C++ exceptions thrown inside a dlopen'ed libstdc++ user when the
 * executable itself is C (its __cxa_throw interceptor has nothing to forward to), and libllama throws
 * internally during normal operation. */
#if defined(__SANITIZE_ADDRESS__)
#define LW_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LW_UNDER_ASAN 1
#endif
#endif

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/vocab", test_shared_dir());
#ifdef LW_UNDER_ASAN
    test_skip("libllama (C++, throws internally) cannot run under AddressSanitizer from a C test; run the plain build");
#endif
    if (!load_llama())
        test_skip("libllama not found under node_modules/@node-llama-cpp/linux-x64/bins/linux-x64 (run npm install)");
    static const char *const vocabs[] = {"llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm", "bert-bge"};
    int tested = 0, all_ok = 1;
    for (size_t i = 0; i < sizeof(vocabs) / sizeof(vocabs[0]); i++) {
        char path[1200];
        snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", dir, vocabs[i]);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        tested++;
        all_ok &= run_vocab(path, vocabs[i], 400, 2);
    }
    if (!tested) test_skip("no ../shared/vocab/ggml-vocab-*.gguf files");

    /* every pre-tokenizer's regex set, on the gpt-2 vocabulary */
    static const char *const pres[] = {
        "default", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon",
        "mpt", "starcoder", "refact", "command-r", "gpt-2", "jais-2", "poro-chat", "viking", "tekken",
        "chameleon", "gpt-4o", "granite-embed-multi-97m", "tiny_aya", "bailingmoe", "seed-coder", "afmoe",
        "laguna", "exaone-moe", "minicpm5", "youtu", "dbrx", "chatglm-bpe", "bloom", "exaone4", "smollm",
    };
    char base[1200], tmp[1200];
    snprintf(base, sizeof(base), "%s/ggml-vocab-gpt-2.gguf", dir);
    mkdir(test_tmp_dir(), 0755);
    struct stat sb;
    if (stat(base, &sb) == 0) {
        for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++) {
            snprintf(tmp, sizeof(tmp), "%s/tok-gpt2-%s.gguf", test_tmp_dir(), pres[i]);
            CHECK_MSG(write_variant(base, pres[i], tmp), "cannot write %s", tmp);
            char label[96];
            snprintf(label, sizeof(label), "gpt-2 as %s", pres[i]);
            all_ok &= run_vocab(tmp, label, 150, 1); /* pieces do not depend on the pre-tokenizer */
            remove(tmp);
        }
    }
    snprintf(base, sizeof(base), "%s/ggml-vocab-llama-spm.gguf", dir);
    if (stat(base, &sb) == 0) {
        snprintf(tmp, sizeof(tmp), "%s/tok-gemma4.gguf", test_tmp_dir());
        CHECK_MSG(write_gemma4_variant(base, tmp), "cannot write %s", tmp);
        all_ok &= run_vocab(tmp, "llama-spm as gemma4 BPE", 300, 2);
        remove(tmp);
        snprintf(tmp, sizeof(tmp), "%s/tok-rwkv.gguf", test_tmp_dir());
        CHECK_MSG(write_rwkv_variant(base, tmp), "cannot write %s", tmp);
        all_ok &= run_vocab(tmp, "llama-spm as rwkv", 300, 2);
        remove(tmp);
        /* UGM (T5-style unigram) over the same tokens and scores, without a character map */
        for (int flags = 0; flags < 8; flags++) {
            char label[64];
            snprintf(tmp, sizeof(tmp), "%s/tok-t5-%d.gguf", test_tmp_dir(), flags);
            snprintf(label, sizeof(label), "llama-spm as t5 (flags %d)", flags);
            CHECK_MSG(write_variant_ex(base, "default", "t5", flags, tmp), "cannot write %s", tmp);
            all_ok &= run_vocab(tmp, label, 300, flags == 0 ? 2 : 1);
            remove(tmp);
        }
    }
    CHECK_MSG(all_ok, "llama.cpp and llamaweb disagree (see above)");
    return test_summary("test-tokenizer-llama");
}
