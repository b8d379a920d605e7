/* The byte-trie tokenizer families: UGM and RWKV.
 *
 * UGM (T5-style unigram) tokenizer, following llama.cpp's llm_tokenizer_ugm: the text is normalized
 * (user-defined tokens kept, SentencePiece's precompiled character map applied, spaces escaped as U+2581,
 * invalid UTF-8 as U+FFFD), then a Viterbi pass picks the segmentation with the highest summed score;
 * code points no token covers become the unknown token (consecutive ones merged).
 *
 * RWKV, following llm_tokenizer_rwkv: greedy longest match of the unescaped token texts ("\\n",
 * "\\xhh", ...), byte by byte.
 *
 * llama.cpp walks byte tries; we keep the same walks over hash sets of token prefixes (a prefix exists
 * iff the trie has the node), hashed incrementally byte by byte. */
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <float.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Prefix sets
 * ------------------------------------------------------------------------------------------------------- */

static int in_matcher(uint32_t attr) {
    return (attr & (LW_TOKEN_ATTR_NORMAL | LW_TOKEN_ATTR_USER_DEFINED | LW_TOKEN_ATTR_UNUSED)) != 0;
}

/* The bytes a trie spells for token i: its text (UGM) or its unescaped piece (RWKV). */
static const char *trie_text(const lw_vocab *v, uint32_t i, uint32_t *len) {
    if (v->type == LW_VOCAB_RWKV) {
        *len = v->tokens[i].piece_len;
        return v->pieces + v->tokens[i].piece_off;
    }
    *len = v->tokens[i].len;
    return v->text + v->tokens[i].off;
}

/* Finds the slot of prefix s[0..n) (hash h) in a prefix table: its entry, or the empty slot to fill. */
static uint32_t *prefix_slot(const lw_vocab *v, lw__ugm_prefix *tab, uint32_t mask, const char *s, uint32_t n,
                             uint32_t h) {
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t e = tab[i].tok; /* token id + 1 whose text starts with the prefix */
        if (!e) return &tab[i].tok;
        uint32_t tl;
        const char *t = trie_text(v, e - 1, &tl);
        if (tab[i].len == n && !memcmp(t, s, n)) return &tab[i].tok;
    }
}

/* which: 0 = UGM matcher tokens, 1 = UGM user-defined tokens, 2 = every token (RWKV). */
static int selected(const lw_vocab *v, uint32_t i, int which) {
    uint32_t a = v->tokens[i].attr;
    return which == 2 ? 1 : which == 1 ? (a & LW_TOKEN_ATTR_USER_DEFINED) != 0 : in_matcher(a);
}

static lw_status build_prefixes(lw_vocab *v, int which, lw__ugm_prefix **out, uint32_t *mask_out) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        uint32_t tl;
        trie_text(v, i, &tl);
        if (selected(v, i, which)) total += tl;
    }
    if (total >= (1u << 29)) return lw__errorf(v->err, LW_ERR_TOO_LARGE, "UGM vocabulary too large");
    uint32_t size = 16;
    while (size < 2 * total) size <<= 1;
    lw__ugm_prefix *tab = lw__calloc(&v->alloc, size, sizeof(*tab));
    if (!tab) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        if (!selected(v, i, which)) continue;
        uint32_t tl;
        const char *s = trie_text(v, i, &tl);
        uint32_t h = LW_HASH_SEED;
        for (uint32_t n = 1; n <= tl; n++) {
            h = (h ^ (uint8_t)s[n - 1]) * 16777619u;
            uint32_t *slot = prefix_slot(v, tab, size - 1, s, n, h);
            lw__ugm_prefix *e = (lw__ugm_prefix *)((char *)slot - offsetof(lw__ugm_prefix, tok));
            if (!*slot) {
                e->tok = i + 1;
                e->len = n;
                e->value = -1;
            }
            if (n == tl) e->value = (int32_t)i; /* a later insert overwrites, as in the trie */
        }
    }
    *out = tab;
    *mask_out = size - 1;
    return LW_OK;
}

lw_status lw__ugm_init(lw_vocab *v, const void *charsmap, size_t charsmap_len) {
    lw_status st = build_prefixes(v, 0, &v->ugm_all, &v->ugm_all_mask);
    if (st == LW_OK) st = build_prefixes(v, 1, &v->ugm_user, &v->ugm_user_mask);
    if (st != LW_OK) return st;
    float mn = FLT_MAX;
    for (uint32_t i = 0; i < v->n_tokens; i++)
        if ((v->tokens[i].attr & LW_TOKEN_ATTR_NORMAL) && v->tokens[i].score < mn) mn = v->tokens[i].score;
    v->ugm_unk_score = mn - 10.0f;
    if (charsmap_len > 0) {
        if (charsmap_len < 4) return lw__errorf(v->err, LW_ERR_TRUNCATED, "precompiled_charsmap too small");
        uint32_t blob = lw__rd_u32(charsmap);
        if ((uint64_t)blob + 4 >= charsmap_len)
            return lw__errorf(v->err, LW_ERR_OUT_OF_FILE, "precompiled_charsmap: XCDA blob past its end");
        v->ugm_charsmap = lw__malloc(&v->alloc, charsmap_len);
        if (!v->ugm_charsmap) return lw__errorf(v->err, LW_ERR_NOMEM, "out of memory");
        memcpy(v->ugm_charsmap, charsmap, charsmap_len);
        v->ugm_xcda = v->ugm_charsmap + 4;
        v->ugm_xcda_n = blob / 4;
        v->ugm_repl = v->ugm_charsmap + 4 + blob;
        v->ugm_repl_n = charsmap_len - 4 - blob;
    }
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Normalization
 * ------------------------------------------------------------------------------------------------------- */

/* XCDA node i (little-endian u32), or 0 with *ok = 0 when out of range (llama.cpp throws there). */
static uint32_t xcda_node(const lw_vocab *v, size_t i, int *ok) {
    if (i >= v->ugm_xcda_n) {
        *ok = 0;
        return 0;
    }
    return lw__rd_u32(v->ugm_xcda + 4 * i);
}
static uint32_t xcda_base(uint32_t node) {
    return (node >> 10) << ((node & (1u << 9)) >> 6);
}

/* One normalization step at in[off]: sets the text to append (*out, *out_len); returns the bytes consumed. */
static size_t normalize_prefix(const lw_vocab *v, const char *in, size_t len, size_t off, const char **out,
                               size_t *out_len) {
    /* longest walk in the user-defined tokens' trie (ending on a token or not, as llama.cpp) */
    uint32_t h = LW_HASH_SEED;
    size_t walk = 0;
    if (v->ugm_user) {
        for (size_t p = off; p < len; p++) {
            h = (h ^ (uint8_t)in[p]) * 16777619u;
            uint32_t *slot = prefix_slot(v, v->ugm_user, v->ugm_user_mask, in + off, (uint32_t)(p - off + 1), h);
            if (!*slot) break;
            walk = p - off + 1;
        }
    }
    if (walk > 0) {
        *out = in + off, *out_len = walk;
        return walk;
    }
    size_t best_len = 0, best_off = 0;
    if (v->ugm_xcda_n > 0) {
        int ok = 1;
        size_t node = xcda_base(xcda_node(v, 0, &ok));
        for (size_t p = off; p < len && ok; p++) {
            uint8_t c = (uint8_t)in[p];
            if (c == 0) break;
            node ^= c;
            uint32_t nd = xcda_node(v, node, &ok);
            if (!ok || (nd & ((1u << 31) | 0xFFu)) != c) break;
            int leaf = (nd >> 8) & 1;
            node ^= xcda_base(nd);
            if (leaf) {
                uint32_t vn = xcda_node(v, node, &ok);
                if (!ok) break;
                best_len = p - off + 1;
                best_off = vn & ((1u << 31) - 1);
            }
        }
    }
    if (best_len > 0 && best_off < v->ugm_repl_n) {
        const char *r = (const char *)v->ugm_repl + best_off;
        size_t max = v->ugm_repl_n - best_off, n = 0;
        while (n < max && r[n]) n++;
        if (n < max) { /* terminated: use it (llama.cpp throws on an unterminated one) */
            *out = r, *out_len = n;
            return best_len;
        }
    }
    size_t p = off;
    lw__utf8_decode(in, len, &p);
    if (p - off == 1 && (uint8_t)in[off] >= 0x80) { /* invalid: U+FFFD for one byte */
        *out = "\xef\xbf\xbd", *out_len = 3;
        return 1;
    }
    *out = in + off, *out_len = p - off;
    return p - off;
}

/* Appends to a growable byte buffer. */
static int put(lw__u32buf *b, const lw_allocator *a, const char *s, size_t n) {
    size_t bytes = b->n + n;
    if (lw__u32buf_reserve(b, a, bytes / 4 + 1) != LW_OK) return 0;
    memcpy((char *)b->v + b->n, s, n);
    b->n = bytes;
    return 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Viterbi
 * ------------------------------------------------------------------------------------------------------- */

typedef struct best {
    int32_t token; /* last token of the best segmentation ending here */
    size_t from;   /* where that token starts                        */
    double score;  /* summed score                                    */
} best;

lw_status lw__ugm_tokenize(const lw_vocab *v, const char *text, size_t len, void (*emit)(void *, int32_t),
                           void *ctx) {
    const lw_allocator *a = &v->alloc;
    const char *space = v->escape_ws ? "\xe2\x96\x81" : " ";
    size_t space_n = strlen(space);
    int prepend = v->add_space_prefix, merge = v->remove_extra_ws, prepended = 0, non_ws = 0;
    lw__u32buf nb = {0}; /* bytes, n counts bytes */
    lw_status st = LW_OK;
    for (size_t off = 0; off < len;) {
        const char *s;
        size_t sn;
        off += normalize_prefix(v, text, len, off, &s, &sn);
        for (size_t i = 0; i < sn; i++) {
            if (s[i] != ' ') {
                if (!non_ws) {
                    non_ws = 1;
                    if ((prepend && !prepended) || merge) {
                        if (!put(&nb, a, space, space_n)) goto nomem;
                        prepended = 1;
                    }
                }
                if (!put(&nb, a, s + i, 1)) goto nomem;
            } else {
                non_ws = 0;
                if (!merge && !put(&nb, a, space, space_n)) goto nomem;
            }
        }
    }
    const char *w = (const char *)nb.v;
    size_t n = nb.n;
    if (n == 0) goto done;
    size_t cnt;
    best *r = NULL;
    if (!lw__add_size(n, 1, &cnt) || !(r = lw__calloc(a, cnt, sizeof(best)))) goto nomem;
    int32_t unk = v->special[LW_TOKEN_UNK];
    for (size_t i = 0; i <= n; i++) r[i] = (best){unk, 0, -DBL_MAX};
    r[0].score = 0;
    for (size_t off = 0; off < n;) {
        size_t units = lw__utf8_len((uint8_t)w[off]);
        if (units > n - off) units = n - off;
        int single = 0;
        const best cur = r[off];
        uint32_t h = LW_HASH_SEED;
        for (size_t p = off; p < n; p++) {
            h = (h ^ (uint8_t)w[p]) * 16777619u;
            uint32_t *slot = prefix_slot(v, v->ugm_all, v->ugm_all_mask, w + off, (uint32_t)(p - off + 1), h);
            if (!*slot) break;
            const lw__ugm_prefix *e = (const lw__ugm_prefix *)((const char *)slot - offsetof(lw__ugm_prefix, tok));
            if (e->value < 0) continue;
            size_t end = p + 1;
            if (end - off == units) single = 1;
            const lw__token *t = &v->tokens[e->value];
            double sc = cur.score + ((t->attr & LW_TOKEN_ATTR_USER_DEFINED) ? 0.0 : (double)t->score);
            if (sc > r[end].score) r[end] = (best){e->value, off, sc};
        }
        if (!single) {
            double sc = cur.score + (double)v->ugm_unk_score;
            if (sc > r[off + units].score) r[off + units] = (best){unk, off, sc};
        }
        off += units;
    }
    /* backtrack, merging runs of unknown tokens, then emit in order */
    int32_t *ids = lw__calloc(a, cnt, sizeof(int32_t));
    if (!ids) {
        lw__free(a, r);
        goto nomem;
    }
    size_t k = 0, pos = n;
    int prev_unk = 0;
    for (;;) {
        int is_unk = r[pos].token == unk;
        if (!(prev_unk && is_unk)) ids[k++] = r[pos].token;
        if (r[pos].from == 0) break;
        prev_unk = is_unk;
        pos = r[pos].from;
    }
    while (k > 0) emit(ctx, ids[--k]);
    lw__free(a, ids);
    lw__free(a, r);
    goto done;
nomem:
    st = LW_ERR_NOMEM;
done:
    lw__free(a, nb.v);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * RWKV
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__rwkv_init(lw_vocab *v) {
    return build_prefixes(v, 2, &v->ugm_all, &v->ugm_all_mask);
}

void lw__rwkv_tokenize(const lw_vocab *v, const char *text, size_t len, void (*emit)(void *, int32_t), void *ctx) {
    int32_t unk = v->special[LW_TOKEN_UNK];
    for (size_t pos = 0; pos < len;) {
        /* longest token spelled from pos (llama.cpp restarts at 0 when no token ends on the walked path,
         * which loops forever; no real RWKV vocabulary lacks a single byte, and we take the unknown) */
        uint32_t h = LW_HASH_SEED;
        int32_t id = -1;
        size_t end = 0;
        for (size_t p = pos; p < len; p++) {
            h = (h ^ (uint8_t)text[p]) * 16777619u;
            uint32_t *slot = prefix_slot(v, v->ugm_all, v->ugm_all_mask, text + pos, (uint32_t)(p - pos + 1), h);
            if (!*slot) break;
            const lw__ugm_prefix *e = (const lw__ugm_prefix *)((const char *)slot - offsetof(lw__ugm_prefix, tok));
            if (e->value >= 0) id = e->value, end = p + 1;
        }
        if (id < 0) {
            emit(ctx, unk);
            pos++;
        } else {
            emit(ctx, id);
            pos = end;
        }
    }
}
