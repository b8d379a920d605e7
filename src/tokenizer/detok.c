/* Token ids -> text: token_to_piece, detokenize (with llama.cpp's space clean-up) and a streaming
 * detokenizer that never splits a UTF-8 character across its outputs. */
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Pieces
 * ------------------------------------------------------------------------------------------------------- */

/* Appends n bytes at *k when they fit in cap (the count goes on regardless). */
static void put(char *buf, size_t cap, size_t *k, const char *s, size_t n) {
    if (*k < cap) memcpy(buf + *k, s, n <= cap - *k ? n : cap - *k);
    *k += n;
}

/* Text with U+2581 turned back into spaces. */
static void unescape_ws(const char *s, size_t n, char *buf, size_t cap, size_t *k) {
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
            put(buf, cap, k, " ", 1);
            i += 3;
        } else {
            put(buf, cap, k, s + i, 1);
            i++;
        }
    }
}

/* Byte-level BPE text back to bytes (llama.cpp's llama_decode_text, including its [UNK_BYTE_...] form). */
static void decode_bytes(const char *s, size_t n, char *buf, size_t cap, size_t *k) {
    static const char hex[] = "0123456789abcdef";
    for (size_t off = 0; off < n;) {
        uint32_t c = lw__utf8_decode(s, n, &off);
        int b = lw__ucp_to_byte(c);
        if (b >= 0) {
            char ch = (char)b;
            put(buf, cap, k, &ch, 1);
            continue;
        }
        char u8[4], h[2];
        size_t m = lw__utf8_encode(c, u8);
        put(buf, cap, k, "[UNK_BYTE_0x", 12);
        for (size_t j = 0; j < m; j++) {
            h[0] = hex[(uint8_t)u8[j] >> 4], h[1] = hex[(uint8_t)u8[j] & 15];
            put(buf, cap, k, h, 2);
        }
        put(buf, cap, k, s, n);
        put(buf, cap, k, "]", 1);
    }
}

/* RWKV token text to bytes (llama.cpp's llama_unescape_rwkv_token): \t \n \r \xhh (lowercase hex as
 * llama.cpp reads it), any other escaped byte stands for itself. */
static void unescape_rwkv(const char *s, size_t n, char *buf, size_t cap, size_t *k) {
    int escaping = 0, hex_left = 0;
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (hex_left) {
            acc = (uint8_t)((acc << 4) + (c >= 'a' ? c - 'a' + 10 : c - '0'));
            if (--hex_left == 0) {
                char b = (char)acc;
                put(buf, cap, k, &b, 1);
                acc = 0;
            }
            continue;
        }
        if (escaping) {
            char b = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c;
            escaping = 0;
            if (c == 'x') hex_left = 2;
            else put(buf, cap, k, &b, 1);
            continue;
        }
        if (c == '\\') escaping = 1;
        else put(buf, cap, k, &c, 1);
    }
}

lw_status lw__piece_uncached(const lw_vocab *v, int32_t id, char *buf, size_t cap, size_t *n_out);
lw_status lw__piece_uncached(const lw_vocab *v, int32_t id, char *buf, size_t cap, size_t *n_out) {
    const lw__token *t = &v->tokens[id];
    const char *s = v->text + t->off;
    size_t k = 0;
    if (v->type == LW_VOCAB_RWKV) {
        unescape_rwkv(s, t->len, buf, cap, &k);
    } else if (t->attr & (LW_TOKEN_ATTR_UNKNOWN | LW_TOKEN_ATTR_CONTROL | LW_TOKEN_ATTR_USER_DEFINED)) {
        put(buf, cap, &k, s, t->len);
    } else if (t->attr & LW_TOKEN_ATTR_NORMAL) {
        if (v->type == LW_VOCAB_BPE && !v->escape_ws) decode_bytes(s, t->len, buf, cap, &k);
        else unescape_ws(s, t->len, buf, cap, &k);
    } else if ((t->attr & LW_TOKEN_ATTR_BYTE) && v->type != LW_VOCAB_WPM) {
        /* "<0xXX>": the two hex digits at offset 3 */
        char hx[3] = {t->len > 3 ? s[3] : 0, t->len > 4 ? s[4] : 0, 0};
        char ch = (char)strtol(hx, NULL, 16);
        put(buf, cap, &k, &ch, 1);
    }
    *n_out = k;
    return k > cap ? LW_ERR_TOO_LARGE : LW_OK;
}

lw_status lw_token_to_piece(const lw_vocab *v, int32_t id, int special, size_t lstrip, char *buf, size_t cap,
                            size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || !n_out || (!buf && cap)) return LW_ERR_INVALID_ARG;
    if (id < 0 || (uint32_t)id >= v->n_tokens) return LW_ERR_INVALID_ARG;
    const lw__token *t = &v->tokens[id];
    if (!special && (t->attr & (LW_TOKEN_ATTR_UNKNOWN | LW_TOKEN_ATTR_CONTROL))) return LW_OK;
    const char *p = v->pieces + t->piece_off;
    size_t n = t->piece_len;
    for (size_t i = 0; i < lstrip && n && *p == ' '; i++) p++, n--;
    *n_out = n;
    if (n > cap) return LW_ERR_TOO_LARGE;
    memcpy(buf, p, n);
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Detokenize (llama.cpp's llama_vocab::impl::detokenize)
 * ------------------------------------------------------------------------------------------------------- */

/* llama.cpp's three clean-up passes over text[0..total): " ?" " !" " ." " ,"; " ' "; " 's" " 'm" " 're" " 've". */
static size_t clean_spaces(char *text, size_t total) {
    size_t t1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < t1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    size_t t2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < t2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t t3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < t3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (x1 != 't' && x1 != 'd' && i + 2 < t3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

lw_status lw_detokenize(const lw_vocab *v, const int32_t *tokens, size_t n_tokens, int remove_special,
                        int unparse_special, char *buf, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || !n_out || (!tokens && n_tokens) || (!buf && cap)) return LW_ERR_INVALID_ARG;
    if (v->type == LW_VOCAB_NONE) return LW_OK;
    size_t remove_space = v->add_space_prefix, total = 0;
    if (remove_special && v->add_bos && n_tokens > 0 && tokens[0] == v->special[LW_TOKEN_BOS]) {
        remove_space = 0;
        tokens++, n_tokens--;
    }
    if (remove_special && v->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == v->special[LW_TOKEN_EOS]) n_tokens--;
    for (size_t i = 0; i < n_tokens; i++) {
        size_t n = 0;
        size_t avail = total < cap ? cap - total : 0;
        lw_status st = lw_token_to_piece(v, tokens[i], unparse_special, remove_space, buf ? buf + (total < cap ? total : 0) : NULL,
                                         avail, &n);
        if (st == LW_ERR_INVALID_ARG) return st;
        remove_space = 0;
        total += n;
    }
    if (total > cap) {
        *n_out = total;
        return LW_ERR_TOO_LARGE;
    }
    if (v->clean_spaces) total = clean_spaces(buf, total);
    *n_out = total;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Streaming
 * ------------------------------------------------------------------------------------------------------- */

void lw_detok_stream_init(lw_detok_stream *s, const lw_vocab *v, int special, int strip_leading_space) {
    memset(s, 0, sizeof(*s));
    s->vocab = v;
    s->special = special;
    s->strip_space = strip_leading_space;
}

size_t lw_detok_stream_max_out(const lw_detok_stream *s) {
    /* each byte may become U+FFFD (3 bytes), plus the held-back bytes */
    return 3 * ((size_t)s->vocab->max_piece_len + sizeof(s->pending)) + 3;
}

/* Expected length of a sequence from its lead byte (0: not a lead byte). */
static size_t seq_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* Whether b may follow the bytes in p[0..n) (n >= 1) in well-formed UTF-8. */
static int continues(const uint8_t *p, size_t n, uint8_t b) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (n == 1) {
        if (p[0] == 0xE0) lo = 0xA0;
        else if (p[0] == 0xED) hi = 0x9F;
        else if (p[0] == 0xF0) lo = 0x90;
        else if (p[0] == 0xF4) hi = 0x8F;
    }
    return b >= lo && b <= hi;
}

static void feed(lw_detok_stream *s, uint8_t b, char *out, size_t *k) {
    for (;;) {
        if (s->n_pending == 0) {
            size_t l = seq_len(b);
            if (l == 1) out[(*k)++] = (char)b;
            else if (l == 0) memcpy(out + *k, "\xef\xbf\xbd", 3), *k += 3;
            else s->pending[s->n_pending++] = b;
            return;
        }
        if (continues(s->pending, s->n_pending, b)) {
            s->pending[s->n_pending++] = b;
            if (s->n_pending == seq_len(s->pending[0])) {
                memcpy(out + *k, s->pending, s->n_pending);
                *k += s->n_pending;
                s->n_pending = 0;
            }
            return;
        }
        /* the held sequence is broken: one U+FFFD for it, then look at b afresh */
        memcpy(out + *k, "\xef\xbf\xbd", 3), *k += 3;
        s->n_pending = 0;
    }
}

lw_status lw_detok_stream_push(lw_detok_stream *s, int32_t token, char *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!s || !s->vocab || !out || !n_out) return LW_ERR_INVALID_ARG;
    const lw_vocab *v = s->vocab;
    if (token < 0 || (uint32_t)token >= v->n_tokens) return LW_ERR_INVALID_ARG;
    if (cap < lw_detok_stream_max_out(s)) return LW_ERR_TOO_LARGE;
    const lw__token *t = &v->tokens[token];
    size_t k = 0;
    if (!s->special && (t->attr & (LW_TOKEN_ATTR_UNKNOWN | LW_TOKEN_ATTR_CONTROL))) return LW_OK;
    const uint8_t *p = (const uint8_t *)v->pieces + t->piece_off;
    size_t n = t->piece_len;
    if (s->strip_space && n && *p == ' ') p++, n--;
    if (n) s->strip_space = 0;
    for (size_t i = 0; i < n; i++) feed(s, p[i], out, &k);
    *n_out = k;
    return LW_OK;
}

lw_status lw_detok_stream_flush(lw_detok_stream *s, char *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!s || !n_out || (!out && cap)) return LW_ERR_INVALID_ARG;
    if (s->n_pending == 0) return LW_OK;
    if (cap < 3) return LW_ERR_TOO_LARGE;
    memcpy(out, "\xef\xbf\xbd", 3);
    s->n_pending = 0;
    *n_out = 3;
    return LW_OK;
}
