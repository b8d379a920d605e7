/* A counting allocator for the tests (lw_allocator hooks): calls and live blocks, and optionally a call that
 * fails (fault injection). Shared by test-fault-inject.c and test-long-run.c. */
#ifndef LW_TEST_ALLOC_COUNTER_H
#define LW_TEST_ALLOC_COUNTER_H

#include "llamaweb.h"

#include <stdlib.h>

typedef struct alloc_counter {
    long calls;   /* malloc + realloc calls so far            */
    long live;    /* blocks not yet freed                     */
    long fail_at; /* 1-based call that fails; 0: none         */
    long failed;  /* calls that failed (1 at most per run)    */
} alloc_counter;

static void *ac_malloc(void *u, size_t n) {
    alloc_counter *c = u;
    if (++c->calls == c->fail_at) {
        c->failed++;
        return NULL;
    }
    void *p = malloc(n ? n : 1);
    if (p) c->live++;
    return p;
}
static void *ac_realloc(void *u, void *p, size_t n) {
    alloc_counter *c = u;
    if (++c->calls == c->fail_at) {
        c->failed++;
        return NULL;
    }
    void *q = realloc(p, n ? n : 1);
    if (q && !p) c->live++;
    return q;
}
static void ac_free(void *u, void *p) {
    alloc_counter *c = u;
    if (p) c->live--;
    free(p);
}

/* The hooks over counter c. */
static inline lw_allocator alloc_counter_hooks(alloc_counter *c) {
    lw_allocator a = {ac_malloc, ac_realloc, ac_free, c};
    return a;
}

#endif
