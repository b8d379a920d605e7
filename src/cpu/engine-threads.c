/* Thread pool for the CPU engine (see engine-threads.h).
 *
 * Workers sleep on a condition variable between runs (a decode step is one run), so an idle context costs
 * no CPU. Inside a run the threads meet at a barrier after every graph node. Nodes of small models last
 * microseconds, so a waiter first spins; natively it then yields for a while. A waiter that is still waiting
 * after that sleeps on a futex (Linux, Emscripten's pthreads), woken by the last thread to arrive: when the
 * cores are shared with other work (or are fewer than the threads) a waiter that kept spinning would take the
 * core from the very thread it waits for. In wasm sched_yield does nothing, so there the spin goes straight
 * to the futex; on the browser's main thread emscripten_futex_wait itself spins (Atomics.wait is not
 * allowed there), while the pool's workers really sleep. */
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#define _DEFAULT_SOURCE /* syscall() */
#endif
#include "cpu/engine-threads.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#if defined(__EMSCRIPTEN__)
#include <emscripten/threading.h>
#include <math.h>
#elif defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Waits before a sleep. Natively a barrier's waiter polls the phase BAR_SPINS times, then yields BAR_YIELDS
 * times. In wasm a yield returns at once and a poll's cost depends on the engine (2^14 polls took ~5 us in
 * V8, less than a tiny model's node, so most waits slept), so there the waiter polls for BAR_SPIN_MS: more
 * than a node's imbalance between threads, little against the milliseconds a thread loses when the
 * scheduler takes its core. Workers between runs poll for RUN_POLL_MS in wasm before they sleep, since
 * waking a worker from Atomics.wait took ~0.2-1 ms there (every decode step of a small model paid it);
 * natively they sleep at once, as they always did. */
enum { BAR_SPINS = 2000, BAR_YIELDS = 200 };
#if defined(__EMSCRIPTEN__)
#define BAR_SPIN_MS 0.2
#define RUN_POLL_MS 1.0
#else
#define BAR_SPIN_MS 0.0
#define RUN_POLL_MS 0.0
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Pool state
 * ------------------------------------------------------------------------------------------------------- */

struct lw__pool {
    lw_allocator alloc;      /* where this struct came from                                    */
    int n_threads;           /* workers + the caller                                           */
    pthread_t *threads;      /* n_threads - 1 worker handles                                   */
    pthread_mutex_t mu;      /* guards stop, and generation's changes for workers that sleep   */
    pthread_cond_t cv_start; /* workers wait here for a new generation                         */
    atomic_uint generation;  /* bumped by each run (read unlocked by workers polling for a run) */
    int stop;                /* set by lw__pool_free                                           */
    lw__pool_fn fn;          /* the current work                                               */
    void *arg;               /* its argument                                                   */
    atomic_int bar_count;    /* threads arrived at the current barrier                         */
    atomic_uint bar_phase;   /* +1 each time a barrier completes (the futex word)              */
    atomic_int bar_sleepers; /* waiters in (or about to enter) a futex wait on bar_phase       */
    atomic_uint ticket[2];   /* lw__pool_ticket_take's counters                                */
};

/* A worker's start argument: the pool and the worker's thread index. */
typedef struct worker_arg {
    lw__pool *pool; /* owning pool           */
    int ith;        /* 1 .. n_threads - 1    */
} worker_arg;

static int spin_while(const atomic_uint *word, unsigned val, int polls, int yields, double ms);

static void *worker_main(void *p) {
    worker_arg *wa = p;
    lw__pool *pool = wa->pool;
    int ith = wa->ith;
    unsigned seen = 0;
    for (;;) {
        /* wasm: catch the next step awake; else sleep until it comes (or the pool stops) */
        if (!spin_while(&pool->generation, seen, 0, 0, RUN_POLL_MS)) {
            pthread_mutex_lock(&pool->mu);
            while (!pool->stop && atomic_load_explicit(&pool->generation, memory_order_relaxed) == seen)
                pthread_cond_wait(&pool->cv_start, &pool->mu);
            const int stop = pool->stop;
            pthread_mutex_unlock(&pool->mu);
            if (stop) break;
        }
        /* fn and arg were written before the generation's release; the next run's come after this run's last
         * barrier, which this worker reaches after reading them */
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        lw__pool_fn fn = pool->fn;
        void *arg = pool->arg;

        fn(arg, ith, pool->n_threads);
        lw__pool_barrier(pool); /* the run ends when every thread has left fn */
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * Public functions
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__pool_create(const lw_allocator *alloc, int n_threads, lw__pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 512) return LW_ERR_INVALID_ARG;
    lw_allocator a = lw__allocator_or_default(alloc);
    /* The thread handles and worker args live right after the pool struct: one allocation. */
    size_t n_workers = (size_t)n_threads - 1, bytes;
    if (!lw__mul_size(n_workers, sizeof(pthread_t) + sizeof(worker_arg), &bytes) ||
        !lw__add_size(bytes, sizeof(lw__pool), &bytes))
        return LW_ERR_OVERFLOW;
    lw__pool *p = lw__calloc(&a, 1, bytes);
    if (!p) return LW_ERR_NOMEM;
    p->alloc = a;
    p->n_threads = n_threads;
    p->threads = (pthread_t *)(p + 1);
    worker_arg *args = (worker_arg *)(p->threads + n_workers);
    atomic_init(&p->generation, 0);
    atomic_init(&p->bar_count, 0);
    atomic_init(&p->bar_phase, 0);
    atomic_init(&p->bar_sleepers, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    for (size_t i = 0; i < n_workers; i++) {
        args[i].pool = p;
        args[i].ith = (int)i + 1;
        if (pthread_create(&p->threads[i], NULL, worker_main, &args[i]) != 0) {
            p->n_threads = (int)i + 1; /* only join those that started */
            lw__pool_free(p);
            return LW_ERR_NOMEM;
        }
    }
    *out = p;
    return LW_OK;
}

void lw__pool_free(lw__pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv_start);
    pthread_mutex_destroy(&p->mu);
    lw_allocator a = p->alloc;
    lw__free(&a, p);
}

int lw__pool_n_threads(const lw__pool *p) {
    return p ? p->n_threads : 1;
}

void lw__pool_run(lw__pool *p, lw__pool_fn fn, void *arg) {
    if (p->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->ticket[0], 0, memory_order_relaxed); /* published by the generation's release */
    atomic_store_explicit(&p->ticket[1], 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_mutex_unlock(&p->mu);
    /* after the unlock: a woken worker does not block on the mutex again (and a polling one never takes it)
     */
    pthread_cond_broadcast(&p->cv_start);

    fn(arg, 0, p->n_threads);
    lw__pool_barrier(p); /* every worker has left fn: the caller may free what fn used, or run again */
}

/* Sleeps while *word == val (it may return early or spuriously: the caller checks again). */
static void futex_wait(atomic_uint *word, unsigned val) {
#if defined(__EMSCRIPTEN__)
    emscripten_futex_wait((volatile void *)word, val, INFINITY);
#elif defined(__linux__)
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)word, (void)val;
    sched_yield();
#endif
}

/* Wakes every thread sleeping in futex_wait on word. */
static void futex_wake_all(atomic_uint *word) {
#if defined(__EMSCRIPTEN__)
    emscripten_futex_wake((volatile void *)word, INT_MAX);
#elif defined(__linux__)
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* Waits for *word to differ from val without sleeping: `polls` loads, then `yields` sched_yields, then
 * (wasm) loads for `ms` milliseconds. 1 when it changed meanwhile. */
static int spin_while(const atomic_uint *word, unsigned val, int polls, int yields, double ms) {
    for (int i = 0; i < polls; i++)
        if (atomic_load_explicit(word, memory_order_acquire) != val) return 1;
    for (int i = 0; i < yields; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != val) return 1;
        sched_yield();
    }
#if defined(__EMSCRIPTEN__)
    if (ms > 0) {
        const double end = emscripten_get_now() + ms; /* performance.now(): 5 us steps when isolated */
        do {
            for (int i = 0; i < 256; i++)
                if (atomic_load_explicit(word, memory_order_acquire) != val) return 1;
        } while (emscripten_get_now() < end);
    }
#else
    (void)ms;
#endif
    return atomic_load_explicit(word, memory_order_acquire) != val;
}

unsigned lw__pool_ticket_take(lw__pool *p, int which) {
    return atomic_fetch_add_explicit(&p->ticket[which & 1], 1, memory_order_relaxed);
}

void lw__pool_ticket_reset(lw__pool *p, int which) {
    atomic_store_explicit(&p->ticket[which & 1], 0, memory_order_relaxed); /* seen after the next barrier */
}

void lw__pool_barrier(lw__pool *p) {
    if (p->n_threads == 1) return;
    const unsigned phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n_threads - 1) {
        /* last to arrive: reset the count, then release everyone. The phase store and the sleepers load
         * are seq_cst, as the sleeper's increment and phase load below: either the sleeper sees the new
         * phase and does not sleep, or this sees the sleeper and wakes it (the futex itself rechecks the
         * phase, so a wake between its check and its sleep is not lost). */
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->bar_phase, phase + 1, memory_order_seq_cst);
        if (atomic_load_explicit(&p->bar_sleepers, memory_order_seq_cst) > 0) futex_wake_all(&p->bar_phase);
        return;
    }
#if defined(__EMSCRIPTEN__)
    if (spin_while(&p->bar_phase, phase, BAR_SPINS, 0, BAR_SPIN_MS)) return;
#else
    if (spin_while(&p->bar_phase, phase, BAR_SPINS, BAR_YIELDS, 0)) return;
#endif
    for (;;) {
        atomic_fetch_add_explicit(&p->bar_sleepers, 1, memory_order_seq_cst);
        const int waiting = atomic_load_explicit(&p->bar_phase, memory_order_seq_cst) == phase;
        if (waiting) futex_wait(&p->bar_phase, phase);
        atomic_fetch_sub_explicit(&p->bar_sleepers, 1, memory_order_relaxed);
        if (!waiting || atomic_load_explicit(&p->bar_phase, memory_order_acquire) != phase) return;
    }
}
