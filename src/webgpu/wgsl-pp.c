/* WGSL template preprocessor (see wgsl-pp.h for the language). Single pass, line by line; state lives in
 * one pp_state, every allocation goes through the caller's allocator and every limit is checked. */
#include "webgpu/wgsl-pp.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------------- */

/* A growable byte buffer, always NUL-terminated once non-empty. */
typedef struct pp_buf {
    char *p;    /* bytes (NULL until the first append) */
    size_t len; /* bytes used, without the NUL         */
    size_t cap; /* bytes allocated                     */
} pp_buf;

/* An object-like macro. */
typedef struct pp_macro {
    char *name;      /* identifier (owned)        */
    size_t name_len; /* strlen(name)              */
    char *value;     /* replacement text (owned)  */
} pp_macro;

/* One open conditional (#if ... #endif) of the current file. */
typedef struct pp_cond {
    bool active;        /* lines of the current branch are emitted                  */
    bool taken;         /* some branch was (or, when the parent is inactive, counts as) taken */
    bool seen_else;     /* #else already seen (a later #elif/#else is an error)    */
    bool parent_active; /* the enclosing region is active                          */
    uint32_t line;      /* line of the opening #if, for "unterminated" messages     */
} pp_cond;

typedef struct pp_state {
    lw_allocator a;                /* the caller's allocator                                    */
    const lw__wgsl_pp_params *prm; /* files, defines and limits                                 */
    size_t max_output;             /* resolved output limit                                     */
    uint32_t max_depth;            /* resolved include depth limit                              */
    pp_macro *macros;              /* defined macros                                            */
    size_t n_macros;               /* entries used                                              */
    size_t cap_macros;             /* entries allocated                                         */
    const char **once;             /* names of files that said `#pragma once` and were included */
    size_t n_once;                 /* entries used                                              */
    size_t cap_once;               /* entries allocated                                         */
    pp_buf out;                    /* the expanded text                                         */
    uint64_t lines;                /* lines processed so far (limit LW_WGSL_PP_MAX_LINES)       */
    const char *file;              /* file being read, for messages                             */
    uint32_t lineno;               /* its current line (1-based), for messages                  */
    char *err;                     /* caller's message buffer                                   */
} pp_state;

/* ---------------------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------------------- */

static bool is_id0(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_id(char c) {
    return is_id0(c) || (c >= '0' && c <= '9');
}
static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
static const char *skip_ws(const char *p) {
    while (is_space(*p)) p++;
    return p;
}

/* Error with the current location prefixed. */
#define PP_ERR(s, st, fmt, ...) lw__errorf((s)->err, (st), "%s:%u: " fmt, (s)->file, (s)->lineno, __VA_ARGS__)

/* Appends n bytes to b; limit is the most bytes b may hold (the output limit, or the same for scratch). */
static lw_status buf_add(pp_state *s, pp_buf *b, const char *p, size_t n, size_t limit) {
    size_t need;
    if (!lw__add_size(b->len, n, &need) || need > limit)
        return PP_ERR(s, LW_ERR_TOO_LARGE, "expanded text exceeds %zu bytes", limit);
    if (need + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need + 1) {
            if (cap > SIZE_MAX / 2) return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory");
            cap *= 2;
        }
        char *np = lw__realloc(&s->a, b->p, cap);
        if (!np) return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory (%zu bytes)", cap);
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len = need;
    b->p[b->len] = '\0';
    return LW_OK;
}

static void buf_free(pp_state *s, pp_buf *b) {
    lw__free(&s->a, b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * Macros
 * ------------------------------------------------------------------------------------------------------- */

static pp_macro *macro_find(pp_state *s, const char *name, size_t n) {
    for (size_t i = 0; i < s->n_macros; i++)
        if (s->macros[i].name_len == n && memcmp(s->macros[i].name, name, n) == 0) return &s->macros[i];
    return NULL;
}

/* Trims surrounding white space of [p, p+n) into *start and *len. */
static void trim(const char *p, size_t n, const char **start, size_t *len) {
    while (n && is_space(*p)) p++, n--;
    while (n && is_space(p[n - 1])) n--;
    *start = p;
    *len = n;
}

/* Defines name (n bytes) as value (vn bytes). Same value again is fine; a different one is an error. */
static lw_status macro_define(pp_state *s, const char *name, size_t n, const char *value, size_t vn) {
    trim(value, vn, &value, &vn);
    pp_macro *m = macro_find(s, name, n);
    if (m) {
        if (strlen(m->value) == vn && memcmp(m->value, value, vn) == 0) return LW_OK;
        return PP_ERR(s, LW_ERR_INVALID_ARG, "'%.*s' redefined as '%.*s' (was '%s'; #undef it first)", (int)n,
                      name, (int)(vn > 60 ? 60 : vn), value, m->value);
    }
    if (s->n_macros == s->cap_macros) {
        size_t cap = s->cap_macros ? s->cap_macros * 2 : 32, bytes;
        if (!lw__mul_size(cap, sizeof(pp_macro), &bytes))
            return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory");
        pp_macro *nm = lw__realloc(&s->a, s->macros, bytes);
        if (!nm) return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory");
        s->macros = nm;
        s->cap_macros = cap;
    }
    char *nn = lw__malloc(&s->a, n + 1), *nv = lw__malloc(&s->a, vn + 1);
    if (!nn || !nv) {
        lw__free(&s->a, nn);
        lw__free(&s->a, nv);
        return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory");
    }
    memcpy(nn, name, n);
    nn[n] = '\0';
    if (vn) memcpy(nv, value, vn);
    nv[vn] = '\0';
    s->macros[s->n_macros++] = (pp_macro){nn, n, nv};
    return LW_OK;
}

static void macro_undef(pp_state *s, const char *name, size_t n) {
    pp_macro *m = macro_find(s, name, n);
    if (!m) return;
    lw__free(&s->a, m->name);
    lw__free(&s->a, m->value);
    *m = s->macros[--s->n_macros]; /* order does not matter */
}

/* Length of a pp-number at p (digits, letters, '.', and a sign after an exponent letter), so suffixes like
 * the `u` of `1u` or the `e` of `1e5` are never taken for identifiers. */
static size_t number_len(const char *p, const char *end) {
    const char *q = p;
    while (q < end) {
        if (is_id(*q) || *q == '.') {
            char c = *q++;
            if ((c == 'e' || c == 'E' || c == 'p' || c == 'P') && q < end && (*q == '+' || *q == '-')) q++;
        } else {
            break;
        }
    }
    return (size_t)(q - p);
}

/* Appends [p, p+n) to dst with macros replaced. stack holds the macros being expanded (never re-expanded
 * inside themselves, as in C). Text after `//` is copied as is. */
static lw_status expand(pp_state *s, const char *p, size_t n, pp_buf *dst, const pp_macro **stack,
                        uint32_t depth) {
    const char *end = p + n, *run = p;
    lw_status st;
    while (p < end) {
        if (p[0] == '/' && p + 1 < end && p[1] == '/') break;
        if (is_digit(*p) || (*p == '.' && p + 1 < end && is_digit(p[1]))) {
            p += number_len(p, end);
            continue;
        }
        if (!is_id0(*p)) {
            p++;
            continue;
        }
        const char *id = p;
        while (p < end && is_id(*p)) p++;
        pp_macro *m = macro_find(s, id, (size_t)(p - id));
        if (!m) continue;
        bool active = false;
        for (uint32_t i = 0; i < depth; i++) active |= stack[i] == m;
        if (active) continue;
        if (depth >= LW_WGSL_PP_MAX_EXPAND)
            return PP_ERR(s, LW_ERR_TOO_LARGE, "macro expansion deeper than %u at '%s'",
                          LW_WGSL_PP_MAX_EXPAND, m->name);
        if ((st = buf_add(s, dst, run, (size_t)(id - run), s->max_output)) != LW_OK) return st;
        stack[depth] = m;
        /* m stays valid: nothing defines or undefines macros during an expansion */
        if ((st = expand(s, m->value, strlen(m->value), dst, stack, depth + 1)) != LW_OK) return st;
        run = p;
    }
    return buf_add(s, dst, run, (size_t)(end - run), s->max_output);
}

/* ---------------------------------------------------------------------------------------------------------
 * #if expressions: precedence climbing over 64-bit integers (wrapping, never undefined behaviour)
 * ------------------------------------------------------------------------------------------------------- */

typedef struct pp_expr {
    pp_state *s;    /* for errors                        */
    const char *p;  /* cursor in the macro-expanded text */
    lw_status st;   /* first error                       */
    uint32_t depth; /* nesting of unary operators, parentheses and ?: (bounded: no stack overflow) */
} pp_expr;

#define PP_MAX_EXPR_DEPTH 256u

enum {
    OP_NONE,
    OP_OROR,
    OP_ANDAND,
    OP_OR,
    OP_XOR,
    OP_AND,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_SHL,
    OP_SHR,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_MOD
};

/* Binding strength of each binary operator (C's order). */
static const int op_prec[] = {0, 1, 2, 3, 4, 5, 6, 6, 7, 7, 7, 7, 8, 8, 9, 9, 10, 10, 10};

static lw_status expr_fail(pp_expr *e, lw_status st) {
    if (e->st == LW_OK) e->st = st;
    return e->st;
}

/* Reads the binary operator at the cursor (not consuming it); *len gets its length. */
static int peek_binop(pp_expr *e, size_t *len) {
    const char *p = e->p = skip_ws(e->p);
    *len = 2;
    switch (p[0]) {
    case '|':
        if (p[1] == '|') return OP_OROR;
        *len = 1;
        return OP_OR;
    case '&':
        if (p[1] == '&') return OP_ANDAND;
        *len = 1;
        return OP_AND;
    case '^':
        *len = 1;
        return OP_XOR;
    case '=':
        if (p[1] == '=') return OP_EQ;
        return OP_NONE;
    case '!':
        if (p[1] == '=') return OP_NE;
        return OP_NONE;
    case '<':
        if (p[1] == '<') return OP_SHL;
        if (p[1] == '=') return OP_LE;
        *len = 1;
        return OP_LT;
    case '>':
        if (p[1] == '>') return OP_SHR;
        if (p[1] == '=') return OP_GE;
        *len = 1;
        return OP_GT;
    case '+':
        *len = 1;
        return OP_ADD;
    case '-':
        *len = 1;
        return OP_SUB;
    case '*':
        *len = 1;
        return OP_MUL;
    case '/':
        *len = 1;
        return OP_DIV;
    case '%':
        *len = 1;
        return OP_MOD;
    default:
        return OP_NONE;
    }
}

static int64_t expr_ternary(pp_expr *e, bool eval);

static int64_t expr_unary_inner(pp_expr *e, bool eval);

static int64_t expr_unary(pp_expr *e, bool eval) {
    if (e->st != LW_OK) return 0;
    if (++e->depth > PP_MAX_EXPR_DEPTH) {
        PP_ERR(e->s, LW_ERR_TOO_LARGE, "#if: expression nested deeper than %u", PP_MAX_EXPR_DEPTH);
        expr_fail(e, LW_ERR_TOO_LARGE);
        return 0;
    }
    int64_t v = expr_unary_inner(e, eval);
    e->depth--;
    return v;
}

static int64_t expr_unary_inner(pp_expr *e, bool eval) {
    const char *p = e->p = skip_ws(e->p);
    if (*p == '!' || *p == '~' || *p == '-' || *p == '+') {
        e->p++;
        uint64_t v = (uint64_t)expr_unary(e, eval);
        return *p == '!'   ? (int64_t)(v == 0)
               : *p == '~' ? (int64_t)~v
               : *p == '-' ? (int64_t)(0 - v)
                           : (int64_t)v;
    }
    if (*p == '(') {
        e->p++;
        int64_t v = expr_ternary(e, eval);
        e->p = skip_ws(e->p);
        if (e->st != LW_OK) return 0;
        if (*e->p != ')') {
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: expected ')' at '%.20s'", e->p);
            expr_fail(e, LW_ERR_INVALID_ARG);
            return 0;
        }
        e->p++;
        return v;
    }
    if (is_digit(*p)) {
        uint64_t v = 0;
        const char *q = p;
        int base = 10;
        if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) base = 16, q += 2;
        const char *digits = q;
        for (;; q++) {
            int d = is_digit(*q)               ? *q - '0'
                    : (*q >= 'a' && *q <= 'f') ? *q - 'a' + 10
                    : (*q >= 'A' && *q <= 'F') ? *q - 'A' + 10
                                               : 99;
            if (d >= base) break;
            if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) {
                PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: integer literal too large at '%.20s'", p);
                expr_fail(e, LW_ERR_INVALID_ARG);
                return 0;
            }
            v = v * (uint64_t)base + (uint64_t)d;
        }
        if (q == digits) {
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: bad number '%.20s'", p);
            expr_fail(e, LW_ERR_INVALID_ARG);
            return 0;
        }
        if (*q == 'u' || *q == 'i' || *q == 'U' || *q == 'L' || *q == 'l') q++; /* WGSL / C suffixes */
        if (is_id(*q) || *q == '.') {
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: '%.20s' is not an integer", p);
            expr_fail(e, LW_ERR_INVALID_ARG);
            return 0;
        }
        if (v > INT64_MAX) {
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: integer literal too large at '%.20s'", p);
            expr_fail(e, LW_ERR_INVALID_ARG);
            return 0;
        }
        e->p = q;
        return (int64_t)v;
    }
    if (is_id0(*p)) {
        const char *q = p;
        while (is_id(*q)) q++;
        e->p = q;
        if (eval) {
            /* a macro would have been expanded already: this name is undefined (or expands to itself) */
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: '%.*s' is not defined (use defined(%.*s) to test for it)",
                   (int)(q - p), p, (int)(q - p), p);
            expr_fail(e, LW_ERR_INVALID_ARG);
        }
        return 0;
    }
    if (*p == '\0')
        PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: expression ends where a value is expected%s", "");
    else
        PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: unexpected '%.20s'", p);
    expr_fail(e, LW_ERR_INVALID_ARG);
    return 0;
}

static int64_t apply_binop(pp_expr *e, int op, int64_t a, int64_t b, bool eval) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case OP_OROR:
        return a || b;
    case OP_ANDAND:
        return a && b;
    case OP_OR:
        return (int64_t)(ua | ub);
    case OP_XOR:
        return (int64_t)(ua ^ ub);
    case OP_AND:
        return (int64_t)(ua & ub);
    case OP_EQ:
        return a == b;
    case OP_NE:
        return a != b;
    case OP_LT:
        return a < b;
    case OP_LE:
        return a <= b;
    case OP_GT:
        return a > b;
    case OP_GE:
        return a >= b;
    case OP_ADD:
        return (int64_t)(ua + ub);
    case OP_SUB:
        return (int64_t)(ua - ub);
    case OP_MUL:
        return (int64_t)(ua * ub);
    case OP_SHL:
    case OP_SHR:
        if (b < 0 || b > 63) {
            if (!eval) return 0;
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: shift by %lld is out of range 0..63", (long long)b);
            expr_fail(e, LW_ERR_INVALID_ARG);
            return 0;
        }
        if (op == OP_SHL) return (int64_t)(ua << b);
        return a >= 0 ? (int64_t)(ua >> b) : (int64_t) ~(~ua >> b); /* arithmetic shift, spelled out */
    case OP_DIV:
    case OP_MOD:
        if (b == 0) {
            if (!eval) return 0;
            PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: %s by zero", op == OP_DIV ? "division" : "remainder");
            expr_fail(e, LW_ERR_INVALID_ARG);
            return 0;
        }
        if (a == INT64_MIN && b == -1) return op == OP_DIV ? INT64_MIN : 0; /* wraps, as the other ops */
        return op == OP_DIV ? a / b : a % b;
    default:
        return 0;
    }
}

static int64_t expr_binary(pp_expr *e, int min_prec, bool eval) {
    int64_t lhs = expr_unary(e, eval);
    while (e->st == LW_OK) {
        size_t len;
        int op = peek_binop(e, &len);
        if (op == OP_NONE || op_prec[op] < min_prec) break;
        e->p += len;
        /* && and || do not evaluate their right operand when the left decides */
        bool rhs_eval = eval && !(op == OP_ANDAND && lhs == 0) && !(op == OP_OROR && lhs != 0);
        int64_t rhs = expr_binary(e, op_prec[op] + 1, rhs_eval);
        lhs = apply_binop(e, op, lhs, rhs, rhs_eval);
    }
    return lhs;
}

static int64_t expr_ternary_inner(pp_expr *e, bool eval);

/* Every recursion passes through expr_unary or expr_ternary, so bounding both bounds the C stack. */
static int64_t expr_ternary(pp_expr *e, bool eval) {
    if (e->st != LW_OK) return 0;
    if (++e->depth > PP_MAX_EXPR_DEPTH) {
        PP_ERR(e->s, LW_ERR_TOO_LARGE, "#if: expression nested deeper than %u", PP_MAX_EXPR_DEPTH);
        expr_fail(e, LW_ERR_TOO_LARGE);
        return 0;
    }
    int64_t v = expr_ternary_inner(e, eval);
    e->depth--;
    return v;
}

static int64_t expr_ternary_inner(pp_expr *e, bool eval) {
    int64_t c = expr_binary(e, 1, eval);
    e->p = skip_ws(e->p);
    if (e->st != LW_OK || *e->p != '?') return c;
    e->p++;
    int64_t a = expr_ternary(e, eval && c != 0);
    e->p = skip_ws(e->p);
    if (e->st != LW_OK) return 0;
    if (*e->p != ':') {
        PP_ERR(e->s, LW_ERR_INVALID_ARG, "#if: expected ':' at '%.20s'", e->p);
        expr_fail(e, LW_ERR_INVALID_ARG);
        return 0;
    }
    e->p++;
    int64_t b = expr_ternary(e, eval && c == 0);
    return c ? a : b;
}

/* Replaces `defined NAME` and `defined(NAME)` in [p, p+n) by 1 or 0 (before macro expansion, as C does). */
static lw_status replace_defined(pp_state *s, const char *p, size_t n, pp_buf *dst) {
    const char *end = p + n, *run = p;
    lw_status st;
    while (p < end) {
        if (is_digit(*p)) {
            p += number_len(p, end);
            continue;
        }
        if (!is_id0(*p)) {
            p++;
            continue;
        }
        const char *id = p;
        while (p < end && is_id(*p)) p++;
        if ((size_t)(p - id) != 7 || memcmp(id, "defined", 7) != 0) continue;
        const char *q = skip_ws(p);
        bool paren = q < end && *q == '(';
        if (paren) q = skip_ws(q + 1);
        const char *name = q;
        while (q < end && is_id(*q)) q++;
        if (q == name || !is_id0(*name))
            return PP_ERR(s, LW_ERR_INVALID_ARG, "#if: 'defined' needs a macro name%s", "");
        size_t name_len = (size_t)(q - name);
        if (paren) {
            q = skip_ws(q);
            if (q >= end || *q != ')')
                return PP_ERR(s, LW_ERR_INVALID_ARG, "#if: missing ')' after defined(%.*s", (int)name_len,
                              name);
            q++;
        }
        if ((st = buf_add(s, dst, run, (size_t)(id - run), s->max_output)) != LW_OK) return st;
        if ((st = buf_add(s, dst, macro_find(s, name, name_len) ? " 1 " : " 0 ", 3, s->max_output)) != LW_OK)
            return st;
        p = run = q;
    }
    return buf_add(s, dst, run, (size_t)(end - run), s->max_output);
}

/* Evaluates the #if / #elif expression text into *value. */
static lw_status eval_condition(pp_state *s, const char *text, int64_t *value) {
    pp_buf a = {0}, b = {0};
    const pp_macro *stack[LW_WGSL_PP_MAX_EXPAND];
    lw_status st = replace_defined(s, text, strlen(text), &a);
    if (st == LW_OK) st = expand(s, a.p ? a.p : "", a.len, &b, stack, 0);
    if (st == LW_OK) {
        pp_expr e = {s, b.p ? b.p : "", LW_OK, 0};
        if (*skip_ws(e.p) == '\0') {
            st = PP_ERR(s, LW_ERR_INVALID_ARG, "#if with no expression%s", "");
        } else {
            *value = expr_ternary(&e, true);
            st = e.st;
            if (st == LW_OK && *skip_ws(e.p) != '\0')
                st = PP_ERR(s, LW_ERR_INVALID_ARG, "#if: unexpected '%.20s' after the expression",
                            skip_ws(e.p));
        }
    }
    buf_free(s, &a);
    buf_free(s, &b);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Lines and directives
 * ------------------------------------------------------------------------------------------------------- */

/* Removes `// ...` and `/ * ... * /` comments from a directive line, in place (a block comment becomes a
 * space; one left open runs to the end of the line). */
static void strip_comments(char *p) {
    char *w = p;
    while (*p) {
        if (p[0] == '/' && p[1] == '/') break;
        if (p[0] == '/' && p[1] == '*') {
            char *c = strstr(p + 2, "*/");
            p = c ? c + 2 : p + strlen(p);
            *w++ = ' ';
            continue;
        }
        *w++ = *p++;
    }
    *w = '\0';
}

/* Reads an identifier at *pp into (*name, *len); false when there is none. */
static bool read_ident(const char **pp, const char **name, size_t *len) {
    const char *p = skip_ws(*pp);
    if (!is_id0(*p)) return false;
    const char *q = p;
    while (is_id(*q)) q++;
    *name = p;
    *len = (size_t)(q - p);
    *pp = q;
    return true;
}

static const lw__wgsl_file *file_find(pp_state *s, const char *name, size_t n) {
    for (size_t i = 0; i < s->prm->n_files; i++) {
        const char *fn = s->prm->files[i].name;
        if (fn && strlen(fn) == n && memcmp(fn, name, n) == 0 && s->prm->files[i].text)
            return &s->prm->files[i];
    }
    return NULL;
}

static bool once_seen(pp_state *s, const char *name) {
    for (size_t i = 0; i < s->n_once; i++)
        if (strcmp(s->once[i], name) == 0) return true;
    return false;
}

static lw_status pp_file(pp_state *s, const lw__wgsl_file *f, uint32_t depth);

/* Handles #include "name" (rest = text after the directive name). */
static lw_status do_include(pp_state *s, const char *rest, uint32_t depth) {
    const char *p = skip_ws(rest), *q;
    if (*p != '"' || !(q = strchr(p + 1, '"')))
        return PP_ERR(s, LW_ERR_INVALID_ARG, "#include expects \"name\"%s", "");
    if (*skip_ws(q + 1))
        return PP_ERR(s, LW_ERR_INVALID_ARG, "junk after #include \"%.*s\"", (int)(q - p - 1), p + 1);
    const lw__wgsl_file *f = file_find(s, p + 1, (size_t)(q - p - 1));
    if (!f) return PP_ERR(s, LW_ERR_NOT_FOUND, "#include \"%.*s\": no such shader", (int)(q - p - 1), p + 1);
    if (once_seen(s, f->name)) return LW_OK;
    if (depth + 1 > s->max_depth)
        return PP_ERR(s, LW_ERR_TOO_LARGE, "#include \"%s\": nesting deeper than %u (circular include?)",
                      f->name, s->max_depth);
    const char *file = s->file;
    uint32_t line = s->lineno;
    lw_status st = pp_file(s, f, depth + 1);
    if (st == LW_OK) s->file = file, s->lineno = line;
    return st;
}

/* Handles one directive line (text after '#', comments stripped). conds/ncond: the file's conditionals. */
static lw_status do_directive(pp_state *s, char *text, pp_cond *conds, uint32_t *ncond, uint32_t depth) {
    const char *p = text, *dname;
    size_t dlen;
    if (!read_ident(&p, &dname, &dlen)) {
        if (*skip_ws(p) == '\0') return LW_OK; /* the null directive "#" */
        return PP_ERR(s, LW_ERR_INVALID_ARG, "bad directive '#%.20s'", skip_ws(p));
    }
    const char *args = p; /* text after the directive name */
#define IS(word) (dlen == sizeof(word) - 1 && memcmp(dname, word, dlen) == 0)
    bool active = *ncond == 0 || conds[*ncond - 1].active;
    lw_status st;
    int64_t v = 0;

    if (IS("if") || IS("ifdef") || IS("ifndef")) {
        if (*ncond >= LW_WGSL_PP_MAX_COND)
            return PP_ERR(s, LW_ERR_TOO_LARGE, "conditionals nested deeper than %u", LW_WGSL_PP_MAX_COND);
        pp_cond c = {false, true, false, active, s->lineno};
        if (active) {
            if (IS("if")) {
                if ((st = eval_condition(s, p, &v)) != LW_OK) return st;
            } else {
                const char *name;
                size_t n;
                if (!read_ident(&p, &name, &n))
                    return PP_ERR(s, LW_ERR_INVALID_ARG, "#%.*s needs a name", (int)dlen, dname);
                if (*skip_ws(p))
                    return PP_ERR(s, LW_ERR_INVALID_ARG, "junk after #%.*s %.*s", (int)dlen, dname, (int)n,
                                  name);
                v = (macro_find(s, name, n) != NULL) == IS("ifdef");
            }
            c.active = c.taken = v != 0;
        }
        conds[(*ncond)++] = c;
        return LW_OK;
    }
    if (IS("elif") || IS("else") || IS("endif")) {
        if (*ncond == 0) return PP_ERR(s, LW_ERR_INVALID_ARG, "#%.*s without #if", (int)dlen, dname);
        pp_cond *c = &conds[*ncond - 1];
        if (IS("endif")) {
            if (*skip_ws(p)) return PP_ERR(s, LW_ERR_INVALID_ARG, "junk after #endif: '%.20s'", skip_ws(p));
            (*ncond)--;
            return LW_OK;
        }
        if (c->seen_else)
            return PP_ERR(s, LW_ERR_INVALID_ARG, "#%.*s after #else (line %u)", (int)dlen, dname, c->line);
        if (IS("else")) {
            if (*skip_ws(p)) return PP_ERR(s, LW_ERR_INVALID_ARG, "junk after #else: '%.20s'", skip_ws(p));
            c->seen_else = true;
            c->active = c->parent_active && !c->taken;
            c->taken = true;
            return LW_OK;
        }
        /* #elif: evaluated only when no earlier branch was taken and the parent is active */
        if (!c->parent_active || c->taken) {
            c->active = false;
            return LW_OK;
        }
        if ((st = eval_condition(s, p, &v)) != LW_OK) return st;
        c->active = c->taken = v != 0;
        return LW_OK;
    }
    if (!active) return LW_OK; /* anything else in a false branch is skipped unparsed */

    if (IS("define")) {
        const char *name;
        size_t n;
        if (!read_ident(&p, &name, &n)) return PP_ERR(s, LW_ERR_INVALID_ARG, "#define needs a name%s", "");
        if (*p == '(')
            return PP_ERR(s, LW_ERR_INVALID_ARG, "#define %.*s(...): function-like macros are not supported",
                          (int)n, name);
        if (*p && !is_space(*p)) return PP_ERR(s, LW_ERR_INVALID_ARG, "#define %.*s: bad name", (int)n, name);
        if (n == 7 && memcmp(name, "defined", 7) == 0)
            return PP_ERR(s, LW_ERR_INVALID_ARG, "'defined' cannot be a macro name%s", "");
        return macro_define(s, name, n, p, strlen(p));
    }
    if (IS("undef")) {
        const char *name;
        size_t n;
        if (!read_ident(&p, &name, &n)) return PP_ERR(s, LW_ERR_INVALID_ARG, "#undef needs a name%s", "");
        if (*skip_ws(p)) return PP_ERR(s, LW_ERR_INVALID_ARG, "junk after #undef %.*s", (int)n, name);
        macro_undef(s, name, n);
        return LW_OK;
    }
    if (IS("include")) return do_include(s, p, depth);
    if (IS("error")) return PP_ERR(s, LW_ERR_UNSUPPORTED, "#error %s", skip_ws(p));
    if (IS("pragma")) {
        const char *name;
        size_t n;
        if (read_ident(&p, &name, &n) && n == 4 && memcmp(name, "once", 4) == 0 && !*skip_ws(p)) {
            if (once_seen(s, s->file)) return LW_OK;
            if (s->n_once == s->cap_once) {
                size_t cap = s->cap_once ? s->cap_once * 2 : 16, bytes;
                if (!lw__mul_size(cap, sizeof(char *), &bytes))
                    return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory");
                const char **no = lw__realloc(&s->a, (void *)s->once, bytes);
                if (!no) return lw__errorf(s->err, LW_ERR_NOMEM, "out of memory");
                s->once = no;
                s->cap_once = cap;
            }
            s->once[s->n_once++] = s->file;
            return LW_OK;
        }
        return PP_ERR(s, LW_ERR_INVALID_ARG, "unknown #pragma '%.20s' (only 'once')", skip_ws(args));
    }
    return PP_ERR(s, LW_ERR_INVALID_ARG, "unknown directive #%.*s", (int)dlen, dname);
#undef IS
}

/* Processes one file: directives, and active lines expanded into s->out. */
static lw_status pp_file(pp_state *s, const lw__wgsl_file *f, uint32_t depth) {
    pp_cond conds[LW_WGSL_PP_MAX_COND];
    uint32_t ncond = 0;
    pp_buf dir = {0};
    const pp_macro *stack[LW_WGSL_PP_MAX_EXPAND];
    lw_status st = LW_OK;
    const char *p = f->text;
    uint32_t line = 0;
    s->file = f->name;
    while (*p && st == LW_OK) {
        const char *eol = strchr(p, '\n'), *next;
        if (!eol) eol = p + strlen(p);
        next = *eol ? eol + 1 : eol;
        s->lineno = ++line;
        if (++s->lines > LW_WGSL_PP_MAX_LINES) {
            st = PP_ERR(s, LW_ERR_TOO_LARGE, "more than %u lines processed", LW_WGSL_PP_MAX_LINES);
            break;
        }
        const char *q = skip_ws(p);
        if (q < eol && *q == '#') {
            /* a directive, with backslash continuations joined */
            dir.len = 0;
            const char *seg = q + 1, *seg_end = eol;
            for (;;) {
                const char *e = seg_end;
                while (e > seg && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
                bool cont = e > seg && e[-1] == '\\' && *seg_end;
                if ((st = buf_add(s, &dir, seg, (size_t)(e - seg) - (cont ? 1 : 0), s->max_output)) != LW_OK)
                    break;
                if (!cont) break; /* backslash-newline joins the lines, as in C */
                seg = next;
                seg_end = strchr(seg, '\n');
                if (!seg_end) seg_end = seg + strlen(seg);
                next = *seg_end ? seg_end + 1 : seg_end;
                line++;
            }
            if (st != LW_OK) break;
            if ((st = buf_add(s, &dir, "", 0, s->max_output)) != LW_OK)
                break; /* ensure a NUL for empty lines */
            strip_comments(dir.p);
            st = do_directive(s, dir.p, conds, &ncond, depth);
            if (st == LW_OK) s->file = f->name; /* an include changed it; keep messages about this file */
            s->lineno = line;
        } else if (ncond == 0 || conds[ncond - 1].active) {
            const char *e = eol;
            if (e > p && e[-1] == '\r') e--;
            if ((st = expand(s, p, (size_t)(e - p), &s->out, stack, 0)) == LW_OK)
                st = buf_add(s, &s->out, "\n", 1, s->max_output);
        }
        p = next;
    }
    if (st == LW_OK && ncond > 0)
        st = lw__errorf(s->err, LW_ERR_INVALID_ARG,
                        "%s:%u: unterminated #%s (no #endif before the end of the file)", f->name,
                        conds[ncond - 1].line, "if");
    buf_free(s, &dir);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__wgsl_pp(const lw_allocator *alloc, const char *entry, const lw__wgsl_pp_params *params,
                      char **out, size_t *out_len, char *err) {
    char local_err[LW_ERRMSG_SIZE];
    char *ebuf = err ? err : local_err;
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!entry || !params || !out || (params->n_files && !params->files) ||
        (params->n_defines && !params->defines))
        return lw__errorf(ebuf, LW_ERR_INVALID_ARG, "wgsl-pp: NULL argument");
    ebuf[0] = '\0';
    pp_state s = {0};
    s.a = lw__allocator_or_default(alloc);
    s.prm = params;
    s.max_output = params->max_output ? params->max_output : LW_WGSL_PP_DEFAULT_MAX_OUTPUT;
    s.max_depth = params->max_depth ? params->max_depth : LW_WGSL_PP_DEFAULT_MAX_DEPTH;
    s.err = ebuf;
    s.file = "<defines>";
    lw_status st = LW_OK;
    for (size_t i = 0; i < params->n_defines && st == LW_OK; i++) {
        const char *name = params->defines[i].name,
                   *value = params->defines[i].value ? params->defines[i].value : "";
        size_t n = name ? strlen(name) : 0;
        s.lineno = (uint32_t)(i + 1);
        bool ok = n > 0 && is_id0(name[0]) && !(n == 7 && memcmp(name, "defined", 7) == 0);
        for (size_t k = 0; ok && k < n; k++) ok = is_id(name[k]);
        if (!ok)
            st = lw__errorf(ebuf, LW_ERR_INVALID_ARG, "define %zu: '%s' is not a valid macro name", i,
                            name ? name : "(null)");
        else if (strpbrk(value, "\r\n"))
            st = lw__errorf(ebuf, LW_ERR_INVALID_ARG, "define %s: the value must be one line", name);
        else
            st = macro_define(&s, name, n, value, strlen(value));
    }
    if (st == LW_OK) {
        const lw__wgsl_file *f = file_find(&s, entry, strlen(entry));
        if (!f)
            st = lw__errorf(ebuf, LW_ERR_NOT_FOUND, "shader '%s' not found", entry);
        else
            st = pp_file(&s, f, 0);
    }
    if (st == LW_OK && !s.out.p) st = buf_add(&s, &s.out, "", 0, s.max_output); /* empty output is a string */
    for (size_t i = 0; i < s.n_macros; i++) {
        lw__free(&s.a, s.macros[i].name);
        lw__free(&s.a, s.macros[i].value);
    }
    lw__free(&s.a, s.macros);
    lw__free(&s.a, (void *)s.once);
    if (st != LW_OK) {
        buf_free(&s, &s.out);
        return st;
    }
    *out = s.out.p;
    if (out_len) *out_len = s.out.len;
    return LW_OK;
}
