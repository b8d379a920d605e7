/* The greedy run shared by the row store's engine tests (test-rows-engine.c, test-rows-tables.c): a prompt,
 * then n_gen greedy tokens, timed, and the allocator calls made while decoding. */
#ifndef LW_TESTS_ROWS_GREEDY_H
#define LW_TESTS_ROWS_GREEDY_H

#include "llamaweb.h"
#include "alloc-counter.h"

#include <stdio.h>
#include <time.h>

static double rows_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t rows_argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Decodes prompt, then n_gen greedy ids into toks (*n of them); *tps their rate, *decode_allocs the calls ac
 * saw from the first decode on. The first failure is returned (its message printed). */
static lw_status rows_greedy(lw_context *c, const alloc_counter *ac, const int32_t *prompt, int n_prompt,
                             int n_gen, int32_t *toks, int *n, double *tps, long *decode_allocs) {
    const int32_t n_vocab = lw_model_n_vocab(lw_context_model(c));
    const long calls0 = ac->calls;
    lw_status st = lw_decode(c, prompt, n_prompt, 0);
    if (st != LW_OK) return st;
    const double t0 = rows_now_s();
    int32_t tok = rows_argmax(lw_get_logits(c, -1), n_vocab);
    for (int i = 0; i < n_gen; i++) {
        toks[(*n)++] = tok;
        if (i + 1 == n_gen) break;
        if ((st = lw_decode(c, &tok, 1, 0)) != LW_OK) {
            fprintf(stderr, "decode: %s\n", lw_context_error(c));
            return st;
        }
        tok = rows_argmax(lw_get_logits(c, -1), n_vocab);
    }
    const double t1 = rows_now_s();
    *tps = (n_gen - 1) / (t1 - t0 > 0 ? t1 - t0 : 1e-9);
    *decode_allocs = ac->calls - calls0;
    return LW_OK;
}

/* Whether two runs generated the same ids (the first difference printed). */
static int rows_same_tokens(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "tokens differ at %d: %d vs %d\n", i, a[i], b[i]);
            return 0;
        }
    return 1;
}

#endif
