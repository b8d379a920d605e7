/* Chat templates: arena allocator and the lexer.
 *
 * The lexer follows Jinja2's own lexer with the options Hugging Face transformers uses for chat templates
 * (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
 *   - `{%- ` / `{{- ` / `{#- ` strip all whitespace before the tag; ` -%}` / ` -}}` / ` -#}` all after it;
 *   - trim_blocks: the first newline right after a block tag `%}` or a comment `#}` is removed (not after
 *     `}}`), unless the tag ends with `+%}`;
 *   - lstrip_blocks: spaces and tabs from the start of a line up to a block tag `{%` or comment `{#` are
 *     removed (not before `{{`), unless the tag starts with `{%+`;
 *   - newlines are normalised to "\n" and a single trailing newline of the source is dropped. */
#include "chat/jinja.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Arena
 * ------------------------------------------------------------------------------------------------------- */

struct jj_block {
    jj_block *next; /* older block                          */
    size_t used;    /* bytes handed out from data           */
    size_t cap;     /* bytes available in data              */
    void *last;     /* the latest allocation (grown in place) */
    _Alignas(16) unsigned char data[];
};

#define JJ_BLOCK_MIN (32u << 10)

void jj_arena_init(jj_arena *a, const lw_allocator *alloc, size_t limit) {
    memset(a, 0, sizeof *a);
    a->alloc = lw__allocator_or_default(alloc);
    a->limit = limit;
}

void *jj_alloc(jj_arena *a, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) return NULL;
    jj_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > JJ_BLOCK_MIN ? need : JJ_BLOCK_MIN;
        size_t bytes;
        if (!lw__add_size(cap, sizeof(jj_block), &bytes)) return NULL;
        size_t total;
        if (!lw__add_size(a->total, bytes, &total) || total > a->limit) {
            /* a small final block may still fit under the cap */
            if (cap == need || a->limit - a->total < need + sizeof(jj_block)) {
                a->hit_limit = true;
                return NULL;
            }
            cap = need;
            bytes = need + sizeof(jj_block);
            total = a->total + bytes;
        }
        b = lw__malloc(&a->alloc, bytes);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        b->last = NULL;
        a->head = b;
        a->total = total;
    }
    void *p = b->data + b->used;
    b->used += need;
    b->last = p;
    return p;
}

void *jj_zalloc(jj_arena *a, size_t n) {
    void *p = jj_alloc(a, n);
    if (p) memset(p, 0, n);
    return p;
}

void *jj_grow(jj_arena *a, void *p, size_t old_n, size_t new_n) {
    jj_block *b = a->head;
    if (p && b && b->last == p) { /* the newest allocation: extend in place when the block has room */
        size_t off = (size_t)((unsigned char *)p - b->data);
        size_t need = (new_n + 15) & ~(size_t)15;
        if (need >= new_n && need <= b->cap - off) {
            b->used = off + need;
            return p;
        }
    }
    void *q = jj_alloc(a, new_n);
    if (q && p && old_n) memcpy(q, p, old_n < new_n ? old_n : new_n);
    return q;
}

void jj_arena_free(jj_arena *a) {
    jj_block *b = a->head;
    while (b) {
        jj_block *next = b->next;
        lw__free(&a->alloc, b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

bool jj_str_eq(jj_str a, jj_str b) {
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

bool jj_str_eqz(jj_str a, const char *z) {
    size_t n = strlen(z);
    return a.n == n && (n == 0 || memcmp(a.p, z, n) == 0);
}

/* ---------------------------------------------------------------------------------------------------------
 * Lexer
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lexer {
    jj_arena *a;     /* where the source copy and decoded strings go (kept with the AST) */
    jj_arena *tmp;   /* where the token array goes (dropped after parsing)              */
    const char *s;   /* normalised source                  */
    size_t n;        /* its length                         */
    size_t pos;      /* current offset                     */
    uint32_t line;   /* line at pos                        */
    jj_tok *toks;    /* token array                        */
    size_t ntoks;    /* tokens so far                      */
    size_t cap;      /* allocated tokens                   */
    char *err;       /* message buffer                     */
} lexer;

static bool is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}
static bool is_digit(char ch) {
    return ch >= '0' && ch <= '9';
}
static bool is_name0(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}
static bool is_name(char ch) {
    return is_name0(ch) || is_digit(ch);
}

static jj_tok *push(lexer *L, uint8_t kind) {
    if (L->ntoks == L->cap) {
        size_t ncap = L->cap ? L->cap * 2 : 256, bytes;
        if (!lw__mul_size(ncap, sizeof(jj_tok), &bytes)) return NULL;
        jj_tok *t = jj_grow(L->tmp, L->toks, L->cap * sizeof(jj_tok), bytes);
        if (!t) return NULL;
        L->toks = t;
        L->cap = ncap;
    }
    jj_tok *t = &L->toks[L->ntoks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->line = L->line;
    return t;
}

/* Advances pos to `to`, counting newlines. */
static void advance(lexer *L, size_t to) {
    for (; L->pos < to; L->pos++)
        if (L->s[L->pos] == '\n') L->line++;
}

static lw_status nomem(lexer *L) {
    return lw__errorf(L->err, L->a->hit_limit || L->tmp->hit_limit ? LW_ERR_TOO_LARGE : LW_ERR_NOMEM,
                      "out of memory while reading the template");
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Appends code point cp as UTF-8 (invalid ones as U+FFFD). */
static size_t put_utf8(char *d, uint32_t cp) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A quoted string literal at pos with Python escapes (\n \t \\ \' \" \xHH \uHHHH ...); unknown escapes
 * are kept as written, as Python does. */
static lw_status lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1, end = i;
    while (end < L->n && L->s[end] != q) end += (L->s[end] == '\\' && end + 1 < L->n) ? 2 : 1;
    if (end >= L->n) return lw__errorf(L->err, LW_ERR_INVALID_ARG, "line %u: unterminated string", L->line);
    char *d = jj_alloc(L->a, end - i + 1); /* decoding never makes it longer */
    if (!d) return nomem(L);
    size_t o = 0;
    while (i < end) {
        char ch = L->s[i++];
        if (ch != '\\') {
            d[o++] = ch;
            continue;
        }
        char e = L->s[i++];
        int digits = 0;
        switch (e) {
        case 'n': d[o++] = '\n'; break;
        case 't': d[o++] = '\t'; break;
        case 'r': d[o++] = '\r'; break;
        case 'b': d[o++] = '\b'; break;
        case 'f': d[o++] = '\f'; break;
        case 'v': d[o++] = '\v'; break;
        case 'a': d[o++] = '\a'; break;
        case '0': d[o++] = '\0'; break;
        case '\\': d[o++] = '\\'; break;
        case '\'': d[o++] = '\''; break;
        case '"': d[o++] = '"'; break;
        case '\n': break; /* line continuation */
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            d[o++] = '\\';
            d[o++] = e;
        }
        if (digits) {
            uint32_t cp = 0;
            int k;
            for (k = 0; k < digits && i < end && hexval(L->s[i]) >= 0; k++) cp = cp * 16 + (uint32_t)hexval(L->s[i++]);
            if (k != digits)
                return lw__errorf(L->err, LW_ERR_INVALID_ARG, "line %u: bad \\%c escape in string", L->line, e);
            o += put_utf8(d + o, cp); /* \xHH → 1-2 bytes, \uHHHH → ≤3, \U → ≤4: never longer than written */
        }
    }
    jj_tok *t = push(L, JT_STRING);
    if (!t) return nomem(L);
    t->s = jj_s(d, o);
    advance(L, end + 1);
    return LW_OK;
}

static lw_status lex_number(lexer *L) {
    size_t i = L->pos;
    int64_t v = 0;
    bool overflow = false;
    while (i < L->n && (is_digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1])))) {
        if (L->s[i] != '_') {
            if (v > (INT64_MAX - (L->s[i] - '0')) / 10) overflow = true;
            else v = v * 10 + (L->s[i] - '0');
        }
        i++;
    }
    bool is_float = false;
    if (i + 1 < L->n && L->s[i] == '.' && is_digit(L->s[i + 1])) {
        is_float = true;
        i++;
        while (i < L->n && is_digit(L->s[i])) i++;
    }
    if (i < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->n && (L->s[j] == '+' || L->s[j] == '-')) j++;
        if (j < L->n && is_digit(L->s[j])) {
            is_float = true;
            i = j;
            while (i < L->n && is_digit(L->s[i])) i++;
        }
    }
    jj_tok *t = push(L, is_float ? JT_FLOAT : JT_INT);
    if (!t) return nomem(L);
    if (is_float || overflow) {
        char buf[64];
        size_t k = 0;
        for (size_t j = L->pos; j < i && k < sizeof buf - 1; j++)
            if (L->s[j] != '_') buf[k++] = L->s[j];
        buf[k] = 0;
        if (!is_float) return lw__errorf(L->err, LW_ERR_INVALID_ARG, "line %u: integer literal too large", L->line);
        t->f = strtod(buf, NULL);
    } else {
        t->i = v;
    }
    advance(L, i);
    return LW_OK;
}

static int two_char_op(char a, char b) {
    if (a == '/' && b == '/') return JO_FLOORDIV;
    if (a == '*' && b == '*') return JO_POW;
    if (a == '=' && b == '=') return JO_EQ;
    if (a == '!' && b == '=') return JO_NE;
    if (a == '<' && b == '=') return JO_LE;
    if (a == '>' && b == '=') return JO_GE;
    return 0;
}

/* Tokens inside {{ ... }} or {% ... %}, up to and including the closing tag. Sets *strip_after when the
 * tag closes with '-', *trim_nl when a block closes normally (trim_blocks). */
static lw_status lex_tag(lexer *L, bool is_stmt, bool *strip_after, bool *trim_nl) {
    int depth = 0; /* open brackets inside the tag: "}}" inside a dict literal does not close it */
    uint32_t start_line = L->line;
    for (;;) {
        while (L->pos < L->n && is_space(L->s[L->pos])) advance(L, L->pos + 1);
        if (L->pos >= L->n)
            return lw__errorf(L->err, LW_ERR_INVALID_ARG, "line %u: unclosed '%s'", start_line, is_stmt ? "{%" : "{{");
        const char *s = L->s + L->pos;
        size_t left = L->n - L->pos;
        char c2 = is_stmt ? '%' : '}';
        /* closing tag, possibly with a '-' or '+' modifier */
        size_t mod = (s[0] == '-' || s[0] == '+') ? 1 : 0;
        if (left >= mod + 2 && s[mod] == c2 && s[mod + 1] == '}' && (depth == 0 || is_stmt || mod)) {
            if (!(mod && s[0] == '+' && !is_stmt)) {
                jj_tok *t = push(L, is_stmt ? JT_STMT_CLOSE : JT_EXPR_CLOSE);
                if (!t) return nomem(L);
                *strip_after = mod && s[0] == '-';
                *trim_nl = is_stmt && !mod;
                advance(L, L->pos + mod + 2);
                return LW_OK;
            }
        }
        char ch = s[0];
        lw_status st;
        if (ch == '\'' || ch == '"') {
            if ((st = lex_string(L)) != LW_OK) return st;
        } else if (is_digit(ch)) {
            if ((st = lex_number(L)) != LW_OK) return st;
        } else if (is_name0(ch)) {
            size_t i = L->pos;
            while (i < L->n && is_name(L->s[i])) i++;
            jj_tok *t = push(L, JT_NAME);
            if (!t) return nomem(L);
            t->s = jj_s(L->s + L->pos, i - L->pos);
            advance(L, i);
        } else {
            int op = left >= 2 ? two_char_op(s[0], s[1]) : 0;
            size_t len = op ? 2 : 1;
            if (!op) {
                if (!strchr("+-*/%~<>=()[]{},.:|", ch) || ch == 0)
                    return lw__errorf(L->err, LW_ERR_INVALID_ARG, "line %u: unexpected character '%c' (0x%02x)",
                                      L->line, (ch >= 32 && ch < 127) ? ch : '?', (unsigned char)ch);
                op = ch;
                if (ch == '(' || ch == '[' || ch == '{') depth++;
                if ((ch == ')' || ch == ']' || ch == '}') && depth > 0) depth--;
            }
            jj_tok *t = push(L, JT_OP);
            if (!t) return nomem(L);
            t->op = op;
            advance(L, L->pos + len);
        }
    }
}

/* After "{%" at pos: is this "{% raw %}"? If so, emit the raw text up to "{% endraw %}" and return true. */
static lw_status try_raw(lexer *L, size_t open_end, bool *was_raw, bool *strip_after, bool *trim_nl) {
    *was_raw = false;
    size_t i = open_end;
    while (i < L->n && is_space(L->s[i])) i++;
    if (!(L->n - i >= 3 && !memcmp(L->s + i, "raw", 3) && (i + 3 >= L->n || !is_name(L->s[i + 3])))) return LW_OK;
    i += 3;
    while (i < L->n && is_space(L->s[i])) i++;
    bool minus = i < L->n && L->s[i] == '-';
    if (minus || (i < L->n && L->s[i] == '+')) i++;
    if (!(L->n - i >= 2 && L->s[i] == '%' && L->s[i + 1] == '}')) return LW_OK;
    size_t body = i + 2;
    if (minus)
        while (body < L->n && is_space(L->s[body])) body++;
    else if (body < L->n && L->s[body] == '\n')
        body++;
    /* find {% endraw %} */
    for (size_t j = body; j + 1 < L->n; j++) {
        if (L->s[j] != '{' || L->s[j + 1] != '%') continue;
        size_t k = j + 2;
        bool lminus = k < L->n && L->s[k] == '-';
        if (lminus || (k < L->n && L->s[k] == '+')) k++;
        while (k < L->n && is_space(L->s[k])) k++;
        if (!(L->n - k >= 6 && !memcmp(L->s + k, "endraw", 6))) continue;
        k += 6;
        while (k < L->n && is_space(L->s[k])) k++;
        bool rminus = k < L->n && L->s[k] == '-';
        bool rplus = k < L->n && L->s[k] == '+';
        if (rminus || rplus) k++;
        if (!(L->n - k >= 2 && L->s[k] == '%' && L->s[k + 1] == '}')) continue;
        size_t end = j;
        if (lminus)
            while (end > body && is_space(L->s[end - 1])) end--;
        if (end > body) {
            jj_tok *t = push(L, JT_TEXT);
            if (!t) return nomem(L);
            t->s = jj_s(L->s + body, end - body);
        }
        advance(L, k + 2);
        *was_raw = true;
        *strip_after = rminus;
        *trim_nl = !rminus && !rplus;
        return LW_OK;
    }
    return lw__errorf(L->err, LW_ERR_INVALID_ARG, "line %u: unclosed raw block", L->line);
}

lw_status jj_lex(jj_arena *a, jj_arena *tmp, const char *src, size_t n, jj_tok **out, size_t *n_out, char *err) {
    lexer L;
    memset(&L, 0, sizeof L);
    L.a = a;
    L.tmp = tmp;
    L.err = err;
    L.line = 1;
    if (n > JJ_MAX_TEMPLATE_BYTES)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "template of %zu bytes exceeds the limit", n);
    /* normalise newlines: \r\n and \r become \n (Jinja2 does this for text and string literals alike) */
    char *s = jj_alloc(a, n + 1);
    if (!s) return nomem(&L);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m > 0 && s[m - 1] == '\n') m--; /* keep_trailing_newline=False */
    s[m] = 0;
    L.s = s;
    L.n = m;

    bool trim_nl = false, strip_ws = false; /* effects of the previous tag's close on the next text */
    for (;;) {
        size_t i = L.pos;
        while (i + 1 < L.n && !(L.s[i] == '{' && (L.s[i + 1] == '{' || L.s[i + 1] == '%' || L.s[i + 1] == '#'))) i++;
        bool found = i + 1 < L.n;
        size_t tstart = L.pos, tend = found ? i : L.n;
        if (trim_nl && tstart < tend && L.s[tstart] == '\n') tstart++;
        if (strip_ws)
            while (tstart < tend && is_space(L.s[tstart])) tstart++;
        trim_nl = strip_ws = false;
        char kind = 0, mod = 0;
        if (found) {
            kind = L.s[i + 1];
            mod = i + 2 < L.n ? L.s[i + 2] : 0;
            if (mod == '-') {
                while (tend > tstart && is_space(L.s[tend - 1])) tend--;
            } else if ((kind == '%' || kind == '#') && mod != '+') {
                size_t l = tend;
                while (l > tstart && L.s[l - 1] != '\n' && is_space(L.s[l - 1])) l--;
                bool line_start = l > tstart ? L.s[l - 1] == '\n' : (tstart == 0 || L.s[tstart - 1] == '\n');
                if (line_start) tend = l;
            }
        }
        if (tend > tstart) {
            advance(&L, tstart);
            jj_tok *t = push(&L, JT_TEXT);
            if (!t) return nomem(&L);
            t->s = jj_s(L.s + tstart, tend - tstart);
        }
        if (!found) {
            advance(&L, L.n);
            break;
        }
        advance(&L, i);
        size_t open_end = i + 2 + ((mod == '-' || (mod == '+' && kind != '{')) ? 1 : 0);
        if (kind == '#') {
            size_t j = open_end;
            while (j + 1 < L.n && !(L.s[j] == '#' && L.s[j + 1] == '}')) j++;
            if (j + 1 >= L.n) return lw__errorf(err, LW_ERR_INVALID_ARG, "line %u: unclosed comment", L.line);
            char before = j > open_end ? L.s[j - 1] : 0;
            strip_ws = before == '-';
            trim_nl = before != '-' && before != '+';
            advance(&L, j + 2);
            continue;
        }
        if (kind == '%') {
            bool was_raw = false;
            lw_status st = try_raw(&L, open_end, &was_raw, &strip_ws, &trim_nl);
            if (st != LW_OK) return st;
            if (was_raw) continue;
        }
        jj_tok *t = push(&L, kind == '%' ? JT_STMT_OPEN : JT_EXPR_OPEN);
        if (!t) return nomem(&L);
        advance(&L, open_end);
        lw_status st = lex_tag(&L, kind == '%', &strip_ws, &trim_nl);
        if (st != LW_OK) return st;
    }
    jj_tok *t = push(&L, JT_EOF);
    if (!t) return nomem(&L);
    *out = L.toks;
    *n_out = L.ntoks;
    return LW_OK;
}
