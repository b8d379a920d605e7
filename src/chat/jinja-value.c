/* Chat templates: values — buffers, strings, lists, dicts, truthiness, str()/repr() as Python prints them,
 * tojson as transformers' chat-template tojson (json.dumps with ensure_ascii=False), equality, ordering. */
#include "chat/jinja.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------------------- */

bool jj_fail(jj_ctx *c, lw_status s, const char *fmt, ...) {
    if (c->status != LW_OK) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, LW_ERRMSG_SIZE, fmt, ap);
    va_end(ap);
    c->status = s;
    return false;
}

bool jj_nomem(jj_ctx *c) {
    if (c->arena->hit_limit) return jj_fail(c, LW_ERR_TOO_LARGE, "template render exceeds its memory limit");
    return jj_fail(c, LW_ERR_NOMEM, "out of memory while rendering the template");
}

/* ---------------------------------------------------------------------------------------------------------
 * Buffers and containers
 * ------------------------------------------------------------------------------------------------------- */

bool jj_buf_add(jj_ctx *c, jj_buf *b, const char *p, size_t n) {
    if (!n) return true;
    size_t need;
    if (!lw__add_size(b->n, n, &need)) return jj_fail(c, LW_ERR_OVERFLOW, "string size overflow");
    if (b == c->main_out && need > c->max_output)
        return jj_fail(c, LW_ERR_TOO_LARGE, "rendered output exceeds the limit of %zu bytes", c->max_output);
    if (need > b->cap) {
        size_t ncap = b->cap ? b->cap : 64;
        while (ncap < need) {
            if (ncap > SIZE_MAX / 2) return jj_fail(c, LW_ERR_OVERFLOW, "string size overflow");
            ncap *= 2;
        }
        char *q = jj_grow(c->arena, b->p, b->n, ncap);
        if (!q) return jj_nomem(c);
        b->p = q;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, p, n);
    b->n = need;
    /* long strings cost steps too, so string building in loops is bounded by the step limit as well */
    return jj_step(c, n >> 8);
}

static bool buf_addz(jj_ctx *c, jj_buf *b, const char *z) {
    return jj_buf_add(c, b, z, strlen(z));
}

bool jj_str_new(jj_ctx *c, const char *p, size_t n, jj_str *out) {
    char *q = jj_alloc(c->arena, n ? n : 1);
    if (!q) return jj_nomem(c);
    if (n) memcpy(q, p, n);
    *out = jj_s(q, n);
    return jj_step(c, n >> 8);
}

jj_list *jj_list_new(jj_ctx *c, size_t cap) {
    jj_list *l = jj_zalloc(c->arena, sizeof *l);
    if (!l) return jj_nomem(c), NULL;
    if (cap) {
        size_t bytes;
        if (!lw__mul_size(cap, sizeof(jj_val), &bytes)) return jj_fail(c, LW_ERR_OVERFLOW, "list too large"), NULL;
        if (!(l->v = jj_alloc(c->arena, bytes))) return jj_nomem(c), NULL;
        l->cap = cap;
    }
    return l;
}

bool jj_list_push(jj_ctx *c, jj_list *l, jj_val v) {
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 4, bytes;
        if (!lw__mul_size(ncap, sizeof(jj_val), &bytes)) return jj_fail(c, LW_ERR_OVERFLOW, "list too large");
        jj_val *p = jj_grow(c->arena, l->v, l->n * sizeof(jj_val), bytes);
        if (!p) return jj_nomem(c);
        l->v = p;
        l->cap = ncap;
    }
    l->v[l->n++] = v;
    return true;
}

jj_dict *jj_dict_new(jj_ctx *c, size_t cap) {
    jj_dict *d = jj_zalloc(c->arena, sizeof *d);
    if (!d) return jj_nomem(c), NULL;
    (void)cap;
    return d;
}

static bool key_eq(jj_val a, jj_val b) {
    if (a.t == JV_STR && b.t == JV_STR) return jj_str_eq(a.u.s, b.u.s);
    if (a.t == JV_INT && b.t == JV_INT) return a.u.i == b.u.i;
    if (a.t == JV_BOOL && b.t == JV_BOOL) return a.u.b == b.u.b;
    if (a.t == JV_NONE && b.t == JV_NONE) return true;
    if (a.t == JV_FLOAT && b.t == JV_FLOAT) return a.u.f == b.u.f;
    return false;
}

jj_val *jj_dict_get(jj_ctx *c, const jj_dict *d, jj_val k) {
    uint64_t cost = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (k.t == JV_STR && d->k[i].t == JV_STR && d->k[i].u.s.n == k.u.s.n) cost += k.u.s.n >> 6;
        if (key_eq(d->k[i], k)) {
            if (c) c->steps += cost + (i >> 4);
            return &d->v[i];
        }
    }
    if (c) c->steps += cost + (d->n >> 4);
    return NULL;
}

size_t jj_find(jj_ctx *c, jj_str hay, size_t from, jj_str needle) {
    if (needle.n == 0) return from <= hay.n ? from : SIZE_MAX;
    size_t i = from;
    uint64_t cost = 0;
    while (i + needle.n <= hay.n) {
        const char *p = memchr(hay.p + i, needle.p[0], hay.n - needle.n + 1 - i);
        if (!p) break;
        i = (size_t)(p - hay.p);
        cost += 1 + (needle.n >> 6); /* each candidate costs a compare of up to needle.n bytes */
        if (c->steps + cost > c->max_steps) { /* stop now: the caller's work is void anyway */
            jj_step(c, cost);
            return SIZE_MAX;
        }
        if (!memcmp(hay.p + i, needle.p, needle.n)) {
            c->steps += cost + ((i - from) >> 8);
            return i;
        }
        i++;
    }
    c->steps += cost + ((hay.n - from) >> 8);
    return SIZE_MAX;
}

bool jj_dict_set(jj_ctx *c, jj_dict *d, jj_val k, jj_val v) {
    jj_val *slot = jj_dict_get(c, d, k);
    if (slot) {
        *slot = v;
        return true;
    }
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 4, bytes;
        if (!lw__mul_size(ncap, sizeof(jj_val), &bytes)) return jj_fail(c, LW_ERR_OVERFLOW, "dict too large");
        jj_val *nk = jj_alloc(c->arena, bytes), *nv = jj_alloc(c->arena, bytes);
        if (!nk || !nv) return jj_nomem(c);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jj_val));
            memcpy(nv, d->v, d->n * sizeof(jj_val));
        }
        d->k = nk;
        d->v = nv;
        d->cap = ncap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return jj_step(c, 1);
}

/* ---------------------------------------------------------------------------------------------------------
 * UTF-8
 * ------------------------------------------------------------------------------------------------------- */

size_t jj_utf8_len(jj_str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) n += ((unsigned char)s.p[i] & 0xC0) != 0x80;
    return n;
}

size_t jj_utf8_offset(jj_str s, size_t cp) {
    size_t i = 0, k = 0;
    for (; i < s.n; i++) {
        if (((unsigned char)s.p[i] & 0xC0) != 0x80) {
            if (k == cp) return i;
            k++;
        }
    }
    return s.n;
}

/* ---------------------------------------------------------------------------------------------------------
 * Truthiness, names
 * ------------------------------------------------------------------------------------------------------- */

bool jj_truthy(jj_val v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n > 0;
    case JV_LIST: return v.u.l->n > 0;
    case JV_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

const char *jj_type_name(jj_val v) {
    static const char *const names[] = {"undefined", "none", "bool", "int", "float", "str", "list", "dict",
                                        "macro", "function"};
    return v.t < sizeof names / sizeof names[0] ? names[v.t] : "?";
}

/* ---------------------------------------------------------------------------------------------------------
 * Number formatting: Python's float repr (shortest digits that round-trip; fixed notation for exponents in
 * [-4, 16), otherwise scientific with a signed two-digit exponent; integral floats end in ".0").
 * ------------------------------------------------------------------------------------------------------- */

void jj_fmt_float(double f, char buf[40]) {
    if (isnan(f)) {
        strcpy(buf, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(buf, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        strcpy(buf, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, exp10;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = buf;
    if (neg) *o++ = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp10 - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        snprintf(o, 8, "e%c%02d", exp10 < 0 ? '-' : '+', (exp10 < 0 ? -exp10 : exp10) % 1000); /* |exp10| <= 324 */
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * str() and repr()
 * ------------------------------------------------------------------------------------------------------- */

static bool repr_str(jj_ctx *c, jj_buf *b, jj_str s) {
    if (!jj_step(c, s.n >> 6)) return false;
    bool has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    if (!jj_buf_add(c, b, &q, 1)) return false;
    size_t run = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        const char *esc = NULL;
        char hex[5];
        if (ch == '\\') esc = "\\\\";
        else if (ch == (unsigned char)q) esc = q == '\'' ? "\\'" : "\\\"";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(hex, sizeof hex, "\\x%02x", ch);
            esc = hex;
        }
        if (esc) {
            if (!jj_buf_add(c, b, s.p + i - run, run) || !buf_addz(c, b, esc)) return false;
            run = 0;
        } else {
            run++;
        }
    }
    return jj_buf_add(c, b, s.p + s.n - run, run) && jj_buf_add(c, b, &q, 1);
}

static bool write_scalar(jj_ctx *c, jj_buf *b, jj_val v) {
    char tmp[40];
    switch (v.t) {
    case JV_UNDEF: return true;
    case JV_NONE: return buf_addz(c, b, "None");
    case JV_BOOL: return buf_addz(c, b, v.u.b ? "True" : "False");
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); return buf_addz(c, b, tmp);
    case JV_FLOAT: jj_fmt_float(v.u.f, tmp); return buf_addz(c, b, tmp);
    case JV_STR: return jj_buf_add(c, b, v.u.s.p, v.u.s.n);
    case JV_MACRO: return buf_addz(c, b, "<macro>");
    case JV_FUNC: return buf_addz(c, b, "<built-in function>");
    default: return true;
    }
}

bool jj_repr(jj_ctx *c, jj_buf *b, jj_val v, int depth) {
    if (depth > JJ_MAX_VALUE_DEPTH) return jj_fail(c, LW_ERR_TOO_LARGE, "value nested too deeply");
    if (!jj_step(c, 1)) return false;
    if (v.t == JV_STR) return repr_str(c, b, v.u.s);
    if (v.t == JV_LIST) {
        if (!buf_addz(c, b, "[")) return false;
        for (size_t i = 0; i < v.u.l->n; i++)
            if ((i && !buf_addz(c, b, ", ")) || !jj_repr(c, b, v.u.l->v[i], depth + 1)) return false;
        return buf_addz(c, b, "]");
    }
    if (v.t == JV_DICT) {
        if (!buf_addz(c, b, v.u.d->is_ns ? "<Namespace {" : "{")) return false;
        for (size_t i = 0; i < v.u.d->n; i++)
            if ((i && !buf_addz(c, b, ", ")) || !jj_repr(c, b, v.u.d->k[i], depth + 1) || !buf_addz(c, b, ": ") ||
                !jj_repr(c, b, v.u.d->v[i], depth + 1))
                return false;
        return buf_addz(c, b, v.u.d->is_ns ? "}>" : "}");
    }
    if (v.t == JV_UNDEF) return true;
    return write_scalar(c, b, v);
}

bool jj_write(jj_ctx *c, jj_buf *b, jj_val v) {
    if (v.t == JV_LIST || v.t == JV_DICT) return jj_repr(c, b, v, 0);
    return write_scalar(c, b, v);
}

bool jj_to_str(jj_ctx *c, jj_val v, jj_str *out) {
    if (v.t == JV_STR) {
        *out = v.u.s;
        return true;
    }
    jj_buf b = {0};
    if (!jj_write(c, &b, v)) return false;
    *out = jj_s(b.p ? b.p : "", b.n);
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * tojson
 * ------------------------------------------------------------------------------------------------------- */

/* Decodes one UTF-8 sequence at s[i] (invalid bytes give U+FFFD, one byte long). */
static uint32_t utf8_next(jj_str s, size_t i, size_t *len) {
    const unsigned char *p = (const unsigned char *)s.p + i;
    size_t left = s.n - i;
    uint32_t cp;
    size_t n;
    if (p[0] < 0x80) {
        *len = 1;
        return p[0];
    } else if ((p[0] & 0xE0) == 0xC0) {
        cp = p[0] & 0x1F;
        n = 2;
    } else if ((p[0] & 0xF0) == 0xE0) {
        cp = p[0] & 0x0F;
        n = 3;
    } else if ((p[0] & 0xF8) == 0xF0) {
        cp = p[0] & 0x07;
        n = 4;
    } else {
        *len = 1;
        return 0xFFFD;
    }
    if (left < n) {
        *len = 1;
        return 0xFFFD;
    }
    for (size_t k = 1; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80) {
            *len = 1;
            return 0xFFFD;
        }
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    *len = n;
    return cp > 0x10FFFF ? 0xFFFD : cp;
}

static bool json_str(jj_ctx *c, jj_buf *b, jj_str s, int ascii) {
    if (!jj_step(c, s.n >> 6)) return false;
    if (!buf_addz(c, b, "\"")) return false;
    size_t run = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        const char *esc = NULL;
        char hex[16];
        if (ascii && ch >= 0x80) { /* ensure_ascii: \uXXXX, with a surrogate pair above the BMP */
            size_t len;
            uint32_t cp = utf8_next(s, i, &len);
            if (cp >= 0x10000)
                snprintf(hex, sizeof hex, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                         0xDC00 + ((cp - 0x10000) & 0x3FF));
            else
                snprintf(hex, sizeof hex, "\\u%04x", cp);
            if (!jj_buf_add(c, b, s.p + i - run, run) || !buf_addz(c, b, hex)) return false;
            run = 0;
            i += len - 1;
            continue;
        }
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) {
            snprintf(hex, sizeof hex, "\\u%04x", ch);
            esc = hex;
        }
        if (esc) {
            if (!jj_buf_add(c, b, s.p + i - run, run) || !buf_addz(c, b, esc)) return false;
            run = 0;
        } else {
            run++;
        }
    }
    return jj_buf_add(c, b, s.p + s.n - run, run) && buf_addz(c, b, "\"");
}

static bool json_indent(jj_ctx *c, jj_buf *b, int indent, int level) {
    if (!buf_addz(c, b, "\n")) return false;
    for (int i = 0; i < indent * level; i++)
        if (!buf_addz(c, b, " ")) return false;
    return true;
}

static int cmp_str(jj_str a, jj_str b) {
    size_t n = a.n < b.n ? a.n : b.n;
    int r = n ? memcmp(a.p, b.p, n) : 0;
    return r ? r : (a.n < b.n ? -1 : a.n > b.n);
}

static bool json_val(jj_ctx *c, jj_buf *b, jj_val v, int indent, int level, int flags) {
    char tmp[40];
    if (level > JJ_MAX_VALUE_DEPTH) return jj_fail(c, LW_ERR_TOO_LARGE, "value nested too deeply for tojson");
    if (!jj_step(c, 1)) return false;
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return buf_addz(c, b, "null");
    case JV_BOOL: return buf_addz(c, b, v.u.b ? "true" : "false");
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); return buf_addz(c, b, tmp);
    case JV_FLOAT:
        if (isnan(v.u.f)) return buf_addz(c, b, "NaN");
        if (isinf(v.u.f)) return buf_addz(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        jj_fmt_float(v.u.f, tmp);
        return buf_addz(c, b, tmp);
    case JV_STR: return json_str(c, b, v.u.s, flags & JJ_JSON_ASCII);
    case JV_LIST: {
        if (!v.u.l->n) return buf_addz(c, b, "[]");
        if (!buf_addz(c, b, "[")) return false;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && !buf_addz(c, b, indent >= 0 ? "," : ", ")) return false;
            if (indent >= 0 && !json_indent(c, b, indent, level + 1)) return false;
            if (!json_val(c, b, v.u.l->v[i], indent, level + 1, flags)) return false;
        }
        if (indent >= 0 && !json_indent(c, b, indent, level)) return false;
        return buf_addz(c, b, "]");
    }
    case JV_DICT: {
        const jj_dict *d = v.u.d;
        if (!d->n) return buf_addz(c, b, "{}");
        size_t *order = jj_alloc(c->arena, d->n * sizeof(size_t));
        if (!order) return jj_nomem(c);
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (flags & JJ_JSON_SORT_KEYS) /* insertion sort: dicts in templates are small, and steps bound the cost */
            for (size_t i = 1; i < d->n; i++) {
                size_t x = order[i], j = i;
                jj_str kx = d->k[x].t == JV_STR ? d->k[x].u.s : jj_s("", 0);
                while (j > 0) {
                    jj_str kj = d->k[order[j - 1]].t == JV_STR ? d->k[order[j - 1]].u.s : jj_s("", 0);
                    if (cmp_str(kj, kx) <= 0) break;
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
                if (!jj_step(c, i)) return false;
            }
        if (!buf_addz(c, b, "{")) return false;
        for (size_t i = 0; i < d->n; i++) {
            jj_val k = d->k[order[i]];
            if (i && !buf_addz(c, b, indent >= 0 ? "," : ", ")) return false;
            if (indent >= 0 && !json_indent(c, b, indent, level + 1)) return false;
            if (k.t == JV_STR) {
                if (!json_str(c, b, k.u.s, flags & JJ_JSON_ASCII)) return false;
            } else { /* json.dumps turns int/float/bool/None keys into strings */
                jj_buf kb = {0};
                if (!json_val(c, &kb, k, -1, level + 1, flags & JJ_JSON_ASCII) || !buf_addz(c, b, "\"") ||
                    !jj_buf_add(c, b, kb.p, kb.n) || !buf_addz(c, b, "\""))
                    return false;
            }
            if (!buf_addz(c, b, ": ") || !json_val(c, b, d->v[order[i]], indent, level + 1, flags)) return false;
        }
        if (indent >= 0 && !json_indent(c, b, indent, level)) return false;
        return buf_addz(c, b, "}");
    }
    default: return jj_fail(c, LW_ERR_INVALID_ARG, "%s is not JSON serializable", jj_type_name(v));
    }
}

bool jj_tojson(jj_ctx *c, jj_buf *b, jj_val v, int indent, int flags) {
    return json_val(c, b, v, indent, 0, flags);
}

/* ---------------------------------------------------------------------------------------------------------
 * Equality and ordering (Python semantics: 1 == 1.0 == True; containers compare element-wise)
 * ------------------------------------------------------------------------------------------------------- */

static bool is_num(jj_val v) {
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
static double num_f(jj_val v) {
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t num_i(jj_val v) {
    return v.t == JV_INT ? v.u.i : (int64_t)v.u.b;
}

bool jj_equal(jj_ctx *c, jj_val a, jj_val b, int depth, bool *eq) {
    if (depth > JJ_MAX_VALUE_DEPTH) return jj_fail(c, LW_ERR_TOO_LARGE, "value nested too deeply to compare");
    if (!jj_step(c, 1)) return false;
    *eq = false;
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) *eq = num_f(a) == num_f(b);
        else *eq = num_i(a) == num_i(b);
        return true;
    }
    if (a.t != b.t) return true;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: *eq = true; return true;
    case JV_STR: *eq = jj_str_eq(a.u.s, b.u.s); return jj_step(c, a.u.s.n == b.u.s.n ? a.u.s.n >> 6 : 0);
    case JV_MACRO: *eq = a.u.m == b.u.m; return true;
    case JV_FUNC: *eq = a.u.fn == b.u.fn; return true;
    case JV_LIST:
        if (a.u.l == b.u.l) {
            *eq = true;
            return true;
        }
        if (a.u.l->n != b.u.l->n) return true;
        for (size_t i = 0; i < a.u.l->n; i++) {
            bool e;
            if (!jj_equal(c, a.u.l->v[i], b.u.l->v[i], depth + 1, &e)) return false;
            if (!e) return true;
        }
        *eq = true;
        return true;
    case JV_DICT:
        if (a.u.d == b.u.d) {
            *eq = true;
            return true;
        }
        if (a.u.d->n != b.u.d->n) return true;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jj_val *o = jj_dict_get(c, b.u.d, a.u.d->k[i]);
            bool e;
            if (!o) return true;
            if (!jj_equal(c, a.u.d->v[i], *o, depth + 1, &e)) return false;
            if (!e) return true;
        }
        *eq = true;
        return true;
    default: return true;
    }
}

bool jj_compare(jj_ctx *c, jj_val a, jj_val b, int *cmp) {
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *cmp = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *cmp = x < y ? -1 : x > y ? 1 : 0;
        }
        return true;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        int r = cmp_str(a.u.s, b.u.s);
        *cmp = r < 0 ? -1 : r > 0;
        return jj_step(c, (a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n) >> 6);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) { /* lexicographic; nesting bounded through jj_equal's depth */
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            bool e;
            if (!jj_equal(c, a.u.l->v[i], b.u.l->v[i], 0, &e)) return false;
            if (!e) {
                if (a.u.l->v[i].t == JV_LIST && b.u.l->v[i].t == JV_LIST) /* no recursion into nested lists */
                    return jj_fail(c, LW_ERR_INVALID_ARG, "cannot order nested lists");
                return jj_compare(c, a.u.l->v[i], b.u.l->v[i], cmp);
            }
        }
        *cmp = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return true;
    }
    return jj_fail(c, LW_ERR_INVALID_ARG, "cannot compare %s with %s", jj_type_name(a), jj_type_name(b));
}
