/* Chat templates: recursive-descent parser from tokens to an AST, with Jinja2's operator precedence:
 *   cond (x if c else y) < or < and < not < comparisons / in / not in < + - < ~ < * / // % < ** < unary - +
 *   < postfix (.attr [index] [a:b:c] (call)) < filters (| f) and tests (is t), which bind to the operand.
 * Statements: if/elif/else, for/else (with a filter `if`), set (incl. attribute and block forms), macro,
 * break/continue, do, filter blocks, generation blocks. Unknown filters and tests are errors when they run
 * (not at parse time), so a template whose tool-call branch uses an exotic filter still renders chats. */
#include "chat/jinja.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct parser {
    jj_arena *a;         /* node arena                  */
    const jj_tok *t;     /* tokens                      */
    size_t n;            /* token count (last is EOF)   */
    size_t i;            /* current token               */
    int depth;           /* recursion depth             */
    char *err;           /* message buffer              */
    lw_status st;        /* first error                 */
} parser;

/* A growable array of node pointers while parsing a list. */
typedef struct nvec {
    jj_node **v;
    uint32_t n, cap;
} nvec;

static bool perr(parser *P, lw_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static bool perr(parser *P, lw_status s, const char *fmt, ...) {
    if (P->st != LW_OK) return false;
    char msg[LW_ERRMSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const jj_tok *t = &P->t[P->i < P->n ? P->i : P->n - 1];
    lw__errorf(P->err, s, "syntax error, line %u: %s", t->line, msg);
    P->st = s;
    return false;
}

static bool pnomem(parser *P) {
    return perr(P, P->a->hit_limit ? LW_ERR_TOO_LARGE : LW_ERR_NOMEM, "out of memory");
}

static const jj_tok *cur(parser *P) {
    return &P->t[P->i];
}
static void next(parser *P) {
    if (P->i + 1 < P->n) P->i++;
}
static bool is_op(parser *P, int op) {
    return cur(P)->kind == JT_OP && cur(P)->op == op;
}
static bool is_kw(parser *P, const char *kw) {
    return cur(P)->kind == JT_NAME && jj_str_eqz(cur(P)->s, kw);
}
static bool is_kw_at(parser *P, size_t k, const char *kw) {
    return P->i + k < P->n && P->t[P->i + k].kind == JT_NAME && jj_str_eqz(P->t[P->i + k].s, kw);
}
static bool accept_op(parser *P, int op) {
    if (!is_op(P, op)) return false;
    next(P);
    return true;
}
static bool accept_kw(parser *P, const char *kw) {
    if (!is_kw(P, kw)) return false;
    next(P);
    return true;
}
static bool expect_op(parser *P, int op) {
    if (accept_op(P, op)) return true;
    return perr(P, LW_ERR_INVALID_ARG, "expected '%c'", op < 128 ? op : '?');
}
static bool expect_close(parser *P) {
    if (cur(P)->kind == JT_STMT_CLOSE) {
        next(P);
        return true;
    }
    return perr(P, LW_ERR_INVALID_ARG, "expected '%%}'");
}
static bool enter(parser *P) {
    if (++P->depth > JJ_MAX_PARSE_DEPTH) return perr(P, LW_ERR_TOO_LARGE, "nesting deeper than %d", JJ_MAX_PARSE_DEPTH);
    return true;
}

static jj_node *node(parser *P, uint8_t kind) {
    jj_node *nd = jj_zalloc(P->a, sizeof *nd);
    if (!nd) {
        pnomem(P);
        return NULL;
    }
    nd->kind = kind;
    nd->line = cur(P)->line;
    return nd;
}

static bool nvec_push(parser *P, nvec *v, jj_node *nd) {
    if (v->n == v->cap) {
        uint32_t ncap = v->cap ? v->cap * 2 : 4;
        jj_node **p = jj_grow(P->a, v->v, v->cap * sizeof *p, (size_t)ncap * sizeof *p);
        if (!p) return pnomem(P);
        v->v = p;
        v->cap = ncap;
    }
    v->v[v->n++] = nd;
    return true;
}

static bool strvec_push(parser *P, jj_str **v, uint32_t *n, uint32_t *cap, jj_str s) {
    if (*n == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 4;
        jj_str *p = jj_grow(P->a, *v, *cap * sizeof *p, (size_t)ncap * sizeof *p);
        if (!p) return pnomem(P);
        *v = p;
        *cap = ncap;
    }
    (*v)[(*n)++] = s;
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * Expressions
 * ------------------------------------------------------------------------------------------------------- */

static jj_node *parse_expr(parser *P);
static jj_node *parse_or(parser *P);
static jj_node *parse_unary(parser *P, bool with_filter);

static jj_node *binary(parser *P, uint8_t kind, int op, jj_node *a, jj_node *b) {
    if (!a || !b) return NULL;
    jj_node *nd = node(P, kind);
    if (!nd) return NULL;
    nd->op = op;
    nd->a = a;
    nd->b = b;
    return nd;
}

/* (args, kw=args) after '(' has been seen (not consumed). */
static bool parse_call_args(parser *P, jj_node *nd) {
    nvec args = {0}, kwv = {0};
    uint32_t kwcap = 0;
    if (!expect_op(P, '(')) return false;
    while (!is_op(P, ')')) {
        if (cur(P)->kind == JT_NAME && P->i + 1 < P->n && P->t[P->i + 1].kind == JT_OP && P->t[P->i + 1].op == '=') {
            jj_str name = cur(P)->s;
            next(P);
            next(P);
            jj_node *v = parse_expr(P);
            if (!v || !strvec_push(P, &nd->kwn, &nd->nkw, &kwcap, name) || !nvec_push(P, &kwv, v)) return false;
        } else {
            if (kwv.n) return perr(P, LW_ERR_INVALID_ARG, "positional argument after keyword argument");
            jj_node *v = parse_expr(P);
            if (!v || !nvec_push(P, &args, v)) return false;
        }
        if (!accept_op(P, ',')) break;
    }
    if (!expect_op(P, ')')) return false;
    nd->args = args.v;
    nd->nargs = args.n;
    nd->kwv = kwv.v;
    return true;
}

static jj_node *parse_primary(parser *P) {
    const jj_tok *t = cur(P);
    jj_node *nd;
    switch (t->kind) {
    case JT_NAME:
        if (!(nd = node(P, JE_LIT))) return NULL;
        if (jj_str_eqz(t->s, "true") || jj_str_eqz(t->s, "True")) nd->lit = jj_bool(true);
        else if (jj_str_eqz(t->s, "false") || jj_str_eqz(t->s, "False")) nd->lit = jj_bool(false);
        else if (jj_str_eqz(t->s, "none") || jj_str_eqz(t->s, "None")) nd->lit = jj_none();
        else {
            nd->kind = JE_NAME;
            nd->name = t->s;
        }
        next(P);
        return nd;
    case JT_STRING: {
        if (!(nd = node(P, JE_LIT))) return NULL;
        jj_str s = t->s;
        next(P);
        while (cur(P)->kind == JT_STRING) { /* adjacent literals concatenate, as in Python */
            jj_str s2 = cur(P)->s;
            char *p = jj_alloc(P->a, s.n + s2.n + 1);
            if (!p) return pnomem(P), NULL;
            if (s.n) memcpy(p, s.p, s.n);
            if (s2.n) memcpy(p + s.n, s2.p, s2.n);
            s = jj_s(p, s.n + s2.n);
            next(P);
        }
        nd->lit = jj_strv(s);
        return nd;
    }
    case JT_INT:
        if (!(nd = node(P, JE_LIT))) return NULL;
        nd->lit = jj_int(t->i);
        next(P);
        return nd;
    case JT_FLOAT:
        if (!(nd = node(P, JE_LIT))) return NULL;
        nd->lit = jj_float(t->f);
        next(P);
        return nd;
    case JT_OP:
        if (t->op == '(') {
            next(P);
            if (accept_op(P, ')')) return node(P, JE_LIST); /* empty tuple */
            jj_node *e = parse_expr(P);
            if (!e) return NULL;
            if (is_op(P, ',')) { /* a tuple: evaluated as a list */
                nvec items = {0};
                if (!nvec_push(P, &items, e)) return NULL;
                while (accept_op(P, ',') && !is_op(P, ')')) {
                    jj_node *x = parse_expr(P);
                    if (!x || !nvec_push(P, &items, x)) return NULL;
                }
                if (!(e = node(P, JE_LIST))) return NULL;
                e->args = items.v;
                e->nargs = items.n;
            }
            if (!expect_op(P, ')')) return NULL;
            return e;
        }
        if (t->op == '[') {
            next(P);
            nvec items = {0};
            while (!is_op(P, ']')) {
                jj_node *x = parse_expr(P);
                if (!x || !nvec_push(P, &items, x)) return NULL;
                if (!accept_op(P, ',')) break;
            }
            if (!expect_op(P, ']') || !(nd = node(P, JE_LIST))) return NULL;
            nd->args = items.v;
            nd->nargs = items.n;
            return nd;
        }
        if (t->op == '{') {
            next(P);
            nvec keys = {0}, vals = {0};
            while (!is_op(P, '}')) {
                jj_node *k = parse_expr(P);
                if (!k || !expect_op(P, ':')) return NULL;
                jj_node *v = parse_expr(P);
                if (!v || !nvec_push(P, &keys, k) || !nvec_push(P, &vals, v)) return NULL;
                if (!accept_op(P, ',')) break;
            }
            if (!expect_op(P, '}') || !(nd = node(P, JE_DICT))) return NULL;
            nd->args = keys.v;
            nd->nargs = keys.n;
            nd->kwv = vals.v;
            nd->nkw = vals.n;
            return nd;
        }
        break;
    default:
        break;
    }
    perr(P, LW_ERR_INVALID_ARG, "unexpected %s", t->kind == JT_EOF ? "end of template"
                                                  : t->kind == JT_EXPR_CLOSE || t->kind == JT_STMT_CLOSE ? "end of tag"
                                                                                                         : "token");
    return NULL;
}

static jj_node *parse_postfix(parser *P, jj_node *e) {
    while (e) {
        if (accept_op(P, '.')) {
            jj_node *nd = node(P, JE_ATTR);
            if (!nd) return NULL;
            nd->a = e;
            if (cur(P)->kind == JT_NAME) {
                nd->name = cur(P)->s;
            } else if (cur(P)->kind == JT_INT) { /* a.0 is a[0] */
                nd->kind = JE_ITEM;
                if (!(nd->b = node(P, JE_LIT))) return NULL;
                nd->b->lit = jj_int(cur(P)->i);
            } else {
                return perr(P, LW_ERR_INVALID_ARG, "expected a name after '.'"), NULL;
            }
            next(P);
            e = nd;
        } else if (is_op(P, '[')) {
            next(P);
            jj_node *parts[3] = {NULL, NULL, NULL};
            bool slice = false;
            if (!is_op(P, ':') && !(parts[0] = parse_expr(P))) return NULL;
            if (accept_op(P, ':')) {
                slice = true;
                if (!is_op(P, ':') && !is_op(P, ']') && !(parts[1] = parse_expr(P))) return NULL;
                if (accept_op(P, ':') && !is_op(P, ']') && !(parts[2] = parse_expr(P))) return NULL;
            }
            if (!expect_op(P, ']')) return NULL;
            if (!slice && !parts[0]) return perr(P, LW_ERR_INVALID_ARG, "empty subscript"), NULL;
            jj_node *nd = node(P, slice ? JE_SLICE : JE_ITEM);
            if (!nd) return NULL;
            nd->a = e;
            nd->b = parts[0];
            nd->c = parts[1];
            nd->d = parts[2];
            e = nd;
        } else if (is_op(P, '(')) {
            jj_node *nd = node(P, JE_CALL);
            if (!nd) return NULL;
            nd->a = e;
            if (!parse_call_args(P, nd)) return NULL;
            e = nd;
        } else {
            break;
        }
    }
    return e;
}

static jj_node *parse_filter_expr(parser *P, jj_node *e) {
    while (e) {
        if (accept_op(P, '|')) {
            if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a filter name"), NULL;
            jj_node *nd = node(P, JE_FILTER);
            if (!nd) return NULL;
            nd->name = cur(P)->s;
            nd->op = jj_filter_id(nd->name); /* -1: unknown, an error only if it runs (as llama.cpp, hf.js) */
            next(P);
            nd->a = e;
            if (is_op(P, '(') && !parse_call_args(P, nd)) return NULL;
            e = nd;
        } else if (is_kw(P, "is")) {
            next(P);
            jj_node *nd = node(P, JE_TEST);
            if (!nd) return NULL;
            nd->flag = accept_kw(P, "not");
            if (cur(P)->kind != JT_NAME) {
                /* `is none`/`is true` arrive as names; anything else is an error */
                return perr(P, LW_ERR_INVALID_ARG, "expected a test name after 'is'"), NULL;
            }
            nd->name = cur(P)->s;
            nd->op = jj_test_id(nd->name); /* -1: unknown, an error only if it runs */
            next(P);
            nd->a = e;
            const jj_tok *t = cur(P);
            if (is_op(P, '(')) {
                if (!parse_call_args(P, nd)) return NULL;
            } else if ((t->kind == JT_NAME || t->kind == JT_STRING || t->kind == JT_INT || t->kind == JT_FLOAT ||
                        (t->kind == JT_OP && (t->op == '[' || t->op == '{'))) &&
                       !is_kw(P, "else") && !is_kw(P, "or") && !is_kw(P, "and") && !is_kw(P, "if") &&
                       !is_kw(P, "in") && !is_kw(P, "is") && !is_kw(P, "not")) {
                /* one argument without parentheses: `x is divisibleby 3`, `x is sameas none` */
                jj_node *arg = parse_postfix(P, parse_primary(P));
                if (!arg) return NULL;
                nd->args = jj_alloc(P->a, sizeof(jj_node *));
                if (!nd->args) return pnomem(P), NULL;
                nd->args[0] = arg;
                nd->nargs = 1;
            }
            e = nd;
        } else if (is_op(P, '(')) {
            jj_node *nd = node(P, JE_CALL);
            if (!nd) return NULL;
            nd->a = e;
            if (!parse_call_args(P, nd)) return NULL;
            e = nd;
        } else {
            break;
        }
    }
    return e;
}

static jj_node *parse_unary(parser *P, bool with_filter) {
    if (!enter(P)) return NULL;
    jj_node *e;
    if (is_op(P, '-') || is_op(P, '+')) {
        int op = cur(P)->op;
        next(P);
        jj_node *x = parse_unary(P, false);
        if (!x || !(e = node(P, JE_UNARY))) return NULL;
        e->op = op;
        e->a = x;
    } else {
        e = parse_primary(P);
    }
    e = parse_postfix(P, e);
    if (with_filter) e = parse_filter_expr(P, e);
    P->depth--;
    return e;
}

static jj_node *parse_pow(parser *P) {
    jj_node *e = parse_unary(P, true);
    while (e && accept_op(P, JO_POW)) e = binary(P, JE_BINARY, JO_POW, e, parse_unary(P, true));
    return e;
}

static jj_node *parse_math2(parser *P) {
    jj_node *e = parse_pow(P);
    while (e && (is_op(P, '*') || is_op(P, '/') || is_op(P, JO_FLOORDIV) || is_op(P, '%'))) {
        int op = cur(P)->op;
        next(P);
        e = binary(P, JE_BINARY, op, e, parse_pow(P));
    }
    return e;
}

static jj_node *parse_concat(parser *P) {
    jj_node *e = parse_math2(P);
    while (e && accept_op(P, '~')) e = binary(P, JE_BINARY, '~', e, parse_math2(P));
    return e;
}

static jj_node *parse_math1(parser *P) {
    jj_node *e = parse_concat(P);
    while (e && (is_op(P, '+') || is_op(P, '-'))) {
        int op = cur(P)->op;
        next(P);
        e = binary(P, JE_BINARY, op, e, parse_concat(P));
    }
    return e;
}

static jj_node *parse_compare(parser *P) {
    jj_node *e = parse_math1(P);
    while (e) {
        const jj_tok *t = cur(P);
        if (t->kind == JT_OP && (t->op == JO_EQ || t->op == JO_NE || t->op == '<' || t->op == '>' || t->op == JO_LE ||
                                 t->op == JO_GE)) {
            int op = t->op;
            next(P);
            e = binary(P, JE_BINARY, op, e, parse_math1(P));
        } else if (is_kw(P, "in")) {
            next(P);
            e = binary(P, JE_BINARY, 'i', e, parse_math1(P));
        } else if (is_kw(P, "not") && is_kw_at(P, 1, "in")) {
            next(P);
            next(P);
            e = binary(P, JE_BINARY, 'I', e, parse_math1(P));
        } else {
            break;
        }
    }
    return e;
}

static jj_node *parse_not(parser *P) {
    if (is_kw(P, "not")) {
        if (!enter(P)) return NULL;
        next(P);
        jj_node *x = parse_not(P), *e;
        if (!x || !(e = node(P, JE_UNARY))) return NULL;
        e->op = 'n';
        e->a = x;
        P->depth--;
        return e;
    }
    return parse_compare(P);
}

static jj_node *parse_and(parser *P) {
    jj_node *e = parse_not(P);
    while (e && accept_kw(P, "and")) e = binary(P, JE_AND, 0, e, parse_not(P));
    return e;
}

static jj_node *parse_or(parser *P) {
    jj_node *e = parse_and(P);
    while (e && accept_kw(P, "or")) e = binary(P, JE_OR, 0, e, parse_and(P));
    return e;
}

static jj_node *parse_expr(parser *P) {
    if (!enter(P)) return NULL;
    jj_node *e = parse_or(P);
    while (e && accept_kw(P, "if")) {
        jj_node *nd = node(P, JE_COND);
        if (!nd) return NULL;
        nd->b = e;
        if (!(nd->a = parse_or(P))) return NULL;
        if (accept_kw(P, "else") && !(nd->c = parse_expr(P))) return NULL;
        e = nd;
    }
    P->depth--;
    return e;
}

/* ---------------------------------------------------------------------------------------------------------
 * Statements
 * ------------------------------------------------------------------------------------------------------- */

static bool parse_body(parser *P, const char *const *ends, nvec *out, int *which);

/* Body up to one of `ends` (the end keyword is consumed; the tag's remaining tokens are not). */
static bool parse_block(parser *P, const char *const *ends, jj_node ***body, uint32_t *nbody, int *which,
                        const char *what, uint32_t line) {
    nvec v = {0};
    int w = -1;
    if (!parse_body(P, ends, &v, &w)) return false;
    if (w < 0) return perr(P, LW_ERR_INVALID_ARG, "unclosed '%s' block opened on line %u", what, line);
    *body = v.v;
    *nbody = v.n;
    *which = w;
    return true;
}

static jj_node *parse_if(parser *P, uint32_t line) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jj_node *nd = node(P, JN_IF);
    int which = -1;
    if (!nd || !enter(P) || !(nd->a = parse_expr(P)) || !expect_close(P)) return NULL;
    if (!parse_block(P, ends, &nd->body, &nd->nbody, &which, "if", line)) return NULL;
    if (which == 0) { /* elif: a nested if in the else branch */
        jj_node *sub = parse_if(P, line);
        if (!sub) return NULL;
        if (!(nd->ebody = jj_alloc(P->a, sizeof(jj_node *)))) return pnomem(P), NULL;
        nd->ebody[0] = sub;
        nd->nebody = 1;
    } else if (which == 1) {
        static const char *const ends2[] = {"endif", NULL};
        if (!expect_close(P) || !parse_block(P, ends2, &nd->ebody, &nd->nebody, &which, "if", line) ||
            !expect_close(P))
            return NULL;
    } else if (!expect_close(P)) {
        return NULL;
    }
    P->depth--;
    return nd;
}

static jj_node *parse_for(parser *P, uint32_t line) {
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const ends2[] = {"endfor", NULL};
    jj_node *nd = node(P, JN_FOR);
    uint32_t cap = 0;
    int which = -1;
    if (!nd) return NULL;
    bool paren = accept_op(P, '(');
    do {
        if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a loop variable"), NULL;
        if (!strvec_push(P, &nd->targets, &nd->ntargets, &cap, cur(P)->s)) return NULL;
        next(P);
    } while (accept_op(P, ','));
    if (paren && !expect_op(P, ')')) return NULL;
    if (!accept_kw(P, "in")) return perr(P, LW_ERR_INVALID_ARG, "expected 'in' in for loop"), NULL;
    if (!(nd->a = parse_or(P))) return NULL;
    if (accept_kw(P, "if") && !(nd->b = parse_expr(P))) return NULL;
    if (is_kw(P, "recursive")) return perr(P, LW_ERR_UNSUPPORTED, "recursive loops are not supported"), NULL;
    if (!expect_close(P) || !parse_block(P, ends, &nd->body, &nd->nbody, &which, "for", line)) return NULL;
    if (which == 0 &&
        (!expect_close(P) || !parse_block(P, ends2, &nd->ebody, &nd->nebody, &which, "for", line)))
        return NULL;
    if (!expect_close(P)) return NULL;
    return nd;
}

static jj_node *parse_set(parser *P, uint32_t line) {
    jj_node *nd = node(P, JN_SET), *target;
    if (!nd) return NULL;
    if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a name after 'set'"), NULL;
    if (!(target = node(P, JE_NAME))) return NULL;
    target->name = cur(P)->s;
    next(P);
    if (accept_op(P, '.')) { /* ns.attr = value */
        if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected an attribute name"), NULL;
        jj_node *attr = node(P, JE_ATTR);
        if (!attr) return NULL;
        attr->a = target;
        attr->name = cur(P)->s;
        next(P);
        target = attr;
    } else if (is_op(P, ',')) { /* a, b = ... */
        nvec names = {0};
        if (!nvec_push(P, &names, target)) return NULL;
        while (accept_op(P, ',')) {
            if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a name"), NULL;
            jj_node *x = node(P, JE_NAME);
            if (!x) return NULL;
            x->name = cur(P)->s;
            next(P);
            if (!nvec_push(P, &names, x)) return NULL;
        }
        if (!(target = node(P, JE_LIST))) return NULL;
        target->args = names.v;
        target->nargs = names.n;
    }
    nd->a = target;
    if (accept_op(P, '=')) {
        jj_node *v = parse_expr(P);
        if (!v) return NULL;
        if (is_op(P, ',')) { /* tuple value */
            nvec items = {0};
            if (!nvec_push(P, &items, v)) return NULL;
            while (accept_op(P, ',') && cur(P)->kind != JT_STMT_CLOSE) {
                jj_node *x = parse_expr(P);
                if (!x || !nvec_push(P, &items, x)) return NULL;
            }
            if (!(v = node(P, JE_LIST))) return NULL;
            v->args = items.v;
            v->nargs = items.n;
        }
        nd->b = v;
        return expect_close(P) ? nd : NULL;
    }
    /* block set: {% set x %}...{% endset %} */
    static const char *const ends[] = {"endset", NULL};
    int which = -1;
    if (target->kind != JE_NAME) return perr(P, LW_ERR_INVALID_ARG, "block set needs a plain name"), NULL;
    nd->kind = JN_SET_BLOCK;
    if (is_op(P, '|')) {
        jj_node *ph = node(P, JE_NAME);
        if (!ph) return NULL;
        ph->name = jj_s(" body", 5);
        if (!(nd->b = parse_filter_expr(P, ph))) return NULL;
    }
    if (!expect_close(P) || !parse_block(P, ends, &nd->body, &nd->nbody, &which, "set", line) || !expect_close(P))
        return NULL;
    return nd;
}

static jj_node *parse_macro(parser *P, uint32_t line) {
    static const char *const ends[] = {"endmacro", NULL};
    jj_node *nd = node(P, JN_MACRO);
    nvec defs = {0};
    uint32_t cap = 0;
    int which = -1;
    if (!nd) return NULL;
    if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a macro name"), NULL;
    nd->name = cur(P)->s;
    next(P);
    if (!expect_op(P, '(')) return NULL;
    while (!is_op(P, ')')) {
        if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a parameter name"), NULL;
        if (!strvec_push(P, &nd->kwn, &nd->nkw, &cap, cur(P)->s)) return NULL;
        next(P);
        jj_node *def = NULL;
        if (accept_op(P, '=') && !(def = parse_expr(P))) return NULL;
        if (!nvec_push(P, &defs, def)) return NULL;
        if (!accept_op(P, ',')) break;
    }
    nd->kwv = defs.v;
    if (!expect_op(P, ')') || !expect_close(P) ||
        !parse_block(P, ends, &nd->body, &nd->nbody, &which, "macro", line) || !expect_close(P))
        return NULL;
    return nd;
}

/* After "{%" and the keyword. */
static jj_node *parse_stmt(parser *P) {
    const jj_tok *kw = cur(P);
    uint32_t line = kw->line;
    if (kw->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a statement name after '{%%'"), NULL;
    jj_str k = kw->s;
    next(P);
    jj_node *nd = NULL;
    if (!enter(P)) return NULL;
    if (jj_str_eqz(k, "if")) {
        nd = parse_if(P, line);
    } else if (jj_str_eqz(k, "for")) {
        nd = parse_for(P, line);
    } else if (jj_str_eqz(k, "set")) {
        nd = parse_set(P, line);
    } else if (jj_str_eqz(k, "macro")) {
        nd = parse_macro(P, line);
    } else if (jj_str_eqz(k, "break") || jj_str_eqz(k, "continue")) {
        nd = node(P, jj_str_eqz(k, "break") ? JN_BREAK : JN_CONTINUE);
        if (nd && !expect_close(P)) nd = NULL;
    } else if (jj_str_eqz(k, "do")) {
        nd = node(P, JN_DO);
        if (nd && (!(nd->a = parse_expr(P)) || !expect_close(P))) nd = NULL;
    } else if (jj_str_eqz(k, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        int which = -1;
        jj_node *ph = node(P, JE_NAME);
        nd = node(P, JN_FILTER);
        if (!ph || !nd) return NULL;
        ph->name = jj_s(" body", 5);
        jj_node *f = node(P, JE_FILTER);
        if (!f) return NULL;
        if (cur(P)->kind != JT_NAME) return perr(P, LW_ERR_INVALID_ARG, "expected a filter name"), NULL;
        f->name = cur(P)->s;
        f->op = jj_filter_id(f->name);
        next(P);
        f->a = ph;
        if (is_op(P, '(') && !parse_call_args(P, f)) return NULL;
        if (!(nd->a = parse_filter_expr(P, f))) return NULL;
        if (!expect_close(P) || !parse_block(P, ends, &nd->body, &nd->nbody, &which, "filter", line) ||
            !expect_close(P))
            return NULL;
    } else if (jj_str_eqz(k, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        int which = -1;
        nd = node(P, JN_SCOPE);
        if (!nd || !expect_close(P) || !parse_block(P, ends, &nd->body, &nd->nbody, &which, "generation", line) ||
            !expect_close(P))
            nd = NULL;
    } else {
        perr(P, LW_ERR_INVALID_ARG, "unknown or unexpected tag '%.*s'", (int)(k.n > 40 ? 40 : k.n), k.p);
    }
    P->depth--;
    return nd;
}

static bool parse_body(parser *P, const char *const *ends, nvec *out, int *which) {
    if (!enter(P)) return false;
    *which = -1;
    for (;;) {
        const jj_tok *t = cur(P);
        if (t->kind == JT_EOF) break;
        if (t->kind == JT_TEXT) {
            jj_node *nd = node(P, JN_TEXT);
            if (!nd) return false;
            nd->lit = jj_strv(t->s);
            next(P);
            if (!nvec_push(P, out, nd)) return false;
        } else if (t->kind == JT_EXPR_OPEN) {
            next(P);
            jj_node *nd = node(P, JN_OUTPUT);
            if (!nd || !(nd->a = parse_expr(P))) return false;
            if (cur(P)->kind != JT_EXPR_CLOSE) return perr(P, LW_ERR_INVALID_ARG, "expected '}}'");
            next(P);
            if (!nvec_push(P, out, nd)) return false;
        } else if (t->kind == JT_STMT_OPEN) {
            if (ends && P->i + 1 < P->n && P->t[P->i + 1].kind == JT_NAME) {
                for (int k = 0; ends[k]; k++)
                    if (jj_str_eqz(P->t[P->i + 1].s, ends[k])) {
                        next(P);
                        next(P);
                        *which = k;
                        P->depth--;
                        return true;
                    }
            }
            next(P);
            jj_node *nd = parse_stmt(P);
            if (!nd || !nvec_push(P, out, nd)) return false;
        } else {
            return perr(P, LW_ERR_INVALID_ARG, "unexpected token outside a tag");
        }
    }
    P->depth--;
    return true;
}

lw_status jj_parse(jj_arena *a, const jj_tok *toks, size_t n, jj_node ***body, uint32_t *nbody, char *err) {
    parser P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.t = toks;
    P.n = n;
    P.err = err;
    nvec v = {0};
    int which = -1;
    if (!parse_body(&P, NULL, &v, &which)) return P.st != LW_OK ? P.st : LW_ERR_INVALID_ARG;
    *body = v.v;
    *nbody = v.n;
    return LW_OK;
}
