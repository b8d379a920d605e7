/* Backtracking regex engine for pre-tokenizer patterns; see regex.h for the supported syntax.
 *
 * The pattern is parsed into a small tree, then compiled to instructions for a backtracking machine
 * (Thompson's program, run depth-first with an explicit stack as in Pike/Cox's "backtrack" design):
 * SPLIT x,y tries x first and remembers y, which gives ECMAScript's priority semantics. Lookaheads run
 * a sub-program at the current position on the same stack. */
#include "tokenizer/regex.h"

#include "tokenizer/unicode.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Data structures
 * ------------------------------------------------------------------------------------------------------- */

/* Class items that are not plain ranges. */
enum {
    CLS_SPACE = 1 << 0,     /* \s                       */
    CLS_NSPACE = 1 << 1,    /* \S                       */
    CLS_DIGIT = 1 << 2,     /* \d                       */
    CLS_NDIGIT = 1 << 3,    /* \D                       */
    CLS_WORD = 1 << 4,      /* \w                       */
    CLS_NWORD = 1 << 5,     /* \W                       */
};

typedef struct cls {
    uint32_t first, count; /* ranges [first, first+count) in lw__regex.ranges       */
    uint16_t cats;         /* LW_UCP_* category bits from \p{..}                     */
    uint8_t items;         /* CLS_* bits                                              */
    uint8_t negate;        /* [^...]                                                  */
} cls;

enum { OP_CHAR, OP_CLASS, OP_SPLIT, OP_JMP, OP_MATCH, OP_LOOK, OP_NLOOK, OP_BOL, OP_EOL };

typedef struct inst {
    uint8_t op;  /* OP_*                                                              */
    uint32_t x;  /* CHAR: unit; CLASS: class index; SPLIT/JMP: target; LOOK: sub start */
    uint32_t y;  /* SPLIT: second target; LOOK/NLOOK: pc after the sub-program         */
    uint32_t k;  /* SPLIT: its ordinal, for the visited bits                            */
} inst;

struct lw__regex {
    lw_allocator alloc; /* where everything below lives           */
    inst *prog;         /* instructions, entry at 0               */
    uint32_t n_prog;    /* instruction count                      */
    cls *classes;       /* character classes                      */
    uint32_t n_classes; /* class count                            */
    uint32_t (*ranges)[2]; /* inclusive unit ranges of all classes */
    uint32_t n_ranges;  /* range count                            */
    int collapsed;      /* pattern uses \p{..}                    */
    uint32_t n_splits;  /* SPLIT instructions                     */
};

/* Parse tree. */
enum { N_CHAR, N_CLASS, N_CAT, N_ALT, N_REPEAT, N_LOOK, N_NLOOK, N_BOL, N_EOL, N_EMPTY };
typedef struct node {
    uint8_t type;          /* N_*                                        */
    uint8_t lazy;          /* N_REPEAT: lazy quantifier                  */
    uint32_t value;        /* N_CHAR: unit; N_CLASS: class index         */
    uint32_t min, max;     /* N_REPEAT bounds, max UINT32_MAX = unbounded */
    uint32_t first, count; /* N_CAT/N_ALT: children in kids[]; REPEAT/LOOK: one child at first */
} node;

typedef struct parser {
    const lw_allocator *alloc;
    const uint32_t *p;  /* pattern code points */
    size_t n, i;        /* length, cursor      */
    char *err;          /* message buffer      */
    lw_status st;       /* first failure       */
    int icase;          /* inside (?i:...)     */
    node *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *kids; /* child node indices, grouped per parent */
    size_t n_kids, cap_kids;
    cls *classes;
    size_t n_classes, cap_classes;
    uint32_t (*ranges)[2];
    size_t n_ranges, cap_ranges;
    int collapsed;
} parser;

#define GROW(ps, arr, n, cap)                                                                                \
    ((n) < (cap) || grow((ps), (void **)&(arr), &(cap), sizeof(*(arr))))

static int grow(parser *ps, void **arr, size_t *cap, size_t elem) {
    size_t nc = *cap ? *cap * 2 : 16, bytes;
    if (!lw__mul_size(nc, elem, &bytes)) return 0;
    void *np = lw__realloc(ps->alloc, *arr, bytes);
    if (!np) {
        ps->st = lw__errorf(ps->err, LW_ERR_NOMEM, "regex: out of memory");
        return 0;
    }
    *arr = np;
    *cap = nc;
    return 1;
}

static int fail(parser *ps, const char *what) {
    if (ps->st == LW_OK) ps->st = lw__errorf(ps->err, LW_ERR_UNSUPPORTED, "regex: %s at %zu", what, ps->i);
    return -1;
}

static int new_node(parser *ps, uint8_t type) {
    if (!GROW(ps, ps->nodes, ps->n_nodes, ps->cap_nodes)) return -1;
    node *nd = &ps->nodes[ps->n_nodes];
    memset(nd, 0, sizeof(*nd));
    nd->type = type;
    return (int)ps->n_nodes++;
}

static int new_class(parser *ps) {
    if (!GROW(ps, ps->classes, ps->n_classes, ps->cap_classes)) return -1;
    cls *c = &ps->classes[ps->n_classes];
    memset(c, 0, sizeof(*c));
    c->first = (uint32_t)ps->n_ranges;
    return (int)ps->n_classes++;
}

static int add_range(parser *ps, int ci, uint32_t lo, uint32_t hi) {
    if (!GROW(ps, ps->ranges, ps->n_ranges, ps->cap_ranges)) return -1;
    ps->ranges[ps->n_ranges][0] = lo;
    ps->ranges[ps->n_ranges][1] = hi;
    ps->n_ranges++;
    ps->classes[ci].count++;
    return 0;
}

/* Adds a literal to a class, with the other ASCII case inside (?i:...). */
static int add_literal_range(parser *ps, int ci, uint32_t lo, uint32_t hi) {
    if (add_range(ps, ci, lo, hi) < 0) return -1;
    if (ps->icase) {
        for (uint32_t c = lo; c <= hi && c < 128; c++) {
            uint32_t o = (c >= 'a' && c <= 'z') ? c - 32 : (c >= 'A' && c <= 'Z') ? c + 32 : c;
            if (o != c && add_range(ps, ci, o, o) < 0) return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * Parser (recursive descent): alt := cat ('|' cat)* ; cat := repeat* ; repeat := atom quantifier?
 * ------------------------------------------------------------------------------------------------------- */

static int parse_alt(parser *ps);

static uint32_t peek(parser *ps) {
    return ps->i < ps->n ? ps->p[ps->i] : 0;
}

/* Escape inside or outside a class: fills the class ci (created by the caller) and returns 1, or
 * returns 0 with *lit set for a literal escape, -1 on error. */
static int parse_escape(parser *ps, int ci, uint32_t *lit) {
    if (ps->i >= ps->n) return fail(ps, "dangling backslash");
    uint32_t c = ps->p[ps->i++];
    cls *k = &ps->classes[ci];
    switch (c) {
    case 's': k->items |= CLS_SPACE; return 1;
    case 'S': k->items |= CLS_NSPACE; return 1;
    case 'd': k->items |= CLS_DIGIT; return 1;
    case 'D': k->items |= CLS_NDIGIT; return 1;
    case 'w': k->items |= CLS_WORD; return 1;
    case 'W': k->items |= CLS_NWORD; return 1;
    case 'r': *lit = '\r'; return 0;
    case 'n': *lit = '\n'; return 0;
    case 't': *lit = '\t'; return 0;
    case 'f': *lit = '\f'; return 0;
    case 'v': *lit = '\v'; return 0;
    case '0': *lit = 0; return 0;
    case 'p': {
        if (peek(ps) != '{') return fail(ps, "\\p without {");
        size_t start = ++ps->i;
        while (ps->i < ps->n && ps->p[ps->i] != '}') ps->i++;
        if (ps->i >= ps->n) return fail(ps, "unterminated \\p{");
        size_t len = ps->i - start;
        ps->i++;
        char name[8] = {0};
        if (len == 0 || len >= sizeof(name)) return fail(ps, "unknown \\p{..} class");
        for (size_t j = 0; j < len; j++) name[j] = (char)ps->p[start + j];
        uint16_t cat = 0;
        if (!strcmp(name, "N")) cat = LW_UCP_NUMBER;
        else if (!strcmp(name, "L") || !strcmp(name, "Lu") || !strcmp(name, "Ll") || !strcmp(name, "Lt") ||
                 !strcmp(name, "Lm") || !strcmp(name, "Lo"))
            cat = LW_UCP_LETTER;
        else if (!strcmp(name, "P")) cat = LW_UCP_PUNCT;
        else if (!strcmp(name, "M")) cat = LW_UCP_MARK;
        else if (!strcmp(name, "S")) cat = LW_UCP_SYMBOL;
        else return fail(ps, "unknown \\p{..} class");
        k->cats |= cat;
        ps->collapsed = 1;
        return 1;
    }
    case 'b': case 'B': return fail(ps, "word boundaries are not supported");
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
            return fail(ps, "unknown escape");
        *lit = c; /* \\ \- \[ \] \. \$ \^ \| \/ ... */
        return 0;
    }
}

/* Parses [...] after the '['. Returns the class node. */
static int parse_class(parser *ps) {
    int ci = new_class(ps);
    if (ci < 0) return -1;
    if (peek(ps) == '^') {
        ps->classes[ci].negate = 1;
        ps->i++;
    }
    int first = 1;
    for (;;) {
        if (ps->i >= ps->n) return fail(ps, "unterminated class");
        uint32_t c = ps->p[ps->i];
        if (c == ']' && !first) {
            ps->i++;
            break;
        }
        first = 0;
        uint32_t lo;
        ps->i++;
        if (c == '\\') {
            int r = parse_escape(ps, ci, &lo);
            if (r < 0) return -1;
            if (r == 1) continue;
        } else {
            lo = c;
        }
        /* a range lo-hi unless '-' is last */
        if (peek(ps) == '-' && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
            ps->i++;
            uint32_t hi = ps->p[ps->i++];
            if (hi == '\\') {
                int r = parse_escape(ps, ci, &hi);
                if (r != 0) return r < 0 ? -1 : fail(ps, "class escape as range end");
            }
            if (hi < lo) return fail(ps, "reversed range");
            if (add_literal_range(ps, ci, lo, hi) < 0) return -1;
        } else if (add_literal_range(ps, ci, lo, lo) < 0) {
            return -1;
        }
    }
    int nd = new_node(ps, N_CLASS);
    if (nd < 0) return -1;
    ps->nodes[nd].value = (uint32_t)ci;
    return nd;
}

static int literal_node(parser *ps, uint32_t c) {
    int ci = -1;
    if (ps->icase && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
        ci = new_class(ps);
        if (ci < 0 || add_literal_range(ps, ci, c, c) < 0) return -1;
        int nd = new_node(ps, N_CLASS);
        if (nd >= 0) ps->nodes[nd].value = (uint32_t)ci;
        return nd;
    }
    int nd = new_node(ps, N_CHAR);
    if (nd >= 0) ps->nodes[nd].value = c;
    return nd;
}

static int parse_atom(parser *ps) {
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case '(': {
        int type = -1, saved_icase = ps->icase;
        if (peek(ps) == '?') {
            ps->i++;
            uint32_t k = peek(ps);
            ps->i++;
            if (k == ':') type = -1;
            else if (k == '=') type = N_LOOK;
            else if (k == '!') type = N_NLOOK;
            else if (k == 'i' && peek(ps) == ':') {
                ps->i++;
                ps->icase = 1;
            } else {
                return fail(ps, "unsupported group");
            }
        }
        int inner = parse_alt(ps);
        ps->icase = saved_icase;
        if (inner < 0) return -1;
        if (peek(ps) != ')') return fail(ps, "missing )");
        ps->i++;
        if (type < 0) return inner;
        int nd = new_node(ps, (uint8_t)type);
        if (nd < 0) return -1;
        ps->nodes[nd].first = (uint32_t)inner;
        return nd;
    }
    case '[': return parse_class(ps);
    case '^': return new_node(ps, N_BOL);
    case '$': return new_node(ps, N_EOL);
    case '.': {
        int ci = new_class(ps);
        if (ci < 0) return -1;
        ps->classes[ci].negate = 1;
        if (add_range(ps, ci, '\n', '\n') < 0 || add_range(ps, ci, '\r', '\r') < 0) return -1;
        int nd = new_node(ps, N_CLASS);
        if (nd >= 0) ps->nodes[nd].value = (uint32_t)ci;
        return nd;
    }
    case '\\': {
        int ci = new_class(ps);
        if (ci < 0) return -1;
        uint32_t lit;
        int r = parse_escape(ps, ci, &lit);
        if (r < 0) return -1;
        if (r == 0) {
            ps->n_classes--; /* unused class (it holds no ranges) */
            return literal_node(ps, lit);
        }
        int nd = new_node(ps, N_CLASS);
        if (nd >= 0) ps->nodes[nd].value = (uint32_t)ci;
        return nd;
    }
    case '*': case '+': case '?': case '{': case ')': case '|':
        ps->i--;
        return fail(ps, "misplaced metacharacter");
    default: return literal_node(ps, c);
    }
}

static int parse_number(parser *ps, uint32_t *v) {
    if (!(peek(ps) >= '0' && peek(ps) <= '9')) return 0;
    uint32_t x = 0;
    while (peek(ps) >= '0' && peek(ps) <= '9') {
        x = x * 10 + (peek(ps) - '0');
        if (x > 100000) return 0;
        ps->i++;
    }
    *v = x;
    return 1;
}

static int parse_repeat(parser *ps) {
    int atom = parse_atom(ps);
    if (atom < 0) return -1;
    for (;;) {
        uint32_t c = peek(ps), mn, mx;
        if (c == '*') mn = 0, mx = UINT32_MAX;
        else if (c == '+') mn = 1, mx = UINT32_MAX;
        else if (c == '?') mn = 0, mx = 1;
        else if (c == '{') {
            size_t save = ps->i++;
            if (!parse_number(ps, &mn)) {
                ps->i = save;
                return fail(ps, "bad {n,m}");
            }
            mx = mn;
            if (peek(ps) == ',') {
                ps->i++;
                if (!parse_number(ps, &mx)) mx = UINT32_MAX;
            }
            if (peek(ps) != '}' || mx < mn) return fail(ps, "bad {n,m}");
        } else {
            return atom;
        }
        ps->i++;
        int nd = new_node(ps, N_REPEAT);
        if (nd < 0) return -1;
        ps->nodes[nd].first = (uint32_t)atom;
        ps->nodes[nd].min = mn;
        ps->nodes[nd].max = mx;
        if (peek(ps) == '?') {
            ps->nodes[nd].lazy = 1;
            ps->i++;
        }
        atom = nd;
    }
}

/* Collects children into a temporary list, then stores them contiguously in kids[]. */
static int finish_list(parser *ps, uint8_t type, const uint32_t *items, size_t n) {
    if (n == 1) return (int)items[0];
    int nd = new_node(ps, type);
    if (nd < 0) return -1;
    ps->nodes[nd].first = (uint32_t)ps->n_kids;
    ps->nodes[nd].count = (uint32_t)n;
    for (size_t j = 0; j < n; j++) {
        if (!GROW(ps, ps->kids, ps->n_kids, ps->cap_kids)) return -1;
        ps->kids[ps->n_kids++] = items[j];
    }
    return nd;
}

#define MAX_LIST 256

static int parse_cat(parser *ps) {
    uint32_t items[MAX_LIST];
    size_t n = 0;
    while (ps->i < ps->n && peek(ps) != '|' && peek(ps) != ')') {
        if (n == MAX_LIST) return fail(ps, "sequence too long");
        int r = parse_repeat(ps);
        if (r < 0) return -1;
        items[n++] = (uint32_t)r;
    }
    if (n == 0) return new_node(ps, N_EMPTY);
    return finish_list(ps, N_CAT, items, n);
}

static int parse_alt(parser *ps) {
    uint32_t items[MAX_LIST];
    size_t n = 0;
    for (;;) {
        if (n == MAX_LIST) return fail(ps, "too many alternatives");
        int r = parse_cat(ps);
        if (r < 0) return -1;
        items[n++] = (uint32_t)r;
        if (peek(ps) != '|' || ps->i >= ps->n) break;
        ps->i++;
    }
    return finish_list(ps, N_ALT, items, n);
}

/* ---------------------------------------------------------------------------------------------------------
 * Code generation
 * ------------------------------------------------------------------------------------------------------- */

typedef struct emitter {
    parser *ps;
    inst *prog;
    size_t n, cap;
} emitter;

#define MAX_PROG (1u << 20)

static int emit(emitter *e, uint8_t op, uint32_t x, uint32_t y) {
    if (e->n >= MAX_PROG) return fail(e->ps, "pattern too large");
    if (!GROW(e->ps, e->prog, e->n, e->cap)) return -1;
    e->prog[e->n].op = op;
    e->prog[e->n].x = x;
    e->prog[e->n].y = y;
    e->prog[e->n].k = 0;
    e->n++;
    return (int)(e->n - 1);
}

static int gen(emitter *e, uint32_t ni) {
    const node nd = e->ps->nodes[ni];
    switch (nd.type) {
    case N_EMPTY: return 0;
    case N_CHAR: return emit(e, OP_CHAR, nd.value, 0) < 0 ? -1 : 0;
    case N_CLASS: return emit(e, OP_CLASS, nd.value, 0) < 0 ? -1 : 0;
    case N_BOL: return emit(e, OP_BOL, 0, 0) < 0 ? -1 : 0;
    case N_EOL: return emit(e, OP_EOL, 0, 0) < 0 ? -1 : 0;
    case N_CAT:
        for (uint32_t j = 0; j < nd.count; j++)
            if (gen(e, e->ps->kids[nd.first + j]) < 0) return -1;
        return 0;
    case N_ALT: {
        /* SPLIT L1, next; L1: a; JMP end; next: SPLIT L2, next2; ... last: z; end: */
        uint32_t jumps[MAX_LIST];
        for (uint32_t j = 0; j < nd.count; j++) {
            int split = -1;
            if (j + 1 < nd.count && (split = emit(e, OP_SPLIT, 0, 0)) < 0) return -1;
            if (split >= 0) e->prog[split].x = (uint32_t)e->n;
            if (gen(e, e->ps->kids[nd.first + j]) < 0) return -1;
            if (j + 1 < nd.count) {
                int jmp = emit(e, OP_JMP, 0, 0);
                if (jmp < 0) return -1;
                jumps[j] = (uint32_t)jmp;
                e->prog[split].y = (uint32_t)e->n;
            }
        }
        for (uint32_t j = 0; j + 1 < nd.count; j++) e->prog[jumps[j]].x = (uint32_t)e->n;
        return 0;
    }
    case N_LOOK:
    case N_NLOOK: {
        int look = emit(e, nd.type == N_LOOK ? OP_LOOK : OP_NLOOK, 0, 0);
        if (look < 0) return -1;
        e->prog[look].x = (uint32_t)e->n;
        if (gen(e, nd.first) < 0 || emit(e, OP_MATCH, 0, 0) < 0) return -1;
        e->prog[look].y = (uint32_t)e->n;
        return 0;
    }
    case N_REPEAT: {
        for (uint32_t j = 0; j < nd.min; j++)
            if (gen(e, nd.first) < 0) return -1;
        if (nd.max == UINT32_MAX) {
            /* L: SPLIT body, end; body: x; JMP L; end: */
            int split = emit(e, OP_SPLIT, 0, 0);
            if (split < 0 || gen(e, nd.first) < 0 || emit(e, OP_JMP, (uint32_t)split, 0) < 0) return -1;
            uint32_t body = (uint32_t)split + 1, end = (uint32_t)e->n;
            e->prog[split].x = nd.lazy ? end : body;
            e->prog[split].y = nd.lazy ? body : end;
            return 0;
        }
        /* x{0,k}: k times "SPLIT body, end; body: x", all failing over to the common end */
        uint32_t k = nd.max - nd.min;
        size_t first_split = e->n;
        int splits[64];
        if (k > 64) return fail(e->ps, "bounded repeat too large");
        for (uint32_t j = 0; j < k; j++) {
            if ((splits[j] = emit(e, OP_SPLIT, 0, 0)) < 0 || gen(e, nd.first) < 0) return -1;
        }
        (void)first_split;
        for (uint32_t j = 0; j < k; j++) {
            uint32_t body = (uint32_t)splits[j] + 1, end = (uint32_t)e->n;
            e->prog[splits[j]].x = nd.lazy ? end : body;
            e->prog[splits[j]].y = nd.lazy ? body : end;
        }
        return 0;
    }
    }
    return fail(e->ps, "internal: bad node");
}

lw_status lw__regex_compile(const char *pattern, const lw_allocator *alloc, lw__regex **out, char *err) {
    *out = NULL;
    parser ps;
    memset(&ps, 0, sizeof(ps));
    ps.alloc = alloc;
    ps.err = err;
    size_t len = strlen(pattern), off = 0, n = 0;
    ps.p = lw__calloc(alloc, len + 1, sizeof(uint32_t));
    if (!ps.p) return lw__errorf(err, LW_ERR_NOMEM, "regex: out of memory");
    while (off < len) ((uint32_t *)ps.p)[n++] = lw__utf8_decode(pattern, len, &off);
    ps.n = n;
    emitter e = {&ps, NULL, 0, 0};
    lw__regex *re = NULL;
    int root = parse_alt(&ps);
    if (root >= 0 && ps.i < ps.n) root = fail(&ps, "unbalanced )");
    if (root >= 0 && ps.collapsed) {
        for (size_t j = 0; j < n; j++)
            if (ps.p[j] >= 128) {
                root = fail(&ps, "\\p{..} together with non-ASCII characters (llama.cpp rejects it too)");
                break;
            }
    }
    if (root >= 0 && gen(&e, (uint32_t)root) >= 0 && emit(&e, OP_MATCH, 0, 0) >= 0) {
        re = lw__calloc(alloc, 1, sizeof(*re));
        if (!re) {
            ps.st = lw__errorf(err, LW_ERR_NOMEM, "regex: out of memory");
        } else {
            re->alloc = lw__allocator_or_default(alloc);
            re->prog = e.prog;
            re->n_prog = (uint32_t)e.n;
            re->classes = ps.classes;
            re->n_classes = (uint32_t)ps.n_classes;
            re->ranges = ps.ranges;
            re->n_ranges = (uint32_t)ps.n_ranges;
            re->collapsed = ps.collapsed;
            for (uint32_t j = 0; j < re->n_prog; j++)
                if (re->prog[j].op == OP_SPLIT) re->prog[j].k = re->n_splits++;
            e.prog = NULL;
            ps.classes = NULL;
            ps.ranges = NULL;
        }
    }
    lw__free(alloc, (void *)ps.p);
    lw__free(alloc, ps.nodes);
    lw__free(alloc, ps.kids);
    lw__free(alloc, ps.classes);
    lw__free(alloc, ps.ranges);
    lw__free(alloc, e.prog);
    if (!re) return ps.st != LW_OK ? ps.st : lw__errorf(err, LW_ERR_UNSUPPORTED, "regex: cannot compile");
    *out = re;
    return LW_OK;
}

void lw__regex_free(lw__regex *re) {
    if (!re) return;
    lw_allocator a = re->alloc;
    lw__free(&a, re->prog);
    lw__free(&a, re->classes);
    lw__free(&a, re->ranges);
    lw__free(&a, re);
}

int lw__regex_collapsed(const lw__regex *re) {
    return re->collapsed;
}

/* ---------------------------------------------------------------------------------------------------------
 * Matching
 * ------------------------------------------------------------------------------------------------------- */

/* Unit a collapsed category stands for (llama.cpp's k_ucat_cpt). */
static uint32_t collapsed_unit(uint16_t flags) {
    switch (flags & LW_UCP_CATEGORIES) {
    case LW_UCP_NUMBER: return 0xD1;
    case LW_UCP_LETTER: return 0xD2;
    case LW_UCP_PUNCT: return 0xD3;
    case LW_UCP_MARK: return 0xD4;
    case LW_UCP_SYMBOL: return 0xD5;
    default: return 0xD0;
    }
}

void lw__regex_units(const lw__regex *re, const uint32_t *cpts, const uint16_t *flags, size_t n, uint32_t *units) {
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cpts[i];
        if (c < 128) units[i] = c;
        else if (flags[i] & LW_UCP_WHITESPACE) units[i] = 0x0B;
        else units[i] = re->collapsed ? collapsed_unit(flags[i]) : c;
    }
}

static int is_space_unit(uint32_t u) {
    return u == ' ' || (u >= 0x09 && u <= 0x0D);
}
static int is_word_unit(uint32_t u) {
    return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_';
}

static int class_match(const lw__regex *re, const cls *k, uint32_t u) {
    int m = 0;
    for (uint32_t j = 0; j < k->count && !m; j++) {
        const uint32_t *r = re->ranges[k->first + j];
        m = u >= r[0] && u <= r[1];
    }
    if (!m && k->items) {
        m = ((k->items & CLS_SPACE) && is_space_unit(u)) || ((k->items & CLS_NSPACE) && !is_space_unit(u)) ||
            ((k->items & CLS_DIGIT) && u >= '0' && u <= '9') || ((k->items & CLS_NDIGIT) && !(u >= '0' && u <= '9')) ||
            ((k->items & CLS_WORD) && is_word_unit(u)) || ((k->items & CLS_NWORD) && !is_word_unit(u));
    }
    if (!m && k->cats) {
        if (u < 128) m = (lw__ucp_flags(u) & k->cats) != 0;
        else
            m = (u == 0xD1 && (k->cats & LW_UCP_NUMBER)) || (u == 0xD2 && (k->cats & LW_UCP_LETTER)) ||
                (u == 0xD3 && (k->cats & LW_UCP_PUNCT)) || (u == 0xD4 && (k->cats & LW_UCP_MARK)) ||
                (u == 0xD5 && (k->cats & LW_UCP_SYMBOL));
    }
    return m != k->negate;
}

static int push(lw__regex_stack *st, const lw_allocator *a, uint32_t pc, size_t pos) {
    if (st->n + 2 > st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 256, bytes;
        if (!lw__mul_size(nc, sizeof(uint32_t), &bytes)) return -1;
        uint32_t *nv = lw__realloc(a, st->v, bytes);
        if (!nv) return -1;
        st->v = nv;
        st->cap = nc;
    }
    st->v[st->n++] = pc;
    st->v[st->n++] = (uint32_t)pos;
    return 0;
}

/* Visited bits of the main program (lookahead sub-runs do not use them: a sub-run that succeeds leaves
 * states marked that did not fail). */
typedef struct memo {
    uint8_t *bits;       /* (pos * n_splits + k) bits                 */
    uint32_t n_splits;   /* row width                                 */
    size_t hi;           /* highest position marked + 1 (for clearing) */
} memo;

/* Runs the program from pc at pos; returns 1 (match, *end set), 0, or -1 (no memory). Uses the stack
 * above its current top and restores it. m is NULL inside lookaheads. */
static int run(const lw__regex *re, const uint32_t *u, size_t n, uint32_t pc0, size_t pos0, lw__regex_stack *st,
               const lw_allocator *a, size_t *end, memo *m) {
    size_t base = st->n;
    if (push(st, a, pc0, pos0) < 0) return -1;
    while (st->n > base) {
        size_t pos = st->v[--st->n];
        uint32_t pc = st->v[--st->n];
        for (;;) {
            const inst *in = &re->prog[pc];
            if (in->op == OP_CHAR) {
                if (pos >= n || u[pos] != in->x) break;
                pos++, pc++;
            } else if (in->op == OP_CLASS) {
                if (pos >= n || !class_match(re, &re->classes[in->x], u[pos])) break;
                pos++, pc++;
            } else if (in->op == OP_SPLIT) {
                if (m) {
                    size_t bit = pos * m->n_splits + in->k;
                    if (m->bits[bit >> 3] & (1u << (bit & 7))) break; /* explored before, and it failed */
                    m->bits[bit >> 3] |= (uint8_t)(1u << (bit & 7));
                    if (pos + 1 > m->hi) m->hi = pos + 1;
                }
                if (push(st, a, in->y, pos) < 0) return -1;
                pc = in->x;
            } else if (in->op == OP_JMP) {
                pc = in->x;
            } else if (in->op == OP_MATCH) {
                st->n = base;
                *end = pos;
                return 1;
            } else if (in->op == OP_LOOK || in->op == OP_NLOOK) {
                size_t dummy;
                int r = run(re, u, n, in->x, pos, st, a, &dummy, NULL);
                if (r < 0) return -1;
                if (r != (in->op == OP_LOOK)) break;
                pc = in->y;
            } else if (in->op == OP_BOL) {
                if (pos != 0) break;
                pc++;
            } else { /* OP_EOL */
                if (pos != n) break;
                pc++;
            }
        }
    }
    return 0;
}

int lw__regex_search(const lw__regex *re, const uint32_t *units, size_t n, size_t from, lw__regex_stack *st,
                     const lw_allocator *alloc, size_t *mstart, size_t *mend) {
    /* visited bits for positions [from, n], zero on entry and cleared again on exit */
    memo m = {NULL, re->n_splits, from};
    if (re->n_splits) {
        size_t bits, bytes;
        if (!lw__mul_size(n + 1, re->n_splits, &bits) || !lw__add_size(bits / 8, 1, &bytes)) return -1;
        if (bytes > st->memo_bytes) {
            uint8_t *nm = lw__realloc(alloc, st->memo, bytes);
            if (!nm) return -1;
            memset(nm + st->memo_bytes, 0, bytes - st->memo_bytes);
            st->memo = nm;
            st->memo_bytes = bytes;
        }
        m.bits = st->memo;
    }
    /* A first instruction that must consume a specific unit or class lets us skip hopeless starts. */
    const inst *first = &re->prog[0];
    int found = 0;
    for (size_t s = from; s < n && !found; s++) {
        if (first->op == OP_CHAR && units[s] != first->x) continue;
        if (first->op == OP_CLASS && !class_match(re, &re->classes[first->x], units[s])) continue;
        size_t e;
        int r = run(re, units, n, 0, s, st, alloc, &e, m.bits ? &m : NULL);
        if (r < 0) {
            found = -1;
            break;
        }
        if (r == 1 && e > s) {
            *mstart = s;
            *mend = e;
            found = 1;
        }
        /* an empty match marked states on its path that did not fail: forget this attempt's marks */
        if (r == 1 && e == s && m.bits && m.hi > s) {
            size_t lo = s * re->n_splits / 8, hi = (m.hi * re->n_splits + 7) / 8 + 1;
            memset(m.bits + lo, 0, (hi < st->memo_bytes ? hi : st->memo_bytes) - lo);
        }
    }
    if (m.bits && m.hi > from) {
        size_t lo = from * re->n_splits / 8, hi = (m.hi * re->n_splits + 7) / 8 + 1;
        memset(m.bits + lo, 0, (hi < st->memo_bytes ? hi : st->memo_bytes) - lo);
    }
    return found;
}
