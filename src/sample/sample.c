/* The sampler chain (see sample.h). Semantics follow llama.cpp's samplers (llama-sampler.cpp): top-p keeps
 * the smallest prefix of the sorted candidates whose probability reaches p; min-p keeps logits within
 * log(min_p) of the best; temperature divides logits. Our RNG differs from llama.cpp's (mt19937), so
 * seeded draws are reproducible here but not identical to llama.cpp's. */
#include "sample/sample.h"

#include "core/core.h"
#include "grammar/grammar.h"

#include <math.h>
#include <string.h>

/* One candidate token. */
typedef struct cand {
    int32_t id;  /* token id          */
    float logit; /* adjusted logit    */
} cand;

struct lw_sampler {
    lw_allocator alloc;   /* allocator of this object and its buffers           */
    lw_sampler_params p;  /* configuration                                       */
    int32_t n_vocab;      /* logits per call                                     */
    cand *c;              /* n_vocab candidates                                  */
    float *prob;          /* n_vocab probabilities of the kept candidates        */
    int32_t *counts;      /* n_vocab: occurrences in the penalty window           */
    int32_t *ring;        /* penalty_last_n last accepted tokens                  */
    int32_t ring_n;       /* tokens in ring                                       */
    int32_t ring_head;    /* next slot to write                                   */
    uint64_t rng[4];      /* xoshiro256** state                                   */
    lw_grammar *grammar;  /* optional constraint (not owned)                      */
    int32_t last_sampled; /* the token lw_sampler_sample returned last; -1: none  */
};

lw_sampler_params lw_sampler_default_params(void) {
    lw_sampler_params p;
    p.temp = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.penalty_last_n = 64;
    p.penalty_repeat = 1.0f;
    p.penalty_freq = 0.0f;
    p.penalty_present = 0.0f;
    p.seed = 0x5eed;
    return p;
}

/* ---------------------------------------------------------------------------------------------------------
 * RNG: xoshiro256** seeded through splitmix64 (fast, 256-bit state, no allocation)
 * ------------------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *s) {
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* The generator on its own (sample.h), for samplers that draw elsewhere (the GPU's, src/webgpu): the same
 * seeding and the same numbers as a sampler reset with seed and its draws. */
void lw__sampler_rng_seed(uint64_t state[4], uint64_t seed) {
    for (int i = 0; i < 4; i++) state[i] = splitmix64(&seed);
}

double lw__sampler_rng_uniform(uint64_t state[4]) {
    return rng_uniform(state);
}

/* ---------------------------------------------------------------------------------------------------------
 * Sorting candidates by logit, descending (ties: lower id first). Our own in-place sort: the C library's
 * qsort may allocate.
 * ------------------------------------------------------------------------------------------------------- */

static int before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Partitions c[lo..hi] around a median-of-three pivot; returns the pivot's final index. */
static int32_t partition(cand *c, int32_t lo, int32_t hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (before(&c[mid], &c[lo])) swap(&c[mid], &c[lo]);
    if (before(&c[hi], &c[lo])) swap(&c[hi], &c[lo]);
    if (before(&c[hi], &c[mid])) swap(&c[hi], &c[mid]);
    swap(&c[mid], &c[hi]); /* pivot (the median) at hi */
    int32_t s = lo;
    for (int32_t i = lo; i < hi; i++)
        if (before(&c[i], &c[hi])) swap(&c[i], &c[s++]);
    swap(&c[s], &c[hi]);
    return s;
}

/* Quickselect that sorts only what is wanted: puts the first k (in sort order) of c[0..n) at the front,
 * sorted. A partition whose pivot lands at k or later drops its right side; one that lands before k leaves
 * a left side wanted whole. Recursion goes to the smaller side only (depth O(log n)); the larger loops. */
static void select_sort(cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (hi - lo > 16) {
        int32_t p = partition(c, lo, hi);
        if (p >= k) { /* all wanted ones are left of the pivot */
            hi = p - 1;
            continue;
        }
        /* c[lo..p) is wanted whole (p itself is in place), of c(p..hi] the first k - p - 1 */
        if (p - lo < hi - p) {
            select_sort(c + lo, p - lo, p - lo);
            lo = p + 1;
        } else {
            if (p + 1 < k) select_sort(c + p + 1, hi - p, k - p - 1);
            hi = p - 1;
            k = p; /* what is left, c[lo..p), is wanted whole */
        }
    }
    for (int32_t i = lo + 1; i <= hi; i++) /* insertion sort for the small rest */
        for (int32_t j = i; j > lo && before(&c[j], &c[j - 1]); j--) swap(&c[j], &c[j - 1]);
}

/* Rearranges c[0..n) so that c[k - 1] is the k-th in sort order and everything before it comes before it
 * (quickselect; 1 <= k <= n). */
static void nth(cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (hi > lo) {
        int32_t p = partition(c, lo, hi);
        if (p == k - 1) return;
        if (p > k - 1)
            hi = p - 1;
        else
            lo = p + 1;
    }
}

/* Puts the first k (in sort order) of c[0..n) at the front, sorted; the order of the rest is unspecified.
 * A small k (top-k 40 over a 32k..150k vocabulary) scans once with a buffer of 2k candidates at the front:
 * a candidate that does not beat the k-th best of the buffer's last selection is out after one comparison
 * (a well-predicted branch: almost all are), one that does joins the buffer, and a full buffer is cut back
 * to its best k. Linear even for sorted input (a buffer fills at most every k candidates and costs O(k) to
 * cut). Partition-based selection over the whole array (each comparison a coin flip for the branch
 * predictor, a few passes) cost 5-10x more there; it remains for large k. */
static void sort_top(cand *c, int32_t n, int32_t k) {
    if (k > n) k = n;
    if (k <= 0) return;
    if ((int64_t)k * 16 > n) {
        select_sort(c, n, k);
        return;
    }
    int32_t b = 2 * k; /* the buffer c[0..b); c[k - 1] is the bar after each cut */
    nth(c, b, k);
    b = k;
    for (int32_t i = 2 * k; i < n; i++)
        if (before(&c[i], &c[k - 1])) {
            swap(&c[b++], &c[i]);
            if (b == 2 * k) {
                nth(c, b, k);
                b = k;
            }
        }
    nth(c, b, k);
    select_sort(c, k, k);
}

/* ---------------------------------------------------------------------------------------------------------
 * The chain
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw_sampler_create(int32_t n_vocab, const lw_sampler_params *params, const lw_allocator *alloc,
                            lw_sampler **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (n_vocab <= 0) return LW_ERR_INVALID_ARG;
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_sampler *s = lw__calloc(&a, 1, sizeof(*s));
    if (!s) return LW_ERR_NOMEM;
    s->alloc = a;
    s->p = params ? *params : lw_sampler_default_params();
    if (s->p.penalty_last_n < 0) s->p.penalty_last_n = 0;
    s->n_vocab = n_vocab;
    s->c = lw__calloc(&a, (size_t)n_vocab, sizeof(cand));
    s->prob = lw__calloc(&a, (size_t)n_vocab, sizeof(float));
    s->counts = lw__calloc(&a, (size_t)n_vocab, sizeof(int32_t));
    s->ring = lw__calloc(&a, (size_t)s->p.penalty_last_n + 1, sizeof(int32_t));
    if (!s->c || !s->prob || !s->counts || !s->ring) {
        lw_sampler_free(s);
        return LW_ERR_NOMEM;
    }
    s->last_sampled = -1;
    lw_sampler_reset(s, s->p.seed);
    *out = s;
    return LW_OK;
}

void lw_sampler_free(lw_sampler *s) {
    if (!s) return;
    lw_allocator a = s->alloc;
    lw__free(&a, s->c);
    lw__free(&a, s->prob);
    lw__free(&a, s->counts);
    lw__free(&a, s->ring);
    lw__free(&a, s);
}

void lw_sampler_reset(lw_sampler *s, uint64_t seed) {
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof(int32_t));
    s->ring_n = s->ring_head = 0;
    s->p.seed = seed;
    s->last_sampled = -1;
    if (s->grammar) lw_grammar_reset(s->grammar);
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

lw_status lw_sampler_set_grammar(lw_sampler *s, lw_grammar *g) {
    if (!s) return LW_ERR_INVALID_ARG;
    if (g && (lw_grammar_n_vocab(g) <= 0 || lw_grammar_n_vocab(g) > s->n_vocab)) return LW_ERR_INVALID_ARG;
    s->grammar = g;
    s->last_sampled = -1;
    return LW_OK;
}

void lw_sampler_accept(lw_sampler *s, int32_t token) {
    /* the grammar moves only by the token just sampled (prompt tokens come here too, for the penalties) */
    if (s->grammar && token >= 0 && token == s->last_sampled) lw_grammar_accept_token(s->grammar, token);
    s->last_sampled = -1;
    const int32_t cap = s->p.penalty_last_n;
    if (cap <= 0 || token < 0 || token >= s->n_vocab) return;
    if (s->ring_n == cap)
        s->counts[s->ring[s->ring_head]]--; /* the oldest leaves the window */
    else
        s->ring_n++;
    s->ring[s->ring_head] = token;
    s->ring_head = (s->ring_head + 1) % cap;
    s->counts[token]++;
}

/* Softmax of the first n candidates (sorted, so c[0] is the max) into prob; returns nothing. */
static void softmax(lw_sampler *s, int32_t n) {
    const float mx = s->c[0].logit;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += s->prob[i] = expf(s->c[i].logit - mx);
    for (int32_t i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
}

int32_t lw_sampler_sample(lw_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const lw_sampler_params *p = &s->p;
    int32_t n = s->n_vocab;
    s->last_sampled = -1;
    if (s->grammar) { /* only the tokens the grammar allows are candidates */
        const uint32_t *bits;
        if (lw__grammar_mask_ref(s->grammar, &bits) != LW_OK) return -1;
        const int32_t ng = lw_grammar_n_vocab(s->grammar);
        n = 0;
        for (int32_t w = 0; w < (ng + 31) / 32; w++) {
            const uint32_t m0 = bits[w];
            if (m0 == UINT32_MAX) { /* inside a string most words allow all 32: no bit scan */
                for (int32_t i = w * 32; i < w * 32 + 32; i++) s->c[n++] = (cand){i, logits[i]};
                continue;
            }
            for (uint32_t m = m0; m; m &= m - 1) {
                int32_t i = w * 32 + __builtin_ctz(m);
                s->c[n++] = (cand){i, logits[i]};
            }
        }
        if (n == 0) return -1;
    } else {
        for (int32_t i = 0; i < n; i++) s->c[i] = (cand){i, logits[i]};
    }

    /* penalties, for tokens seen in the window */
    if (p->penalty_last_n > 0 && s->ring_n > 0 &&
        (p->penalty_repeat != 1.0f || p->penalty_freq != 0.0f || p->penalty_present != 0.0f))
        for (int32_t i = 0; i < n; i++) {
            int32_t cnt = s->counts[s->c[i].id];
            if (cnt <= 0) continue;
            float l = s->c[i].logit;
            l = l <= 0 ? l * p->penalty_repeat : l / p->penalty_repeat;
            s->c[i].logit = l - (float)cnt * p->penalty_freq - p->penalty_present;
        }

    if (p->temp <= 0.0f) { /* greedy */
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (before(&s->c[i], &s->c[best])) best = i;
        return s->last_sampled = s->c[best].id;
    }

    /* top-k (sorts the kept prefix; everything later needs sorted candidates) */
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    sort_top(s->c, n, k);
    n = k;

    /* top-p on the softmax of the current logits */
    if (p->top_p < 1.0f) {
        softmax(s, n);
        double cum = 0;
        for (int32_t i = 0; i < n; i++) {
            cum += s->prob[i];
            if (cum >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    /* min-p: p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p) */
    if (p->min_p > 0.0f) {
        const float cut = s->c[0].logit + logf(p->min_p);
        int32_t keep = 1;
        while (keep < n && s->c[keep].logit >= cut) keep++;
        n = keep;
    }
    /* temperature, then draw */
    for (int32_t i = 0; i < n; i++) s->c[i].logit /= p->temp;
    softmax(s, n);
    double u = rng_uniform(s->rng), cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += s->prob[i];
        if (u < cum) return s->last_sampled = s->c[i].id;
    }
    return s->last_sampled = s->c[n - 1].id; /* rounding left u above the total */
}
