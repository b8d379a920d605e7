/* Text -> token ids, following llama.cpp's llama_vocab::impl::tokenize: special tokens are cut out of
 * the text first (longest first), then each text fragment goes through the family's algorithm:
 *   SPM  - llm_tokenizer_spm: merge adjacent symbols by highest token score, bytes as <0xXX> fallback;
 *   BPE  - llm_tokenizer_bpe: pre-tokenize (pretok.c), map bytes to GPT-2 code points, merge by rank;
 *   WPM  - llm_tokenizer_wpm: normalize (lowercase, strip accents), split, greedy longest match.
 * Where the time goes: the merge loops (hash lookups of candidate pairs) and, for BPE, pre-tokenization. */
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Per-call state
 * ------------------------------------------------------------------------------------------------------- */

/* A fragment of the input: a special token, or a byte range of raw text. */
typedef struct frag {
    int32_t token;     /* token id, or -1 for text */
    uint32_t off, len; /* text range               */
} frag;

/* A symbol of the merge loops: a byte range of the word that is being merged. */
typedef struct sym {
    int32_t prev, next; /* neighbours, -1 at the ends       */
    uint32_t off, n;    /* bytes in the word; n = 0: merged */
    int32_t id;         /* BPE: token with this text, or -1 */
} sym;

/* A candidate merge of two adjacent symbols. */
typedef struct bigram {
    int32_t left, right; /* symbol indices                          */
    uint32_t size;       /* bytes of left + right when it was made   */
    float score;         /* SPM: token score (higher first)          */
    int32_t rank;        /* BPE: merge rank (lower first)            */
} bigram;

typedef struct tok_state {
    const lw_vocab *v;
    const lw_allocator *a;
    int32_t *out;         /* caller's array              */
    size_t cap, n;        /* its capacity, ids produced  */
    lw_status st;         /* first failure               */
    frag *frags;          /* partition of the input      */
    size_t n_frags, cap_frags;
    frag *frags2;         /* ping-pong for the partition */
    size_t cap_frags2;
    char *buf;            /* word / fragment bytes       */
    size_t cap_buf;
    sym *syms;            /* merge symbols               */
    size_t cap_syms;
    bigram *heap;         /* merge candidates            */
    size_t n_heap, cap_heap;
    uint32_t *cpts;       /* code points of a fragment   */
    uint16_t *flags;      /* their flags                 */
    size_t cap_cpts;
    lw__pretok_scratch pre; /* pre-tokenizer memory      */
} tok_state;

static void emit(tok_state *t, int32_t id) {
    if (t->n < t->cap) t->out[t->n] = id;
    t->n++;
}

/* Grows an array to hold need elements. */
static int reserve(tok_state *t, void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t nc = *cap ? *cap : 64, bytes;
    while (nc < need)
        if (!lw__mul_size(nc, 2, &nc)) goto fail;
    if (!lw__mul_size(nc, elem, &bytes)) goto fail;
    void *np = lw__realloc(t->a, *p, bytes);
    if (!np) goto fail;
    *p = np;
    *cap = nc;
    return 1;
fail:
    if (t->st == LW_OK) t->st = LW_ERR_NOMEM;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * Heap of bigrams: SPM pops the highest score, BPE the lowest rank; ties go to the leftmost pair.
 * ------------------------------------------------------------------------------------------------------- */

static int before(const bigram *x, const bigram *y, int spm) {
    if (spm) return x->score > y->score || (x->score == y->score && x->left < y->left);
    return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
}

static void heap_push(tok_state *t, const bigram *b, int spm) {
    if (!reserve(t, (void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof(bigram))) return;
    size_t i = t->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(b, &t->heap[p], spm)) break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = *b;
}

static bigram heap_pop(tok_state *t, int spm) {
    bigram top = t->heap[0], last = t->heap[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&t->heap[c + 1], &t->heap[c], spm)) c++;
        if (!before(&t->heap[c], &last, spm)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n) t->heap[i] = last;
    return top;
}

/* Splits word[0..len) into one symbol per UTF-8 character (a truncated one at the end keeps its bytes). */
static size_t make_symbols(tok_state *t, const char *word, size_t len) {
    if (!reserve(t, (void **)&t->syms, &t->cap_syms, len, sizeof(sym))) return 0;
    size_t n = 0, off = 0;
    while (off < len) {
        size_t l = lw__utf8_len((uint8_t)word[off]);
        if (l > len - off) l = len - off;
        t->syms[n].off = (uint32_t)off;
        t->syms[n].n = (uint32_t)l;
        t->syms[n].id = -1;
        t->syms[n].prev = (int32_t)n - 1;
        off += l;
        t->syms[n].next = off == len ? -1 : (int32_t)n + 1;
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------------------------------------------------
 * SPM
 * ------------------------------------------------------------------------------------------------------- */

static void spm_try_bigram(tok_state *t, const char *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    size_t size = t->syms[left].n + t->syms[right].n;
    int32_t id = lw__vocab_find(t->v, w + t->syms[left].off, size);
    if (id < 0) return;
    bigram b = {left, right, (uint32_t)size, t->v->tokens[id].score, 0};
    heap_push(t, &b, 1);
}

static void spm_chunk(tok_state *t, const char *w, size_t len) {
    size_t n = make_symbols(t, w, len);
    if (t->st != LW_OK || n == 0) return;
    t->n_heap = 0;
    for (size_t i = 1; i < n; i++) spm_try_bigram(t, w, (int32_t)i - 1, (int32_t)i);
    while (t->n_heap > 0 && t->st == LW_OK) {
        bigram b = heap_pop(t, 1);
        sym *l = &t->syms[b.left], *r = &t->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) t->syms[r->next].prev = b.left;
        spm_try_bigram(t, w, l->prev, b.left);
        spm_try_bigram(t, w, b.left, l->next);
    }
    for (int32_t i = 0; i != -1; i = t->syms[i].next) {
        const sym *s = &t->syms[i];
        int32_t id = lw__vocab_find(t->v, w + s->off, s->n);
        if (id >= 0) {
            emit(t, id);
            continue;
        }
        /* Symbols that formed no token go out as bytes. (llama.cpp throws when a vocabulary lacks the byte
         * token; we fall back to the unknown token.) */
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t bt = t->v->byte_tokens[(uint8_t)w[s->off + j]];
            if (bt < 0) bt = t->v->special[LW_TOKEN_UNK];
            if (bt >= 0) emit(t, bt);
        }
    }
}

/* Merges the text in chunks cut where no token contains the two bytes around the cut (see
 * lw_vocab.pair_bits): no merge can cross such a cut, and merges on either side do not interact, so the
 * result equals one merge over the whole text. Cuts fall only on the symbol boundaries of the whole text.
 * This keeps the heaps small: one heap over a long text is slow (cache misses on every pop). */
static void spm_tokenize(tok_state *t, const char *w, size_t len) {
    const uint8_t *u = (const uint8_t *)w;
    size_t start = 0, off = 0;
    while (off < len && t->st == LW_OK) {
        size_t l = lw__utf8_len(u[off]);
        if (l > len - off) l = len - off;
        if (off > start) {
            uint32_t pair = (uint32_t)u[off - 1] << 8 | u[off];
            if (!(t->v->pair_bits[pair >> 3] & (1u << (pair & 7)))) {
                spm_chunk(t, w + start, off - start);
                start = off;
            }
        }
        off += l;
    }
    if (start < len && t->st == LW_OK) spm_chunk(t, w + start, len - start);
}

/* ---------------------------------------------------------------------------------------------------------
 * BPE
 * ------------------------------------------------------------------------------------------------------- */

static void bpe_try_bigram(tok_state *t, const char *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &t->syms[left], *r = &t->syms[right];
    int32_t rank = l->id >= 0 && r->id >= 0 ? lw__vocab_merge_rank_ids(t->v, l->id, r->id)
                                            : lw__vocab_merge_rank(t->v, w + l->off, l->n, w + r->off, r->n);
    if (rank < 0) return;
    bigram b = {left, right, l->n + r->n, 0.0f, rank};
    heap_push(t, &b, 0);
}

/* Merges one pre-token and emits its tokens. */
static void bpe_word(tok_state *t, const char *w, size_t len) {
    const lw_vocab *v = t->v;
    size_t n;
    int whole = 0;
    if (v->ignore_merges && lw__vocab_find(v, w, len) >= 0) {
        whole = 1;
    } else if (v->is_gemma4) {
        size_t j = 0;
        while (j < len && w[j] == '\n') j++;
        if (j == len && lw__vocab_find(v, w, len) >= 0) whole = 1;
    }
    if (whole) {
        if (!reserve(t, (void **)&t->syms, &t->cap_syms, 1, sizeof(sym))) return;
        t->syms[0] = (sym){-1, -1, 0, (uint32_t)len, lw__vocab_find(v, w, len)};
        n = 1;
    } else {
        n = make_symbols(t, w, len);
        if (t->st != LW_OK) return;
        for (size_t i = 0; i < n; i++) t->syms[i].id = lw__vocab_find(v, w + t->syms[i].off, t->syms[i].n);
        t->n_heap = 0;
        for (size_t i = 1; i < n; i++) bpe_try_bigram(t, w, (int32_t)i - 1, (int32_t)i);
        while (t->n_heap > 0 && t->st == LW_OK) {
            bigram b = heap_pop(t, 0);
            sym *l = &t->syms[b.left], *r = &t->syms[b.right];
            /* stale when either side changed: the pair's bytes start at l->off, so equal text means equal size */
            if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
            l->n += r->n;
            r->n = 0;
            l->id = lw__vocab_find(v, w + l->off, l->n);
            l->next = r->next;
            if (r->next >= 0) t->syms[r->next].prev = b.left;
            bpe_try_bigram(t, w, l->prev, b.left);
            bpe_try_bigram(t, w, b.left, l->next);
        }
    }
    for (size_t i = 0; i < n; i++) {
        const sym *s = &t->syms[i];
        if (s->n == 0) continue;
        int32_t id = s->id;
        if (id >= 0) {
            emit(t, id);
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            uint8_t c = (uint8_t)w[s->off + j];
            int32_t bt;
            if (v->byte_encode) {
                bt = lw__vocab_find(v, (const char *)&c, 1);
            } else {
                static const char hex[] = "0123456789ABCDEF";
                char b6[6] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>'};
                bt = lw__vocab_find(v, b6, 6);
            }
            if (bt >= 0) emit(t, bt);
        }
    }
}

static int grow_cpts(tok_state *t, size_t n) {
    if (n <= t->cap_cpts) return 1;
    size_t c1 = t->cap_cpts, c2 = t->cap_cpts;
    if (!reserve(t, (void **)&t->cpts, &c1, n, sizeof(uint32_t))) return 0;
    if (!reserve(t, (void **)&t->flags, &c2, n, sizeof(uint16_t))) return 0;
    t->cap_cpts = c1 < c2 ? c1 : c2;
    return 1;
}

/* Decodes text into t->cpts / t->flags; returns the code point count. */
static size_t decode(tok_state *t, const char *text, size_t len) {
    if (!grow_cpts(t, len + 1)) return 0;
    size_t n = 0, off = 0;
    while (off < len) {
        uint32_t c = lw__utf8_decode(text, len, &off);
        t->cpts[n] = c;
        t->flags[n] = lw__ucp_flags(c);
        n++;
    }
    return n;
}

static void bpe_tokenize(tok_state *t, const char *text, size_t len) {
    const lw_vocab *v = t->v;
    size_t n = decode(t, text, len);
    if (t->st != LW_OK || n == 0) return;
    lw_status st = lw__pretok_split(&v->pretok, t->cpts, t->flags, n, &t->pre, t->a);
    if (st != LW_OK) {
        t->st = st;
        return;
    }
    size_t start = 0;
    for (size_t p = 0; p < t->pre.lens.n && t->st == LW_OK; p++) {
        size_t cnt = t->pre.lens.v[p];
        /* a code point is at most 4 bytes, each byte at most 2 after the GPT-2 mapping */
        if (!reserve(t, (void **)&t->buf, &t->cap_buf, cnt * 8 + 8, 1)) return;
        size_t wl = 0;
        for (size_t i = start; i < start + cnt; i++) {
            char u8[4];
            size_t k = lw__utf8_encode(t->cpts[i], u8);
            if (!v->byte_encode) {
                memcpy(t->buf + wl, u8, k);
                wl += k;
                continue;
            }
            for (size_t j = 0; j < k; j++) {
                uint8_t b = (uint8_t)u8[j];
                memcpy(t->buf + wl, v->byte_u8[b], 2);
                wl += v->byte_u8_len[b];
            }
        }
        start += cnt;
        bpe_word(t, t->buf, wl);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * WPM
 * ------------------------------------------------------------------------------------------------------- */

static int is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Greedy longest-prefix matching of "\u2581" + word[0..len). */
static void wpm_word(tok_state *t, const char *word, size_t len) {
    const lw_vocab *v = t->v;
    size_t n = len + 3, start = t->n;
    if (!reserve(t, (void **)&t->syms, &t->cap_syms, (n + sizeof(sym) - 1) / sizeof(sym), sizeof(sym))) return;
    char *w1 = (char *)t->syms; /* scratch: the word with its phantom space */
    memcpy(w1, "\xe2\x96\x81", 3);
    memcpy(w1 + 3, word, len);
    for (size_t i = 0; i < n; i++) {
        int match = 0;
        size_t j = n < i + v->max_token_len + 1 ? n : i + v->max_token_len + 1;
        for (; j > i; j--) {
            int32_t id = lw__vocab_find(v, w1 + i, j - i);
            if (id >= 0) {
                emit(t, id);
                match = 1;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            t->n = start; /* discard the word's tokens */
            break;
        }
    }
    if (t->n == start && v->special[LW_TOKEN_UNK] >= 0) emit(t, v->special[LW_TOKEN_UNK]);
}

static void wpm_tokenize(tok_state *t, const char *text, size_t len) {
    const lw_vocab *v = t->v;
    size_t n = decode(t, text, len);
    if (t->st != LW_OK || n == 0) return;
    /* the longest normalized form: each code point re-encoded (<= 4 bytes) */
    if (!reserve(t, (void **)&t->buf, &t->cap_buf, n * 4 + 4, 1)) return;
    size_t wl = 0;
    for (size_t i = 0; i < n && t->st == LW_OK; i++) {
        uint32_t c = t->cpts[i];
        if (v->strip_accents) c = lw__ucp_nfd_first(c);
        uint16_t f = lw__ucp_flags(c);
        if (f & LW_UCP_WHITESPACE) {
            if (wl) wpm_word(t, t->buf, wl);
            wl = 0;
            continue;
        }
        if (c == 0 || c == LW_UCP_REPLACEMENT || (f & LW_UCP_CONTROL)) continue;
        if (v->strip_accents && (f & LW_UCP_MARK)) continue;
        char u8[4];
        size_t k = lw__utf8_encode(v->lowercase ? lw__ucp_tolower(c) : c, u8);
        if ((f & LW_UCP_PUNCT) || (c < 0x7F && (f & LW_UCP_SYMBOL)) || is_chinese(c)) {
            if (wl) wpm_word(t, t->buf, wl);
            wpm_word(t, u8, k);
            wl = 0;
        } else {
            memcpy(t->buf + wl, u8, k);
            wl += k;
        }
    }
    if (wl && t->st == LW_OK) wpm_word(t, t->buf, wl);
}

/* ---------------------------------------------------------------------------------------------------------
 * Special-token partition (llama.cpp's tokenizer_st_partition)
 * ------------------------------------------------------------------------------------------------------- */

static int c_isspace(uint8_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char *end = hay + (n - m) + 1;
    for (const char *p = hay; p < end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (!memcmp(p, needle, m)) return p;
    }
    return NULL;
}

static int push_frag(tok_state *t, int32_t token, size_t off, size_t len) {
    if (!reserve(t, (void **)&t->frags2, &t->cap_frags2, t->n_frags + 1, sizeof(frag))) return 0;
    t->frags2[t->n_frags++] = (frag){token, (uint32_t)off, (uint32_t)len};
    return 1;
}

static void partition(tok_state *t, const char *text, size_t len, int parse_special) {
    const lw_vocab *v = t->v;
    t->n_frags = 0;
    if (!reserve(t, (void **)&t->frags, &t->cap_frags, 1, sizeof(frag))) return;
    t->frags[0] = (frag){-1, 0, (uint32_t)len};
    size_t n = 1;
    for (uint32_t s = 0; s < v->n_special_cache && t->st == LW_OK; s++) {
        int32_t id = v->special_cache[s];
        const lw__token *tk = &v->tokens[id];
        if (!parse_special && (tk->attr & (LW_TOKEN_ATTR_CONTROL | LW_TOKEN_ATTR_UNKNOWN))) continue;
        const char *needle = v->text + tk->off;
        size_t m = tk->len;
        int found_any = 0;
        for (size_t f = 0; f < n && !found_any; f++)
            found_any = t->frags[f].token < 0 && find_bytes(text + t->frags[f].off, t->frags[f].len, needle, m);
        if (!found_any) continue;
        t->n_frags = 0;
        for (size_t f = 0; f < n && t->st == LW_OK; f++) {
            frag fr = t->frags[f];
            if (fr.token >= 0) {
                push_frag(t, fr.token, 0, 0);
                continue;
            }
            size_t base = fr.off, blen = fr.len;
            for (;;) {
                const char *hit = find_bytes(text + base, blen, needle, m);
                if (!hit) {
                    if (blen > 0) push_frag(t, -1, base, blen);
                    break;
                }
                size_t match = (size_t)(hit - text);
                if (match > base) {
                    size_t ll = match - base;
                    if (tk->attr & LW_TOKEN_ATTR_LSTRIP)
                        while (ll > 0 && c_isspace((uint8_t)text[base + ll - 1])) ll--;
                    if (ll > 0) push_frag(t, -1, base, ll);
                }
                push_frag(t, id, 0, 0);
                size_t roff = match + m, rlen = base + blen - roff;
                if (tk->attr & LW_TOKEN_ATTR_RSTRIP)
                    while (rlen > 0 && c_isspace((uint8_t)text[roff])) roff++, rlen--;
                base = roff;
                blen = rlen;
                if (blen == 0) break;
            }
        }
        frag *tmp = t->frags;
        size_t tc = t->cap_frags;
        t->frags = t->frags2;
        t->cap_frags = t->cap_frags2;
        t->frags2 = tmp;
        t->cap_frags2 = tc;
        n = t->n_frags;
    }
    t->n_frags = n;
}

/* ---------------------------------------------------------------------------------------------------------
 * lw_tokenize
 * ------------------------------------------------------------------------------------------------------- */

/* SPM fragment: optional leading space, spaces escaped as U+2581. */
static void spm_fragment(tok_state *t, const char *text, size_t len, int prefix_space) {
    size_t need;
    if (!lw__mul_size(len + 1, 3, &need) || !reserve(t, (void **)&t->buf, &t->cap_buf, need, 1)) return;
    size_t k = 0;
    if (prefix_space) memcpy(t->buf, "\xe2\x96\x81", 3), k = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(t->buf + k, "\xe2\x96\x81", 3), k += 3;
        else t->buf[k++] = text[i];
    }
    spm_tokenize(t, t->buf, k); /* nothing reallocates buf during the merge */
}

/* BPE fragment with SPM-style spaces (gemma4): escape, then tokenize. */
static void bpe_fragment(tok_state *t, const char *text, size_t len) {
    if (!t->v->escape_ws) {
        bpe_tokenize(t, text, len);
        return;
    }
    size_t need;
    if (!lw__mul_size(len + 1, 3, &need)) return;
    char *w = lw__malloc(t->a, need);
    if (!w) {
        t->st = LW_ERR_NOMEM;
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(w + k, "\xe2\x96\x81", 3), k += 3;
        else w[k++] = text[i];
    }
    bpe_tokenize(t, w, k);
    lw__free(t->a, w);
}

static void emit_cb(void *ctx, int32_t id) {
    if (id >= 0) emit((tok_state *)ctx, id); /* without an unknown token llama.cpp would emit -1 */
}

lw_status lw_tokenize(const lw_vocab *v, const char *text, size_t len, int add_special, int parse_special,
                      int32_t *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || (!text && len) || (!out && cap) || !n_out) return LW_ERR_INVALID_ARG;
    if (len > UINT32_MAX / 16 || len > SIZE_MAX / 16) return LW_ERR_TOO_LARGE; /* keeps len * 8 + 8 in range */
    if (v->type == LW_VOCAB_NONE || !v->tokens) return LW_ERR_UNSUPPORTED;
    tok_state t;
    memset(&t, 0, sizeof(t));
    t.v = v;
    t.a = &v->alloc;
    t.out = out;
    t.cap = cap;
    if (len > 0) partition(&t, text, len, parse_special);

    switch (v->type) {
    case LW_VOCAB_SPM: {
        int prev_special = 1;
        if (add_special && v->add_bos && v->special[LW_TOKEN_BOS] >= 0) emit(&t, v->special[LW_TOKEN_BOS]);
        for (size_t f = 0; f < t.n_frags && t.st == LW_OK; f++) {
            const frag *fr = &t.frags[f];
            if (fr->token >= 0) {
                emit(&t, fr->token);
                prev_special = 1;
                continue;
            }
            spm_fragment(&t, text + fr->off, fr->len, v->add_space_prefix && prev_special);
            prev_special = 0;
        }
        if (add_special && v->add_eos && v->special[LW_TOKEN_EOS] >= 0) emit(&t, v->special[LW_TOKEN_EOS]);
        break;
    }
    case LW_VOCAB_BPE:
        if (add_special && v->add_bos && v->special[LW_TOKEN_BOS] >= 0) emit(&t, v->special[LW_TOKEN_BOS]);
        for (size_t f = 0; f < t.n_frags && t.st == LW_OK; f++) {
            const frag *fr = &t.frags[f];
            if (fr->token >= 0) emit(&t, fr->token);
            else bpe_fragment(&t, text + fr->off, fr->len);
        }
        if (add_special && v->add_eos && v->special[LW_TOKEN_EOS] >= 0) emit(&t, v->special[LW_TOKEN_EOS]);
        break;
    case LW_VOCAB_WPM:
        if (add_special && v->special[LW_TOKEN_BOS] >= 0) emit(&t, v->special[LW_TOKEN_BOS]);
        for (size_t f = 0; f < t.n_frags && t.st == LW_OK; f++) {
            const frag *fr = &t.frags[f];
            if (fr->token >= 0) emit(&t, fr->token);
            else wpm_tokenize(&t, text + fr->off, fr->len);
        }
        if (add_special && v->special[LW_TOKEN_SEP] >= 0) emit(&t, v->special[LW_TOKEN_SEP]);
        break;
    case LW_VOCAB_UGM:
        if (add_special && v->add_bos && v->special[LW_TOKEN_BOS] >= 0) emit(&t, v->special[LW_TOKEN_BOS]);
        for (size_t f = 0; f < t.n_frags && t.st == LW_OK; f++) {
            const frag *fr = &t.frags[f];
            if (fr->token >= 0) emit(&t, fr->token);
            else t.st = lw__ugm_tokenize(v, text + fr->off, fr->len, emit_cb, &t);
        }
        if (add_special && v->add_eos && v->special[LW_TOKEN_EOS] >= 0) emit(&t, v->special[LW_TOKEN_EOS]);
        break;
    case LW_VOCAB_RWKV:
        for (size_t f = 0; f < t.n_frags; f++) {
            const frag *fr = &t.frags[f];
            if (fr->token >= 0) emit(&t, fr->token);
            else lw__rwkv_tokenize(v, text + fr->off, fr->len, emit_cb, &t);
        }
        break;
    default: t.st = LW_ERR_UNSUPPORTED; break;
    }

    lw__free(t.a, t.frags);
    lw__free(t.a, t.frags2);
    lw__free(t.a, t.buf);
    lw__free(t.a, t.syms);
    lw__free(t.a, t.heap);
    lw__free(t.a, t.cpts);
    lw__free(t.a, t.flags);
    lw__pretok_scratch_free(&t.pre, t.a);
    if (t.st != LW_OK) return t.st;
    *n_out = t.n;
    return t.n > cap ? LW_ERR_TOO_LARGE : LW_OK;
}
