/* Chat templates: built-in filters, tests, string/dict methods and global functions — the ones real chat
 * templates use, with Jinja2 / Python semantics (and transformers' tojson). Case mapping (upper, lower,
 * title, capitalize) and whitespace stripping handle ASCII only; other bytes pass through unchanged. */
#include "chat/jinja.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Name tables
 * ------------------------------------------------------------------------------------------------------- */

enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_CENTER, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST, F_FLOAT,
    F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT,
    F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM,
    F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER, F_WORDCOUNT, F_FROM_JSON, F_COUNT_
};
static const char *const filter_names[F_COUNT_] = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first", "float",
    "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject",
    "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum",
    "title", "tojson", "trim", "unique", "upper", "wordcount", "from_json"};

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_EQ2, T_EVEN, T_FALSE, T_FLOAT, T_GE, T_GT,
    T_GREATERTHAN, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LESSTHAN, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE,
    T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TRUE, T_UNDEFINED, T_UPPER, T_COUNT_
};
static const char *const test_names[T_COUNT_] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "even", "false", "float", "ge",
    "gt", "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne", "none",
    "number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper"};

static const char *const func_names[JF_COUNT] = {"range", "namespace", "raise_exception", "strftime_now", "dict"};

static int find_name(const char *const *names, int n, jj_str s) {
    for (int i = 0; i < n; i++)
        if (jj_str_eqz(s, names[i])) return i;
    return -1;
}
int jj_filter_id(jj_str name) {
    return find_name(filter_names, F_COUNT_, name);
}
int jj_test_id(jj_str name) {
    return find_name(test_names, T_COUNT_, name);
}
int jj_func_id(jj_str name) {
    return find_name(func_names, JF_COUNT, name);
}

/* ---------------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------------- */

/* Argument `pos` (positional) or keyword `name`; NULL when not given. */
static const jj_val *arg(const jj_val *args, size_t nargs, const jj_str *kwn, const jj_val *kwv, size_t nkw,
                         size_t pos, const char *name) {
    if (name)
        for (size_t k = 0; k < nkw; k++)
            if (jj_str_eqz(kwn[k], name)) return &kwv[k];
    return pos < nargs ? &args[pos] : NULL;
}

static bool want_str(jj_ctx *c, const jj_val *v, const char *what, jj_str *out) {
    if (!v || v->t != JV_STR)
        return jj_fail(c, LW_ERR_INVALID_ARG, "%s expects a string, got %s", what, v ? jj_type_name(*v) : "nothing");
    *out = v->u.s;
    return true;
}

static bool ret_buf(jj_buf *b, jj_val *out) {
    *out = jj_strv(jj_s(b->p ? b->p : "", b->n));
    return true;
}

static bool py_space(unsigned char ch) {
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}

/* Byte length of the Python whitespace character at s[i] (0 if none): ASCII \t-\r, space, \x1c-\x1f,
 * and the Unicode spaces U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
static size_t ws_at(jj_str s, size_t i) {
    const unsigned char *p = (const unsigned char *)s.p + i;
    size_t left = s.n - i;
    if (p[0] < 0x80) return py_space(p[0]);
    if (p[0] == 0xC2 && left >= 2 && (p[1] == 0x85 || p[1] == 0xA0)) return 2;
    if (left < 3) return 0;
    if (p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80) return 3;
    if (p[0] == 0xE2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF))
        return 3;
    if (p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F) return 3;
    if (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80) return 3;
    return 0;
}

/* Byte length of the UTF-8 character at s[i] (1 for a stray byte). */
static size_t char_len(jj_str s, size_t i) {
    size_t j = i + 1;
    while (j < s.n && j - i < 4 && ((unsigned char)s.p[j] & 0xC0) == 0x80) j++;
    return j - i;
}

/* Start of the UTF-8 character that ends at s[end-1]. */
static size_t char_start_before(jj_str s, size_t end) {
    size_t k = end - 1;
    while (k > 0 && end - k < 4 && ((unsigned char)s.p[k] & 0xC0) == 0x80) k--;
    return k;
}

/* Whether the character s[i..i+len) is one of the characters of chars (or whitespace when chars is NULL). */
static bool strip_member(jj_str s, size_t i, size_t len, const jj_str *chars) {
    if (!chars) return ws_at(s, i) == len;
    for (size_t k = 0; k < chars->n;) {
        size_t cl = char_len(*chars, k);
        if (cl == len && !memcmp(chars->p + k, s.p + i, len)) return true;
        k += cl;
    }
    return false;
}

/* str.strip([chars]); which: 1 left, 2 right, 3 both. Works on whole UTF-8 characters, as Python. */
static jj_str strip(jj_str s, const jj_str *chars, int which) {
    size_t a = 0, b = s.n;
    if (which & 1)
        while (a < b) {
            size_t l = char_len(s, a);
            if (a + l > b || !strip_member(s, a, l, chars)) break;
            a += l;
        }
    if (which & 2)
        while (b > a) {
            size_t k = char_start_before(s, b);
            if (k < a || !strip_member(s, k, b - k, chars)) break;
            b = k;
        }
    return jj_s(s.p + a, b - a);
}

static char up(char ch) {
    return (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
}
static char low(char ch) {
    return (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
}
static bool is_alpha(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* mode: 'u' upper, 'l' lower, 't' title, 'c' capitalize */
static bool case_map(jj_ctx *c, jj_str s, char mode, jj_val *out) {
    char *p = jj_alloc(c->arena, s.n ? s.n : 1);
    if (!p) return jj_nomem(c);
    bool prev_alpha = false;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        switch (mode) {
        case 'u': ch = up(ch); break;
        case 'l': ch = low(ch); break;
        case 't': ch = prev_alpha ? low(ch) : up(ch); break;
        default: ch = i == 0 ? up(ch) : low(ch);
        }
        /* non-ASCII bytes count as letters for title(): Python treats most as cased characters */
        prev_alpha = is_alpha(s.p[i]) || ((unsigned char)s.p[i] & 0x80);
        p[i] = ch;
    }
    *out = jj_strv(jj_s(p, s.n));
    return jj_step(c, s.n >> 6);
}

static bool replace(jj_ctx *c, jj_str s, jj_str from, jj_str to, int64_t count, jj_val *out) {
    jj_buf b = {0};
    size_t i = 0, done = 0;
    if (from.n == 0) { /* Python inserts `to` between every character (and at both ends) */
        for (size_t k = 0; k <= s.n; k++) {
            if (count < 0 || (int64_t)done < count) {
                if (!jj_buf_add(c, &b, to.p, to.n)) return false;
                done++;
            }
            if (k < s.n && !jj_buf_add(c, &b, s.p + k, 1)) return false;
        }
        return ret_buf(&b, out);
    }
    while (i < s.n) {
        size_t j = (count < 0 || (int64_t)done < count) ? jj_find(c, s, i, from) : SIZE_MAX;
        if (j == SIZE_MAX) {
            if (!jj_buf_add(c, &b, s.p + i, s.n - i)) return false;
            break;
        }
        if (!jj_buf_add(c, &b, s.p + i, j - i) || !jj_buf_add(c, &b, to.p, to.n) || !jj_step(c, 1)) return false;
        i = j + from.n;
        done++;
    }
    return ret_buf(&b, out);
}

static bool to_list(jj_ctx *c, jj_val v, jj_list **out) {
    if (v.t == JV_LIST) {
        *out = v.u.l;
        return true;
    }
    jj_list *l = jj_list_new(c, 0);
    if (!l) return false;
    if (v.t == JV_DICT) {
        for (size_t i = 0; i < v.u.d->n; i++)
            if (!jj_list_push(c, l, v.u.d->k[i])) return false;
    } else if (v.t == JV_STR) {
        size_t i = 0;
        while (i < v.u.s.n) {
            size_t j = i + 1;
            while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xC0) == 0x80) j++;
            if (!jj_list_push(c, l, jj_strv(jj_s(v.u.s.p + i, j - i))) || !jj_step(c, 1)) return false;
            i = j;
        }
    } else if (v.t != JV_UNDEF && v.t != JV_NONE) {
        return jj_fail(c, LW_ERR_INVALID_ARG, "%s is not iterable", jj_type_name(v));
    }
    *out = l;
    return true;
}

static bool items_of(jj_ctx *c, jj_val v, jj_val *out) {
    jj_list *l = jj_list_new(c, v.t == JV_DICT ? v.u.d->n : 0);
    if (!l) return false;
    if (v.t == JV_DICT) {
        for (size_t i = 0; i < v.u.d->n; i++) {
            jj_list *pair = jj_list_new(c, 2);
            if (!pair || !jj_list_push(c, pair, v.u.d->k[i]) || !jj_list_push(c, pair, v.u.d->v[i]) ||
                !jj_list_push(c, l, jj_listv(pair)))
                return false;
        }
    } else if (v.t != JV_UNDEF && v.t != JV_NONE) {
        return jj_fail(c, LW_ERR_INVALID_ARG, "items() needs a mapping, got %s", jj_type_name(v));
    }
    *out = jj_listv(l);
    return jj_step(c, l->n);
}

/* Attribute lookup with dotted paths ("function.name"), as Jinja2's attribute= arguments. */
static jj_val attr_path(jj_ctx *c, jj_val v, jj_str path) {
    size_t i = 0;
    while (i <= path.n) {
        size_t j = i;
        while (j < path.n && path.p[j] != '.') j++;
        jj_str part = jj_s(path.p + i, j - i);
        if (v.t == JV_DICT) {
            jj_val *x = jj_dict_get(c, v.u.d, jj_strv(part));
            v = x ? *x : jj_undef();
        } else if (v.t == JV_LIST) {
            int64_t idx = 0;
            bool num = part.n > 0;
            for (size_t k = 0; k < part.n; k++) {
                if (part.p[k] < '0' || part.p[k] > '9' || idx > 1000000000) num = false;
                else idx = idx * 10 + (part.p[k] - '0');
            }
            v = num && (size_t)idx < v.u.l->n ? v.u.l->v[idx] : jj_undef();
        } else {
            return jj_undef();
        }
        i = j + 1;
    }
    return v;
}

static bool test_by_name(jj_ctx *c, jj_val name, jj_val in, const jj_val *args, size_t nargs, bool *out) {
    if (name.t != JV_STR) return jj_fail(c, LW_ERR_INVALID_ARG, "test name must be a string");
    int id = jj_test_id(name.u.s);
    if (id < 0)
        return jj_fail(c, LW_ERR_INVALID_ARG, "unknown test '%.*s'", (int)(name.u.s.n > 40 ? 40 : name.u.s.n),
                       name.u.s.p);
    return jj_apply_test(c, id, in, args, nargs, out);
}

/* select/reject/selectattr/rejectattr */
static bool select_items(jj_ctx *c, jj_val in, const jj_val *args, size_t nargs, bool by_attr, bool keep,
                         jj_val *out) {
    jj_list *src, *dst;
    if (!to_list(c, in, &src) || !(dst = jj_list_new(c, 0))) return false;
    size_t first_test = by_attr ? 1 : 0;
    if (by_attr && (nargs < 1 || args[0].t != JV_STR))
        return jj_fail(c, LW_ERR_INVALID_ARG, "selectattr/rejectattr need an attribute name");
    for (size_t i = 0; i < src->n; i++) {
        jj_val x = by_attr ? attr_path(c, src->v[i], args[0].u.s) : src->v[i];
        bool r;
        if (nargs > first_test) {
            if (!test_by_name(c, args[first_test], x, args + first_test + 1, nargs - first_test - 1, &r)) return false;
        } else {
            r = jj_truthy(x);
        }
        if (r == keep && !jj_list_push(c, dst, src->v[i])) return false;
        if (!jj_step(c, 1)) return false;
    }
    *out = jj_listv(dst);
    return true;
}

/* Sort helper: insertion sort (stable); lists in templates are short and the step limit bounds the cost. */
static bool sort_list(jj_ctx *c, jj_list *l, bool reverse, bool case_sensitive, const jj_str *attribute) {
    for (size_t i = 1; i < l->n; i++) {
        jj_val x = l->v[i];
        size_t j = i;
        while (j > 0) {
            jj_val a = l->v[j - 1], b = x;
            if (attribute) {
                a = attr_path(c, a, *attribute);
                b = attr_path(c, b, *attribute);
            }
            if (!case_sensitive && a.t == JV_STR && b.t == JV_STR) {
                jj_val la, lb;
                if (!case_map(c, a.u.s, 'l', &la) || !case_map(c, b.u.s, 'l', &lb)) return false;
                a = la;
                b = lb;
            }
            int cmp;
            if (!jj_compare(c, a, b, &cmp) || !jj_step(c, 1)) return false;
            if (reverse ? cmp >= 0 : cmp <= 0) break;
            l->v[j] = l->v[j - 1];
            j--;
        }
        l->v[j] = x;
    }
    return true;
}

static bool copy_list(jj_ctx *c, jj_list *src, jj_list **out) {
    jj_list *l = jj_list_new(c, src->n);
    if (!l) return false;
    for (size_t i = 0; i < src->n; i++)
        if (!jj_list_push(c, l, src->v[i])) return false;
    *out = l;
    return jj_step(c, src->n);
}

static bool parse_int(jj_str s, int64_t *out) {
    s = strip(s, NULL, 3);
    if (!s.n || s.n > 40) return false;
    char buf[48];
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] != '_') buf[k++] = s.p[i];
    buf[k] = 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (*end) return false;
    *out = v;
    return true;
}

static bool parse_float(jj_str s, double *out) {
    s = strip(s, NULL, 3);
    if (!s.n || s.n > 60) return false;
    char buf[64];
    memcpy(buf, s.p, s.n);
    buf[s.n] = 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end) return false;
    *out = v;
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * from_json (llama.cpp's extension, used by DeepSeek V3.2/V4 templates for tool-call arguments)
 * ------------------------------------------------------------------------------------------------------- */

typedef struct json_in {
    jj_str s;   /* the text          */
    size_t i;   /* current offset    */
} json_in;

static void json_ws(json_in *J) {
    while (J->i < J->s.n && (J->s.p[J->i] == ' ' || J->s.p[J->i] == '\t' || J->s.p[J->i] == '\n' || J->s.p[J->i] == '\r'))
        J->i++;
}

static bool json_bad(jj_ctx *c, json_in *J, const char *what) {
    return jj_fail(c, LW_ERR_INVALID_ARG, "from_json: %s at offset %zu", what, J->i);
}

static int json_hex4(json_in *J) {
    if (J->s.n - J->i < 4) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = J->s.p[J->i + k];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    J->i += 4;
    return v;
}

static bool json_string(jj_ctx *c, json_in *J, jj_str *out) {
    jj_buf b = {0};
    J->i++; /* opening quote */
    for (;;) {
        size_t run = J->i;
        while (J->i < J->s.n && J->s.p[J->i] != '"' && J->s.p[J->i] != '\\' && (unsigned char)J->s.p[J->i] >= 0x20) J->i++;
        if (!jj_buf_add(c, &b, J->s.p + run, J->i - run)) return false;
        if (J->i >= J->s.n) return json_bad(c, J, "unterminated string");
        char ch = J->s.p[J->i++];
        if (ch == '"') break;
        if (ch != '\\') return json_bad(c, J, "control character in string");
        if (J->i >= J->s.n) return json_bad(c, J, "unterminated string");
        char e = J->s.p[J->i++];
        char lit = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f'
                 : (e == '"' || e == '\\' || e == '/') ? e : 0;
        if (lit) {
            if (!jj_buf_add(c, &b, &lit, 1)) return false;
            continue;
        }
        if (e != 'u') return json_bad(c, J, "bad escape");
        int cp = json_hex4(J);
        if (cp < 0) return json_bad(c, J, "bad \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF && J->s.n - J->i >= 6 && J->s.p[J->i] == '\\' && J->s.p[J->i + 1] == 'u') {
            size_t save = J->i;
            J->i += 2;
            int lo = json_hex4(J);
            if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else J->i = save;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* lone surrogate */
        char u[4];
        size_t n;
        if (cp < 0x80) { u[0] = (char)cp; n = 1; }
        else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
        else if (cp < 0x10000) { u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
        else { u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
        if (!jj_buf_add(c, &b, u, n)) return false;
    }
    *out = jj_s(b.p ? b.p : "", b.n);
    return true;
}

static bool json_value(jj_ctx *c, json_in *J, int depth, jj_val *out) {
    if (depth > JJ_MAX_VALUE_DEPTH) return jj_fail(c, LW_ERR_TOO_LARGE, "from_json: nested too deeply");
    if (!jj_step(c, 1)) return false;
    json_ws(J);
    if (J->i >= J->s.n) return json_bad(c, J, "unexpected end");
    char ch = J->s.p[J->i];
    if (ch == '"') {
        jj_str s;
        if (!json_string(c, J, &s)) return false;
        *out = jj_strv(s);
        return true;
    }
    if (ch == '[' || ch == '{') {
        bool obj = ch == '{';
        jj_list *l = obj ? NULL : jj_list_new(c, 0);
        jj_dict *d = obj ? jj_dict_new(c, 0) : NULL;
        if (!l && !d) return false;
        J->i++;
        json_ws(J);
        if (J->i < J->s.n && J->s.p[J->i] == (obj ? '}' : ']')) {
            J->i++;
        } else {
            for (;;) {
                jj_val k, v;
                if (obj) {
                    json_ws(J);
                    if (J->i >= J->s.n || J->s.p[J->i] != '"') return json_bad(c, J, "expected a key");
                    jj_str ks;
                    if (!json_string(c, J, &ks)) return false;
                    k = jj_strv(ks);
                    json_ws(J);
                    if (J->i >= J->s.n || J->s.p[J->i] != ':') return json_bad(c, J, "expected ':'");
                    J->i++;
                }
                if (!json_value(c, J, depth + 1, &v)) return false;
                if (obj ? !jj_dict_set(c, d, k, v) : !jj_list_push(c, l, v)) return false;
                json_ws(J);
                if (J->i < J->s.n && J->s.p[J->i] == ',') {
                    J->i++;
                    continue;
                }
                if (J->i < J->s.n && J->s.p[J->i] == (obj ? '}' : ']')) {
                    J->i++;
                    break;
                }
                return json_bad(c, J, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
        *out = obj ? jj_dictv(d) : jj_listv(l);
        return true;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if (J->s.n - J->i >= n && !memcmp(J->s.p + J->i, words[k], n)) {
            J->i += n;
            *out = k == 0 ? jj_bool(true) : k == 1 ? jj_bool(false) : jj_none();
            return true;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        size_t start = J->i;
        bool is_float = false;
        if (J->s.p[J->i] == '-') J->i++;
        while (J->i < J->s.n) {
            char d = J->s.p[J->i];
            if (d == '.' || d == 'e' || d == 'E' || ((d == '+' || d == '-') && (J->s.p[J->i - 1] == 'e' || J->s.p[J->i - 1] == 'E')))
                is_float = true;
            else if (d < '0' || d > '9')
                break;
            J->i++;
        }
        char buf[64];
        size_t n = J->i - start;
        if (n == 0 || n >= sizeof buf) return json_bad(c, J, "bad number");
        memcpy(buf, J->s.p + start, n);
        buf[n] = 0;
        char *end;
        if (!is_float) {
            errno = 0;
            long long v = strtoll(buf, &end, 10);
            if (*end == 0 && errno == 0) {
                *out = jj_int(v);
                return true;
            }
        }
        double f = strtod(buf, &end);
        if (*end) return json_bad(c, J, "bad number");
        *out = jj_float(f);
        return true;
    }
    return json_bad(c, J, "unexpected character");
}

bool jj_from_json(jj_ctx *c, jj_str s, jj_val *out) {
    json_in J = {s, 0};
    if (!json_value(c, &J, 0, out)) return false;
    json_ws(&J);
    if (J.i != J.s.n) return json_bad(c, &J, "trailing characters");
    return true;
}

static bool from_json(jj_ctx *c, jj_val in, jj_val *out) {
    if (in.t != JV_STR) return jj_fail(c, LW_ERR_INVALID_ARG, "from_json expects a string, got %s", jj_type_name(in));
    return jj_from_json(c, in.u.s, out);
}

/* ---------------------------------------------------------------------------------------------------------
 * Filters
 * ------------------------------------------------------------------------------------------------------- */

bool jj_apply_filter(jj_ctx *c, jj_scope *sc, int id, jj_val in, const jj_val *args, size_t nargs,
                     const jj_str *kwn, const jj_val *kwv, size_t nkw, jj_val *out) {
    (void)sc;
#define ARG(pos, name) arg(args, nargs, kwn, kwv, nkw, pos, name)
    const jj_val *a0 = ARG(0, NULL);
    jj_str s;
    jj_list *l;
    /* string filters are linear in their input: charge for it up front */
    if (in.t == JV_STR && !jj_step(c, in.u.s.n >> 6)) return false;
    switch (id) {
    case F_ABS:
        if (in.t == JV_INT) {
            if (in.u.i == INT64_MIN) return jj_fail(c, LW_ERR_OVERFLOW, "integer overflow in abs");
            *out = jj_int(in.u.i < 0 ? -in.u.i : in.u.i);
        } else if (in.t == JV_FLOAT) {
            *out = jj_float(fabs(in.u.f));
        } else {
            return jj_fail(c, LW_ERR_INVALID_ARG, "abs of %s", jj_type_name(in));
        }
        return true;
    case F_ATTR:
        if (!want_str(c, a0, "attr", &s)) return false;
        {
            jj_val *v = in.t == JV_DICT ? jj_dict_get(c, in.u.d, jj_strv(s)) : NULL;
            *out = v ? *v : jj_undef();
        }
        return true;
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
    case F_TITLE:
        if (!jj_to_str(c, in, &s)) return false;
        return case_map(c, s, id == F_CAPITALIZE ? 'c' : id == F_LOWER ? 'l' : id == F_UPPER ? 'u' : 't', out);
    case F_CENTER: {
        const jj_val *w = ARG(0, "width");
        int64_t width = w && w->t == JV_INT ? w->u.i : 80;
        if (!jj_to_str(c, in, &s)) return false;
        size_t len = jj_utf8_len(s);
        if (width > (int64_t)(c->max_output) || width <= (int64_t)len) {
            *out = jj_strv(s);
            return true;
        }
        size_t total = (size_t)width - len, left = total / 2 + (total & (size_t)width & 1);
        jj_buf b = {0};
        for (size_t i = 0; i < left; i++)
            if (!jj_buf_add(c, &b, " ", 1)) return false;
        if (!jj_buf_add(c, &b, s.p, s.n)) return false;
        for (size_t i = left; i < total; i++)
            if (!jj_buf_add(c, &b, " ", 1)) return false;
        return ret_buf(&b, out);
    }
    case F_COUNT:
    case F_LENGTH:
        switch (in.t) {
        case JV_STR: *out = jj_int((int64_t)jj_utf8_len(in.u.s)); return jj_step(c, in.u.s.n >> 6);
        case JV_LIST: *out = jj_int((int64_t)in.u.l->n); return true;
        case JV_DICT: *out = jj_int((int64_t)in.u.d->n); return true;
        case JV_UNDEF: *out = jj_int(0); return true;
        default: return jj_fail(c, LW_ERR_INVALID_ARG, "object of type '%s' has no length", jj_type_name(in));
        }
    case F_D:
    case F_DEFAULT: {
        const jj_val *b = ARG(1, "boolean");
        bool use = in.t == JV_UNDEF || (b && jj_truthy(*b) && !jj_truthy(in));
        *out = use ? (a0 ? *a0 : jj_strv(jj_s("", 0))) : in;
        return true;
    }
    case F_DICTSORT: {
        if (!items_of(c, in, out)) return false;
        const jj_val *cs = ARG(0, "case_sensitive"), *by = ARG(1, "by"), *rev = ARG(2, "reverse");
        bool by_value = by && by->t == JV_STR && jj_str_eqz(by->u.s, "value");
        jj_str path = jj_s(by_value ? "1" : "0", 1);
        return sort_list(c, out->u.l, rev && jj_truthy(*rev), cs && jj_truthy(*cs), &path);
    }
    case F_E:
    case F_ESCAPE: {
        if (!jj_to_str(c, in, &s)) return false;
        jj_buf b = {0};
        for (size_t i = 0; i < s.n; i++) {
            const char *r = NULL;
            switch (s.p[i]) {
            case '&': r = "&amp;"; break;
            case '<': r = "&lt;"; break;
            case '>': r = "&gt;"; break;
            case '"': r = "&#34;"; break;
            case '\'': r = "&#39;"; break;
            }
            if (!(r ? jj_buf_add(c, &b, r, strlen(r)) : jj_buf_add(c, &b, s.p + i, 1))) return false;
        }
        return ret_buf(&b, out);
    }
    case F_FIRST:
    case F_LAST:
        if (in.t == JV_STR) {
            size_t n = jj_utf8_len(in.u.s);
            if (!n) {
                *out = jj_undef();
                return true;
            }
            size_t i = id == F_FIRST ? 0 : n - 1;
            size_t b0 = jj_utf8_offset(in.u.s, i), b1 = jj_utf8_offset(in.u.s, i + 1);
            *out = jj_strv(jj_s(in.u.s.p + b0, b1 - b0));
            return true;
        }
        if (!to_list(c, in, &l)) return false;
        *out = l->n ? l->v[id == F_FIRST ? 0 : l->n - 1] : jj_undef();
        return true;
    case F_FLOAT: {
        double f = 0;
        const jj_val *d = ARG(0, "default");
        if (in.t == JV_FLOAT) *out = in;
        else if (in.t == JV_INT || in.t == JV_BOOL) *out = jj_float(in.t == JV_INT ? (double)in.u.i : in.u.b);
        else if (in.t == JV_STR && parse_float(in.u.s, &f)) *out = jj_float(f);
        else *out = d ? *d : jj_float(0.0);
        return true;
    }
    case F_INT: {
        int64_t i = 0;
        double f;
        const jj_val *d = ARG(0, "default");
        if (in.t == JV_INT) *out = in;
        else if (in.t == JV_BOOL) *out = jj_int(in.u.b);
        else if (in.t == JV_FLOAT && isfinite(in.u.f) && fabs(in.u.f) < 9.2e18) *out = jj_int((int64_t)in.u.f);
        else if (in.t == JV_STR && parse_int(in.u.s, &i)) *out = jj_int(i);
        else if (in.t == JV_STR && parse_float(in.u.s, &f) && isfinite(f) && fabs(f) < 9.2e18) *out = jj_int((int64_t)f);
        else *out = d ? *d : jj_int(0);
        return true;
    }
    case F_INDENT: {
        const jj_val *w = ARG(0, "width"), *first = ARG(1, "first"), *blank = ARG(2, "blank");
        jj_str pad = jj_s("    ", 4);
        char spaces[64];
        if (w && w->t == JV_STR) pad = w->u.s;
        else if (w && w->t == JV_INT) {
            int64_t n = w->u.i < 0 ? 0 : w->u.i > 63 ? 63 : w->u.i;
            memset(spaces, ' ', (size_t)n);
            pad = jj_s(spaces, (size_t)n);
        }
        if (!jj_to_str(c, in, &s)) return false;
        jj_buf b = {0};
        bool at_start = true, do_first = first && jj_truthy(*first), do_blank = blank && jj_truthy(*blank);
        for (size_t i = 0; i < s.n; i++) {
            if (at_start) {
                bool is_blank = s.p[i] == '\n';
                bool line0 = i == 0;
                if ((line0 ? do_first : true) && (do_blank || !is_blank) && !jj_buf_add(c, &b, pad.p, pad.n))
                    return false;
            }
            if (!jj_buf_add(c, &b, s.p + i, 1)) return false;
            at_start = s.p[i] == '\n';
        }
        if (s.n == 0 && do_first && do_blank && !jj_buf_add(c, &b, pad.p, pad.n)) return false;
        return ret_buf(&b, out);
    }
    case F_ITEMS: return items_of(c, in, out);
    case F_FROM_JSON: return from_json(c, in, out);
    case F_JOIN: {
        const jj_val *sep = ARG(0, "d"), *attr = ARG(1, "attribute");
        jj_str sp = sep && sep->t == JV_STR ? sep->u.s : jj_s("", 0);
        if (!to_list(c, in, &l)) return false;
        jj_buf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            jj_val x = attr && attr->t == JV_STR ? attr_path(c, l->v[i], attr->u.s) : l->v[i];
            if ((i && !jj_buf_add(c, &b, sp.p, sp.n)) || !jj_write(c, &b, x) || !jj_step(c, 1)) return false;
        }
        return ret_buf(&b, out);
    }
    case F_LIST:
        if (!to_list(c, in, &l)) return false;
        if (in.t == JV_LIST && !copy_list(c, l, &l)) return false;
        *out = jj_listv(l);
        return true;
    case F_MAP: {
        const jj_val *attr = ARG(99, "attribute"), *dflt = ARG(99, "default");
        jj_list *dst;
        if (!to_list(c, in, &l) || !(dst = jj_list_new(c, l->n))) return false;
        int fid = -1;
        if (!attr) {
            if (!a0 || a0->t != JV_STR) return jj_fail(c, LW_ERR_INVALID_ARG, "map needs a filter name or attribute=");
            fid = jj_filter_id(a0->u.s);
            if (fid < 0)
                return jj_fail(c, LW_ERR_INVALID_ARG, "unknown filter '%.*s'", (int)(a0->u.s.n > 40 ? 40 : a0->u.s.n),
                               a0->u.s.p);
        } else if (attr->t != JV_STR) {
            return jj_fail(c, LW_ERR_INVALID_ARG, "map: attribute must be a string");
        }
        for (size_t i = 0; i < l->n; i++) {
            jj_val x;
            if (attr) {
                x = attr_path(c, l->v[i], attr->u.s);
                if (x.t == JV_UNDEF && dflt) x = *dflt;
            } else if (!jj_apply_filter(c, sc, fid, l->v[i], args + 1, nargs - 1, kwn, kwv, nkw, &x)) {
                return false;
            }
            if (!jj_list_push(c, dst, x) || !jj_step(c, 1)) return false;
        }
        *out = jj_listv(dst);
        return true;
    }
    case F_MAX:
    case F_MIN: {
        const jj_val *attr = ARG(1, "attribute");
        if (!to_list(c, in, &l)) return false;
        *out = jj_undef();
        for (size_t i = 0; i < l->n; i++) {
            if (i == 0) {
                *out = l->v[0];
                continue;
            }
            jj_val a = attr && attr->t == JV_STR ? attr_path(c, l->v[i], attr->u.s) : l->v[i];
            jj_val b = attr && attr->t == JV_STR ? attr_path(c, *out, attr->u.s) : *out;
            int cmp;
            if (!jj_compare(c, a, b, &cmp)) return false;
            if (id == F_MAX ? cmp > 0 : cmp < 0) *out = l->v[i];
        }
        return true;
    }
    case F_REJECT: return select_items(c, in, args, nargs, false, false, out);
    case F_SELECT: return select_items(c, in, args, nargs, false, true, out);
    case F_REJECTATTR: return select_items(c, in, args, nargs, true, false, out);
    case F_SELECTATTR: return select_items(c, in, args, nargs, true, true, out);
    case F_REPLACE: {
        jj_str from, to;
        const jj_val *cnt = ARG(2, "count");
        if (!jj_to_str(c, in, &s) || !want_str(c, a0, "replace", &from) || !want_str(c, ARG(1, NULL), "replace", &to))
            return false;
        return replace(c, s, from, to, cnt && cnt->t == JV_INT ? cnt->u.i : -1, out);
    }
    case F_REVERSE:
        if (in.t == JV_STR) {
            jj_buf b = {0};
            size_t i = in.u.s.n;
            while (i > 0) {
                size_t j = i - 1;
                while (j > 0 && ((unsigned char)in.u.s.p[j] & 0xC0) == 0x80) j--;
                if (!jj_buf_add(c, &b, in.u.s.p + j, i - j)) return false;
                i = j;
            }
            return ret_buf(&b, out);
        }
        if (!to_list(c, in, &l) || !copy_list(c, l, &l)) return false;
        for (size_t i = 0; i < l->n / 2; i++) {
            jj_val t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
        *out = jj_listv(l);
        return true;
    case F_ROUND: {
        const jj_val *prec = ARG(0, "precision"), *method = ARG(1, "method");
        if (in.t != JV_INT && in.t != JV_FLOAT && in.t != JV_BOOL)
            return jj_fail(c, LW_ERR_INVALID_ARG, "round of %s", jj_type_name(in));
        double x = in.t == JV_FLOAT ? in.u.f : in.t == JV_INT ? (double)in.u.i : in.u.b;
        int64_t p = prec && prec->t == JV_INT ? prec->u.i : 0;
        if (p < -20) p = -20;
        if (p > 20) p = 20;
        double m = pow(10.0, (double)p), y = x * m;
        if (method && method->t == JV_STR && jj_str_eqz(method->u.s, "floor")) y = floor(y);
        else if (method && method->t == JV_STR && jj_str_eqz(method->u.s, "ceil")) y = ceil(y);
        else y = round(y);
        *out = jj_float(y / m);
        return true;
    }
    case F_SAFE: *out = in; return true;
    case F_SORT: {
        const jj_val *rev = ARG(0, "reverse"), *cs = ARG(1, "case_sensitive"), *attr = ARG(2, "attribute");
        if (!to_list(c, in, &l) || !copy_list(c, l, &l)) return false;
        jj_str path = attr && attr->t == JV_STR ? attr->u.s : jj_s("", 0);
        if (!sort_list(c, l, rev && jj_truthy(*rev), cs && jj_truthy(*cs), attr && attr->t == JV_STR ? &path : NULL))
            return false;
        *out = jj_listv(l);
        return true;
    }
    case F_STRING:
        if (!jj_to_str(c, in, &s)) return false;
        *out = jj_strv(s);
        return true;
    case F_SUM: {
        const jj_val *attr = ARG(0, "attribute"), *start = ARG(1, "start");
        jj_val acc = start ? *start : jj_int(0);
        if (!to_list(c, in, &l)) return false;
        for (size_t i = 0; i < l->n; i++) {
            jj_val x = attr && attr->t == JV_STR ? attr_path(c, l->v[i], attr->u.s) : l->v[i];
            bool xf = x.t == JV_FLOAT, af = acc.t == JV_FLOAT;
            if ((x.t != JV_INT && !xf && x.t != JV_BOOL) || (acc.t != JV_INT && !af && acc.t != JV_BOOL))
                return jj_fail(c, LW_ERR_INVALID_ARG, "sum of non-numbers");
            if (xf || af) {
                double a = af ? acc.u.f : acc.t == JV_INT ? (double)acc.u.i : acc.u.b;
                double b = xf ? x.u.f : x.t == JV_INT ? (double)x.u.i : x.u.b;
                acc = jj_float(a + b);
            } else {
                int64_t r, a = acc.t == JV_INT ? acc.u.i : acc.u.b, b = x.t == JV_INT ? x.u.i : x.u.b;
                if (__builtin_add_overflow(a, b, &r)) return jj_fail(c, LW_ERR_OVERFLOW, "integer overflow in sum");
                acc = jj_int(r);
            }
        }
        *out = acc;
        return true;
    }
    case F_TOJSON: {
        const jj_val *ind = ARG(0, "indent"), *sk = ARG(99, "sort_keys"), *ea = ARG(99, "ensure_ascii");
        int indent = ind && ind->t == JV_INT ? (int)(ind->u.i < 0 ? 0 : ind->u.i > 32 ? 32 : ind->u.i) : -1;
        int flags = (sk && jj_truthy(*sk) ? JJ_JSON_SORT_KEYS : 0) | (ea && jj_truthy(*ea) ? JJ_JSON_ASCII : 0);
        jj_buf b = {0};
        if (!jj_tojson(c, &b, in, indent, flags)) return false;
        return ret_buf(&b, out);
    }
    case F_TRIM: {
        const jj_val *chars = ARG(0, "chars");
        if (!jj_to_str(c, in, &s)) return false;
        *out = jj_strv(strip(s, chars && chars->t == JV_STR ? &chars->u.s : NULL, 3));
        return true;
    }
    case F_UNIQUE: {
        jj_list *dst;
        if (!to_list(c, in, &l) || !(dst = jj_list_new(c, 0))) return false;
        for (size_t i = 0; i < l->n; i++) {
            bool dup = false;
            for (size_t k = 0; k < dst->n && !dup; k++)
                if (!jj_equal(c, l->v[i], dst->v[k], 0, &dup)) return false;
            if (!dup && !jj_list_push(c, dst, l->v[i])) return false;
        }
        *out = jj_listv(dst);
        return true;
    }
    case F_WORDCOUNT: {
        if (!jj_to_str(c, in, &s)) return false;
        int64_t n = 0;
        bool in_word = false;
        for (size_t i = 0; i < s.n;) {
            size_t ws = ws_at(s, i);
            bool w = ws == 0;
            if (w && !in_word) n++;
            in_word = w;
            i += ws ? ws : char_len(s, i);
        }
        *out = jj_int(n);
        return true;
    }
    default: return jj_fail(c, LW_ERR_INVALID_ARG, "unknown filter");
    }
#undef ARG
}

/* ---------------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------------- */

bool jj_apply_test(jj_ctx *c, int id, jj_val in, const jj_val *args, size_t nargs, bool *out) {
    const jj_val *a0 = nargs ? &args[0] : NULL;
    int cmp;
    switch (id) {
    case T_BOOLEAN: *out = in.t == JV_BOOL; return true;
    case T_CALLABLE: *out = in.t == JV_MACRO || in.t == JV_FUNC; return true;
    case T_DEFINED: *out = in.t != JV_UNDEF; return true;
    case T_UNDEFINED: *out = in.t == JV_UNDEF; return true;
    case T_NONE: *out = in.t == JV_NONE; return true;
    case T_FALSE: *out = in.t == JV_BOOL && !in.u.b; return true;
    case T_TRUE: *out = in.t == JV_BOOL && in.u.b; return true;
    case T_FLOAT: *out = in.t == JV_FLOAT; return true;
    case T_INTEGER: *out = in.t == JV_INT; return true;
    case T_NUMBER: *out = in.t == JV_INT || in.t == JV_FLOAT || in.t == JV_BOOL; return true;
    case T_STRING: *out = in.t == JV_STR; return true;
    case T_MAPPING: *out = in.t == JV_DICT; return true;
    case T_ITERABLE: *out = in.t == JV_LIST || in.t == JV_DICT || in.t == JV_STR; return true;
    case T_SEQUENCE: *out = in.t == JV_LIST || in.t == JV_DICT || in.t == JV_STR; return true;
    case T_LOWER:
    case T_UPPER: {
        if (in.t != JV_STR) {
            *out = false;
            return true;
        }
        bool cased = false, ok = true;
        for (size_t i = 0; i < in.u.s.n; i++) {
            char ch = in.u.s.p[i];
            if (is_alpha(ch)) {
                cased = true;
                if (id == T_LOWER ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z')) ok = false;
            }
        }
        *out = cased && ok;
        return true;
    }
    case T_EVEN:
    case T_ODD:
        if (in.t != JV_INT) return jj_fail(c, LW_ERR_INVALID_ARG, "even/odd test needs an integer");
        *out = (in.u.i % 2 == 0) == (id == T_EVEN);
        return true;
    case T_DIVISIBLEBY:
        if (in.t != JV_INT || !a0 || a0->t != JV_INT || a0->u.i == 0)
            return jj_fail(c, LW_ERR_INVALID_ARG, "divisibleby needs integers (and a non-zero divisor)");
        *out = a0->u.i == -1 || in.u.i % a0->u.i == 0;
        return true;
    case T_SAMEAS:
        if (!a0) return jj_fail(c, LW_ERR_INVALID_ARG, "sameas needs an argument");
        if (in.t != a0->t) *out = false;
        else if (in.t == JV_LIST) *out = in.u.l == a0->u.l;
        else if (in.t == JV_DICT) *out = in.u.d == a0->u.d;
        else return jj_equal(c, in, *a0, 0, out);
        return true;
    case T_EQ:
    case T_EQUALTO:
    case T_EQ2:
    case T_NE:
        if (!a0) return jj_fail(c, LW_ERR_INVALID_ARG, "comparison test needs an argument");
        if (!jj_equal(c, in, *a0, 0, out)) return false;
        if (id == T_NE) *out = !*out;
        return true;
    case T_GE:
    case T_GT:
    case T_GREATERTHAN:
    case T_LE:
    case T_LT:
    case T_LESSTHAN:
        if (!a0) return jj_fail(c, LW_ERR_INVALID_ARG, "comparison test needs an argument");
        if (!jj_compare(c, in, *a0, &cmp)) return false;
        *out = id == T_GE ? cmp >= 0 : (id == T_GT || id == T_GREATERTHAN) ? cmp > 0 : id == T_LE ? cmp <= 0 : cmp < 0;
        return true;
    case T_IN: {
        if (!a0) return jj_fail(c, LW_ERR_INVALID_ARG, "'in' test needs an argument");
        *out = false;
        if (a0->t == JV_STR && in.t == JV_STR) {
            *out = jj_find(c, a0->u.s, 0, in.u.s) != SIZE_MAX;
            return jj_step(c, 1);
        }
        if (a0->t == JV_DICT) {
            *out = jj_dict_get(c, a0->u.d, in) != NULL;
            return true;
        }
        if (a0->t == JV_LIST)
            for (size_t i = 0; i < a0->u.l->n && !*out; i++)
                if (!jj_equal(c, in, a0->u.l->v[i], 0, out)) return false;
        return true;
    }
    default: return jj_fail(c, LW_ERR_INVALID_ARG, "unknown test");
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Methods: str.*, dict.*
 * ------------------------------------------------------------------------------------------------------- */

static bool split(jj_ctx *c, jj_str s, const jj_val *sepv, int64_t maxsplit, jj_val *out) {
    jj_list *l = jj_list_new(c, 0);
    if (!l) return false;
    if (!sepv || sepv->t == JV_NONE) { /* runs of whitespace, no empty strings */
        size_t i = 0;
        int64_t done = 0;
        while (i < s.n) {
            size_t w;
            while (i < s.n && (w = ws_at(s, i)) > 0) i += w;
            if (i >= s.n) break;
            size_t j = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                j = (size_t)(strip(jj_s(s.p + i, s.n - i), NULL, 2).n) + i;
            } else {
                while (j < s.n && ws_at(s, j) == 0) j += char_len(s, j);
            }
            if (!jj_list_push(c, l, jj_strv(jj_s(s.p + i, j - i))) || !jj_step(c, 1)) return false;
            done++;
            i = j;
        }
    } else {
        if (sepv->t != JV_STR) return jj_fail(c, LW_ERR_INVALID_ARG, "split separator must be a string");
        jj_str sep = sepv->u.s;
        if (!sep.n) return jj_fail(c, LW_ERR_INVALID_ARG, "empty separator");
        size_t start = 0;
        int64_t done = 0;
        while (maxsplit < 0 || done < maxsplit) {
            size_t j = jj_find(c, s, start, sep);
            if (j == SIZE_MAX) break;
            if (!jj_list_push(c, l, jj_strv(jj_s(s.p + start, j - start))) || !jj_step(c, 1)) return false;
            start = j + sep.n;
            done++;
        }
        if (!jj_list_push(c, l, jj_strv(jj_s(s.p + start, s.n - start)))) return false;
        if (!jj_step(c, s.n >> 6)) return false;
    }
    *out = jj_listv(l);
    return true;
}

static bool affix(jj_str s, jj_val v, bool prefix, bool *res) {
    if (v.t == JV_LIST) { /* a tuple of candidates */
        *res = false;
        for (size_t i = 0; i < v.u.l->n && !*res; i++)
            if (!affix(s, v.u.l->v[i], prefix, res)) return false;
        return true;
    }
    if (v.t != JV_STR) return false;
    jj_str a = v.u.s;
    *res = a.n <= s.n && (a.n == 0 || !memcmp(prefix ? s.p : s.p + s.n - a.n, a.p, a.n));
    return true;
}

bool jj_call_method(jj_ctx *c, jj_val obj, jj_str name, const jj_val *args, size_t nargs, const jj_str *kwn,
                    const jj_val *kwv, size_t nkw, jj_val *out, bool *found) {
#define ARG(pos, nm) arg(args, nargs, kwn, kwv, nkw, pos, nm)
#define IS(z) jj_str_eqz(name, z)
    *found = true;
    if (obj.t == JV_STR) {
        jj_str s = obj.u.s;
        /* string methods are linear in the string and their string arguments: charge for it up front */
        size_t arg_bytes = 0;
        for (size_t i = 0; i < nargs; i++) arg_bytes += args[i].t == JV_STR ? args[i].u.s.n : 0;
        if (!jj_step(c, (s.n + arg_bytes) >> 6)) return false;
        const jj_val *a0 = ARG(0, NULL);
        if (IS("strip") || IS("lstrip") || IS("rstrip")) {
            const jj_str *chars = a0 && a0->t == JV_STR ? &a0->u.s : NULL;
            *out = jj_strv(strip(s, chars, IS("strip") ? 3 : IS("lstrip") ? 1 : 2));
            return true;
        }
        if (IS("upper") || IS("lower") || IS("title") || IS("capitalize"))
            return case_map(c, s, IS("upper") ? 'u' : IS("lower") ? 'l' : IS("title") ? 't' : 'c', out);
        if (IS("startswith") || IS("endswith")) {
            bool r;
            if (!a0 || !affix(s, *a0, IS("startswith"), &r))
                return jj_fail(c, LW_ERR_INVALID_ARG, "startswith/endswith need a string");
            *out = jj_bool(r);
            return true;
        }
        if (IS("split")) {
            const jj_val *ms = ARG(1, "maxsplit");
            return split(c, s, ARG(0, "sep"), ms && ms->t == JV_INT ? ms->u.i : -1, out);
        }
        if (IS("replace")) {
            jj_str from, to;
            const jj_val *cnt = ARG(2, "count");
            if (!want_str(c, a0, "replace", &from) || !want_str(c, ARG(1, NULL), "replace", &to)) return false;
            return replace(c, s, from, to, cnt && cnt->t == JV_INT ? cnt->u.i : -1, out);
        }
        if (IS("find") || IS("rfind") || IS("count") || IS("index")) {
            jj_str sub;
            if (!want_str(c, a0, "find", &sub)) return false;
            int64_t pos = -1, cnt = 0;
            size_t from = 0, j, at = 0;
            while ((j = jj_find(c, s, from, sub)) != SIZE_MAX) {
                if (pos < 0 || IS("rfind")) {
                    pos = 0;
                    at = j;
                }
                cnt++;
                if (!IS("count") && !IS("rfind")) break;
                if (!jj_step(c, 1)) return false;
                from = j + (sub.n && !IS("rfind") ? sub.n : 1); /* rfind: overlapping, as Python */
                if (from > s.n) break;
            }
            if (pos >= 0) pos = (int64_t)jj_utf8_len(jj_s(s.p, at)); /* byte offset → code point index */
            if (IS("index") && pos < 0) return jj_fail(c, LW_ERR_INVALID_ARG, "substring not found");
            *out = jj_int(IS("count") ? cnt : pos);
            return jj_step(c, s.n >> 6);
        }
        if (IS("join")) {
            jj_list *l;
            if (!a0 || !to_list(c, *a0, &l)) return jj_fail(c, LW_ERR_INVALID_ARG, "join needs an iterable");
            jj_buf b = {0};
            for (size_t i = 0; i < l->n; i++)
                if ((i && !jj_buf_add(c, &b, s.p, s.n)) || !jj_write(c, &b, l->v[i])) return false;
            return ret_buf(&b, out);
        }
        if (IS("isdigit") || IS("isalpha") || IS("isspace") || IS("isalnum")) {
            bool r = s.n > 0;
            for (size_t i = 0; i < s.n && r; i++) {
                char ch = s.p[i];
                bool d = ch >= '0' && ch <= '9';
                r = IS("isdigit") ? d : IS("isalpha") ? is_alpha(ch) : IS("isspace") ? py_space((unsigned char)ch)
                                                                                    : (d || is_alpha(ch));
            }
            *out = jj_bool(r);
            return true;
        }
        if (IS("removeprefix") || IS("removesuffix")) {
            bool r = false;
            if (!a0 || a0->t != JV_STR || !affix(s, *a0, IS("removeprefix"), &r))
                return jj_fail(c, LW_ERR_INVALID_ARG, "removeprefix/removesuffix need a string");
            *out = jj_strv(!r ? s : IS("removeprefix") ? jj_s(s.p + a0->u.s.n, s.n - a0->u.s.n)
                                                       : jj_s(s.p, s.n - a0->u.s.n));
            return true;
        }
        if (IS("format")) { /* "{}", "{0}", "{name}" replacement fields; "{{" and "}}" are literal braces */
            jj_buf b = {0};
            size_t auto_idx = 0;
            for (size_t i = 0; i < s.n; i++) {
                char ch = s.p[i];
                if ((ch == '{' || ch == '}') && i + 1 < s.n && s.p[i + 1] == ch) {
                    if (!jj_buf_add(c, &b, &ch, 1)) return false;
                    i++;
                    continue;
                }
                if (ch != '{') {
                    if (!jj_buf_add(c, &b, &ch, 1)) return false;
                    continue;
                }
                size_t j = i + 1;
                while (j < s.n && s.p[j] != '}') j++;
                if (j >= s.n) return jj_fail(c, LW_ERR_INVALID_ARG, "format: single '{' in format string");
                jj_str field = jj_s(s.p + i + 1, j - i - 1);
                const jj_val *v = NULL;
                if (field.n == 0) {
                    v = ARG(auto_idx++, NULL);
                } else if (field.p[0] >= '0' && field.p[0] <= '9') {
                    size_t k = 0;
                    for (size_t q = 0; q < field.n && k < 1000; q++) k = k * 10 + (size_t)(field.p[q] - '0');
                    v = ARG(k, NULL);
                } else {
                    for (size_t k = 0; k < nkw && !v; k++)
                        if (jj_str_eq(kwn[k], field)) v = &kwv[k];
                }
                if (!v) return jj_fail(c, LW_ERR_INVALID_ARG, "format: missing argument for a replacement field");
                if (!jj_write(c, &b, *v)) return false;
                i = j;
            }
            return ret_buf(&b, out);
        }
        if (IS("splitlines")) {
            jj_list *l = jj_list_new(c, 0);
            if (!l) return false;
            size_t i = 0;
            while (i < s.n) {
                size_t j = i;
                while (j < s.n && s.p[j] != '\n') j++;
                if (!jj_list_push(c, l, jj_strv(jj_s(s.p + i, j - i)))) return false;
                i = j + 1;
            }
            *out = jj_listv(l);
            return true;
        }
    } else if (obj.t == JV_LIST) {
        jj_list *l = obj.u.l;
        if (IS("append")) { /* some templates (Kimi K2) keep queues in lists */
            if (nargs != 1) return jj_fail(c, LW_ERR_INVALID_ARG, "append takes one argument");
            *out = jj_none();
            return jj_list_push(c, l, args[0]) && jj_step(c, 1);
        }
        if (IS("pop")) {
            int64_t i = nargs ? (args[0].t == JV_INT ? args[0].u.i : INT64_MIN) : -1;
            if (i == INT64_MIN) return jj_fail(c, LW_ERR_INVALID_ARG, "pop index must be an integer");
            if (i < 0) i += (int64_t)l->n;
            if (i < 0 || (uint64_t)i >= l->n) return jj_fail(c, LW_ERR_INVALID_ARG, "pop index out of range");
            *out = l->v[i];
            memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(jj_val));
            l->n--;
            return jj_step(c, 1 + ((l->n - (size_t)i) >> 4));
        }
        if (IS("index") || IS("count")) {
            if (nargs != 1) return jj_fail(c, LW_ERR_INVALID_ARG, "index/count take one argument");
            int64_t pos = -1, cnt = 0;
            for (size_t i = 0; i < l->n; i++) {
                bool eq;
                if (!jj_equal(c, l->v[i], args[0], 0, &eq)) return false;
                if (eq && pos < 0) pos = (int64_t)i;
                cnt += eq;
            }
            if (IS("index") && pos < 0) return jj_fail(c, LW_ERR_INVALID_ARG, "value is not in list");
            *out = jj_int(IS("index") ? pos : cnt);
            return true;
        }
    } else if (obj.t == JV_DICT) {
        if (IS("items")) return items_of(c, obj, out);
        if (IS("keys") || IS("values")) {
            jj_list *l = jj_list_new(c, obj.u.d->n);
            if (!l) return false;
            for (size_t i = 0; i < obj.u.d->n; i++)
                if (!jj_list_push(c, l, IS("keys") ? obj.u.d->k[i] : obj.u.d->v[i])) return false;
            *out = jj_listv(l);
            return jj_step(c, l->n);
        }
        if (IS("get")) {
            const jj_val *k = ARG(0, NULL), *d = ARG(1, NULL);
            if (!k) return jj_fail(c, LW_ERR_INVALID_ARG, "get needs a key");
            jj_val *v = jj_dict_get(c, obj.u.d, *k);
            *out = v ? *v : d ? *d : jj_none();
            return true;
        }
    }
    *found = false;
    return true;
#undef IS
#undef ARG
}

/* ---------------------------------------------------------------------------------------------------------
 * Global functions
 * ------------------------------------------------------------------------------------------------------- */

/* Days since 1970-01-01 → civil date (Howard Hinnant's algorithm). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Civil date → days since 1970-01-01 (inverse of the above). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* strftime for the conversions templates use, in UTC, C locale. */
static bool strftime_utc(jj_ctx *c, jj_str fmt, int64_t t, jj_val *out) {
    static const char *const mon[] = {"January", "February", "March",     "April",   "May",      "June",
                                      "July",    "August",   "September", "October", "November", "December"};
    static const char *const wday[] = {"Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"};
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400), secs = t - days * 86400, y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int wd = (int)(((days % 7) + 7) % 7); /* 0 = Thursday */
    jj_buf b = {0};
    char tmp[64];
    for (size_t i = 0; i < fmt.n; i++) {
        if (fmt.p[i] != '%' || i + 1 >= fmt.n) {
            if (!jj_buf_add(c, &b, fmt.p + i, 1)) return false;
            continue;
        }
        char k = fmt.p[++i];
        tmp[0] = 0;
        switch (k) {
        case 'd': snprintf(tmp, sizeof tmp, "%02d", d); break;
        case 'e': snprintf(tmp, sizeof tmp, "%2d", d); break;
        case 'm': snprintf(tmp, sizeof tmp, "%02d", m); break;
        case 'Y': snprintf(tmp, sizeof tmp, "%lld", (long long)y); break;
        case 'y': snprintf(tmp, sizeof tmp, "%02d", (int)(((y % 100) + 100) % 100)); break;
        case 'b': snprintf(tmp, sizeof tmp, "%.3s", mon[m - 1]); break;
        case 'B': snprintf(tmp, sizeof tmp, "%s", mon[m - 1]); break;
        case 'a': snprintf(tmp, sizeof tmp, "%.3s", wday[wd]); break;
        case 'A': snprintf(tmp, sizeof tmp, "%s", wday[wd]); break;
        case 'H': snprintf(tmp, sizeof tmp, "%02d", (int)(secs / 3600)); break;
        case 'I': snprintf(tmp, sizeof tmp, "%02d", (int)((secs / 3600 + 11) % 12 + 1)); break;
        case 'p': snprintf(tmp, sizeof tmp, "%s", secs < 43200 ? "AM" : "PM"); break;
        case 'M': snprintf(tmp, sizeof tmp, "%02d", (int)(secs / 60 % 60)); break;
        case 'S': snprintf(tmp, sizeof tmp, "%02d", (int)(secs % 60)); break;
        case 'j': snprintf(tmp, sizeof tmp, "%03d", (int)(days - days_from_civil(y, 1, 1) + 1)); break;
        case '%': snprintf(tmp, sizeof tmp, "%%"); break;
        default: snprintf(tmp, sizeof tmp, "%%%c", k);
        }
        if (!jj_buf_add(c, &b, tmp, strlen(tmp))) return false;
    }
    return ret_buf(&b, out);
}

bool jj_call_func(jj_ctx *c, int fn, const jj_val *args, size_t nargs, const jj_str *kwn, const jj_val *kwv,
                  size_t nkw, jj_val *out) {
    switch (fn) {
    case JF_RANGE: {
        int64_t start = 0, stop, step = 1;
        for (size_t i = 0; i < nargs; i++)
            if (args[i].t != JV_INT) return jj_fail(c, LW_ERR_INVALID_ARG, "range() needs integers");
        if (nargs == 1) stop = args[0].u.i;
        else if (nargs == 2 || nargs == 3) {
            start = args[0].u.i;
            stop = args[1].u.i;
            if (nargs == 3) step = args[2].u.i;
        } else return jj_fail(c, LW_ERR_INVALID_ARG, "range() takes 1 to 3 arguments");
        if (step == 0) return jj_fail(c, LW_ERR_INVALID_ARG, "range() step must not be zero");
        jj_list *l = jj_list_new(c, 0);
        if (!l) return false;
        for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
            if (!jj_list_push(c, l, jj_int(i)) || !jj_step(c, 1)) return false;
            if (__builtin_add_overflow(i, step, &i)) break;
        }
        *out = jj_listv(l);
        return true;
    }
    case JF_NAMESPACE:
    case JF_DICT: {
        jj_dict *d = jj_dict_new(c, nkw);
        if (!d) return false;
        d->is_ns = fn == JF_NAMESPACE;
        for (size_t i = 0; i < nargs; i++) { /* namespace({'a': 1}) / dict({'a': 1}) copy a mapping */
            if (args[i].t != JV_DICT) return jj_fail(c, LW_ERR_INVALID_ARG, "positional argument must be a mapping");
            for (size_t k = 0; k < args[i].u.d->n; k++)
                if (!jj_dict_set(c, d, args[i].u.d->k[k], args[i].u.d->v[k])) return false;
        }
        for (size_t i = 0; i < nkw; i++)
            if (!jj_dict_set(c, d, jj_strv(kwn[i]), kwv[i])) return false;
        *out = jj_dictv(d);
        return true;
    }
    case JF_RAISE: {
        jj_str msg = jj_s("raise_exception() called", 24);
        if (nargs && !jj_to_str(c, args[0], &msg)) return false;
        jj_fail(c, LW_ERR_INVALID_ARG, "%.*s", (int)(msg.n > 1000 ? 1000 : msg.n), msg.p);
        c->raised = true;
        return false;
    }
    case JF_STRFTIME_NOW:
        if (nargs < 1 || args[0].t != JV_STR) return jj_fail(c, LW_ERR_INVALID_ARG, "strftime_now needs a format");
        return strftime_utc(c, args[0].u.s, c->now, out);
    default: return jj_fail(c, LW_ERR_INVALID_ARG, "unknown function");
    }
}
