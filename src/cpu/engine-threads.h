/* A small pthread pool for the CPU engine: n_threads - 1 workers plus the calling thread run one function
 * together (each gets its index ith of nth), with a barrier for the steps inside it (it spins, then sleeps on
 * a futex). Created once per context; running work allocates nothing. */
#ifndef LW_ENGINE_THREADS_H
#define LW_ENGINE_THREADS_H

#include "core/core.h"

typedef struct lw__pool lw__pool;

/* The work: called once on each of nth threads (ith = 0 is the caller's thread). */
typedef void (*lw__pool_fn)(void *arg, int ith, int nth);

/* Starts n_threads - 1 workers (n_threads >= 1; 1 means no workers, everything runs on the caller). */
lw_status lw__pool_create(const lw_allocator *alloc, int n_threads, lw__pool **out);
/* Stops and joins the workers, frees the pool. NULL is fine. */
void lw__pool_free(lw__pool *p);
int lw__pool_n_threads(const lw__pool *p);
/* Runs fn(arg, ith, nth) on every thread and returns when all have finished. */
void lw__pool_run(lw__pool *p, lw__pool_fn fn, void *arg);
/* Waits inside a running fn until every thread of the pool has reached the same barrier. */
void lw__pool_barrier(lw__pool *p);
/* Ticket `which` (0 or 1) of the running fn: threads take shares of a step's work in the order of
 * lw__pool_ticket_take's returns (0, 1, 2, ...). lw__pool_run zeroes both; a step between two barriers uses
 * one while a thread zeroes the other for the next step (lw__pool_ticket_reset): neither is reset in use. */
unsigned lw__pool_ticket_take(lw__pool *p, int which);
void lw__pool_ticket_reset(lw__pool *p, int which);

#endif
