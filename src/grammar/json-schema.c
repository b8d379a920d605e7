/* JSON Schema -> GBNF, in the shape llama.cpp's json-schema-to-grammar gives (the same primitive rules and
 * whitespace), for: type (one or a list), object (properties in order, required / optional,
 * additionalProperties as a map when there are no properties), array (items, prefixItems, minItems /
 * maxItems), string (minLength / maxLength), number, integer (minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum: the digit strings of exactly that range, as llama.cpp's _build_min_max_int), boolean,
 * null, enum, const, anyOf / oneOf (alternatives), allOf with one schema, $ref to "#/..." within the document
 * (recursion allowed). Unsupported keywords that change what is valid (pattern, allOf of several) fail with
 * LW_ERR_UNSUPPORTED rather than allow invalid output. With no schema: any JSON value ("JSON mode").
 *
 * The document is parsed by a small JSON reader with limits (depth, nodes, size). */
#include "grammar/grammar.h"

#include "core/core.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DOC   (4u << 20) /* bytes of schema           */
#define MAX_NODES (1u << 18) /* JSON values in the schema */
#define MAX_JDEPTH 64        /* nesting of the document   */
#define MAX_RULES 65536      /* rules generated           */

/* ---------------------------------------------------------------------------------------------------------
 * A JSON document as a tree of nodes (first child / next sibling; object members carry their key)
 * ------------------------------------------------------------------------------------------------------- */

enum { J_NULL = LW_JSON_NULL, J_FALSE = LW_JSON_FALSE, J_TRUE = LW_JSON_TRUE, J_NUM = LW_JSON_NUM,
       J_STR = LW_JSON_STR, J_ARR = LW_JSON_ARR, J_OBJ = LW_JSON_OBJ };

typedef lw__jnode jnode; /* grammar.h: shared with the tool-call parser */

typedef struct jdoc {
    const lw_allocator *a;
    char *err;
    const char *p, *end, *begin;
    jnode *n;
    uint32_t nn, cap;
    char *strs;
    size_t ns, scap;
    lw_status st;
    const char *what; /* what the text is, for messages ("json schema" when NULL) */
} jdoc;

#define NONE UINT32_MAX

static lw_status jfail(jdoc *d, lw_status s, const char *what) {
    if (d->st == LW_OK) {
        d->st = s;
        lw__errorf(d->err, s, "%s: %s at byte %zu", d->what ? d->what : "json schema", what,
                   (size_t)(d->p - d->begin));
    }
    return d->st;
}

static uint32_t jnew(jdoc *d, uint32_t type) {
    if (d->st != LW_OK) return NONE;
    if (d->nn >= MAX_NODES) {
        jfail(d, LW_ERR_TOO_LARGE, "too many values");
        return NONE;
    }
    if (d->nn == d->cap) {
        uint32_t c = d->cap ? d->cap * 2 : 64;
        jnode *nn = lw__realloc(d->a, d->n, (size_t)c * sizeof(jnode));
        if (!nn) {
            jfail(d, LW_ERR_NOMEM, "out of memory");
            return NONE;
        }
        d->n = nn, d->cap = c;
    }
    jnode *x = &d->n[d->nn];
    memset(x, 0, sizeof *x);
    x->type = type, x->first = x->next = NONE;
    return d->nn++;
}

static bool sput(jdoc *d, const char *s, size_t n) {
    if (d->ns + n > d->scap) {
        size_t c = d->scap ? d->scap : 256;
        while (c < d->ns + n) c *= 2;
        char *ns = lw__realloc(d->a, d->strs, c);
        if (!ns) return jfail(d, LW_ERR_NOMEM, "out of memory"), false;
        d->strs = ns, d->scap = c;
    }
    memcpy(d->strs + d->ns, s, n);
    d->ns += n;
    return true;
}

static void jspace(jdoc *d) {
    while (d->p < d->end && (*d->p == ' ' || *d->p == '\t' || *d->p == '\n' || *d->p == '\r')) d->p++;
}

static int hexv(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string at d->p (the opening quote) decoded into strs; its offset and length. */
static bool jstring(jdoc *d, uint32_t *off, uint32_t *len) {
    size_t start = d->ns;
    d->p++;
    while (d->st == LW_OK) {
        if (d->p >= d->end) return jfail(d, LW_ERR_TRUNCATED, "unterminated string"), false;
        unsigned char c = (unsigned char)*d->p;
        if (c == '"') {
            d->p++;
            break;
        }
        if (c < 0x20) return jfail(d, LW_ERR_BAD_STRING, "control character in a string"), false;
        if (c != '\\') {
            sput(d, d->p++, 1);
            continue;
        }
        if (d->end - d->p < 2) return jfail(d, LW_ERR_TRUNCATED, "bad escape"), false;
        char e = d->p[1];
        d->p += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            sput(d, &out[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        if (e != 'u' || d->end - d->p < 4) return jfail(d, LW_ERR_BAD_STRING, "bad escape"), false;
        uint32_t cp = 0;
        for (int i = 0; i < 4; i++) {
            int h = hexv(d->p[i]);
            if (h < 0) return jfail(d, LW_ERR_BAD_STRING, "bad \\u escape"), false;
            cp = cp * 16 + (uint32_t)h;
        }
        d->p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && d->end - d->p >= 6 && d->p[0] == '\\' && d->p[1] == 'u') {
            uint32_t lo = 0;
            int ok = 1;
            for (int i = 0; i < 4; i++) {
                int h = hexv(d->p[2 + i]);
                if (h < 0) ok = 0;
                lo = lo * 16 + (uint32_t)(h < 0 ? 0 : h);
            }
            if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                d->p += 6;
            }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        char u[4];
        size_t k;
        if (cp < 0x80) u[0] = (char)cp, k = 1;
        else if (cp < 0x800) u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 63)), k = 2;
        else if (cp < 0x10000)
            u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), k = 3;
        else
            u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 63)),
            u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)), k = 4;
        sput(d, u, k);
    }
    if (d->st != LW_OK) return false;
    if (d->ns - start > UINT32_MAX) return jfail(d, LW_ERR_TOO_LARGE, "string too long"), false;
    *off = (uint32_t)start, *len = (uint32_t)(d->ns - start);
    return true;
}

static uint32_t jvalue_at(jdoc *d, int depth);

/* A value after optional whitespace, with the span of its text recorded. */
static uint32_t jvalue(jdoc *d, int depth) {
    jspace(d);
    const char *s = d->p;
    uint32_t id = jvalue_at(d, depth);
    if (id != NONE) d->n[id].src = (uint32_t)(s - d->begin), d->n[id].src_len = (uint32_t)(d->p - s);
    return id;
}

static uint32_t jvalue_at(jdoc *d, int depth) {
    if (depth > MAX_JDEPTH) return jfail(d, LW_ERR_TOO_LARGE, "nested too deep"), NONE;
    if (d->p >= d->end) return jfail(d, LW_ERR_TRUNCATED, "expected a value"), NONE;
    char c = *d->p;
    uint32_t id;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        id = jnew(d, obj ? J_OBJ : J_ARR);
        d->p++;
        jspace(d);
        uint32_t last = NONE;
        if (d->p < d->end && *d->p == (obj ? '}' : ']')) {
            d->p++;
            return id;
        }
        while (d->st == LW_OK) {
            uint32_t koff = 0, klen = 0;
            if (obj) {
                jspace(d);
                if (d->p >= d->end || *d->p != '"') return jfail(d, LW_ERR_BAD_STRING, "expected a key"), NONE;
                if (!jstring(d, &koff, &klen)) return NONE;
                jspace(d);
                if (d->p >= d->end || *d->p != ':') return jfail(d, LW_ERR_BAD_STRING, "expected ':'"), NONE;
                d->p++;
            }
            uint32_t v = jvalue(d, depth + 1);
            if (v == NONE) return NONE;
            d->n[v].key = koff, d->n[v].klen = klen;
            if (last == NONE) d->n[id].first = v;
            else d->n[last].next = v;
            last = v;
            jspace(d);
            if (d->p < d->end && *d->p == ',') {
                d->p++;
                continue;
            }
            if (d->p < d->end && *d->p == (obj ? '}' : ']')) {
                d->p++;
                break;
            }
            return jfail(d, LW_ERR_BAD_STRING, obj ? "expected ',' or '}'" : "expected ',' or ']'"), NONE;
        }
        return d->st == LW_OK ? id : NONE;
    }
    if (c == '"') {
        id = jnew(d, J_STR);
        uint32_t off, len;
        if (id == NONE || !jstring(d, &off, &len)) return NONE;
        d->n[id].str = off, d->n[id].slen = len;
        return id;
    }
    static const struct {
        const char *w;
        uint32_t t;
    } words[] = {{"null", J_NULL}, {"true", J_TRUE}, {"false", J_FALSE}};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i].w);
        if ((size_t)(d->end - d->p) >= n && !memcmp(d->p, words[i].w, n)) {
            d->p += n;
            return jnew(d, words[i].t);
        }
    }
    /* a number, by JSON's grammar */
    const char *s = d->p;
    if (d->p < d->end && *d->p == '-') d->p++;
    if (d->p >= d->end || *d->p < '0' || *d->p > '9') return jfail(d, LW_ERR_BAD_STRING, "expected a value"), NONE;
    if (*d->p == '0') d->p++;
    else
        while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
    if (d->p < d->end && *d->p == '.') {
        d->p++;
        if (d->p >= d->end || *d->p < '0' || *d->p > '9') return jfail(d, LW_ERR_BAD_STRING, "bad number"), NONE;
        while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
    }
    if (d->p < d->end && (*d->p == 'e' || *d->p == 'E')) {
        d->p++;
        if (d->p < d->end && (*d->p == '+' || *d->p == '-')) d->p++;
        if (d->p >= d->end || *d->p < '0' || *d->p > '9') return jfail(d, LW_ERR_BAD_STRING, "bad number"), NONE;
        while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
    }
    id = jnew(d, J_NUM);
    if (id == NONE) return NONE;
    size_t n = (size_t)(d->p - s);
    char tmp[64];
    if (n >= sizeof tmp) return jfail(d, LW_ERR_TOO_LARGE, "number too long"), NONE;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    d->n[id].num = strtod(tmp, NULL);
    uint32_t off = (uint32_t)d->ns;
    if (!sput(d, s, n)) return NONE;
    d->n[id].str = off, d->n[id].slen = (uint32_t)n;
    return id;
}

/* The member of object o named k, or NONE. */
static uint32_t member(const jdoc *d, uint32_t o, const char *k) {
    if (o == NONE || d->n[o].type != J_OBJ) return NONE;
    size_t kl = strlen(k);
    for (uint32_t c = d->n[o].first; c != NONE; c = d->n[c].next)
        if (d->n[c].klen == kl && !memcmp(d->strs + d->n[c].key, k, kl)) return c;
    return NONE;
}

/* The reader on its own (grammar.h). */
lw_status lw__json_parse(const char *text, size_t len, int prefix, const lw_allocator *a, lw__json *out, char *err) {
    memset(out, 0, sizeof *out);
    out->root = NONE;
    err[0] = 0;
    if (len > MAX_DOC) return lw__errorf(err, LW_ERR_TOO_LARGE, "json: %zu bytes", len);
    if (!text) return lw__errorf(err, LW_ERR_INVALID_ARG, "json: NULL text");
    jdoc d;
    memset(&d, 0, sizeof d);
    d.a = a, d.err = err, d.p = d.begin = text, d.end = text + len, d.st = LW_OK, d.what = "json";
    uint32_t root = jvalue(&d, 0);
    if (!prefix) {
        jspace(&d);
        if (d.st == LW_OK && d.p != d.end) jfail(&d, LW_ERR_BAD_STRING, "text after the value");
    }
    if (d.st != LW_OK) {
        lw__free(a, d.n);
        lw__free(a, d.strs);
        return d.st;
    }
    out->n = d.n, out->nn = d.nn, out->strs = d.strs, out->ns = d.ns, out->root = root;
    out->used = (size_t)(d.p - d.begin);
    return LW_OK;
}

uint32_t lw__json_member(const lw__json *j, uint32_t obj, const char *key) {
    jdoc d;
    memset(&d, 0, sizeof d);
    d.n = j->n, d.strs = j->strs;
    return member(&d, obj, key);
}

void lw__json_free(const lw_allocator *a, lw__json *j) {
    lw__free(a, j->n);
    lw__free(a, j->strs);
    memset(j, 0, sizeof *j);
}

/* ---------------------------------------------------------------------------------------------------------
 * The converter
 * ------------------------------------------------------------------------------------------------------- */

/* A growable string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool bad; /* out of memory */
} sbuf;

typedef struct conv {
    jdoc *d;
    const lw_allocator *a;
    char *err;
    sbuf out;          /* the grammar text                        */
    uint32_t n_rules;  /* rules generated (names r<N>)             */
    uint32_t *ref_rule; /* per node: rule number + 1 of a $ref target */
    uint32_t prims;    /* primitive rules used (bits)             */
    int depth;         /* recursion                               */
    lw_status st;
} conv;

enum { P_SPACE = 1, P_BOOL = 2, P_NULL = 4, P_INT = 8, P_NUM = 16, P_STR = 32, P_VALUE = 64, P_CHAR = 128, P_UINT = 256 };

static lw_status cfail(conv *c, lw_status s, const char *what);

static void sb_put(conv *c, sbuf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = lw__realloc(c->a, b->s, cap);
        if (!ns) {
            b->bad = true;
            cfail(c, LW_ERR_NOMEM, "out of memory");
            return;
        }
        b->s = ns, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_str(conv *c, sbuf *b, const char *s) {
    sb_put(c, b, s, strlen(s));
}

static void sb_fmt(conv *c, sbuf *b, const char *fmt, unsigned v) {
    char t[64];
    int n = snprintf(t, sizeof t, fmt, v);
    sb_put(c, b, t, (size_t)(n > 0 ? n : 0));
}

static lw_status cfail(conv *c, lw_status s, const char *what) {
    if (c->st == LW_OK) {
        c->st = s;
        lw__errorf(c->err, s, "json schema: %s", what);
    }
    return c->st;
}

/* Appends bytes as (part of) a GBNF string literal body. */
static void lit_bytes(conv *c, sbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_put(c, b, e, 2);
        } else if (ch < 0x20 || ch == 0x7F) {
            char e[8];
            snprintf(e, sizeof e, "\\x%02X", ch);
            sb_put(c, b, e, 4);
        } else {
            sb_put(c, b, (const char *)&ch, 1);
        }
    }
}

/* Appends the compact JSON text of node v, escaped for a GBNF literal. */
static void lit_json(conv *c, sbuf *b, uint32_t v) {
    const jdoc *d = c->d;
    const jnode *x = &d->n[v];
    switch (x->type) {
    case J_NULL: sb_str(c, b, "null"); break;
    case J_TRUE: sb_str(c, b, "true"); break;
    case J_FALSE: sb_str(c, b, "false"); break;
    case J_NUM: lit_bytes(c, b, d->strs + x->str, x->slen); break;
    case J_STR: {
        /* JSON escaping, then literal escaping */
        sb_str(c, b, "\\\"");
        for (uint32_t i = 0; i < x->slen; i++) {
            unsigned char ch = (unsigned char)d->strs[x->str + i];
            if (ch == '"') sb_str(c, b, "\\\\\\\"");
            else if (ch == '\\') sb_str(c, b, "\\\\\\\\");
            else if (ch == '\n') sb_str(c, b, "\\\\n");
            else if (ch == '\t') sb_str(c, b, "\\\\t");
            else if (ch == '\r') sb_str(c, b, "\\\\r");
            else if (ch < 0x20) sb_fmt(c, b, "\\\\u%04x", ch);
            else sb_put(c, b, (const char *)&ch, 1);
        }
        sb_str(c, b, "\\\"");
        break;
    }
    case J_ARR:
    case J_OBJ: {
        sb_str(c, b, x->type == J_ARR ? "[" : "{");
        for (uint32_t k = x->first; k != NONE; k = d->n[k].next) {
            if (k != x->first) sb_str(c, b, ",");
            if (x->type == J_OBJ) {
                jnode key = {J_STR, NONE, NONE, 0, 0, d->n[k].key, d->n[k].klen, 0, 0, 0};
                /* a temporary node for the key: write it through the string case */
                sb_str(c, b, "\\\"");
                for (uint32_t i = 0; i < key.slen; i++) {
                    unsigned char ch = (unsigned char)d->strs[key.str + i];
                    if (ch == '"' || ch == '\\') sb_str(c, b, ch == '"' ? "\\\\\\\"" : "\\\\\\\\");
                    else if (ch < 0x20) sb_fmt(c, b, "\\\\u%04x", ch);
                    else sb_put(c, b, (const char *)&ch, 1);
                }
                sb_str(c, b, "\\\":");
            }
            lit_json(c, b, k);
        }
        sb_str(c, b, x->type == J_ARR ? "]" : "}");
        break;
    }
    }
}

/* A new rule number. */
static uint32_t new_rule(conv *c) {
    if (c->n_rules >= MAX_RULES) {
        cfail(c, LW_ERR_TOO_LARGE, "schema too large (rules)");
        return 0;
    }
    return ++c->n_rules;
}

/* Writes "r<N> ::= body\n" to the output. */
static void emit_rule(conv *c, uint32_t r, const sbuf *body) {
    sb_fmt(c, &c->out, "r%u ::= ", r);
    sb_put(c, &c->out, body->s ? body->s : "", body->n);
    sb_str(c, &c->out, "\n");
}

static uint32_t gen(conv *c, uint32_t s);

/* Appends a reference to the rule for schema s. */
static void ref(conv *c, sbuf *b, uint32_t s) {
    uint32_t r = gen(c, s);
    if (r) sb_fmt(c, b, "r%u", r);
}

static bool is_int_valued(const jdoc *d, uint32_t v, double *out) {
    if (v == NONE || d->n[v].type != J_NUM) return false;
    double x = d->n[v].num;
    if (!(x >= 0 && x <= 1e9) || x != (double)(long)x) return false;
    *out = x;
    return true;
}

/* The body of an object schema (properties in order; optional ones may be left out). */
static void gen_object(conv *c, sbuf *b, uint32_t s) {
    const jdoc *d = c->d;
    uint32_t props = member(d, s, "properties"), req = member(d, s, "required");
    uint32_t addl = member(d, s, "additionalProperties");
    uint32_t np = 0;
    if (props != NONE && d->n[props].type == J_OBJ)
        for (uint32_t k = d->n[props].first; k != NONE; k = d->n[k].next) np++;
    if (np == 0) {
        if (addl != NONE && d->n[addl].type == J_FALSE) {
            sb_str(c, b, "\"{\" space \"}\" space");
            c->prims |= P_SPACE;
            return;
        }
        /* a map: string keys to values of additionalProperties (any value when absent / true) */
        uint32_t vr = 0;
        if (addl != NONE && d->n[addl].type == J_OBJ) vr = gen(c, addl);
        char v[32];
        if (vr) snprintf(v, sizeof v, "r%u", vr);
        else snprintf(v, sizeof v, "value"), c->prims |= P_VALUE;
        c->prims |= P_STR | P_SPACE;
        sb_str(c, b, "\"{\" space (string \":\" space ");
        sb_str(c, b, v);
        sb_str(c, b, " (\",\" space string \":\" space ");
        sb_str(c, b, v);
        sb_str(c, b, ")*)? \"}\" space");
        return;
    }
    c->prims |= P_SPACE;
    /* kv rule per property, required flag */
    uint32_t *kv = lw__calloc(c->a, np, sizeof(uint32_t));
    uint8_t *rq = lw__calloc(c->a, np, 1);
    uint32_t *tr = lw__calloc(c->a, (size_t)np + 1, sizeof(uint32_t));
    if (!kv || !rq || !tr) {
        cfail(c, LW_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint32_t i = 0;
    for (uint32_t k = d->n[props].first; k != NONE && c->st == LW_OK; k = d->n[k].next, i++) {
        if (req != NONE && d->n[req].type == J_ARR)
            for (uint32_t q = d->n[req].first; q != NONE; q = d->n[q].next)
                if (d->n[q].type == J_STR && d->n[q].slen == d->n[k].klen &&
                    !memcmp(d->strs + d->n[q].str, d->strs + d->n[k].key, d->n[k].klen))
                    rq[i] = 1;
        uint32_t vr = gen(c, k);
        if (!vr) goto done;
        sbuf body = {0};
        sb_str(c, &body, "\"\\\"");
        jnode *x = &d->n[k];
        /* the key as JSON text, inside a literal */
        for (uint32_t j = 0; j < x->klen; j++) {
            unsigned char ch = (unsigned char)d->strs[x->key + j];
            if (ch == '"' || ch == '\\') sb_str(c, &body, ch == '"' ? "\\\\\\\"" : "\\\\\\\\");
            else if (ch < 0x20) sb_fmt(c, &body, "\\\\u%04x", ch);
            else sb_put(c, &body, (const char *)&ch, 1);
        }
        sb_fmt(c, &body, "\\\"\" space \":\" space r%u", vr);
        kv[i] = new_rule(c);
        if (body.bad) cfail(c, LW_ERR_NOMEM, "out of memory");
        if (kv[i]) emit_rule(c, kv[i], &body);
        lw__free(c->a, body.s);
    }
    if (c->st != LW_OK) goto done;
    /* T_i: the properties from i on, after one was written (each one that is there is preceded by ",") */
    tr[np] = 0;
    for (uint32_t j = np; j-- > 0 && c->st == LW_OK;) {
        sbuf body = {0};
        sb_fmt(c, &body, rq[j] ? "\",\" space r%u" : "(\",\" space r%u)?", kv[j]);
        if (tr[j + 1]) sb_fmt(c, &body, " r%u", tr[j + 1]);
        tr[j] = new_rule(c);
        if (tr[j]) emit_rule(c, tr[j], &body);
        lw__free(c->a, body.s);
    }
    /* F_i: from i on with nothing written yet: kv_i T_{i+1}, or (if i is optional) F_{i+1} */
    uint32_t f_next = 0; /* F_{np}: nothing */
    bool f_next_empty = true;
    for (uint32_t j = np; j-- > 0 && c->st == LW_OK;) {
        sbuf body = {0};
        bool opt_last = !rq[j] && f_next_empty; /* (kv T)? : an empty alternative must not end a line */
        sb_fmt(c, &body, opt_last ? "(r%u" : "r%u", kv[j]);
        if (tr[j + 1]) sb_fmt(c, &body, " r%u", tr[j + 1]);
        if (opt_last) sb_str(c, &body, ")?");
        else if (!rq[j]) sb_fmt(c, &body, " | r%u", f_next);
        uint32_t r = new_rule(c);
        if (r) emit_rule(c, r, &body);
        lw__free(c->a, body.s);
        f_next = r;
        f_next_empty = false;
    }
    sb_fmt(c, b, "\"{\" space r%u \"}\" space", f_next);
done:
    lw__free(c->a, kv);
    lw__free(c->a, rq);
    lw__free(c->a, tr);
}

static void gen_array(conv *c, sbuf *b, uint32_t s) {
    const jdoc *d = c->d;
    c->prims |= P_SPACE;
    uint32_t prefix = member(d, s, "prefixItems");
    if (prefix != NONE && d->n[prefix].type == J_ARR) {
        sb_str(c, b, "\"[\" space ");
        for (uint32_t k = d->n[prefix].first; k != NONE; k = d->n[k].next) {
            if (k != d->n[prefix].first) sb_str(c, b, "\",\" space ");
            ref(c, b, k);
            sb_str(c, b, " ");
        }
        sb_str(c, b, "\"]\" space");
        return;
    }
    uint32_t items = member(d, s, "items");
    char item[32];
    uint32_t ir = items != NONE && (d->n[items].type == J_OBJ || d->n[items].type == J_TRUE) ? gen(c, items) : 0;
    if (ir) snprintf(item, sizeof item, "r%u", ir);
    else snprintf(item, sizeof item, "value"), c->prims |= P_VALUE;
    double mn = 0, mx = -1;
    is_int_valued(d, member(d, s, "minItems"), &mn);
    if (!is_int_valued(d, member(d, s, "maxItems"), &mx)) mx = -1;
    if (mn > 10000 || mx > 10000) {
        cfail(c, LW_ERR_TOO_LARGE, "minItems / maxItems over 10000");
        return;
    }
    if (mx >= 0 && mx < mn) {
        cfail(c, LW_ERR_INVALID_ARG, "maxItems < minItems");
        return;
    }
    sb_str(c, b, "\"[\" space ");
    if (mx == 0) {
        sb_str(c, b, "\"]\" space");
        return;
    }
    /* first item, then the rest {max(mn-1,0), mx-1} */
    unsigned lo = mn >= 1 ? (unsigned)mn - 1 : 0;
    if (mn < 1) sb_str(c, b, "(");
    sb_str(c, b, item);
    sb_str(c, b, " (\",\" space ");
    sb_str(c, b, item);
    if (mx < 0) sb_fmt(c, b, "){%u,}", lo);
    else {
        sb_fmt(c, b, "){%u,", lo);
        sb_fmt(c, b, "%u}", (unsigned)mx - 1);
    }
    if (mn < 1) sb_str(c, b, ")?");
    sb_str(c, b, " \"]\" space");
}

static void gen_string(conv *c, sbuf *b, uint32_t s) {
    const jdoc *d = c->d;
    if (member(d, s, "pattern") != NONE) {
        cfail(c, LW_ERR_UNSUPPORTED, "\"pattern\" is not supported");
        return;
    }
    double mn = 0, mx = -1;
    bool has_mn = is_int_valued(d, member(d, s, "minLength"), &mn);
    bool has_mx = is_int_valued(d, member(d, s, "maxLength"), &mx);
    if (!has_mn && !has_mx) {
        sb_str(c, b, "string");
        c->prims |= P_STR | P_SPACE;
        return;
    }
    if (mn > 100000 || mx > 100000 || (has_mx && mx < mn)) {
        cfail(c, LW_ERR_TOO_LARGE, "bad minLength / maxLength");
        return;
    }
    c->prims |= P_CHAR | P_SPACE;
    sb_fmt(c, b, "\"\\\"\" char{%u,", (unsigned)mn);
    if (has_mx) sb_fmt(c, b, "%u", (unsigned)mx);
    sb_str(c, b, "} \"\\\"\" space");
}

/* Integer ranges. Integers have at most 16 digits (integral-part); a bound past that is no bound. */
#define INT_DIGITS 16
#define INT_LIMIT  9999999999999999.0 /* the largest 16-digit magnitude */

/* The n-digit strings from x to y (x <= y, digit strings of length n, leading zeros allowed: a suffix) as one
 * GBNF expression: the first digits alike, a common digit and the rest; else the first digit's range
 * split into x's own digit (then x's rest up to 9...9), the digits between (then anything) and y's digit
 * (then 0...0 up to y's rest), merged where x's rest is 0...0 or y's 9...9. */
static void int_digits(conv *c, sbuf *b, const char *x, const char *y, size_t n) {
    if (n == 0) return;
    size_t z = 0, w = 0; /* x's rest all '0', y's rest all '9' */
    while (z + 1 < n && x[z + 1] == '0') z++;
    while (w + 1 < n && y[w + 1] == '9') w++;
    const bool x_low = z + 1 == n, y_high = w + 1 == n;
    if (x[0] == y[0] && !(x_low && y_high)) {
        char lit[8] = {'"', x[0], '"', ' ', 0};
        sb_str(c, b, lit);
        int_digits(c, b, x + 1, y + 1, n - 1);
        return;
    }
    int lo = x[0] - '0' + !x_low, hi = y[0] - '0' - !y_high, parts = 0;
    char t[64];
    sb_str(c, b, "(");
    if (!x_low) { /* x's digit, then x's rest .. 9...9 */
        char nines[INT_DIGITS + 1];
        memset(nines, '9', n - 1);
        snprintf(t, sizeof t, "\"%c\" ", x[0]);
        sb_str(c, b, t);
        int_digits(c, b, x + 1, nines, n - 1);
        parts++;
    }
    if (lo <= hi) { /* the digits between, then anything */
        if (parts++) sb_str(c, b, " | ");
        if (lo == hi)
            snprintf(t, sizeof t, "\"%d\"", lo);
        else
            snprintf(t, sizeof t, "[%d-%d]", lo, hi);
        sb_str(c, b, t);
        if (n > 1) sb_fmt(c, b, " [0-9]{%u}", (unsigned)(n - 1));
    }
    if (!y_high) { /* y's digit, then 0...0 .. y's rest */
        char zeros[INT_DIGITS + 1];
        memset(zeros, '0', n - 1);
        if (parts++) sb_str(c, b, " | ");
        snprintf(t, sizeof t, "\"%c\" ", y[0]);
        sb_str(c, b, t);
        int_digits(c, b, zeros, y + 1, n - 1);
    }
    sb_str(c, b, ")");
}

static size_t n_digits(uint64_t v) {
    size_t n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

/* The decimal strings without leading zeros of [a, b] (b < 0: no upper bound, up to 16 digits), as one GBNF
 * expression of alternatives by digit count. */
static void int_magnitudes(conv *c, sbuf *b, int64_t a, int64_t hi) {
    const size_t da = n_digits((uint64_t)a), db = hi < 0 ? INT_DIGITS : n_digits((uint64_t)hi);
    int parts = 0;
    sb_str(c, b, "(");
    for (size_t d = da; d <= db; d++) {
        uint64_t first = d == 1 ? 0 : 1, last = 9;
        for (size_t k = 1; k < d; k++) first *= 10, last = last * 10 + 9;
        uint64_t x = d == da ? (uint64_t)a : first, y = hi >= 0 && d == db ? (uint64_t)hi : last;
        if (parts++) sb_str(c, b, " | ");
        if (hi < 0 && d > da) { /* every longer number at once */
            sb_fmt(c, b, "[1-9] [0-9]{%u,", (unsigned)(d - 1));
            sb_fmt(c, b, "%u}", INT_DIGITS - 1);
            break;
        }
        char xs[INT_DIGITS + 2], ys[INT_DIGITS + 2];
        snprintf(xs, sizeof xs, "%0*llu", (int)d, (unsigned long long)x);
        snprintf(ys, sizeof ys, "%0*llu", (int)d, (unsigned long long)y);
        int_digits(c, b, xs, ys, d);
    }
    sb_str(c, b, ")");
}

/* An integer schema: the range its minimum / maximum / exclusive bounds (numbers, or draft 4's booleans)
 * give, or any integer. */
static void gen_integer(conv *c, sbuf *b, uint32_t s) {
    const jdoc *d = c->d;
    uint32_t mn = member(d, s, "minimum"), mx = member(d, s, "maximum");
    uint32_t emn = member(d, s, "exclusiveMinimum"), emx = member(d, s, "exclusiveMaximum");
    /* the integers inside: minimum v -> ceil(v), exclusive (draft 6's number, draft 4's true) -> floor(v) +
     * 1; maximum likewise down; the tighter of two lower (upper) bounds wins */
    bool has_lo = false, has_hi = false;
    double lo = 0, hi = 0;
    if (mn != NONE && d->n[mn].type == J_NUM) {
        const double v = d->n[mn].num;
        has_lo = true, lo = emn != NONE && d->n[emn].type == J_TRUE ? floor(v) + 1 : ceil(v);
    }
    if (emn != NONE && d->n[emn].type == J_NUM) {
        const double v = floor(d->n[emn].num) + 1;
        if (!has_lo || v > lo) lo = v;
        has_lo = true;
    }
    if (mx != NONE && d->n[mx].type == J_NUM) {
        const double v = d->n[mx].num;
        has_hi = true, hi = emx != NONE && d->n[emx].type == J_TRUE ? ceil(v) - 1 : floor(v);
    }
    if (emx != NONE && d->n[emx].type == J_NUM) {
        const double v = ceil(d->n[emx].num) - 1;
        if (!has_hi || v < hi) hi = v;
        has_hi = true;
    }
    if (has_lo && lo < -INT_LIMIT) has_lo = false; /* no 16-digit integer lies beyond: no bound */
    if (has_hi && hi > INT_LIMIT) has_hi = false;
    if ((has_lo && lo > INT_LIMIT) || (has_hi && hi < -INT_LIMIT)) {
        cfail(c, LW_ERR_UNSUPPORTED, "an integer bound past 16 digits");
        return;
    }
    const int64_t a = has_lo ? (int64_t)lo : 0, z = has_hi ? (int64_t)hi : 0;
    if (has_lo && has_hi && a > z) {
        cfail(c, LW_ERR_INVALID_ARG, "an integer range with no integer in it");
        return;
    }
    c->prims |= P_SPACE;
    if (!has_lo && !has_hi) {
        sb_str(c, b, "integer"), c->prims |= P_INT;
        return;
    }
    if (has_lo && a == 0 && !has_hi) { /* the common case, in llama.cpp's words */
        sb_str(c, b, "uinteger"), c->prims |= P_UINT;
        return;
    }
    int parts = 0;
    sb_str(c, b, "(");
    if (!has_lo || a < 0) { /* negatives: "-" then the magnitudes from -max(z, -1) up to -a */
        const int64_t m0 = has_hi && z < -1 ? -z : 1, m1 = has_lo ? -a : -1;
        sb_str(c, b, "\"-\" ");
        int_magnitudes(c, b, m0, m1);
        parts++;
    }
    if (!has_hi || z >= 0) { /* non-negatives: max(a, 0) .. z */
        if (parts++) sb_str(c, b, " | ");
        int_magnitudes(c, b, has_lo && a > 0 ? a : 0, has_hi ? z : -1);
    }
    sb_str(c, b, ") space");
}

/* The body for one type name. */
static void gen_type(conv *c, sbuf *b, uint32_t s, const char *t, size_t tl) {
#define IS(w) (tl == sizeof(w) - 1 && !memcmp(t, w, tl))
    if (IS("object")) gen_object(c, b, s);
    else if (IS("array")) gen_array(c, b, s);
    else if (IS("string")) gen_string(c, b, s);
    else if (IS("boolean")) sb_str(c, b, "boolean"), c->prims |= P_BOOL | P_SPACE;
    else if (IS("null")) sb_str(c, b, "null"), c->prims |= P_NULL | P_SPACE;
    else if (IS("number")) sb_str(c, b, "number"), c->prims |= P_NUM | P_SPACE;
    else if (IS("integer"))
        gen_integer(c, b, s);
    else
        cfail(c, LW_ERR_UNSUPPORTED, "unknown \"type\"");
#undef IS
}

/* Resolves a "#/a/b" pointer (with ~0 ~1 escapes) in the document; NONE when it does not resolve. */
static uint32_t resolve(const jdoc *d, const char *p, size_t n) {
    if (n == 0 || p[0] != '#') return NONE;
    uint32_t cur = 0;
    size_t i = 1;
    while (i < n) {
        if (p[i] != '/') return NONE;
        i++;
        char key[256];
        size_t kl = 0;
        while (i < n && p[i] != '/') {
            char ch = p[i++];
            if (ch == '~' && i < n) ch = p[i] == '1' ? '/' : '~', i++;
            if (kl >= sizeof key - 1) return NONE;
            key[kl++] = ch;
        }
        key[kl] = 0;
        if (d->n[cur].type == J_OBJ) {
            uint32_t m = NONE;
            for (uint32_t k = d->n[cur].first; k != NONE; k = d->n[k].next)
                if (d->n[k].klen == kl && !memcmp(d->strs + d->n[k].key, key, kl)) m = k;
            cur = m;
        } else if (d->n[cur].type == J_ARR) {
            char *end;
            long idx = strtol(key, &end, 10);
            if (*end || idx < 0) return NONE;
            uint32_t k = d->n[cur].first;
            while (k != NONE && idx-- > 0) k = d->n[k].next;
            cur = k;
        } else {
            return NONE;
        }
        if (cur == NONE) return NONE;
    }
    return cur;
}

/* The rule for schema node s (its number; 0 after a failure). */
static uint32_t gen(conv *c, uint32_t s) {
    const jdoc *d = c->d;
    if (c->st != LW_OK) return 0;
    if (++c->depth > 64) {
        cfail(c, LW_ERR_TOO_LARGE, "schema nested too deep");
        c->depth--;
        return 0;
    }
    uint32_t r = 0;
    sbuf b = {0};
    const jnode *x = &d->n[s];
    uint32_t v;
    if (x->type == J_TRUE) {
        sb_str(c, &b, "value");
        c->prims |= P_VALUE;
    } else if (x->type != J_OBJ) {
        cfail(c, LW_ERR_UNSUPPORTED, x->type == J_FALSE ? "schema false (nothing is valid)" : "a schema must be an object");
    } else if ((v = member(d, s, "$ref")) != NONE) {
        uint32_t t = d->n[v].type == J_STR ? resolve(d, d->strs + d->n[v].str, d->n[v].slen) : NONE;
        if (t == NONE) cfail(c, LW_ERR_NOT_FOUND, "$ref that does not resolve within the document");
        else if (c->ref_rule[t]) {
            r = c->ref_rule[t] - 1; /* made (or being made: a recursive reference) */
        } else if ((r = new_rule(c)) != 0) {
            /* the target's rule number is known before its body, so recursive schemas refer to it */
            c->ref_rule[t] = r + 1;
            uint32_t inner = gen(c, t);
            if (inner) {
                sb_fmt(c, &b, "r%u", inner);
                emit_rule(c, r, &b);
            }
        }
        lw__free(c->a, b.s);
        c->depth--;
        return c->st == LW_OK ? r : 0;
    } else if ((v = member(d, s, "const")) != NONE) {
        sb_str(c, &b, "\"");
        lit_json(c, &b, v);
        sb_str(c, &b, "\" space");
        c->prims |= P_SPACE;
    } else if ((v = member(d, s, "enum")) != NONE) {
        if (d->n[v].type != J_ARR || d->n[v].first == NONE) cfail(c, LW_ERR_INVALID_ARG, "\"enum\" must be a non-empty array");
        else {
            sb_str(c, &b, "(");
            for (uint32_t k = d->n[v].first; k != NONE; k = d->n[k].next) {
                if (k != d->n[v].first) sb_str(c, &b, " | ");
                sb_str(c, &b, "\"");
                lit_json(c, &b, k);
                sb_str(c, &b, "\"");
            }
            sb_str(c, &b, ") space");
            c->prims |= P_SPACE;
        }
    } else if ((v = member(d, s, "anyOf")) != NONE || (v = member(d, s, "oneOf")) != NONE) {
        if (d->n[v].type != J_ARR || d->n[v].first == NONE) cfail(c, LW_ERR_INVALID_ARG, "anyOf / oneOf must be a non-empty array");
        for (uint32_t k = d->n[v].first; k != NONE && c->st == LW_OK; k = d->n[k].next) {
            if (k != d->n[v].first) sb_str(c, &b, " | ");
            ref(c, &b, k);
        }
    } else if ((v = member(d, s, "allOf")) != NONE) {
        if (d->n[v].type != J_ARR || d->n[v].first == NONE || d->n[d->n[v].first].next != NONE)
            cfail(c, LW_ERR_UNSUPPORTED, "allOf with more than one schema");
        else ref(c, &b, d->n[v].first);
    } else if ((v = member(d, s, "type")) != NONE) {
        if (d->n[v].type == J_STR) gen_type(c, &b, s, d->strs + d->n[v].str, d->n[v].slen);
        else if (d->n[v].type == J_ARR && d->n[v].first != NONE) {
            for (uint32_t k = d->n[v].first; k != NONE && c->st == LW_OK; k = d->n[k].next) {
                if (k != d->n[v].first) sb_str(c, &b, " | ");
                if (d->n[k].type != J_STR) cfail(c, LW_ERR_INVALID_ARG, "\"type\" list of non-strings");
                else {
                    sb_str(c, &b, "(");
                    gen_type(c, &b, s, d->strs + d->n[k].str, d->n[k].slen);
                    sb_str(c, &b, ")");
                }
            }
        } else cfail(c, LW_ERR_INVALID_ARG, "bad \"type\"");
    } else if (member(d, s, "properties") != NONE || member(d, s, "additionalProperties") != NONE) {
        gen_object(c, &b, s);
    } else if (member(d, s, "items") != NONE || member(d, s, "prefixItems") != NONE) {
        gen_array(c, &b, s);
    } else {
        sb_str(c, &b, "value");
        c->prims |= P_VALUE;
    }
    if (b.bad) cfail(c, LW_ERR_NOMEM, "out of memory");
    if (c->st == LW_OK && (r = new_rule(c)) != 0) emit_rule(c, r, &b);
    lw__free(c->a, b.s);
    c->depth--;
    return c->st == LW_OK ? r : 0;
}

/* The primitive rules (llama.cpp's). value, object and array need each other and every primitive. */
static void emit_prims(conv *c) {
    uint32_t p = c->prims;
    if (p & P_VALUE) p |= P_STR | P_NUM | P_BOOL | P_NULL | P_SPACE;
    if (p & (P_STR)) p |= P_CHAR;
    sbuf *o = &c->out;
    if (p & P_VALUE) {
        sb_str(c, o, "value ::= object | array | string | number | boolean | null\n");
        sb_str(c, o, "object ::= \"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space\n");
        sb_str(c, o, "array ::= \"[\" space (value (\",\" space value)*)? \"]\" space\n");
    }
    if (p & P_STR) sb_str(c, o, "string ::= \"\\\"\" char* \"\\\"\" space\n");
    if (p & P_CHAR) sb_str(c, o, "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n");
    if (p & (P_NUM | P_INT | P_UINT)) sb_str(c, o, "integral-part ::= [0] | [1-9] [0-9]{0,15}\n");
    if (p & P_NUM) {
        sb_str(c, o, "decimal-part ::= [0-9]{1,16}\n");
        sb_str(c, o, "number ::= (\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space\n");
    }
    if (p & P_INT) sb_str(c, o, "integer ::= (\"-\"? integral-part) space\n");
    if (p & P_UINT) sb_str(c, o, "uinteger ::= integral-part space\n");
    if (p & P_BOOL) sb_str(c, o, "boolean ::= (\"true\" | \"false\") space\n");
    if (p & P_NULL) sb_str(c, o, "null ::= \"null\" space\n");
    if (p & P_SPACE) sb_str(c, o, "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n");
}

lw_status lw__json_schema_to_gbnf(const char *schema, size_t len, const lw_allocator *a, char **out,
                                  size_t *out_len, char *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    err[0] = 0;
    if (len > MAX_DOC) return lw__errorf(err, LW_ERR_TOO_LARGE, "json schema: %zu bytes", len);
    if (!schema && len) return lw__errorf(err, LW_ERR_INVALID_ARG, "json schema: NULL text");
    const char *text = schema ? schema : "{}";
    size_t n = schema ? len : 2;
    jdoc d;
    memset(&d, 0, sizeof d);
    d.a = a, d.err = err, d.p = d.begin = text, d.end = text + n, d.st = LW_OK;
    uint32_t root = jvalue(&d, 0);
    jspace(&d);
    if (d.st == LW_OK && d.p != d.end) jfail(&d, LW_ERR_BAD_STRING, "text after the schema");
    conv c;
    memset(&c, 0, sizeof c);
    c.d = &d, c.a = a, c.err = err, c.st = d.st;
    if (c.st == LW_OK) {
        c.ref_rule = lw__calloc(a, d.nn, sizeof(uint32_t));
        if (!c.ref_rule) cfail(&c, LW_ERR_NOMEM, "out of memory");
    }
    if (c.st == LW_OK && root != NONE) {
        uint32_t r = gen(&c, root);
        if (r) {
            sb_fmt(&c, &c.out, "root ::= r%u\n", r);
            emit_prims(&c);
        }
        if (c.out.bad) cfail(&c, LW_ERR_NOMEM, "out of memory");
    }
    lw__free(a, c.ref_rule);
    lw__free(a, d.n);
    lw__free(a, d.strs);
    if (c.st != LW_OK) {
        lw__free(a, c.out.s);
        return c.st;
    }
    *out = c.out.s;
    if (out_len) *out_len = c.out.n;
    return LW_OK;
}
