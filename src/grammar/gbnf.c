/* GBNF parser: llama.cpp's grammar dialect into a flat program (grammar.h).
 *
 *     root  ::= item ("," space item)*          # rules; the first newline outside parentheses ends one
 *     item  ::= [a-z]+ | "lit\n\x41\u00e9" | .  # classes with ranges and [^negation], literals, any char
 *     space ::= " "? | [ \t]{0,20}              # repetition: * + ? {m} {m,} {m,n}
 *
 * Groups and repetitions become generated rules: x* is R ::= x R | (right recursion, so matching it keeps
 * the stack flat), x{m,n} is m copies of x then a chain of n - m optional ones. Every size is limited
 * (grammar.h), references must be defined, and left recursion is refused, since the matcher would expand
 * it forever. */
#include "grammar/grammar.h"

#include "core/core.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A growable element list: one per rule while parsing. */
typedef struct ebuf {
    lw__gelem *e; /* elements   */
    uint32_t n;   /* used       */
    uint32_t cap; /* allocated  */
} ebuf;

/* Parser state. Rule names point into the input text (it outlives the parse). */
typedef struct gparse {
    const lw_allocator *a; /* allocator                                          */
    char *err;             /* message buffer                                     */
    const char *p, *end;   /* cursor and end of the text                         */
    const char *text;      /* start of the text (for line numbers)               */
    ebuf *rules;           /* n_rules element lists                              */
    const char **name;     /* n_rules: name (NULL for generated rules)           */
    uint32_t *name_len;    /* n_rules: name length                               */
    uint8_t *defined;      /* n_rules: 1 once the rule has a body                */
    uint32_t n_rules, cap_rules;
    uint32_t *htab;        /* name hash table: rule id + 1, 0 = empty            */
    uint32_t hcap;         /* slots (power of two)                               */
    uint64_t total;        /* elements in all rules                              */
    int depth;             /* parentheses open                                   */
    lw_status st;          /* first failure                                      */
} gparse;

/* Records the first failure with the line it happened on. */
static lw_status fail(gparse *g, lw_status s, const char *what) {
    if (g->st != LW_OK) return g->st;
    uint32_t line = 1;
    for (const char *q = g->text; q < g->p && q < g->end; q++) line += *q == '\n';
    g->st = s;
    lw__errorf(g->err, s, "grammar line %u: %s", line, what);
    return s;
}

static lw_status push(gparse *g, uint32_t rule, uint32_t type, uint32_t a, uint32_t b) {
    if (g->st != LW_OK) return g->st;
    if (++g->total > LW_GRAMMAR_MAX_ELEMS) return fail(g, LW_ERR_TOO_LARGE, "grammar too large (elements)");
    ebuf *e = &g->rules[rule];
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 8;
        lw__gelem *ne = lw__realloc(g->a, e->e, (size_t)cap * sizeof(lw__gelem));
        if (!ne) return fail(g, LW_ERR_NOMEM, "out of memory");
        e->e = ne, e->cap = cap;
    }
    e->e[e->n++] = (lw__gelem){type, a, b};
    return LW_OK;
}

static uint32_t hash_name(const char *s, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* A new rule (named when name != NULL); its id, or UINT32_MAX after a failure. */
static uint32_t new_rule(gparse *g, const char *name, uint32_t len) {
    if (g->st != LW_OK) return UINT32_MAX;
    if (g->n_rules >= LW_GRAMMAR_MAX_RULES) {
        fail(g, LW_ERR_TOO_LARGE, "grammar too large (rules)");
        return UINT32_MAX;
    }
    if (g->n_rules == g->cap_rules) {
        uint32_t cap = g->cap_rules ? g->cap_rules * 2 : 32;
        ebuf *r = lw__realloc(g->a, g->rules, (size_t)cap * sizeof(ebuf));
        if (r) g->rules = r;
        const char **nm = r ? lw__realloc(g->a, g->name, (size_t)cap * sizeof(char *)) : NULL;
        if (nm) g->name = nm;
        uint32_t *nl = nm ? lw__realloc(g->a, g->name_len, (size_t)cap * sizeof(uint32_t)) : NULL;
        if (nl) g->name_len = nl;
        uint8_t *d = nl ? lw__realloc(g->a, g->defined, cap) : NULL;
        if (!d) {
            fail(g, LW_ERR_NOMEM, "out of memory");
            return UINT32_MAX;
        }
        g->defined = d, g->cap_rules = cap;
    }
    uint32_t id = g->n_rules++;
    g->rules[id] = (ebuf){NULL, 0, 0};
    g->name[id] = name, g->name_len[id] = len, g->defined[id] = name == NULL; /* generated: defined */
    return id;
}

/* The id of the named rule, created (undefined) at its first mention. */
static uint32_t rule_by_name(gparse *g, const char *s, uint32_t n) {
    if (g->st != LW_OK) return UINT32_MAX;
    if ((g->n_rules + 1) * 2 > g->hcap) { /* grow and rehash the table */
        uint32_t cap = g->hcap ? g->hcap * 2 : 64;
        uint32_t *t = lw__calloc(g->a, cap, sizeof(uint32_t));
        if (!t) {
            fail(g, LW_ERR_NOMEM, "out of memory");
            return UINT32_MAX;
        }
        for (uint32_t i = 0; i < g->hcap; i++) {
            uint32_t id = g->htab[i];
            if (!id) continue;
            uint32_t h = hash_name(g->name[id - 1], g->name_len[id - 1]) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = id;
        }
        lw__free(g->a, g->htab);
        g->htab = t, g->hcap = cap;
    }
    uint32_t h = hash_name(s, n) & (g->hcap - 1);
    for (; g->htab[h]; h = (h + 1) & (g->hcap - 1)) {
        uint32_t id = g->htab[h] - 1;
        if (g->name_len[id] == n && !memcmp(g->name[id], s, n)) return id;
    }
    uint32_t id = new_rule(g, s, n);
    if (id != UINT32_MAX) g->htab[h] = id + 1;
    return id;
}

/* ---------------------------------------------------------------------------------------------------------
 * Lexing
 * ------------------------------------------------------------------------------------------------------- */

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips blanks and # comments, and newlines too when newline_ok. */
static void skip_space(gparse *g, bool newline_ok) {
    while (g->p < g->end) {
        char c = *g->p;
        if (c == ' ' || c == '\t') g->p++;
        else if (c == '#')
            while (g->p < g->end && *g->p != '\n' && *g->p != '\r') g->p++;
        else if ((c == '\n' || c == '\r') && newline_ok) g->p++;
        else break;
    }
}

/* One UTF-8 code point from the text (invalid bytes: an error). */
static bool decode_utf8(gparse *g, uint32_t *cp) {
    const uint8_t *s = (const uint8_t *)g->p;
    size_t left = (size_t)(g->end - g->p);
    uint32_t c = s[0], n = 0, min = 0;
    if (c < 0x80) n = 0;
    else if ((c & 0xE0) == 0xC0) n = 1, c &= 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) n = 2, c &= 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) n = 3, c &= 0x07, min = 0x10000;
    else return false;
    if (left < n + 1) return false;
    for (uint32_t i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) return false;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    g->p += n + 1;
    *cp = c;
    return true;
}

/* \xHH, \uHHHH or \UHHHHHHHH after the letter: ndig hex digits. */
static bool hex_escape(gparse *g, int ndig, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < ndig; i++) {
        if (g->p >= g->end) return false;
        char c = *g->p++;
        uint32_t d = c >= '0' && c <= '9' ? (uint32_t)(c - '0')
                     : c >= 'a' && c <= 'f' ? (uint32_t)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (uint32_t)(c - 'A' + 10)
                                            : 99u;
        if (d == 99u) return false;
        v = v * 16 + d;
    }
    if (v > 0x10FFFF) return false;
    *cp = v;
    return true;
}

/* One character of a literal or class, escapes included. */
static bool parse_char(gparse *g, uint32_t *cp) {
    if (g->p >= g->end) return false;
    if (*g->p != '\\') return decode_utf8(g, cp);
    if (++g->p >= g->end) return false;
    char c = *g->p++;
    switch (c) {
    case 'x': return hex_escape(g, 2, cp);
    case 'u': return hex_escape(g, 4, cp);
    case 'U': return hex_escape(g, 8, cp);
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case 'n': *cp = '\n'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)(uint8_t)c; return true;
    default: return false;
    }
}

static bool parse_uint(gparse *g, uint32_t *v) {
    if (g->p >= g->end || *g->p < '0' || *g->p > '9') return false;
    uint64_t x = 0;
    while (g->p < g->end && *g->p >= '0' && *g->p <= '9') {
        x = x * 10 + (uint64_t)(*g->p++ - '0');
        if (x > LW_GRAMMAR_MAX_REPEAT) return false;
    }
    *v = (uint32_t)x;
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * Rules
 * ------------------------------------------------------------------------------------------------------- */

static void parse_alternates(gparse *g, uint32_t rule, bool nested);

/* Appends elements item[0..n) to rule. */
static void append(gparse *g, uint32_t rule, const lw__gelem *item, uint32_t n) {
    for (uint32_t i = 0; i < n && g->st == LW_OK; i++) push(g, rule, item[i].type, item[i].a, item[i].b);
}

/* Rewrites rule's elements from `start` (the last item) as that item repeated m..n times (n = UINT32_MAX:
 * no upper bound). */
static void repeat(gparse *g, uint32_t rule, uint32_t start, uint32_t m, uint32_t n) {
    uint32_t len = g->rules[rule].n - start;
    lw__gelem *item = lw__calloc(g->a, len ? len : 1, sizeof(lw__gelem));
    if (!item) {
        fail(g, LW_ERR_NOMEM, "out of memory");
        return;
    }
    if (len) memcpy(item, g->rules[rule].e + start, (size_t)len * sizeof(lw__gelem));
    g->rules[rule].n = start;
    g->total -= len;
    for (uint32_t i = 0; i < m && g->st == LW_OK; i++) append(g, rule, item, len);
    if (n == UINT32_MAX) { /* R ::= item R | */
        uint32_t r = new_rule(g, NULL, 0);
        append(g, r, item, len);
        push(g, r, LW_GE_RULE, r, 0);
        push(g, r, LW_GE_ALT, 0, 0);
        push(g, r, LW_GE_END, 0, 0);
        push(g, rule, LW_GE_RULE, r, 0);
    } else if (n > m) { /* R1 ::= item R2 | ; ... Rk ::= item | */
        uint32_t first = UINT32_MAX, prev = UINT32_MAX;
        for (uint32_t i = m; i < n && g->st == LW_OK; i++) {
            uint32_t r = new_rule(g, NULL, 0);
            if (g->st != LW_OK) break;
            if (prev != UINT32_MAX) { /* close the previous link: item R | */
                push(g, prev, LW_GE_RULE, r, 0);
                push(g, prev, LW_GE_ALT, 0, 0);
                push(g, prev, LW_GE_END, 0, 0);
            } else {
                first = r;
            }
            append(g, r, item, len);
            prev = r;
        }
        if (prev != UINT32_MAX) {
            push(g, prev, LW_GE_ALT, 0, 0);
            push(g, prev, LW_GE_END, 0, 0);
        }
        if (first != UINT32_MAX) push(g, rule, LW_GE_RULE, first, 0);
    }
    lw__free(g->a, item);
}

/* One sequence of items into rule, up to '|', ')' or (outside parentheses) the end of the line. */
static void parse_sequence(gparse *g, uint32_t rule, bool nested) {
    int64_t last = -1; /* where the last item began (for repetitions) */
    while (g->p < g->end && g->st == LW_OK) {
        char c = *g->p;
        uint32_t start = g->rules[rule].n;
        if (c == '"') {
            g->p++;
            while (g->st == LW_OK) {
                if (g->p >= g->end) {
                    fail(g, LW_ERR_BAD_STRING, "unterminated string literal");
                    return;
                }
                if (*g->p == '"') {
                    g->p++;
                    break;
                }
                uint32_t cp;
                if (!parse_char(g, &cp)) {
                    fail(g, LW_ERR_BAD_STRING, "bad character or escape in a string literal");
                    return;
                }
                push(g, rule, LW_GE_CLASS, 1, 0);
                push(g, rule, LW_GE_RANGE, cp, cp);
            }
            last = start;
        } else if (c == '[') {
            g->p++;
            uint32_t neg = 0, n = 0;
            if (g->p < g->end && *g->p == '^') neg = 1, g->p++;
            push(g, rule, LW_GE_CLASS, 0, neg);
            uint32_t head = g->rules[rule].n - 1;
            while (g->st == LW_OK) {
                if (g->p >= g->end) {
                    fail(g, LW_ERR_BAD_STRING, "unterminated character class");
                    return;
                }
                if (*g->p == ']') {
                    g->p++;
                    break;
                }
                uint32_t lo, hi;
                if (!parse_char(g, &lo)) {
                    fail(g, LW_ERR_BAD_STRING, "bad character or escape in a character class");
                    return;
                }
                hi = lo;
                if (g->p + 1 < g->end && *g->p == '-' && g->p[1] != ']') {
                    g->p++;
                    if (!parse_char(g, &hi) || hi < lo) {
                        fail(g, LW_ERR_BAD_STRING, "bad range in a character class");
                        return;
                    }
                }
                if (++n > LW_GRAMMAR_MAX_RANGES) {
                    fail(g, LW_ERR_TOO_LARGE, "character class too large");
                    return;
                }
                push(g, rule, LW_GE_RANGE, lo, hi);
            }
            if (g->st == LW_OK) g->rules[rule].e[head].a = n;
            last = start;
        } else if (c == '.') {
            g->p++;
            push(g, rule, LW_GE_CLASS, 0, 1);
            last = start;
        } else if (is_word(c)) {
            const char *s = g->p;
            while (g->p < g->end && is_word(*g->p)) g->p++;
            uint32_t r = rule_by_name(g, s, (uint32_t)(g->p - s));
            push(g, rule, LW_GE_RULE, r, 0);
            last = start;
        } else if (c == '(') {
            g->p++;
            if (++g->depth > LW_GRAMMAR_MAX_DEPTH) {
                fail(g, LW_ERR_TOO_LARGE, "parentheses nested too deep");
                return;
            }
            uint32_t r = new_rule(g, NULL, 0);
            if (g->st != LW_OK) return;
            g->defined[r] = 1;
            skip_space(g, true);
            parse_alternates(g, r, true);
            if (g->st != LW_OK) return;
            if (g->p >= g->end || *g->p != ')') {
                fail(g, LW_ERR_BAD_STRING, "expected ')'");
                return;
            }
            g->p++;
            g->depth--;
            push(g, rule, LW_GE_RULE, r, 0);
            last = start;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) {
                fail(g, LW_ERR_BAD_STRING, "repetition without an item before it");
                return;
            }
            g->p++;
            uint32_t m = 0, n = UINT32_MAX;
            if (c == '+') m = 1;
            else if (c == '?') n = 1;
            else if (c == '{') {
                skip_space(g, nested);
                if (!parse_uint(g, &m)) {
                    fail(g, LW_ERR_BAD_STRING, "expected a count (at most 100000) after '{'");
                    return;
                }
                skip_space(g, nested);
                n = m;
                if (g->p < g->end && *g->p == ',') {
                    g->p++;
                    skip_space(g, nested);
                    n = UINT32_MAX;
                    if (g->p < g->end && *g->p != '}' && (!parse_uint(g, &n) || n < m)) {
                        fail(g, LW_ERR_BAD_STRING, "bad upper bound in {m,n}");
                        return;
                    }
                    skip_space(g, nested);
                }
                if (g->p >= g->end || *g->p != '}') {
                    fail(g, LW_ERR_BAD_STRING, "expected '}'");
                    return;
                }
                g->p++;
            }
            repeat(g, rule, (uint32_t)last, m, n);
        } else {
            break;
        }
        skip_space(g, nested);
    }
}

static void parse_alternates(gparse *g, uint32_t rule, bool nested) {
    parse_sequence(g, rule, nested);
    while (g->st == LW_OK && g->p < g->end && *g->p == '|') {
        push(g, rule, LW_GE_ALT, 0, 0);
        g->p++;
        skip_space(g, true);
        parse_sequence(g, rule, nested);
    }
    push(g, rule, LW_GE_END, 0, 0);
}

static void parse_rule(gparse *g) {
    const char *s = g->p;
    while (g->p < g->end && is_word(*g->p)) g->p++;
    if (g->p == s) {
        fail(g, LW_ERR_BAD_STRING, "expected a rule name");
        return;
    }
    uint32_t r = rule_by_name(g, s, (uint32_t)(g->p - s));
    if (g->st != LW_OK) return;
    if (g->defined[r]) {
        fail(g, LW_ERR_BAD_STRING, "rule defined twice");
        return;
    }
    g->defined[r] = 1;
    skip_space(g, false);
    if (g->end - g->p < 3 || memcmp(g->p, "::=", 3) != 0) {
        fail(g, LW_ERR_BAD_STRING, "expected '::='");
        return;
    }
    g->p += 3;
    skip_space(g, true);
    parse_alternates(g, r, false);
    if (g->st != LW_OK) return;
    if (g->p < g->end) {
        if (*g->p == '\r' || *g->p == '\n') g->p++;
        else {
            fail(g, LW_ERR_BAD_STRING, "expected the end of the line");
            return;
        }
    }
    skip_space(g, true);
}

/* ---------------------------------------------------------------------------------------------------------
 * Checks on the whole grammar: references defined, no left recursion
 * ------------------------------------------------------------------------------------------------------- */

static lw_status rule_fail(gparse *g, lw_status s, const char *what, uint32_t r) {
    char name[64];
    uint32_t n = g->name[r] ? g->name_len[r] : 0;
    if (n > sizeof name - 1) n = sizeof name - 1;
    if (n) memcpy(name, g->name[r], n);
    else n = (uint32_t)snprintf(name, sizeof name, "(group)");
    name[n] = 0;
    g->st = s;
    return lw__errorf(g->err, s, "grammar: %s '%s'", what, name);
}

/* Left recursion: a rule that can reach itself through references each preceded only by nullable items.
 * Nullability is a fixed point (bounded work); the reachability graph is searched without recursion. */
static lw_status check_left_recursion(gparse *g, const lw__gprog *p) {
    uint32_t nr = p->n_rules;
    uint8_t *nullable = lw__calloc(g->a, nr, 1);
    uint8_t *color = lw__calloc(g->a, nr, 1);
    uint32_t *stk = lw__calloc(g->a, nr + 1, sizeof(uint32_t));
    uint32_t *alt_i = lw__calloc(g->a, nr + 1, sizeof(uint32_t)); /* per stack entry: element cursor */
    lw_status st = LW_OK;
    if (!nullable || !color || !stk || !alt_i) {
        st = lw__errorf(g->err, LW_ERR_NOMEM, "grammar: out of memory");
        goto done;
    }
    for (uint64_t changed = 1, work = 0; changed;) {
        changed = 0;
        for (uint32_t r = nr; r-- > 0;) {
            if (nullable[r]) continue;
            for (uint32_t k = p->alt_off[r]; k < p->alt_off[r + 1]; k++) {
                uint32_t e = p->alts[k];
                while (p->elems[e].type == LW_GE_RULE && nullable[p->elems[e].a]) e++;
                work += e - p->alts[k] + 1;
                if (p->elems[e].type == LW_GE_ALT || p->elems[e].type == LW_GE_END) {
                    nullable[r] = 1, changed = 1;
                    break;
                }
            }
        }
        if (work > 200000000u) {
            st = lw__errorf(g->err, LW_ERR_TOO_LARGE, "grammar: too complex (nullable rules)");
            goto done;
        }
    }
    /* DFS over edges r -> s where s is referenced at the start of one of r's alternatives (after nullables).
     * color: 0 new, 1 on the stack, 2 done. The cursor walks r's elements from its first alternative. */
    for (uint32_t root = 0; root < nr; root++) {
        if (color[root]) continue;
        uint32_t sp = 0;
        stk[sp] = root, alt_i[sp] = p->rule_start[root], sp++;
        color[root] = 1;
        while (sp > 0) {
            uint32_t r = stk[sp - 1];
            uint32_t e = alt_i[sp - 1];
            /* next edge: a reference at the start of an alternative or after nullable references only;
             * everything after the first item that cannot be empty is skipped (linear in the rule) */
            uint32_t next = UINT32_MAX;
            while (p->elems[e].type != LW_GE_END) {
                const lw__gelem *x = &p->elems[e];
                if (x->type == LW_GE_ALT) {
                    e++;
                    continue;
                }
                if (x->type == LW_GE_RULE) {
                    next = x->a;
                    e++;
                    if (!nullable[x->a])
                        while (p->elems[e].type != LW_GE_ALT && p->elems[e].type != LW_GE_END) e++;
                    break;
                }
                while (p->elems[e].type != LW_GE_ALT && p->elems[e].type != LW_GE_END) e++;
            }
            alt_i[sp - 1] = e;
            if (next == UINT32_MAX) {
                color[r] = 2;
                sp--;
            } else if (color[next] == 1) {
                st = rule_fail(g, LW_ERR_BAD_STRING, "left recursion through rule", next);
                goto done;
            } else if (color[next] == 0) {
                color[next] = 1;
                stk[sp] = next, alt_i[sp] = p->rule_start[next], sp++;
            }
        }
    }
done:
    lw__free(g->a, nullable);
    lw__free(g->a, color);
    lw__free(g->a, stk);
    lw__free(g->a, alt_i);
    return st;
}

void lw__gprog_free(const lw_allocator *a, lw__gprog *p) {
    lw__free(a, p->elems);
    lw__free(a, p->rule_start);
    lw__free(a, p->alt_off);
    lw__free(a, p->alts);
    memset(p, 0, sizeof *p);
}

lw_status lw__gbnf_parse(const char *text, size_t len, const char *root, const lw_allocator *a, lw__gprog *p,
                         char *err) {
    memset(p, 0, sizeof *p);
    err[0] = 0;
    if (!text && len) return lw__errorf(err, LW_ERR_INVALID_ARG, "grammar: NULL text");
    if (len > LW_GRAMMAR_MAX_TEXT) return lw__errorf(err, LW_ERR_TOO_LARGE, "grammar: text of %zu bytes", len);
    gparse g;
    memset(&g, 0, sizeof g);
    g.a = a, g.err = err, g.p = g.text = text ? text : "", g.end = g.p + len, g.st = LW_OK;
    skip_space(&g, true);
    while (g.p < g.end && g.st == LW_OK) parse_rule(&g);
    if (g.st == LW_OK && g.n_rules == 0) fail(&g, LW_ERR_BAD_STRING, "empty grammar");
    uint32_t root_id = 0;
    if (g.st == LW_OK) {
        const char *rn = root ? root : "root";
        root_id = rule_by_name(&g, rn, (uint32_t)strlen(rn));
        if (g.st == LW_OK && !g.defined[root_id]) lw__errorf(err, g.st = LW_ERR_NOT_FOUND, "grammar: no rule '%s'", rn);
    }
    for (uint32_t r = 0; r < g.n_rules && g.st == LW_OK; r++)
        if (!g.defined[r]) rule_fail(&g, LW_ERR_NOT_FOUND, "undefined rule", r);

    /* flatten */
    if (g.st == LW_OK) {
        uint32_t n_alts = 0;
        for (uint32_t r = 0; r < g.n_rules; r++)
            for (uint32_t i = 0; i < g.rules[r].n; i++) n_alts += g.rules[r].e[i].type <= LW_GE_ALT;
        p->n_elems = (uint32_t)g.total;
        p->n_rules = g.n_rules;
        p->root = root_id;
        p->elems = lw__calloc(a, g.total, sizeof(lw__gelem));
        p->rule_start = lw__calloc(a, g.n_rules, sizeof(uint32_t));
        p->alt_off = lw__calloc(a, (size_t)g.n_rules + 1, sizeof(uint32_t));
        p->alts = lw__calloc(a, n_alts, sizeof(uint32_t));
        if (!p->elems || !p->rule_start || !p->alt_off || !p->alts) {
            lw__errorf(err, g.st = LW_ERR_NOMEM, "grammar: out of memory");
        } else {
            uint32_t at = 0, k = 0;
            for (uint32_t r = 0; r < g.n_rules; r++) {
                p->rule_start[r] = at;
                p->alt_off[r] = k;
                p->alts[k++] = at;
                for (uint32_t i = 0; i < g.rules[r].n; i++) {
                    p->elems[at + i] = g.rules[r].e[i];
                    if (g.rules[r].e[i].type == LW_GE_ALT) p->alts[k++] = at + i + 1;
                }
                at += g.rules[r].n;
            }
            p->alt_off[g.n_rules] = k;
            check_left_recursion(&g, p);
        }
    }

    for (uint32_t r = 0; r < g.n_rules; r++) lw__free(a, g.rules[r].e);
    lw__free(a, g.rules);
    lw__free(a, g.name);
    lw__free(a, g.name_len);
    lw__free(a, g.defined);
    lw__free(a, g.htab);
    if (g.st != LW_OK) lw__gprog_free(a, p);
    return g.st;
}
