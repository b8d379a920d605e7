/* The grammar matcher: which tokens may come next, and advancing by the chosen one.
 *
 * A parse position is a set of pushdown stacks (as in llama.cpp): each stack is a list of element positions,
 * its top a terminal that the next code point must match, the entries below it where to continue when a
 * rule ends; the empty stack means "complete here". Stacks are hash-consed (a stack is its top position plus
 * the id of the stack below), so a set of stacks is a sorted list of ids, and sets are interned too.
 *
 * Tokens are byte strings while the grammar reads code points, so the automaton steps on bytes: a state is
 * (stack set, partial UTF-8 character). States and their byte transitions are built lazily and cached, so
 * the matcher becomes a DFA over the parts of the grammar that generation visits.
 *
 * The allowed-token mask of a state is one walk over a byte trie of the vocabulary (built once, laid out in
 * preorder so the walk is a linear scan that skips dead subtrees); each trie edge costs one cached
 * transition. Masks are cached per state (grammars revisit states: inside a string, after each item of a
 * list), so most steps cost one copy of n_vocab bits. The caches have a memory budget; over it they are
 * dropped at the next step boundary and rebuilt from the current state. */
#include "grammar/grammar.h"

#include "core/core.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define UNKNOWN            UINT32_MAX
#define SOFT_STACKS        (1u << 20)  /* caches are dropped at the next step beyond these */
#define SOFT_STATES        (1u << 16)
#define SOFT_SET_WORDS     (1u << 22)
#define HARD_FACTOR        8u          /* ... and a step that grows them this far fails       */
#define MAX_SET            (1u << 16)  /* stacks in one set: beyond, the grammar is too ambiguous */
#define MAX_EXPAND         (1u << 18)  /* stacks visited by one expansion (same reason)         */
#define MASK_BUDGET        (64u << 20) /* bytes of cached masks                              */
#define MAX_PIECE          65535u      /* longer token pieces are never allowed              */

/* One automaton state: a stack set and the bytes of a character not yet complete. */
typedef struct dstate {
    uint32_t set;    /* stack set id (0: none, the dead state)                  */
    uint32_t pv;     /* partial character's bits so far                          */
    uint8_t pn;      /* continuation bytes still expected (0: none)              */
    uint8_t plen;    /* the character's total length in bytes                    */
    uint8_t accept;  /* the text so far may end here (empty stack, pn == 0)      */
    uint8_t pad;
    uint32_t blk[4]; /* transition blocks per byte quarter (0: not yet made)     */
    uint32_t mask;   /* cached mask + 1 (0: none)                                */
} dstate;

struct lw_grammar {
    lw_allocator alloc;         /* allocator of everything here                       */
    char err[LW_ERRMSG_SIZE];   /* last failure                                       */
    lw__gprog prog;             /* the compiled grammar                               */
    const lw_vocab *vocab;      /* NULL: text only (no masks)                         */
    int32_t n_vocab;            /* tokens                                             */
    uint32_t n_words;           /* mask words: (n_vocab + 31) / 32                    */

    /* vocabulary: each token's piece, and the trie of pieces in preorder (node 0 is the root) */
    uint32_t *piece_off;        /* n_vocab + 1 offsets into pieces                    */
    uint8_t *pieces;            /* token texts back to back                           */
    uint8_t *eog;               /* n_vocab: 1 for end-of-generation tokens            */
    uint32_t n_nodes;           /* trie nodes                                         */
    uint8_t *nd_byte;           /* edge byte into the node                            */
    uint16_t *nd_depth;         /* depth (root 0)                                     */
    uint32_t *nd_skip;          /* index after the node's subtree                     */
    uint32_t *nd_tok;           /* first token of the node in sorted                  */
    uint32_t *nd_ntok;          /* tokens whose piece ends at the node                */
    int32_t *sorted;            /* token ids sorted by piece                          */
    uint32_t max_depth;         /* longest piece                                      */
    uint32_t *walk;             /* max_depth + 1 states along the walk                */

    /* stacks: id 0 is the empty stack */
    uint32_t *stk_pos, *stk_parent, n_stk, cap_stk;
    uint32_t *stk_hash, stk_hcap;
    uint32_t *visit, gen;       /* cap_stk stamps for one expansion                   */
    uint32_t *work, *out;       /* cap_stk each                                       */
    /* stack sets: id 0 is the empty set */
    uint32_t *set_words;        /* contents back to back                              */
    size_t n_set_words, cap_set_words;
    uint32_t *set_off, *set_len, n_set, cap_set;
    uint32_t *set_hash, set_hcap;
    /* states: id 0 is dead */
    dstate *st;
    uint32_t n_st, cap_st;
    uint32_t *st_hash, st_hcap;
    uint32_t *blocks;           /* transition blocks of 64 entries (block 0 unused)  */
    uint32_t n_blocks, cap_blocks;
    /* masks */
    uint32_t *masks;            /* cached masks, n_words each                         */
    uint32_t n_masks, cap_masks, max_masks;
    uint32_t *scratch;          /* a mask that could not be cached                    */

    uint32_t cur;               /* current state                                      */
    int done;                   /* an end-of-generation token was accepted            */
    int failed;                 /* a limit was hit: every call fails                  */
};

/* ---------------------------------------------------------------------------------------------------------
 * Growable arrays and hashing
 * ------------------------------------------------------------------------------------------------------- */

/* Makes *p hold at least need elements of size sz (doubling); false when out of memory or too large. */
static bool grow(lw_grammar *g, void **p, uint32_t *cap, size_t sz, uint32_t need) {
    if (need <= *cap) return true;
    uint64_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    size_t bytes;
    if (c > UINT32_MAX || !lw__mul_size((size_t)c, sz, &bytes)) return false;
    void *np = lw__realloc(&g->alloc, *p, bytes);
    if (!np) return false;
    *p = np;
    *cap = (uint32_t)c;
    return true;
}

static uint32_t mix(uint32_t h, uint32_t x) {
    h ^= x * 0x9E3779B1u;
    h = (h << 13) | (h >> 19);
    return h * 5 + 0xE6546B64u;
}

/* Rebuilds an open-addressing table of ids (id + 1 per slot) at twice the size; hash_of gives an id's hash. */
static bool rehash(lw_grammar *g, uint32_t **tab, uint32_t *cap, uint32_t n, uint32_t (*hash_of)(lw_grammar *, uint32_t)) {
    if ((uint64_t)(n + 1) * 2 <= *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 1024;
    uint32_t *t = lw__calloc(&g->alloc, nc, sizeof(uint32_t));
    if (!t) return false;
    for (uint32_t i = 0; i < *cap; i++) {
        uint32_t id = (*tab)[i];
        if (!id) continue;
        uint32_t h = hash_of(g, id - 1) & (nc - 1);
        while (t[h]) h = (h + 1) & (nc - 1);
        t[h] = id;
    }
    lw__free(&g->alloc, *tab);
    *tab = t, *cap = nc;
    return true;
}

static lw_status oom(lw_grammar *g) {
    g->failed = 1;
    return lw__errorf(g->err, LW_ERR_NOMEM, "grammar: out of memory");
}

static lw_status too_large(lw_grammar *g, const char *what) {
    g->failed = 1;
    return lw__errorf(g->err, LW_ERR_TOO_LARGE, "grammar: %s", what);
}

/* ---------------------------------------------------------------------------------------------------------
 * Stacks
 * ------------------------------------------------------------------------------------------------------- */

static uint32_t stk_hash_of(lw_grammar *g, uint32_t id) {
    return mix(mix(0, g->stk_pos[id]), g->stk_parent[id]);
}

/* The id of the stack (pos on top of parent); UNKNOWN when out of memory or over the hard limit. */
static uint32_t stack_intern(lw_grammar *g, uint32_t pos, uint32_t parent) {
    uint32_t h = mix(mix(0, pos), parent);
    if (g->stk_hcap) {
        for (uint32_t i = h & (g->stk_hcap - 1);; i = (i + 1) & (g->stk_hcap - 1)) {
            uint32_t id = g->stk_hash[i];
            if (!id) break;
            if (g->stk_pos[id - 1] == pos && g->stk_parent[id - 1] == parent) return id - 1;
        }
    }
    if (g->n_stk >= SOFT_STACKS * HARD_FACTOR) return UNKNOWN;
    uint32_t need = g->n_stk + 1, old = g->cap_stk;
    if (need > g->cap_stk) {
        uint32_t c1 = old, c2 = old, c3 = old, c4 = old;
        if (!grow(g, (void **)&g->stk_pos, &c1, 4, need) || !grow(g, (void **)&g->stk_parent, &c2, 4, need) ||
            !grow(g, (void **)&g->visit, &c3, 4, need) || !grow(g, (void **)&g->work, &c4, 4, need))
            return UNKNOWN;
        uint32_t c5 = old;
        if (!grow(g, (void **)&g->out, &c5, 4, need)) return UNKNOWN;
        memset(g->visit + old, 0, (size_t)(c1 - old) * 4);
        g->cap_stk = c1;
    }
    if (!rehash(g, &g->stk_hash, &g->stk_hcap, g->n_stk, stk_hash_of)) return UNKNOWN;
    uint32_t id = g->n_stk++;
    g->stk_pos[id] = pos, g->stk_parent[id] = parent;
    uint32_t i = h & (g->stk_hcap - 1);
    while (g->stk_hash[i]) i = (i + 1) & (g->stk_hcap - 1);
    g->stk_hash[i] = id + 1;
    return id;
}

/* Expansion: the stacks in g->work are replaced, rule references by their alternatives, until every one in
 * g->out has a terminal on top (or is empty). Each stack is visited once per expansion (g->gen). */
typedef struct expander {
    uint32_t nwork, nout; /* entries in g->work and g->out */
    uint32_t visited;     /* stacks marked so far          */
    bool bad;             /* out of memory or over a limit */
} expander;

static void mark(lw_grammar *g, expander *x, uint32_t sid) {
    if (sid == UNKNOWN) {
        x->bad = true;
        return;
    }
    if (g->visit[sid] == g->gen) return;
    if (++x->visited > MAX_EXPAND) {
        x->bad = true;
        return;
    }
    g->visit[sid] = g->gen;
    g->work[x->nwork++] = sid;
}

static void begin(lw_grammar *g, expander *x) {
    x->nwork = x->nout = x->visited = 0, x->bad = false;
    if (++g->gen == 0) { /* stamps wrapped: clear them */
        memset(g->visit, 0, (size_t)g->cap_stk * 4);
        g->gen = 1;
    }
}

static bool is_seq_end(const lw__gprog *p, uint32_t pos) {
    return p->elems[pos].type == LW_GE_END || p->elems[pos].type == LW_GE_ALT;
}

/* A stack continuing at pos (the end of an alternative pops to parent). */
static uint32_t continue_at(lw_grammar *g, uint32_t pos, uint32_t parent) {
    return is_seq_end(&g->prog, pos) ? parent : stack_intern(g, pos, parent);
}

static void expand(lw_grammar *g, expander *x) {
    const lw__gprog *p = &g->prog;
    while (x->nwork > 0 && !x->bad) {
        uint32_t sid = g->work[--x->nwork];
        if (sid == 0 || p->elems[g->stk_pos[sid]].type == LW_GE_CLASS) {
            g->out[x->nout++] = sid;
            continue;
        }
        const lw__gelem *e = &p->elems[g->stk_pos[sid]]; /* a reference */
        uint32_t rest = continue_at(g, g->stk_pos[sid] + 1, g->stk_parent[sid]);
        if (rest == UNKNOWN) {
            x->bad = true;
            break;
        }
        for (uint32_t k = p->alt_off[e->a]; k < p->alt_off[e->a + 1] && !x->bad; k++)
            mark(g, x, continue_at(g, p->alts[k], rest));
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Stack sets
 * ------------------------------------------------------------------------------------------------------- */

static uint32_t set_hash_of(lw_grammar *g, uint32_t id) {
    uint32_t h = 0x5E7u;
    for (uint32_t i = 0; i < g->set_len[id]; i++) h = mix(h, g->set_words[g->set_off[id] + i]);
    return h;
}

static void sort_u32(uint32_t *a, uint32_t n) {
    if (n <= 32) {
        for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = i; j > 0 && a[j] < a[j - 1]; j--) {
                uint32_t t = a[j];
                a[j] = a[j - 1], a[j - 1] = t;
            }
        return;
    }
    /* heapsort: no allocation, n log n */
    for (uint32_t start = n / 2; start-- > 0;)
        for (uint32_t r = start;;) {
            uint32_t c = 2 * r + 1;
            if (c >= n) break;
            if (c + 1 < n && a[c + 1] > a[c]) c++;
            if (a[r] >= a[c]) break;
            uint32_t t = a[r];
            a[r] = a[c], a[c] = t, r = c;
        }
    for (uint32_t end = n; end-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[end], a[end] = t;
        for (uint32_t r = 0;;) {
            uint32_t c = 2 * r + 1;
            if (c >= end) break;
            if (c + 1 < end && a[c + 1] > a[c]) c++;
            if (a[r] >= a[c]) break;
            t = a[r];
            a[r] = a[c], a[c] = t, r = c;
        }
    }
}

/* The id of the set of stacks ids[0..n) (sorted here); 0 for the empty set, UNKNOWN on failure. */
static uint32_t set_intern(lw_grammar *g, uint32_t *ids, uint32_t n) {
    if (n == 0) return 0;
    if (n > MAX_SET) return UNKNOWN;
    sort_u32(ids, n);
    uint32_t h = 0x5E7u;
    for (uint32_t i = 0; i < n; i++) h = mix(h, ids[i]);
    if (g->set_hcap)
        for (uint32_t i = h & (g->set_hcap - 1);; i = (i + 1) & (g->set_hcap - 1)) {
            uint32_t id = g->set_hash[i];
            if (!id) break;
            id--;
            if (g->set_len[id] == n && !memcmp(g->set_words + g->set_off[id], ids, (size_t)n * 4)) return id;
        }
    if (g->n_set_words + n > (size_t)SOFT_SET_WORDS * HARD_FACTOR) return UNKNOWN;
    if (g->n_set == 0) g->n_set = 1; /* id 0: the empty set */
    uint32_t need = g->n_set + 1, old = g->cap_set, c2 = old;
    if (!grow(g, (void **)&g->set_off, &c2, 4, need)) return UNKNOWN;
    c2 = old;
    if (!grow(g, (void **)&g->set_len, &c2, 4, need)) return UNKNOWN;
    g->cap_set = c2;
    if (g->n_set_words + n > g->cap_set_words) {
        size_t c = g->cap_set_words ? g->cap_set_words : 1024, bytes;
        while (c < g->n_set_words + n) c *= 2;
        if (!lw__mul_size(c, 4, &bytes)) return UNKNOWN;
        uint32_t *w = lw__realloc(&g->alloc, g->set_words, bytes);
        if (!w) return UNKNOWN;
        g->set_words = w, g->cap_set_words = c;
    }
    if (!rehash(g, &g->set_hash, &g->set_hcap, g->n_set, set_hash_of)) return UNKNOWN;
    uint32_t id = g->n_set++;
    g->set_off[id] = (uint32_t)g->n_set_words, g->set_len[id] = n;
    memcpy(g->set_words + g->n_set_words, ids, (size_t)n * 4);
    g->n_set_words += n;
    uint32_t i = h & (g->set_hcap - 1);
    while (g->set_hash[i]) i = (i + 1) & (g->set_hcap - 1);
    g->set_hash[i] = id + 1;
    return id;
}

/* Whether the class at pos matches code point c. */
static bool class_match(const lw__gprog *p, uint32_t pos, uint32_t c) {
    const lw__gelem *e = &p->elems[pos];
    bool in = false;
    for (uint32_t i = 1; i <= e->a && !in; i++) in = c >= e[i].a && c <= e[i].b;
    return in != (e->b != 0);
}

/* Whether the class at pos may match some code point in lo..hi (exact for plain classes; a negated one is
 * taken to match unless a single range covers lo..hi). */
static bool class_overlaps(const lw__gprog *p, uint32_t pos, uint32_t lo, uint32_t hi) {
    const lw__gelem *e = &p->elems[pos];
    for (uint32_t i = 1; i <= e->a; i++) {
        if (e->b && e[i].a <= lo && e[i].b >= hi) return false;
        if (!e->b && e[i].a <= hi && e[i].b >= lo) return true;
    }
    return e->b != 0;
}

/* The set after code point c from set s; UNKNOWN on failure. */
static uint32_t set_advance(lw_grammar *g, uint32_t s, uint32_t c) {
    if (s == 0) return 0;
    const lw__gprog *p = &g->prog;
    expander x;
    begin(g, &x);
    uint32_t off = g->set_off[s], n = g->set_len[s];
    for (uint32_t i = 0; i < n && !x.bad; i++) {
        uint32_t sid = g->set_words[off + i];
        if (sid == 0 || !class_match(p, g->stk_pos[sid], c)) continue;
        uint32_t pos = g->stk_pos[sid];
        mark(g, &x, continue_at(g, pos + 1 + p->elems[pos].a, g->stk_parent[sid]));
        off = g->set_off[s]; /* interning may have moved nothing here, but keep it exact */
    }
    expand(g, &x);
    if (x.bad) return UNKNOWN;
    return set_intern(g, g->out, x.nout);
}

/* ---------------------------------------------------------------------------------------------------------
 * States and byte transitions
 * ------------------------------------------------------------------------------------------------------- */

static uint32_t st_hash_of(lw_grammar *g, uint32_t id) {
    const dstate *d = &g->st[id];
    return mix(mix(mix(0, d->set), d->pv), (uint32_t)d->pn | ((uint32_t)d->plen << 8));
}

static bool set_has_empty(lw_grammar *g, uint32_t s) {
    return s && g->set_len[s] && g->set_words[g->set_off[s]] == 0; /* sorted: 0 comes first */
}

/* Whether a character begun with pv (pn bytes to come) can still match some stack of set s. */
static bool partial_alive(lw_grammar *g, uint32_t s, uint32_t pv, uint32_t pn, uint32_t plen) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t lo = pv << (6 * pn), hi = lo | ((1u << (6 * pn)) - 1);
    /* only the characters this encoding may still become: no overlong forms, surrogates, or > U+10FFFF */
    if (lo < min_cp[plen]) lo = min_cp[plen];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    for (uint32_t i = 0; i < g->set_len[s]; i++) {
        uint32_t sid = g->set_words[g->set_off[s] + i];
        if (sid && class_overlaps(&g->prog, g->stk_pos[sid], lo, hi)) return true;
    }
    return false;
}

/* The id of state (s, pv, pn, plen); 0 when s is empty; UNKNOWN on failure. */
static uint32_t state_intern(lw_grammar *g, uint32_t s, uint32_t pv, uint32_t pn, uint32_t plen) {
    if (s == 0) return 0;
    if (g->n_st == 0) { /* state 0: dead */
        if (!grow(g, (void **)&g->st, &g->cap_st, sizeof(dstate), 1)) return UNKNOWN;
        memset(&g->st[0], 0, sizeof(dstate));
        g->n_st = 1;
    }
    dstate key;
    memset(&key, 0, sizeof key);
    key.set = s, key.pv = pv, key.pn = (uint8_t)pn, key.plen = (uint8_t)plen;
    uint32_t h = mix(mix(mix(0, s), pv), pn | (plen << 8));
    if (g->st_hcap)
        for (uint32_t i = h & (g->st_hcap - 1);; i = (i + 1) & (g->st_hcap - 1)) {
            uint32_t id = g->st_hash[i];
            if (!id) break;
            const dstate *d = &g->st[id - 1];
            if (d->set == s && d->pv == pv && d->pn == pn && d->plen == plen) return id - 1;
        }
    if (g->n_st >= SOFT_STATES * HARD_FACTOR) return UNKNOWN;
    if (!grow(g, (void **)&g->st, &g->cap_st, sizeof(dstate), g->n_st + 1)) return UNKNOWN;
    if (!rehash(g, &g->st_hash, &g->st_hcap, g->n_st, st_hash_of)) return UNKNOWN;
    key.accept = pn == 0 && set_has_empty(g, s);
    uint32_t id = g->n_st++;
    g->st[id] = key;
    uint32_t i = h & (g->st_hcap - 1);
    while (g->st_hash[i]) i = (i + 1) & (g->st_hcap - 1);
    g->st_hash[i] = id + 1;
    return id;
}

/* Computes the transition of state id on byte b (the slow path of trans). */
static uint32_t trans_compute(lw_grammar *g, uint32_t id, uint32_t b) {
    dstate d = g->st[id];
    uint32_t to;
    if (d.pn == 0) {
        if (b < 0x80) {
            uint32_t s = set_advance(g, d.set, b);
            to = s == UNKNOWN ? UNKNOWN : state_intern(g, s, 0, 0, 0);
        } else {
            uint32_t pv, pn;
            if (b >= 0xC2 && b <= 0xDF) pv = b & 0x1F, pn = 1;
            else if (b >= 0xE0 && b <= 0xEF) pv = b & 0x0F, pn = 2;
            else if (b >= 0xF0 && b <= 0xF4) pv = b & 0x07, pn = 3;
            else return 0;
            to = partial_alive(g, d.set, pv, pn, pn + 1) ? state_intern(g, d.set, pv, pn, pn + 1) : 0;
        }
    } else {
        if ((b & 0xC0) != 0x80) return 0;
        uint32_t pv = (d.pv << 6) | (b & 0x3F), pn = d.pn - 1u;
        if (pn > 0) {
            /* overlong or out-of-range prefixes die here or at the end; the range check catches them */
            to = partial_alive(g, d.set, pv, pn, d.plen) ? state_intern(g, d.set, pv, pn, d.plen) : 0;
        } else {
            static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
            if (pv < min_cp[d.plen] || pv > 0x10FFFF || (pv >= 0xD800 && pv <= 0xDFFF)) return 0;
            uint32_t s = set_advance(g, d.set, pv);
            to = s == UNKNOWN ? UNKNOWN : state_intern(g, s, 0, 0, 0);
        }
    }
    return to;
}

/* The state after byte b from state id (0: dead); UNKNOWN on failure. Cached in 64-entry blocks. */
static uint32_t trans(lw_grammar *g, uint32_t id, uint32_t b) {
    uint32_t blk = g->st[id].blk[b >> 6];
    if (blk) {
        uint32_t v = g->blocks[(size_t)blk * 64 + (b & 63)];
        if (v != UNKNOWN) return v;
    }
    uint32_t to = trans_compute(g, id, b);
    if (to == UNKNOWN) return UNKNOWN;
    blk = g->st[id].blk[b >> 6];
    if (!blk) {
        if (g->n_blocks == 0) g->n_blocks = 1;
        if (!grow(g, (void **)&g->blocks, &g->cap_blocks, 64 * 4, g->n_blocks + 1)) return UNKNOWN;
        blk = g->n_blocks++;
        memset(g->blocks + (size_t)blk * 64, 0xFF, 64 * 4);
        g->st[id].blk[b >> 6] = blk;
    }
    g->blocks[(size_t)blk * 64 + (b & 63)] = to;
    return to;
}

/* ---------------------------------------------------------------------------------------------------------
 * Start state, cache limits
 * ------------------------------------------------------------------------------------------------------- */

/* The state before any text: the root rule expanded. */
static uint32_t start_state(lw_grammar *g) {
    const lw__gprog *p = &g->prog;
    if (g->n_stk == 0) g->n_stk = 1; /* stack 0: empty */
    if (!g->cap_stk) {
        /* make room for stack 0's stamps */
        uint32_t c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0;
        if (!grow(g, (void **)&g->stk_pos, &c1, 4, 16) || !grow(g, (void **)&g->stk_parent, &c2, 4, 16) ||
            !grow(g, (void **)&g->visit, &c3, 4, 16) || !grow(g, (void **)&g->work, &c4, 4, 16) ||
            !grow(g, (void **)&g->out, &c5, 4, 16))
            return UNKNOWN;
        memset(g->visit, 0, (size_t)c1 * 4);
        g->cap_stk = c1;
        g->stk_pos[0] = g->stk_parent[0] = 0;
    }
    expander x;
    begin(g, &x);
    for (uint32_t k = p->alt_off[p->root]; k < p->alt_off[p->root + 1] && !x.bad; k++)
        mark(g, &x, continue_at(g, p->alts[k], 0));
    expand(g, &x);
    if (x.bad) return UNKNOWN;
    uint32_t s = set_intern(g, g->out, x.nout);
    return s == UNKNOWN ? UNKNOWN : state_intern(g, s, 0, 0, 0);
}

/* Drops every cache and rebuilds the current state alone, when the caches have grown past their budget. */
static lw_status maybe_flush(lw_grammar *g) {
    if (g->n_stk <= SOFT_STACKS && g->n_st <= SOFT_STATES && g->n_set_words <= SOFT_SET_WORDS) return LW_OK;
    /* the current state's stacks as position lists, bottom first */
    dstate cur = g->st[g->cur];
    uint32_t n = g->set_len[cur.set], total = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t sid = g->set_words[g->set_off[cur.set] + i]; sid; sid = g->stk_parent[sid]) total++;
    uint32_t *chain = lw__calloc(&g->alloc, (size_t)total + n + 1, sizeof(uint32_t));
    if (!chain) return oom(g);
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = 0, start = at++;
        for (uint32_t sid = g->set_words[g->set_off[cur.set] + i]; sid; sid = g->stk_parent[sid])
            chain[at + len++] = g->stk_pos[sid];
        chain[start] = len;
        at += len;
    }
    g->n_stk = 1, g->n_set = 1, g->n_set_words = 0, g->n_st = 1, g->n_blocks = 1, g->n_masks = 0;
    memset(g->stk_hash, 0, (size_t)g->stk_hcap * 4);
    memset(g->set_hash, 0, (size_t)g->set_hcap * 4);
    memset(g->st_hash, 0, (size_t)g->st_hcap * 4);
    uint32_t *ids = lw__calloc(&g->alloc, n + 1, sizeof(uint32_t));
    lw_status st = LW_OK;
    if (!ids) st = oom(g);
    for (uint32_t i = 0, q = 0; i < n && st == LW_OK; i++) {
        uint32_t len = chain[q++], sid = 0;
        for (uint32_t k = len; k-- > 0 && sid != UNKNOWN;) sid = stack_intern(g, chain[q + k], sid);
        q += len;
        if (sid == UNKNOWN) st = oom(g);
        else ids[i] = sid;
    }
    if (st == LW_OK) {
        uint32_t s = set_intern(g, ids, n);
        uint32_t id = s == UNKNOWN ? UNKNOWN : state_intern(g, s, cur.pv, cur.pn, cur.plen);
        if (id == UNKNOWN) st = oom(g);
        else g->cur = id;
    }
    lw__free(&g->alloc, chain);
    lw__free(&g->alloc, ids);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Vocabulary: pieces and the trie
 * ------------------------------------------------------------------------------------------------------- */

/* Compares the pieces of tokens x and y bytewise (a prefix sorts first). */
static int piece_cmp(const lw_grammar *g, int32_t x, int32_t y) {
    uint32_t lx = g->piece_off[x + 1] - g->piece_off[x], ly = g->piece_off[y + 1] - g->piece_off[y];
    int c = memcmp(g->pieces + g->piece_off[x], g->pieces + g->piece_off[y], lx < ly ? lx : ly);
    return c ? c : (lx > ly) - (lx < ly);
}

/* Bottom-up merge sort of ids by piece (tmp: same size). */
static void sort_by_piece(const lw_grammar *g, int32_t *ids, int32_t *tmp, uint32_t n) {
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = piece_cmp(g, ids[j], ids[i]) < 0 ? ids[j++] : ids[i++];
            while (i < mid) tmp[k++] = ids[i++];
            while (j < hi) tmp[k++] = ids[j++];
        }
        memcpy(ids, tmp, (size_t)n * sizeof(int32_t));
    }
}

static lw_status build_vocab(lw_grammar *g) {
    const lw_vocab *v = g->vocab;
    lw_allocator *a = &g->alloc;
    uint32_t nv = lw_vocab_n_tokens(v);
    if (nv == 0 || nv > INT32_MAX - 1) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: empty vocabulary");
    g->n_vocab = (int32_t)nv;
    g->n_words = (nv + 31) / 32;
    size_t cap = lw_vocab_max_piece_len(v) + 1;
    char *buf = lw__malloc(a, cap);
    g->piece_off = lw__calloc(a, (size_t)nv + 1, sizeof(uint32_t));
    g->eog = lw__calloc(a, nv, 1);
    g->sorted = lw__calloc(a, nv, sizeof(int32_t));
    int32_t *tmp = lw__calloc(a, nv, sizeof(int32_t));
    lw_status st = LW_OK;
    if (!buf || !g->piece_off || !g->eog || !g->sorted || !tmp) {
        st = oom(g);
        goto done;
    }
    /* pieces: as generation prints them (no special tokens' text: those pieces are empty and never allowed) */
    size_t total = 0, pcap = 0;
    for (uint32_t i = 0; i < nv; i++) {
        size_t n = 0;
        g->eog[i] = (uint8_t)(lw_vocab_is_eog(v, (int32_t)i) != 0);
        if (g->eog[i] || lw_token_to_piece(v, (int32_t)i, 0, 0, buf, cap, &n) != LW_OK || n > MAX_PIECE) n = 0;
        if (total + n > UINT32_MAX) {
            st = lw__errorf(g->err, LW_ERR_TOO_LARGE, "grammar: vocabulary text too large");
            goto done;
        }
        if (total + n > pcap) {
            pcap = (total + n) * 2 + 4096;
            uint8_t *np = lw__realloc(a, g->pieces, pcap);
            if (!np) {
                st = oom(g);
                goto done;
            }
            g->pieces = np;
        }
        if (n) memcpy(g->pieces + total, buf, n);
        g->piece_off[i] = (uint32_t)total;
        total += n;
    }
    g->piece_off[nv] = (uint32_t)total;
    if (!g->pieces && !(g->pieces = lw__malloc(a, 1))) {
        st = oom(g);
        goto done;
    }

    /* the trie, preorder: tokens sorted by piece; each piece adds the nodes past its common prefix with the
     * previous one. A node's subtree ends when a later piece leaves its path. */
    uint32_t n_sorted = 0, max_len = 0;
    for (uint32_t i = 0; i < nv; i++)
        if (g->piece_off[i + 1] > g->piece_off[i]) g->sorted[n_sorted++] = (int32_t)i;
    sort_by_piece(g, g->sorted, tmp, n_sorted);
    uint64_t nodes = 1;
    for (uint32_t i = 0; i < n_sorted; i++) {
        uint32_t len = g->piece_off[g->sorted[i] + 1] - g->piece_off[g->sorted[i]], lcp = 0;
        if (len > max_len) max_len = len;
        if (i > 0) {
            const uint8_t *x = g->pieces + g->piece_off[g->sorted[i - 1]], *y = g->pieces + g->piece_off[g->sorted[i]];
            uint32_t lx = g->piece_off[g->sorted[i - 1] + 1] - g->piece_off[g->sorted[i - 1]];
            while (lcp < lx && lcp < len && x[lcp] == y[lcp]) lcp++;
        }
        nodes += len - lcp;
    }
    if (nodes > UINT32_MAX / 2) {
        st = lw__errorf(g->err, LW_ERR_TOO_LARGE, "grammar: vocabulary trie too large");
        goto done;
    }
    g->n_nodes = (uint32_t)nodes;
    g->max_depth = max_len;
    g->nd_byte = lw__calloc(a, nodes, 1);
    g->nd_depth = lw__calloc(a, nodes, sizeof(uint16_t));
    g->nd_skip = lw__calloc(a, nodes, sizeof(uint32_t));
    g->nd_tok = lw__calloc(a, nodes, sizeof(uint32_t));
    g->nd_ntok = lw__calloc(a, nodes, sizeof(uint32_t));
    g->walk = lw__calloc(a, (size_t)max_len + 1, sizeof(uint32_t));
    uint32_t *path = lw__calloc(a, (size_t)max_len + 1, sizeof(uint32_t));
    if (!g->nd_byte || !g->nd_depth || !g->nd_skip || !g->nd_tok || !g->nd_ntok || !g->walk || !path) {
        lw__free(a, path);
        st = oom(g);
        goto done;
    }
    uint32_t n = 1, depth = 0; /* path[0..depth] is the open path; path[0] = root */
    for (uint32_t i = 0; i < n_sorted; i++) {
        int32_t t = g->sorted[i];
        const uint8_t *y = g->pieces + g->piece_off[t];
        uint32_t len = g->piece_off[t + 1] - g->piece_off[t], lcp = 0;
        if (i > 0) {
            const uint8_t *x = g->pieces + g->piece_off[g->sorted[i - 1]];
            uint32_t lx = g->piece_off[g->sorted[i - 1] + 1] - g->piece_off[g->sorted[i - 1]];
            while (lcp < lx && lcp < len && x[lcp] == y[lcp]) lcp++;
        }
        while (depth > lcp) g->nd_skip[path[depth--]] = n; /* close the nodes off the new path */
        for (uint32_t d = lcp + 1; d <= len; d++) {
            g->nd_byte[n] = y[d - 1];
            g->nd_depth[n] = (uint16_t)d;
            path[++depth] = n++;
        }
        uint32_t node = path[len];
        if (g->nd_ntok[node]++ == 0) g->nd_tok[node] = i;
    }
    while (depth > 0) g->nd_skip[path[depth--]] = n;
    g->nd_skip[0] = n;
    lw__free(a, path);

    /* mask cache budget */
    g->max_masks = (uint32_t)(MASK_BUDGET / ((size_t)g->n_words * 4));
    if (g->max_masks < 4) g->max_masks = 4;
    g->scratch = lw__calloc(a, g->n_words, sizeof(uint32_t));
    if (!g->scratch) st = oom(g);
done:
    lw__free(a, buf);
    lw__free(a, tmp);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * Masks
 * ------------------------------------------------------------------------------------------------------- */

/* Writes the allowed-token bits of state id to bits (n_words words). Most of a step's time is here on a
 * cache miss: one pass over the trie nodes that the grammar lets through. */
static lw_status compute_mask(lw_grammar *g, uint32_t id, uint32_t *bits) {
    memset(bits, 0, (size_t)g->n_words * 4);
    uint32_t *ws = g->walk;
    ws[0] = id;
    const uint8_t *nb = g->nd_byte;
    const uint16_t *nd = g->nd_depth;
    for (uint32_t i = 1; i < g->n_nodes;) {
        uint32_t d = nd[i], s = trans(g, ws[d - 1], nb[i]);
        if (s == UNKNOWN) return too_large(g, "too many parse states (grammar too ambiguous or caches over budget)");
        if (s == 0) {
            i = g->nd_skip[i];
            continue;
        }
        ws[d] = s;
        for (uint32_t k = 0; k < g->nd_ntok[i]; k++) {
            uint32_t t = (uint32_t)g->sorted[g->nd_tok[i] + k];
            bits[t >> 5] |= 1u << (t & 31);
        }
        i++;
    }
    if (g->st[id].accept)
        for (int32_t t = 0; t < g->n_vocab; t++)
            if (g->eog[t]) bits[t >> 5] |= 1u << (t & 31);
    return LW_OK;
}

lw_status lw__grammar_mask_ref(lw_grammar *g, const uint32_t **bits) {
    if (g->failed) return LW_ERR_TOO_LARGE;
    if (!g->vocab) return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "grammar: made without a vocabulary");
    if (g->done) { /* after the end: nothing */
        memset(g->scratch, 0, (size_t)g->n_words * 4);
        *bits = g->scratch;
        return LW_OK;
    }
    lw_status st = maybe_flush(g);
    if (st != LW_OK) return st;
    uint32_t m = g->st[g->cur].mask;
    if (m) {
        *bits = g->masks + (size_t)(m - 1) * g->n_words;
        return LW_OK;
    }
    uint32_t id = g->cur;
    if (g->n_masks < g->max_masks && grow(g, (void **)&g->masks, &g->cap_masks, (size_t)g->n_words * 4, g->n_masks + 1)) {
        uint32_t *dst = g->masks + (size_t)g->n_masks * g->n_words;
        if ((st = compute_mask(g, id, dst)) != LW_OK) return st;
        g->st[id].mask = ++g->n_masks;
        *bits = dst;
        return LW_OK;
    }
    if ((st = compute_mask(g, id, g->scratch)) != LW_OK) return st;
    *bits = g->scratch;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Public API
 * ------------------------------------------------------------------------------------------------------- */

static lw_status finish_create(lw_grammar *g) {
    lw_status st;
    if (g->vocab && (st = build_vocab(g)) != LW_OK) return st;
    uint32_t s = start_state(g);
    if (s == UNKNOWN) return too_large(g, "the start expands to too many parse stacks (too ambiguous) or memory ran out");
    g->cur = s;
    return LW_OK;
}

static lw_status create(const lw_allocator *alloc, lw_grammar **out) {
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_grammar *g = lw__calloc(&a, 1, sizeof *g);
    *out = g;
    if (!g) return LW_ERR_NOMEM;
    g->alloc = a;
    return LW_OK;
}

lw_status lw__grammar_failed(const lw_allocator *alloc, lw_status st, const char *msg, lw_grammar **out) {
    lw_status c = create(alloc, out);
    if (c != LW_OK) return c;
    (*out)->failed = 1;
    return lw__errorf((*out)->err, st, "%s", msg);
}

lw_status lw_grammar_parse(const char *gbnf, size_t len, const char *root, const lw_vocab *vocab,
                           const lw_allocator *alloc, lw_grammar **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    lw_status st = create(alloc, out);
    if (st != LW_OK) return st;
    lw_grammar *g = *out;
    g->vocab = vocab;
    if (!gbnf) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_grammar_parse: NULL text");
    if ((st = lw__gbnf_parse(gbnf, len, root, &g->alloc, &g->prog, g->err)) != LW_OK) {
        g->failed = 1;
        return st;
    }
    if ((st = finish_create(g)) != LW_OK) g->failed = 1;
    return st;
}

lw_status lw_grammar_from_json_schema(const char *schema, size_t len, const lw_vocab *vocab,
                                      const lw_allocator *alloc, lw_grammar **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    lw_status st = create(alloc, out);
    if (st != LW_OK) return st;
    lw_grammar *g = *out;
    g->vocab = vocab;
    char *text = NULL;
    size_t n = 0;
    if ((st = lw__json_schema_to_gbnf(schema, len, &g->alloc, &text, &n, g->err)) == LW_OK) {
        st = lw__gbnf_parse(text, n, "root", &g->alloc, &g->prog, g->err);
        if (st == LW_OK) st = finish_create(g);
    }
    lw__free(&g->alloc, text);
    if (st != LW_OK) g->failed = 1;
    return st;
}

lw_status lw_json_schema_to_gbnf(const char *schema, size_t len, const lw_allocator *alloc, char **out,
                                 size_t *out_len, char *err, size_t err_size) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    lw_allocator a = lw__allocator_or_default(alloc);
    char msg[LW_ERRMSG_SIZE];
    size_t n = 0;
    lw_status st = lw__json_schema_to_gbnf(schema, len, &a, out, &n, msg);
    if (out_len) *out_len = n;
    if (st != LW_OK && err && err_size) {
        size_t k = strlen(msg);
        if (k >= err_size) k = err_size - 1;
        memcpy(err, msg, k);
        err[k] = 0;
    }
    return st;
}

void lw_grammar_text_free(const lw_allocator *alloc, char *text) {
    lw_allocator a = lw__allocator_or_default(alloc);
    lw__free(&a, text);
}

void lw_grammar_free(lw_grammar *g) {
    if (!g) return;
    lw_allocator a = g->alloc;
    lw__gprog_free(&a, &g->prog);
    void *ptrs[] = {g->piece_off, g->pieces,   g->eog,       g->nd_byte,  g->nd_depth, g->nd_skip, g->nd_tok,
                    g->nd_ntok,   g->sorted,   g->walk,      g->stk_pos,  g->stk_parent, g->stk_hash, g->visit,
                    g->work,      g->out,      g->set_words, g->set_off,  g->set_len,  g->set_hash, g->st,
                    g->st_hash,   g->blocks,   g->masks,     g->scratch};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) lw__free(&a, ptrs[i]);
    lw__free(&a, g);
}

const char *lw_grammar_error(const lw_grammar *g) {
    return g ? g->err : "NULL grammar";
}

lw_status lw_grammar_reset(lw_grammar *g) {
    if (!g) return LW_ERR_INVALID_ARG;
    if (g->failed) return LW_ERR_TOO_LARGE;
    g->done = 0;
    uint32_t s = start_state(g);
    if (s == UNKNOWN) return too_large(g, "out of parse states");
    g->cur = s;
    return LW_OK;
}

int32_t lw_grammar_n_vocab(const lw_grammar *g) {
    return g && g->vocab ? g->n_vocab : 0;
}

lw_status lw_grammar_mask(lw_grammar *g, uint32_t *bits, size_t n_words) {
    if (!g || !bits) return LW_ERR_INVALID_ARG;
    if (g->vocab && n_words < g->n_words)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "lw_grammar_mask: %zu words, need %u", n_words, g->n_words);
    const uint32_t *m = NULL;
    lw_status st = lw__grammar_mask_ref(g, &m);
    if (st == LW_OK) memcpy(bits, m, (size_t)g->n_words * 4);
    return st;
}

lw_status lw_grammar_apply(lw_grammar *g, float *logits) {
    if (!g || !logits) return LW_ERR_INVALID_ARG;
    const uint32_t *m = NULL;
    lw_status st = lw__grammar_mask_ref(g, &m);
    if (st != LW_OK) return st;
    for (int32_t t = 0; t < g->n_vocab; t++)
        if (!(m[t >> 5] >> (t & 31) & 1)) logits[t] = -INFINITY;
    return LW_OK;
}

/* Steps the current state over bytes; LW_ERR_INVALID_ARG (state kept) when the grammar does not allow them. */
static lw_status step_bytes(lw_grammar *g, const uint8_t *s, size_t n) {
    lw_status st = maybe_flush(g);
    if (st != LW_OK) return st;
    uint32_t id = g->cur;
    for (size_t i = 0; i < n; i++) {
        id = trans(g, id, s[i]);
        if (id == UNKNOWN) return too_large(g, "too many parse states");
        if (id == 0) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: byte %zu of the text is not allowed", i);
    }
    g->cur = id;
    return LW_OK;
}

lw_status lw_grammar_accept_text(lw_grammar *g, const char *text, size_t len) {
    if (!g || (!text && len)) return LW_ERR_INVALID_ARG;
    if (g->failed) return LW_ERR_TOO_LARGE;
    if (g->done) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: text after the end");
    return step_bytes(g, (const uint8_t *)text, len);
}

lw_status lw_grammar_accept_token(lw_grammar *g, int32_t token) {
    if (!g) return LW_ERR_INVALID_ARG;
    if (g->failed) return LW_ERR_TOO_LARGE;
    if (!g->vocab) return lw__errorf(g->err, LW_ERR_UNSUPPORTED, "grammar: made without a vocabulary");
    if (token < 0 || token >= g->n_vocab) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: token %d out of range", token);
    if (g->done) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: token %d after the end", token);
    if (g->eog[token]) {
        if (!g->st[g->cur].accept)
            return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: end of generation before the grammar is complete");
        g->done = 1;
        return LW_OK;
    }
    uint32_t n = g->piece_off[token + 1] - g->piece_off[token];
    if (n == 0) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "grammar: token %d has no text", token);
    return step_bytes(g, g->pieces + g->piece_off[token], n);
}

int lw_grammar_is_complete(const lw_grammar *g) {
    return g && !g->failed && (g->done || g->st[g->cur].accept);
}

int lw_grammar_is_finished(const lw_grammar *g) {
    if (!g || g->failed) return 0;
    if (g->done) return 1;
    const dstate *d = &g->st[g->cur];
    return d->accept && g->set_len[d->set] == 1; /* only the empty stack: nothing can follow */
}
