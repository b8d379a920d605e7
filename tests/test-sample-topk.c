/* The sampler's top-k selection on large vocabularies and hostile orders: every draw must come from the
 * exact top k (logit descending, ties to the lower id, worked out here by a full sort), every member of a
 * small top k must be drawn, and top-p after top-k must see the kept candidates in sorted order (its cut is
 * worked out here from the sorted probabilities). Covers both selection paths of sort_top (the heap for
 * k * 16 <= n and the partition select for larger k), also with half the logits at -infinity (as a mask
 * leaves them). Also prints the time of one sample (the sampler's cost per token next to a decode step). */
#include "sample/sample.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct ranked {
    int32_t id;  /* token id */
    float logit; /* its logit */
} ranked;

static int rank_cmp(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Logits of one order kind: 0 random with many ties, 1 ascending, 2 descending, 3 all equal, 4 a V. */
static void fill(float *l, int32_t n, int kind, uint32_t seed) {
    for (int32_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        switch (kind) {
        case 0:
            l[i] = (float)((seed >> 8) % 997) * 0.01f;
            break;
        case 1:
            l[i] = (float)i * 1e-3f;
            break;
        case 2:
            l[i] = -(float)i * 1e-3f;
            break;
        case 3:
            l[i] = 1.0f;
            break;
        default:
            l[i] = fabsf((float)(i - n / 2)) * 1e-3f;
            break;
        }
    }
}

/* Draws from a sampler with top_k = k (top_p as given) and checks every draw against the exact set. */
static void check_topk(const float *l, int32_t n, int32_t k, float top_p, int every_other, int kind) {
    ranked *r = malloc(sizeof(ranked) * (size_t)n);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (!every_other || i % 2 == 0) r[m++] = (ranked){i, l[i]};
    qsort(r, (size_t)m, sizeof(ranked), rank_cmp);
    int32_t keep = k < m ? k : m;
    /* temperature 1000 after top-k and top-p: nearly uniform over the kept ones, so all get drawn */
    const float temp = 1000.0f;
    if (top_p < 1.0f) { /* llama.cpp's top-p on the softmax of the top-k candidates (before temperature) */
        double sum = 0, cum = 0;
        for (int32_t i = 0; i < keep; i++) sum += exp((double)r[i].logit - (double)r[0].logit);
        for (int32_t i = 0; i < keep; i++) {
            cum += exp((double)r[i].logit - (double)r[0].logit) / sum;
            if (cum >= top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    uint8_t *in = calloc((size_t)n, 1), *seen = calloc((size_t)n, 1);
    for (int32_t i = 0; i < keep; i++) in[r[i].id] = 1;

    lw_sampler_params p = lw_sampler_default_params();
    p.temp = temp;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = 0.0f;
    p.penalty_last_n = 0;
    lw_sampler *s = NULL;
    CHECK(lw_sampler_create(n, &p, NULL, &s) == LW_OK);
    if (every_other) { /* the odd tokens masked out */
        float *masked = malloc(sizeof(float) * (size_t)n);
        for (int32_t i = 0; i < n; i++) masked[i] = i % 2 == 0 ? l[i] : -INFINITY;
        l = masked;
    }
    const int draws = keep <= 64 ? 15 * keep + 100 : 60;
    int bad = 0, n_seen = 0;
    for (int d = 0; d < draws; d++) {
        int32_t id = lw_sampler_sample(s, l);
        if (id < 0 || id >= n || !in[id]) {
            bad++;
            continue;
        }
        n_seen += !seen[id];
        seen[id] = 1;
    }
    CHECK_MSG(bad == 0, "n %d k %d top_p %.2f order %d: %d of %d draws outside the exact kept set", n, k,
              (double)top_p, kind, bad, draws);
    if (keep <= 64)
        CHECK_MSG(n_seen == keep, "n %d k %d top_p %.2f order %d: %d of the %d kept tokens drawn", n, k,
                  (double)top_p, kind, n_seen, keep);
    if (every_other) free((void *)l);
    lw_sampler_free(s);
    free(in);
    free(seen);
    free(r);
}

int main(void) {
    static const int32_t sizes[] = {300, 5000, 32000, 152064};
    /* under the sanitizers (scripts/test.sh sets LW_TEST_SANITIZED; 4x slower here) the 152k vocabulary is
     * left to the release run */
    const int light = getenv("LW_TEST_SANITIZED") != NULL;
    if (light) printf("LW_TEST_SANITIZED: the 152k-token vocabulary is skipped in this run\n");
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0] - (size_t)light; si++) {
        const int32_t n = sizes[si];
        float *l = malloc(sizeof(float) * (size_t)n);
        const int32_t ks[] = {1, 2, 40, n / 16, n / 16 + 1, n / 3, n};
        const int big = n > 100000; /* the 150k vocabulary: two orders, k = 40 (cheap under sanitizers too) */
        for (int kind = 0; kind < (big ? 2 : 5); kind++) {
            fill(l, n, kind, 7u + (uint32_t)kind);
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                if (ks[ki] <= 0 || (n > 5000 && ks[ki] > 40 && ks[ki] != n / 16 + 1))
                    continue; /* keep it cheap */
                if (big && ks[ki] != 40) continue;
                check_topk(l, n, ks[ki], 1.0f, 0, kind);
            }
            check_topk(l, n, 40, 1.0f, 1, kind);
        }
        /* top-p after top-k, on distinct logits spread enough that the cut falls inside the top 40 */
        for (int32_t i = 0; i < n; i++) l[i] = (float)((i * 7919) % n) * (8.0f / (float)n);
        check_topk(l, n, 40, 0.9f, 0, 9);
        if (!big) check_topk(l, n, 2000 < n ? 2000 : n, 0.5f, 0, 9);
        free(l);
    }

    /* the time of one sample with llama.cpp's default chain (top-k 40 ... temperature 0.8) */
    static const int32_t vocabs[] = {32000, 152064};
    for (size_t vi = 0; vi < 2; vi++) {
        const int32_t n = vocabs[vi];
        float *l = malloc(sizeof(float) * (size_t)n);
        fill(l, n, 0, 3);
        lw_sampler_params p = lw_sampler_default_params();
        lw_sampler *s = NULL;
        CHECK(lw_sampler_create(n, &p, NULL, &s) == LW_OK);
        const int reps = 200;
        double t0 = now();
        for (int i = 0; i < reps; i++) lw_sampler_sample(s, l);
        printf("one sample over %d logits (top-k 40, top-p 0.95, min-p 0.05, temp 0.8): %.3f ms\n", n,
               1e3 * (now() - t0) / reps);
        lw_sampler_free(s);
        free(l);
    }
    return test_summary("test-sample-topk");
}
